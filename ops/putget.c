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
 * get: pages through PREFIX/?list, and for each key follows the master's
 * redirect into DIR/<rest of the key>, written to a hidden temporary file
 * in the target's directory, checked against the master's Content-Md5,
 * then renamed into place -- an interrupted get leaves no partial file
 * under a real name, and a rerun skips files already there and intact. */
#include "../master/mkv.h"
#include "ops.h"
#include "../common/httpc.h"
#include "../common/placement.h"
#include "../common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LOGS 20          /* problems logged one by one; the rest counted */
#define TIMEOUT_MS 60000
#define ASK_FIRST (1 << 20)  /* put: HEAD before sending a file this big */

struct pg {
	const struct config *cfg;
	char *master;            /* "http://host:port" */
	char *prefix;            /* the key prefix, no trailing '/' ("" for "/") */
	char *dir;               /* the local directory, no trailing '/' */
	char **names;            /* put: relative paths; get: this page's keys */
	size_t *klens;           /* get: their lengths */
	size_t n;
	atomic_ulong files, bytes, skipped, differ, failed, logged;
	uint64_t t0;
	const char *verb;
};

static void problem(struct pg *g, const char *fmt, const char *name, const char *why)
{
	if (atomic_fetch_add(&g->logged, 1) < MAX_LOGS)
		log_msg(fmt, g->verb, name, why);
	else if (atomic_load(&g->logged) == MAX_LOGS + 1)
		log_msg("%s: more problems: counted, not logged", g->verb);
}

static void progress_line(void *ctx, char *out, size_t n)
{
	struct pg *g = ctx;
	uint64_t ms = now_ms() - g->t0;
	unsigned long files = atomic_load(&g->files), bytes = atomic_load(&g->bytes);
	snprintf(out, n, "%s: %lu files, %.1f MB, %lu skipped, %lu failed, %.0f files/s, %.1f MB/s",
		 g->verb, files, (double)bytes / 1e6, atomic_load(&g->skipped),
		 atomic_load(&g->failed), ms ? (double)files * 1000 / (double)ms : 0.0,
		 ms ? (double)bytes / 1e3 / (double)ms : 0.0);
}

static int summary(struct pg *g)
{
	uint64_t ms = now_ms() - g->t0;
	unsigned long bytes = atomic_load(&g->bytes);
	char dur[32];
	ops_fmt_duration(ms, dur, sizeof(dur));
	log_msg("%s: %lu files, %.1f MB, %lu skipped (already there, same md5), %lu differ, "
		"%lu failed in %s (%.1f MB/s)",
		g->verb, atomic_load(&g->files), (double)bytes / 1e6, atomic_load(&g->skipped),
		atomic_load(&g->differ), atomic_load(&g->failed), dur,
		ms ? (double)bytes / 1e3 / (double)ms : 0.0);
	if (atomic_load(&g->differ))
		log_msg("%s: keys that differ were left as they are (see above); DELETE them "
			"first to replace them", g->verb);
	return atomic_load(&g->failed) || atomic_load(&g->differ) ? 1 : 0;
}

static char *trim_slashes(const char *s)
{
	size_t n = strlen(s);
	while (n > 1 && s[n - 1] == '/')
		n--;
	return xstrndup(s, n);
}

/* md5 of a file by path, into out; false on error (errno kept). */
static bool file_md5(const char *path, char out[33])
{
	unsigned char d[16], buf[64 * 1024];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	EVP_MD_CTX *md;
	ssize_t r;
	if (fd < 0)
		return false;
	md = EVP_MD_CTX_new();
	if (!md || !EVP_DigestInit_ex(md, EVP_md5(), NULL))
		die("md5 init failed");
	while ((r = read(fd, buf, sizeof(buf))) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		EVP_DigestUpdate(md, buf, (size_t)r);
	}
	close(fd);
	EVP_DigestFinal_ex(md, d, NULL);
	EVP_MD_CTX_free(md);
	digest_hex(d, out);
	return r == 0;
}

/* ---- put ---- */

static struct pg *walk_pg;   /* nftw has no context argument */
static size_t walk_cap;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	struct pg *g = walk_pg;
	(void)st, (void)f;
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	if (g->n == walk_cap) {
		walk_cap = walk_cap ? 2 * walk_cap : 1024;
		g->names = xrealloc(g->names, walk_cap * sizeof(*g->names));
	}
	g->names[g->n++] = xstrdup(path + strlen(g->dir) + 1);
	return 0;
}

static void put_one(void *ctx, size_t i)
{
	struct pg *g = ctx;
	const char *rel = g->names[i];
	char *key = xasprintf("%s/%s", g->prefix, rel), *path = xasprintf("%s/%s", g->dir, rel);
	char *enc = url_escape(key, strlen(key), true), *url = xasprintf("%s%s", g->master, enc);
	char md5[33], err[256] = "", why[320];
	struct ops_head_info h;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), status = -1;

	if (fd < 0 || fstat(fd, &st) < 0) {
		problem(g, "%s: %s: %s", path, strerror(errno));
		atomic_fetch_add(&g->failed, 1);
		goto out;
	}
	if (st.st_size == 0) {
		problem(g, "%s: %s: %s", path, "empty file: the store keeps no empty values");
		atomic_fetch_add(&g->failed, 1);
		goto out;
	}
	/* A big file is sent only when the key is absent: asking first costs a
	 * round trip, sending it in vain costs the whole file (the master
	 * answers 403 only after the body). */
	if (st.st_size >= ASK_FIRST) {
		status = ops_head_info(url, TIMEOUT_MS, &h, err);
		if (status == 302)
			goto exists;
	}
	/* 409: another write of the key is running (a parallel put?), it ends
	 * soon; 503 or no answer: a volume or the master is busy, try again */
	for (int tries = 0, soft = 0; tries < 20; tries++) {
		if (tries) {
			usleep(soft ? 250000u << soft : 100000u);
			if (lseek(fd, 0, SEEK_SET) < 0)
				break;
		}
		status = ops_stream_put(url, fd, (uint64_t)st.st_size, md5, err);
		if (status == 409)
			continue;
		if ((status == 503 || status < 0) && soft++ < 3)
			continue;
		break;
	}
	if (status == 201) {
		atomic_fetch_add(&g->files, 1);
		atomic_fetch_add(&g->bytes, (unsigned long)st.st_size);
		goto out;
	}
	if (status != 403) {
		if (status > 0)
			snprintf(err, sizeof(err), "the master answered %d", status);
		snprintf(why, sizeof(why), "PUT %s failed: %s", key, err);
		problem(g, "%s: %s: %s", path, why);
		atomic_fetch_add(&g->failed, 1);
		goto out;
	}
exists:
	/* The key exists: the same bytes, or not? */
	for (int tries = 0; tries < 4; tries++) {
		if (tries)
			usleep(250000u << tries);
		status = ops_head_info(url, TIMEOUT_MS, &h, err);
		if (status != 503 && status >= 0)
			break;
	}
	if (status != 302 || !file_md5(path, md5)) {
		if (status > 0)
			snprintf(err, sizeof(err), "HEAD answered %d", status);
		problem(g, "%s: %s: exists, and its md5 cannot be compared (%s)", path, err);
		atomic_fetch_add(&g->failed, 1);
	} else if (!h.md5[0]) {
		problem(g, "%s: %s: %s", path, "the key exists and has no md5 to compare with");
		atomic_fetch_add(&g->differ, 1);
	} else if (strcmp(h.md5, md5)) {
		snprintf(why, sizeof(why), "key %s exists with other bytes (md5 %s, file %s)", key,
			 h.md5, md5);
		problem(g, "%s: %s: %s", path, why);
		atomic_fetch_add(&g->differ, 1);
	} else {
		atomic_fetch_add(&g->skipped, 1);
	}
out:
	if (fd >= 0)
		close(fd);
	free(url);
	free(enc);
	free(path);
	free(key);
}

int put_main(const struct config *cfg)
{
	struct pg g = {.cfg = cfg, .verb = "put", .t0 = now_ms()};
	struct ops_progress *p;
	struct stat st;
	int rc;

	httpc_global_init();
	g.dir = trim_slashes(cfg->args[0]);
	if (cfg->args[1][0] != '/') {
		log_msg("put: the prefix must start with / (keys do): %s", cfg->args[1]);
		free(g.dir);
		return 1;
	}
	g.prefix = trim_slashes(cfg->args[1]);
	if (!strcmp(g.prefix, "/"))
		g.prefix[0] = '\0';
	if (stat(g.dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_msg("put: %s is not a directory", g.dir);
		free(g.dir);
		free(g.prefix);
		return 1;
	}
	g.master = ops_master_url(cfg->master);
	walk_pg = &g;
	if (nftw(g.dir, walk_one, 64, FTW_PHYS) < 0)
		log_msg("put: walking %s failed (%s): not every file was seen", g.dir,
			strerror(errno));
	p = ops_progress_start(progress_line, &g);
	ops_pool_run(cfg->workers, g.n, put_one, &g);
	ops_progress_stop(p);
	rc = summary(&g);
	for (size_t i = 0; i < g.n; i++)
		free(g.names[i]);
	free(g.names);
	free(g.master);
	free(g.prefix);
	free(g.dir);
	return rc;
}

/* ---- get ---- */

/* Is rel a relative path that stays inside DIR (no "", ".", ".." segment)? */
static bool safe_rel(const char *rel)
{
	const char *s = rel;
	if (!*s)
		return false;
	for (;;) {
		size_t n = strcspn(s, "/");
		if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return false;
		if (!s[n])
			return true;
		s += n + 1;
	}
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

static void get_one(void *ctx, size_t i)
{
	struct pg *g = ctx;
	const char *key = g->names[i], *rel = key + strlen(g->prefix) + 1;
	char *enc = url_escape(key, strlen(key), true), *url = xasprintf("%s%s", g->master, enc);
	char *path = NULL, *tmp = NULL, md5[33], hdr[33], err[256] = "", why[320];
	struct ops_head_info h;
	uint64_t size;
	int fd = -1, status;

	if (strlen(key) != g->klens[i] || !safe_rel(rel)) {
		problem(g, "%s: %s: %s", key, "not a safe file name below the directory, skipped");
		atomic_fetch_add(&g->failed, 1);
		goto out;
	}
	path = xasprintf("%s/%s", g->dir, rel);
	if (access(path, F_OK) == 0) {
		status = ops_head_info(url, TIMEOUT_MS, &h, err);
		if (status == 302 && h.md5[0] && file_md5(path, md5) && !strcmp(md5, h.md5)) {
			atomic_fetch_add(&g->skipped, 1);
			goto out;
		}
	}
	{
		const char *slash = strrchr(path, '/');
		tmp = xasprintf("%.*s/.%s.mkv-get", (int)(slash - path), path, slash + 1);
	}
	if (make_parents(path) < 0 ||
	    (fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
		problem(g, "%s: %s: %s", path, strerror(errno));
		atomic_fetch_add(&g->failed, 1);
		goto out;
	}
	for (int tries = 0; tries < 4; tries++) {
		if (tries) {   /* a busy volume or master: again, from the start */
			usleep(250000u << tries);
			if (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0)
				break;
		}
		status = ops_stream_get(url, true, fd, false, md5, &size, hdr, err);
		if (status != 503 && status >= 0 && status < 500)
			break;
	}
	if (status == 404) {      /* deleted since the listing */
		unlink(tmp);
		goto out;
	}
	if (status != 200) {
		snprintf(why, sizeof(why), "GET %s failed: %s", key, err);
		problem(g, "%s: %s: %s", path, why);
		atomic_fetch_add(&g->failed, 1);
		unlink(tmp);
		goto out;
	}
	if (hdr[0] && strcmp(hdr, md5)) {
		snprintf(why, sizeof(why), "md5 %s, the master says %s: not saved (run verify)", md5,
			 hdr);
		problem(g, "%s: %s: %s", path, why);
		atomic_fetch_add(&g->failed, 1);
		unlink(tmp);
		goto out;
	}
	if (fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
		fd = -1;
		problem(g, "%s: %s: %s", path, strerror(errno));
		atomic_fetch_add(&g->failed, 1);
		unlink(tmp);
		goto out;
	}
	fd = -1;
	atomic_fetch_add(&g->files, 1);
	atomic_fetch_add(&g->bytes, (unsigned long)size);
out:
	if (fd >= 0)
		close(fd);
	free(tmp);
	free(path);
	free(url);
	free(enc);
}

int get_main(const struct config *cfg)
{
	struct pg g = {.cfg = cfg, .verb = "get", .t0 = now_ms()};
	struct ops_progress *p;
	char *lp;
	int rc = 0;

	httpc_global_init();
	if (cfg->args[0][0] != '/') {
		log_msg("get: the prefix must start with / (keys do): %s", cfg->args[0]);
		return 1;
	}
	g.prefix = trim_slashes(cfg->args[0]);
	if (!strcmp(g.prefix, "/"))
		g.prefix[0] = '\0';
	g.dir = trim_slashes(cfg->args[1]);
	if (mkdir(g.dir, 0755) < 0 && errno != EEXIST) {
		log_msg("get: mkdir %s failed (%s)", g.dir, strerror(errno));
		free(g.prefix);
		free(g.dir);
		return 1;
	}
	g.master = ops_master_url(cfg->master);
	lp = xasprintf("%s/", g.prefix);
	p = ops_progress_start(progress_line, &g);
	rc = ops_list_each(g.master, lp, false, "get", cfg->workers, &g.names, &g.klens, get_one, &g);
	ops_progress_stop(p);
	rc = summary(&g) || rc ? 1 : 0;
	free(lp);
	free(g.master);
	free(g.prefix);
	free(g.dir);
	return rc;
}
