/* verify.c -- `mkv verify`: every replica that a record names exists
 * and holds the record's bytes (md5 = HASH; without a HASH, the replicas
 * agree).  -fix copies a good replica over each missing or corrupt one.
 *
 * Hashing: `HEAD /path?md5` makes an mkv-volume read the file and answer
 * its md5 (the bytes, not the xattr written at PUT time), so no blob
 * crosses the network; nginx ignores the argument and answers a plain
 * HEAD, and then the blob is streamed through a small buffer and hashed
 * here.  -rate books every byte read on either path.
 *
 * -fix only ever writes to a replica found missing or corrupt, from one
 * found good, through ops_copy, which checks the source's md5 before the
 * destination gets its last bytes: a good copy is never overwritten and
 * never deleted.  Online, the record is read again from the master just
 * before a fix, and a key that changed meanwhile is left alone.
 *
 * Online (-master) verify sees live keys (?list, then a HEAD per key for
 * Key-Volumes and Content-Md5); offline (-db, the master stopped) every
 * record, unlinked ones too, but not an interrupted PUT's (DELETED, no
 * HASH: gc's business). */
#include "../master/mkv.h"
#include "../master/index.h"
#include "ops.h"
#include "../common/httpc.h"
#include "../common/placement.h"
#include "../common/record.h"
#include "../common/util.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH 4096
#define MAX_LOGS 20
#define HASH_TIMEOUT_MS (3600 * 1000L)   /* a volume hashing a huge blob */
#define TIMEOUT_MS 60000L

struct vr {
	const struct config *cfg;
	char *master;             /* online */
	struct index *idx;        /* offline */
	char **keys, **vals;      /* the batch; vals offline only */
	size_t *klens, *vlens;
	atomic_ulong keys_done, replicas, missing, corrupt, fixed, failed, skipped, logged;
	atomic_ullong bytes;
	uint64_t t0;
};

enum state { ST_GOOD, ST_MISSING, ST_CORRUPT, ST_UNKNOWN };

static void note(struct vr *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct vr *v, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	unsigned long n = atomic_fetch_add(&v->logged, 1);
	if (n > MAX_LOGS)
		return;
	if (n == MAX_LOGS) {
		log_msg("verify: more problems: counted, not logged");
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_msg("verify: %s", line);
}

/* The md5 of the blob at url into md5: 200, 404, or -1 (unreachable or
 * failed; err says why). */
static int replica_md5(struct vr *v, const char *url, char md5[33], char *err)
{
	struct ops_head_info h;
	char *q = xasprintf("%s?md5", url), hdr[33];
	uint64_t size;
	int st = ops_head_info(q, HASH_TIMEOUT_MS, &h, err);
	free(q);
	if (st == 200 && h.md5[0]) {              /* an mkv-volume hashed it */
		if (h.size > 0)
			ops_rate_take((uint64_t)h.size);
		atomic_fetch_add(&v->bytes, h.size > 0 ? (uint64_t)h.size : 0);
		memcpy(md5, h.md5, 33);
		return 200;
	}
	if (st == 200)                             /* nginx: read it here */
		st = ops_stream_get(url, false, -1, true, md5, &size, hdr, err);
	if (st == 200) {
		atomic_fetch_add(&v->bytes, size);
		return 200;
	}
	if (st == 404)
		return 404;
	if (st > 0)
		snprintf(err, 256, "status %d", st);
	return -1;
}

/* Online: the record of key as the master tells it (Key-Volumes and
 * Content-Md5 of a HEAD).  200 with r (pointing into buf) filled; 404
 * when gone or unlinked; else -1. */
static int master_record(struct vr *v, const char *key, size_t klen, char *buf, size_t n,
			 struct record *r)
{
	char *enc = url_escape(key, klen, true), *url = xasprintf("%s%s", v->master, enc), err[256];
	struct ops_head_info h;
	int st = -1;
	for (int tries = 0; tries < 4; tries++) {   /* 503: no replica up, for now */
		if (tries)
			usleep(250000u << tries);
		st = ops_head_info(url, TIMEOUT_MS, &h, err);
		if (st != 503 && st >= 0)
			break;
	}
	free(url);
	free(enc);
	if (st == 404)
		return 404;
	if (st != 302 || !h.volumes[0]) {
		note(v, "HEAD %.*s on the master: %s", (int)klen, key,
		     st < 0 ? err : st == 503 ? "503, no replica is up" : "no Key-Volumes");
		return -1;
	}
	memset(r, 0, sizeof(*r));
	memcpy(r->hash, h.md5, 33);
	snprintf(buf, n, "%s", h.volumes);
	for (char *s = buf, *save = NULL, *t; (t = strtok_r(s, ",", &save)); s = NULL)
		if (r->nlocs < RECORD_MAX_LOCS)
			r->locs[r->nlocs++] = t;
	return 200;
}

static bool same_record(const struct record *a, const struct record *b)
{
	if (strcmp(a->hash, b->hash) || a->nlocs != b->nlocs)
		return false;
	for (int i = 0; i < a->nlocs; i++)
		if (strcmp(a->locs[i], b->locs[i]))
			return false;
	return true;
}

static void verify_key(struct vr *v, const char *key, size_t klen, struct record *r)
{
	char path[PATH_MAX_LEN], md5[RECORD_MAX_LOCS][33], want[33] = "", err[256];
	char *urls[RECORD_MAX_LOCS], *bad[RECORD_MAX_LOCS];
	enum state st[RECORD_MAX_LOCS];
	int nbad = 0, ngood = 0;

	placement_path(key, klen, path);
	for (int i = 0; i < r->nlocs; i++) {
		int s;
		urls[i] = xasprintf("http://%s%s", r->locs[i], path);
		s = replica_md5(v, urls[i], md5[i], err);
		atomic_fetch_add(&v->replicas, 1);
		st[i] = s == 200 ? ST_GOOD : s == 404 ? ST_MISSING : ST_UNKNOWN;
		if (s < 0) {
			note(v, "%.*s: %s: %s", (int)klen, key, urls[i], err);
			atomic_fetch_add(&v->failed, 1);
		}
	}
	if (r->hash[0]) {
		memcpy(want, r->hash, 33);
	} else {
		/* no HASH: the md5 that a strict majority of the copies read have */
		int present = 0;
		for (int i = 0; i < r->nlocs; i++)
			present += st[i] == ST_GOOD;
		for (int i = 0; i < r->nlocs && !want[0]; i++) {
			int same = 0;
			if (st[i] != ST_GOOD)
				continue;
			for (int j = 0; j < r->nlocs; j++)
				same += st[j] == ST_GOOD && !strcmp(md5[i], md5[j]);
			if (2 * same > present)
				memcpy(want, md5[i], 33);
		}
		if (!want[0] && present) {
			note(v, "%.*s: no HASH, and its copies disagree with no majority: "
				"cannot tell the good one", (int)klen, key);
			atomic_fetch_add(&v->failed, 1);
		}
	}
	for (int i = 0; i < r->nlocs; i++) {
		if (st[i] == ST_GOOD && want[0] && strcmp(md5[i], want)) {
			st[i] = ST_CORRUPT;
			atomic_fetch_add(&v->corrupt, 1);
			note(v, "%.*s: %s is corrupt (md5 %s, want %s)", (int)klen, key, urls[i],
			     md5[i], want);
		} else if (st[i] == ST_MISSING) {
			atomic_fetch_add(&v->missing, 1);
			note(v, "%.*s: %s is missing", (int)klen, key, urls[i]);
		}
		if (st[i] == ST_MISSING || st[i] == ST_CORRUPT)
			bad[nbad++] = urls[i];
		ngood += st[i] == ST_GOOD && want[0];
	}
	if (!v->cfg->fix || !nbad || !want[0])
		goto out;
	if (!ngood) {
		note(v, "%.*s: no good copy left to fix the others from", (int)klen, key);
		atomic_fetch_add(&v->failed, (unsigned long)nbad);
		goto out;
	}
	if (v->master) {
		/* the key may have been deleted or rewritten since it was read */
		char buf[1024];
		struct record now;
		if (master_record(v, key, klen, buf, sizeof(buf), &now) != 200 ||
		    !same_record(r, &now)) {
			atomic_fetch_add(&v->skipped, 1);
			goto out;
		}
	}
	/* ops_copy feeds at most OPS_COPY_MAXDST destinations at once */
	for (int d = 0; d < nbad; d += OPS_COPY_MAXDST) {
		int nd = nbad - d < OPS_COPY_MAXDST ? nbad - d : OPS_COPY_MAXDST, got = 1;
		for (int i = 0; i < r->nlocs && got; i++) {
			if (st[i] != ST_GOOD)
				continue;
			got = ops_copy(urls[i], bad + d, nd, want, TIMEOUT_MS, err);
			if (got)
				note(v, "%.*s: copy from %s: %s", (int)klen, key, urls[i], err);
		}
	}
	/* Count what the volumes hold now, not what the copy said. */
	for (int i = 0; i < nbad; i++) {
		char now[33];
		if (replica_md5(v, bad[i], now, err) == 200 && !strcmp(now, want)) {
			atomic_fetch_add(&v->fixed, 1);
		} else {
			note(v, "%.*s: %s could not be fixed", (int)klen, key, bad[i]);
			atomic_fetch_add(&v->failed, 1);
		}
	}
out:
	for (int i = 0; i < r->nlocs; i++)
		free(urls[i]);
}

static void offline_one(void *ctx, size_t i)
{
	struct vr *v = ctx;
	struct record r;
	if (record_parse(v->vals[i], v->vlens[i], &r) < 0) {
		note(v, "%.*s: malformed record", (int)v->klens[i], v->keys[i]);
		atomic_fetch_add(&v->failed, 1);
	} else if (r.deleted && !r.hash[0]) {
		atomic_fetch_add(&v->skipped, 1);   /* an interrupted PUT: see gc */
	} else {
		verify_key(v, v->keys[i], v->klens[i], &r);
	}
	atomic_fetch_add(&v->keys_done, 1);
}

static void online_one(void *ctx, size_t i)
{
	struct vr *v = ctx;
	struct record r;
	char buf[1024];
	int st = master_record(v, v->keys[i], v->klens[i], buf, sizeof(buf), &r);
	if (st == 200)
		verify_key(v, v->keys[i], v->klens[i], &r);
	else if (st < 0)
		atomic_fetch_add(&v->failed, 1);
	atomic_fetch_add(&v->keys_done, 1);
}

static void free_batch(struct vr *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v->keys[i]);
		if (v->vals)
			free(v->vals[i]);
	}
}

static int run_offline(struct vr *v)
{
	char *why = NULL;
	struct index_iter *it;
	v->idx = index_open(v->cfg->db, &why);
	if (!v->idx) {
		log_msg("verify: %s", why);
		if (strstr(why, "in use"))
			log_msg("verify: a master is serving this index: verify online with "
				"-master host:port");
		free(why);
		return -1;
	}
	v->keys = xcalloc(BATCH, sizeof(*v->keys));
	v->vals = xcalloc(BATCH, sizeof(*v->vals));
	v->klens = xcalloc(BATCH, sizeof(*v->klens));
	v->vlens = xcalloc(BATCH, sizeof(*v->vlens));
	it = index_iter_new(v->idx, "", 0);
	while (index_iter_valid(it)) {
		size_t n = 0;
		for (; n < BATCH && index_iter_valid(it); index_iter_next(it), n++) {
			const char *k = index_iter_key(it, &v->klens[n]);
			const char *val = index_iter_value(it, &v->vlens[n]);
			v->keys[n] = xstrndup(k, v->klens[n]);
			v->vals[n] = xstrndup(val, v->vlens[n]);   /* room for the parser's NUL */
		}
		ops_pool_run(v->cfg->workers, n, offline_one, v);
		free_batch(v, n);
	}
	index_iter_free(it);
	free(v->keys);
	free(v->vals);
	free(v->klens);
	free(v->vlens);
	index_close(v->idx);
	return 0;
}

static int run_online(struct vr *v)
{
	return ops_list_each(v->master, "", false, "verify", v->cfg->workers, &v->keys, &v->klens,
			     online_one, v);
}

static void progress_line(void *ctx, char *out, size_t n)
{
	struct vr *v = ctx;
	uint64_t ms = now_ms() - v->t0;
	unsigned long keys = atomic_load(&v->keys_done);
	snprintf(out, n, "verify: %lu keys, %lu replicas, %lu missing, %lu corrupt, %lu fixed, "
		 "%lu failed, %.0f keys/s, %.1f MB/s",
		 keys, atomic_load(&v->replicas), atomic_load(&v->missing),
		 atomic_load(&v->corrupt), atomic_load(&v->fixed), atomic_load(&v->failed),
		 ms ? (double)keys * 1000 / (double)ms : 0.0,
		 ms ? (double)atomic_load(&v->bytes) / 1e3 / (double)ms : 0.0);
}

int verify_main(const struct config *cfg)
{
	struct vr v = {.cfg = cfg, .t0 = now_ms()};
	struct ops_progress *p;
	unsigned long bad, fixed, failed;
	uint64_t ms;
	char dur[32];
	int rc;

	httpc_global_init();
	ops_rate_init(cfg->rate);
	v.master = ops_master_url(cfg->master);
	p = ops_progress_start(progress_line, &v);
	rc = v.master ? run_online(&v) : run_offline(&v);
	ops_progress_stop(p);
	ms = now_ms() - v.t0;
	ops_fmt_duration(ms, dur, sizeof(dur));
	bad = atomic_load(&v.missing) + atomic_load(&v.corrupt);
	fixed = atomic_load(&v.fixed);
	failed = atomic_load(&v.failed);
	log_msg("verify: %lu keys, %lu replicas checked, %lu missing, %lu corrupt, %lu fixed, "
		"%lu failed in %s (%.0f keys/s, %.1f MB/s read)%s",
		atomic_load(&v.keys_done), atomic_load(&v.replicas), atomic_load(&v.missing),
		atomic_load(&v.corrupt), fixed, failed, dur,
		ms ? (double)atomic_load(&v.keys_done) * 1000 / (double)ms : 0.0,
		ms ? (double)atomic_load(&v.bytes) / 1e3 / (double)ms : 0.0,
		rc ? "; stopped early, see above" : "");
	if (atomic_load(&v.skipped))
		log_msg("verify: %lu keys skipped: %s", atomic_load(&v.skipped),
			v.master ? "changed while being fixed (run verify again)"
				 : "interrupted PUTs (DELETED, no HASH: see gc -unlinked)");
	if (bad > fixed && !cfg->fix)
		log_msg("verify: run it with -fix to copy good replicas over the bad ones");
	free(v.master);
	return rc || failed || bad > fixed ? 1 : 0;
}
