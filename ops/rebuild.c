/* rebuild.c -- `mkv rebuild`: regenerate the index from the volumes'
 * directory listings.
 *
 * The walk goes by hash directory rather than by volume: a key's path
 * /xx/yy/<base64> is the same on every volume, so after discovering which
 * roots (a volume, or a volume's svNN subvolume) hold which /xx/yy/, one
 * task lists a unit -- /xx/yy/, or the whole /xx/ where it is sparse -- on
 * every root that has it and so sees every copy of every key in it.  Each
 * record is then written once, complete, with no read-modify-write and no
 * lock, and memory holds a few units at a time.
 *
 * The unit's listings ask for `?recursive`: mkv-volume then answers with
 * every file below the directory in one response; nginx ignores the
 * argument and answers the plain listing, whose directories are listed in
 * turn; once a root has answered so, its sparse units are listed by the
 * /xx/yy/ the discovery found, so no /xx/ is listed twice.  A sparse /xx/
 * (few /xx/yy/ on any root: small volumes, or many
 * subvolumes) is one unit, so on mkv-volumes it costs one request per root
 * instead of one per /xx/yy/; a dense one is split by /xx/yy/ so that a
 * unit never holds much more than 1/65536 of the keys.
 *
 * Base64 names may contain '/', so a blob can sit directories below
 * /xx/yy/; the walk recurses, rebuilds the name from the path, decodes it
 * and keeps the file only when key2path(key) is exactly where it was found. */
#include "../master/mkv.h"
#include "../master/store.h"
#include "../common/spawn.h"
#include "ops.h"
#include "../common/httpc.h"
#include "../common/placement.h"
#include "../common/util.h"

#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRIES 3
#define MAX_STRAY_LOGS 10
#define LEAVES_OPEN 4096       /* leaves listed but not yet written */
#define LISTINGS_PER_WORKER 8  /* listings in flight per -workers */
#define WRITERS 16             /* threads sorting units and writing their records */
#define BATCH_KEYS 4096        /* records a LevelDB write, at most (a unit is ~1/65536 of the keys) */
#define SPARSE_YY 128          /* a /xx/ with at most this many /xx/yy/ on every root is
				* listed as one unit: about as many keys per root */

struct root {
	char *loc;             /* "host:port" or "host:port/svNN" */
	int vol;               /* index into cfg->volumes */
	bool flat;             /* it answered a unit's ?recursive with directories
				  (nginx): its sparse units go by /xx/yy/ */
	uint8_t yy[65536 / 8]; /* which /xx/yy/ it has, bit (xx<<8|yy) */
};

struct entry {
	char *key;
	size_t klen;
	const struct root *root;  /* where it was found */
	int rank;                 /* where the record names it: make_record */
	char md5[33];
	uint64_t size;            /* from the listing, for S3's metadata */
	int64_t mtime;
};

struct unit {
	uint8_t xx;
	int16_t yy;               /* -1: all of /xx/ */
};

/* A unit being listed on every root that has it, then written. */
struct leaf {
	struct unit u;
	int pending;              /* listings not yet answered */
	struct entry *e;
	size_t n, cap;
};

/* One listing: a root's top, a root's /xx/ (leaf NULL), or a directory at
 * or below a unit (recursive where the volume can). */
struct lreq {
	int root;
	struct leaf *leaf;
	char path[PATH_MAX_LEN + 16];
	size_t plen;
	int tries;
};

struct rb {
	const struct config *cfg;
	struct index *idx, *old;
	struct root **roots;      /* the listings' thread only */
	int nroots, next_vol;
	struct unit *units;
	size_t nleaves, next_leaf;
	struct ops_fetch *fetch;
	struct spawn_queue *writers;
	atomic_ulong dirs_done, dirs_total, keys, with_md5, md5_from_old, unlinked, strays,
		failed, conflicts, leaves_done, leaves_open;
	uint64_t t0, t_leaves;
};

/* ---- listings, many in flight on the listings' thread ---- */

static void lreq_add(struct rb *rb, struct lreq *q)
{
	char *url = ops_url(rb->roots[q->root]->loc, q->path, q->plen, q->leaf ? "?recursive" : "");
	ops_fetch_add(rb->fetch, url, q);
	free(url);
}

/* Queue a listing of path (printf'd) on root ri. */
__attribute__((format(printf, 4, 5)))
static void lreq_new(struct rb *rb, int ri, struct leaf *lf, const char *fmt, ...)
{
	struct lreq *q = xcalloc(1, sizeof(*q));
	va_list ap;
	va_start(ap, fmt);
	q->plen = (size_t)vsnprintf(q->path, sizeof(q->path), fmt, ap);
	va_end(ap);
	q->root = ri;
	q->leaf = lf;
	if (lf)
		lf->pending++;
	lreq_add(rb, q);
}

/* A root (loc: heap, taken), its top listed in turn. */
static void root_add(struct rb *rb, char *loc, int vol)
{
	struct root *r = xcalloc(1, sizeof(*r));
	r->loc = loc;
	r->vol = vol;
	rb->roots = xrealloc(rb->roots, (size_t)(rb->nroots + 1) * sizeof(*rb->roots));
	rb->roots[rb->nroots] = r;
	rb->dirs_total++;
	lreq_new(rb, rb->nroots++, NULL, "/");
}

/* Phase 1: every volume's top directory. */
static int more_root(void *ctx)
{
	struct rb *rb = ctx;
	if (rb->next_vol >= rb->cfg->nvol)
		return -1;
	root_add(rb, xstrdup(rb->cfg->volumes[rb->next_vol]), rb->next_vol);
	rb->next_vol++;
	return 1;
}

/* In a root's top: /xx/, listed in turn, and (a volume's) svNN/, a root
 * of its own; in an /xx/: /xx/yy/. */
static void dir_entry(struct rb *rb, struct lreq *q, const char *name)
{
	struct root *r = rb->roots[q->root];
	int x = ops_hash_dir(name);
	if (x >= 0 && q->plen == 1) {
		rb->dirs_total++;
		lreq_new(rb, q->root, NULL, "/%02x/", x);
	} else if (x >= 0) {
		unsigned bit = (unsigned)(strtol(q->path + 1, NULL, 16) << 8 | x);
		r->yy[bit >> 3] |= (uint8_t)(1u << (bit & 7));
	} else if (q->plen == 1 && !strchr(r->loc, '/') && ops_subvolume_dir(name)) {
		root_add(rb, xasprintf("%s/%s", r->loc, name), r->vol);
	}
}

/* ---- phase 2: list the units, hand them to the writers ---- */

/* How many /xx/yy/ root r holds. */
static int count_yy(const struct root *r, int xx)
{
	int n = 0;
	for (int b = 0; b < 32; b++)
		n += __builtin_popcount(r->yy[xx * 32 + b]);
	return n;
}

/* Does root r hold /xx/yy/ (yy >= 0), or any /xx/yy/ (yy < 0)? */
static bool holds(const struct root *r, struct unit u)
{
	unsigned bit;
	if (u.yy < 0)
		return count_yy(r, u.xx) > 0;
	bit = (unsigned)(u.xx << 8 | u.yy);
	return r->yy[bit >> 3] & (1u << (bit & 7));
}

/* The units: a sparse /xx/ whole, a dense one by /xx/yy/. */
static void plan_units(struct rb *rb)
{
	rb->units = xcalloc(65536, sizeof(*rb->units));
	for (int x = 0; x < 256; x++) {
		int most = 0, holders = 0;
		for (int i = 0; i < rb->nroots; i++) {
			int n = count_yy(rb->roots[i], x);
			most = n > most ? n : most;
			holders += n > 0;
		}
		if (most > 0 && most <= SPARSE_YY) {
			rb->units[rb->nleaves++] = (struct unit){(uint8_t)x, -1};
			rb->dirs_total += (unsigned long)holders;
		}
		for (int y = 0; most > SPARSE_YY && y < 256; y++) {
			struct unit u = {(uint8_t)x, (int16_t)y};
			holders = 0;
			for (int i = 0; i < rb->nroots; i++)
				holders += holds(rb->roots[i], u);
			if (holders) {
				rb->units[rb->nleaves++] = u;
				rb->dirs_total += (unsigned long)holders;
			}
		}
	}
}

static int more_leaf(void *ctx)
{
	struct rb *rb = ctx;
	struct leaf *lf;
	if (rb->next_leaf >= rb->nleaves)
		return -1;
	if (rb->leaves_open >= LEAVES_OPEN)
		return 0;   /* the writers are behind */
	lf = xcalloc(1, sizeof(*lf));
	lf->u = rb->units[rb->next_leaf++];
	rb->leaves_open++;
	for (int ri = 0; ri < rb->nroots; ri++) {
		const struct root *r = rb->roots[ri];
		if (!holds(r, lf->u))
			continue;
		if (lf->u.yy < 0 && r->flat) {
			/* /xx/ was listed in the discovery already: its /xx/yy/ at once */
			rb->dirs_total += (unsigned long)count_yy(r, lf->u.xx) - 1;
			for (int y = 0; y < 256; y++)
				if (holds(r, (struct unit){lf->u.xx, (int16_t)y}))
					lreq_new(rb, ri, lf, "/%02x/%02x/", lf->u.xx, y);
		} else if (lf->u.yy < 0)
			lreq_new(rb, ri, lf, "/%02x/", lf->u.xx);
		else
			lreq_new(rb, ri, lf, "/%02x/%02x/", lf->u.xx, lf->u.yy);
	}
	if (!lf->pending)
		spawn_queue_push(rb->writers, lf);
	return 1;
}

/* A file at path (below /xx/yy/) on root ri: keep it when its name decodes
 * to a key that key2path puts exactly there.  (A recursive listing names
 * files by their path below the listed directory, so path may have come
 * in pieces; the exact match is what makes it safe.) */
static void leaf_file(struct rb *rb, struct leaf *lf, int ri, const char *path, json_t *e)
{
	char key[PATH_MAX_LEN];
	long kl = ops_path_key(path, key);
	const char *md5 = json_string_value(json_object_get(e, "md5"));
	json_t *sz = json_object_get(e, "size");
	struct entry *en;
	if (kl < 0) {
		if (rb->strays++ < MAX_STRAY_LOGS)
			log_msg("rebuild: skipping %s%s: not where key2path puts its name's key",
				rb->roots[ri]->loc, path);
		return;
	}
	if (lf->n == lf->cap) {
		lf->cap = lf->cap ? 2 * lf->cap : 16;
		lf->e = xrealloc(lf->e, lf->cap * sizeof(*lf->e));
	}
	en = &lf->e[lf->n++];
	en->key = xstrndup(key, (size_t)kl);
	en->klen = (size_t)kl;
	en->root = rb->roots[ri];
	en->size = json_is_integer(sz) && json_integer_value(sz) >= 0
			   ? (uint64_t)json_integer_value(sz) : 0;
	en->mtime = httpc_parse_date(json_string_value(json_object_get(e, "mtime")));
	if (en->mtime < 0)
		en->mtime = 0;   /* unknown */
	en->md5[0] = '\0';
	if (md5 && strlen(md5) == 32 && strspn(md5, "0123456789abcdef") == 32)
		memcpy(en->md5, md5, 33);
}

/* In a unit: directories below (listed in turn), files.  (A name with
 * '/' comes from a recursive listing.) */
static void leaf_entry(struct rb *rb, struct lreq *q, const char *name, char type, json_t *e)
{
	char path[PATH_MAX_LEN + 16];
	if (q->plen + strlen(name) + 2 > PATH_MAX_LEN)
		return;   /* longer than any key's path */
	snprintf(path, sizeof(path), "%s%s", q->path, name);
	if (type == 'd' && !strchr(name, '/')) {
		/* a recursive answer names files only: this volume lists plainly */
		rb->roots[q->root]->flat = true;
		rb->dirs_total++;
		lreq_new(rb, q->root, q->leaf, "%s/", path);
	} else if (type == 'f') {
		leaf_file(rb, q->leaf, q->root, path, e);
	}
}

/* A listing's answer: gone (404), or failed for good (logged, counted)
 * -- asked again when no answer came, or a 5xx (a refusal would say the
 * same again) -- or its entries. */
static void done(void *ctx, void *req, int status, const char *body, size_t len,
		 const char *err)
{
	struct rb *rb = ctx;
	struct lreq *q = req;
	struct leaf *lf = q->leaf;
	const char *loc = rb->roots[q->root]->loc;
	char why[OPS_ERR], type;
	json_t *doc = ops_listing(status, body, len, why), *e;
	size_t j;
	if (!doc && status != 404 && (status <= 0 || status >= 500) && ++q->tries < TRIES) {
		lreq_add(rb, q);
		return;
	}
	if (!doc && status != 404) {
		log_msg("rebuild: GET %s%s%s failed: %s", VOL_PREFIX(loc, strlen(loc)), loc, q->path,
			status <= 0 ? err : why);
		rb->failed++;
	}
	rb->dirs_done++;
	json_array_foreach(doc, j, e) {
		const char *name = ops_entry(e, &type);
		if (!name || name[0] == '.')
			continue;
		if (lf)
			leaf_entry(rb, q, name, type, e);
		else if (type == 'd')
			dir_entry(rb, q, name);
	}
	json_decref(doc);
	free(q);
	if (lf && --lf->pending == 0)
		spawn_queue_push(rb->writers, lf);
}

static int by_key(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return bytes_cmp(x->key, x->klen, y->key, y->klen);
}

static int by_rank(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	return strcmp(x->root->loc, y->root->loc);
}

/* The record of one key from its copies e[0..n), sorted into its order:
 * the locations key2volume gives (with subvolumes, then without), the
 * others after; HASH from the first copy that has an md5, and only the
 * copies like that one (same size, and md5 when known).  Returns the
 * index of that copy. */
static size_t make_record(struct rb *rb, struct entry *e, size_t n, struct record *r)
{
	size_t ref = 0;
	bool conflict = false;
	const struct config *cfg = rb->cfg;
	char (*pref)[LOC_MAX] = xcalloc(2 * (size_t)cfg->nvol, LOC_MAX), (*plain)[LOC_MAX];
	const char *hash_from = NULL;
	int nv = placement_volumes(e->key, e->klen, cfg->volumes, cfg->nvol, cfg->nvol,
				   cfg->subvolumes, pref);
	plain = pref + cfg->nvol;
	placement_volumes(e->key, e->klen, cfg->volumes, cfg->nvol, cfg->nvol, 1, plain);
	for (size_t i = 0; i < n; i++) {
		e[i].rank = 2 * nv;
		for (int j = 0; j < nv; j++) {
			if (!strcmp(pref[j], e[i].root->loc)) {
				e[i].rank = j;
				break;
			}
			if (!strcmp(plain[j], cfg->volumes[e[i].root->vol]))
				e[i].rank = nv + j;
		}
	}
	free(pref);
	qsort(e, n, sizeof(*e), by_rank);
	/* The copy that decides: the first with an md5, else the first. */
	for (size_t i = 0; i < n && !hash_from; i++)
		if (e[i].md5[0])
			ref = i, hash_from = e[i].root->loc;
	memcpy(r->hash, e[ref].md5, 33);
	/* Copies that differ from it (a write a crash cut short) are not
	 * named: a GET would read one value or the other at random.  They
	 * are left to gc, as copies no record names. */
	for (size_t i = 0; i < n; i++) {
		bool same = e[i].size == e[ref].size &&
			    (!e[i].md5[0] || !r->hash[0] || !strcmp(r->hash, e[i].md5));
		if (!same) {
			if (!conflict && rb->conflicts++ < MAX_STRAY_LOGS)
				log_msg("rebuild: %.*s: copies differ (md5 %s, %llu bytes on %s; "
					"%s, %llu bytes on %s): the record names only those like "
					"the first", (int)e->klen, e->key, r->hash[0] ? r->hash : "?",
					(unsigned long long)e[ref].size, e[ref].root->loc,
					e[i].md5[0] ? e[i].md5 : "?", (unsigned long long)e[i].size,
					e[i].root->loc);
			conflict = true;
		} else if (r->nlocs < RECORD_MAX_LOCS) {
			r->locs[r->nlocs++] = e[i].root->loc;
		}
	}
	return ref;
}

/* The record of one key, from its copies e[0..n), into batch b, and its
 * S3 size and time (from the copy that decided the record) into mb. */
static void batch_key(struct rb *rb, struct entry *e, size_t n, struct index_batch *b,
		      struct index_batch *mb)
{
	struct record r = {0}, o;
	struct meta m;
	char *val, *old;
	size_t vlen, olen;

	size_t ref = make_record(rb, e, n, &r);
	if (r.hash[0])
		rb->with_md5++;
	if (rb->old && (old = index_get(rb->old, e->key, e->klen, &olen))) {
		if (record_parse(old, olen, &o) == 0) {
			r.deleted = o.deleted;
			if (!r.hash[0] && o.hash[0]) {
				memcpy(r.hash, o.hash, 33);
				rb->with_md5++;
				rb->md5_from_old++;
			}
		}
		free(old);
	}
	if (r.deleted)
		rb->unlinked++;
	val = record_encode(&r, &vlen);
	index_batch_put(b, e->key, e->klen, val, vlen);
	free(val);
	m = (struct meta){.size = e[ref].size, .mtime = e[ref].mtime};
	snprintf(m.etag, sizeof(m.etag), "%s", r.hash);
	meta_batch_put(mb, e->key, e->klen, &m);
}

/* A writer: sort one leaf's copies by key and write the records of its
 * keys, BATCH_KEYS at a time, as one LevelDB write (and their sidecar
 * entries as one, once the records are written).  Not synced: a rebuild
 * that dies is simply run again, and the end of the run syncs them all
 * at once.  Several writers at once, so LevelDB groups their writes. */
static void write_leaf(void *ctx, void *item)
{
	struct rb *rb = ctx;
	struct leaf *lf = item;
	struct index_batch *b = NULL, *mb = NULL;
	unsigned long n = 0;
	if (lf->n) /* a leaf of empty directories has no array */
		qsort(lf->e, lf->n, sizeof(*lf->e), by_key);
	for (size_t i = 0, j; i < lf->n; i = j) {
		for (j = i + 1; j < lf->n && !by_key(&lf->e[i], &lf->e[j]); j++)
			;
		if (!b)
			b = index_batch_new(), mb = index_batch_new();
		batch_key(rb, lf->e + i, j - i, b, mb);
		if (++n < BATCH_KEYS && j < lf->n)
			continue;
		if (index_batch_write(rb->idx, b) < 0) {
			rb->failed++;
			index_batch_free(mb);
		} else if (meta_write(mb) < 0) {
			rb->failed++;   /* the records are in, their S3 attributes not */
		} else {
			rb->keys += n;
		}
		b = mb = NULL;
		n = 0;
	}
	for (size_t j = 0; j < lf->n; j++)
		free(lf->e[j].key);
	free(lf->e);
	free(lf);
	rb->leaves_open--;
	rb->leaves_done++;
}

static void progress_line(void *ctx, char *out, size_t n)
{
	struct rb *rb = ctx;
	unsigned long done = rb->dirs_done, total = rb->dirs_total;
	unsigned long keys = rb->keys;
	snprintf(out, n, "rebuild: dirs %lu/%lu, %lu keys, %.0f keys/s", done, total, keys,
		 ops_per_s(keys, now_ms() - rb->t0));
	if (rb->t_leaves)
		ops_eta(out, n, rb->leaves_done, rb->nleaves, now_ms() - rb->t_leaves);
}

/* Open the index (and -from's, or the index itself when it was not
 * empty: rebuilding in place keeps its unlinked keys unlinked). */
static int rebuild_open(struct rb *rb, bool *was_empty)
{
	const struct config *cfg = rb->cfg;
	char ra[PATH_MAX], rd[PATH_MAX];
	struct index_iter *it;
	if (!(rb->idx = ops_index_open(cfg->db, true, "rebuild", "rebuild into a new -db")))
		return -1;
	if (meta_open(cfg->db) < 0) {
		index_close(rb->idx);
		rb->idx = NULL;
		return -1;
	}
	it = index_iter_new(rb->idx, "", 0);
	*was_empty = !index_iter_valid(it);
	index_iter_free(it);
	if (!*was_empty)   /* copies a killed move left behind: not to be found again */
		move_sweep_notes(rb->idx);
	if (cfg->from && realpath(cfg->from, ra) && realpath(cfg->db, rd) && !strcmp(ra, rd))
		rb->old = rb->idx;
	else if (cfg->from && !(rb->old = ops_index_open(cfg->from, false, "rebuild: -from", NULL)))
		return -1;
	else if (!cfg->from && !*was_empty)
		rb->old = rb->idx;
	return 0;
}

/* The listings on this thread, the writers on the pool. */
static void rebuild_walk(struct rb *rb)
{
	ops_progress_start(progress_line, rb);
	/* Listings are small and cost the volume little each: -workers of
	 * them is too few to keep 5 nginx busy (16: 17.7 s, 128: 7.5 s for the
	 * same 72,249 listings), so LISTINGS_PER_WORKER times as many fly,
	 * pipelined (fetch.c). */
	rb->fetch = ops_fetch_new(rb->cfg->workers * LISTINGS_PER_WORKER);
	ops_fetch_run(rb->fetch, more_root, done, rb);
	plan_units(rb);
	rb->t_leaves = now_ms();
	rb->writers = spawn_queue(WRITERS, write_leaf, rb);
	ops_fetch_run(rb->fetch, more_leaf, done, rb);
	spawn_queue_end(rb->writers);
	ops_fetch_free(rb->fetch);
	ops_progress_stop();
}

/* The one-line summary, with what the run could not do. */
static void report(struct rb *rb, bool was_empty)
{
	unsigned long keys = rb->keys, with_md5 = rb->with_md5;
	unsigned long nsub = 0;
	struct buf notes = {0};
	char dur[32];
	uint64_t ms = ops_elapsed(rb->t0, dur);
	for (int i = 0; i < rb->nroots; i++)
		nsub += strchr(rb->roots[i]->loc, '/') != NULL;
	buf_puts(&notes, "");
	if (!rb->cfg->from && was_empty)
		buf_puts(&notes, "; unlinked state lives only in the index: without -from OLD_DB "
				 "unlinked keys come back live");
	if (rb->unlinked)
		buf_printf(&notes, "; %lu kept unlinked", rb->unlinked);
	if (with_md5 < keys)
		buf_printf(&notes, "; %lu keys without md5: their volumes keep none (nginx), "
				   "so their records have no HASH", keys - with_md5);
	if (rb->md5_from_old)
		buf_printf(&notes, "; %lu md5s taken from the old index", rb->md5_from_old);
	if (!was_empty)
		buf_puts(&notes, "; the index was not empty: records of keys not found on the "
				 "volumes were left as they were");
	if (rb->strays)
		buf_printf(&notes, "; %lu stray files skipped", rb->strays);
	if (rb->conflicts)
		buf_printf(&notes, "; %lu keys whose copies differ", rb->conflicts);
	if (rb->failed)
		buf_printf(&notes, "; %lu listings or writes FAILED: the index is incomplete; "
				   "fix what the lines above say, then rebuild again", rb->failed);
	log_msg("rebuild: %lu keys (%lu with md5) from %lu dirs on %d volumes (%lu subvolumes) "
		"in %s (%.0f keys/s)%s", keys, with_md5, rb->dirs_done, rb->cfg->nvol, nsub, dur,
		ops_per_s(keys, ms), notes.data);
	buf_free(&notes);
}

int rebuild_main(const struct config *cfg)
{
	struct rb rb = {.cfg = cfg, .t0 = now_ms()};
	bool was_empty = true;
	int rc = 1;

	if (rebuild_open(&rb, &was_empty) == 0) {
		rebuild_walk(&rb);
		if (index_sync(rb.idx) < 0 || meta_sync() < 0)
			rb.failed++;
		report(&rb, was_empty);
		rc = rb.failed ? 1 : 0;
	}
	for (int i = 0; i < rb.nroots; i++) {
		free(rb.roots[i]->loc);
		free(rb.roots[i]);
	}
	free(rb.roots);
	free(rb.units);
	if (rb.old && rb.old != rb.idx)
		index_close(rb.old);
	if (rb.idx) {
		meta_close();
		index_close(rb.idx);
	}
	return rc;
}
