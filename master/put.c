/* put.c -- see put.h.  Only this file and the HTTP front talk libcurl's
 * multi interface. */
#include "put.h"
#include "keylock.h"
#include "meta.h"
#include "spawn.h"
#include "../common/httpc.h"
#include "../common/placement.h"
#include "../common/record.h"
#include "../common/util.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RING_MAX (4u << 20)
#define SMALL_MAX (64u << 10)   /* a body this small is sent whole, with the head */
#define WAKE_BYTES (256u << 10)
#define MULTI_IDLE_MAX 64

/* Multi handles hold the connection cache: parked ones keep their
 * connections to the volumes warm for the next PUT. */
static pthread_mutex_t multi_mu = PTHREAD_MUTEX_INITIALIZER;
static CURLM *multi_idle[MULTI_IDLE_MAX];
static int nmulti_idle;

static CURLM *multi_get(void)
{
	CURLM *m = NULL;
	pthread_mutex_lock(&multi_mu);
	if (nmulti_idle)
		m = multi_idle[--nmulti_idle];
	pthread_mutex_unlock(&multi_mu);
	if (!m) {
		m = curl_multi_init();
		if (!m)
			die("curl_multi_init failed");
		curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, 64L);
	}
	return m;
}

static void multi_put(CURLM *m)
{
	pthread_mutex_lock(&multi_mu);
	if (nmulti_idle < MULTI_IDLE_MAX) {
		multi_idle[nmulti_idle++] = m;
		m = NULL;
	}
	pthread_mutex_unlock(&multi_mu);
	if (m)
		curl_multi_cleanup(m);
}

struct replica {
	struct put *p;
	CURL *h;
	char *url;
	uint64_t pos;          /* bytes of the body handed to curl */
	bool paused;           /* waiting for body bytes */
	bool done;
	long status;           /* HTTP status, or -1 */
	char err[CURL_ERROR_SIZE];
	uint64_t active_ms;    /* last progress */
};

struct put {
	pthread_mutex_t mu;
	const struct config *cfg;
	struct index *idx;
	char *key;
	size_t klen;
	char path[PATH_MAX_LEN];
	char *locs[RECORD_MAX_LOCS];
	int nlocs;
	int64_t clen;

	char *ring;
	size_t cap;
	uint64_t head;         /* bytes taken from the client */
	bool eof, aborted, want_space, released, finished;
	bool small;            /* clen <= SMALL_MAX: the worker starts at put_finish */
	bool started;          /* the worker runs (or ran) */
	int npaused;           /* replicas waiting for body bytes */
	int refs;

	EVP_MD_CTX *md5;
	char hash[33];

	/* REPLACE (see put.h): the live record stays until the new bytes
	 * are everywhere; etag is what the metadata keeps instead of hash. */
	bool replace;
	char *old;             /* the old record, parsed into oldrec */
	struct record oldrec;
	char etag[META_ETAG_MAX];

	CURLM *multi;
	struct replica rep[RECORD_MAX_LOCS];

	void (*wake)(void *);
	void *arg;
	int status;
	char why[512];
};

static uint64_t tail_of(struct put *p)
{
	uint64_t t = p->head;
	for (int i = 0; i < p->nlocs; i++)
		if (p->rep[i].pos < t)
			t = p->rep[i].pos;
	return t;
}

static void ring_copy_out(struct put *p, uint64_t pos, char *dst, size_t n)
{
	size_t off = (size_t)(pos % p->cap), first = p->cap - off;
	if (first > n)
		first = n;
	memcpy(dst, p->ring + off, first);
	memcpy(dst + first, p->ring, n - first);
}

static void ring_copy_in(struct put *p, const char *src, size_t n)
{
	size_t off = (size_t)(p->head % p->cap), first = p->cap - off;
	if (first > n)
		first = n;
	memcpy(p->ring + off, src, first);
	memcpy(p->ring, src + first, n - first);
}

/* Call with mu held: is the front waiting for room that is now there? */
static bool need_wake(struct put *p)
{
	if (!p->want_space || p->released)
		return false;
	if (p->cap - (p->head - tail_of(p)) < p->cap / 2)
		return false;
	p->want_space = false;
	return true;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ud)
{
	struct replica *r = ud;
	struct put *p = r->p;
	size_t n = size * nmemb;
	uint64_t avail;

	pthread_mutex_lock(&p->mu);
	if (p->aborted) {
		pthread_mutex_unlock(&p->mu);
		return CURL_READFUNC_ABORT;
	}
	avail = p->head - r->pos;
	if (!avail) {
		if (p->eof) {
			pthread_mutex_unlock(&p->mu);
			return 0;
		}
		r->paused = true;
		p->npaused++;
		pthread_mutex_unlock(&p->mu);
		return CURL_READFUNC_PAUSE;
	}
	if (n > avail)
		n = (size_t)avail;
	ring_copy_out(p, r->pos, buf, n);
	r->pos += n;
	r->active_ms = now_ms();
	if (need_wake(p))
		p->wake(p->arg); /* under mu, so put_release cannot race it */
	pthread_mutex_unlock(&p->mu);
	return n;
}

static size_t on_discard(char *b, size_t s, size_t n, void *ud)
{
	(void)b, (void)ud;
	return s * n;
}

static void put_free(struct put *p)
{
	for (int i = 0; i < p->nlocs; i++) {
		free(p->locs[i]);
		free(p->rep[i].url);
	}
	EVP_MD_CTX_free(p->md5);
	free(p->old);
	if (p->multi)
		multi_put(p->multi);
	pthread_mutex_destroy(&p->mu);
	free(p->ring);
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

static int write_record(struct put *p, bool deleted, const char *hash)
{
	struct record r = {.deleted = deleted, .nlocs = p->nlocs};
	size_t len;
	char *v;
	int rc;
	snprintf(r.hash, sizeof(r.hash), "%s", hash ? hash : "");
	for (int i = 0; i < p->nlocs; i++)
		r.locs[i] = p->locs[i];
	v = record_encode(&r, &len);
	/* The DELETED record needs no sync of its own: the live record's sync
	 * covers it, and lost alone it only leaves unreferenced bytes. */
	rc = deleted ? index_put_nosync(p->idx, p->key, p->klen, v, len)
		     : index_put(p->idx, p->key, p->klen, v, len);
	free(v);
	return rc;
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

/* Drive the uploads until every replica is done or the put fails. */
static void transfer(struct put *p)
{
	int running = 1;
	uint64_t timeout = p->cfg->puttimeout_ms;

	/* A REPLACE drives every replica to its end even after one fails:
	 * what each holds (old bytes or new) decides what the record says. */
	while (running && (!p->status || p->replace)) {
		bool stalled = false;
		struct replica *unpause[RECORD_MAX_LOCS];
		int nun = 0, left;
		CURLMsg *m;

		curl_multi_perform(p->multi, &running);
		while ((m = curl_multi_info_read(p->multi, &left))) {
			struct replica *r;
			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
			r->done = true;
			if (m->data.result != CURLE_OK) {
				fail(p, 503, "replica %s: %s", r->url,
				     r->err[0] ? r->err : curl_easy_strerror(m->data.result));
			} else {
				curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
				if (r->status < 200 || r->status > 299)
					fail(p, r->status == 507 ? 507 : 500,
					     "replica %s answered %ld", r->url, r->status);
			}
		}
		if (!running || (p->status && !p->replace))
			break;

		pthread_mutex_lock(&p->mu);
		if (p->aborted)
			fail(p, 500, "client went away");
		for (int i = 0; i < p->nlocs && (!p->status || p->replace); i++) {
			struct replica *r = &p->rep[i];
			if (r->done)
				continue;
			if (r->paused && (p->head > r->pos || p->eof)) {
				r->paused = false;
				p->npaused--;
				r->active_ms = now_ms();
				unpause[nun++] = r;
			} else if (!r->paused && timeout && now_ms() - r->active_ms > timeout) {
				fail(p, 504, "replica %s: no progress for -puttimeout", r->url);
				stalled = true;
			}
		}
		pthread_mutex_unlock(&p->mu);
		if (stalled)
			break;
		for (int i = 0; i < nun; i++)
			curl_easy_pause(unpause[i]->h, CURLPAUSE_CONT);
		if (!nun)
			curl_multi_poll(p->multi, NULL, 0, 100, NULL);
	}
}

/* With a known length the replicas can be done before the front has seen
 * the end of the body (and so before the md5 is final): wait for it. */
static void await_eof(struct put *p)
{
	while (!p->status) {
		bool eof, aborted;
		pthread_mutex_lock(&p->mu);
		eof = p->eof;
		aborted = p->aborted;
		pthread_mutex_unlock(&p->mu);
		if (aborted)
			fail(p, 500, "client went away");
		if (eof || aborted)
			return;
		curl_multi_poll(p->multi, NULL, 0, 100, NULL);
	}
}

/* Remove what a failed put wrote; keep the DELETED record if that fails. */
static void cleanup_failed(struct put *p)
{
	struct httpc_req reqs[RECORD_MAX_LOCS];
	bool clean = true;
	for (int i = 0; i < p->nlocs; i++)
		reqs[i].url = p->rep[i].url;
	httpc_fanout("DELETE", reqs, p->nlocs, NULL, 0, (long)p->cfg->voltimeout_ms * 5);
	for (int i = 0; i < p->nlocs; i++) {
		int st = reqs[i].status;
		if (!(st >= 200 && st < 300) && st != 404) {
			log_msg("PUT cleanup: DELETE %s failed (%d%s%s); record left as DELETED",
				reqs[i].url, st, st < 0 ? ": " : "", st < 0 ? reqs[i].err : "");
			clean = false;
		}
	}
	if (clean)
		index_delete(p->idx, p->key, p->klen);
}

/* ---- REPLACE ---- */

static bool named(char *const *locs, int n, const char *loc)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(locs[i], loc))
			return true;
	return false;
}

/* Best-effort removal of the copies at old locations that the record no
 * longer names (they hold the old bytes, or none).  A failure leaves an
 * orphan that gc finds: nothing names it. */
static void drop_unnamed(struct put *p, char *const *keep, int nkeep, char *const *cand, int ncand)
{
	for (int i = 0; i < ncand; i++) {
		char url[LOC_MAX + PATH_MAX_LEN + 16];
		int st;
		if (named(keep, nkeep, cand[i]))
			continue;
		snprintf(url, sizeof(url), "http://%s%s", cand[i], p->path);
		st = httpc_do("DELETE", url, NULL, 0, (long)p->cfg->voltimeout_ms * 5, NULL, 0, NULL);
		if (!(st >= 200 && st < 300) && st != 404)
			log_msg("REPLACE %s: DELETE %s failed (%d); the stale copy stays until gc",
				p->key, url, st);
	}
}

static void replace_begin(struct put *p)
{
	/* The marker lets a master that crashes mid-REPLACE unlink the key at
	 * its next start instead of serving copies that may differ. */
	if (meta_raw_put('r', p->key, p->klen, "", true) < 0)
		fail(p, 500, "index write failed");
}

/* After the transfers: the new record, or on failure the record of what
 * the replicas now hold.  Replicas that answered 2xx hold the new bytes;
 * the others kept the old ones (volumes write to a temporary name and
 * rename, so a failed PUT leaves the old file). */
static void replace_end(struct put *p)
{
	char *ok[RECORD_MAX_LOCS], *newl[RECORD_MAX_LOCS];
	int nok = 0;
	for (int i = 0; i < p->nlocs; i++) {
		newl[i] = p->locs[i];
		if (p->rep[i].done && p->rep[i].status >= 200 && p->rep[i].status < 300)
			ok[nok++] = p->locs[i];
	}
	if (!p->status) {
		if (write_record(p, false, p->cfg->md5sum ? p->hash : NULL) < 0)
			fail(p, 500, "index write failed");
		else
			drop_unnamed(p, newl, p->nlocs, p->oldrec.locs, p->oldrec.nlocs);
	} else if (nok == 0) {
		/* Nothing was replaced: the old record still holds. */
		size_t n = strlen(p->why);
		snprintf(p->why + n, sizeof(p->why) - n, "; nothing was replaced");
	} else {
		/* Some copies are new: the record names only those (the
		 * others are removed), so what is served is the new value,
		 * on fewer replicas; rebalance restores the count. */
		bool eof = false;
		while (!eof) { /* every byte went to the good replicas: the md5 is coming */
			pthread_mutex_lock(&p->mu);
			eof = p->eof || p->aborted;
			pthread_mutex_unlock(&p->mu);
			if (!eof && p->multi)
				curl_multi_poll(p->multi, NULL, 0, 100, NULL);
		}
		struct record r = {.deleted = false, .nlocs = nok};
		size_t len;
		char *v;
		if (p->eof && p->cfg->md5sum)
			memcpy(r.hash, p->hash, sizeof(r.hash));
		for (int i = 0; i < nok; i++)
			r.locs[i] = ok[i];
		v = record_encode(&r, &len);
		if (index_put(p->idx, p->key, p->klen, v, len) < 0) {
			log_msg("REPLACE %s: index write failed; the copies may differ: run verify",
				p->key);
		} else {
			struct meta m = {.size = p->head, .mtime = (int64_t)time(NULL)};
			if (p->eof)
				snprintf(m.etag, sizeof(m.etag), "%s", p->etag[0] ? p->etag : p->hash);
			meta_put(p->key, p->klen, &m);
			drop_unnamed(p, ok, nok, newl, p->nlocs);
			drop_unnamed(p, ok, nok, p->oldrec.locs, p->oldrec.nlocs);
		}
		free(v);
		size_t n = strlen(p->why);
		snprintf(p->why + n, sizeof(p->why) - n,
			 "; REPLACE partly done: the new value is on %d of %d replicas", nok,
			 p->nlocs);
	}
	meta_raw_delete('r', p->key, p->klen);
}

/* A small body is all here before the worker starts: every replica gets it
 * in one request, head and body together, in parallel. */
static void send_small(struct put *p)
{
	struct httpc_req reqs[RECORD_MAX_LOCS];
	for (int i = 0; i < p->nlocs; i++)
		reqs[i].url = p->rep[i].url;
	httpc_fanout("PUT", reqs, p->nlocs, p->ring, (size_t)p->head,
		     (long)p->cfg->puttimeout_ms);
	for (int i = 0; i < p->nlocs; i++) {
		int st = reqs[i].status;
		p->rep[i].done = true;        /* what REPLACE's end reads */
		p->rep[i].status = st;
		if (reqs[i].timed_out)
			fail(p, 504, "replica %s: no progress for -puttimeout", reqs[i].url);
		else if (st < 0)
			fail(p, 503, "replica %s: %s", reqs[i].url, reqs[i].err);
		else if (st < 200 || st > 299)
			fail(p, st == 507 ? 507 : 500, "replica %s answered %d", reqs[i].url, st);
	}
}

/* A body of any size streams through the ring as it arrives. */
static void send_stream(struct put *p)
{
	struct curl_slist *hdrs = curl_slist_append(NULL, "Expect:");
	for (int i = 0; i < p->nlocs; i++) {
		struct replica *r = &p->rep[i];
		r->h = curl_easy_init();
		curl_easy_setopt(r->h, CURLOPT_URL, r->url);
		curl_easy_setopt(r->h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(r->h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(r->h, CURLOPT_READDATA, r);
		curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, on_discard);
		curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(r->h, CURLOPT_PRIVATE, (char *)r);
		curl_easy_setopt(r->h, CURLOPT_ERRORBUFFER, r->err);
		curl_easy_setopt(r->h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(r->h, CURLOPT_CONNECTTIMEOUT_MS, (long)p->cfg->puttimeout_ms);
		curl_easy_setopt(r->h, CURLOPT_UPLOAD_BUFFERSIZE, 512L * 1024);
		if (p->clen >= 0)
			curl_easy_setopt(r->h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)p->clen);
		r->active_ms = now_ms();
		curl_multi_add_handle(p->multi, r->h);
	}
	transfer(p);
	await_eof(p);
	for (int i = 0; i < p->nlocs; i++) {
		if (p->rep[i].h) {
			curl_multi_remove_handle(p->multi, p->rep[i].h);
			curl_easy_cleanup(p->rep[i].h);
		}
	}
	curl_slist_free_all(hdrs);
}

static void worker(void *arg)
{
	struct put *p = arg;

	if (p->replace)
		replace_begin(p);
	if (p->status)
		;
	else if (!p->replace && write_record(p, true, NULL) < 0)
		fail(p, 500, "index write failed");
	else if (p->small)
		send_small(p);
	else
		send_stream(p);

	if (p->replace) {
		replace_end(p);
		if (!p->status)
			p->status = 201;
	} else if (!p->status) {
		if (write_record(p, false, p->cfg->md5sum ? p->hash : NULL) < 0)
			fail(p, 500, "index write failed");
		else
			p->status = 201;
	}
	if (p->status == 201) {
		struct meta m = {.size = p->head, .mtime = (int64_t)time(NULL)};
		snprintf(m.etag, sizeof(m.etag), "%s", p->etag[0] ? p->etag : p->hash);
		meta_put(p->key, p->klen, &m);
	}
	/* A success frees the key before the client hears back (so its next
	 * request on the key is not refused); a failure is told at once, and
	 * the key stays locked while what was written is removed, which may
	 * wait on the very volume that failed. */
	if (p->status == 201 || p->replace) /* a REPLACE has cleaned up already */
		keylock_release(p->key, p->klen);
	pthread_mutex_lock(&p->mu);
	p->finished = true;
	if (!p->released)
		p->wake(p->arg);
	pthread_mutex_unlock(&p->mu);
	if (p->status != 201 && !p->replace) {
		cleanup_failed(p);
		keylock_release(p->key, p->klen);
	}
	unref(p);
}

/* Call without mu, before the worker can exist. */
static void start_worker(struct put *p)
{
	p->refs++;
	p->started = true;
	if (spawn(worker, p) < 0) {
		log_msg("pthread_create failed: out of threads");
		p->status = 503;
		snprintf(p->why, sizeof(p->why), "server busy: no thread for this write");
		p->finished = true;
		p->refs--;
		keylock_release(p->key, p->klen);
	}
}

static struct put *start(const struct config *cfg, struct index *idx, const char *key, size_t klen,
			 char *const *locs, int nlocs, int64_t clen, void (*wake)(void *), void *arg,
			 bool replace, size_t ring)
{
	struct put *p = xcalloc(1, sizeof(*p));
	if (replace) { /* the caller holds the key's lock: the record stays as read */
		size_t vlen;
		p->old = index_get(idx, key, klen, &vlen);
		p->replace = p->old && record_parse(p->old, vlen, &p->oldrec) == 0 &&
			     !p->oldrec.deleted;
	}

	pthread_mutex_init(&p->mu, NULL);
	p->cfg = cfg;
	p->idx = idx;
	p->key = xstrndup(key, klen);
	p->klen = klen;
	placement_path(key, klen, p->path);
	p->nlocs = nlocs;
	for (int i = 0; i < nlocs; i++) {
		p->locs[i] = xstrdup(locs[i]);
		p->rep[i].p = p;
		p->rep[i].url = xasprintf("http://%s%s", locs[i], p->path);
	}
	p->clen = clen;
	if (!ring || ring > RING_MAX)
		ring = RING_MAX;
	p->small = clen > 0 && (uint64_t)clen <= SMALL_MAX;
	p->cap = clen >= 0 && (uint64_t)clen < ring ? (size_t)clen + 1 : ring;
	p->ring = xmalloc(p->cap);
	p->md5 = EVP_MD_CTX_new();
	if (!p->md5 || !EVP_DigestInit_ex(p->md5, EVP_md5(), NULL))
		die("md5 init failed");
	p->wake = wake;
	p->arg = arg;
	p->refs = 1;
	if (!p->small) {
		p->multi = multi_get();
		start_worker(p);
	}
	return p;
}

struct put *put_start(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		      char *const *locs, int nlocs, int64_t clen, void (*wake)(void *), void *arg)
{
	return start(cfg, idx, key, klen, locs, nlocs, clen, wake, arg, false, 0);
}

struct put *put_start_replace(const struct config *cfg, struct index *idx, const char *key,
			      size_t klen, char *const *locs, int nlocs, int64_t clen,
			      void (*wake)(void *), void *arg, size_t ring)
{
	return start(cfg, idx, key, klen, locs, nlocs, clen, wake, arg, true, ring);
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

size_t put_feed(struct put *p, const char *data, size_t n)
{
	size_t room;
	bool wake;
	pthread_mutex_lock(&p->mu);
	if (p->finished) {              /* failed early: swallow the rest */
		pthread_mutex_unlock(&p->mu);
		return n;
	}
	room = p->cap - (size_t)(p->head - tail_of(p));
	if (n > room) {
		n = room;
		p->want_space = true;
	}
	ring_copy_in(p, data, n);
	EVP_DigestUpdate(p->md5, data, n);
	p->head += n;
	/* A busy worker finds the bytes by itself; a waiting one is woken for
	 * a good batch (or a full ring), not for every piece the client sends:
	 * the wakeups, not the bytes, would cost the most. */
	wake = n && p->npaused &&
	       (p->head - tail_of(p) >= WAKE_BYTES || p->cap - (p->head - tail_of(p)) < WAKE_BYTES);
	pthread_mutex_unlock(&p->mu);
	if (wake)
		curl_multi_wakeup(p->multi);
	return n;
}

void put_finish(struct put *p)
{
	unsigned char d[16];
	EVP_DigestFinal_ex(p->md5, d, NULL);
	pthread_mutex_lock(&p->mu);
	digest_hex(d, p->hash);
	p->eof = true;
	pthread_mutex_unlock(&p->mu);
	if (p->small && !p->started && !p->finished)
		start_worker(p);
	else if (p->multi)
		curl_multi_wakeup(p->multi);
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

void put_abort(struct put *p)
{
	pthread_mutex_lock(&p->mu);
	p->aborted = true;
	pthread_mutex_unlock(&p->mu);
	if (!p->started && !p->finished) {   /* nothing was written: just free the key */
		p->status = 500;
		snprintf(p->why, sizeof(p->why), "client went away");
		p->finished = true;
		keylock_release(p->key, p->klen);
	} else if (p->multi) {
		curl_multi_wakeup(p->multi);
	}
}

void put_release(struct put *p)
{
	pthread_mutex_lock(&p->mu);
	p->released = true;
	pthread_mutex_unlock(&p->mu);
	unref(p);
}
