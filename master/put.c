/* put.c -- see put.h.  The bytes go through the volume client's stream
 * (common/httpc.h); this file keeps the order of the writes. */
#include "put.h"
#include "../common/spawn.h"
#include "../common/httpc.h"
#include "../common/loop.h"
#include "../common/placement.h"
#include "../common/record.h"
#include "../common/util.h"
#include "move.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RING_MAX (4u << 20)

struct put {
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* finished */
	const struct config *cfg;
	struct index *idx;
	char *key;
	size_t klen;
	char path[PATH_MAX_LEN];
	char *locs[RECORD_MAX_LOCS];
	struct httpc_req *reqs;  /* one per location: its URL, then its outcome */
	int nlocs;
	struct httpc_stream *st;
	uint64_t size;           /* the body's length (the worker's, once the body ended) */
	int64_t clen;            /* the length announced, -1 unknown */
	uint64_t fed;            /* body bytes offered so far (the front's) */
	bool aborted, released, finished;
	bool index_failed;       /* a record write failed: it may still be in the log */
	int stop_status;         /* why it was stopped (aborted): 500, or 400 */
	const char *stop_why;
	bool started;            /* the worker runs (or ran); a small body's at put_finish */
	int refs;
	char hash[33];

	/* REPLACE (see put.h): the live record stays until the new bytes
	 * are everywhere; etag is what the metadata keeps instead of hash. */
	bool replace;
	char *old;               /* the old record, parsed into oldrec */
	struct record oldrec;
	char etag[META_ETAG_MAX];

	void (*wake)(void *);
	void *arg;
	int status;
	char why[512];

	struct loop *loop;       /* a small PUT's, run on the event loop (run_async) */
	int commit_rc;           /* its last index write's */
	void (*then)(struct put *);   /* the step after that write */
};

static void put_free(struct put *p)
{
	for (int i = 0; i < p->nlocs; i++) {
		free(p->locs[i]);
		free((char *)p->reqs[i].url);
	}
	httpc_stream_free(p->st);
	free(p->reqs);
	free(p->old);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->key);
	free(p);
}

static void unref(struct put *p)
{
	bool last;
	pthread_mutex_lock(&p->mu);
	last = --p->refs == 0;
	pthread_mutex_unlock(&p->mu);
	if (last)
		put_free(p);
}

/* The record naming locs[0..n) (hash "" for none), encoded. */
static char *encode(struct put *p, bool deleted, const char *hash, char *const *locs, int n,
		    size_t *len)
{
	struct record r = {.deleted = deleted, .nlocs = n};
	snprintf(r.hash, sizeof(r.hash), "%s", p->cfg->md5sum ? hash : "");
	for (int i = 0; i < n; i++)
		r.locs[i] = locs[i];
	return record_encode(&r, len);
}

static int write_record(struct put *p, bool deleted, const char *hash, char *const *locs, int n)
{
	size_t len;
	char *v = encode(p, deleted, hash, locs, n, &len);
	/* The DELETED record needs no sync of its own: the live record's sync
	 * covers it, and lost alone it only leaves unreferenced bytes. */
	int rc = index_write(p->idx, p->key, p->klen, v, len, !deleted);
	free(v);
	return rc;
}

/* The S3 metadata of the new value; its ETag when the body was whole.
 * 0, or -1 when the sidecar refused it. */
static int write_meta(struct put *p, bool whole)
{
	struct meta m = {.size = p->size, .mtime = (int64_t)time(NULL)};
	if (whole)
		snprintf(m.etag, sizeof(m.etag), "%s", p->etag[0] ? p->etag : p->hash);
	return meta_put(p->key, p->klen, &m);
}

static void fail(struct put *p, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fail(struct put *p, int status, const char *fmt, ...)
{
	va_list ap;
	if (p->status)
		return;
	p->status = status;
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
}

/* A success whose S3 metadata the sidecar refused is a failure (500): a
 * PUT's is removed as any failed one's, a REPLACE's new value stays (its
 * size and ETag are the old ones' until written again). */
static void meta_or_fail(struct put *p)
{
	if (p->status == 201 && write_meta(p, true) < 0) {
		p->status = 0;
		fail(p, 500, "sidecar write failed: the S3 size and ETag were not kept");
	}
}

/* Why replica i failed, if it did. */
static void judge(struct put *p, int i)
{
	struct httpc_req *r = &p->reqs[i];
	if (r->status >= 200 && r->status <= 299)
		return;
	if (r->timed_out)
		fail(p, 504, "replica %s: no progress for -puttimeout", r->url);
	else if (r->status < 0)
		fail(p, 503, "replica %s: %s", r->url, r->err);
	else
		fail(p, r->status == 507 ? 507 : 500, "replica %s answered %d", r->url, r->status);
}

/* The bytes, to every replica at once.  With a known length the replicas
 * can be done before the front has seen the end of the body (and so
 * before the md5 is final): wait for it. */
static void send_body(struct put *p)
{
	int first = httpc_stream_run(p->st);
	bool aborted;
	pthread_mutex_lock(&p->mu);
	aborted = p->aborted;
	pthread_mutex_unlock(&p->mu);
	if (aborted)
		fail(p, p->stop_status, "%s", p->stop_why);
	for (int i = 0; first >= 0 && i < p->nlocs; i++)
		judge(p, (first + i) % p->nlocs);
	if (!p->status && !httpc_stream_wait_end(p->st, &p->size))
		fail(p, 500, "client went away");
}

/* Remove what a failed put wrote; keep the DELETED record if that fails.
 * Not when a record write failed: LevelDB may have logged it (only the
 * sync failed), and a restart may bring it back, live, naming the copies
 * (docs/operations.md, "The index's disk"); gc finds them otherwise. */
static void index_failed(struct put *p)
{
	p->index_failed = true;
	fail(p, 500, "index write failed");
}

static void cleanup_failed(struct put *p)
{
	if (p->index_failed)
		log_msg("PUT %s: the index failed; its copies are kept", p->key);
	else if (httpc_delete_all(p->locs, p->nlocs, p->path, (long)p->cfg->voltimeout_ms * 5,
			     "PUT cleanup (the record stays DELETED): ") == p->nlocs)
		index_write(p->idx, p->key, p->klen, NULL, 0, true);
}

/* ---- REPLACE ---- */

/* After the transfers: the new record, or on failure the record of what
 * the replicas now hold.  Replicas that answered 2xx hold the new bytes;
 * the others kept the old ones (volumes write to a temporary name and
 * rename, so a failed PUT leaves the old file).  The copies the record no
 * longer names (they hold the old bytes, or none) are noted first, and
 * go a grace period later, as REBALANCE's do: a GET redirected to one
 * just before the switch still reads the old value (move_delete_later). */
static void replace_end(struct put *p)
{
	char *ok[RECORD_MAX_LOCS], *drop[2 * RECORD_MAX_LOCS] = {0}, *const *keep = p->locs;
	int nok = 0, ndrop = 0, nkeep = p->nlocs, rc = 0;
	bool eof = true;
	for (int i = 0; i < p->nlocs; i++)
		if (p->reqs[i].status >= 200 && p->reqs[i].status < 300)
			ok[nok++] = p->locs[i];
	if (p->status && nok == 0) {
		/* Nothing was replaced: the old record still holds. */
		size_t n = strlen(p->why);
		snprintf(p->why + n, sizeof(p->why) - n, "; nothing was replaced");
		meta_raw_delete('r', p->key, p->klen);
		return;
	}
	if (p->status) {
		/* Some copies are new: the record names only those (the
		 * others are removed), so what is served is the new value,
		 * on fewer replicas; rebalance restores the count.  Every
		 * byte went to the good replicas: the md5 is coming. */
		size_t n = strlen(p->why);
		snprintf(p->why + n, sizeof(p->why) - n,
			 "; REPLACE partly done: the new value is on %d of %d replicas", nok,
			 p->nlocs);
		eof = httpc_stream_wait_end(p->st, &p->size);
		keep = ok, nkeep = nok;
		for (int i = 0; i < p->nlocs; i++)
			if (!record_has_loc(keep, nkeep, p->locs[i]))
				drop[ndrop++] = p->locs[i];
	}
	for (int i = 0; i < p->oldrec.nlocs; i++)
		if (!record_has_loc(keep, nkeep, p->oldrec.locs[i]) &&
		    !record_has_loc(drop, ndrop, p->oldrec.locs[i]))
			drop[ndrop++] = p->oldrec.locs[i];
	move_note(p->key, p->klen, drop, ndrop);
	if ((rc = write_record(p, false, eof ? p->hash : "", keep, nkeep)) < 0) {
		if (!p->status)
			index_failed(p);
		log_msg("REPLACE %s: index write failed; the copies may differ until the next "
			"start settles them", p->key);
		return;   /* the 'r' note stays: the next start settles the key from them */
	}
	if (p->status)
		write_meta(p, eof);
	for (int i = 0; i < ndrop; i++)
		move_delete_later(p->idx, p->key, p->klen, drop[i], p->path);
	meta_raw_delete('r', p->key, p->klen);
}

static bool count_body(void *ctx, const char *p, size_t n)
{
	(void)p;
	*(uint64_t *)ctx += n;
	return true;
}

/* A REPLACE a crash cut short (put.h): each place the live record names
 * holds the old value or the new, whole (a volume renames only complete
 * bodies into place).  Read them all and name only the copies that agree:
 * the old value's (HASH) where one still holds it, else the value most of
 * them hold.  Returns 0, or -1 when no copy could be read. */
static int settle_replace(const struct config *cfg, struct index *idx, const char *key,
			  size_t klen, const struct record *r, const char *to)
{
	char path[PATH_MAX_LEN], md5[2 * RECORD_MAX_LOCS][33], err[256], *v;
	char *locs[2 * RECORD_MAX_LOCS], *differ[2 * RECORD_MAX_LOCS];
	char *tocopy = xstrdup(to), *save = NULL;
	uint64_t size[2 * RECORD_MAX_LOCS];
	struct record n = {0};
	int pick = -1, best = 0, nall = r->nlocs, ndiffer = 0;
	size_t len;

	/* The places the record names, then those the REPLACE wrote to besides
	 * (never named now: only read, to delete what differs). */
	for (int i = 0; i < r->nlocs; i++)
		locs[i] = r->locs[i];
	for (char *l = strtok_r(tocopy, ",", &save); l && nall < 2 * RECORD_MAX_LOCS;
	     l = strtok_r(NULL, ",", &save))
		if (!record_has_loc(locs, nall, l))
			locs[nall++] = l;
	placement_path(key, klen, path);
	for (int i = 0; i < nall; i++) {
		char *url = httpc_url(locs[i], path);
		struct httpc_call g = {.url = url, .connect_ms = (long)cfg->voltimeout_ms,
				       .stall_s = 10, .body = count_body, .ctx = &size[i],
				       .md5 = md5[i]};
		size[i] = 0;
		if (httpc_call(&g, err) != 200)
			md5[i][0] = '\0';
		free(url);
	}
	for (int i = 0; i < r->nlocs && pick < 0; i++)
		if (md5[i][0] && !strcmp(md5[i], r->hash))
			pick = i;
	if (pick < 0)   /* no copy holds the old value: the one most hold */
		for (int i = 0; i < r->nlocs; i++) {
			int same = 0;
			for (int j = 0; j < r->nlocs; j++)
				same += md5[i][0] && !strcmp(md5[i], md5[j]);
			if (same > best)
				best = same, pick = i;
		}
	if (pick < 0) {
		free(tocopy);
		return -1;
	}
	snprintf(n.hash, sizeof(n.hash), "%s", r->hash[0] ? md5[pick] : "");
	for (int i = 0; i < r->nlocs; i++)
		if (!strcmp(md5[i], md5[pick]))
			n.locs[n.nlocs++] = r->locs[i];
	v = record_encode(&n, &len);
	if (index_write(idx, key, klen, v, len, true) < 0) {
		free(v);
		free(tocopy);
		return -1;
	}
	free(v);
	/* The copies that differ hold a value no record names now: gone, so
	 * that a rebuild cannot take them back (gc's, if the delete fails). */
	for (int i = 0; i < nall; i++)
		if (md5[i][0] && strcmp(md5[i], md5[pick]))
			differ[ndiffer++] = locs[i];
	httpc_delete_all(differ, ndiffer, path, (long)cfg->voltimeout_ms * 5,
			 "REPLACE settled (gc finds what is left): ");
	if (strcmp(md5[pick], r->hash)) { /* the new value: its S3 metadata */
		struct meta m = {.size = size[pick], .mtime = (int64_t)time(NULL)};
		snprintf(m.etag, sizeof(m.etag), "%s", md5[pick]);
		meta_put(key, klen, &m);
	}
	log_msg("REPLACE of %.*s was cut short by a restart: %d of its %d copies hold the %s "
		"value, and the record names those", (int)klen, key, n.nlocs, r->nlocs,
		!r->hash[0] ? "same" : strcmp(md5[pick], r->hash) ? "new" : "old");
	free(tocopy);
	return 0;
}

/* The put is over: tell put_wait, and the front unless it let go. */
static void finish(struct put *p)
{
	pthread_mutex_lock(&p->mu);
	p->finished = true;
	pthread_cond_broadcast(&p->cv);
	if (!p->released && p->wake)
		p->wake(p->arg);
	pthread_mutex_unlock(&p->mu);
}

static void worker(void *arg)
{
	struct put *p = arg;

	/* First the DELETED record (put.h) or, for a REPLACE, the marker that
	 * lets a master that crashes mid-REPLACE settle the key at its next
	 * start (settle_replace) instead of serving copies that may differ. */
	char *where = p->replace ? record_join_locs(p->locs, p->nlocs) : NULL;
	if (p->replace ? meta_raw_put('r', p->key, p->klen, where, true) < 0
		       : write_record(p, true, "", p->locs, p->nlocs) < 0)
		index_failed(p);
	else
		send_body(p);
	free(where);

	if (p->replace) {
		replace_end(p);
		if (!p->status)
			p->status = 201;
	} else if (!p->status) {
		if (write_record(p, false, p->hash, p->locs, p->nlocs) < 0)
			index_failed(p);
		else
			p->status = 201;
	}
	meta_or_fail(p);
	/* A success frees the key before the client hears back (so its next
	 * request on the key is not refused); a failure is told at once, and
	 * the key stays locked while what was written is removed, which may
	 * wait on the very volume that failed. */
	if (p->status == 201 || p->replace) /* a REPLACE has cleaned up already */
		keylock_release(p->key, p->klen);
	finish(p);
	if (p->status != 201 && !p->replace) {
		cleanup_failed(p);
		keylock_release(p->key, p->klen);
	}
	unref(p);
}

static void start_worker(struct put *p);

/* ---- a small PUT on the event loop ----
 * The same steps as worker()'s, none of which blocks the loop: the
 * DELETED record and the live one go to the index's committer (the live
 * one synced, with others', in one batch), the bytes to the replicas on
 * the loop's transfers.  Only a failure's cleanup, which may wait on the
 * very volume that failed, runs on a thread. */

static void failed_cleanup(void *arg)
{
	struct put *p = arg;
	cleanup_failed(p);
	keylock_release(p->key, p->klen);
	unref(p);
}

static void async_end(struct put *p)
{
	meta_or_fail(p);
	if (p->status == 201)
		keylock_release(p->key, p->klen);
	finish(p);
	loop_release(p->loop);
	if (p->status == 201)
		unref(p);
	else if (spawn(failed_cleanup, p) < 0)
		failed_cleanup(p);
}

/* On the loop, once the committer wrote p's record. */
static void written_loop(void *arg)
{
	struct put *p = arg;
	if (p->commit_rc < 0) {
		index_failed(p);
		async_end(p);
	} else {
		p->then(p);
	}
}

/* On the committer's thread. */
static void written(void *arg, int rc)
{
	struct put *p = arg;
	p->commit_rc = rc;
	loop_post(p->loop, written_loop, p);
}

/* p's record (deleted or live, naming every location) to the committer;
 * then(p) on the loop once it is written. */
static void write_async(struct put *p, bool deleted, bool sync, void (*then)(struct put *))
{
	size_t len;
	char *v = encode(p, deleted, deleted ? "" : p->hash, p->locs, p->nlocs, &len);
	p->then = then;
	index_write_async(p->idx, p->key, p->klen, v, len, sync, written, p);
	free(v);
}

static void committed(struct put *p)
{
	p->status = 201;
	async_end(p);
}

static void async_sent(void *arg, int first)
{
	struct put *p = arg;
	for (int i = 0; first >= 0 && i < p->nlocs; i++)
		judge(p, (first + i) % p->nlocs);
	if (p->status) {
		async_end(p);
		return;
	}
	httpc_stream_wait_end(p->st, &p->size);   /* the body is in: at once */
	write_async(p, false, true, committed);
}

static void marked(struct put *p)
{
	if (httpc_stream_run_async(p->st, async_sent, p) < 0) {
		/* not small after all (cannot be, put_finish checked): the
		 * worker's way, off the loop */
		loop_release(p->loop);
		p->refs--;
		start_worker(p);
	}
}

/* A small PUT whose body is in, on this thread's loop: false when there is
 * no loop (or it is a REPLACE), and the worker takes it. */
static bool run_async(struct put *p)
{
	struct loop *l = loop_current();
	if (!l || p->replace || !p->wake)   /* put_wait's would wait on this very loop */
		return false;
	p->loop = l;
	p->refs++;
	p->started = true;
	loop_hold(l);
	/* Not synced, as worker()'s (the live record's sync covers it), but
	 * written before any byte goes out. */
	write_async(p, true, false, marked);
	return true;
}

/* A replica's volume the health check marked down answers nothing until
 * -puttimeout: its write fails now (503), and the client can retry. */
static bool replica_down(void *arg, int i)
{
	struct put *p = arg;
	return !health_up(p->locs[i], strlen(p->locs[i]));
}

/* Call without mu, before the worker can exist. */
static void start_worker(struct put *p)
{
	p->refs++;
	p->started = true;
	if (spawn(worker, p) < 0) {
		log_msg("pthread_create failed: out of threads");
		fail(p, 503, "server busy: no thread for this write");
		p->finished = true;
		p->refs--;
		keylock_release(p->key, p->klen);
	}
}

struct put *put_start(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		      char (*locs)[LOC_MAX], int nlocs, int64_t clen, void (*wake)(void *), void *arg,
		      bool replace, size_t ring)
{
	struct put *p = xcalloc(1, sizeof(*p));
	struct httpc_stream_cfg sc = {.n = nlocs, .clen = clen, .wake = wake, .arg = arg,
				      .connect_ms = (long)cfg->puttimeout_ms,
				      .stall_ms = (long)cfg->puttimeout_ms};
	if (replace) { /* the caller holds the key's lock: the record stays as read */
		size_t vlen;
		p->old = index_get(idx, key, klen, &vlen);
		p->replace = p->old && record_parse(p->old, vlen, &p->oldrec) == 0 &&
			     !p->oldrec.deleted;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->cfg = cfg;
	p->idx = idx;
	p->key = xstrndup(key, klen);
	p->klen = klen;
	placement_path(key, klen, p->path);
	p->nlocs = nlocs;
	p->reqs = xcalloc((size_t)nlocs, sizeof(*p->reqs));
	for (int i = 0; i < nlocs; i++) {
		p->locs[i] = xstrdup(locs[i]);
		p->reqs[i].url = httpc_url(locs[i], p->path);
	}
	if (!ring || ring > RING_MAX)
		ring = RING_MAX;
	/* A REPLACE drives every replica to its end even after one fails:
	 * what each holds (old bytes or new) decides what the record says. */
	sc.all = p->replace;
	sc.down = replica_down;
	sc.down_arg = p;
	sc.reqs = p->reqs;
	sc.cap = clen >= 0 && (uint64_t)clen < ring ? (size_t)clen + 1 : ring;
	p->st = httpc_stream_new(&sc);
	p->wake = wake;
	p->arg = arg;
	p->refs = 1;
	p->clen = clen;
	if (!(clen > 0 && (uint64_t)clen <= HTTPC_SMALL_MAX)) /* sent whole (httpc.h) */
		start_worker(p);
	return p;
}

void put_set_etag(struct put *p, const char *etag)
{
	pthread_mutex_lock(&p->mu);
	snprintf(p->etag, sizeof(p->etag), "%s", etag);
	pthread_mutex_unlock(&p->mu);
}

const char *put_md5(struct put *p)
{
	return p->hash;
}

/* Stop p: the client went away, or its body does not match its length. */
static void stop(struct put *p, int status, const char *why)
{
	bool unstarted;
	pthread_mutex_lock(&p->mu);
	if (!p->aborted) {
		p->stop_status = status;
		p->stop_why = why;
	}
	p->aborted = true;
	unstarted = !p->started && !p->finished;
	if (unstarted) {   /* nothing was written: just free the key */
		fail(p, status, "%s", why);
		p->finished = true;
	}
	pthread_mutex_unlock(&p->mu);
	httpc_stream_abort(p->st);
	if (unstarted)
		keylock_release(p->key, p->klen);
}

/* More bytes than the length announced: whatever the HTTP library framed,
 * they are not this value's.  Refused at once and swallowed, so that the
 * put ends (a small one's ring holds exactly clen + 1 bytes, and no worker
 * runs to drain it: offered more, it would wait forever). */
static bool overrun(struct put *p, size_t n)
{
	if (p->clen < 0 || p->fed + n <= (uint64_t)p->clen)
		return false;
	stop(p, 400, "body longer than its Content-Length");
	return true;
}

size_t put_feed(struct put *p, const char *data, size_t n)
{
	bool finished;
	size_t took;
	pthread_mutex_lock(&p->mu);
	finished = p->finished;
	pthread_mutex_unlock(&p->mu);
	if (finished || overrun(p, n))
		return n;   /* failed early: swallow the rest */
	took = httpc_stream_feed(p->st, data, n);
	p->fed += took;
	return took;
}

bool put_feed_all(struct put *p, const char *data, size_t n)
{
	while (n) {
		size_t k;
		pthread_mutex_lock(&p->mu);
		k = p->finished || p->aborted;
		pthread_mutex_unlock(&p->mu);
		if (k || httpc_stream_aborted(p->st) || overrun(p, n))
			return false;
		k = httpc_stream_feed_wait(p->st, data, n, 100);
		p->fed += k;
		data += k;
		n -= k;
	}
	return true;
}

void put_finish(struct put *p)
{
	if (p->clen >= 0 && p->fed < (uint64_t)p->clen)
		stop(p, 400, "body shorter than its Content-Length");
	httpc_stream_finish(p->st, p->hash);
	if (!p->started && !p->finished && !run_async(p))
		start_worker(p);
}

bool put_result(struct put *p, int *status, const char **why)
{
	bool done;
	pthread_mutex_lock(&p->mu);
	done = p->finished;
	if (done) {
		*status = p->status;
		*why = p->why;
	}
	pthread_mutex_unlock(&p->mu);
	return done;
}

void put_wait(struct put *p, int *status, const char **why)
{
	pthread_mutex_lock(&p->mu);
	while (!p->finished)
		pthread_cond_wait(&p->cv, &p->mu);
	*status = p->status;
	*why = p->why;
	pthread_mutex_unlock(&p->mu);
}

void put_abort(struct put *p)
{
	stop(p, 500, "client went away");
}

void put_release(struct put *p)
{
	httpc_stream_quiet(p->st);
	pthread_mutex_lock(&p->mu);
	p->released = true;
	pthread_mutex_unlock(&p->mu);
	unref(p);
}

void put_done(struct put *p)
{
	int st;
	const char *why;
	if (!put_result(p, &st, &why))
		put_abort(p); /* the client went away mid-body */
	put_release(p);
}

void put_sweep_replaces(const struct config *cfg, struct index *idx)
{
	struct index_iter *it = meta_notes('r');
	if (!it)
		return;
	for (; index_iter_valid(it); index_iter_next(it)) {
		size_t klen, vlen;
		const char *k = index_iter_key(it, &klen), *w;
		char *v, *to;
		struct record r;
		size_t wlen;
		bool done = true;   /* settled or unlinked: else the note stays for the next start */
		if (!klen || k[0] != 'r')
			break;
		w = index_iter_value(it, &wlen);
		to = xstrndup(w, wlen);
		v = index_get(idx, k + 1, klen - 1, &vlen);
		if (v && record_parse(v, vlen, &r) == 0 && !r.deleted &&
		    settle_replace(cfg, idx, k + 1, klen - 1, &r, to) < 0) {
			size_t elen;
			char *enc;
			r.deleted = true;
			enc = record_encode(&r, &elen);
			if ((done = index_write(idx, k + 1, klen - 1, enc, elen, true) == 0))
				log_msg("REPLACE of %.*s was cut short by a restart: its copies may "
					"differ and none could be read, so it is unlinked (RELINK "
					"after verify, or DELETE)", (int)klen - 1, k + 1);
			free(enc);
		}
		free(v);
		free(to);
		if (done)
			meta_raw_delete('r', k + 1, klen - 1);
	}
	index_iter_free(it);
}
