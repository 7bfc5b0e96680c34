/* gc.c -- `mkv gc`: find (and with -delete remove) what takes space
 * on the volumes but is no key's: files that no record names at the place
 * they sit (a crash mid-PUT, a failed cleanup, an interrupted rebalance),
 * and mkv-volume's hidden temporary files (VOL_TMP_PREFIX) left by a crash.
 * -unlinked also removes unlinked keys, bytes and record.
 *
 * Safe beside a running master.  A PUT writes its record (DELETED, naming
 * its locations) before any byte, and a volume shows a blob only once it
 * is complete, so a file of a write in flight is always named by a
 * record -- except one that a PUT starting after gc looked replaces.  gc
 * therefore never touches a file younger than the grace period, two
 * -puttimeouts (2 min by default; give gc the master's -puttimeout or a
 * longer one), and removes one only in this order: a fresh HEAD of the
 * file says it is older than the grace period, then the record (asked
 * just now) does not name it, then the DELETE.  What is left is a PUT of
 * that very key starting and completing between gc's last look and its
 * DELETE, a round trip: verify would report that replica missing.
 *
 * Online (-master) a record is the master's answer: a HEAD (Key-Volumes)
 * and, for a key that is not live, `?unlinked` (an unlinked key's or a PUT
 * in flight's files are kept whatever their place: the master does not
 * say where they are).  Offline (-db) it is the index's.
 *
 * -unlinked online sends `DELETE /key?unlinked` for each key of ?unlinked:
 * the master deletes it only if it is still unlinked (a key RELINKed, or
 * whose PUT finished, since the listing is refused, 403) and not being
 * written (409). */
#include "../master/mkv.h"
#include "../master/store.h"
#include "ops.h"
#include "../common/httpc.h"
#include "../common/vconn.h"
#include "../common/placement.h"
#include "../common/util.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXAMPLES 10
#define TIMEOUT_MS 60000L
#define TMP_PREFIX ".mkv-tmp."   /* volume/fs.h's VOL_TMP_PREFIX */
#define SAMPLE 200

struct unit {
	char *loc;
	int xx;
};

struct gc {
	const struct config *cfg;
	struct index *idx;        /* offline */
	uint64_t grace_s;
	pthread_mutex_t mu;
	struct unit *units;
	size_t nunits, cap;
	struct ops_keys b;        /* -unlinked: the keys at hand */
	atomic_ulong files, orphans, tmps, young, rekept, deleted, failed, unlinked,
		unlinked_gone, unlinked_busy, examples, dirs;
	atomic_ullong orphan_bytes, tmp_bytes;
	uint64_t t0;
};

static void add_unit(struct gc *g, const char *loc, int xx)
{
	pthread_mutex_lock(&g->mu);
	if (g->nunits == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 256;
		g->units = xrealloc(g->units, g->cap * sizeof(*g->units));
	}
	g->units[g->nunits].loc = xstrdup(loc);
	g->units[g->nunits++].xx = xx;
	pthread_mutex_unlock(&g->mu);
}

/* ---- what records say ---- */

/* Online, a key that is not live: is it unlinked (or a PUT in flight)?
 * 1 yes, 0 no, -1 cannot tell. */
static int unlinked_online(struct gc *g, const char *key, size_t klen)
{
	char *prefix = xstrndup(key, klen);
	struct ops_keys pg;   /* the key sorts first of those it begins */
	int rc = ops_list_page(g->cfg->master, prefix, OPS_LIST_UNLINKED, NULL, &pg, "gc") < 0 ? -1
		 : pg.n && pg.klens[0] == klen && !memcmp(pg.keys[0], key, klen);
	ops_keys_free(&pg);
	free(prefix);
	return rc;
}

/* Does a record name key's blob at loc (however spelled: vol_among)?  1
 * yes, 0 no, -1 cannot tell (then the file is kept). */
static int named(struct gc *g, const char *key, size_t klen, const char *loc)
{
	struct ops_head_info h;
	struct record r;
	char err[OPS_ERR];
	int st;
	if (!g->cfg->master)
		return vol_named(g->idx, key, klen, loc);
	st = ops_master_head(g->cfg->master, key, klen, 4, &h, &r, err);
	if (st == 302 && h.volumes[0])
		return vol_among(r.locs, r.nlocs, loc);
	return st == 404 ? unlinked_online(g, key, klen) : -1;
}

/* ---- the walk ---- */

static bool old_enough(struct gc *g, time_t mtime)
{
	time_t now = time(NULL);   /* an unknown mtime (0): as young as can be (kept) */
	return mtime > 0 && now > mtime && (uint64_t)(now - mtime) >= g->grace_s;
}

/* Remove one file: a fresh look at its age and its record, then DELETE. */
static void remove_file(struct gc *g, const char *loc, const char *path, const char *key,
			long klen)
{
	char *url = ops_url(loc, path, strlen(path), ""), err[OPS_ERR];
	struct httpc_req d = {.url = url};
	struct ops_head_info h;
	int st = ops_ask(NULL, url, TIMEOUT_MS, &h, err);
	if (st == 404) {
		/* gone already */
	} else if (st != 200 || !old_enough(g, httpc_parse_date(h.lastmod)) ||
		   (key && named(g, key, (size_t)klen, loc) != 0)) {
		g->rekept++;   /* changed since it was listed: kept */
	} else {
		vconn_wait("DELETE", &d, 1, NULL, 0, TIMEOUT_MS, NULL, NULL, NULL, 0);
		if (httpc_outcome("gc: ", "DELETE", &d, 1, NULL))
			g->deleted++;
		else
			g->failed++;
	}
	free(url);
}

/* The file at path, e its listing's entry. */
static void consider(struct gc *g, const char *loc, const char *path, json_t *e)
{
	json_t *sz = json_object_get(e, "size");
	long long size = json_is_integer(sz) ? (long long)json_integer_value(sz) : 0;
	time_t mtime = httpc_parse_date(json_string_value(json_object_get(e, "mtime")));
	const char *base = strrchr(path, '/') + 1;
	bool tmp = !strncmp(base, TMP_PREFIX, strlen(TMP_PREFIX));
	char key[PATH_MAX_LEN];
	long klen = tmp ? -1 : ops_path_key(path, key);
	int n = klen > 0 ? named(g, key, (size_t)klen, loc) : 0;
	g->files++;
	if (n != 0) {
		if (n < 0)
			g->failed++;
		return;
	}
	if (!old_enough(g, mtime)) {
		g->young++;
		return;
	}
	*(tmp ? &g->tmps : &g->orphans) += 1;
	*(tmp ? &g->tmp_bytes : &g->orphan_bytes) += (unsigned long long)size;
	if (g->examples++ < EXAMPLES)
		log_msg("gc: %s http://%s%s (%lld bytes)", tmp ? "stale temporary file"
			: klen > 0 ? "no record names" : "not a blob's path:", loc, path, size);
	if (g->cfg->delete_)
		remove_file(g, loc, path, klen > 0 ? key : NULL, klen);
}

/* What is at path on loc (404: nothing; a failure is logged, counted).
 * At a root ("/"): its /xx/ become units, its svNN/ roots in turn (a
 * volume's); a file there is no blob (none sits at a root).  Below: the
 * files, listed recursively and with temporary files where the volume can
 * (nginx cannot: its directories are listed in turn). */
static void walk(struct gc *g, const char *loc, const char *path, int depth)
{
	bool root = !strcmp(path, "/");
	char *url = ops_url(loc, path, strlen(path), root ? "" : "?recursive&tmp");
	char err[OPS_ERR] = "", type;
	struct buf b = {0};
	int st = httpc_do("GET", url, NULL, 0, TIMEOUT_MS, &b, OPS_LIST_MAX, err);
	json_t *doc = ops_listing(st, b.data, b.len, err), *e;
	size_t i;
	g->dirs++;
	if (!doc && st != 404) {
		log_msg("gc: GET %s failed: %s: not looked at", url, err);
		g->failed++;
	}
	buf_free(&b);
	free(url);
	json_array_foreach(doc, i, e) {
		const char *name = ops_entry(e, &type);
		char *sub;
		if (!name || !type)
			continue;
		sub = xasprintf("%s%s", path, name);
		if (type == 'f') {
			consider(g, loc, sub, e);
		} else if (!root && depth < 64) {
			char *d = xasprintf("%s/", sub);
			walk(g, loc, d, depth + 1);
			free(d);
		} else if (root && ops_hash_dir(name) >= 0) {
			add_unit(g, loc, ops_hash_dir(name));
		} else if (root && !strchr(loc, '/') && ops_subvolume_dir(name)) {
			char *sv = xasprintf("%s/%s", loc, name);
			walk(g, sv, "/", 0);
			free(sv);
		}
		free(sub);
	}
	json_decref(doc);
}

static void root_one(void *ctx, size_t i)
{
	struct gc *g = ctx;
	walk(g, g->cfg->volumes[i], "/", 0);
}

static void unit_one(void *ctx, size_t i)
{
	struct gc *g = ctx;
	char path[8];
	snprintf(path, sizeof(path), "/%02x/", g->units[i].xx);
	walk(g, g->units[i].loc, path, 0);
}

/* ---- -unlinked ---- */

/* Online: DELETE ?unlinked, which the master refuses (403) for a key live
 * again -- RELINKed, or its PUT done since the listing -- and (409) for
 * one whose PUT runs. */
static void unlinked_online_one(void *ctx, size_t i)
{
	struct gc *g = ctx;
	char *url = ops_url(g->cfg->master, g->b.keys[i], g->b.klens[i], "?unlinked");
	char err[OPS_ERR];
	struct ops_head_info h;
	int st = g->cfg->delete_ ? ops_ask("DELETE", url, 0, &h, err) : 0;
	g->unlinked++;
	if (st == 404 && ops_unreachable("gc", g->b.keys[i], g->b.klens[i])) {
		g->failed++;
	} else if (st == 204 || st == 404) {
		g->unlinked_gone++;
	} else if (st == 403 || st == 409) {
		g->unlinked_busy++;
	} else if (st != 0) {
		ops_why(err, st, url, h.why.text, h.why.n);
		log_msg("gc: DELETE %.*s?unlinked failed: %s", (int)g->b.klens[i], g->b.keys[i], err);
		g->failed++;
	}
	free(url);
}

/* Offline: the master is stopped, nothing is in flight. */
static void unlinked_offline_one(void *ctx, size_t i)
{
	struct gc *g = ctx;
	char path[PATH_MAX_LEN];
	struct record r;
	if (record_parse(g->b.vals[i], g->b.vlens[i], &r) < 0 || !r.deleted)
		return;
	g->unlinked++;
	if (!g->cfg->delete_)
		return;
	placement_path(g->b.keys[i], g->b.klens[i], path);
	if (httpc_delete_all(r.locs, r.nlocs, path, TIMEOUT_MS, "gc: ") == r.nlocs &&
	    index_write(g->idx, g->b.keys[i], g->b.klens[i], NULL, 0, true) == 0)
		g->unlinked_gone++;
	else
		g->failed++;
}

static int remove_unlinked(struct gc *g)
{
	if (g->cfg->master)
		return ops_list_each(g->cfg->master, "", OPS_LIST_UNLINKED, "gc", g->cfg->workers,
				     &g->b, unlinked_online_one, g);
	ops_index_each(g->idx, g->cfg->workers, &g->b, unlinked_offline_one, g);
	if (g->cfg->delete_)
		index_sync(g->idx);
	return 0;
}

/* ---- the volumes' names ----
 * Another spelling of a volume is the same disk (vol_in, vol_among).  A
 * record naming a volume none of -volumes is (or one it cannot tell of)
 * may mean -volumes is not the master's: a sample of records is read
 * first, and such a record stops -delete. */

/* The first of r's locations on no -volumes volume (or that cannot be
 * told of), as a heap copy, or NULL. */
static char *stranger(const struct config *cfg, const struct record *r)
{
	for (int i = 0; i < r->nlocs; i++)
		if (vol_in(cfg, r->locs[i]) != 1)
			return xstrdup(r->locs[i]);
	return NULL;
}

static char *sample_offline(struct gc *g, bool *empty)
{
	struct index_iter *it = index_iter_new(g->idx, "", 0);
	char *found = NULL;
	*empty = !index_iter_valid(it);
	for (int n = 0; n < SAMPLE && index_iter_valid(it) && !found; n++, index_iter_next(it)) {
		size_t vl;
		const char *v = index_iter_value(it, &vl);
		char *copy = xstrndup(v, vl);
		struct record r;
		if (record_parse(copy, vl, &r) == 0)
			found = stranger(g->cfg, &r);
		free(copy);
	}
	index_iter_free(it);
	return found;
}

static char *sample_online(struct gc *g, bool *empty)
{
	const char *m = g->cfg->master;
	struct ops_keys pg, ul;
	char *found = NULL, err[OPS_ERR];
	*empty = false;
	if (ops_list_page(m, "", OPS_LIST_LIVE, NULL, &pg, "gc") < 0)
		return NULL;
	/* no live key: an unlinked one, then? */
	if (pg.n == 0 && ops_list_page(m, "", OPS_LIST_UNLINKED, NULL, &ul, "gc") == 0) {
		*empty = ul.n == 0;
		ops_keys_free(&ul);
	}
	for (size_t i = 0; i < pg.n && i < SAMPLE && !found; i++) {
		struct ops_head_info h;
		struct record r;
		if (ops_master_head(m, pg.keys[i], pg.klens[i], 1, &h, &r, err) == 302)
			found = stranger(g->cfg, &r);
	}
	ops_keys_free(&pg);
	return found;
}

/* 0 when every sampled location is on a -volumes volume, else -1
 * (logged); -2 (logged) when the index holds no key at all (a wrong -db,
 * or a master serving another index): every file would look unnamed. */
static int check_names(struct gc *g)
{
	bool empty = false;
	char *found = g->cfg->master ? sample_online(g, &empty) : sample_offline(g, &empty);
	if (empty) {
		log_msg("gc: the index holds no key, live or unlinked: every file would look "
			"unnamed (a wrong -db, or a master serving another index?)");
		return -2;
	}
	if (!found)
		return 0;
	log_msg("gc: a record names %s, which is none of -volumes (by name or by the id in "
		"its marker), or whose id cannot be read: give -volumes as the master has them "
		"(and rebalance away from volumes taken out)", found);
	free(found);
	return -1;
}

/* ---- the command ---- */

static void progress_line(void *ctx, char *out, size_t n)
{
	struct gc *g = ctx;
	snprintf(out, n, "gc: %lu dirs, %lu files, %lu orphans, %lu temporary, %lu deleted, "
		 "%lu failed", g->dirs, g->files, g->orphans, g->tmps, g->deleted, g->failed);
}

/* The summary; the exit status: 1 when something is left wrong, a failure
 * or garbage that is still there (a dry run's). */
static int report(struct gc *g, int rc)
{
	const struct config *cfg = g->cfg;
	char dur[32];
	ops_elapsed(g->t0, dur);
	log_msg("gc: %lu files in %lu dirs: %lu orphans (%.1f MB), %lu stale temporary files "
		"(%.1f MB), %lu younger than %llu s kept, %lu %s, %lu failed in %s%s",
		g->files, g->dirs, g->orphans, (double)g->orphan_bytes / 1e6, g->tmps,
		(double)g->tmp_bytes / 1e6, g->young, (unsigned long long)g->grace_s, g->deleted,
		cfg->delete_ ? "deleted" : "deleted (a dry run: -delete removes them)",
		g->failed, dur, rc ? "; stopped early, see above" : "");
	if (cfg->unlinked)
		log_msg("gc: %lu unlinked keys, %lu removed, %lu live again or being written%s",
			g->unlinked, g->unlinked_gone, g->unlinked_busy,
			cfg->delete_ ? "" : " (a dry run: -delete removes them)");
	return rc || g->failed || g->deleted + g->rekept < g->orphans + g->tmps ||
	       g->unlinked > g->unlinked_gone + g->unlinked_busy;
}

static int gc_run(struct gc *g)
{
	struct config dry;
	int rc = 0, names = check_names(g);
	if (names == -2 && g->cfg->delete_) {
		/* files there may be found and counted, never deleted */
		log_msg("gc: so -delete deletes nothing: this run is a dry run");
		dry = *g->cfg;
		dry.delete_ = false;
		g->cfg = &dry;
	} else if (names < 0) {
		if (g->cfg->delete_) {
			log_msg("gc: nothing deleted (see above)");
			return 1;
		}
		log_msg("gc: what this dry run calls orphans may not be");
	}
	ops_progress_start(progress_line, g);
	if (g->cfg->unlinked)
		rc = remove_unlinked(g);
	ops_pool_run(g->cfg->workers, (size_t)g->cfg->nvol, root_one, g);
	ops_pool_run(g->cfg->workers, g->nunits, unit_one, g);
	ops_progress_stop();
	return report(g, rc);
}

int gc_main(const struct config *cfg)
{
	struct gc g = {.cfg = cfg, .t0 = now_ms()};
	int rc = 1;

	pthread_mutex_init(&g.mu, NULL);
	g.grace_s = 2 * cfg->puttimeout_ms / 1000;
	if (g.grace_s < 2)
		g.grace_s = 2;
	if (cfg->master ||
	    (g.idx = ops_index_open(cfg->db, false, "gc", "run gc online with -master host:port")))
		rc = gc_run(&g);
	for (size_t i = 0; i < g.nunits; i++)
		free(g.units[i].loc);
	free(g.units);
	if (g.idx)
		index_close(g.idx);
	pthread_mutex_destroy(&g.mu);
	return rc;
}
