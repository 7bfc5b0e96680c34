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
 * never deleted.  Online, a key with a replica missing or corrupt is
 * looked at again (a write may have been under way), and the record is
 * read again from the master before anything is counted or fixed: a key
 * that changed meanwhile is left alone.
 *
 * Online (-master) verify sees live keys (?list, then a HEAD per key for
 * Key-Volumes and Content-Md5); offline (-db, the master stopped) every
 * record, unlinked ones too, but not an interrupted PUT's (DELETED, no
 * HASH: gc's business). */
#include "../master/mkv.h"
#include "../master/store.h"
#include "ops.h"
#include "../common/httpc.h"
#include "../common/placement.h"
#include "../common/util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HASH_TIMEOUT_MS (3600 * 1000L)   /* a volume hashing a huge blob */
#define TIMEOUT_MS 60000L

struct vr {
	const struct config *cfg;
	struct ops_keys b;        /* the keys at hand (and, offline, their records) */
	atomic_ulong keys_done, replicas, missing, corrupt, fixed, failed, skipped;
	unsigned long logged;
	atomic_ullong bytes;
	uint64_t t0;
};

#define note(v, ...) ops_note(&(v)->logged, "verify", __VA_ARGS__)

enum state { ST_GOOD, ST_MISSING, ST_CORRUPT, ST_UNKNOWN };

/* One key's replicas as read. */
struct key {
	const char *key;
	int klen;
	struct record *r;
	char *urls[RECORD_MAX_LOCS];
	char md5[RECORD_MAX_LOCS][33];
	enum state st[RECORD_MAX_LOCS];
	char want[33];            /* the md5 a good replica has, "" when unknown */
};

/* The md5 of the blob at url into md5: 200, 404, or -1 (unreachable or
 * failed; err says why). */
static int replica_md5(struct vr *v, const char *url, char md5[33], char *err)
{
	struct ops_head_info h;
	char *q = xasprintf("%s?md5", url), hdr[33];
	uint64_t size;
	int st = ops_ask(NULL, q, HASH_TIMEOUT_MS, &h, err);
	free(q);
	if (st == 200 && h.md5[0]) {              /* an mkv-volume hashed it */
		if (h.size > 0)
			ops_rate_take((uint64_t)h.size);
		v->bytes += h.size > 0 ? (uint64_t)h.size : 0;
		memcpy(md5, h.md5, 33);
		return 200;
	}
	if (st == 200)                             /* nginx: read it here */
		st = ops_stream_get(url, false, -1, true, md5, &size, hdr, err);
	if (st == 200) {
		v->bytes += size;
		return 200;
	}
	return st == 404 ? 404 : -1;
}

/* Online: the record of key as the master tells it (pointing into h).
 * 200 with r filled; 404 when gone or unlinked; else -1 (noted). */
static int master_record(struct vr *v, const char *key, size_t klen, struct ops_head_info *h,
			 struct record *r)
{
	char err[OPS_ERR];
	int st = ops_master_head(v->cfg->master, key, klen, 4, h, r, err);
	if (st == 404)
		return 404;
	if (st != 302 || !h->volumes[0]) {
		note(v, "HEAD %.*s on the master: %s", (int)klen, key, st != 302 ? err : "no Key-Volumes");
		return -1;
	}
	return 200;
}

/* Without a HASH, the good md5 is the one a strict majority of the copies
 * read have. */
static void majority(struct vr *v, struct key *k)
{
	int present = 0, n = k->r->nlocs;
	for (int i = 0; i < n; i++)
		present += k->st[i] == ST_GOOD;
	for (int i = 0; i < n && !k->want[0]; i++) {
		int same = 0;
		for (int j = 0; j < n && k->st[i] == ST_GOOD; j++)
			same += k->st[j] == ST_GOOD && !strcmp(k->md5[i], k->md5[j]);
		if (2 * same > present)
			memcpy(k->want, k->md5[i], 33);
	}
	if (!k->want[0] && present) {
		note(v, "%.*s: no HASH, and its copies disagree with no majority: "
			"cannot tell the good one", k->klen, k->key);
		v->failed++;
	}
}

/* -fix: copy a good replica over the bad ones, then count what the
 * volumes hold now, not what the copy said. */
static void fix(struct vr *v, struct key *k, char **bad, int nbad)
{
	char err[OPS_ERR];
	/* ops_copy feeds at most HTTPC_COPY_MAXDST destinations at once */
	for (int d = 0; d < nbad; d += HTTPC_COPY_MAXDST) {
		int nd = nbad - d < HTTPC_COPY_MAXDST ? nbad - d : HTTPC_COPY_MAXDST, got = 1;
		for (int i = 0; i < k->r->nlocs && got; i++) {
			if (k->st[i] != ST_GOOD)
				continue;
			got = httpc_copy_to(k->urls[i], bad + d, nd, k->want, TIMEOUT_MS, err);
			if (got)
				note(v, "%.*s: copy from %s: %s", k->klen, k->key, k->urls[i], err);
		}
	}
	for (int i = 0; i < nbad; i++) {
		char now[33];
		if (replica_md5(v, bad[i], now, err) == 200 && !strcmp(now, k->want)) {
			v->fixed++;
		} else {
			note(v, "%.*s: %s could not be fixed", k->klen, k->key, bad[i]);
			v->failed++;
		}
	}
}

/* Has the key changed since it was read (online)?  Then it is not fixed. */
static bool changed(struct vr *v, struct key *k)
{
	struct ops_head_info h;
	struct record now;
	return v->cfg->master && (master_record(v, k->key, (size_t)k->klen, &h, &now) != 200 ||
			     strcmp(k->r->hash, now.hash) ||
			     !record_same_locs(k->r->locs, k->r->nlocs, now.locs, now.nlocs));
}

/* Online, a write of the key (a REPLACE, a DELETE) may have run between
 * the master's answer and the reads: with retry set, a replica found
 * missing or corrupt counts nothing and returns true (read the record again
 * and call once more), and the second look leaves alone a key whose record
 * changed meanwhile. */
static bool verify_key(struct vr *v, const char *key, size_t klen, struct record *r, bool retry)
{
	struct key k = {.key = key, .klen = (int)klen, .r = r};
	char path[PATH_MAX_LEN], errs[RECORD_MAX_LOCS][OPS_ERR], *bad[RECORD_MAX_LOCS];
	int nbad = 0, ngood = 0;
	bool suspect = false;

	placement_path(key, klen, path);
	for (int i = 0; i < r->nlocs; i++) {
		int s;
		k.urls[i] = httpc_url(r->locs[i], path);
		s = replica_md5(v, k.urls[i], k.md5[i], errs[i]);
		k.st[i] = s == 200 ? ST_GOOD : s == 404 ? ST_MISSING : ST_UNKNOWN;
		suspect |= k.st[i] == ST_MISSING ||
			   (k.st[i] == ST_GOOD && r->hash[0] && strcmp(k.md5[i], r->hash));
	}
	if (v->cfg->master && suspect && !retry)
		usleep(200000);   /* a write whose copies are in place, its record not yet */
	if (v->cfg->master && suspect && (retry || changed(v, &k))) {
		if (!retry)
			v->skipped++;
		for (int i = 0; i < r->nlocs; i++)
			free(k.urls[i]);
		return retry;
	}
	for (int i = 0; i < r->nlocs; i++) {
		v->replicas++;
		if (k.st[i] == ST_UNKNOWN) {
			note(v, "%.*s: %s: %s", k.klen, key, k.urls[i], errs[i]);
			v->failed++;
		}
		vol_in(v->cfg, r->locs[i]);   /* says so once when it spells a volume otherwise */
		for (int j = 0; j < i; j++)
			if (vol_same(r->locs[j], r->locs[i]) == 1) {
				note(v, "%.*s: %s and %s are one disk: one copy, not two (rebalance "
				     "makes the other)", k.klen, key, r->locs[j], r->locs[i]);
				v->failed++;
			}
	}
	memcpy(k.want, r->hash, 33);
	if (!k.want[0])
		majority(v, &k);
	for (int i = 0; i < r->nlocs; i++) {
		if (k.st[i] == ST_GOOD && k.want[0] && strcmp(k.md5[i], k.want)) {
			k.st[i] = ST_CORRUPT;
			v->corrupt++;
			note(v, "%.*s: %s is corrupt (md5 %s, want %s)", k.klen, key, k.urls[i],
			     k.md5[i], k.want);
		} else if (k.st[i] == ST_MISSING) {
			v->missing++;
			note(v, "%.*s: %s is missing", k.klen, key, k.urls[i]);
		}
		if (k.st[i] == ST_MISSING || k.st[i] == ST_CORRUPT)
			bad[nbad++] = k.urls[i];
		ngood += k.st[i] == ST_GOOD && k.want[0];
	}
	if (v->cfg->fix && nbad && k.want[0] && !ngood) {
		note(v, "%.*s: no good copy left to fix the others from", k.klen, key);
		v->failed += (unsigned long)nbad;
	} else if (v->cfg->fix && nbad && k.want[0] && changed(v, &k)) {
		v->skipped++;
	} else if (v->cfg->fix && nbad && k.want[0]) {
		fix(v, &k, bad, nbad);
	}
	for (int i = 0; i < r->nlocs; i++)
		free(k.urls[i]);
	return false;
}

static void offline_one(void *ctx, size_t i)
{
	struct vr *v = ctx;
	struct record r;
	if (record_parse(v->b.vals[i], v->b.vlens[i], &r) < 0) {
		note(v, "%.*s: malformed record", (int)v->b.klens[i], v->b.keys[i]);
		v->failed++;
	} else if (r.deleted && !r.hash[0]) {
		v->skipped++;   /* an interrupted PUT: see gc */
	} else {
		verify_key(v, v->b.keys[i], v->b.klens[i], &r, false);
	}
	v->keys_done++;
}

static void online_one(void *ctx, size_t i)
{
	struct vr *v = ctx;
	struct ops_head_info h;
	struct record r;
	int st = master_record(v, v->b.keys[i], v->b.klens[i], &h, &r);
	if (st == 200 && verify_key(v, v->b.keys[i], v->b.klens[i], &r, true)) {
		usleep(200000);   /* a write under way finishes */
		st = master_record(v, v->b.keys[i], v->b.klens[i], &h, &r);
		if (st == 200)
			verify_key(v, v->b.keys[i], v->b.klens[i], &r, false);
	}
	if (st == 200)
		;
	else if (st < 0 || ops_unreachable("verify", v->b.keys[i], v->b.klens[i]))
		v->failed++;
	v->keys_done++;
}

static int run(struct vr *v)
{
	struct index *idx;
	if (v->cfg->master)
		return ops_list_each(v->cfg->master, "", OPS_LIST_LIVE, "verify", v->cfg->workers,
				     &v->b, online_one, v);
	idx = ops_index_open(v->cfg->db, false, "verify", "verify online with -master host:port");
	if (!idx)
		return -1;
	ops_index_each(idx, v->cfg->workers, &v->b, offline_one, v);
	index_close(idx);
	return 0;
}

static void progress_line(void *ctx, char *out, size_t n)
{
	struct vr *v = ctx;
	uint64_t ms = now_ms() - v->t0;
	unsigned long keys = v->keys_done;
	snprintf(out, n, "verify: %lu keys, %lu replicas, %lu missing, %lu corrupt, %lu fixed, "
		 "%lu failed, %.0f keys/s, %.1f MB/s", keys, v->replicas, v->missing, v->corrupt,
		 v->fixed, v->failed, ops_per_s(keys, ms), ops_per_s(v->bytes, ms) / 1e6);
}

int verify_main(const struct config *cfg)
{
	struct vr v = {.cfg = cfg, .t0 = now_ms()};
	unsigned long bad;
	uint64_t ms;
	char dur[32];
	int rc;

	ops_rate_init(cfg->rate);
	ops_progress_start(progress_line, &v);
	rc = run(&v);
	ops_progress_stop();
	ms = ops_elapsed(v.t0, dur);
	bad = v.missing + v.corrupt;
	log_msg("verify: %lu keys, %lu replicas checked, %lu missing, %lu corrupt, %lu fixed, "
		"%lu failed in %s (%.0f keys/s, %.1f MB/s read)%s", v.keys_done, v.replicas,
		v.missing, v.corrupt, v.fixed, v.failed, dur, ops_per_s(v.keys_done, ms),
		ops_per_s(v.bytes, ms) / 1e6, rc ? "; stopped early, see above" : "");
	if (v.skipped)
		log_msg("verify: %lu keys skipped: %s", v.skipped,
			cfg->master ? "changed while being verified (run verify again)"
				    : "interrupted PUTs (DELETED, no HASH: see gc -unlinked)");
	if (bad > v.fixed && !cfg->fix)
		log_msg("verify: run it with -fix to copy good replicas over the bad ones");
	return rc || v.failed || bad > v.fixed ? 1 : 0;
}
