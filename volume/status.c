/* status.c -- see status.h. */
#include "status.h"
#include "fs.h"
#include "../common/metrics.h"
#include "../common/page.h"
#include "../common/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int root;

bool vol_marker_disk(const char *path, int fd, char *out, size_t n)
{
	const char *slash = strrchr(path, '/');
	struct statvfs sv;
	if (strcmp(slash ? slash + 1 : path, ".mkv") || fstatvfs(fd, &sv))
		return false;
	snprintf(out, n, "%llu %llu", (unsigned long long)sv.f_blocks * sv.f_frsize,
		 (unsigned long long)sv.f_bavail * sv.f_frsize);
	return true;
}

static int is_subvolume(const struct dirent *e)
{
	return strlen(e->d_name) == 4 && !strncmp(e->d_name, "sv", 2) &&
	       hex_value(e->d_name[2]) >= 0 && hex_value(e->d_name[3]) >= 0;
}

/* The disks' rows: the subvolume directories (sv00.., as the master names
 * them), or the data directory itself ("."). */
struct rows {
	struct page_row r[256];
	char names[256][8];
	int n;
};

/* The rows now, and the file system's counters; the caller frees them. */
static struct rows *each_dir(struct vol_fs_stats *fs)
{
	struct rows *rs = xcalloc(1, sizeof(*rs));
	struct dirent **sv = NULL;
	int n = scandirat(root, ".", &sv, is_subvolume, alphasort);   /* byte order: no locale */
	char (*names)[8] = rs->names;
	struct statvfs st;
	for (int i = 0; i < n; i++) {
		if (i < 256)
			memcpy(names[i], sv[i]->d_name, 5);
		free(sv[i]);
	}
	free(sv);
	n = n < 0 ? 0 : n < 256 ? n : 256;
	if (!n)
		memcpy(names[n++], ".", 2);
	for (int i = 0; i < n; i++) {
		int sfd = openat(root, names[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sfd < 0)
			continue;
		if (!fstatvfs(sfd, &st))
			rs->r[rs->n++] = (struct page_row){
				.name = names[i], .disk_total = (uint64_t)st.f_blocks * st.f_frsize,
				.disk_used = (uint64_t)(st.f_blocks - st.f_bavail) * st.f_frsize,
				.check_ms = -1};
		close(sfd);
	}
	vol_fs_stats(fs);
	return rs;
}

/* ---- /metrics ---- */

static void collect(struct buf *b)
{
	static const char *const fam[2][2] = {
		{"mkv_volume_disk_bytes", "Size of the filesystem under each subvolume directory "
					  "(dir \".\": the data directory, when it has none)."},
		{"mkv_volume_disk_free_bytes", "Bytes free to mkv-volume on the filesystem under "
					       "each subvolume directory."},
	};
	struct vol_fs_stats s;
	struct rows *rs = each_dir(&s);
	struct buf l = {0};
	metrics_family(b, "mkv_volume_fsync_duration_seconds", "histogram",
		       "fsync calls that make PUTs and DELETEs durable (files and directories).");
	metrics_histogram(b, "mkv_volume_fsync_duration_seconds", NULL, s.fsync_hist,
			  (double)s.fsync_ns / 1e9);
	for (int k = 0; k < 2; k++) {
		metrics_family(b, fam[k][0], "gauge", fam[k][1]);
		for (int i = 0; i < rs->n; i++, l.len = 0) {
			metrics_label(&l, "dir", rs->r[i].name);
			metrics_sample_u64(b, fam[k][0], l.data,
					   rs->r[i].disk_total - (k ? rs->r[i].disk_used : 0));
		}
	}
	metrics_family(b, "mkv_volume_tmp_files", "gauge",
		       "PUTs' temporary files open now (uploads in flight).");
	metrics_sample(b, "mkv_volume_tmp_files", NULL, (double)s.tmp_files);
	buf_free(&l);
	free(rs);
}

/* ---- /status and / ---- */

static char name[4400];

static void render(struct buf *b, bool html)
{
	struct vol_fs_stats fs;
	struct rows *rs = each_dir(&fs);
	struct page_fact tmp = {"tmp_files", "temporary files",
				fs.tmp_files > 0 ? (uint64_t)fs.tmp_files : 0, NULL, NULL};
	page_write(b, html, &(struct page_view){.role = "volume", .name = name,
						.rows_are = "directory", .facts = &tmp, .nfacts = 1,
						.rows = rs->r, .nrows = rs->n});
	free(rs);
}

void vol_status_start(int root_fd, const char *dir, int port, bool pages)
{
	char host[300];
	root = root_fd;
	page_name(host, sizeof(host), port);
	snprintf(name, sizeof(name), "%s %s", host, dir);
	metrics_register(collect);
	if (pages)
		page_start(render, NULL);
}
