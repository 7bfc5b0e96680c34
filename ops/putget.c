/* putget.c -- `mkv put DIR /prefix` and `mkv get /prefix DIR`: a tree
 * of files in and out of the store through a running master, in parallel.
 *
 * put: every regular file under DIR becomes key PREFIX/<relative path>.
 * Each file is PUT straight away (one request for a new key; a file of
 * 1 MiB or more is HEADed first); a 403 says the key exists, and then its
 * Content-Md5 decides: the same md5 is a
 * skip, another is reported and left alone (put never overwrites).  So a
 * rerun after an interruption sends only what is missing.
 *
 * get: pages through PREFIX/?list&locations&md5s, and reads each key
 * straight from one of the replica URLs listed (no redirect per file;
 * the next replica when one fails, then the master's redirect as the
 * last resort: a key deleted since the listing is told there) into
 * DIR/<rest of the key> (directories made as needed), written to a file
 * with no name in the target's directory (O_TMPFILE: no key's file can be
 * it), checked against the listed md5 (or the redirect's Content-Md5),
 * then linked into place -- an interrupted get leaves no partial file
 * under a real name, and a rerun skips files already there whose md5 is
 * the listed one.  The files are made durable together at the end (one
 * syncfs, a rerun that skipped them all too), not one fsync each: a crash
 * before it may leave a linked file whose bytes never reached the disk,
 * and the rerun's md5 check fetches it again. */
#include "../master/mkv.h"
#include "ops.h"
#include "../common/placement.h"
#include "../common/util.h"
#include "../common/volsign.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TIMEOUT_MS 60000
#define ASK_FIRST (1 << 20)  /* put: HEAD before sending a file this big */
#define MAX_REPLICAS 64      /* get: the most replica URLs of a key tried */

struct pg {
	const struct config *cfg;
	char *prefix;            /* the key prefix, no trailing '/' ("" for "/") */
	char *dir;               /* the local directory, no trailing '/' */
	char **names;            /* put: relative paths */
	size_t n;
	struct ops_keys page;    /* get: the page being read */
	atomic_ulong files, bytes, skipped, differ, failed;
	unsigned long not_regular;   /* put: symlinks and special files, not sent */
	unsigned long logged;
	uint64_t t0;
	const char *verb;
};

/* A file that failed, or differs from its key: "<verb>: <name>: <why>",
 * counted. */
#define tell(g, count, ...) \
	(ops_note(&(g)->logged, (g)->verb, __VA_ARGS__), atomic_fetch_add(count, 1))
#define fail(g, ...) tell(g, &(g)->failed, __VA_ARGS__)
#define differs(g, ...) tell(g, &(g)->differ, __VA_ARGS__)

static void progress_line(void *ctx, char *out, size_t n)
{
	struct pg *g = ctx;
	uint64_t ms = now_ms() - g->t0;
	unsigned long files = g->files, bytes = g->bytes;
	snprintf(out, n, "%s: %lu files, %.1f MB, %lu skipped, %lu failed, %.0f files/s, %.1f MB/s",
		 g->verb, files, (double)bytes / 1e6, g->skipped, g->failed, ops_per_s(files, ms),
		 ops_per_s(bytes, ms) / 1e6);
}

/* Run fn on every name (put) or every key under the prefix (get: listing;
 * no key at all is a failure), with the progress line up; then the
 * summary.  Returns the exit status. */
static int run(struct pg *g, void (*fn)(void *ctx, size_t i), bool listing)
{
	char *lp = xasprintf("%s/", g->prefix), dur[32];
	int rc = 0;
	uint64_t ms;
	unsigned long bytes;
	ops_progress_start(progress_line, g);
	if (!listing) {
		ops_pool_run(g->cfg->workers, g->n, fn, g);
	} else if (!(rc = ops_list_each(g->cfg->master, lp, OPS_LIST_LOCATIONS, "get",
					g->cfg->workers, &g->page, fn, g)) &&
		   !(g->files + g->skipped + g->differ + g->failed) && (rc = -1)) {
		log_msg("get: no keys under %s", lp);
	}
	ops_progress_stop();
	free(lp);
	ms = ops_elapsed(g->t0, dur);
	bytes = g->bytes;
	log_msg("%s: %lu files, %.1f MB, %lu skipped (already there, same md5), %lu differ, "
		"%lu failed in %s (%.1f MB/s)",
		g->verb, g->files, (double)bytes / 1e6, g->skipped, g->differ, g->failed, dur,
		ops_per_s(bytes, ms) / 1e6);
	if (g->differ)
		log_msg("%s: keys that differ were left as they are (see above); DELETE them "
			"first to replace them", g->verb);
	return rc || g->failed || g->differ ? 1 : 0;
}

/* The prefix (no trailing '/', "" for "/") and the directory (no
 * trailing '/') from the command line; -1 when the prefix is no key's. */
static int pg_init(struct pg *g, const char *prefix, const char *dir)
{
	size_t n = strlen(dir);
	if (prefix[0] != '/') {
		log_msg("%s: the prefix must start with / (keys do): %s", g->verb, prefix);
		return -1;
	}
	while (n > 1 && dir[n - 1] == '/')
		n--;
	g->dir = xstrndup(dir, n);
	for (n = strlen(prefix); n > 0 && prefix[n - 1] == '/';)
		n--;
	g->prefix = xstrndup(prefix, n);
	return 0;
}

/* md5 of a file by path, into out; false when it cannot be read. */
static bool file_md5(const char *path, char out[33])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && md5_fd(fd, out);
	if (fd >= 0)
		close(fd);
	return ok;
}

/* ---- put ---- */

static struct pg *walk_pg;   /* nftw has no context argument */
static size_t walk_cap;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	struct pg *g = walk_pg;
	(void)f;
	if (type == FTW_DNR || type == FTW_NS) {
		/* its files (or it) cannot be seen: the tree does not go up whole */
		fail(g, "%s: %s, not sent", path,
		     type == FTW_DNR ? "cannot read this directory" : "cannot stat it");
		return 0;
	}
	if (type != FTW_F || !S_ISREG(st->st_mode)) {
		g->not_regular += type != FTW_D;
		return 0;
	}
	if (g->n == walk_cap) {
		walk_cap = walk_cap ? 2 * walk_cap : 1024;
		g->names = xrealloc(g->names, walk_cap * sizeof(*g->names));
	}
	g->names[g->n++] = xstrdup(path + strlen(g->dir) + 1);
	return 0;
}

/* PUT the file, again after a 409 (another write of the key is running, a
 * parallel put?) or a 503 or no answer (a volume or the master is busy).
 * Returns the last status. */
static int send_file(const char *url, int fd, uint64_t size, char *err)
{
	char md5[33];
	int status, locked = 0, busy = 0;
	do
		status = ops_stream_put(url, fd, size, md5, err);
	while ((status == 409 ? retry_wait(RETRY_LOCKED, ++locked)
			      : (status == 503 || status < 0) && retry_wait(RETRY_BUSY, ++busy)) &&
	       lseek(fd, 0, SEEK_SET) == 0);
	return status;
}

/* The key exists: the same bytes as the file (a skip), or not? */
static void compare(struct pg *g, const char *key, const char *path)
{
	struct ops_head_info h;
	char md5[33], err[OPS_ERR] = "";
	int status = ops_master_head(g->cfg->master, key, strlen(key), 4, &h, NULL, err);
	if (status != 302 || !file_md5(path, md5)) {
		fail(g, "%s: exists, and its md5 cannot be compared (%s)", path, err);
	} else if (!h.md5[0]) {
		differs(g, "%s: the key exists and has no md5 to compare with", path);
	} else if (strcmp(h.md5, md5)) {
		differs(g, "%s: key %s exists with other bytes (md5 %s, file %s)", path, key, h.md5,
			md5);
	} else {
		g->skipped++;
	}
}

static void put_one(void *ctx, size_t i)
{
	struct pg *g = ctx;
	char *key = xasprintf("%s/%s", g->prefix, g->names[i]);
	char *path = xasprintf("%s/%s", g->dir, g->names[i]);
	char *url = ops_url(g->cfg->master, key, strlen(key), ""), err[OPS_ERR] = "";
	struct ops_head_info h;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), status = -1;

	if (fd < 0 || fstat(fd, &st) < 0) {
		fail(g, "%s: %s", path, strerror(errno));
	} else if (st.st_size == 0) {
		fail(g, "%s: empty file: the store keeps no empty values", path);
	} else if (st.st_size >= ASK_FIRST && ops_ask(NULL, url, TIMEOUT_MS, &h, err) == 302) {
		/* A big file is sent only when the key is absent: asking first costs a
		 * round trip, sending it in vain costs the whole file (the master
		 * answers 403 only after the body). */
		compare(g, key, path);
	} else if ((status = send_file(url, fd, (uint64_t)st.st_size, err)) == 201) {
		g->files++;
		g->bytes += (unsigned long)st.st_size;
	} else if (status == 403 && !strstr(err, " may not ")) {   /* not -keys' refusal */
		compare(g, key, path);
	} else {
		fail(g, "%s: PUT %s failed: %s", path, key, err);
	}
	if (fd >= 0)
		close(fd);
	free(url);
	free(path);
	free(key);
}

int put_main(const struct config *cfg)
{
	struct pg g = {.cfg = cfg, .verb = "put", .t0 = now_ms()};
	struct stat st;
	int rc = 1;

	if (pg_init(&g, cfg->args[1], cfg->args[0]) < 0)
		return 1;
	if (stat(g.dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_msg("put: %s is not a directory", g.dir);
	} else {
		walk_pg = &g;
		if (nftw(g.dir, walk_one, 64, FTW_PHYS) < 0)
			fail(&g, "walking %s failed (%s): not every file was seen", g.dir,
			     strerror(errno));
		if (g.not_regular)
			log_msg("put: %lu symlinks or special files not sent (put sends regular "
				"files only, and follows no symlink)", g.not_regular);
		rc = run(&g, put_one, false);
	}
	for (size_t i = 0; i < g.n; i++)
		free(g.names[i]);
	free(g.names);
	free(g.prefix);
	free(g.dir);
	return rc;
}

/* ---- get ---- */

/* Is rel a relative path that stays inside DIR (no "", ".", ".." segment)? */
static bool safe_rel(const char *rel)
{
	char *s = xasprintf("/%s/", rel);   /* each segment between slashes */
	bool ok = !strstr(s, "//") && !strstr(s, "/./") && !strstr(s, "/../");
	free(s);
	return ok;
}

/* mkdir -p of path's parent directories. */
static int make_parents(char *path)
{
	for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			*s = '/';
			return -1;
		}
		*s = '/';
	}
	return 0;
}

/* An unnamed file in path's directory (created when missing), or -1. */
static int tmpfile_for(char *path)
{
	char *slash = strrchr(path, '/');
	int fd = -1;
	for (int t = 0; t < 2 && fd < 0; t++) {
		/* the directory is there but for a file's first key in it */
		if (t && (errno != ENOENT || make_parents(path) < 0))
			break;
		*slash = '\0';
		fd = open(path, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
		*slash = '/';
	}
	return fd;
}

/* The unnamed file fd, named path (a file there, damaged or stale, goes
 * first: between the two, path is missing, never partial).  0 or -1. */
static int link_as(int fd, const char *path)
{
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	unlink(path);
	return linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}

/* GET url into an unnamed file (following the master's redirect when
 * follow, again from the start after a busy answer), checked against
 * want (or the redirect's Content-Md5); then link it as path.  Returns
 * the bytes, or -1: when quiet (a replica URL: the caller tries
 * another) nothing is told, else the failure is (deleted since the
 * listing, or a failure) and counted. */
static int64_t fetch_file(struct pg *g, const char *key, const char *url, bool follow,
			  const char *want, char *path, bool quiet)
{
	char md5[33], hdr[33], err[OPS_ERR] = "";
	uint64_t size;
	int fd = tmpfile_for(path), status = -1;
	if (fd < 0) {
		fail(g, "%s: %s%s", path, strerror(errno), errno == EOPNOTSUPP ?
		     " (get writes files with O_TMPFILE: a local filesystem has it)" : "");
		return -1;
	}
	for (int t = 0; retry_wait(RETRY_BUSY, t); t++) {
		if (t && (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0))
			break;
		status = ops_stream_get(url, follow, fd, false, md5, &size, hdr, err);
		if (!follow || (status != 503 && status >= 0 && status < 500))
			break;
	}
	if (want[0])
		memcpy(hdr, want, 33);
	if (quiet && (status != 200 || (hdr[0] && strcmp(hdr, md5)))) {
		status = -1;
	} else if (status == 404) {
		/* deleted since the listing, or a name ?list cannot spell */
		if (ops_unreachable("get", key, strlen(key)))
			atomic_fetch_add(&g->failed, 1);
	} else if (status != 200) {
		fail(g, "%s: GET %s failed: %s", path, key, err);
	} else if (hdr[0] && strcmp(hdr, md5)) {
		fail(g, "%s: md5 %s, the master says %s: not saved (run verify)", path, md5, hdr);
	} else if (link_as(fd, path) < 0) {
		fail(g, "%s: %s", path, strerror(errno));
	} else {
		close(fd);
		return (int64_t)size;
	}
	close(fd);
	return -1;
}

/* Is url key's blob (does it end in key2path of key)?  Not when ?list
 * spelled the key with U+FFFD for bytes that are not UTF-8. */
static bool listed_as(const char *url, const char *key)
{
	char path[PATH_MAX_LEN];
	size_t n = strcspn(url, "?"), pl;
	placement_path(key, strlen(key), path);
	pl = strlen(path);
	return n >= pl && !memcmp(url + n - pl, path, pl);
}

/* Is url on a volume of -volumes (its host:port one of them)? */
static bool of_volumes(const struct config *cfg, const char *url)
{
	const char *h = strstr(url, "://");
	size_t n;
	h = h ? h + 3 : url;
	n = strcspn(h, "/");
	for (int i = 0; i < cfg->nvol; i++)   /* host:port, the scheme taken off */
		if (strlen(cfg->volumes[i]) == n && !memcmp(cfg->volumes[i], h, n))
			return true;
	return false;
}

/* Key i of the page: from its listed replicas (from the i-th on, so that
 * the reads are spread), else through the master's redirect. */
static int64_t get_key(struct pg *g, size_t i, char *path)
{
	const char *key = g->page.keys[i], *want = g->page.md5s[i];
	char *urls = xstrdup(g->page.locs[i]), *u[MAX_REPLICAS], *save = NULL, *t, *master;
	int n = 0;
	int64_t size = -1;
	for (char *s = urls; n < MAX_REPLICAS && (t = strtok_r(s, "\n", &save)); s = NULL) {
		if (!listed_as(t, key)) {
			/* its name is not UTF-8: ?list spelled it with U+FFFD, so no
			 * file name here is its own (as through the master); or the
			 * listing names another key's blob, which is not signed for */
			if (ops_unreachable("get", key, strlen(key)))
				atomic_fetch_add(&g->failed, 1);
			else
				fail(g, "%s: the listing's URL %s is not this key's blob", key, t);
			free(urls);
			return -1;
		}
		/* given -volumesecret, httpc signs for itself: only for a volume
		 * of -volumes, never a host the (plain HTTP) listing made up */
		if (volsign_on()) {
			t[strcspn(t, "?")] = '\0';
			if (!of_volumes(g->cfg, t))
				continue;
		}
		u[n++] = t;
	}
	for (int k = 0; k < n && size < 0; k++)
		size = fetch_file(g, key, u[(i + (size_t)k) % (size_t)n], false, want, path, true);
	if (size < 0) {
		master = ops_url(g->cfg->master, key, strlen(key), "");
		size = fetch_file(g, key, master, true, "", path, false);
		free(master);
	}
	free(urls);
	return size;
}

static void get_one(void *ctx, size_t i)
{
	struct pg *g = ctx;
	const char *key = g->page.keys[i], *rel = key + strlen(g->prefix) + 1;
	char *path = xasprintf("%s/%s", g->dir, rel), md5[33];
	int64_t size;

	if (strlen(key) != g->page.klens[i] || !safe_rel(rel)) {
		fail(g, "%s: not a safe file name below the directory, skipped", key);
	} else if (g->page.md5s[i][0] && access(path, F_OK) == 0 && file_md5(path, md5) &&
		   !strcmp(md5, g->page.md5s[i])) {
		g->skipped++;
	} else if ((size = get_key(g, i, path)) >= 0) {
		g->files++;
		g->bytes += (unsigned long)size;
	}
	free(path);
}

/* The files written under dir to disk: 0, or -1 (logged). */
static int get_sync(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = fd >= 0 ? syncfs(fd) : -1;
	if (rc < 0)
		log_msg("get: syncfs %s failed (%s): the files may not be on disk yet", dir,
			strerror(errno));
	if (fd >= 0)
		close(fd);
	return rc;
}

int get_main(const struct config *cfg)
{
	struct pg g = {.cfg = cfg, .verb = "get", .t0 = now_ms()};
	int rc;

	if (pg_init(&g, cfg->args[0], cfg->args[1]) < 0)
		return 1;
	if (volsign_on() && !cfg->nvol)
		log_msg("get: -volumesecret without -volumes: no listed host is signed for, "
			"every key is read through the master's redirect");
	/* synced even when every file was skipped: a killed run's files */
	rc = run(&g, get_one, true);
	if (g.files || g.skipped)
		rc |= get_sync(g.dir) < 0;
	free(g.prefix);
	free(g.dir);
	return rc;
}
