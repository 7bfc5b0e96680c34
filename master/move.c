/* move.c -- moving a key to where key2volume puts it now (REBALANCE, and
 * `mkv rebalance`), and the delayed deletes of the copies a move or a
 * REPLACE leaves behind.  See move.h for the order of a move. */
#include "move.h"
#include "../common/spawn.h"
#include "../common/httpc.h"
#include "../common/md5.h"
#include "../common/vconn.h"
#include "../common/volsign.h"
#include "../common/placement.h"
#include "../common/record.h"
#include "../common/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRACE_MS 2000          /* old copies outlive the switch this long (online) */
#define DELETERS 4
#define VOL_MS 30000           /* a small copy's GET, PUTs or DELETEs, each */

/* DELETE each of urls[0..n) at once: how many are gone (httpc_outcome).  A
 * move runs on a thread of its own, never on an event loop, and waits for
 * each step: vconn_wait runs the volume client on a loop of that thread's. */
static int delete_all(char *const *urls, int n)
{
	struct httpc_req reqs[RECORD_MAX_LOCS];
	for (int i = 0; i < n; i++)
		reqs[i].url = urls[i];
	vconn_wait("DELETE", reqs, n, NULL, 0, VOL_MS, NULL, NULL, NULL, 0);
	return httpc_outcome("rebalance: ", "DELETE", reqs, n, NULL);
}

/* ---- notes of old copies not yet deleted ----
 *
 * Before a record stops naming a copy (a move, a REPLACE), the copy's
 * location is noted in the sidecar ('o' + key: its locations, joined by
 * ','), and the note loses it once the copy is gone.  What a crash left
 * behind goes at the next start (move_sweep_notes): else a rebuild would
 * bring back the value it holds, of a key deleted or replaced since.
 * Written under the key's lock (a move's, a REPLACE's, a delete's). */

static void note_set(const char *key, size_t klen, char *const *locs, int n)
{
	char *v = record_join_locs(locs, n);
	if (n)
		meta_raw_put('o', key, klen, v, false);
	else
		meta_raw_delete('o', key, klen);
	free(v);
}

/* The note's locations into r (its storage: the returned string). */
static char *note_get(const char *key, size_t klen, struct record *r)
{
	char *v = meta_raw_get('o', key, klen);
	r->nlocs = 0;
	if (v && record_parse(v, strlen(v), r) < 0)
		r->nlocs = 0;
	return v;
}

void move_note(const char *key, size_t klen, char *const *locs, int n)
{
	struct record r;
	char *v = note_get(key, klen, &r);
	int was = r.nlocs;
	for (int i = 0; i < n && r.nlocs < RECORD_MAX_LOCS; i++)
		if (!record_has_loc(r.locs, r.nlocs, locs[i]))
			r.locs[r.nlocs++] = locs[i];
	if (r.nlocs > was)
		note_set(key, klen, r.locs, r.nlocs);
	free(v);
}

/* loc's copy is gone (or named again): off the note. */
static void note_done(const char *key, size_t klen, const char *loc)
{
	struct record r;
	char *v = note_get(key, klen, &r), *left[RECORD_MAX_LOCS];
	int n = 0;
	for (int i = 0; i < r.nlocs; i++)
		if (strcmp(r.locs[i], loc))
			left[n++] = r.locs[i];
	if (n < r.nlocs)
		note_set(key, klen, left, n);
	free(v);
}

int move_sweep_notes(struct index *idx)
{
	struct index_iter *it = meta_notes('o');
	int left = 0;
	for (; it && index_iter_valid(it); index_iter_next(it)) {
		size_t klen;
		const char *k = index_iter_key(it, &klen);
		char path[PATH_MAX_LEN], *v, *url, *keep[RECORD_MAX_LOCS];
		struct record note;
		int nkeep = 0;
		if (!klen || k[0] != 'o')
			break;
		v = note_get(k + 1, klen - 1, &note);
		placement_path(k + 1, klen - 1, path);
		for (int i = 0; i < note.nlocs; i++) {
			if (vol_named(idx, k + 1, klen - 1, note.locs[i]))
				continue;   /* the key's again (or cannot tell) */
			url = httpc_url(note.locs[i], path);
			if (delete_all(&url, 1) < 1)
				keep[nkeep++] = note.locs[i];   /* for the next start */
			free(url);
		}
		note_set(k + 1, klen - 1, keep, nkeep);
		left += nkeep;
		free(v);
	}
	index_iter_free(it);
	return left;
}

/* ---- background deletes of old copies (online) ---- */

struct pending {
	char *url;
	uint64_t due;
	struct index *idx;       /* asked again before the delete */
	char *key;
	size_t klen;
	char loc[LOC_MAX];
	bool waited;             /* its wait was logged */
};

/* The queue (started with the first delete, never ended) and how many of
 * its deletes are not done. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct spawn_queue *q;
	int n;
	bool hurry;
} dq = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, false};

static void delete_due(void *ctx, void *item)
{
	struct pending *p = item;
	bool hurry, locked, down;
	(void)ctx;
	pthread_mutex_lock(&dq.mu);
	for (uint64_t now; !dq.hurry && (now = now_ms()) < p->due;)
		cond_wait_ms(&dq.cv, &dq.mu, p->due - now);
	hurry = dq.hurry;
	pthread_mutex_unlock(&dq.mu);
	/* A write of the key since the move may have put its bytes back at
	 * this very place (a home volume down, the old place next in its
	 * rendezvous order): under the key's lock, a place the record names
	 * again is kept.  A write running now, or the copy's volume down (a
	 * hung one would hold the key's lock through the DELETE's timeout,
	 * and every write of the key would get 409): ask again later (at
	 * shutdown, keep the copy: gc finds it). */
	down = !health_up(p->loc, strlen(p->loc));
	locked = !down && keylock_try(p->key, p->klen);
	if (!locked && !hurry) {
		if (!p->waited)
			log_msg("rebalance: the delete of old copy %s waits: %s", p->url,
				down ? "its volume is down" : "the key is being written");
		p->waited = true;
		p->due = now_ms() + GRACE_MS;
		spawn_queue_push(dq.q, p);
		return;
	}
	if (!locked || vol_named(p->idx, p->key, p->klen, p->loc))
		log_msg("rebalance: %s is the key's again (or on its disk)%s: kept", p->url,
			down ? " or its volume is down" : locked ? "" : " or being written");
	else if (delete_all(&p->url, 1) < 1)
		log_msg("rebalance: an old copy is left behind: %s", p->url);
	else
		note_done(p->key, p->klen, p->loc);
	if (locked)
		keylock_release(p->key, p->klen);
	free(p->url);
	free(p->key);
	free(p);
	pthread_mutex_lock(&dq.mu);
	dq.n--;
	pthread_cond_broadcast(&dq.cv);
	pthread_mutex_unlock(&dq.mu);
}

void move_delete_later(struct index *idx, const char *key, size_t klen, const char *loc,
		      const char *path)
{
	struct pending *p = xcalloc(1, sizeof(*p));
	p->url = httpc_url(loc, path);
	p->due = now_ms() + GRACE_MS;
	p->idx = idx;
	p->key = xstrndup(key, klen);
	p->klen = klen;
	snprintf(p->loc, sizeof(p->loc), "%s", loc);
	pthread_mutex_lock(&dq.mu);
	if (!dq.q)
		dq.q = spawn_queue(DELETERS, delete_due, NULL);
	dq.n++;
	pthread_mutex_unlock(&dq.mu);
	spawn_queue_push(dq.q, p);
}

int move_drain(uint64_t timeout_ms)
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

const char move_left_behind[] = "moved, but an old copy could not be deleted";

/* One move: the record as read, where the key should be, its path. */
struct move {
	struct record r;
	char want[RECORD_MAX_LOCS][LOC_MAX];
	char *wantp[RECORD_MAX_LOCS];
	int nwant;
	char path[PATH_MAX_LEN];
	long tmo;
};

/* ---- the pull: the new location's volume reads the blob from an old one ----
 * (`PUT` with `Mkv-Pull: <source URL>`, docs/protocol.md).  A volume that
 * answers without Mkv-Pull (nginx) or `Mkv-Pull: refused` (no -peers) is
 * not asked again by this process: its copies stream through here. */

#define NOPULL_MAX 256

static _Atomic unsigned long copies_pulled, copies_streamed, copies_kept;

void move_copies(unsigned long *pulled, unsigned long *streamed, unsigned long *kept)
{
	*pulled = copies_pulled;
	*streamed = copies_streamed;
	*kept = copies_kept;
}
#define PULL_STALL_S 120     /* a pull answers only once done: a large blob takes time */

static struct {
	pthread_mutex_t mu;
	char vol[NOPULL_MAX][LOC_MAX];   /* "host:port" of volumes that do not pull */
	int n;
} nopull = {PTHREAD_MUTEX_INITIALIZER, {{0}}, 0};

/* May loc's volume pull?  With why: no longer (said once, why). */
static bool may_pull(const char *loc, const char *why)
{
	size_t n = strcspn(loc, "/");
	int i;
	bool yes, added = false;
	pthread_mutex_lock(&nopull.mu);
	for (i = 0; i < nopull.n; i++)
		if (strlen(nopull.vol[i]) == n && !memcmp(nopull.vol[i], loc, n))
			break;
	yes = i == nopull.n;
	if (why && yes && (added = nopull.n < NOPULL_MAX))
		snprintf(nopull.vol[nopull.n++], LOC_MAX, "%.*s", (int)n, loc);
	pthread_mutex_unlock(&nopull.mu);
	if (added)
		log_msg("rebalance: volume %.*s does not pull (%s): its copies stream through here",
			(int)n, loc, why);
	return yes && !why;
}

#define OUTCOME_MAX 16

/* The answer's Mkv-Pull into ctx (OUTCOME_MAX bytes; "" when absent). */
static bool pull_header(void *ctx, int status, const char *line, size_t len)
{
	(void)status;
	httpc_header(line, len, "Mkv-Pull", ctx, OUTCOME_MAX);
	return true;
}

/* Have dst (at location loc) pull the blob from one of the sources, in
 * order: true once it holds it. */
static bool pulled(const struct move *m, const int *order, int no, const char *dst,
		   const char *loc)
{
	char src_h[LOC_MAX + PATH_MAX_LEN + 32 + VOLSIGN_EXTRA], md5_h[64], err[256];
	const char *hdrs[3] = {src_h, m->r.hash[0] ? md5_h : NULL, NULL};
	snprintf(md5_h, sizeof(md5_h), "Mkv-Pull-Md5: %s", m->r.hash);
	for (int j = 0; j < no && may_pull(loc, NULL); j++) {
		char *src = httpc_url(m->r.locs[order[j]], m->path);
		char outcome[OUTCOME_MAX] = "";
		struct httpc_call c = {.url = dst, .method = "PUT", .headers = hdrs,
				       .connect_ms = m->tmo, .stall_s = PULL_STALL_S,
				       .header = pull_header, .ctx = outcome};
		int st;
		/* the volume reads src as given: signed here for its GET */
		memcpy(src_h, "Mkv-Pull: ", 10);
		if (!volsign_url(src, "GET", VOLSIGN_SELF_TTL, src_h + 10, sizeof(src_h) - 10))
			snprintf(src_h, sizeof(src_h), "Mkv-Pull: %s", src);
		st = httpc_call(&c, err);
		free(src);
		if (st >= 200 && st < 300 && !strcmp(outcome, "done")) {
			copies_pulled++;
			return true;
		}
		if (st < 0)
			return false;    /* the destination is unreachable: the stream says so */
		if (!outcome[0])
			may_pull(loc, "it answers a pull without Mkv-Pull");
		else if (!strcmp(outcome, "refused"))
			may_pull(loc, "it refuses pulls: start it with -peers naming the volumes");
		/* else "failed": this source did not give the blob, the next may */
	}
	return false;
}

/* A small blob through here: GET it whole from the first source (in
 * order) that reads intact, then PUT it to dst[0..ndst) at once.  0, 1
 * when no source could be read whole (or matched the record's HASH), 2
 * when every source answered 404, -1
 * when a destination failed; *big: the blob is larger than a small one
 * (HTTPC_SMALL_MAX: nothing done, it is streamed). */
static int copy_small(const struct move *m, const int *order, int no, char *const *dst,
		      int ndst, bool *big)
{
	struct httpc_req reqs[RECORD_MAX_LOCS];
	struct buf body = {0};
	int got = 1, gone = 0;
	*big = false;
	for (int j = 0; j < no && got > 0 && !*big; j++) {
		struct httpc_req g = {.url = httpc_url(m->r.locs[order[j]], m->path)};
		char md5[33];
		int rc = vconn_wait("GET", &g, 1, NULL, 0, VOL_MS, NULL, NULL, &body,
				    HTTPC_SMALL_MAX);
		if (rc == VCONN_OVER) {
			*big = true;
		} else if (g.status != 200) {
			gone += g.status == 404;
			if (g.status < 0)
				log_msg("rebalance: GET %s: %s", g.url, g.err);
			else
				log_msg("rebalance: GET %s: status %d", g.url, g.status);
		} else if (md5_hex(body.data ? body.data : "", body.len, md5),
			   m->r.hash[0] && strcmp(md5, m->r.hash)) {
			log_msg("rebalance: GET %s: source bytes do not match md5 %s (got %s)", g.url,
				m->r.hash, md5);
		} else {
			for (int i = 0; i < ndst; i++)
				reqs[i].url = dst[i];
			vconn_wait("PUT", reqs, ndst, body.data ? body.data : "", body.len, VOL_MS,
				   NULL, NULL, NULL, 0);
			got = httpc_outcome("rebalance: ", "PUT", reqs, ndst, NULL) == ndst ? 0 : -1;
		}
		free((char *)g.url);
	}
	buf_free(&body);
	return got > 0 && gone == no ? 2 : got;
}

/* A larger blob streamed volume -> volume through here, to dst[0..ndst)
 * (HTTPC_COPY_MAXDST at a time) from the first source that reads intact:
 * 0, 1 when none could, -1 when a destination failed. */
static int copy_streamed(const struct move *m, const int *order, int no, char *const *dst,
			 int ndst)
{
	char err[256];
	int got = 0;
	for (int d = 0; d < ndst && !got; d += HTTPC_COPY_MAXDST) {
		int nd = ndst - d < HTTPC_COPY_MAXDST ? ndst - d : HTTPC_COPY_MAXDST;
		got = 1;
		for (int j = 0; j < no && got > 0; j++) {
			char *src = httpc_url(m->r.locs[order[j]], m->path);
			got = httpc_copy_to(src, dst + d, nd, m->r.hash[0] ? m->r.hash : NULL, m->tmo,
					    err);
			if (got)
				log_msg("rebalance: %s", err);
			free(src);
		}
	}
	return got;
}

/* 1. Copy to the wanted locations the record lacks, from any replica that
 * reads intact: pulled by the new location's volume, else through here
 * (whole when small, else streamed).  0, or an HTTP status with *why. */
static int copy_missing(struct move *m, const char **why)
{
	char *dst[RECORD_MAX_LOCS];
	int ndst = 0, got = 0;
	/* Sources on volumes the master's checks see up first: a hung one
	 * accepts the connection, then stalls the copy for a minute while
	 * the key stays locked.  (Offline, every volume counts as up.) */
	int order[RECORD_MAX_LOCS], no = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < m->r.nlocs; i++)
			if (health_up(m->r.locs[i], strlen(m->r.locs[i])) == !pass)
				order[no++] = i;
	for (int i = 0; i < m->nwant; i++) {
		char *url;
		if (vol_among(m->r.locs, m->r.nlocs, m->want[i]) == 1)
			continue;   /* there already, under this name or another */
		url = httpc_url(m->want[i], m->path);
		if (pulled(m, order, no, url, m->want[i]))
			free(url);
		else
			dst[ndst++] = url;
	}
	if (ndst) {
		bool big;
		got = copy_small(m, order, no, dst, ndst, &big);
		if (big)
			got = copy_streamed(m, order, no, dst, ndst);
		if (!got)
			copies_streamed += (unsigned long)ndst;
	}
	for (int i = 0; i < ndst; i++)
		free(dst[i]);
	if (got == 2 && m->r.deleted)
		return 0;   /* a DELETE or PUT cut short: no copy left to keep, none to move */
	if (got && !m->r.nlocs) {
		*why = "record names no volume to copy from";
		return 500;
	}
	if (got)
		*why = got < 0 ? "a new location refused the copy" : "no replica could be read intact";
	return got ? 503 : 0;
}

/* The copies the record names that the move leaves behind, into old: not
 * one on the disk of a wanted place (another name for it: it is that
 * copy), nor one it cannot tell of (vol_among: said, and counted). */
static int old_copies(const struct move *m, char **old, bool count)
{
	int n = 0;
	for (int i = 0; i < m->r.nlocs; i++) {
		if (record_has_loc(m->wantp, m->nwant, m->r.locs[i]) ||
		    record_has_loc(m->r.locs, i, m->r.locs[i]))
			continue;
		if (vol_among(m->wantp, m->nwant, m->r.locs[i]))
			copies_kept += count;
		else
			old[n++] = m->r.locs[i];
	}
	return n;
}

/* 3. The copies no longer wanted go: now (offline) or after the grace period. */
static int drop_old(struct move *m, int flags, struct index *idx, const char *key, size_t klen,
		    const char **why)
{
	char *old[RECORD_MAX_LOCS];
	int n = old_copies(m, old, true), gone;
	if (!(flags & MOVE_NOW)) {
		for (int i = 0; i < n; i++)
			move_delete_later(idx, key, klen, old[i], m->path);
		return 204;
	}
	for (int i = 0; i < n; i++)
		old[i] = httpc_url(old[i], m->path);
	gone = delete_all(old, n);
	for (int i = 0; i < n; i++)
		free(old[i]);
	if (gone == n)
		note_set(key, klen, NULL, 0);
	if (gone < n) {
		*why = move_left_behind;
		return 500;
	}
	return 204;
}

int move_key(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		  int flags, bool *moved, const char **why)
{
	struct move m = {.tmo = cfg->voltimeout_ms ? (long)cfg->voltimeout_ms : 1000L};
	struct record nr;
	size_t vlen, nlen;
	char *val = index_get(idx, key, klen, &vlen), *nv;
	int rc = 204;

	*moved = false;
	if (!val) {
		*why = "key not found";
		return 404;
	}
	if (record_parse(val, vlen, &m.r) < 0) {
		*why = "malformed index record";
		rc = 500;
	} else if (m.r.deleted && !(flags & MOVE_UNLINKED)) {
		*why = "key is unlinked";
		rc = 404;
	}
	m.nwant = placement_volumes(key, klen, cfg->volumes, cfg->nvol,
				    cfg->replicas < RECORD_MAX_LOCS ? cfg->replicas : RECORD_MAX_LOCS,
				    cfg->subvolumes, m.want);
	for (int i = 0; i < m.nwant; i++)
		m.wantp[i] = m.want[i];
	if (rc != 204 || record_same_locs(m.wantp, m.nwant, m.r.locs, m.r.nlocs))
		goto out;
	if (m.nwant == 0) {
		*why = "no volumes configured";
		rc = 500;
		goto out;
	}
	placement_path(key, klen, m.path);
	if ((rc = copy_missing(&m, why)) != 0)
		goto out;
	/* 2. the record names the new locations, nothing else changes (the
	 * copies it stops naming noted first) */
	{
		char *old[RECORD_MAX_LOCS];
		move_note(key, klen, old, old_copies(&m, old, false));
	}
	nr = m.r;
	nr.nlocs = m.nwant;
	memcpy(nr.locs, m.wantp, sizeof(m.wantp));
	nv = record_encode(&nr, &nlen);
	rc = index_write(idx, key, klen, nv, nlen, true);
	free(nv);
	if (rc < 0) {
		*why = "index write failed";
		rc = 500;
		goto out;
	}
	*moved = true;
	rc = drop_old(&m, flags, idx, key, klen, why);
out:
	free(val);
	return rc;
}
