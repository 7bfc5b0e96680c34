/* check_ops.c -- `mkv rebuild` and `mkv rebalance` against a real cluster:
 * five volumes, mkv-volume and stock nginx mixed, with subvolumes 10 and 1.
 *
 * 5,000 keys -- unicode, spaces, '?' (whose base64 holds '/', so the blob
 * sits a directory deeper), 189-byte keys -- are written as a master's PUT
 * leaves them (blobs on key2volume's locations, records with HASH, 1% of
 * them unlinked).  Then:
 *   - rebuild, while the master keeps serving, gives back the serving index
 *     record for record (without -from: HASH only where a copy is on an
 *     mkv-volume, and no key unlinked; with -from: identical), and both
 *     commands refuse an index the master holds;
 *   - rebalance offline 5 -> 3 -> 5 volumes (the second run SIGKILLed
 *     once a fifth of its new copies exist, checked for losses, then
 *     rerun), and online 5 -> 4 through
 *     the master's REBALANCE while a reader GETs through the master: every
 *     read succeeds, and a second online run moves nothing (0 moved);
 * and after each step every key reads back byte-identical from every
 * location its record names, those are exactly key2volume's, and no file
 * on any volume's disk is a stray copy.  Also: a dense /xx/ walked by
 * /xx/yy/, copies of a key that differ (only the like ones named), a
 * rebalance whose sources do not match HASH (no copy made from them), and
 * rebuild's exit 1 when a listing fails (a volume down, or answering 500). */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <ftw.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/httpc.h"
#include "../common/placement.h"
#include "../common/record.h"
#include "../master/index.h"
#include "../ops/ops.h"
#include "harness.h"

#define NKEYS_DEFAULT 5000
#define NVOL 5
#define WORKERS 16              /* the -workers of every mkv run */
#define CLIENTS 48              /* the suite's own parallel requests */

struct tkey {
	char key[KEY_MAX + 1];
	size_t klen;
	char *val;
	size_t vlen;
	char md5[33];
	bool unlinked;
};

static struct tkey *K;
static int nkeys = NKEYS_DEFAULT;   /* MKV_OPS_KEYS overrides (development) */
static struct vol V[NVOL];
static char *names[NVOL];
static int replicas, subvolumes;
static char *tmp;               /* scratch dir: indexes and logs */

/* ---- keys ---- */

static bool storable(const char *k, size_t n)
{
	char out[KEY_MAX + 2];
	size_t ol;
	const char *why;
	if (n > KEY_MAX)
		return false;
	/* key_decode percent-decodes: hand it the key with '%' escaped */
	char *enc = url_escape(k, n, true);
	int st = key_decode(enc, strlen(enc), out, &ol, &why);
	free(enc);
	return st == 0 && ol == n && !memcmp(out, k, n);
}

static bool deep(const char *k, size_t n)
{
	char path[PATH_MAX_LEN];
	placement_path(k, n, path);
	return strchr(path + 7, '/') != NULL;
}

static void make_key(int i, struct tkey *t)
{
	for (int salt = 0;; salt++) {
		int n;
		switch (i % 5) {
		case 0:
			n = snprintf(t->key, sizeof(t->key), "/ünï cødé/キー-%d-%d", i, salt);
			break;
		case 1:
			n = snprintf(t->key, sizeof(t->key), "/with space/%d file %d.txt", i, salt);
			break;
		case 2: /* '?' as the 3rd byte of a base64 group encodes as '/' */
			n = snprintf(t->key, sizeof(t->key), "/a?%d?b%d", i, salt);
			break;
		case 3:
			n = snprintf(t->key, sizeof(t->key), "/long/%d-%d-", i, salt);
			memset(t->key + n, 'x', KEY_MAX - (size_t)n);
			n = KEY_MAX;
			t->key[n] = '\0';
			break;
		default:
			n = snprintf(t->key, sizeof(t->key), "/plain/%d/%d", i, salt);
			break;
		}
		t->klen = (size_t)n;
		if (storable(t->key, t->klen) && (i % 5 != 2 || deep(t->key, t->klen)))
			break;
	}
	t->vlen = 1 + (size_t)(i * 37 % 300);
	t->val = xmalloc(t->vlen);
	for (size_t j = 0; j < t->vlen; j++)
		t->val[j] = (char)((i * 131 + (int)j * 7) ^ (int)(j >> 3));
	md5_hex(t->val, t->vlen, t->md5);
	t->unlinked = i % 97 == 5;
}

static void keys_init(void)
{
	K = xcalloc(nkeys, sizeof(*K));
	for (int i = 0; i < nkeys; i++)
		make_key(i, &K[i]);
}

static bool file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	bool found = false;
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static void show_log(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "  | %s", line);
	fclose(f);
}

/* ---- running mkv ---- */

/* Start bin/mkv -volumes <first nvol> [-db db] -replicas R -subvolumes S
 * [extra..] cmd, its output to log. */
static const char *volumes_as;   /* when set: the -volumes of mkv_start, not V's */

static pid_t mkv_start(const char *cmd, int nvol, const char *db, const char *const *extra,
		       const char *log)
{
	char *bin = h_bin("mkv"), rep[8], sv[8];
	char *vols = volumes_as ? xstrdup(volumes_as) : h_volumes_arg(V, nvol);
	char *argv[32];
	int n = 0;
	pid_t pid;
	snprintf(rep, sizeof(rep), "%d", replicas);
	snprintf(sv, sizeof(sv), "%d", subvolumes);
	argv[n++] = bin;
	argv[n++] = "-volumes";
	argv[n++] = vols;
	if (db) {
		argv[n++] = "-db";
		argv[n++] = (char *)db;
	}
	argv[n++] = "-replicas";
	argv[n++] = rep;
	argv[n++] = "-subvolumes";
	argv[n++] = sv;
	for (int i = 0; extra && extra[i]; i++)
		argv[n++] = (char *)extra[i];
	argv[n++] = (char *)cmd;
	argv[n] = NULL;
	pid = h_spawn(argv, log);
	free(bin);
	free(vols);
	return pid;
}

/* mkv_start's command run to its end: the exit code (-1: a signal, said). */
static int mkv(const char *cmd, int nvol, const char *db, const char *const *extra,
	       const char *log)
{
	pid_t pid = mkv_start(cmd, nvol, db, extra, log);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "mkv %s died of signal %d:\n", cmd, WTERMSIG(st));
		show_log(log);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- populating ----
 *
 * Blobs go straight to the volumes and records straight into the index,
 * exactly as a master's PUT (and UNLINK) leaves them: this suite tests the
 * ops, not the master's write path. */

static struct master M;
static struct index *pop_idx;
static atomic_int put_fail;

static char *key_url(const struct master *m, const struct tkey *t)
{
	char *enc = url_escape(t->key, t->klen, true), *u = xasprintf("%s%s", m->base, enc);
	free(enc);
	return u;
}

static void put_one(void *ctx, size_t i)
{
	char want[RECORD_MAX_LOCS][LOC_MAX], path[PATH_MAX_LEN], err[256];
	struct record r = {.deleted = K[i].unlinked};
	int n = placement_volumes(K[i].key, K[i].klen, names, NVOL, replicas, subvolumes, want);
	char *val;
	size_t vlen;
	(void)ctx;
	placement_path(K[i].key, K[i].klen, path);
	for (int j = 0; j < n; j++) {
		char *u = xasprintf("http://%s%s", want[j], path);
		int st = httpc_do("PUT", u, K[i].val, K[i].vlen, 30000, NULL, 0, err);
		if (st != 201 && st != 204 && atomic_fetch_add(&put_fail, 1) < 5)
			fprintf(stderr, "PUT %s: %d %s\n", u, st, st < 0 ? err : "");
		free(u);
		r.locs[r.nlocs++] = want[j];
	}
	memcpy(r.hash, K[i].md5, 33);
	val = record_encode(&r, &vlen);
	if (index_write(pop_idx, K[i].key, K[i].klen, val, vlen, true) < 0)
		atomic_fetch_add(&put_fail, 1);
	free(val);
}

static void populate(const char *db)
{
	char *why = NULL;
	pop_idx = index_open(db, &why);
	ck_assert_msg(pop_idx != NULL, "%s", why);
	ops_pool_run(CLIENTS, (size_t)nkeys, put_one, NULL);
	index_close(pop_idx);
	ck_assert_int_eq(atomic_load(&put_fail), 0);
}

/* ---- checking a cluster ---- */

static int vol_of(const char *loc, const char **sub)
{
	for (int v = 0; v < NVOL; v++) {
		size_t n = strlen(names[v]);
		if (!strncmp(loc, names[v], n) && (loc[n] == '\0' || loc[n] == '/')) {
			*sub = loc + n;
			return v;
		}
	}
	return -1;
}

struct check {
	struct index *idx;
	int nvol;
	bool require_placement;  /* records must name key2volume's locations */
	bool unlinked_stay;      /* unlinked keys may keep their old locations */
	atomic_int bad_record, bad_blob;
	char **expect;           /* "v<vol><sub><path>" of every copy, sorted */
	size_t nexpect;
	pthread_mutex_t mu;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_one(void *ctx, size_t i)
{
	struct check *c = ctx;
	struct tkey *t = &K[i];
	char want[RECORD_MAX_LOCS][LOC_MAX], path[PATH_MAX_LEN];
	struct record r;
	size_t vlen;
	char *val = index_get(c->idx, t->key, t->klen, &vlen);
	int nw;
	if (!val) {
		if (atomic_fetch_add(&c->bad_record, 1) < 5)
			fprintf(stderr, "key %s: no record\n", t->key);
		return;
	}
	if (record_parse(val, vlen, &r) < 0)
		r.nlocs = 0;    /* counted bad below */
	nw = placement_volumes(t->key, t->klen, names, c->nvol, replicas, subvolumes, want);
	bool ok = r.deleted == t->unlinked && !strcmp(r.hash, t->md5) && r.nlocs > 0;
	if (c->require_placement && !(t->unlinked && c->unlinked_stay)) {
		ok = ok && r.nlocs == nw;
		for (int j = 0; ok && j < nw; j++)
			ok = !strcmp(r.locs[j], want[j]);
	}
	if (!ok && atomic_fetch_add(&c->bad_record, 1) < 5)
		fprintf(stderr, "key %s: record %.*s (want %s%s%s, deleted=%d)\n", t->key,
			(int)vlen, val, want[0], nw > 1 ? "," : "", nw > 1 ? want[1] : "",
			t->unlinked);
	placement_path(t->key, t->klen, path);
	for (int j = 0; j < r.nlocs; j++) {
		struct buf b = {0};
		char err[256], *u = xasprintf("http://%s%s", r.locs[j], path);
		const char *sub;
		int v = vol_of(r.locs[j], &sub);
		int st = httpc_do("GET", u, NULL, 0, 30000, &b, 0, err);
		if ((st != 200 || b.len != t->vlen || memcmp(b.data, t->val, t->vlen)) &&
		    atomic_fetch_add(&c->bad_blob, 1) < 5)
			fprintf(stderr, "GET %s: %d, %zu bytes (want %zu)\n", u, st, b.len, t->vlen);
		buf_free(&b);
		free(u);
		if (v >= 0) {
			char *e = xasprintf("v%d%s%s", v, sub, path);
			pthread_mutex_lock(&c->mu);
			c->expect[c->nexpect++] = e;
			pthread_mutex_unlock(&c->mu);
		}
	}
	free(val);
}

static struct check *walk_ctx;
static int walk_vol, walk_strays, walk_found;
static bool walk_clean;
static size_t walk_root;

static int walk_file(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	const char *rel = p + walk_root;
	char *e, **hit;
	(void)st, (void)f;
	if (flag != FTW_F || strstr(rel, "/."))
		return 0;
	e = xasprintf("v%d%s", walk_vol, rel);
	hit = bsearch(&e, walk_ctx->expect, walk_ctx->nexpect, sizeof(char *), cmp_str);
	if (hit)
		walk_found++;
	else if (walk_strays++ < 5)
		fprintf(stderr, "stray copy: %s\n", p);
	if (!hit && walk_clean)
		unlink(p);
	free(e);
	return 0;
}

/* Check the index at db against the cluster; returns the number of stray
 * files found on the volumes' disks (removed when clean). */
static int check_cluster_clean(const char *db, int nvol, bool placement, bool unlinked_stay,
			       bool clean)
{
	struct check c = {.nvol = nvol, .require_placement = placement,
			  .unlinked_stay = unlinked_stay};
	char *why = NULL;
	c.idx = index_open(db, &why);
	ck_assert_msg(c.idx != NULL, "%s", why);
	c.expect = xcalloc((size_t)nkeys * RECORD_MAX_LOCS, sizeof(char *));
	pthread_mutex_init(&c.mu, NULL);
	ops_pool_run(CLIENTS, (size_t)nkeys, check_one, &c);
	index_close(c.idx);
	ck_assert_int_eq(atomic_load(&c.bad_record), 0);
	ck_assert_int_eq(atomic_load(&c.bad_blob), 0);

	qsort(c.expect, c.nexpect, sizeof(char *), cmp_str);
	walk_ctx = &c;
	walk_strays = walk_found = 0;
	walk_clean = clean;
	for (int v = 0; v < NVOL; v++) {
		walk_vol = v;
		walk_root = strlen(V[v].dir);
		nftw(V[v].dir, walk_file, 32, FTW_PHYS);
	}
	ck_assert_int_eq(walk_found, (int)c.nexpect);
	for (size_t i = 0; i < c.nexpect; i++)
		free(c.expect[i]);
	free(c.expect);
	pthread_mutex_destroy(&c.mu);
	return walk_strays;
}

static int check_cluster(const char *db, int nvol, bool placement, bool unlinked_stay)
{
	return check_cluster_clean(db, nvol, placement, unlinked_stay, false);
}

/* ---- comparing indexes ---- */

static bool all_nginx(const struct record *r)
{
	for (int i = 0; i < r->nlocs; i++) {
		const char *sub;
		int v = vol_of(r->locs[i], &sub);
		if (v < 0 || V[v].kind != VOL_NGINX)
			return false;
	}
	return true;
}

/* The rebuilt index equals the serving one record for record -- except that,
 * without -from, a key with no copy on an mkv-volume has no HASH and no key
 * is unlinked. */
static void compare_index(const char *served, const char *rebuilt, bool with_from)
{
	char *why = NULL;
	struct index *a = index_open(served, &why), *b;
	struct index_iter *ia, *ib;
	size_t n = 0, hashed = 0;
	ck_assert_msg(a != NULL, "%s", why);
	b = index_open(rebuilt, &why);
	ck_assert_msg(b != NULL, "%s", why);
	ia = index_iter_new(a, "", 0);
	ib = index_iter_new(b, "", 0);
	for (; index_iter_valid(ia); index_iter_next(ia), index_iter_next(ib), n++) {
		size_t kal, kbl, val, vbl, el;
		const char *ka = index_iter_key(ia, &kal), *va = index_iter_value(ia, &val);
		const char *kb, *vb;
		char *vcopy = xmalloc(val + 1), *expect;
		struct record r;
		ck_assert_msg(index_iter_valid(ib), "rebuilt index lacks %.*s", (int)kal, ka);
		kb = index_iter_key(ib, &kbl);
		vb = index_iter_value(ib, &vbl);
		ck_assert_msg(kal == kbl && !memcmp(ka, kb, kal), "key %.*s vs %.*s", (int)kal, ka,
			      (int)kbl, kb);
		memcpy(vcopy, va, val);
		ck_assert_int_eq(record_parse(vcopy, val, &r), 0);
		if (all_nginx(&r) && !with_from)
			r.hash[0] = '\0';   /* -from fills it in from the old index */
		else
			hashed++;
		if (!with_from)
			r.deleted = false;
		expect = record_encode(&r, &el);
		ck_assert_msg(el == vbl && !memcmp(expect, vb, el), "%.*s: served %.*s, rebuilt %.*s",
			      (int)kal, ka, (int)el, expect, (int)vbl, vb);
		free(expect);
		free(vcopy);
	}
	ck_assert_msg(!index_iter_valid(ib), "rebuilt index has extra keys");
	ck_assert_int_eq(n, nkeys);
	ck_assert_uint_gt(hashed, nkeys / 2);
	index_iter_free(ia);
	index_iter_free(ib);
	index_close(a);
	index_close(b);
}

/* ---- reads during an online rebalance ---- */

struct reader {
	atomic_bool stop;
	atomic_int ok, fail;
	pthread_t t;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	unsigned seed = 12345;
	while (!atomic_load(&rd->stop)) {
		int i = (int)(rand_r(&seed) % nkeys);
		struct resp r;
		char *u;
		if (K[i].unlinked)
			continue;
		u = key_url(&M, &K[i]);
		h_http("GET", u, NULL, 0, NULL, true, &r);
		if (r.status == 200 && r.body.len == K[i].vlen &&
		    !memcmp(r.body.data, K[i].val, K[i].vlen)) {
			atomic_fetch_add(&rd->ok, 1);
		} else if (atomic_fetch_add(&rd->fail, 1) < 5) {
			fprintf(stderr, "read during rebalance: GET %s: %ld (%zu bytes)\n", u,
				r.status, r.body.len);
		}
		h_resp_free(&r);
		free(u);
	}
	return NULL;
}

/* Wait until the reader has read n keys well. */
static void wait_reads(struct reader *rd, int n)
{
	uint64_t end = now_ms() + 60000;
	while (atomic_load(&rd->ok) < n) {
		ck_assert_msg(now_ms() < end, "the reader read %d keys in 60 s, want %d",
			      atomic_load(&rd->ok), n);
		usleep(10000);
	}
}

/* ---- the scenario ---- */

static void cluster_up(void)
{
	static const enum vol_kind kinds[NVOL] = {VOL_MKV, VOL_NGINX, VOL_MKV, VOL_NGINX,
						  VOL_MKV};
	const char *only = getenv("MKV_OPS_NGINX_ONLY");
	httpc_global_init();
	if (!K) {
		const char *n = getenv("MKV_OPS_KEYS");
		if (n && atoi(n) > 0)
			nkeys = atoi(n);
		keys_init();
	}
	tmp = h_tmpdir();
	for (int v = 0; v < NVOL; v++) {
		h_vol_start(&V[v], only && *only == '1' ? VOL_NGINX : kinds[v]);
		names[v] = V[v].name;
	}
}

static void cluster_down(void)
{
	h_master_stop(&M);
	for (int v = 0; v < NVOL; v++)
		h_vol_stop(&V[v]);
	h_rmrf(tmp);
	free(tmp);
}

static void master_up(int nvol, const char *db)
{
	char rep[8], sv[8];
	const char *flags[] = {"-replicas", rep, "-subvolumes", sv, NULL};
	snprintf(rep, sizeof(rep), "%d", replicas);
	snprintf(sv, sizeof(sv), "%d", subvolumes);
	memset(&M, 0, sizeof(M));
	if (db) {
		M.db = xstrdup(db);
		M.log = xasprintf("%s/master.log", tmp);
	}
	h_master_start(&M, V, nvol, flags);
}

/* Stop the master but keep its index (h_master_stop would remove it). */
static void master_down(void)
{
	h_master_down(&M);
	free(M.db);
	free(M.log);
	M.db = M.log = NULL;
}

/* mkv(...) must exit 0; its log is shown when it does not. */
#define MKV_OK(cmd, nvol, db, extra, log)                                  \
	do {                                                               \
		int rc_ = mkv(cmd, nvol, db, extra, log);                  \
		if (rc_ != 0)                                              \
			show_log(log);                                     \
		ck_assert_msg(rc_ == 0, "mkv %s exited %d", cmd, rc_);     \
	} while (0)

/* Blobs (regular files, not hidden) on the disks of volumes from..to-1. */
static int files_counted;
static int count_file(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)f;
	files_counted += flag == FTW_F && !strstr(p, "/.");
	return 0;
}

static int files_on(int from, int to)
{
	files_counted = 0;
	for (int v = from; v < to; v++)
		nftw(V[v].dir, count_file, 32, FTW_PHYS);
	return files_counted;
}

/* How many records of the index at db name exactly key2volume's locations
 * over the first nvol volumes. */
static int placed(const char *db, int nvol)
{
	char *why = NULL;
	struct index *idx = index_open(db, &why);
	int n = 0;
	ck_assert_msg(idx != NULL, "%s", why);
	for (int i = 0; i < nkeys; i++) {
		char want[RECORD_MAX_LOCS][LOC_MAX];
		struct record r;
		size_t vlen;
		char *val = index_get(idx, K[i].key, K[i].klen, &vlen);
		int nw = placement_volumes(K[i].key, K[i].klen, names, nvol, replicas, subvolumes,
					   want);
		bool same = val && record_parse(val, vlen, &r) == 0 && r.nlocs == nw;
		for (int j = 0; same && j < nw; j++)
			same = !strcmp(r.locs[j], want[j]);
		n += same;
		free(val);
	}
	index_close(idx);
	return n;
}

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

/* How long a command may take to show progress, or a state to come, before
 * it counts as hung: many times a sanitizer build's on a loaded machine. */
#define LIVENESS_MS 120000

static uint64_t timed(uint64_t *t0)
{
	uint64_t now = now_ms(), d = now - *t0;
	*t0 = now;
	return d;
}

START_TEST(test_rebuild_rebalance)
{
	char *served = xasprintf("%s/served", tmp), *rebuilt = xasprintf("%s/rebuilt", tmp);
	char *rebuilt2 = xasprintf("%s/rebuilt2", tmp), *log = xasprintf("%s/ops.log", tmp);
	const char *from[] = {"-from", served, NULL};
	const char *online[3] = {"-master", NULL, NULL};
	struct reader rd = {0};
	uint64_t t = now_ms(), took;
	int strays;

	replicas = _i == 0 ? 3 : 2;
	subvolumes = _i == 0 ? 10 : 1;
	fprintf(stderr, "== %d keys, 5 volumes (mkv, nginx, mkv, nginx, mkv), replicas %d, "
		"subvolumes %d\n", nkeys, replicas, subvolumes);
	for (int v = 0; v < NVOL; v++)
		fprintf(stderr, "   %s %s %s\n", V[v].name, V[v].kind == VOL_MKV ? "mkv" : "nginx", V[v].dir);

	populate(served);
	fprintf(stderr, "populated in %llu ms\n", (unsigned long long)timed(&t));
	master_up(NVOL, served);

	/* the serving index is locked: both commands refuse it, clearly */
	unlink(log);
	ck_assert_int_eq(mkv("rebuild", NVOL, served, NULL, log), 1);
	ck_assert(file_has(log, "in use"));
	unlink(log);
	ck_assert_int_eq(mkv("rebalance", NVOL, served, NULL, log), 1);
	ck_assert(file_has(log, "in use"));

	/* rebuild while the master serves: every key back, unlinked ones live */
	unlink(log);
	MKV_OK("rebuild", NVOL, rebuilt, NULL, log);
	took = timed(&t);
	show_log(log);
	ck_assert(file_has(log, "unlinked"));
	if (replicas < 3)   /* some keys then sit on nginx volumes only */
		ck_assert(file_has(log, "(nginx)"));
	fprintf(stderr, "rebuild: %llu ms (%.0f keys/s)\n", (unsigned long long)took,
		took ? nkeys * 1000.0 / (double)took : 0.0);
	master_down();
	compare_index(served, rebuilt, false);

	/* with -from the unlinked keys stay unlinked: equal record for record */
	unlink(log);
	MKV_OK("rebuild", NVOL, rebuilt2, from, log);
	compare_index(served, rebuilt2, true);
	ck_assert_int_eq(check_cluster(served, NVOL, true, false), 0);
	timed(&t);

	/* offline 5 -> 3 */
	unlink(log);
	MKV_OK("rebalance", 3, served, NULL, log);
	took = timed(&t);
	show_log(log);
	fprintf(stderr, "rebalance 5->3: %llu ms\n", (unsigned long long)took);
	ck_assert_int_eq(check_cluster(served, 3, true, false), 0);
	timed(&t);

	/* 3 -> 5, SIGKILLed once a fifth of the copies it makes on volumes 4
	 * and 5 are there (the kill cannot come after its end): nothing lost;
	 * then run again to the end */
	{
		int copies = 0, before = placed(served, NVOL), after, st;
		uint64_t end = now_ms() + LIVENESS_MS;
		pid_t pid;
		for (int i = 0; i < nkeys; i++) {
			char want[RECORD_MAX_LOCS][LOC_MAX];
			int nw = placement_volumes(K[i].key, K[i].klen, names, NVOL, replicas,
						   subvolumes, want);
			for (int j = 0; j < nw; j++) {
				const char *sub;
				copies += vol_of(want[j], &sub) >= 3;
			}
		}
		ck_assert_int_eq(files_on(3, NVOL), 0);
		ck_assert_int_gt(copies, 0);
		unlink(log);
		pid = mkv_start("rebalance", NVOL, served, NULL, log);
		/* it runs in steps of 20 ms and is counted while stopped: killed
		 * within a step of the fifth, never after its end */
		for (;;) {
			ck_assert_msg(run_a_little(pid, 20, &st),
				      "rebalance 3->5 ended (status %#x) before it could be killed",
				      st);
			if (files_on(3, NVOL) >= (copies + 4) / 5)
				break;
			ck_assert_msg(now_ms() < end, "rebalance 3->5: no progress in %d s",
				      LIVENESS_MS / 1000);
		}
		ck_assert_int_eq(kill(pid, SIGKILL), 0);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		if (!WIFSIGNALED(st))
			show_log(log);
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
			      "rebalance 3->5 ended (status %#x) before the kill", st);
		after = placed(served, NVOL);
		fprintf(stderr, "rebalance 3->5 killed: %d of %d keys where 5 volumes put them "
			"(%d before), %d of %d new copies made\n", after, nkeys, before,
			files_on(3, NVOL), copies);
		ck_assert_int_gt(after, before);
		ck_assert_int_lt(after, nkeys);
	}
	check_cluster(served, NVOL, false, false);
	unlink(log);
	MKV_OK("rebalance", NVOL, served, NULL, log);
	show_log(log);
	strays = check_cluster_clean(served, NVOL, true, false, true);
	/* a kill between a record's update and its old copy's delete leaves
	 * that copy behind: at most one per move in flight */
	ck_assert_int_le(strays, WORKERS * OPS_MOVES_PER_WORKER * replicas);
	fprintf(stderr, "rebalance 3->5 killed and rerun: %llu ms, %d leftover copies\n",
		(unsigned long long)timed(&t), strays);
	ck_assert(file_has(log, "keys seen"));

	/* online 5 -> 4 under reads */
	master_up(4, served);
	online[1] = xasprintf("127.0.0.1:%d", M.port);
	ck_assert_int_eq(pthread_create(&rd.t, NULL, reader_main, &rd), 0);
	wait_reads(&rd, 1);   /* the reader runs before the rebalance starts */
	unlink(log);
	MKV_OK("rebalance", 4, NULL, online, log);
	show_log(log);
	took = timed(&t);
	wait_reads(&rd, atomic_load(&rd.ok) + 50);   /* and reads after it */
	atomic_store(&rd.stop, true);
	pthread_join(rd.t, NULL);
	fprintf(stderr, "rebalance 5->4 online: %llu ms, %d reads ok, %d failed\n",
		(unsigned long long)took, atomic_load(&rd.ok), atomic_load(&rd.fail));
	ck_assert_int_eq(atomic_load(&rd.fail), 0);
	ck_assert_int_gt(atomic_load(&rd.ok), 100);
	/* run again: nothing is left to move, unlinked keys included (the
	 * master's Key-Balance says which REBALANCE moved nothing) */
	unlink(log);
	MKV_OK("rebalance", 4, NULL, online, log);
	if (!file_has(log, " 0 moved"))
		show_log(log);
	ck_assert(file_has(log, " 0 moved"));
	/* old copies go a grace period after each switch, while the master
	 * runs: the volumes come to hold one copy per replica of each key and
	 * no more; a master that takes no REBALANCE ?unlinked leaves unlinked
	 * keys where they were */
	{
		char *u = key_url(&M, &K[5]), *q = xasprintf("%s?unlinked", u);
		bool moves_unlinked = h_status("REBALANCE", q) == 204;
		uint64_t end = now_ms() + LIVENESS_MS;
		int n;
		free(u);
		free(q);
		while ((n = files_on(0, NVOL)) != nkeys * replicas) {
			ck_assert_msg(now_ms() < end, "%d copies on the volumes %d s after the "
				      "rebalance, want %d", n, LIVENESS_MS / 1000, nkeys * replicas);
			usleep(50000);
		}
		master_down();
		ck_assert_int_eq(check_cluster(served, 4, true, !moves_unlinked), 0);
	}
	free((char *)online[1]);
	free(served);
	free(rebuilt);
	free(rebuilt2);
	free(log);
}
END_TEST

/* A dense /xx/ (more than half its /xx/yy/ present) is walked /xx/yy/ by
 * /xx/yy/, a sparse one as a whole: 600 keys whose path starts /3c/ and 40
 * anywhere, two replicas on an mkv-volume and an nginx, all come back. */
START_TEST(test_rebuild_dense)
{
	enum { DENSE = 600, SPARSE = 40 };
	struct tkey *t = xcalloc(DENSE + SPARSE, sizeof(*t));
	char *db = xasprintf("%s/dense.db", tmp), *log = xasprintf("%s/dense.log", tmp), *why;
	struct index *idx;
	struct index_iter *it;
	int n = 0, count = 0;
	replicas = 2;
	subvolumes = 1;
	for (long i = 0; n < DENSE + SPARSE; i++) {
		char path[PATH_MAX_LEN];
		t[n].klen = (size_t)snprintf(t[n].key, sizeof(t[n].key), "dense/%ld", i);
		placement_path(t[n].key, t[n].klen, path);
		if (n >= DENSE || !strncmp(path, "/3c/", 4)) {
			if (n >= DENSE && !strncmp(path, "/3c/", 4))
				continue;
			t[n].val = xasprintf("value of %s", t[n].key);
			t[n].vlen = strlen(t[n].val);
			md5_hex(t[n].val, t[n].vlen, t[n].md5);
			for (int v = 0; v < 2; v++) {
				char *url = xasprintf("http://%s%s", V[v].name, path), err[256];
				ck_assert_int_eq(httpc_do("PUT", url, t[n].val, t[n].vlen, 10000, NULL,
							  0, err) / 100, 2);
				free(url);
			}
			n++;
		}
	}
	ck_assert_int_eq(mkv("rebuild", 2, db, NULL, log), 0);
	show_log(log);
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	for (int i = 0; i < n; i++) {
		char want[2][LOC_MAX];
		struct record r;
		size_t vlen;
		char *v = index_get(idx, t[i].key, t[i].klen, &vlen);
		ck_assert_msg(v != NULL, "%s not rebuilt", t[i].key);
		ck_assert_int_eq(record_parse(v, vlen, &r), 0);
		placement_volumes(t[i].key, t[i].klen, names, 2, 2, 1, want);
		ck_assert_int_eq(r.nlocs, 2);
		ck_assert_str_eq(r.locs[0], want[0]);
		ck_assert_str_eq(r.locs[1], want[1]);
		ck_assert_str_eq(r.hash, t[i].md5);   /* from the mkv-volume's copy */
		free(v);
	}
	it = index_iter_new(idx, "", 0);
	for (; index_iter_valid(it); index_iter_next(it))
		count++;
	index_iter_free(it);
	ck_assert_int_eq(count, n);
	index_close(idx);
	for (int i = 0; i < n; i++)
		free(t[i].val);
	free(t);
	free(db);
	free(log);
}
END_TEST

/* Copies of one key that differ (a write a crash cut short, its orphan
 * not yet collected): the rebuilt record names only the copies like the
 * one its HASH comes from, so that a GET never reads one value here and
 * another there.  One key on two mkv-volumes (md5s differ, sizes do not), one on two
 * nginx volumes (no md5: sizes differ). */
START_TEST(test_rebuild_differ)
{
	static const int on[2][2] = {{0, 2}, {1, 3}};
	static const char *const vals[2][2] = {{"first value", "other value"}, {"aaaa", "bbbbbbbb"}};
	char *db = xasprintf("%s/differ.db", tmp), *log = xasprintf("%s/differ.log", tmp), *why;
	struct index *idx;
	replicas = 2;
	subvolumes = 1;
	for (int k = 0; k < 2; k++) {
		char key[32], path[PATH_MAX_LEN];
		snprintf(key, sizeof(key), "/differ/%d", k);
		placement_path(key, strlen(key), path);
		for (int c = 0; c < 2; c++) {
			char *url = xasprintf("http://%s%s", V[on[k][c]].name, path), err[256];
			ck_assert_int_eq(httpc_do("PUT", url, vals[k][c], strlen(vals[k][c]), 10000,
						  NULL, 0, err) / 100, 2);
			free(url);
		}
	}
	ck_assert_int_eq(mkv("rebuild", 4, db, NULL, log), 0);
	show_log(log);
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	for (int k = 0; k < 2; k++) {
		char key[32];
		struct record r;
		size_t vlen;
		char *v;
		snprintf(key, sizeof(key), "/differ/%d", k);
		v = index_get(idx, key, strlen(key), &vlen);
		ck_assert_msg(v != NULL, "%s not rebuilt", key);
		ck_assert_int_eq(record_parse(v, vlen, &r), 0);
		ck_assert_msg(r.nlocs == 1, "%s: copies that differ, and the record names %d", key,
			      r.nlocs);
		if (r.hash[0]) {   /* HASH is the md5 of the copy named */
			char md5[33];
			int c = !strcmp(r.locs[0], V[on[k][0]].name) ? 0 : 1;
			md5_hex(vals[k][c], strlen(vals[k][c]), md5);
			ck_assert_str_eq(r.hash, md5);
		}
		free(v);
	}
	index_close(idx);
	free(db);
	free(log);
}
END_TEST

/* ---- a copy whose source is corrupt ---- */

/* A record of key naming key2volume's locations over the first nvol
 * volumes, with HASH, and its blobs there: as a master's PUT leaves it.
 * locs gets the locations; returns how many. */
static int put_direct(struct index *idx, const char *key, const char *val, int nvol,
		      char locs[][LOC_MAX])
{
	struct record r = {0};
	char path[PATH_MAX_LEN], err[256], *enc;
	size_t elen;
	int n = placement_volumes(key, strlen(key), names, nvol, replicas, subvolumes, locs);
	placement_path(key, strlen(key), path);
	for (int j = 0; j < n; j++) {
		char *u = xasprintf("http://%s%s", locs[j], path);
		ck_assert_int_eq(httpc_do("PUT", u, val, strlen(val), 10000, NULL, 0, err) / 100, 2);
		free(u);
		r.locs[r.nlocs++] = locs[j];
	}
	md5_hex(val, strlen(val), r.hash);
	enc = record_encode(&r, &elen);
	ck_assert_int_eq(index_write(idx, key, strlen(key), enc, elen, true), 0);
	free(enc);
	return n;
}

/* The file of the blob at loc (V's "host:port[/svNN]") for key. */
static char *blob_file(const char *key, const char *loc)
{
	char path[PATH_MAX_LEN];
	const char *sub;
	int v = vol_of(loc, &sub);
	ck_assert_int_ge(v, 0);
	placement_path(key, strlen(key), path);
	return xasprintf("%s%s%s", V[v].dir, sub, path);
}

static void corrupt(const char *file)
{
	int fd = open(file, O_WRONLY);
	ck_assert_msg(fd >= 0, "open %s", file);
	ck_assert_int_eq(pwrite(fd, "X", 1, 3), 1);
	close(fd);
}

/* Any file, hidden ones too, in the directory of the blob at file? */
static bool dir_has_files(const char *file)
{
	char *d = xstrdup(file);
	DIR *dir;
	struct dirent *e;
	int n = 0;
	*strrchr(d, '/') = '\0';
	dir = opendir(d);
	while (dir && (e = readdir(dir)))
		n += e->d_type == DT_REG;
	if (dir)
		closedir(dir);
	free(d);
	return n > 0;
}

/* Rebalance copies a blob only when its bytes match the record's HASH.
 * Keys on volumes 1-3 go to 1-5 (one whose new copy lands on an nginx
 * volume, one on an mkv-volume, for each case): with the first source
 * corrupt the copy from it is aborted, said, and made from the good one;
 * with every source corrupt no new location keeps anything (not even a
 * hidden temporary file), the key fails and keeps its record and its old
 * copies, and rebalance exits 1. */
START_TEST(test_rebalance_corrupt)
{
	char *db = xasprintf("%s/corrupt.db", tmp), *log = xasprintf("%s/corrupt.log", tmp), *why;
	struct { char key[32]; char old[RECORD_MAX_LOCS][LOC_MAX]; int nold, fresh; bool all; }
		k[4];
	struct index *idx;
	int found = 0;
	replicas = 2;
	subvolumes = 1;
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	/* keys with one new location, on volume 4 (nginx) or 5 (mkv) */
	for (int i = 0; found < 4; i++) {
		char want[RECORD_MAX_LOCS][LOC_MAX], old[RECORD_MAX_LOCS][LOC_MAX], key[32];
		int fresh = -1, nf = 0;
		snprintf(key, sizeof(key), "/corrupt/%d", i);
		placement_volumes(key, strlen(key), names, 3, 2, 1, old);
		placement_volumes(key, strlen(key), names, NVOL, 2, 1, want);
		for (int j = 0; j < 2; j++)
			if (strcmp(want[j], old[0]) && strcmp(want[j], old[1]))
				fresh = j, nf++;
		/* k[0], k[1]: new copy on volume 4, 5; k[2], k[3] likewise */
		if (nf != 1 || strcmp(want[fresh], names[3 + found % 2]))
			continue;
		snprintf(k[found].key, sizeof(k[found].key), "%s", key);
		k[found].nold = put_direct(idx, key, key, 3, k[found].old);
		k[found].fresh = 3 + found % 2;
		k[found].all = found >= 2;
		found++;
	}
	index_close(idx);
	for (int i = 0; i < 4; i++)   /* the first source; for k[2], k[3] both */
		for (int j = 0; j < (k[i].all ? 2 : 1); j++) {
			char *f = blob_file(k[i].key, k[i].old[j]);
			corrupt(f);
			free(f);
		}
	unlink(log);
	ck_assert_int_eq(mkv("rebalance", NVOL, db, NULL, log), 1);
	show_log(log);
	ck_assert(file_has(log, "2 moved, 2 failed"));
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	for (int i = 0; i < 4; i++) {
		char want[RECORD_MAX_LOCS][LOC_MAX], md5[33], *f, *msg, *val;
		struct record r;
		size_t vlen;
		int nw = placement_volumes(k[i].key, strlen(k[i].key), names, NVOL, 2, 1, want);
		val = index_get(idx, k[i].key, strlen(k[i].key), &vlen);
		ck_assert_ptr_nonnull(val);
		ck_assert_int_eq(record_parse(val, vlen, &r), 0);
		/* the aborted copy from the corrupt source is said */
		md5_hex(k[i].key, strlen(k[i].key), md5);
		msg = xasprintf("GET http://%s", k[i].old[0]);
		ck_assert_msg(file_has(log, msg), "%s: no word of the corrupt source", k[i].key);
		free(msg);
		msg = xasprintf("source bytes do not match md5 %s", md5);
		ck_assert(file_has(log, msg));
		free(msg);
		f = blob_file(k[i].key, names[k[i].fresh]);
		if (!k[i].all) {
			/* moved, its new copy the good bytes */
			FILE *fp = fopen(f, "rb");
			char got[64] = "";
			size_t n;
			ck_assert_int_eq(r.nlocs, nw);
			for (int j = 0; j < nw; j++) {   /* named, and there */
				char *wf = blob_file(k[i].key, want[j]);
				ck_assert_str_eq(r.locs[j], want[j]);
				ck_assert_msg(access(wf, F_OK) == 0, "%s: no copy at %s", k[i].key, want[j]);
				free(wf);
			}
			ck_assert_msg(fp != NULL, "%s: no new copy", k[i].key);
			n = fread(got, 1, sizeof(got), fp);
			fclose(fp);
			ck_assert_uint_eq(n, strlen(k[i].key));
			ck_assert_mem_eq(got, k[i].key, n);
		} else {
			/* failed: record and old copies as they were, nothing new */
			msg = xasprintf("rebalance: %s: no replica could be read intact", k[i].key);
			ck_assert_msg(file_has(log, msg), "%s: failure not said", k[i].key);
			free(msg);
			ck_assert_int_eq(r.nlocs, k[i].nold);
			for (int j = 0; j < k[i].nold; j++) {
				char *of = blob_file(k[i].key, k[i].old[j]);
				ck_assert_str_eq(r.locs[j], k[i].old[j]);
				ck_assert_msg(access(of, F_OK) == 0, "%s: old copy %s gone", k[i].key, of);
				free(of);
			}
			ck_assert_msg(!dir_has_files(f), "%s: volume %d keeps a file of the aborted copy",
				      k[i].key, k[i].fresh + 1);
		}
		ck_assert_str_eq(r.hash, md5);
		free(f);
		free(val);
	}
	index_close(idx);
	free(db);
	free(log);
}
END_TEST

/* ---- a listing that fails ---- */

/* A volume that answers every request 500, or (top_ok) lists its top
 * directory as holding /ab/ and answers 500 for the rest. */
struct fake {
	int fd, port;
	bool top_ok;
	bool partial;      /* answers a GET with 200, 1,000 of 100,000 bytes, then closes */
	const char *relay; /* closer_main: the volume whose answers it relays, */
	int per_conn;      /* this many per connection */
	atomic_int conns, dropped;   /* closer_main: connections; ones closed on unread GETs */
	atomic_bool stop;
	pthread_t t;
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	while (!atomic_load(&f->stop)) {
		struct pollfd p = {.fd = f->fd, .events = POLLIN};
		char req[4096], *resp;
		ssize_t n, got = 0;
		int c;
		if (poll(&p, 1, 50) <= 0 || (c = accept(f->fd, NULL, NULL)) < 0)
			continue;
		while (got < (ssize_t)sizeof(req) - 1 &&
		       (n = recv(c, req + got, sizeof(req) - 1 - (size_t)got, 0)) > 0) {
			got += n;
			req[got] = '\0';
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		req[got] = '\0';
		if (f->partial) {
			char part[1000];
			memset(part, 'p', sizeof(part));
			resp = xasprintf("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n%.1000s",
					 part);
		} else if (f->top_ok && !strncmp(req, "GET / ", 6)) {
			const char *body = "[{\"name\":\"ab\",\"type\":\"directory\"}]";
			resp = xasprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
					 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
					 strlen(body), body);
		} else {
			resp = xasprintf("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n"
					 "Connection: close\r\n\r\nboom");
		}
		h_send(c, resp, strlen(resp));
		free(resp);
		close(c);
	}
	return NULL;
}

static void fake_start_as(struct fake *f, bool top_ok, bool partial)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	memset(f, 0, sizeof(*f));
	f->top_ok = top_ok;
	f->partial = partial;
	f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(f->fd, 0);
	ck_assert_int_eq(bind(f->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(f->fd, 64), 0);
	ck_assert_int_eq(getsockname(f->fd, (struct sockaddr *)&a, &al), 0);
	f->port = ntohs(a.sin_port);
	ck_assert_int_eq(pthread_create(&f->t, NULL, fake_main, f), 0);
}

static void fake_start(struct fake *f, bool top_ok)
{
	fake_start_as(f, top_ok, false);
}

static void fake_stop(struct fake *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->t, NULL);
	close(f->fd);
}

/* A volume that closes each connection after f->per_conn answers without
 * saying so (no Connection: close), GETs it was sent behind them unread:
 * rebuild's pipelined listings must be sent again on a new connection.
 * It relays f->relay's answers, with a Content-Length. */
static void *closer_main(void *arg)
{
	struct fake *f = arg;
	while (!atomic_load(&f->stop)) {
		struct pollfd p = {.fd = f->fd, .events = POLLIN};
		char req[16384], *end;
		size_t got = 0;
		int c, answered = 0;
		if (poll(&p, 1, 50) <= 0 || (c = accept(f->fd, NULL, NULL)) < 0)
			continue;
		/* a connection that asks less (the command's read of the marker,
		 * kept alive) does not hold the others back */
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){1, 0}, sizeof(struct timeval));
		while (answered < f->per_conn) {
			char target[1024], err[256], *u, *head;
			struct buf body = {0};
			ssize_t n;
			size_t used;
			int st;
			while (!(end = memmem(req, got, "\r\n\r\n", 4)) && got < sizeof(req) &&
			       (n = recv(c, req + got, sizeof(req) - got, 0)) > 0)
				got += (size_t)n;
			if (!end || sscanf(req, "GET %1023s ", target) != 1)
				break;
			u = xasprintf("http://%s%s", f->relay, target);
			st = httpc_do("GET", u, NULL, 0, 10000, &body, 0, err);
			head = xasprintf("HTTP/1.1 %d X\r\nContent-Length: %zu\r\n\r\n", st, body.len);
			h_send(c, head, strlen(head));
			h_send(c, body.data ? body.data : "", body.len);
			free(head);
			free(u);
			buf_free(&body);
			used = (size_t)(end + 4 - req);
			memmove(req, req + used, got - used);
			got -= used;
			answered++;
		}
		/* what came behind the last GET answered, unread */
		usleep(20000);
		if (got || recv(c, req, sizeof(req), MSG_DONTWAIT) > 0)
			atomic_fetch_add(&f->dropped, 1);
		atomic_fetch_add(&f->conns, 1);
		close(c);
	}
	return NULL;
}

/* rebuild over v0,v1 and the volume "other": exit 1 and the summary's
 * "FAILED: the index is incomplete" when a listing failed. */
static void rebuild_with(const char *other, const char *db, const char *log, int want_rc)
{
	char *vols = xasprintf("%s,%s%s%s", V[0].name, V[1].name, other ? "," : "",
			       other ? other : "");
	int rc;
	volumes_as = vols;
	unlink(log);
	rc = mkv("rebuild", 3, db, NULL, log);
	volumes_as = NULL;
	if (rc != want_rc)
		show_log(log);
	ck_assert_msg(rc == want_rc, "rebuild with %s: exit %d, want %d", other ? other : "no third",
		      rc, want_rc);
	ck_assert(file_has(log, "FAILED: the index is incomplete") == (want_rc != 0));
	free(vols);
}

/* Rebuild exits 1, saying the index is incomplete, when a listing fails
 * for good: a volume that is down, one that answers 500 to every listing,
 * and one whose top listing works but whose /ab/ answers 500.  Over the
 * volumes that answer, it exits 0, also when one of them drops its
 * connections with pipelined listings unanswered. */
START_TEST(test_rebuild_failed_listing)
{
	char *log = xasprintf("%s/failed.log", tmp), *db;
	struct fake f;
	replicas = 1;
	subvolumes = 1;
	for (int i = 0; i < 20; i++) {
		char key[32], path[PATH_MAX_LEN], err[256], *u;
		snprintf(key, sizeof(key), "/listed/%d", i);
		placement_path(key, strlen(key), path);
		u = xasprintf("http://%s%s", V[i % 2].name, path);
		ck_assert_int_eq(httpc_do("PUT", u, key, strlen(key), 10000, NULL, 0, err) / 100, 2);
		free(u);
	}
	db = xasprintf("%s/ok.db", tmp);
	rebuild_with(NULL, db, log, 0);
	ck_assert(file_has(log, "rebuild: 20 keys"));
	free(db);
	/* down */
	{
		char *name = xstrdup(V[2].name);
		h_vol_down(&V[2]);
		db = xasprintf("%s/down.db", tmp);
		rebuild_with(name, db, log, 1);
		ck_assert(file_has(log, name));
		free(db);
		free(name);
		h_vol_respawn(&V[2]);
	}
	for (int top_ok = 0; top_ok < 2; top_ok++) {
		char name[32];
		fake_start(&f, top_ok);
		snprintf(name, sizeof(name), "127.0.0.1:%d", f.port);
		db = xasprintf("%s/fake%d.db", tmp, top_ok);
		rebuild_with(name, db, log, 1);
		ck_assert(file_has(log, top_ok ? "/ab/ failed: 500" : "/ failed: 500"));
		fake_stop(&f);
		free(db);
	}
	/* one that closes mid-listing, every time: that listing fails, said */
	{
		char name[32];
		fake_start_as(&f, false, true);
		snprintf(name, sizeof(name), "127.0.0.1:%d", f.port);
		db = xasprintf("%s/cut.db", tmp);
		rebuild_with(name, db, log, 1);
		ck_assert(file_has(log, "the connection closed mid-answer"));
		fake_stop(&f);
		free(db);
	}
	/* v0 behind a volume that drops its connections after one, or two
	 * answers: every key, nothing failed */
	for (int per = 1; per <= 2; per++) {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t al = sizeof(a);
		char *vols;
		int rc;
		memset(&f, 0, sizeof(f));
		f.relay = V[0].name;
		f.per_conn = per;
		f.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_eq(bind(f.fd, (struct sockaddr *)&a, sizeof(a)), 0);
		ck_assert_int_eq(listen(f.fd, 64), 0);
		ck_assert_int_eq(getsockname(f.fd, (struct sockaddr *)&a, &al), 0);
		ck_assert_int_eq(pthread_create(&f.t, NULL, closer_main, &f), 0);
		vols = xasprintf("127.0.0.1:%d,%s", ntohs(a.sin_port), V[1].name);
		volumes_as = vols;
		db = xasprintf("%s/closer%d.db", tmp, per);
		unlink(log);
		rc = mkv("rebuild", 2, db, NULL, log);
		volumes_as = NULL;
		fake_stop(&f);
		if (rc != 0 || !file_has(log, "rebuild: 20 keys"))
			show_log(log);
		ck_assert_int_eq(rc, 0);
		ck_assert(file_has(log, "rebuild: 20 keys"));
		fprintf(stderr, "closer after %d: %d connections, %d closed with GETs unread\n",
			per, atomic_load(&f.conns), atomic_load(&f.dropped));
		ck_assert_int_gt(atomic_load(&f.dropped), 0);
		free(vols);
		free(db);
	}
	free(log);
}
END_TEST

/* A move whose new location refuses the PUT (a volume that answers 500
 * to everything) fails that key: rebalance exits 1 and says so (fix the
 * cause, then run again), and the
 * record and the old copies stay as they were. */
START_TEST(test_rebalance_put_fails)
{
	char *db = xasprintf("%s/putfail.db", tmp), *log = xasprintf("%s/putfail.log", tmp), *why;
	char fname[32], *vols, key[32], old[RECORD_MAX_LOCS][LOC_MAX];
	char *four[4];
	struct index *idx;
	struct fake f;
	struct record r;
	size_t vlen;
	char *val;
	int nold = 0;
	replicas = 2;
	subvolumes = 1;
	fake_start(&f, false);
	snprintf(fname, sizeof(fname), "127.0.0.1:%d", f.port);
	four[0] = names[0], four[1] = names[1], four[2] = names[2], four[3] = fname;
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	for (int i = 0; !nold; i++) {   /* a key the fourth volume would take */
		char want[RECORD_MAX_LOCS][LOC_MAX];
		snprintf(key, sizeof(key), "/putfail/%d", i);
		placement_volumes(key, strlen(key), four, 4, 2, 1, want);
		if (!strcmp(want[0], fname) || !strcmp(want[1], fname))
			nold = put_direct(idx, key, key, 3, old);
	}
	index_close(idx);
	vols = xasprintf("%s,%s,%s,%s", names[0], names[1], names[2], fname);
	volumes_as = vols;
	unlink(log);
	ck_assert_int_eq(mkv("rebalance", 4, db, NULL, log), 1);
	volumes_as = NULL;
	fake_stop(&f);
	show_log(log);
	ck_assert(file_has(log, "a new location refused the copy"));
	ck_assert(file_has(log, "rebalance: PUT http://127.0.0.1"));
	ck_assert(file_has(log, "rebalance: fix what the lines above say, then run it again"));
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	val = index_get(idx, key, strlen(key), &vlen);
	ck_assert_ptr_nonnull(val);
	ck_assert_int_eq(record_parse(val, vlen, &r), 0);
	ck_assert_int_eq(r.nlocs, nold);
	for (int j = 0; j < nold; j++) {
		char *of = blob_file(key, old[j]);
		ck_assert_str_eq(r.locs[j], old[j]);
		ck_assert_msg(access(of, F_OK) == 0, "old copy %s gone", of);
		free(of);
	}
	free(val);
	index_close(idx);
	free(vols);
	free(db);
	free(log);
}
END_TEST

/* ---- the pull (docs/protocol.md: PUT with Mkv-Pull) ---- */

/* PUT url with Mkv-Pull: src (and Mkv-Pull-Md5: md5 unless NULL); the
 * answer's Mkv-Pull into outcome (16 bytes, "" when absent). */
static long pull_put(const char *url, const char *src, const char *md5, char *outcome)
{
	char *h1 = xasprintf("Mkv-Pull: %s", src), *h2 = xasprintf("Mkv-Pull-Md5: %s", md5);
	const char *hdrs[] = {h1, md5 ? h2 : NULL, NULL};
	struct resp r = {0};
	long st = h_http("PUT", url, NULL, 0, hdrs, false, &r);
	char *o = h_header(&r, "Mkv-Pull");
	snprintf(outcome, 16, "%s", o ? o : "");
	free(o);
	h_resp_free(&r);
	free(h1);
	free(h2);
	return st;
}

/* Nothing at all (no temporary file either) in the directory of url's
 * file on volume v: dir_has_files of that file. */
static bool left_nothing(int v, const char *path)
{
	char *f = xasprintf("%s%s", V[v].dir, path);
	bool none = !dir_has_files(f) && access(f, F_OK) != 0;
	free(f);
	return none;
}

/* An mkv-volume pulls a blob from a peer: the bytes land with their md5;
 * a source outside -peers (or a URL with a query) is refused with
 * nothing fetched; a source that fails mid-body, a 404, or bytes whose
 * md5 is not Mkv-Pull-Md5 leave nothing at the destination; a pull with a
 * body is refused. */
START_TEST(test_pull)
{
	static char val[200000];
	char md5[33], outcome[16], err[256], *peers, *src, *u, *f;
	struct fake bad;
	struct resp r = {0};
	const char *const body_hdr[] = {"Mkv-Pull: x", NULL};
	for (size_t i = 0; i < sizeof(val); i++)
		val[i] = (char)('a' + (i * 7919) % 26);
	md5_hex(val, sizeof(val), md5);
	fake_start_as(&bad, false, true);
	/* V[0], V[2] (mkv-volumes) pull from V[0], V[2] and the fake; V[4] is no peer */
	peers = xasprintf("%s,http://%s/sv01,127.0.0.1:%d", V[0].name, V[2].name, bad.port);
	V[2].peers = peers;
	h_vol_restart(&V[2]);
	src = xasprintf("http://%s/aa/bb/src", V[0].name);
	ck_assert_int_eq(httpc_do("PUT", src, val, sizeof(val), 10000, NULL, 0, err) / 100, 2);
	u = xasprintf("http://%s/aa/bb/src", V[4].name);
	ck_assert_int_eq(httpc_do("PUT", u, val, sizeof(val), 10000, NULL, 0, err) / 100, 2);
	free(u);

	u = xasprintf("http://%s/cc/dd/ok", V[2].name);
	ck_assert_int_eq(pull_put(u, src, md5, outcome), 201);
	ck_assert_str_eq(outcome, "done");
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	ck_assert_uint_eq(r.body.len, sizeof(val));
	ck_assert_mem_eq(r.body.data, val, sizeof(val));
	h_resp_free(&r);
	f = xasprintf("%s/cc/dd/ok", V[2].dir);
	{
		char x[33] = "";
		ck_assert_int_eq(getxattr(f, "user.mkv.md5", x, 32), 32);
		ck_assert_str_eq(x, md5);
	}
	free(f);
	free(u);
	/* without the md5 too */
	u = xasprintf("http://%s/cc/dd/ok2", V[2].name);
	ck_assert_int_eq(pull_put(u, src, NULL, outcome), 201);
	ck_assert_str_eq(outcome, "done");
	free(u);

	/* refused: not a peer (V[4]), a query, no -peers at all (V[4] itself) */
	u = xasprintf("http://%s/ee/ff/x", V[2].name);
	{
		char *other = xasprintf("http://%s/aa/bb/src", V[4].name);
		ck_assert_int_eq(pull_put(u, other, md5, outcome), 403);
		ck_assert_str_eq(outcome, "refused");
		free(other);
		other = xasprintf("%s?x", src);
		ck_assert_int_eq(pull_put(u, other, md5, outcome), 403);
		free(other);
	}
	ck_assert(left_nothing(2, "/ee/ff/x"));
	free(u);
	u = xasprintf("http://%s/ee/ff/x", V[4].name);
	ck_assert_int_eq(pull_put(u, src, md5, outcome), 403);
	ck_assert_str_eq(outcome, "refused");
	ck_assert(left_nothing(4, "/ee/ff/x"));
	free(u);

	/* failed: wrong md5, a source that dies mid-body, a missing source */
	u = xasprintf("http://%s/gg/hh/x", V[2].name);
	ck_assert_int_eq(pull_put(u, src, "0123456789abcdef0123456789abcdef", outcome), 502);
	ck_assert_str_eq(outcome, "failed");
	ck_assert(left_nothing(2, "/gg/hh/x"));
	{
		char *dies = xasprintf("http://127.0.0.1:%d/aa/bb/src", bad.port);
		ck_assert_int_eq(pull_put(u, dies, NULL, outcome), 502);
		ck_assert_str_eq(outcome, "failed");
		free(dies);
	}
	ck_assert(left_nothing(2, "/gg/hh/x"));
	{
		char *gone = xasprintf("http://%s/aa/bb/none", V[0].name);
		ck_assert_int_eq(pull_put(u, gone, NULL, outcome), 404);
		free(gone);
	}
	ck_assert(left_nothing(2, "/gg/hh/x"));
	/* a body with it */
	ck_assert_int_eq(h_http("PUT", u, "abc", 3, body_hdr, false, &r), 400);
	h_resp_free(&r);
	ck_assert(left_nothing(2, "/gg/hh/x"));
	free(u);

	fake_stop(&bad);
	V[2].peers = NULL;
	free(peers);
	free(src);
}
END_TEST

/* A rebalance 3 -> 5 with -peers on the mkv-volumes: each new copy on an
 * mkv-volume is pulled by it, each on nginx streamed through the tool (the
 * summary counts both), and every key reads back whole from every
 * location its record names, which are key2volume's. */
START_TEST(test_rebalance_pull)
{
	char *db = xasprintf("%s/pull.db", tmp), *log = xasprintf("%s/pull.log", tmp), *why;
	char *all = h_volumes_arg(V, NVOL), *msg;
	struct index *idx;
	int pulls = 0, streams = 0, n = 300;
	replicas = 2;
	subvolumes = 1;
	for (int v = 0; v < NVOL; v++)
		if (V[v].kind == VOL_MKV) {
			V[v].peers = all;
			h_vol_restart(&V[v]);
		}
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	for (int i = 0; i < n; i++) {
		char key[32], old[RECORD_MAX_LOCS][LOC_MAX], want[RECORD_MAX_LOCS][LOC_MAX];
		const char *sub;
		int no, nw;
		snprintf(key, sizeof(key), "/pull/%d", i);
		no = put_direct(idx, key, key, 3, old);
		nw = placement_volumes(key, strlen(key), names, NVOL, 2, 1, want);
		for (int j = 0; j < nw; j++) {
			bool had = false;
			for (int k = 0; k < no; k++)
				had |= !strcmp(old[k], want[j]);
			if (!had && V[vol_of(want[j], &sub)].kind == VOL_MKV)
				pulls++;
			else if (!had)
				streams++;
		}
	}
	index_close(idx);
	ck_assert(pulls > 0 && streams > 0);
	unlink(log);
	ck_assert_int_eq(mkv("rebalance", NVOL, db, NULL, log), 0);
	msg = xasprintf("rebalance: %d copies pulled by their volumes, %d streamed through here",
			pulls, streams);
	if (!file_has(log, msg))
		show_log(log);
	ck_assert_msg(file_has(log, msg), "want \"%s\"", msg);
	free(msg);
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	for (int i = 0; i < n; i++) {
		char key[32], want[RECORD_MAX_LOCS][LOC_MAX], path[PATH_MAX_LEN], *val;
		struct record r;
		size_t vlen;
		int nw;
		snprintf(key, sizeof(key), "/pull/%d", i);
		nw = placement_volumes(key, strlen(key), names, NVOL, 2, 1, want);
		val = index_get(idx, key, strlen(key), &vlen);
		ck_assert_ptr_nonnull(val);
		ck_assert_int_eq(record_parse(val, vlen, &r), 0);
		ck_assert_int_eq(r.nlocs, nw);
		placement_path(key, strlen(key), path);
		for (int j = 0; j < nw; j++) {
			struct resp g = {0};
			char *u = xasprintf("http://%s%s", r.locs[j], path);
			ck_assert_str_eq(r.locs[j], want[j]);
			ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &g), 200);
			ck_assert_uint_eq(g.body.len, strlen(key));
			ck_assert_mem_eq(g.body.data, key, strlen(key));
			h_resp_free(&g);
			free(u);
		}
		free(val);
	}
	index_close(idx);
	for (int v = 0; v < NVOL; v++)
		V[v].peers = NULL;
	free(all);
	free(db);
	free(log);
}
END_TEST

/* ---- online rebalance and a corrupt source ---- */

/* docs/operations.md (rebalance): "when the record has a HASH the bytes
 * must match it, or the copy is aborted and no volume keeps it; a missing
 * or corrupt source means the next one is tried" -- online too, through
 * the master's REBALANCE and `mkv rebalance -master`.  Keys on volumes
 * 1-3 go to 1-5, each with one new location, on volume 4 (nginx: the copy
 * streams through the master) or 5 (mkv-volume with -peers: it pulls).
 * With the first source corrupt (same size, other bytes), REBALANCE
 * copies the good one (204); with both corrupt it fails (503, naming why),
 * the record keeps its old locations and HASH, and the new volume keeps
 * no file of it; `mkv rebalance -master` then fails those keys too (exit
 * 1) and copies nothing. */
START_TEST(test_rebalance_corrupt_online)
{
	char *db = xasprintf("%s/corrupt-online.db", tmp), *all = h_volumes_arg(V, NVOL);
	char *log = xasprintf("%s/corrupt-online.log", tmp), *why, master_arg[64];
	struct { char key[40]; char old[RECORD_MAX_LOCS][LOC_MAX]; int nold, fresh; bool all; }
		k[4];
	const char *extra[] = {"-master", master_arg, NULL};
	struct index *idx;
	int found = 0;
	replicas = 2;
	subvolumes = 1;
	for (int v = 0; v < NVOL; v++)
		if (V[v].kind == VOL_MKV) {
			V[v].peers = all;
			h_vol_restart(&V[v]);
		}
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	for (int i = 0; found < 4; i++) {
		char want[RECORD_MAX_LOCS][LOC_MAX], old[RECORD_MAX_LOCS][LOC_MAX], key[40];
		int fresh = -1, nf = 0;
		snprintf(key, sizeof(key), "/corrupt-online/%d", i);
		placement_volumes(key, strlen(key), names, 3, 2, 1, old);
		placement_volumes(key, strlen(key), names, NVOL, 2, 1, want);
		for (int j = 0; j < 2; j++)
			if (strcmp(want[j], old[0]) && strcmp(want[j], old[1]))
				fresh = j, nf++;
		if (nf != 1 || strcmp(want[fresh], names[3 + found % 2]))
			continue;
		snprintf(k[found].key, sizeof(k[found].key), "%s", key);
		k[found].nold = put_direct(idx, key, key, 3, k[found].old);
		k[found].fresh = 3 + found % 2;
		k[found].all = found >= 2;
		found++;
	}
	index_close(idx);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < (k[i].all ? 2 : 1); j++) {
			char *f = blob_file(k[i].key, k[i].old[j]);
			corrupt(f);
			free(f);
		}
	master_up(NVOL, db);
	for (int i = 0; i < 4; i++) {
		char *u = xasprintf("%s%s", M.base, k[i].key), *f, *kv, *want_kv;
		struct resp r;
		long st;
		st = h_http("REBALANCE", u, NULL, 0, NULL, false, &r);
		f = blob_file(k[i].key, names[k[i].fresh]);
		if (!k[i].all) {
			FILE *fp;
			char got[64] = "";
			size_t n;
			ck_assert_msg(st == 204, "REBALANCE %s, one source good: %ld %s", k[i].key, st,
				      r.body.data);
			fp = fopen(f, "rb");
			ck_assert_msg(fp != NULL, "%s: no new copy", k[i].key);
			n = fread(got, 1, sizeof(got), fp);
			fclose(fp);
			ck_assert_msg(n == strlen(k[i].key) && !memcmp(got, k[i].key, n),
				      "%s: the new copy on volume %d is not the good bytes", k[i].key,
				      k[i].fresh + 1);
		} else {
			ck_assert_msg(st == 503 && r.body.data &&
				      strstr(r.body.data, "no replica could be read intact"),
				      "REBALANCE %s, every source corrupt: %ld %s", k[i].key, st,
				      r.body.data);
			ck_assert_msg(!dir_has_files(f), "%s: volume %d keeps a file of the aborted "
				      "copy", k[i].key, k[i].fresh + 1);
		}
		h_resp_free(&r);
		ck_assert_int_eq(h_http("HEAD", u, NULL, 0, NULL, false, &r), 302);
		kv = h_header(&r, "Key-Volumes");
		want_kv = k[i].all ? xasprintf("%s,%s", k[i].old[0], k[i].old[1]) : NULL;
		if (k[i].all)
			ck_assert_msg(kv && !strcmp(kv, want_kv), "%s: Key-Volumes %s after a failed "
				      "REBALANCE, want %s", k[i].key, kv, want_kv);
		h_resp_free(&r);
		free(kv), free(want_kv), free(f), free(u);
	}
	snprintf(master_arg, sizeof(master_arg), "127.0.0.1:%d", M.port);
	unlink(log);
	ck_assert_int_eq(mkv("rebalance", NVOL, NULL, extra, log), 1);
	if (!file_has(log, "0 moved, 2 failed"))
		show_log(log);
	ck_assert(file_has(log, "0 moved, 2 failed"));
	for (int i = 2; i < 4; i++) {
		char *f = blob_file(k[i].key, names[k[i].fresh]);
		ck_assert_msg(!dir_has_files(f), "%s: volume %d keeps a file after mkv rebalance "
			      "-master", k[i].key, k[i].fresh + 1);
		free(f);
	}
	for (int v = 0; v < NVOL; v++)
		V[v].peers = NULL;
	free(all), free(db), free(log);
}
END_TEST

/* ---- verify -rate ---- */

/* docs/operations.md: "-rate MB/s caps what all workers read together
 * (both kinds of volume)".  48 blobs of 128 KiB, 2 replicas over the mixed
 * volumes (hashed on mkv-volumes, streamed from nginx): 12.6 MB read at
 * -rate 2.  The limiter lets through at most one second's bytes ahead
 * (an idle second's credit) plus one blob per worker in flight; the test
 * allows 1.5 times the cap on top of that: bytes <= 1.5 * cap * elapsed +
 * cap * 1 s + workers * blob.  A bound on speed from above only: a slow
 * machine passes it more easily; without the limiter verify reads all of
 * it in a fraction of a second here. */
START_TEST(test_verify_rate)
{
	enum { NBLOB = 48, BLOB = 128 * 1024, WORKERS_HERE = 4 };
	const double cap = 2e6;
	char *db = xasprintf("%s/rate.db", tmp), *log = xasprintf("%s/rate.log", tmp), *why;
	char *val = xmalloc(BLOB + 1);
	const char *extra[] = {"-rate", "2", "-workers", "4", NULL};
	struct index *idx;
	double bytes = 0, secs, allowed;
	uint64_t t0;
	replicas = 2;
	subvolumes = 1;
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	for (int i = 0; i < NBLOB; i++) {
		char key[32], locs[RECORD_MAX_LOCS][LOC_MAX];
		snprintf(key, sizeof(key), "/rate/%d", i);
		for (int j = 0; j < BLOB; j++)
			val[j] = (char)('a' + (i + j) % 26);
		val[BLOB] = '\0';
		bytes += (double)put_direct(idx, key, val, NVOL, locs) * BLOB;
	}
	index_close(idx);
	unlink(log);
	t0 = now_ms();
	MKV_OK("verify", NVOL, db, extra, log);
	secs = (double)(now_ms() - t0) / 1e3;
	allowed = 1.5 * cap * secs + cap + WORKERS_HERE * BLOB;
	fprintf(stderr, "verify -rate 2: %.1f MB in %.2f s = %.2f MB/s\n", bytes / 1e6, secs,
		bytes / 1e6 / secs);
	ck_assert_msg(file_has(log, "0 missing, 0 corrupt"), "verify found damage");
	ck_assert_msg(bytes <= allowed, "verify -rate 2 read %.1f MB in %.2f s (%.2f MB/s): more "
		      "than 1.5 x the cap plus a second's burst and a blob per worker (%.1f MB)",
		      bytes / 1e6, secs, bytes / 1e6 / secs, allowed / 1e6);
	free(val), free(db), free(log);
}
END_TEST

/* As test_rebalance_corrupt, for a blob larger than a small copy (streamed volume to
 * volume): with every source corrupt the key fails, keeps its record,
 * and its new location keeps no byte. */
START_TEST(test_rebalance_corrupt_big)
{
	enum { BIG = 100 * 1024 };   /* over HTTPC_SMALL_MAX */
	char *db = xasprintf("%s/corrupt-big.db", tmp), *log = xasprintf("%s/corrupt-big.log", tmp);
	char *why, *val = xmalloc(BIG + 1), key[32], old[RECORD_MAX_LOCS][LOC_MAX], *f;
	char want[RECORD_MAX_LOCS][LOC_MAX], *rec;
	struct index *idx;
	struct record r;
	size_t vlen;
	int fresh = -1;
	replicas = 2;
	subvolumes = 1;
	memset(val, 'v', BIG);
	val[BIG] = '\0';
	for (int i = 0; fresh < 0; i++) {   /* a key with a new location */
		snprintf(key, sizeof(key), "/corrupt-big/%d", i);
		placement_volumes(key, strlen(key), names, 3, 2, 1, old);
		placement_volumes(key, strlen(key), names, NVOL, 2, 1, want);
		for (int j = 0; j < 2; j++)
			if (strcmp(want[j], old[0]) && strcmp(want[j], old[1]))
				fresh = j;
	}
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	ck_assert_int_eq(put_direct(idx, key, val, 3, old), 2);
	index_close(idx);
	for (int j = 0; j < 2; j++) {
		f = blob_file(key, old[j]);
		corrupt(f);
		free(f);
	}
	unlink(log);
	ck_assert_int_eq(mkv("rebalance", NVOL, db, NULL, log), 1);
	show_log(log);
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	rec = index_get(idx, key, strlen(key), &vlen);
	ck_assert_ptr_nonnull(rec);
	ck_assert_int_eq(record_parse(rec, vlen, &r), 0);
	ck_assert_int_eq(r.nlocs, 2);
	for (int j = 0; j < 2; j++)
		ck_assert_str_eq(r.locs[j], old[j]);
	f = blob_file(key, want[fresh]);
	ck_assert_msg(!dir_has_files(f), "%s: the new location keeps bytes of a corrupt source", key);
	free(f), free(rec), free(val), free(db), free(log);
	index_close(idx);
}
END_TEST

/* ---- a volume named two ways ----
 *
 * Records name volumes as -volumes spelled them when each key was written;
 * "localhost:P", "127.0.0.1:P" and a name from /etc/hosts are one server,
 * one disk.  Keys written through a master whose -volumes spells the first
 * three volumes (mkv-volume, nginx, mkv-volume; replicas 2) one way, then
 * under the other spelling: rebalance offline, online, online with the
 * mkv-volumes' -peers naming both spellings, a REPLACE of every key on a
 * master restarted so, and `verify -fix` (a copy of some keys removed by
 * hand).  Every key must then read back, the right bytes, from two
 * different volumes (each copy a record names, on its disk: the copy "to"
 * the new name is the old file, which the old name's delete took), and the
 * run must say that the two names are one disk.  Loop i: step i % 5, the
 * spelling localhost -> 127.0.0.1 (i < 5) or 127.0.0.1 -> "mkvvol", a name
 * of /etc/hosts in a mount namespace of the test's own (root only). */

#define SPELL_KEYS 40
#define SPELL_VOLS 3

/* "h:p1,h:p2,h:p3" for the first SPELL_VOLS volumes; caller frees. */
static char *spelled(const char *h)
{
	return xasprintf("%s:%d,%s:%d,%s:%d", h, V[0].port, h, V[1].port, h, V[2].port);
}

static bool spell_hosts(void)
{
	char *hosts = xasprintf("%s/hosts", tmp);
	FILE *f = fopen(hosts, "w");
	ck_assert(f != NULL);
	fputs("127.0.0.1 localhost mkvvol\n", f);
	fclose(f);
	ck_assert_msg(unshare(CLONE_NEWNS) == 0, "unshare: %s", strerror(errno));
	ck_assert_msg(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "mount: %s",
		      strerror(errno));
	ck_assert_msg(mount(hosts, "/etc/hosts", NULL, MS_BIND, NULL) == 0, "bind %s: %s", hosts,
		      strerror(errno));
	free(hosts);
	return true;
}

/* Every key's record names two places on two different volumes, each
 * holding val(i) on its disk. */
static void spell_check(const char *db, bool replaced)
{
	char *why;
	struct index *idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	for (int i = 0; i < SPELL_KEYS; i++) {
		char key[32], want[64], path[PATH_MAX_LEN], *v;
		int port[2] = {0, 0};
		struct record r;
		size_t vlen;
		snprintf(key, sizeof(key), "/spelled/%d", i);
		snprintf(want, sizeof(want), "%s %d of a key named twice", replaced ? "new" : "old", i);
		v = index_get(idx, key, strlen(key), &vlen);
		ck_assert_msg(v != NULL, "%s: no record", key);
		ck_assert_int_eq(record_parse(v, vlen, &r), 0);
		ck_assert_msg(r.nlocs == 2, "%s: %d places", key, r.nlocs);
		placement_path(key, strlen(key), path);
		for (int j = 0; j < 2; j++) {
			const char *colon = strchr(r.locs[j], ':');
			char *file = NULL;
			int p = colon ? atoi(colon + 1) : 0;
			for (int k = 0; k < SPELL_VOLS; k++)
				if (V[k].port == p)
					file = xasprintf("%s%s%s", V[k].dir,
							 r.locs[j] + strcspn(r.locs[j], "/"), path);
			ck_assert_msg(file != NULL, "%s: %s is no volume of the test", key, r.locs[j]);
			port[j] = p;
			{
				FILE *f = fopen(file, "r");
				char got[64] = "";
				ck_assert_msg(f != NULL, "%s: copy %s lost (%s)", key, r.locs[j], file);
				got[fread(got, 1, sizeof(got) - 1, f)] = '\0';
				fclose(f);
				ck_assert_msg(!strcmp(got, want), "%s at %s: \"%s\", want \"%s\"", key,
					      r.locs[j], got, want);
			}
			free(file);
		}
		ck_assert_msg(port[0] != port[1], "%s: both copies on one volume (%s, %s)", key,
			      r.locs[0], r.locs[1]);
		free(v);
	}
	index_close(idx);
}

/* method url with body val, again while the master answers 503 (its
 * first checks not done): the status. */
static long spell_write(const char *method, const char *url, const char *val)
{
	long st = 0;
	for (int t = 0; t < 400; t++) {
		struct resp r;
		st = h_http(method, url, val, strlen(val), NULL, false, &r);
		if (st != 201 && st != 503)
			fprintf(stderr, "%s %s: %ld %.*s\n", method, url, st, (int)r.body.len,
				r.body.data ? r.body.data : "");
		h_resp_free(&r);
		if (st != 503)
			break;
		usleep(50000);
	}
	return st;
}

START_TEST(test_respelled)
{
	const char *from = _i < 5 ? "localhost" : "127.0.0.1", *to = _i < 5 ? "127.0.0.1" : "mkvvol";
	static const char *const flags[] = {"-replicas", "2", "-subvolumes", "3", NULL};
	struct vol W[SPELL_VOLS];
	struct master m = {0};
	char *a, *b, *log = xasprintf("%s/spelled.log", tmp), *seen;
	char *peers = NULL, master_at[64];
	int step = _i % 5;
	const char *what[] = {"rebalance offline", "rebalance online", "rebalance with -peers",
			      "REPLACE", "verify -fix"};
	if (_i >= 5 && geteuid() != 0) {
		fprintf(stderr, "%s under a name of /etc/hosts: SKIPPED: not root (a mount "
			"namespace)\n", what[step]);
		free(log);
		return;
	}
	if (_i >= 5)
		spell_hosts();
	a = spelled(from);
	b = spelled(to);
	replicas = 2;
	subvolumes = 3;
	memcpy(W, V, sizeof(W));
	for (int v = 0; v < SPELL_VOLS; v++)
		W[v].name = xasprintf("%s:%d", from, V[v].port);
	h_master_start(&m, W, SPELL_VOLS, flags);
	for (int i = 0; i < SPELL_KEYS; i++) {
		char *u = xasprintf("%s/spelled/%d", m.base, i);
		char *val = xasprintf("old %d of a key named twice", i);
		ck_assert_int_eq(spell_write("PUT", u, val), 201);
		free(u), free(val);
	}
	for (int v = 0; v < SPELL_VOLS; v++) {
		free(W[v].name);
		W[v].name = xasprintf("%s:%d", to, V[v].port);
	}
	if (step == 2) {   /* the mkv-volumes pull from either spelling */
		peers = xasprintf("%s,%s", a, b);
		for (int v = 0; v < SPELL_VOLS; v++)
			if (V[v].kind == VOL_MKV) {
				V[v].peers = peers;
				h_vol_restart(&V[v]);
			}
	}
	volumes_as = b;
	if (step == 0) {
		h_master_down(&m);
		ck_assert_int_eq(mkv("rebalance", SPELL_VOLS, m.db, NULL, log), 0);
		seen = log;
	} else if (step == 1 || step == 2) {
		const char *extra[] = {"-master", master_at, NULL};
		h_master_restart(&m, W, SPELL_VOLS, flags);
		snprintf(master_at, sizeof(master_at), "127.0.0.1:%d", m.port);
		ck_assert_int_eq(mkv("rebalance", SPELL_VOLS, NULL, extra, log), 0);
		h_master_down(&m);   /* its background deletes done (drained) */
		seen = m.log;
	} else if (step == 3) {
		h_master_restart(&m, W, SPELL_VOLS, flags);
		for (int i = 0; i < SPELL_KEYS; i++) {
			char *u = xasprintf("%s/spelled/%d", m.base, i);
			char *val = xasprintf("new %d of a key named twice", i);
			ck_assert_int_eq(spell_write("REPLACE", u, val), 201);
			free(u), free(val);
		}
		h_master_down(&m);
		seen = m.log;
	} else {
		const char *extra[] = {"-fix", NULL};
		char path[PATH_MAX_LEN];
		h_master_down(&m);
		for (int i = 0; i < SPELL_KEYS; i += 4) {   /* one copy of every fourth key gone */
			char key[32];
			bool gone = false;
			snprintf(key, sizeof(key), "/spelled/%d", i);
			placement_path(key, strlen(key), path);
			for (int v = 0; v < SPELL_VOLS && !gone; v++)
				for (int sv = 0; sv < 3 && !gone; sv++) {
					char *f = xasprintf("%s/sv%02X%s", V[v].dir, sv, path);
					gone = unlink(f) == 0;
					free(f);
				}
			ck_assert(gone);
		}
		ck_assert_int_eq(mkv("verify", SPELL_VOLS, m.db, extra, log), 0);
		ck_assert_msg(file_has(log, "10 missing, 0 corrupt, 10 fixed, 0 failed"),
			      "verify -fix did not fix the 10 copies removed");
		seen = log;
	}
	volumes_as = NULL;
	spell_check(m.db, step == 3);
	if (!file_has(seen, "one disk"))
		show_log(seen);
	ck_assert_msg(file_has(seen, "one disk"), "%s under %s: the run did not say the two names "
		      "are one disk", what[step], to);
	if (peers) {
		for (int v = 0; v < SPELL_VOLS; v++)
			if (V[v].kind == VOL_MKV) {
				V[v].peers = NULL;
				h_vol_restart(&V[v]);
			}
		free(peers);
	}
	h_master_stop(&m);
	for (int v = 0; v < SPELL_VOLS; v++)
		free(W[v].name);
	free(a), free(b), free(log);
}
END_TEST

/* A marker's id written late by another process: the master wrote its
 * own into an id-less marker (an older mkv's volumes), then another
 * writer's PUT -- a command or a second master that read the marker
 * before, taken by a volume only now -- replaced it.  The master's id of
 * one spelling is then stale and the other spelling's fresh: they must
 * still be one disk, so REBALANCE under the other spelling deletes no
 * copy that it "moved" onto the very same file. */
START_TEST(test_respelled_late_id)
{
	/* a check round each 30 s: none reads the new ids before the moves */
	static const char *const flags[] = {"-replicas", "2", "-subvolumes", "1", "-voltimeout",
					    "30s", NULL};
	struct vol W[SPELL_VOLS];
	struct master m = {0};
	int fd[SPELL_VOLS];
	replicas = 2;
	subvolumes = 1;
	memcpy(W, V, sizeof(W));
	for (int v = 0; v < SPELL_VOLS; v++)
		W[v].name = xasprintf("localhost:%d", V[v].port);
	h_master_start(&m, W, SPELL_VOLS, flags);
	for (int i = 0; i < SPELL_KEYS; i++) {
		char *u = xasprintf("%s/spelled/%d", m.base, i);
		char *val = xasprintf("old %d of a key named twice", i);
		ck_assert_int_eq(spell_write("PUT", u, val), 201);
		free(u), free(val);
	}
	h_master_down(&m);
	for (int v = 0; v < SPELL_VOLS; v++) {   /* id-less; another writer's PUT under way */
		char *f = xasprintf("%s/.mkv", V[v].dir), *req;
		ck_assert_int_eq(unlink(f), 0);
		free(f);
		fd[v] = h_connect(V[v].port);
		ck_assert_int_ge(fd[v], 0);
		req = xasprintf("PUT /.mkv HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n",
				18 + 3 + 32 + 1);
		ck_assert(h_send(fd[v], req, strlen(req)));
		free(req);
		free(W[v].name);
		W[v].name = xasprintf("127.0.0.1:%d", V[v].port);
	}
	h_master_restart(&m, W, SPELL_VOLS, flags);   /* its checks wrote ids */
	for (int v = 0; v < SPELL_VOLS; v++) {   /* the other writer's ids land */
		char *body = xasprintf("mkv volume marker\nid %031x%d\n", 0, v);
		struct buf out = {0};
		ck_assert(h_send(fd[v], body, strlen(body)));
		ck_assert_int_eq(h_recv_resp(fd[v], &out, 20000, false) / 100, 2);
		buf_free(&out);
		close(fd[v]);
		free(body);
	}
	for (int i = 0; i < SPELL_KEYS; i++) {
		char *u = xasprintf("%s/spelled/%d", m.base, i);
		ck_assert_int_eq(h_status("REBALANCE", u), 204);
		free(u);
	}
	h_master_down(&m);   /* its background deletes done */
	spell_check(m.db, false);
	h_master_stop(&m);
	for (int v = 0; v < SPELL_VOLS; v++)
		free(W[v].name);
}
END_TEST

/* A marker whose first line is its id (written by hand, or by another
 * tool): the id is read, not replaced by a new one. */
START_TEST(test_marker_id_first_line)
{
	static const char *const flags[] = {"-replicas", "1", "-subvolumes", "1", NULL};
	const char id[] = "id 0123456789abcdef0123456789abcdef\n";
	char *f = xasprintf("%s/.mkv", V[0].dir), *got;
	struct master m = {0};
	FILE *w = fopen(f, "w");
	ck_assert(w != NULL);
	fputs(id, w);
	fclose(w);
	h_master_start(&m, V, 1, flags);
	got = h_read_file(f);
	ck_assert_msg(got && !strcmp(got, id), "the marker \"%s\" became \"%s\"", id,
		      got ? got : "(none)");
	h_master_stop(&m);
	free(got), free(f);
}
END_TEST

/* A marker's id changed while the master runs (its disk swapped, or an
 * id another process wrote): the master reads it again and says so. */
START_TEST(test_marker_id_changed)
{
	static const char *const flags[] = {"-replicas", "1", "-subvolumes", "1", NULL};
	char *f = xasprintf("%s/.mkv", V[0].dir);
	struct master m = {0};
	uint64_t end;
	FILE *w;
	h_master_start(&m, V, 1, flags);
	w = fopen(f, "w");
	ck_assert(w != NULL);
	fputs("mkv volume marker\nid 00000000000000000000000000000abc\n", w);
	fclose(w);
	for (end = now_ms() + 30000; now_ms() < end && !file_has(m.log, "id is now"); )
		usleep(100000);
	ck_assert_msg(file_has(m.log, "its marker's id is now 00000000000000000000000000000abc"),
		      "the master did not read the marker's new id");
	h_master_stop(&m);
	free(f);
}
END_TEST

/* Two names of one volume in -volumes: the master and every command
 * refuse to start, naming both (they would put two copies on one disk). */
START_TEST(test_respelled_twice)
{
	char *vols = xasprintf("localhost:%d,127.0.0.1:%d,127.0.0.1:%d", V[0].port, V[0].port,
			       V[1].port);
	char *db = xasprintf("%s/twice.db", tmp), *log = xasprintf("%s/twice.log", tmp);
	char *both = xasprintf("localhost:%d and 127.0.0.1:%d", V[0].port, V[0].port);
	const char *cmds[] = {"server", "rebuild", "rebalance", "verify", "gc"};
	const char *port[] = {"-port", "0", NULL};
	char portbuf[16];
	replicas = 2;
	subvolumes = 1;
	snprintf(portbuf, sizeof(portbuf), "%d", h_free_port());
	port[1] = portbuf;
	volumes_as = vols;
	for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++) {
		pid_t pid;
		int st = 0;
		uint64_t end = now_ms() + 60000;
		unlink(log);
		pid = mkv_start(cmds[c], 3, db, c == 0 ? port : NULL, log);
		while (waitpid(pid, &st, WNOHANG) == 0 && now_ms() < end)
			usleep(20000);
		if (now_ms() >= end) {   /* a server that started: stopped, and failed */
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			ck_abort_msg("mkv %s started with one volume named twice", cmds[c]);
		}
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "mkv %s: status %d", cmds[c],
			      st);
		if (!file_has(log, both))
			show_log(log);
		ck_assert_msg(file_has(log, both), "mkv %s: no error naming %s", cmds[c], both);
	}
	volumes_as = NULL;
	free(vols), free(db), free(log), free(both);
}
END_TEST

Suite *ops_suite(void)
{
	Suite *s = suite_create("ops");
	TCase *tc = tcase_create("rebuild_rebalance");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 900);   /* SANITIZE=1 on a busy machine is slow */
	tcase_add_loop_test(tc, test_rebuild_rebalance, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("rebuild_dense");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_rebuild_dense);
	suite_add_tcase(s, tc);
	tc = tcase_create("rebalance_corrupt");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rebalance_corrupt);
	suite_add_tcase(s, tc);
	tc = tcase_create("rebalance_corrupt_big");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rebalance_corrupt_big);
	suite_add_tcase(s, tc);
	tc = tcase_create("rebalance_corrupt_online");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rebalance_corrupt_online);
	suite_add_tcase(s, tc);
	tc = tcase_create("verify_rate");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_verify_rate);
	suite_add_tcase(s, tc);
	tc = tcase_create("rebuild_failed_listing");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rebuild_failed_listing);
	suite_add_tcase(s, tc);
	tc = tcase_create("rebalance_put_fails");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rebalance_put_fails);
	suite_add_tcase(s, tc);
	tc = tcase_create("rebuild_differ");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rebuild_differ);
	suite_add_tcase(s, tc);
	tc = tcase_create("pull");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_pull);
	tcase_add_test(tc, test_rebalance_pull);
	suite_add_tcase(s, tc);
	tc = tcase_create("respelled");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_respelled, 0, 10);
	tcase_add_test(tc, test_respelled_twice);
	suite_add_tcase(s, tc);
	tc = tcase_create("markers");
	tcase_add_checked_fixture(tc, cluster_up, cluster_down);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_respelled_late_id);
	tcase_add_test(tc, test_marker_id_first_line);
	tcase_add_test(tc, test_marker_id_changed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ops_suite());
	int failed;
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
