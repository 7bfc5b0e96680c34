/* rebalance.c -- `mkv rebalance` and the server's REBALANCE: move blobs to
 * where key2volume puts them now.  See ops.h for the order of a move. */
#include "../master/mkv.h"
#include "../master/store.h"
#include "ops.h"
#include "../common/util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct run {
	const struct config *cfg;
	struct index *idx;          /* offline */
	struct ops_keys b;          /* the keys at hand */
	bool unlinked;              /* online: they came from ?unlinked */
	atomic_ulong seen, moved, failed, skipped, left;
	uint64_t total;             /* 0 when unknown */
	uint64_t t0;
};

static void progress_line(void *ctx, char *out, size_t n)
{
	struct run *r = ctx;
	unsigned long seen = r->seen;
	uint64_t ms = now_ms() - r->t0;
	int k = snprintf(out, n, "rebalance: %lu", seen);
	if (r->total)
		k += snprintf(out + k, n - (size_t)k, "/%llu", (unsigned long long)r->total);
	snprintf(out + k, n - (size_t)k, " keys, %lu moved, %lu failed, %.0f keys/s",
		 r->moved, r->failed, ops_per_s(seen, ms));
	ops_eta(out, n, seen, r->total, ms);
}

static void offline_one(void *ctx, size_t i)
{
	struct run *r = ctx;
	const char *why = NULL;
	bool moved;
	int st = move_key(r->cfg, r->idx, r->b.keys[i], r->b.klens[i],
				     MOVE_UNLINKED | MOVE_NOW, &moved, &why);
	if (st == 204) {
		if (moved)
			r->moved++;
	} else if (why == move_left_behind) {
		/* safe (the record names the new copies); only space is wasted */
		r->moved++;
		r->left++;
	} else if (st != 404) {   /* 404: deleted meanwhile */
		log_msg("rebalance: %.*s: %s", (int)r->b.klens[i], r->b.keys[i], why);
		r->failed++;
	}
	r->seen++;
}

static int run_offline(struct run *r)
{
	r->idx = ops_index_open(r->cfg->db, false, "rebalance",
				"stop it, or rebalance online with -master host:port");
	if (!r->idx)
		return -1;
	if (meta_open(r->cfg->db) < 0) {
		index_close(r->idx);
		return -1;
	}
	put_sweep_replaces(r->cfg, r->idx);   /* what a killed master left to settle */
	move_sweep_notes(r->idx);            /* and a killed run left behind */
	if (isatty(2) && !index_keys(r->idx, &r->total)) {   /* the total: kept, or walked */
		struct index_iter *it = index_iter_new(r->idx, "", 0);
		for (r->total = 0; index_iter_valid(it); index_iter_next(it))
			r->total++;
		index_iter_free(it);
	}
	ops_index_each(r->idx, r->cfg->workers * OPS_MOVES_PER_WORKER, &r->b, offline_one, r);
	meta_close();
	index_close(r->idx);
	return 0;
}

/* Online: each key goes through the master, which holds its lock. */
static void online_one(void *ctx, size_t i)
{
	struct run *r = ctx;
	char *url = ops_url(r->cfg->master, r->b.keys[i], r->b.klens[i],
			    r->unlinked ? "?unlinked" : "");
	char err[OPS_ERR];
	struct ops_head_info h;
	int st, tries = 0;
	/* A key already where it belongs (or deleted meanwhile) is left alone. */
	if (!r->unlinked && ((st = ops_ask(NULL, url, 30000, &h, err)) == 404 ||
			     !strcmp(h.balance, "balanced"))) {
		if (st == 404 && ops_unreachable("rebalance", r->b.keys[i], r->b.klens[i]))
			r->failed++;
		goto done;
	}
	/* 409: a PUT or DELETE of the key is running; it ends soon */
	do
		st = ops_ask("REBALANCE", url, 0, &h, err);
	while (st == 409 && retry_wait(RETRY_LOCKED, ++tries));
	ops_why(err, st, url, h.why.text, h.why.n);
	if (st == 204) {   /* Key-Balance: rebalanced (a master that does not say has) */
		r->moved += strcmp(h.balance, "balanced") != 0;
	} else if (st == 404 && ops_unreachable("rebalance", r->b.keys[i], r->b.klens[i])) {
		r->failed++;
	} else if (r->unlinked && st >= 400 && st < 500) {
		r->skipped++;
	} else if (st != 404) {
		log_msg("rebalance: REBALANCE %.*s failed: %s", (int)r->b.klens[i], r->b.keys[i],
			err);
		r->failed++;
	}
done:
	free(url);
	r->seen++;
}

/* Live keys, then unlinked ones. */
static int run_online(struct run *r)
{
	int rc = 0;
	for (int pass = 0; pass < 2 && rc == 0; pass++) {
		r->unlinked = pass;
		rc = ops_list_each(r->cfg->master, "", r->unlinked, "rebalance", r->cfg->workers,
				   &r->b, online_one, r);
	}
	return rc;
}

int rebalance_main(const struct config *cfg)
{
	struct run r = {.cfg = cfg, .t0 = now_ms()};
	char dur[32];
	uint64_t ms;
	int rc;

	ops_progress_start(progress_line, &r);
	rc = cfg->master ? run_online(&r) : run_offline(&r);
	ops_progress_stop();
	ms = ops_elapsed(r.t0, dur);
	if (rc == 0 || r.seen) {
		log_msg("rebalance: %lu keys seen, %lu moved, %lu failed in %s (%.0f moved keys/s)%s",
			r.seen, r.moved, r.failed, dur, ops_per_s(r.moved, ms),
			rc ? "; stopped early, see above" : "");
		if (!cfg->master) {
			unsigned long pulled, streamed, kept;
			move_copies(&pulled, &streamed, &kept);
			log_msg("rebalance: %lu copies pulled by their volumes, %lu streamed through "
				"here", pulled, streamed);
			if (kept)
				log_msg("rebalance: %lu old copies kept: each on the disk of a new "
					"place (another name for its volume), or on a volume whose "
					"id could not be read (see above)", kept);
		}
		if (r.left)
			log_msg("rebalance: %lu moved keys left an old copy behind (a DELETE failed, "
				"see above): wasted space, not a risk", r.left);
		if (r.skipped)
			log_msg("rebalance: %lu unlinked keys were not moved: the master does not "
				"move unlinked keys (REBALANCE ?unlinked); DELETE them, or rebalance "
				"offline", r.skipped);
	}
	if (rc == 0 && r.failed)
		log_msg("rebalance: fix what the lines above say, then run it again to retry the "
			"failed keys (moving is idempotent)");
	return rc || r.failed ? 1 : 0;
}
