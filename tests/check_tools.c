/* check_tools.c -- RELINK, `mkv verify`, `mkv gc`, `mkv put` and `mkv get`
 * against real clusters: three volumes, all mkv-volume or all stock nginx
 * (the loop tests run once on each), and a master with -replicas 2.
 *
 *   - mkv-volume's HEAD ?md5 hashes the bytes on disk now (not the md5
 *     xattr), nginx answers it as a plain HEAD; ?recursive&tmp shows the
 *     hidden .mkv-tmp. files that other listings hide;
 *   - RELINK: live -> 204, unlinked -> 204 and served again (from the
 *     replicas still there, 409 when none is), absent -> 404,
 *     an interrupted PUT's record with a replica missing -> 409 (503 while
 *     a replica's volume is marked down); 405 lists it;
 *   - verify: a replica's bytes corrupted on disk (the mkv-volume's md5
 *     xattr left as it was) and another replica deleted are both found,
 *     -fix repairs both, byte for byte, and the next verify is clean --
 *     online and offline (-db), and with -rate;
 *   - gc: a master killed (-9) mid-PUT leaves a DELETED record that gc
 *     -unlinked finds and removes; orphan blobs (no record, or a record
 *     naming other places) and stale hidden temporary files are found by
 *     the dry run and removed by gc -delete while a load of PUTs runs, and
 *     afterwards every key written reads back intact (verify is clean);
 *     -volumes spelled otherwise makes -delete refuse; offline (-db)
 *     -unlinked -delete removes an unlinked key's bytes and record;
 *   - a key whose name is not UTF-8 (?list spells it with U+FFFD): get
 *     and online verify say they cannot reach it, and fail;
 *   - SIGINT or SIGTERM stops verify at once with a last line that says
 *     where it was, exit 128 + the signal;
 *   - verify without HASH (-md5sum=false): the majority's md5 is the truth,
 *     the odd replica is named and -fix repairs it; no majority: failed,
 *     nothing written;
 *   - put of a tree with a directory it cannot read fails (exit 1), and
 *     says so (run as nobody when root); a symlink is not sent, and said;
 *   - get refuses keys whose rest is no safe relative path and writes
 *     nothing outside its directory;
 *   - a -db naming no index (gc -delete, verify, rebalance, rebuild's
 *     -from) is an error, exit 1: nothing is created, no blob deleted;
 *     over an index that holds no key, gc -delete is a dry run; a new
 *     -db's missing parents are made;
 *   - put/get: a tree with nested directories and names that need
 *     percent-escaping, each SIGKILLed once a fifth of it is across (so
 *     surely interrupted) and resumed, comes back byte for byte; the
 *     resume skips what had arrived; a rerun skips everything; a file
 *     changed locally is reported, not uploaded.
 * MKV_TOOLS_FILES sets the tree's size (default 2,000 files). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/httpc.h"
#include "../common/placement.h"
#include "../common/record.h"
#include "../master/index.h"
#include "../ops/ops.h"
#include "harness.h"

#define NVOL 3
#define REPLICAS "2"
#define SUBVOLUMES "2"

static struct vol V[NVOL];
static struct master M;
static char *tmp;
static const char *master_flags[] = {"-replicas", REPLICAS, "-subvolumes", SUBVOLUMES, NULL};

static void cluster_up_kind(enum vol_kind kind)
{
	httpc_global_init();
	tmp = h_tmpdir();
	for (int v = 0; v < NVOL; v++)
		h_vol_start(&V[v], kind);
	memset(&M, 0, sizeof(M));
	h_master_start(&M, V, NVOL, master_flags);
}

static void cluster_down(void)
{
	h_master_stop(&M);
	for (int v = 0; v < NVOL; v++)
		h_vol_stop(&V[v]);
	h_rmrf(tmp);
	free(tmp);
}

static void show_log(const char *path)
{
	char *s = h_read_file(path);
	fprintf(stderr, "---- %s\n%s----\n", path, s);
	free(s);
}

static bool log_has(const char *path, const char *needle)
{
	char *s = h_read_file(path);
	bool found = strstr(s, needle) != NULL;
	free(s);
	return found;
}

/* Start bin/mkv [-volumes ...] args..., its output to log. */
static pid_t mkv_start(bool volumes, const char *const *args, const char *log)
{
	char *bin = h_bin("mkv"), *vols = h_volumes_arg(V, NVOL);
	char *argv[40];
	int n = 0;
	pid_t pid;
	argv[n++] = bin;
	if (volumes) {
		argv[n++] = "-volumes";
		argv[n++] = vols;
		argv[n++] = "-replicas";
		argv[n++] = REPLICAS;
		argv[n++] = "-subvolumes";
		argv[n++] = SUBVOLUMES;
	}
	for (int i = 0; args[i]; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	unlink(log);
	pid = h_spawn(argv, log);
	free(bin);
	free(vols);
	return pid;
}

/* bin/mkv [-volumes ...] args... to its end; the exit code (-1: a signal). */
static int mkv_run(bool volumes, const char *const *args, const char *log)
{
	pid_t pid = mkv_start(volumes, args, log);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* How long a run may take to show progress before it counts as hung:
 * many times what a sanitizer build takes on a loaded machine. */
#define PROGRESS_BOUND_MS 120000

/* Let pid run about run_ms, then stop it (SIGSTOP, waited for): stopped,
 * it makes no progress while the caller looks at its work.  false when it
 * ended instead (*st: its status). */
static bool run_a_little(pid_t pid, int run_ms, int *st)
{
	ck_assert_int_eq(kill(pid, SIGCONT), 0);
	usleep((useconds_t)run_ms * 1000);
	kill(pid, SIGSTOP);
	ck_assert_int_eq(waitpid(pid, st, WUNTRACED), pid);
	return WIFSTOPPED(*st);
}

/* bin/mkv args..., SIGKILLed once enough(ctx) says part of its work is
 * done.  It runs in steps of 20 ms and is looked at while stopped, so it
 * is killed within a step of that point, never after its end, however
 * loaded the machine (the test fails if it ends first, or shows no
 * progress in time). */
static void mkv_interrupt(const char *what, const char *const *args, const char *log,
			  bool (*enough)(void *ctx), void *ctx)
{
	pid_t pid = mkv_start(false, args, log);
	uint64_t end = now_ms() + PROGRESS_BOUND_MS;
	int st;
	for (;;) {
		if (!run_a_little(pid, 20, &st)) {
			show_log(log);
			ck_abort_msg("mkv %s ended (status %#x) before it could be interrupted",
				     what, st);
		}
		if (enough(ctx))
			break;
		ck_assert_msg(now_ms() < end, "mkv %s: no progress in %d s", what,
			      PROGRESS_BOUND_MS / 1000);
	}
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		      "mkv %s ended (status %#x), not by the kill", what, st);
}

static char *key_url(const char *key)
{
	char *enc = url_escape(key, strlen(key), true), *u = xasprintf("%s%s", M.base, enc);
	free(enc);
	return u;
}

static long put_key(const char *key, const void *val, size_t n)
{
	struct resp r;
	char *u = key_url(key);
	long st = h_http("PUT", u, val, n, NULL, false, &r);
	h_resp_free(&r);
	free(u);
	return st;
}

/* The file on disk of key's replica at loc ("127.0.0.1:port[/svNN]"). */
static char *replica_file(const char *key, const char *loc)
{
	char path[PATH_MAX_LEN];
	placement_path(key, strlen(key), path);
	for (int v = 0; v < NVOL; v++) {
		size_t n = strlen(V[v].name);
		if (!strncmp(loc, V[v].name, n) && (loc[n] == '/' || !loc[n]))
			return xasprintf("%s%s%s", V[v].dir, loc + n, path);
	}
	ck_abort_msg("location %s is no volume's", loc);
	return NULL;
}

/* The key's locations, from the master's Key-Volumes; n gets the count. */
static void key_locs(const char *key, char locs[][LOC_MAX], int *n)
{
	struct resp r;
	char *u = key_url(key), *kv, *save = NULL;
	ck_assert_int_eq(h_http("HEAD", u, NULL, 0, NULL, false, &r), 302);
	kv = h_header(&r, "Key-Volumes");
	ck_assert_ptr_nonnull(kv);
	*n = 0;
	for (char *t = strtok_r(kv, ",", &save); t; t = strtok_r(NULL, ",", &save))
		snprintf(locs[(*n)++], LOC_MAX, "%s", t);
	free(kv);
	h_resp_free(&r);
	free(u);
}

static char *file_bytes(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	struct buf b = {0};
	char chunk[65536];
	size_t got;
	buf_puts(&b, "");
	if (!f) {
		*n = (size_t)-1;
		return b.data;
	}
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_append(&b, chunk, got);
	fclose(f);
	*n = b.len;
	return b.data;
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	ck_assert_msg(f != NULL, "fopen %s", path);
	ck_assert_uint_eq(fwrite(p, 1, n, f), n);
	fclose(f);
}

/* An mtime an hour ago: older than any grace period of gc's. */
static void make_old(const char *path)
{
	struct timespec ts[2];
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= 3600;
	ts[1] = ts[0];
	ck_assert_msg(utimensat(AT_FDCWD, path, ts, 0) == 0, "utimensat %s", path);
}

static char *value(int i, size_t *n)
{
	/* sizes from one byte to ~300 KiB: nginx's copies stream through
	 * verify's buffer in many pieces */
	size_t len = i % 7 == 0 ? 300000 + (size_t)i : 1 + (size_t)(i * 131 % 5000);
	char *v = xmalloc(len);
	for (size_t j = 0; j < len; j++)
		v[j] = (char)((i * 7 + (int)j * 13) ^ (int)(j >> 5));
	*n = len;
	return v;
}

/* ---- RELINK ---- */

START_TEST(test_relink)
{
	struct resp r;
	char *u, *absent, *allow, path[PATH_MAX_LEN], *why = NULL;
	cluster_up_kind(VOL_MKV);
	u = key_url("/re link");
	absent = key_url("/absent");
	ck_assert_int_eq(put_key("/re link", "hello", 5), 201);
	ck_assert_int_eq(h_status("RELINK", u), 204);          /* live: nothing to do */
	ck_assert_int_eq(h_status("UNLINK", u), 204);
	ck_assert_int_eq(h_status("GET", u), 404);
	ck_assert_int_eq(h_status("RELINK", u), 204);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, true, &r), 200);
	ck_assert_str_eq(r.body.data, "hello");
	h_resp_free(&r);
	ck_assert_int_eq(h_status("RELINK", absent), 404);
	ck_assert_int_eq(h_http("BREW", u, NULL, 0, NULL, false, &r), 405);
	allow = h_header(&r, "Allow");
	ck_assert_ptr_nonnull(strstr(allow, "RELINK"));
	free(allow);
	h_resp_free(&r);
	{
		char *q = xasprintf("%s?x", u);
		ck_assert_int_eq(h_status("RELINK", q), 400);
		free(q);
	}

	/* A crashed PUT's record: DELETED, no HASH, its bytes never arrived. */
	h_master_down(&M);
	{
		struct index *idx = index_open(M.db, &why);
		char *v;
		size_t vlen;
		ck_assert_msg(idx != NULL, "%s", why);
		v = xasprintf("DELETED%s,%s", V[0].name, V[1].name);
		ck_assert_int_eq(index_write(idx, "/crashed", 8, v, strlen(v), true), 0);
		free(v);
		index_close(idx);
		(void)vlen;
	}
	h_master_restart(&M, V, NVOL, master_flags);
	{
		char *c = key_url("/crashed");
		ck_assert_int_eq(h_status("RELINK", c), 409);
		ck_assert_int_eq(h_status("GET", c), 404);
		/* A replica's volume the health check marks down is not asked
		 * (a silent host would hold the HEAD): 503 at once. */
		h_vol_down(&V[0]);
		for (uint64_t end = now_ms() + 30000; h_status("RELINK", c) != 503;) {
			ck_assert_msg(now_ms() < end, "RELINK with a replica's volume down: not 503 in 30 s");
			usleep(100000);
		}
		h_vol_respawn(&V[0]);
		for (uint64_t end = now_ms() + 30000; h_status("RELINK", c) != 409;) {
			ck_assert_msg(now_ms() < end, "the volume was not seen up again in 30 s");
			usleep(100000);
		}
		/* once every replica is there, it may come back */
		placement_path("/crashed", 8, path);
		for (int v = 0; v < 2; v++) {
			char *bu = xasprintf("http://%s%s", V[v].name, path);
			struct resp pr;
			ck_assert_int_eq(h_http("PUT", bu, "x", 1, NULL, false, &pr), 201);
			h_resp_free(&pr);
			free(bu);
		}
		ck_assert_int_eq(h_status("RELINK", c), 204);
		ck_assert_int_eq(h_status("GET", c), 302);
		free(c);
	}

	/* A DELETE cut short (a volume refused, or a crash) leaves a record
	 * with HASH whose replicas are partly gone: RELINK names only those
	 * still there, never sending a GET to a missing one; with none left,
	 * 409. */
	{
		char *vols, *save = NULL, *bu;
		ck_assert_int_eq(h_http("HEAD", u, NULL, 0, NULL, false, &r), 302);
		vols = h_header(&r, "Key-Volumes");
		h_resp_free(&r);
		ck_assert_ptr_nonnull(strchr(vols, ','));
		ck_assert_int_eq(h_status("UNLINK", u), 204);
		placement_path("/re link", 8, path);
		bu = xasprintf("http://%s%s", strtok_r(vols, ",", &save), path);
		ck_assert_int_eq(h_status("DELETE", bu), 204);
		ck_assert_int_eq(h_status("RELINK", u), 204);
		for (int i = 0; i < 20; i++) {
			ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, true, &r), 200);
			ck_assert_str_eq(r.body.data, "hello");
			h_resp_free(&r);
		}
		ck_assert_int_eq(h_status("UNLINK", u), 204);
		for (char *l = strtok_r(NULL, ",", &save); l; l = strtok_r(NULL, ",", &save)) {
			char *b2 = xasprintf("http://%s%s", l, path);
			ck_assert_int_eq(h_status("DELETE", b2), 204);
			free(b2);
		}
		ck_assert_int_eq(h_status("RELINK", u), 409);
		ck_assert_int_eq(h_status("GET", u), 404);
		free(bu);
		free(vols);
	}
	/* A DELETE one volume refused (it was down) removed the other copy:
	 * RELINK brings the key back served only from the copy that is left. */
	{
		char *c = key_url("/half deleted"), locs[2][LOC_MAX];
		int n, down = -1;
		ck_assert_int_eq(put_key("/half deleted", "hello", 5), 201);
		key_locs("/half deleted", locs, &n);
		for (int v = 0; v < NVOL; v++)
			if (!strncmp(locs[0], V[v].name, strlen(V[v].name)))
				down = v;
		ck_assert_int_ge(down, 0);
		h_vol_down(&V[down]);
		ck_assert_int_eq(h_status("DELETE", c), 500);
		h_vol_respawn(&V[down]);
		ck_assert_int_eq(h_status("RELINK", c), 204);
		/* the master sees the volume up again */
		for (uint64_t end = now_ms() + 30000; h_status("GET", c) != 302;) {
			ck_assert_msg(now_ms() < end, "the key was not served in 30 s");
			usleep(100000);
		}
		key_locs("/half deleted", locs, &n);
		for (int i = 0; i < n; i++) {
			char *bu;
			placement_path("/half deleted", 13, path);
			bu = xasprintf("http://%s%s", locs[i], path);
			ck_assert_msg(h_status("HEAD", bu) == 200, "RELINK serves %s, which the "
				      "DELETE removed", locs[i]);
			free(bu);
		}
		free(c);
	}
	free(u);
	free(absent);
	cluster_down();
}
END_TEST

/* ---- the volume's part: HEAD ?md5 and ?recursive&tmp ---- */

static long vol_req(const struct vol *v, const char *method, const char *path, const char *body,
		    struct resp *r)
{
	char *u = xasprintf("http://%s%s", v->name, path);
	long st = h_http(method, u, body, body ? strlen(body) : 0, NULL, false, r);
	free(u);
	return st;
}

/* The status of "HEAD path" sent as is, on a connection of its own. */
static long raw_head(int port, const char *path)
{
	char *req = xasprintf("HEAD %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
	int fd = h_connect(port);
	long st;
	ck_assert_int_ge(fd, 0);
	ck_assert(h_send(fd, req, strlen(req)));
	st = h_recv_resp(fd, NULL, 10000, true);
	close(fd);
	free(req);
	return st;
}

START_TEST(test_volume_md5)
{
	struct vol mv, nv;
	struct resp r;
	char *f, *md5;
	httpc_global_init();
	h_vol_start(&mv, VOL_MKV);
	h_vol_start(&nv, VOL_NGINX);
	ck_assert_int_eq(vol_req(&mv, "PUT", "/ab/cd/blob", "hello", &r), 201);
	h_resp_free(&r);
	/* the md5 of the bytes, with a HEAD's headers and no body */
	ck_assert_int_eq(vol_req(&mv, "HEAD", "/ab/cd/blob?md5", NULL, &r), 200);
	md5 = h_header(&r, "Content-Md5");
	ck_assert_str_eq(md5, "5d41402abc4b2a76b9719d911017c592");
	free(md5);
	md5 = h_header(&r, "Content-Length");
	ck_assert_str_eq(md5, "5");
	free(md5);
	ck_assert_uint_eq(r.body.len, 0);
	h_resp_free(&r);
	/* the bytes changed on disk behind the volume's back (its md5 xattr
	 * still says "hello"): the answer is of what is there now */
	f = xasprintf("%s/ab/cd/blob", mv.dir);
	{
		int fd = open(f, O_WRONLY);
		ck_assert_int_eq(pwrite(fd, "j", 1, 0), 1);
		close(fd);
	}
	ck_assert_int_eq(vol_req(&mv, "HEAD", "/ab/cd/blob?md5", NULL, &r), 200);
	md5 = h_header(&r, "Content-Md5");
	ck_assert_str_ne(md5, "5d41402abc4b2a76b9719d911017c592");
	{
		char want[33];
		md5_hex("jello", 5, want);
		ck_assert_str_eq(md5, want);
	}
	free(md5);
	h_resp_free(&r);
	ck_assert_int_eq(vol_req(&mv, "HEAD", "/ab/cd/none?md5", NULL, &r), 404);
	h_resp_free(&r);
	/* a directory is no blob: 404, as for a missing file */
	ck_assert_int_eq(vol_req(&mv, "HEAD", "/ab/?md5", NULL, &r), 404);
	ck_assert_ptr_null(h_header(&r, "Content-Md5"));
	h_resp_free(&r);
	/* named without its slash too (not a 301 that names no Location) */
	ck_assert_int_eq(vol_req(&mv, "HEAD", "/ab?md5", NULL, &r), 404);
	h_resp_free(&r);
	/* a ".." in any spelling: 400 (sent raw: curl would resolve it) */
	ck_assert_int_eq(raw_head(mv.port, "/../ab/cd/blob?md5"), 400);
	ck_assert_int_eq(raw_head(mv.port, "/ab/%2e%2E/ab/cd/blob?md5"), 400);
	ck_assert_int_eq(raw_head(mv.port, "/ab/cd/blob?md5"), 200);
	/* a GET ?md5 is a GET */
	ck_assert_int_eq(vol_req(&mv, "GET", "/ab/cd/blob?md5", NULL, &r), 200);
	ck_assert_str_eq(r.body.data, "jello");
	h_resp_free(&r);
	/* nginx: a plain HEAD, no Content-Md5 (verify then streams) */
	ck_assert_int_eq(vol_req(&nv, "PUT", "/ab/cd/blob", "hello", &r), 201);
	h_resp_free(&r);
	ck_assert_int_eq(vol_req(&nv, "HEAD", "/ab/cd/blob?md5", NULL, &r), 200);
	ck_assert_ptr_null(h_header(&r, "Content-Md5"));
	h_resp_free(&r);

	/* hidden temporary files: only ?recursive&tmp shows them */
	free(f);
	f = xasprintf("%s/ab/cd/.mkv-tmp.1.2", mv.dir);
	write_file(f, "x", 1);
	free(f);
	f = xasprintf("%s/ab/cd/.other", mv.dir);
	write_file(f, "x", 1);
	ck_assert_int_eq(vol_req(&mv, "GET", "/ab/?recursive", NULL, &r), 200);
	ck_assert_ptr_null(strstr(r.body.data, ".mkv-tmp"));
	h_resp_free(&r);
	ck_assert_int_eq(vol_req(&mv, "GET", "/ab/?recursive&tmp", NULL, &r), 200);
	ck_assert_ptr_nonnull(strstr(r.body.data, "\"cd/.mkv-tmp.1.2\""));
	ck_assert_ptr_nonnull(strstr(r.body.data, "\"cd/blob\""));
	ck_assert_ptr_null(strstr(r.body.data, ".other"));
	h_resp_free(&r);
	ck_assert_int_eq(vol_req(&mv, "GET", "/ab/cd/?tmp", NULL, &r), 200);   /* plain: no */
	ck_assert_ptr_null(strstr(r.body.data, ".mkv-tmp"));
	h_resp_free(&r);
	ck_assert_int_eq(vol_req(&mv, "DELETE", "/ab/cd/.mkv-tmp.1.2", NULL, &r), 204);
	h_resp_free(&r);
	free(f);
	h_vol_stop(&mv);
	h_vol_stop(&nv);
}
END_TEST

/* ---- verify ---- */

#define VKEYS 60

static void verify_clean(const char *log, const char *const *extra)
{
	const char *args[12];
	int n = 0;
	for (int i = 0; extra && extra[i]; i++)
		args[n++] = extra[i];
	args[n++] = "verify";
	args[n] = NULL;
	if (mkv_run(true, args, log) != 0) {
		show_log(log);
		ck_abort_msg("verify found problems in a clean cluster");
	}
	ck_assert(log_has(log, "0 missing, 0 corrupt, 0 fixed, 0 failed"));
}

START_TEST(test_verify)
{
	enum vol_kind kind = _i ? VOL_NGINX : VOL_MKV;
	char key[64], locs[RECORD_MAX_LOCS][LOC_MAX], *log, *corrupt_file, *gone_file;
	char *orig_c, *orig_g;
	size_t oc, og, n;
	int nl;
	cluster_up_kind(kind);
	log = xasprintf("%s/verify.log", tmp);
	for (int i = 0; i < VKEYS; i++) {
		char *v = value(i, &n);
		snprintf(key, sizeof(key), "/v/%d %s", i, i % 3 ? "plain" : "?ü");
		ck_assert_int_eq(put_key(key, v, n), 201);
		free(v);
	}
	const char *online[] = {"-master", M.base + 7, NULL};
	verify_clean(log, online);

	/* key 7 (300 KB): one replica's bytes changed in place, size and (on
	 * an mkv-volume) md5 xattr unchanged; key 8: one replica deleted */
	snprintf(key, sizeof(key), "/v/%d %s", 7, "plain");
	key_locs(key, locs, &nl);
	ck_assert_int_eq(nl, 2);
	corrupt_file = replica_file(key, locs[1]);
	orig_c = file_bytes(corrupt_file, &oc);
	ck_assert_uint_gt(oc, 1000);
	{
		int fd = open(corrupt_file, O_WRONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, "CORRUPT", 7, 1000), 7);
		close(fd);
	}
	snprintf(key, sizeof(key), "/v/%d %s", 8, "plain");
	key_locs(key, locs, &nl);
	gone_file = replica_file(key, locs[0]);
	orig_g = file_bytes(gone_file, &og);
	ck_assert_int_eq(unlink(gone_file), 0);

	{
		const char *args[] = {"-master", M.base + 7, "verify", NULL};
		ck_assert_int_eq(mkv_run(true, args, log), 1);
		if (!log_has(log, "1 missing, 1 corrupt, 0 fixed")) {
			show_log(log);
			ck_abort_msg("verify did not find the missing and the corrupt replica");
		}
	}
	{
		const char *args[] = {"-master", M.base + 7, "-fix", "-workers", "4", "verify", NULL};
		int rc = mkv_run(true, args, log);
		if (rc != 0 || !log_has(log, "1 missing, 1 corrupt, 2 fixed, 0 failed")) {
			show_log(log);
			ck_abort_msg("verify -fix did not repair both replicas (exit %d)", rc);
		}
	}
	{
		size_t n1, n2;
		char *b1 = file_bytes(corrupt_file, &n1), *b2 = file_bytes(gone_file, &n2);
		ck_assert_uint_eq(n1, oc);
		ck_assert_mem_eq(b1, orig_c, oc);
		ck_assert_uint_eq(n2, og);
		ck_assert_mem_eq(b2, orig_g, og);
		free(b1);
		free(b2);
	}
	verify_clean(log, online);
	{
		const char *rated[] = {"-master", M.base + 7, "-rate", "50", NULL};
		verify_clean(log, rated);
	}

	/* Offline: the master stopped, the same from the index; both copies
	 * of a key bad leaves nothing to fix from, and verify says so. */
	h_master_down(&M);
	{
		const char *offline[] = {"-db", M.db, NULL};
		verify_clean(log, offline);
	}
	snprintf(key, sizeof(key), "/v/%d %s", 14, "plain");
	{
		char path[PATH_MAX_LEN];
		int bad = 0;
		placement_path(key, strlen(key), path);
		/* every copy of key 14, wherever it is */
		for (int v = 0; v < NVOL; v++)
			for (int s = -1; s < 2; s++) {
				char *f = s < 0 ? xasprintf("%s%s", V[v].dir, path)
						: xasprintf("%s/sv%02X%s", V[v].dir, s, path);
				int fd = open(f, O_WRONLY);
				if (fd >= 0) {
					ck_assert_int_eq(pwrite(fd, "X", 1, 0), 1);
					close(fd);
					bad++;
				}
				free(f);
			}
		ck_assert_int_eq(bad, 2);
		const char *args[] = {"-db", M.db, "-fix", "verify", NULL};
		ck_assert_int_eq(mkv_run(true, args, log), 1);
		if (!log_has(log, "0 missing, 2 corrupt, 0 fixed, 2 failed") ||
		    !log_has(log, "no good copy")) {
			show_log(log);
			ck_abort_msg("verify -fix with no good copy");
		}
	}
	free(orig_c);
	free(orig_g);
	free(corrupt_file);
	free(gone_file);
	free(log);
	cluster_down();
}
END_TEST

/* Online verify while REPLACEs and DELETE+PUTs of its keys run: a key
 * rewritten between the master's answer and the reads of its replicas is
 * no missing or corrupt replica. */
struct rewriter {
	atomic_bool stop;
	atomic_int done;
};

static void *rewrite_main(void *arg)
{
	struct rewriter *w = arg;
	char key[32];
	for (int i = 0; !atomic_load(&w->stop); i++) {
		size_t n;
		char *v = value(i, &n), *u;
		struct resp r;
		snprintf(key, sizeof(key), "/rw/%d", i % 20);
		u = key_url(key);
		if (i % 5 == 4) {
			h_http("DELETE", u, NULL, 0, NULL, false, &r);
			h_resp_free(&r);
			h_http("PUT", u, v, n, NULL, false, &r);
		} else {
			h_http("REPLACE", u, v, n, NULL, false, &r);
		}
		h_resp_free(&r);
		atomic_fetch_add(&w->done, 1);
		free(u), free(v);
	}
	return NULL;
}

START_TEST(test_verify_under_writes)
{
	struct rewriter w = {0};
	pthread_t t[2];
	char key[32], *log;
	cluster_up_kind(VOL_MKV);
	log = xasprintf("%s/verify-rw.log", tmp);
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "/rw/%d", i);
		ck_assert_int_eq(put_key(key, "first", 5), 201);
	}
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, rewrite_main, &w), 0);
	for (int run = 0; run < 6; run++) {
		const char *args[] = {"-master", M.base + 7, run % 2 ? "-fix" : "-v", "verify", NULL};
		int rc = mkv_run(true, args, log);
		if (rc != 0 || !log_has(log, " 0 missing, 0 corrupt")) {
			show_log(log);
			atomic_store(&w.stop, true);
			ck_abort_msg("verify under writes: exit %d, replicas said bad", rc);
		}
	}
	atomic_store(&w.stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	ck_assert_int_gt(atomic_load(&w.done), 20);
	free(log);
	cluster_down();
}
END_TEST

/* ---- gc ---- */

struct load {
	atomic_bool stop;
	atomic_int done, failed;
	int base;
};

static void *load_main(void *arg)
{
	struct load *l = arg;
	char key[64];
	for (int i = 0; !atomic_load(&l->stop); i++) {
		size_t n;
		char *v = value(l->base + i, &n);
		snprintf(key, sizeof(key), "/load/%d", l->base + i);
		if (put_key(key, v, n) == 201)
			atomic_fetch_add(&l->done, 1);
		else
			atomic_fetch_add(&l->failed, 1);
		free(v);
	}
	return NULL;
}

/* PUT a value to a volume directly: a blob that no record names. */
static void volume_put(int v, const char *path, const char *val)
{
	struct resp r;
	char *u = xasprintf("http://%s%s", V[v].name, path);
	ck_assert_int_ge(h_http("PUT", u, val, strlen(val), NULL, false, &r), 201);
	h_resp_free(&r);
	free(u);
}

START_TEST(test_gc)
{
	enum vol_kind kind = _i ? VOL_NGINX : VOL_MKV;
	char key[64], locs[RECORD_MAX_LOCS][LOC_MAX], path[PATH_MAX_LEN], *log, *f;
	char *orphans[8];
	int norphans = 0, nl;
	struct load loads[3];
	pthread_t lt[3];
	cluster_up_kind(kind);
	log = xasprintf("%s/gc.log", tmp);
	for (int i = 0; i < 40; i++) {
		size_t n;
		char *v = value(i, &n);
		snprintf(key, sizeof(key), "/g/%d", i);
		ck_assert_int_eq(put_key(key, v, n), 201);
		free(v);
	}

	/* kill -9 mid-PUT: half a body sent, the master dies */
	{
		static char body[65536];
		char *req = xasprintf("PUT /crash/mid HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
				      "\r\n", 1 << 20);
		int fd = h_connect(M.port);
		struct resp r;
		char *ul = xasprintf("%s/crash/?unlinked", M.base);
		ck_assert_int_ge(fd, 0);
		memset(body, 'c', sizeof(body));
		ck_assert(h_send(fd, req, strlen(req)));
		ck_assert(h_send(fd, body, sizeof(body)));
		for (uint64_t end = now_ms() + 30000;;) {   /* its DELETED record is written */
			h_http("GET", ul, NULL, 0, NULL, false, &r);
			bool there = strstr(r.body.data, "/crash/mid") != NULL;
			h_resp_free(&r);
			if (there)
				break;
			ck_assert_msg(now_ms() < end, "the PUT's DELETED record never showed");
			usleep(10000);
		}
		h_stop(M.pid, SIGKILL);
		close(fd);
		free(req);
		free(ul);
		h_master_restart(&M, V, NVOL, master_flags);
	}

	/* orphans: a blob with no record (a failed cleanup); a real key's copy
	 * at a place its record does not name (an interrupted rebalance); a
	 * file that is no blob's path; a stale hidden temp file (mkv-volume) */
	placement_path("/orphan one", 10, path);
	volume_put(0, path, "orphan one");
	orphans[norphans++] = xasprintf("%s%s", V[0].dir, path);
	snprintf(key, sizeof(key), "/g/%d", 3);
	key_locs(key, locs, &nl);
	placement_path(key, strlen(key), path);
	for (int v = 0; v < NVOL; v++) {
		bool used = false;
		for (int j = 0; j < nl; j++)
			used |= !strncmp(locs[j], V[v].name, strlen(V[v].name));
		if (!used) {
			char *p = xasprintf("/sv01%s", path);
			volume_put(v, p, "stale copy");
			orphans[norphans++] = xasprintf("%s%s", V[v].dir, p);
			free(p);
			break;
		}
	}
	volume_put(1, "/ab/cd/not-a-blob", "junk");
	orphans[norphans++] = xasprintf("%s/ab/cd/not-a-blob", V[1].dir);
	/* no blob sits at a volume's top, nor a subvolume's */
	volume_put(2, "/stray-top", "junk");
	orphans[norphans++] = xasprintf("%s/stray-top", V[2].dir);
	volume_put(2, "/sv00/stray-sub", "junk");
	orphans[norphans++] = xasprintf("%s/sv00/stray-sub", V[2].dir);
	if (kind == VOL_MKV) {
		f = xasprintf("%s/ab/cd/.mkv-tmp.99.1", V[1].dir);
		write_file(f, "half", 4);
		orphans[norphans++] = f;
	}
	for (int i = 0; i < norphans; i++)
		make_old(orphans[i]);
	/* and one just made: younger than the grace period, kept */
	placement_path("/orphan young", 12, path);
	volume_put(2, path, "young");
	f = xasprintf("%s%s", V[2].dir, path);

	const char *dry[] = {"-master", M.base + 7, "-puttimeout", "5s", "-unlinked", "gc", NULL};
	ck_assert_int_eq(mkv_run(true, dry, log), 1);
	{
		char want[96];
		snprintf(want, sizeof(want), "%d orphans", norphans - (kind == VOL_MKV));
		if (!log_has(log, want) ||
		    !log_has(log, kind == VOL_MKV ? "1 stale temporary" : "0 stale temporary") ||
		    !log_has(log, "1 younger than 10 s kept") || !log_has(log, "1 unlinked keys")) {
			show_log(log);
			ck_abort_msg("gc's dry run did not find what it should");
		}
	}
	for (int i = 0; i < norphans; i++)
		ck_assert_msg(access(orphans[i], F_OK) == 0, "dry run removed %s", orphans[i]);

	/* the same volumes spelled otherwise are the same disks (the ids in
	 * their markers): the dry run finds the same orphans, not every file */
	{
		char *vols = xasprintf("localhost:%d,localhost:%d,localhost:%d", V[0].port,
				       V[1].port, V[2].port), want[96];
		const char *args[] = {"-volumes", vols, "-replicas", REPLICAS, "-subvolumes",
				      SUBVOLUMES, "-master", M.base + 7, "-puttimeout", "5s", "gc",
				      NULL};
		ck_assert_int_eq(mkv_run(false, args, log), 1);
		snprintf(want, sizeof(want), " %d orphans", norphans - (kind == VOL_MKV));
		if (!log_has(log, want) || !log_has(log, "one disk"))
			show_log(log);
		ck_assert_msg(log_has(log, want), "respelled, gc did not find \"%s\"", want);
		ck_assert(log_has(log, "one disk"));
		free(vols);
	}
	/* a volume the records name that is none of -volumes, or cannot be
	 * told (a port nobody answers on in its place): -delete deletes nothing */
	{
		char *vols = xasprintf("localhost:%d,localhost:%d,localhost:%d", V[0].port,
				       V[1].port, h_free_port());
		const char *args[] = {"-volumes", vols, "-replicas", REPLICAS, "-subvolumes",
				      SUBVOLUMES, "-master", M.base + 7, "-puttimeout", "1s",
				      "-delete", "gc", NULL};
		ck_assert_int_eq(mkv_run(false, args, log), 1);
		if (!log_has(log, "none of -volumes"))
			show_log(log);
		ck_assert(log_has(log, "none of -volumes"));
		for (int i = 0; i < norphans; i++)
			ck_assert_msg(access(orphans[i], F_OK) == 0, "removed %s", orphans[i]);
		free(vols);
	}

	/* -delete while PUTs run */
	for (int t = 0; t < 3; t++) {
		memset(&loads[t], 0, sizeof(loads[t]));
		loads[t].base = t * 100000;
		ck_assert_int_eq(pthread_create(&lt[t], NULL, load_main, &loads[t]), 0);
	}
	/* every load has written a key: gc runs while they write */
	for (uint64_t end = now_ms() + 30000;;) {
		int idle = 0;
		for (int t = 0; t < 3; t++)
			idle += atomic_load(&loads[t].done) == 0;
		if (!idle)
			break;
		ck_assert_msg(now_ms() < end, "the PUT load wrote nothing in 30 s");
		usleep(10000);
	}
	const char *del1[] = {"-master", M.base + 7, "-puttimeout", "5s", "-unlinked", "-delete",
			      "gc", NULL};
	int rc = mkv_run(true, del1, log);
	if (rc != 0)
		show_log(log);
	ck_assert_msg(access(f, F_OK) == 0, "gc -delete removed a young file");
	/* again with a grace of 2 s, once the load's first files are past it:
	 * then their records, not their age, keep them */
	usleep(2500000);
	const char *del2[] = {"-master", M.base + 7, "-puttimeout", "1s", "-unlinked", "-delete",
			      "gc", NULL};
	int rc2 = mkv_run(true, del2, log);
	for (int t = 0; t < 3; t++) {
		atomic_store(&loads[t].stop, true);
		pthread_join(lt[t], NULL);
	}
	if (rc != 0 || rc2 != 0)
		show_log(log);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(rc2, 0);
	for (int i = 0; i < norphans; i++) {
		ck_assert_msg(access(orphans[i], F_OK) != 0, "gc -delete left %s", orphans[i]);
		free(orphans[i]);
	}
	ck_assert_msg(access(f, F_OK) != 0, "gc -delete left %s once it was old", f);
	free(f);
	{
		char *u = key_url("/crash/mid");
		ck_assert_int_eq(h_status("GET", u), 404);
		free(u);
		struct resp r;
		char *ul = xasprintf("%s/?unlinked", M.base);
		h_http("GET", ul, NULL, 0, NULL, false, &r);
		ck_assert_str_eq(r.body.data, "{\"next\":\"\",\"keys\":[]}");
		h_resp_free(&r);
		free(ul);
	}
	/* nothing the load or the setup wrote was lost */
	for (int t = 0; t < 3; t++) {
		ck_assert_int_eq(atomic_load(&loads[t].failed), 0);
		ck_assert_int_gt(atomic_load(&loads[t].done), 0);
	}
	const char *ver[] = {"-master", M.base + 7, "verify", NULL};
	rc = mkv_run(true, ver, log);
	if (rc != 0)
		show_log(log);
	ck_assert_int_eq(rc, 0);
	{
		char want[64];
		int total = 40;
		for (int t = 0; t < 3; t++)
			total += atomic_load(&loads[t].done);
		snprintf(want, sizeof(want), "verify: %d keys, %d replicas", total, 2 * total);
		if (!log_has(log, want)) {
			show_log(log);
			ck_abort_msg("want %s", want);
		}
	}

	/* offline, the master stopped: an unlinked key goes, bytes and record */
	{
		char *u = key_url("/g/5"), *files[2], *why = NULL;
		struct index *idx;
		size_t vlen;
		key_locs("/g/5", locs, &nl);
		ck_assert_int_eq(nl, 2);
		for (int j = 0; j < 2; j++)
			files[j] = replica_file("/g/5", locs[j]);
		ck_assert_int_eq(h_status("UNLINK", u), 204);
		h_master_down(&M);
		const char *off[] = {"-db", M.db, "-unlinked", "-delete", "gc", NULL};
		rc = mkv_run(true, off, log);
		if (rc != 0 || !log_has(log, "1 unlinked keys, 1 removed"))
			show_log(log);
		ck_assert_int_eq(rc, 0);
		for (int j = 0; j < 2; j++) {
			ck_assert_msg(access(files[j], F_OK) != 0, "%s left", files[j]);
			free(files[j]);
		}
		idx = index_open(M.db, &why);
		ck_assert_msg(idx != NULL, "%s", why);
		ck_assert_ptr_null(index_get(idx, "/g/5", 4, &vlen));
		ck_assert_ptr_nonnull(index_get(idx, "/g/6", 4, &vlen));   /* leaked: test code */
		index_close(idx);
		free(u);
	}
	free(log);
	cluster_down();
}
END_TEST

/* ---- a mistyped -db ---- */

/* The offline commands read an index that must exist: a -db (or rebuild's
 * -from) naming no index is an error, exit 1, and creates nothing -- an
 * empty index there would make gc -delete take every blob for an orphan;
 * and over an index that exists but holds no key, gc deletes nothing. */
START_TEST(test_missing_index)
{
	char locs[RECORD_MAX_LOCS][LOC_MAX], *log, *missing, *newdb, *f;
	int nl;
	cluster_up_kind(VOL_MKV);
	log = xasprintf("%s/missing.log", tmp);
	missing = xasprintf("%s/no-such-index", tmp);
	newdb = xasprintf("%s/new-index", tmp);
	ck_assert_int_eq(put_key("/kept", "kept", 4), 201);
	key_locs("/kept", locs, &nl);
	for (int i = 0; i < nl; i++) {
		f = replica_file("/kept", locs[i]);
		make_old(f);
		free(f);
	}
	{
		const char *gc[] = {"-db", missing, "-delete", "-unlinked", "gc", NULL};
		const char *verify[] = {"-db", missing, "-fix", "verify", NULL};
		const char *rebalance[] = {"-db", missing, "rebalance", NULL};
		const char *rebuild[] = {"-db", newdb, "-from", missing, "rebuild", NULL};
		ck_assert_int_eq(mkv_run(true, gc, log), 1);
		ck_assert(log_has(log, "no index at"));
		ck_assert_int_eq(mkv_run(true, verify, log), 1);
		ck_assert_int_eq(mkv_run(true, rebalance, log), 1);
		ck_assert_int_eq(mkv_run(true, rebuild, log), 1);
		ck_assert(log_has(log, "-from: no index at"));
	}
	ck_assert_int_ne(access(missing, F_OK), 0);
	/* an index that is there but holds no key: -delete is a dry run */
	{
		char *why = NULL;
		struct index *idx = index_open(missing, &why);
		const char *gc[] = {"-db", missing, "-delete", "gc", NULL};
		ck_assert_ptr_nonnull(idx);
		index_close(idx);
		ck_assert_int_eq(mkv_run(true, gc, log), 1);
		ck_assert(log_has(log, "the index holds no key"));
		ck_assert(log_has(log, " 0 deleted (a dry run"));
	}
	for (int i = 0; i < nl; i++) {
		f = replica_file("/kept", locs[i]);
		ck_assert_int_eq(access(f, F_OK), 0);
		free(f);
	}
	/* a new -db's missing parents are made, as goleveldb makes them; a
	 * -db that cannot be made is not said to be "in use" */
	{
		char *deep = xasprintf("%s/not/yet/there/db", tmp), *plain = xasprintf("%s/plain", tmp);
		char *under = xasprintf("%s/db", plain);
		const char *rebuild[] = {"-db", deep, "rebuild", NULL};
		const char *verify[] = {"-db", deep, "verify", NULL};
		const char *bad[] = {"-db", under, "rebuild", NULL};
		ck_assert_int_eq(mkv_run(true, rebuild, log), 0);
		ck_assert_int_eq(mkv_run(true, verify, log), 0);
		ck_assert(log_has(log, "verify: 1 keys"));
		write_file(plain, "", 0);   /* a regular file: no directory under it */
		ck_assert_int_eq(mkv_run(true, bad, log), 1);
		ck_assert(!log_has(log, "in use"));
		ck_assert(log_has(log, "cannot open index"));
		free(deep);
		free(plain);
		free(under);
	}
	free(newdb);
	free(missing);
	free(log);
	cluster_down();
}
END_TEST

/* ---- put / get ---- */

static int nfiles = 2000;

/* The i-th file's relative path: nested directories, names that need
 * percent-escaping, and '?' (whose key's base64 may hold '/'). */
static char *tree_name(int i)
{
	static const char *const dirs[] = {"a", "a/b", "a/b/c d", "ünï/cødé", "x%y/z&w",
					   "q?r#s", "p+q/[brackets]", "deep/1/2/3/4/5"};
	return xasprintf("%s/f %d%s", dirs[i % 8], i,
			 i % 5 == 0 ? "?.bin" : i % 5 == 1 ? "%20.txt" : i % 5 == 2 ? " ü" : "");
}

static void make_tree(const char *root)
{
	for (int i = 0; i < nfiles; i++) {
		char *rel = tree_name(i), *p = xasprintf("%s/%s", root, rel);
		size_t n;
		char *v = value(i + 1, &n);
		for (char *s = strchr(p + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
		if (i == 1) {      /* one big file: put asks before sending it */
			free(v);
			n = 1536 * 1024;
			v = xmalloc(n);
			for (size_t j = 0; j < n; j++)
				v[j] = (char)(j * 2654435761u >> 13);
		}
		write_file(p, v, i == 1 || n <= 20000 ? n : 20000);   /* keep the tree small */
		free(v);
		free(p);
		free(rel);
	}
}

static int count_files_in;
static int count_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)p, (void)st, (void)f;
	count_files_in += type == FTW_F;
	return 0;
}

static int count_files(const char *root)
{
	count_files_in = 0;
	nftw(root, count_one, 32, FTW_PHYS);
	return count_files_in;
}

/* Every file of the tree at a is in b, byte for byte, and b has no more. */
static void same_tree(const char *a, const char *b)
{
	for (int i = 0; i < nfiles; i++) {
		char *rel = tree_name(i), *pa = xasprintf("%s/%s", a, rel);
		char *pb = xasprintf("%s/%s", b, rel);
		size_t na, nb;
		char *x = file_bytes(pa, &na), *y = file_bytes(pb, &nb);
		ck_assert_msg(na == nb && !memcmp(x, y, na), "%s differs from %s", pb, pa);
		free(x);
		free(y);
		free(pa);
		free(pb);
		free(rel);
	}
	ck_assert_int_eq(count_files(b), nfiles);
}

/* Of the tree at a, how many files b holds under their real names; with
 * compare, each one byte for byte (a get cut short leaves no partial file
 * there). */
static int part_of_tree(const char *a, const char *b, bool compare)
{
	int n = 0;
	for (int i = 0; i < nfiles; i++) {
		char *rel = tree_name(i), *pa = xasprintf("%s/%s", a, rel);
		char *pb = xasprintf("%s/%s", b, rel);
		size_t na, nb;
		if (access(pb, F_OK) == 0 && compare) {
			char *x = file_bytes(pa, &na), *y = file_bytes(pb, &nb);
			ck_assert_msg(na == nb && !memcmp(x, y, na), "%s differs from %s", pb, pa);
			free(x);
			free(y);
		}
		n += access(pb, F_OK) == 0;
		free(pa);
		free(pb);
		free(rel);
	}
	return n;
}

/* How many live keys the master lists under prefix (at most limit; 0: all). */
static int count_keys(const char *prefix, int limit)
{
	struct resp r;
	char *p = key_url(prefix), *u = xasprintf("%s?list&limit=%d", p, limit ? limit : 1000000);
	json_t *doc, *keys;
	int n;
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	doc = json_loadb(r.body.data, r.body.len, 0, NULL);
	keys = json_object_get(doc, "keys");
	ck_assert_msg(json_is_array(keys), "?list answered %s", r.body.data);
	n = (int)json_array_size(keys);
	json_decref(doc);
	h_resp_free(&r);
	free(u);
	free(p);
	return n;
}

/* A run's summary, "<verb>: F files, M MB, S skipped ...": F and S. */
static void summary_counts(const char *log, const char *verb, int *files, int *skipped)
{
	char *s = h_read_file(log), *want = xasprintf("%s: ", verb);
	bool found = false;
	for (char *p = s; !found && (p = strstr(p, want)); p++)
		found = sscanf(p + strlen(want), "%d files, %*f MB, %d skipped", files,
			       skipped) == 2;
	if (!found)
		show_log(log);
	ck_assert_msg(found, "no %s summary", verb);
	free(want);
	free(s);
}

/* The interrupted put and get stop once a fifth of the tree is across. */
struct progress {
	const char *prefix;    /* put: keys listed under it */
	const char *dir;       /* get: files under their real names in it */
	const char *src;
	int want;
};

static bool put_enough(void *ctx)
{
	struct progress *p = ctx;
	return count_keys(p->prefix, p->want) >= p->want;
}

static bool get_enough(void *ctx)
{
	struct progress *p = ctx;
	return part_of_tree(p->src, p->dir, false) >= p->want;
}

/* A key whose name is not UTF-8 comes out of ?list with U+FFFD (as from
 * Go's encoding/json), so the online commands cannot reach it: they say
 * so and fail (exit 1) instead of taking it for deleted. */
START_TEST(test_not_utf8)
{
	char *src, *f, *dst, *log;
	cluster_up_kind(VOL_MKV);
	src = xasprintf("%s/latin1", tmp);
	dst = xasprintf("%s/latin1-copy", tmp);
	log = xasprintf("%s/latin1.log", tmp);
	mkdir(src, 0755);
	f = xasprintf("%s/caf\xe9", src);
	write_file(f, "latin-1", 7);
	free(f);
	{
		const char *put[] = {"-master", M.base + 7, "put", src, "/l1", NULL};
		const char *get[] = {"-master", M.base + 7, "get", "/l1", dst, NULL};
		const char *verify[] = {"-master", M.base + 7, "verify", NULL};
		ck_assert_int_eq(mkv_run(false, put, log), 0);
		ck_assert_int_eq(mkv_run(false, get, log), 1);
		ck_assert(log_has(log, "not UTF-8"));
		ck_assert(log_has(log, "1 failed"));
		ck_assert_int_eq(mkv_run(true, verify, log), 1);
		ck_assert(log_has(log, "not UTF-8"));
	}
	free(src);
	free(dst);
	free(log);
	cluster_down();
}
END_TEST

/* Has pid a socket open (has it begun to talk to the cluster)? */
static bool has_socket(pid_t pid, int port)
{
	char *d = xasprintf("/proc/%d/fd", (int)pid), link[64], line[512];
	char *tcp = xasprintf("/proc/%d/net/tcp", (int)pid);
	DIR *dir = opendir(d);
	FILE *f = fopen(tcp, "r");
	struct dirent *e;
	bool yes = false;
	while (f && dir && !yes && fgets(line, sizeof(line), f)) {   /* connections to port */
		unsigned rport, st;
		unsigned long inode;
		char want[64];
		if (sscanf(line, " %*d: %*x:%*x %*x:%x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &rport,
			   &st, &inode) != 3 || (int)rport != port)
			continue;
		snprintf(want, sizeof(want), "socket:[%lu]", inode);
		rewinddir(dir);
		while (!yes && (e = readdir(dir))) {   /* ...of pid's own */
			char *p = xasprintf("%s/%s", d, e->d_name);
			ssize_t n = readlink(p, link, sizeof(link) - 1);
			yes = n > 0 && (link[n] = '\0', !strcmp(link, want));
			free(p);
		}
	}
	if (f)
		fclose(f);
	if (dir)
		closedir(dir);
	free(tcp);
	free(d);
	return yes;
}

/* Ctrl-C (SIGINT) or SIGTERM: a command stops at once, as before, but
 * first says where it was, and exits 128 + the signal. */
START_TEST(test_interrupted)
{
	static const int sigs[] = {SIGINT, SIGTERM};
	char *log, *bin = h_bin("mkv"), *vols, *big;
	size_t n = 2 << 20;
	int st;
	pid_t pid;
	cluster_up_kind(VOL_MKV);
	log = xasprintf("%s/interrupted.log", tmp);
	vols = h_volumes_arg(V, NVOL);
	big = xmalloc(n);
	memset(big, 'i', n);
	ck_assert_int_eq(put_key("/big", big, n), 201);
	for (int i = 0; i < 2; i++) {
		/* at 0.2 MB/s the 2 MiB key takes 10 s or more to verify */
		char *argv[] = {bin, "-volumes", vols, "-replicas", REPLICAS, "-master",
				M.base + 7, "-rate", "0.2", "verify", NULL};
		unlink(log);
		uint64_t end = now_ms() + 30000;
		pid = h_spawn(argv, log);
		/* once it talks to the master, its work (and progress line) has begun
		 * (before, it reads the volumes' ids) */
		while (!has_socket(pid, M.port)) {
			ck_assert_msg(now_ms() < end, "verify opened no connection in 30 s");
			usleep(5000);
		}
		ck_assert_int_eq(kill(pid, sigs[i]), 0);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		if (!WIFEXITED(st))
			show_log(log);
		ck_assert(WIFEXITED(st));
		ck_assert_int_eq(WEXITSTATUS(st), 128 + sigs[i]);
		ck_assert(log_has(log, "verify: 0 keys, 0 replicas"));   /* the progress */
		ck_assert(log_has(log, i ? "interrupted (SIGTERM)" : "interrupted (SIGINT)"));
	}
	free(big);
	free(vols);
	free(log);
	free(bin);
	cluster_down();
}
END_TEST

/* h_spawn, but as nobody (65534) when root: root reads any directory.
 * A child that cannot drop root exits 125 before it runs anything. */
static pid_t spawn_unprivileged(char *const argv[], const char *log)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getenv("MKV_CHILD_ASAN_OPTIONS"))
			setenv("ASAN_OPTIONS", getenv("MKV_CHILD_ASAN_OPTIONS"), 1);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		close(fd);
		if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setgid(65534) < 0 ||
				       setuid(65534) < 0 || geteuid() == 0)) {
			fprintf(stderr, "cannot drop root: %s\n", strerror(errno));
			_exit(125);
		}
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* path copied into dir, mode 0755; returns the copy's path (caller frees). */
static char *copy_exe(const char *path, const char *dir)
{
	const char *base = strrchr(path, '/');
	char *to = xasprintf("%s/%s", dir, base ? base + 1 : path);
	int in = open(path, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0700);
	struct stat st;
	ck_assert_msg(in >= 0 && out >= 0 && fstat(in, &st) == 0, "copy %s to %s: %s", path, to,
		      strerror(errno));
	for (off_t left = st.st_size; left > 0;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
		ck_assert_msg(n > 0, "copy_file_range %s to %s: %s", path, to,
			      n < 0 ? strerror(errno) : "short");
		left -= n;
	}
	ck_assert_int_eq(fchmod(out, 0755), 0);
	close(in);
	close(out);
	return to;
}

/* A directory put cannot read: its files are not sent, and that is a
 * failure (exit 1), not a silent skip; a symlink is not followed, and
 * said.  Run as nobody when root (root reads any directory).  nobody
 * must reach the binary and the tree wherever the checkout and $TMPDIR
 * live (a 0700 home; pam_tmpdir's TMPDIR is 0700 too) and whatever the
 * umask: both go in a directory of the test's own under /tmp, each mode
 * set. */
START_TEST(test_put_unreadable)
{
	char *src = NULL, *sub, *f, *log, *bin = h_bin("mkv"), *run;
	char own[] = "/tmp/mkvtest.XXXXXX";
	int st;
	pid_t pid;
	cluster_up_kind(VOL_MKV);
	ck_assert_ptr_nonnull(mkdtemp(own));
	ck_assert_int_eq(chmod(own, 0755), 0);
	run = copy_exe(bin, own);
	src = xasprintf("%s/unreadable", own);
	sub = xasprintf("%s/locked", src);
	log = xasprintf("%s/unreadable.log", tmp);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	ck_assert_int_eq(chmod(src, 0755), 0);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	f = xasprintf("%s/ok", src);
	write_file(f, "ok", 2);
	ck_assert_int_eq(chmod(f, 0644), 0);
	free(f);
	f = xasprintf("%s/inside", sub);
	write_file(f, "inside", 6);
	free(f);
	f = xasprintf("%s/link", src);
	ck_assert_int_eq(symlink("ok", f), 0);
	free(f);
	ck_assert_int_eq(chmod(sub, 0), 0);
	{
		char *argv[] = {run, "-master", M.base + 7, "put", src, "/u", NULL};
		pid = spawn_unprivileged(argv, log);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 1)
		show_log(log);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	ck_assert(log_has(log, "cannot read this directory"));
	ck_assert(log_has(log, "1 symlinks or special files not sent"));
	ck_assert(log_has(log, "put: 1 files,"));
	chmod(sub, 0755);
	h_rmrf(own);
	free(sub);
	free(src);
	free(log);
	free(run);
	free(bin);
	cluster_down();
}
END_TEST

START_TEST(test_putget)
{
	char *src, *dst, *log, *args_dir;
	int rc;
	const char *e = getenv("MKV_TOOLS_FILES");
	if (e && atoi(e) > 0)
		nfiles = atoi(e);
	cluster_up_kind(_i ? VOL_NGINX : VOL_MKV);
	src = xasprintf("%s/src", tmp);
	dst = xasprintf("%s/dst", tmp);
	log = xasprintf("%s/putget.log", tmp);
	mkdir(src, 0755);
	make_tree(src);
	args_dir = src;

	/* interrupted, then resumed: everything arrives, nothing twice */
	const char *put[] = {"-master", M.base + 7, "-workers", "8", "put", args_dir,
			     "/ds/set 1", NULL};
	struct progress pp = {.prefix = "/ds/set 1/", .dir = dst, .src = src,
			      .want = nfiles / 5 > 0 ? nfiles / 5 : 1};
	int done, files, skipped;
	mkv_interrupt("put", put, log, put_enough, &pp);
	done = count_keys(pp.prefix, 0);
	fprintf(stderr, "putget: put killed with %d of %d files sent\n", done, nfiles);
	ck_assert_int_ge(done, pp.want);
	ck_assert_msg(done < nfiles, "the interrupted put had sent every file");
	rc = mkv_run(false, put, log);
	if (rc != 0)
		show_log(log);
	ck_assert_int_eq(rc, 0);
	ck_assert(log_has(log, " 0 differ, 0 failed"));
	/* what had arrived is skipped (and what was in flight, if it arrived) */
	summary_counts(log, "put", &files, &skipped);
	ck_assert_int_ge(skipped, done);
	ck_assert_int_eq(files + skipped, nfiles);
	ck_assert_int_eq(count_keys(pp.prefix, 0), nfiles);
	rc = mkv_run(false, put, log);
	{
		char want[64];
		snprintf(want, sizeof(want), "put: 0 files, 0.0 MB, %d skipped", nfiles);
		if (rc != 0 || !log_has(log, want)) {
			show_log(log);
			ck_abort_msg("a rerun of put did not skip every file");
		}
	}
	/* a key is the prefix and the file's path, percent-escaped on the wire */
	{
		char *u = key_url("/ds/set 1/q?r#s/f 5?.bin");
		ck_assert_int_eq(h_status("HEAD", u), 302);
		free(u);
	}

	const char *get[] = {"-master", M.base + 7, "-workers", "8", "get", "/ds/set 1/", dst,
			     NULL};
	mkv_interrupt("get", get, log, get_enough, &pp);
	done = part_of_tree(src, dst, true);
	fprintf(stderr, "putget: get killed with %d of %d files fetched\n", done, nfiles);
	ck_assert_int_ge(done, pp.want);
	ck_assert_msg(done < nfiles, "the interrupted get had fetched every file");
	rc = mkv_run(false, get, log);
	if (rc != 0)
		show_log(log);
	ck_assert_int_eq(rc, 0);
	/* the files there, intact, are skipped; only the rest is fetched */
	summary_counts(log, "get", &files, &skipped);
	ck_assert_int_eq(skipped, done);
	ck_assert_int_eq(files, nfiles - done);
	same_tree(src, dst);
	rc = mkv_run(false, get, log);
	{
		char want[64];
		snprintf(want, sizeof(want), "get: 0 files, 0.0 MB, %d skipped", nfiles);
		if (rc != 0 || !log_has(log, want)) {
			show_log(log);
			ck_abort_msg("a rerun of get did not skip every file");
		}
	}
	/* a damaged local file is fetched again */
	{
		char *rel = tree_name(3), *p = xasprintf("%s/%s", dst, rel);
		write_file(p, "damaged", 7);
		rc = mkv_run(false, get, log);
		ck_assert_int_eq(rc, 0);
		ck_assert(log_has(log, "get: 1 files"));
		same_tree(src, dst);
		/* changed locally: put reports it and does not overwrite */
		write_file(p, "changed", 7);
		const char *put2[] = {"-master", M.base + 7, "put", dst, "/ds/set 1", NULL};
		rc = mkv_run(false, put2, log);
		if (rc != 1 || !log_has(log, "1 differ, 0 failed")) {
			show_log(log);
			ck_abort_msg("put of a changed file: exit %d", rc);
		}
		char *key = xasprintf("/ds/set 1/%s", rel), *u = key_url(key);
		struct resp r;
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, true, &r), 200);
		ck_assert_int_ne(r.body.len, 7);
		h_resp_free(&r);
		free(u);
		free(key);
		free(p);
		free(rel);
	}
	/* bad usage */
	{
		const char *bad1[] = {"-master", M.base + 7, "put", src, NULL};
		const char *bad2[] = {"put", src, "/x", NULL};
		const char *bad3[] = {"-master", M.base + 7, "put", "/nonexistent/dir", "/x", NULL};
		char *none = xasprintf("%s/none", tmp);
		const char *bad4[] = {"-master", M.base + 7, "get", "/nonexistent", none, NULL};
		char *out;
		ck_assert_int_eq(mkv_run(false, bad1, log), 2);
		/* the synopsis of the command given, not the server's */
		out = h_read_file(log);
		ck_assert_msg(strstr(out, "mkv: put takes two operands\n"
					  "usage: mkv -master H:P [-workers N] put DIR /prefix\n") &&
			      !strstr(out, "server|rebuild"), "put with one operand: %s", out);
		free(out);
		ck_assert_int_eq(mkv_run(false, bad2, log), 2);
		ck_assert_int_eq(mkv_run(false, bad3, log), 1);
		/* nothing under the prefix: said, exit 1, no directory made */
		ck_assert_int_eq(mkv_run(false, bad4, log), 1);
		ck_assert(log_has(log, "get: no keys under /nonexistent/"));
		ck_assert_int_eq(access(none, F_OK), -1);
		free(none);
	}
	free(src);
	free(dst);
	free(log);
	cluster_down();
}
END_TEST

/* get writes a key only to a safe path below its directory: a key whose
 * rest has a "..", "." or empty segment (an absolute path) is refused and
 * counted failed, and nothing is written outside the directory (or at
 * the absolute path).  The master stores such keys as they come; the
 * dots are percent-escaped on the wire, or curl would resolve them. */
START_TEST(test_get_unsafe)
{
	char *log, *top, *dir, *abs, *abskey;
	const char *unsafe[] = {"/pg/%2E%2E/evil", "/pg/sub/%2E%2E/%2E%2E/evil2", "/pg/%2E%2E",
				"/pg/a/%2E/b", "/pg/a/%2E%2E", NULL};
	int n = 0, files, skipped;
	cluster_up_kind(VOL_MKV);
	log = xasprintf("%s/unsafe.log", tmp);
	top = xasprintf("%s/o1", tmp);
	dir = xasprintf("%s/o1/o2", tmp);
	abs = xasprintf("%s/abs", tmp);
	ck_assert_int_eq(put_key("/pg/ok", "fine", 4), 201);
	for (; unsafe[n]; n++) {
		struct resp r;
		char *u = xasprintf("%s%s", M.base, unsafe[n]);
		ck_assert_int_eq(h_http("PUT", u, "bad", 3, NULL, false, &r), 201);
		h_resp_free(&r);
		free(u);
	}
	abskey = xasprintf("/pg/%s", abs);   /* "/pg//tmp/...": its rest is absolute */
	ck_assert_int_eq(put_key(abskey, "bad", 3), 201);
	n++;
	mkdir(top, 0755);
	{
		const char *get[] = {"-master", M.base + 7, "get", "/pg", dir, NULL};
		int rc = mkv_run(false, get, log);
		if (rc != 1)
			show_log(log);
		ck_assert_int_eq(rc, 1);
	}
	summary_counts(log, "get", &files, &skipped);
	ck_assert_int_eq(files, 1);
	{
		char want[64];
		snprintf(want, sizeof(want), "%d failed", n);
		if (!log_has(log, want))
			show_log(log);
		ck_assert_msg(log_has(log, want), "get did not refuse the %d unsafe keys", n);
	}
	ck_assert(log_has(log, "/pg/../evil: not a safe file name below the directory"));
	ck_assert(log_has(log, abskey));
	/* only the safe key's file, nothing above the directory, nothing at the
	 * absolute path */
	{
		char *ok = xasprintf("%s/ok", dir);
		size_t len;
		char *b = file_bytes(ok, &len);
		ck_assert_uint_eq(len, 4);
		ck_assert_mem_eq(b, "fine", 4);
		free(b);
		free(ok);
	}
	ck_assert_int_eq(count_files(top), 1);
	ck_assert_int_ne(access(abs, F_OK), 0);
	free(abskey);
	free(abs);
	free(dir);
	free(top);
	free(log);
	cluster_down();
}
END_TEST

/* get's temporary file has no name (O_TMPFILE), so no key's file can be
 * it: with keys x and .x.mkv-get (the name the temporary file of x had),
 * each file holds its own key's bytes, run after run (x got the
 * dotfile's bytes, and the summary said "2 files, 0 failed").  And a
 * rerun that skips every file still syncs (a killed run's files may not
 * be on disk yet): seen with strace, when there is one. */
START_TEST(test_get_tmpname)
{
	char *log, *dir, *x, *dot, *trace, *bin = h_bin("mkv");
	static const char xv[] = "the bytes of x", dv[] = "the dotfile's";
	int files, skipped;
	cluster_up_kind(VOL_MKV);
	log = xasprintf("%s/tmpname.log", tmp);
	dir = xasprintf("%s/tmpname", tmp);
	trace = xasprintf("%s/tmpname.strace", tmp);
	x = xasprintf("%s/x", dir);
	dot = xasprintf("%s/.x.mkv-get", dir);
	ck_assert_int_eq(put_key("/gt/x", xv, strlen(xv)), 201);
	ck_assert_int_eq(put_key("/gt/.x.mkv-get", dv, strlen(dv)), 201);
	for (int run = 0; run < 6; run++) {
		const char *get[] = {"-master", M.base + 7, "get", "/gt", dir, NULL};
		size_t n;
		char *b;
		h_rmrf(dir);
		ck_assert_int_eq(mkv_run(false, get, log), 0);
		summary_counts(log, "get", &files, &skipped);
		ck_assert_int_eq(files, 2);
		b = file_bytes(x, &n);
		ck_assert_msg(n == strlen(xv) && !memcmp(b, xv, n), "run %d: x holds \"%.*s\"", run,
			      (int)n, b);
		free(b);
		b = file_bytes(dot, &n);
		ck_assert_msg(n == strlen(dv) && !memcmp(b, dv, n), "run %d: .x.mkv-get holds "
			      "\"%.*s\"", run, (int)n, b);
		free(b);
		ck_assert_int_eq(count_files(dir), 2);
	}
	if (access("/usr/bin/strace", X_OK) != 0) {
		fprintf(stderr, "get_tmpname: the rerun's syncfs: SKIPPED: no strace\n");
	} else {
		/* LeakSanitizer does not work under ptrace (SANITIZE=1) */
		char *argv[] = {"/usr/bin/strace", "-f", "-qq", "-e", "trace=syncfs", "-o", trace,
				"-E", "ASAN_OPTIONS=detect_leaks=0", bin, "-master", M.base + 7,
				"get", "/gt", dir, NULL};
		pid_t pid;
		int st;
		char *t;
		unlink(log);
		pid = h_spawn(argv, log);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			show_log(log);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "get under strace: status %d", st);
		summary_counts(log, "get", &files, &skipped);
		ck_assert_int_eq(files, 0);
		ck_assert_int_eq(skipped, 2);
		t = h_read_file(trace);
		ck_assert_msg(t && strstr(t, "syncfs("), "a get that skipped every file did not "
			      "sync: %s", t ? t : "(no trace)");
		free(t);
	}
	free(bin), free(trace), free(x), free(dot), free(dir), free(log);
	cluster_down();
}
END_TEST

/* verify without HASH (a master with -md5sum=false): the md5 a strict
 * majority of a key's replicas has is the truth.  Three replicas, one
 * corrupted on disk: verify reports that one, -fix copies the majority's
 * bytes over it.  Two corrupted, each differently: no majority, reported
 * and failed, and -fix writes nothing. */
START_TEST(test_verify_majority)
{
	static const char *const flags[] = {"-replicas", "3", "-subvolumes", SUBVOLUMES,
					    "-md5sum=false", NULL};
	char locs[RECORD_MAX_LOCS][LOC_MAX], *log, *files[3], *orig, path[PATH_MAX_LEN];
	size_t n;
	int nl;
	httpc_global_init();
	tmp = h_tmpdir();
	for (int v = 0; v < NVOL; v++)
		h_vol_start(&V[v], VOL_MKV);
	memset(&M, 0, sizeof(M));
	h_master_start(&M, V, NVOL, flags);
	log = xasprintf("%s/majority.log", tmp);
	orig = value(7, &n);
	for (int i = 0; i < 10; i++) {
		char key[32];
		snprintf(key, sizeof(key), "/maj/%d", i);
		ck_assert_int_eq(put_key(key, orig, n), 201);
	}
	{   /* no HASH: the master has no md5 to give */
		struct resp r;
		char *u = key_url("/maj/1");
		ck_assert_int_eq(h_http("HEAD", u, NULL, 0, NULL, false, &r), 302);
		ck_assert_ptr_null(h_header(&r, "Content-Md5"));
		h_resp_free(&r);
		free(u);
	}
	const char *verify[] = {"-master", M.base + 7, "verify", NULL};
	const char *fix[] = {"-master", M.base + 7, "-fix", "verify", NULL};
	ck_assert_int_eq(mkv_run(true, verify, log), 0);
	ck_assert(log_has(log, "verify: 10 keys, 30 replicas checked, 0 missing, 0 corrupt"));

	/* one of three corrupted: the odd one is reported, and fixed */
	key_locs("/maj/1", locs, &nl);
	ck_assert_int_eq(nl, 3);
	placement_path("/maj/1", 6, path);
	for (int j = 0; j < 3; j++)
		files[j] = replica_file("/maj/1", locs[j]);
	{
		/* the first replica: the one a "first copy wins" rule would trust */
		int fd = open(files[0], O_WRONLY);
		char *want = xasprintf("/maj/1: http://%s%s is corrupt", locs[0], path);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, "ODD", 3, 10), 3);
		close(fd);
		ck_assert_int_eq(mkv_run(true, verify, log), 1);
		if (!log_has(log, "0 missing, 1 corrupt, 0 fixed, 0 failed") || !log_has(log, want))
			show_log(log);
		ck_assert(log_has(log, "0 missing, 1 corrupt, 0 fixed, 0 failed"));
		ck_assert_msg(log_has(log, want), "verify did not name the odd replica");
		free(want);
	}
	ck_assert_int_eq(mkv_run(true, fix, log), 0);
	ck_assert(log_has(log, "0 missing, 1 corrupt, 1 fixed, 0 failed"));
	for (int j = 0; j < 3; j++) {
		size_t len;
		char *b = file_bytes(files[j], &len);
		ck_assert_msg(len == n && !memcmp(b, orig, n), "%s is not the majority's", files[j]);
		free(b);
	}
	ck_assert_int_eq(mkv_run(true, verify, log), 0);

	/* two of three corrupted, differently: no majority, nothing written */
	for (int j = 1; j < 3; j++) {
		int fd = open(files[j], O_WRONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, j == 1 ? "ONE" : "TWO", 3, 10), 3);
		close(fd);
	}
	ck_assert_int_eq(mkv_run(true, fix, log), 1);
	if (!log_has(log, "no majority") || !log_has(log, "0 corrupt, 0 fixed, 1 failed"))
		show_log(log);
	ck_assert(log_has(log, "/maj/1: no HASH, and its copies disagree with no majority"));
	ck_assert(log_has(log, "0 missing, 0 corrupt, 0 fixed, 1 failed"));
	for (int j = 0; j < 3; j++) {
		size_t len;
		char *b = file_bytes(files[j], &len);
		ck_assert_uint_eq(len, n);
		ck_assert_mem_eq(b + 10, j == 0 ? orig + 10 : j == 1 ? "ONE" : "TWO", 3);
		free(b);
		free(files[j]);
	}
	free(orig);
	free(log);
	cluster_down();
}
END_TEST

Suite *tools_suite(void)
{
	Suite *s = suite_create("tools");
	TCase *tc = tcase_create("volume_md5");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_volume_md5);
	suite_add_tcase(s, tc);
	tc = tcase_create("relink");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_relink);
	suite_add_tcase(s, tc);
	tc = tcase_create("verify");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_verify, 0, 2);
	tcase_add_test(tc, test_verify_under_writes);
	suite_add_tcase(s, tc);
	tc = tcase_create("gc");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_gc, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("missing_index");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_missing_index);
	suite_add_tcase(s, tc);
	tc = tcase_create("not_utf8");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_not_utf8);
	suite_add_tcase(s, tc);
	tc = tcase_create("interrupted");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_interrupted);
	suite_add_tcase(s, tc);
	tc = tcase_create("put_unreadable");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_put_unreadable);
	suite_add_tcase(s, tc);
	tc = tcase_create("get_unsafe");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_get_unsafe);
	suite_add_tcase(s, tc);
	tc = tcase_create("get_tmpname");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_get_tmpname);
	suite_add_tcase(s, tc);
	tc = tcase_create("verify_majority");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_verify_majority);
	suite_add_tcase(s, tc);
	tc = tcase_create("putget");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_putget, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(tools_suite());
	int failed;
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
