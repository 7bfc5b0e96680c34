/* rebalance.c -- `mkv rebalance` and the server's REBALANCE: move blobs to
 * where key2volume puts them now.  See ops.h for the order of a move. */
#include "../master/mkv.h"
#include "../master/index.h"
#include "ops.h"
#include "../common/httpc.h"
#include "../common/placement.h"
#include "../common/record.h"
#include "../common/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GRACE_MS 2000          /* old copies outlive the switch this long (online) */
#define DELETERS 4
#define BATCH 8192             /* keys handed to the workers at a time */

/* ---- background deletes of old copies (online) ---- */

struct pending {
	char *url;
	uint64_t due;
	struct pending *next;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct pending *head, *tail;
	int n;
	bool started, hurry;
} dq = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, false, false};

static void *deleter(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&dq.mu);
	for (;;) {
		struct pending *p = dq.head;
		uint64_t now = now_ms();
		int st;
		char err[256];
		if (!p) {
			pthread_cond_wait(&dq.cv, &dq.mu);
			continue;
		}
		if (p->due > now && !dq.hurry) {
			cond_wait_ms(&dq.cv, &dq.mu, p->due - now);
			continue;
		}
		dq.head = p->next;
		if (!dq.head)
			dq.tail = NULL;
		pthread_mutex_unlock(&dq.mu);
		st = httpc_do("DELETE", p->url, NULL, 0, 30000, NULL, 0, err);
		if (st > 0)
			snprintf(err, sizeof(err), "status %d", st);
		if (st != 204 && st != 200 && st != 404)
			log_msg("rebalance: DELETE %s failed (%s): an old copy is left behind",
				p->url, err);
		free(p->url);
		free(p);
		pthread_mutex_lock(&dq.mu);
		dq.n--;
		pthread_cond_broadcast(&dq.cv);
	}
	return NULL;
}

static void delete_later(char *url)
{
	struct pending *p = xmalloc(sizeof(*p));
	p->url = url;
	p->due = now_ms() + GRACE_MS;
	p->next = NULL;
	pthread_mutex_lock(&dq.mu);
	if (!dq.started) {
		for (int i = 0; i < DELETERS; i++) {
			pthread_t t;
			if (pthread_create(&t, NULL, deleter, NULL) == 0)
				pthread_detach(t);
		}
		dq.started = true;
	}
	if (dq.tail)
		dq.tail->next = p;
	else
		dq.head = p;
	dq.tail = p;
	dq.n++;
	pthread_cond_broadcast(&dq.cv);
	pthread_mutex_unlock(&dq.mu);
}

int rebalance_drain(uint64_t timeout_ms)
{
	uint64_t end = now_ms() + timeout_ms;
	int n;
	pthread_mutex_lock(&dq.mu);
	dq.hurry = true;
	pthread_cond_broadcast(&dq.cv);
	while (dq.n > 0 && now_ms() < end)
		cond_wait_ms(&dq.cv, &dq.mu, 50);
	n = dq.n;
	dq.hurry = false;
	pthread_mutex_unlock(&dq.mu);
	return n;
}

/* ---- one key ---- */

static const char left_behind[] = "moved, but an old copy could not be deleted";

static bool has_loc(char *const *locs, int n, const char *loc)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(locs[i], loc))
			return true;
	return false;
}

int rebalance_key_flags(const struct config *cfg, struct index *idx, const char *key,
			size_t klen, int flags, bool *moved, const char **why)
{
	char want[RECORD_MAX_LOCS][LOC_MAX], path[PATH_MAX_LEN], err[256];
	char *wantp[RECORD_MAX_LOCS], *dst[RECORD_MAX_LOCS];
	int nwant, ndst = 0, rc = 204, replicas;
	struct record r;
	size_t vlen;
	char *val;
	long tmo = cfg->voltimeout_ms ? (long)cfg->voltimeout_ms : 1000L;

	if (moved)
		*moved = false;
	val = index_get(idx, key, klen, &vlen);
	if (!val) {
		*why = "key not found";
		return 404;
	}
	if (record_parse(val, vlen, &r) < 0) {
		free(val);
		*why = "malformed index record";
		return 500;
	}
	if (r.deleted && !(flags & REBALANCE_UNLINKED)) {
		free(val);
		*why = "key is unlinked";
		return 404;
	}
	replicas = cfg->replicas < RECORD_MAX_LOCS ? cfg->replicas : RECORD_MAX_LOCS;
	nwant = placement_volumes(key, klen, cfg->volumes, cfg->nvol, replicas, cfg->subvolumes,
				  want);
	for (int i = 0; i < nwant; i++)
		wantp[i] = want[i];
	if (nwant == r.nlocs) {
		bool same = true;
		for (int i = 0; i < nwant && same; i++)
			same = !strcmp(want[i], r.locs[i]);
		if (same) {
			free(val);
			return 204;
		}
	}
	if (nwant == 0) {
		free(val);
		*why = "no volumes configured";
		return 500;
	}

	/* 1. copy to the wanted locations the record lacks */
	placement_path(key, klen, path);
	for (int i = 0; i < nwant; i++)
		if (!has_loc(r.locs, r.nlocs, want[i]))
			dst[ndst++] = xasprintf("http://%s%s", want[i], path);
	if (ndst) {
		int got = 1;
		if (!r.nlocs) {
			*why = "record names no volume to copy from";
			rc = 500;
			goto out;
		}
		/* ops_copy feeds at most OPS_COPY_MAXDST destinations at once */
		for (int d = 0; d < ndst; d += OPS_COPY_MAXDST) {
			int nd = ndst - d < OPS_COPY_MAXDST ? ndst - d : OPS_COPY_MAXDST;
			got = 1;
			for (int i = 0; i < r.nlocs && got > 0; i++) {
				char *src = xasprintf("http://%s%s", r.locs[i], path);
				got = ops_copy(src, dst + d, nd, r.hash[0] ? r.hash : NULL, tmo,
					       err);
				if (got)
					log_msg("rebalance: %s", err);
				free(src);
			}
			if (got)
				break;
		}
		if (got) {
			*why = got < 0 ? "a new location refused the copy"
				       : "no replica could be read intact";
			rc = 503;
			goto out;
		}
	}

	/* 2. the record names the new locations, nothing else changes */
	{
		struct record nr = r;
		char *nv;
		size_t nlen;
		nr.nlocs = nwant;
		for (int i = 0; i < nwant; i++)
			nr.locs[i] = wantp[i];
		nv = record_encode(&nr, &nlen);
		if (index_put(idx, key, klen, nv, nlen) < 0) {
			free(nv);
			*why = "index write failed";
			rc = 500;
			goto out;
		}
		free(nv);
	}
	if (moved)
		*moved = true;

	/* 3. the copies no longer wanted go */
	for (int i = 0; i < r.nlocs; i++) {
		int st;
		char *url;
		if (has_loc(wantp, nwant, r.locs[i]) || has_loc(r.locs, i, r.locs[i]))
			continue;
		url = xasprintf("http://%s%s", r.locs[i], path);
		if (!(flags & REBALANCE_NOW)) {
			delete_later(url);
			continue;
		}
		st = httpc_do("DELETE", url, NULL, 0, 30000, NULL, 0, err);
		if (st != 204 && st != 200 && st != 404) {
			if (st > 0)
				snprintf(err, sizeof(err), "status %d", st);
			log_msg("rebalance: DELETE %s failed (%s)", url, err);
			*why = left_behind;
			rc = 500;
		}
		free(url);
	}
out:
	for (int i = 0; i < ndst; i++)
		free(dst[i]);
	free(val);
	return rc;
}

int rebalance_key(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		  const char **why)
{
	return rebalance_key_flags(cfg, idx, key, klen, 0, NULL, why);
}

/* ---- the command ---- */

struct run {
	const struct config *cfg;
	struct index *idx;          /* offline */
	char *master;               /* online: "http://host:port" */
	/* the current batch */
	char **keys;
	size_t *klens;
	bool *unlinked;             /* online: key came from ?unlinked */
	/* counters */
	atomic_ulong seen, moved, moved_unlinked, failed, skipped, left;
	uint64_t total;             /* 0 when unknown */
	uint64_t t0;
};

static void progress_line(void *ctx, char *out, size_t n)
{
	struct run *r = ctx;
	unsigned long seen = atomic_load(&r->seen);
	uint64_t ms = now_ms() - r->t0;
	double rate = ms ? (double)seen * 1000 / (double)ms : 0;
	int k = snprintf(out, n, "rebalance: %lu", seen);
	if (r->total)
		k += snprintf(out + k, n - (size_t)k, "/%llu", (unsigned long long)r->total);
	k += snprintf(out + k, n - (size_t)k, " keys, %lu moved, %lu failed, %.0f keys/s", 
		      atomic_load(&r->moved), atomic_load(&r->failed), rate);
	if (r->total && rate > 0 && seen < r->total) {
		char eta[32];
		ops_fmt_duration((uint64_t)((double)(r->total - seen) * 1000 / rate), eta,
				 sizeof(eta));
		snprintf(out + k, n - (size_t)k, ", ETA %s", eta);
	}
}

static void offline_one(void *ctx, size_t i)
{
	struct run *r = ctx;
	const char *why = NULL;
	bool moved;
	int st = rebalance_key_flags(r->cfg, r->idx, r->keys[i], r->klens[i],
				     REBALANCE_UNLINKED | REBALANCE_NOW, &moved, &why);
	if (st == 204) {
		if (moved)
			atomic_fetch_add(&r->moved, 1);
	} else if (why == left_behind) {
		/* safe (the record names the new copies); only space is wasted */
		atomic_fetch_add(&r->moved, 1);
		atomic_fetch_add(&r->left, 1);
	} else if (st != 404) {   /* 404: deleted meanwhile */
		log_msg("rebalance: %.*s: %s", (int)r->klens[i], r->keys[i], why);
		atomic_fetch_add(&r->failed, 1);
	}
	atomic_fetch_add(&r->seen, 1);
}

static void free_batch(struct run *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(r->keys[i]);
}

static int run_offline(struct run *r)
{
	const struct config *cfg = r->cfg;
	char *why = NULL;
	struct index_iter *it;

	r->idx = index_open(cfg->db, &why);
	if (!r->idx) {
		log_msg("rebalance: %s", why);
		if (strstr(why, "in use"))
			log_msg("rebalance: a master is serving this index: stop it, or rebalance "
				"online with -master host:port");
		free(why);
		return -1;
	}
	if (isatty(2)) {
		it = index_iter_new(r->idx, "", 0);
		for (; index_iter_valid(it); index_iter_next(it))
			r->total++;
		index_iter_free(it);
	}
	r->keys = xcalloc(BATCH, sizeof(*r->keys));
	r->klens = xcalloc(BATCH, sizeof(*r->klens));
	it = index_iter_new(r->idx, "", 0);
	while (index_iter_valid(it)) {
		size_t n = 0;
		for (; n < BATCH && index_iter_valid(it); index_iter_next(it)) {
			size_t kl;
			const char *k = index_iter_key(it, &kl);
			r->keys[n] = xmalloc(kl + 1);
			memcpy(r->keys[n], k, kl);
			r->keys[n][kl] = '\0';
			r->klens[n++] = kl;
		}
		ops_pool_run(cfg->workers, n, offline_one, r);
		free_batch(r, n);
	}
	index_iter_free(it);
	free(r->keys);
	free(r->klens);
	index_close(r->idx);
	return 0;
}

/* Online: each key goes through the master, which holds its lock. */
static void online_one(void *ctx, size_t i)
{
	struct run *r = ctx;
	char *enc = url_escape(r->keys[i], r->klens[i], true), *url, err[256];
	struct ops_head_info h;
	int st;
	if (!r->unlinked[i]) {
		/* A key already where it belongs is left alone. */
		url = xasprintf("%s%s", r->master, enc);
		st = ops_head_info(url, 30000, &h, err);
		free(url);
		if (st == 404)
			goto done;     /* deleted meanwhile */
		if (!strcmp(h.balance, "balanced"))
			goto done;
	}
	url = xasprintf("%s%s%s", r->master, enc, r->unlinked[i] ? "?unlinked" : "");
	/* 409: a PUT or DELETE of the key is running; it ends soon */
	for (int tries = 0;; tries++) {
		st = httpc_do("REBALANCE", url, NULL, 0, 0, NULL, 0, err);
		if (st != 409 || tries == 20)
			break;
		usleep(50000);
	}
	free(url);
	if (st == 204) {
		atomic_fetch_add(&r->moved, 1);
		if (r->unlinked[i])
			atomic_fetch_add(&r->moved_unlinked, 1);
	} else if (r->unlinked[i] && st >= 400 && st < 500) {
		atomic_fetch_add(&r->skipped, 1);
	} else if (st != 404) {
		log_msg("rebalance: REBALANCE %.*s: %s", (int)r->klens[i], r->keys[i],
			st < 0 ? err : "failed");
		if (st > 0)
			log_msg("rebalance: the master answered %d", st);
		atomic_fetch_add(&r->failed, 1);
	}
done:
	free(enc);
	atomic_fetch_add(&r->seen, 1);
}

/* Page through ?list (or ?unlinked) and rebalance each page's keys. */
static int online_pass(struct run *r, bool unlinked)
{
	char *start = xstrdup("");
	struct ops_page pg;
	int rc = 0;
	do {
		if (ops_list_page(r->master, "", unlinked, &start, &pg, "rebalance") < 0) {
			rc = -1;
			break;
		}
		r->keys = pg.keys;
		r->klens = pg.klens;
		r->unlinked = xcalloc(pg.n + 1, sizeof(*r->unlinked));
		for (size_t i = 0; i < pg.n; i++)
			r->unlinked[i] = unlinked;
		ops_pool_run(r->cfg->workers, pg.n, online_one, r);
		ops_page_free(&pg);
		free(r->unlinked);
	} while (*start);
	free(start);
	return rc;
}

static int run_online(struct run *r)
{
	int rc;
	r->master = ops_master_url(r->cfg->master);
	rc = online_pass(r, false);
	if (rc == 0)
		rc = online_pass(r, true);
	free(r->master);
	return rc;
}

int rebalance_main(const struct config *cfg)
{
	struct run r = {.cfg = cfg, .t0 = now_ms()};
	struct ops_progress *p;
	char dur[32];
	uint64_t ms;
	int rc;

	httpc_global_init();
	if (!cfg->master && !cfg->db) {
		log_msg("rebalance: needs -db (offline) or -master host:port (online)");
		return 1;
	}
	if (!cfg->master && cfg->nvol < 1) {
		log_msg("rebalance: needs -volumes");
		return 1;
	}
	p = ops_progress_start(progress_line, &r);
	rc = cfg->master ? run_online(&r) : run_offline(&r);
	ops_progress_stop(p);
	ms = now_ms() - r.t0;
	ops_fmt_duration(ms, dur, sizeof(dur));
	if (rc == 0 || atomic_load(&r.seen)) {
		unsigned long moved = atomic_load(&r.moved), skipped = atomic_load(&r.skipped);
		log_msg("rebalance: %lu keys seen, %lu moved, %lu failed in %s (%.0f moved keys/s)%s",
			atomic_load(&r.seen), moved, atomic_load(&r.failed), dur,
			ms ? (double)moved * 1000 / (double)ms : 0.0,
			rc ? "; stopped early, see above" : "");
		if (atomic_load(&r.left))
			log_msg("rebalance: %lu moved keys left an old copy behind (a DELETE failed, "
				"see above): wasted space, not a risk", atomic_load(&r.left));
		if (skipped)
			log_msg("rebalance: %lu unlinked keys were not moved: the master does not "
				"move unlinked keys (REBALANCE ?unlinked); DELETE them, or rebalance "
				"offline", skipped);
	}
	if (rc == 0 && atomic_load(&r.failed))
		log_msg("rebalance: run it again to retry the failed keys (moving is idempotent)");
	return rc || atomic_load(&r.failed) ? 1 : 0;
}
