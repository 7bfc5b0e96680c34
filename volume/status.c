/* status.c -- see status.h. */
#include "status.h"
#include "fs.h"
#include "../common/metrics.h"
#include "../common/page.h"
#include "../common/reqstats.h"
#include "../common/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int root;
static const char *root_path;
static int vport;
static uint64_t started_ms;

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

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The subvolume directories (sv00.., as the master names them), or the
 * data directory itself ("."), each with its disk: fn(name, total, free). */
static void each_dir(void (*fn)(void *, const char *, uint64_t, uint64_t), void *cls)
{
	int fd = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	struct statvfs sv;
	char names[256][8];
	while (d && (e = readdir(d)) && n < 256)
		if (strlen(e->d_name) == 4 && !strncmp(e->d_name, "sv", 2) &&
		    hex_value(e->d_name[2]) >= 0 && hex_value(e->d_name[3]) >= 0)
			memcpy(names[n++], e->d_name, 5);
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	qsort(names, (size_t)n, sizeof(names[0]), name_cmp);
	if (!n)
		memcpy(names[n++], ".", 2);
	for (int i = 0; i < n; i++) {
		int sfd = openat(root, names[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sfd < 0)
			continue;
		if (!fstatvfs(sfd, &sv))
			fn(cls, names[i], (uint64_t)sv.f_blocks * sv.f_frsize,
			   (uint64_t)sv.f_bavail * sv.f_frsize);
		close(sfd);
	}
}

/* ---- /metrics ---- */

struct two {
	struct buf *b;
	bool total;
};

static void disk_sample(void *cls, const char *name, uint64_t total, uint64_t avail)
{
	struct two *t = cls;
	struct buf l = {0};
	metrics_label(&l, "dir", name);
	metrics_sample_u64(t->b, t->total ? "mkv_volume_disk_bytes" : "mkv_volume_disk_free_bytes",
			   l.data, t->total ? total : avail);
	buf_free(&l);
}

static void collect(struct buf *b)
{
	struct vol_fs_stats s;
	struct metrics_hist h = {metrics_le, METRICS_NLE, s.fsync_hist, 0};
	vol_fs_stats(&s);
	h.sum = (double)s.fsync_ns / 1e9;
	metrics_family(b, "mkv_volume_fsync_duration_seconds", "histogram",
		       "fsync calls that make PUTs and DELETEs durable (files and directories).");
	metrics_histogram(b, "mkv_volume_fsync_duration_seconds", NULL, &h);
	metrics_family(b, "mkv_volume_disk_bytes", "gauge",
		       "Size of the filesystem under each subvolume directory (dir \".\": the "
		       "data directory, when it has none).");
	each_dir(disk_sample, &(struct two){b, true});
	metrics_family(b, "mkv_volume_disk_free_bytes", "gauge",
		       "Bytes free to mkv-volume on the filesystem under each subvolume directory.");
	each_dir(disk_sample, &(struct two){b, false});
	metrics_family(b, "mkv_volume_tmp_files", "gauge",
		       "PUTs' temporary files open now (uploads in flight).");
	metrics_sample(b, "mkv_volume_tmp_files", NULL, (double)s.tmp_files);
}

/* ---- /status and / ---- */

static struct page_rate req_rate, err_rate;
static struct page_p99 p99;

static void json_str(struct buf *b, const char *s)
{
	buf_puts(b, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_printf(b, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			buf_printf(b, "\\u%04x", *s);
		else
			buf_append(b, s, 1);
	}
	buf_puts(b, "\"");
}

static void dir_json(void *cls, const char *name, uint64_t total, uint64_t avail)
{
	struct buf *b = cls;
	if (b->data[b->len - 1] == '}')
		buf_puts(b, ",");
	buf_puts(b, "{\"name\":");
	json_str(b, name);
	buf_printf(b, ",\"up\":true,\"disk_total\":%llu,\"disk_used\":%llu}",
		   (unsigned long long)total, (unsigned long long)(total - avail));
}

static void status_json(struct buf *b)
{
	struct reqstats_sum sum;
	struct vol_fs_stats fs;
	char name[4200];
	reqstats_sum(&sum);
	vol_fs_stats(&fs);
	snprintf(name, sizeof(name), "%s (port %d)", root_path, vport);
	buf_puts(b, "{\"role\":\"volume\",\"name\":");
	json_str(b, name);
	buf_printf(b, ",\"uptime_s\":%llu,\"requests\":%llu,\"requests_per_s\":%.2f,"
		      "\"errors_per_s\":%.2f,\"p99_ms\":%.3f,\"in_flight\":%d,\"tmp_files\":%ld,"
		      "\"volumes\":[",
		   (unsigned long long)((now_ms() - started_ms) / 1000),
		   (unsigned long long)sum.requests, page_rate(&req_rate, sum.requests),
		   page_rate(&err_rate, sum.errors), page_p99(&p99, sum.hist), sum.in_flight, fs.tmp_files);
	each_dir(dir_json, b);
	buf_puts(b, "]}\n");
}

const struct front_page vol_status_pages[] = {
	{"/status", PAGE_JSON_CTYPE, status_json},
	{"/", PAGE_CTYPE, page_html},
	{NULL, NULL, NULL},
};

void vol_status_start(int root_fd, const char *dir, int port)
{
	root = root_fd;
	root_path = dir;
	vport = port;
	started_ms = now_ms();
	metrics_register(collect);
}
