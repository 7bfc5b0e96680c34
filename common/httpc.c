/* httpc.c -- see httpc.h. */
#include "httpc.h"
#include "loop.h"
#include "placement.h"
#include "vconn.h"
#include "volsign.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDLE_MAX 64
#define WAKE_BYTES (256u << 10)

_Static_assert(CURL_ERROR_SIZE <= sizeof(((struct httpc_req *)0)->err), "curl's error buffer");

/* A thread's handles: a multi handle (its connection cache) with easy
 * handles for fan-outs; the first also serves single requests.  They stay
 * with the thread until httpc_thread_cleanup, which parks them here for
 * the next short-lived thread: it then reuses warm connections instead of
 * connecting anew. */
struct conns {
	CURLM *multi;
	CURL **h;
	int nh;
};
static __thread struct conns *tl;
/* The volume names this thread's transfers met, pinned to vconn's
 * lookups (one entry a name and port, updated in place): libcurl looks
 * none up itself, so a slow resolver never eats a request's time. */
static __thread struct curl_slist *pins;
static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static struct conns *idle[IDLE_MAX];
static int nidle;
/* A body goes with the head: no 100-continue round trip, and no
 * Content-Type that volumes would ignore anyway. */
static struct curl_slist *bare_hdrs;

void httpc_global_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	bare_hdrs = curl_slist_append(NULL, "Expect:");
	bare_hdrs = curl_slist_append(bare_hdrs, "Content-Type:");
}

void httpc_thread_cleanup(void)
{
	struct conns *c = tl;
	vconn_thread_cleanup();
	curl_slist_free_all(pins);
	pins = NULL;
	tl = NULL;
	if (!c)
		return;
	pthread_mutex_lock(&idle_mu);
	if (nidle < IDLE_MAX) {
		idle[nidle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&idle_mu);
	if (!c)
		return;
	for (int i = 0; i < c->nh; i++)
		curl_easy_cleanup(c->h[i]);
	curl_multi_cleanup(c->multi);
	free(c->h);
	free(c);
}

/* This thread's handles, with at least n easy handles for a multi. */
static struct conns *conns(int n)
{
	struct conns *c = tl;
	if (!c) {
		pthread_mutex_lock(&idle_mu);
		if (nidle)
			c = idle[--nidle];
		pthread_mutex_unlock(&idle_mu);
	}
	if (!c) {
		c = xcalloc(1, sizeof(*c));
		if (!(c->multi = curl_multi_init()))
			die("curl_multi_init failed");
		curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, 64L);
	}
	tl = c;
	if (c->nh < n) {
		c->h = xrealloc(c->h, sizeof(*c->h) * (size_t)n);
		for (; c->nh < n; c->nh++)
			if (!(c->h[c->nh] = curl_easy_init()))
				die("curl_easy_init failed");
	}
	return c;
}

/* An answer's body nobody reads. */
static size_t drop(char *p, size_t size, size_t n, void *ud)
{
	(void)p, (void)ud;
	return size * n;
}

/* httpc_master's: each command sets them again, to the same */
static char master[1024], master_user[1024];

void httpc_master(const char *prefix, const char *user)
{
	snprintf(master, sizeof(master), "%s", prefix ? prefix : "");
	snprintf(master_user, sizeof(master_user), "%s", user ? user : "");
}

/* Is url under the master's prefix? */
static bool to_master(const char *url)
{
	size_t n = strlen(master);
	return n && !strncmp(url, master, n) && strchr("/?", url[n]);
}

/* url as it goes, signed for method (method NULL: never signed): the
 * callers, and their log lines, see the plain URL. */
static void set_url(CURL *h, const char *url, const char *method)
{
	char stack[2048], *big = NULL;
	const char *u = url;
	if (method && !to_master(url)) {
		u = stack;
		if (!volsign_url(url, method, VOLSIGN_SELF_TTL, stack, sizeof(stack))) {
			size_t n = strlen(url) + VOLSIGN_EXTRA;
			volsign_url(url, method, VOLSIGN_SELF_TTL, big = xmalloc(n), n);
			u = big;
		}
	}
	curl_easy_setopt(h, CURLOPT_URL, u);
	free(big);   /* libcurl copied it */
}

static void pin(CURL *h, const char *url)
{
	char s[600];
	size_t pre;
	struct curl_slist *l;
	if (!vconn_pin(url, s, sizeof(s)))
		return;
	pre = (size_t)(strchr(strchr(s, ':') + 1, ':') + 1 - s);
	for (l = pins; l && strncmp(l->data, s, pre); l = l->next)
		;
	if (!l)
		pins = curl_slist_append(pins, s);
	else if (strcmp(l->data, s)) {
		free(l->data);
		l->data = xstrdup(s);
	}
	curl_easy_setopt(h, CURLOPT_RESOLVE, pins);
}

/* Reset h for a method request to url; its answer's body is dropped unless
 * the caller sets a writer. */
static void base_opts(CURL *h, const char *url, const char *method, char *errbuf,
		      long connect_ms)
{
	curl_easy_reset(h);
	errbuf[0] = '\0';
	set_url(h, url, method);
	pin(h, url);
	if (master_user[0] && to_master(url)) {
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
		curl_easy_setopt(h, CURLOPT_USERPWD, master_user);
	}
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (vol_cacert)
		curl_easy_setopt(h, CURLOPT_CAINFO, vol_cacert);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms > 0 ? connect_ms : 10000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, drop);
}

void httpc_observe(void (*fn)(const char *url, int status))
{
	vconn_observer = fn;
}

/* The status of a finished transfer, or -1 with err (256 bytes, may be
 * NULL; may be errbuf itself). */
static int outcome(CURL *h, CURLcode rc, const char *errbuf, char *err)
{
	long st = -1;
	char *url = NULL;
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
	else if (err && !errbuf[0])
		snprintf(err, 256, "%s", curl_easy_strerror(rc));
	else if (err && err != errbuf)
		snprintf(err, 256, "%s", errbuf);
	if (vconn_observer && curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK && url)
		vconn_observer(url, (int)st);
	return (int)st;
}

static const char **tls_vols;
static int ntls;

const char *vol_scheme(const char *entry)
{
	if (!strncmp(entry, "http://", 7))
		return entry + 7;
	if (strncmp(entry, "https://", 8))
		return entry;
	tls_vols = xrealloc(tls_vols, sizeof(*tls_vols) * (size_t)(ntls + 1));
	tls_vols[ntls++] = entry + 8;
	return entry + 8;
}

bool vol_tls(const char *loc, size_t len)
{
	for (int i = 0; i < ntls; i++) {
		size_t n = strlen(tls_vols[i]);
		if (n <= len && !memcmp(loc, tls_vols[i], n) && (n == len || loc[n] == '/'))
			return true;
	}
	return false;
}

char *httpc_url(const char *loc, const char *path)
{
	return xasprintf("%s%s%s", VOL_PREFIX(loc, strlen(loc)), loc, path);
}

/* ---- one streamed request ---- */

struct get_state {
	const struct httpc_call *g;
	int status;
	struct md5 *md;         /* when g->md5 */
};

static size_t get_header(char *p, size_t size, size_t n, void *ud)
{
	struct get_state *s = ud;
	size_t len = size * n;
	if (len > 9 && !strncmp(p, "HTTP/", 5)) {
		const char *sp = memchr(p, ' ', len);
		s->status = sp ? atoi(sp + 1) : 0;
	}
	if (s->g->header && !s->g->header(s->g->ctx, s->status, p, len))
		return 0;
	return len;
}

static size_t get_body(char *p, size_t size, size_t n, void *ud)
{
	struct get_state *s = ud;
	size_t len = size * n;
	if (s->md && s->status == 200)
		md5_update(s->md, p, len);
	return !s->g->body || s->g->body(s->g->ctx, p, len) ? len : 0;
}

static size_t put_body(char *p, size_t size, size_t n, void *ud)
{
	struct get_state *s = ud;
	ssize_t got = s->g->read(s->g->ctx, p, size * n);
	if (got < 0)
		return CURL_READFUNC_ABORT;
	if (s->md)
		md5_update(s->md, p, (size_t)got);
	return (size_t)got;
}

int httpc_call(const struct httpc_call *g, char *err)
{
	struct get_state s = {g, 0, g->md5 ? md5_new() : NULL};
	struct curl_slist *hl = NULL;
	char errbuf[CURL_ERROR_SIZE], line[200];
	CURL *c = conns(1)->h[0];
	int st;

	base_opts(c, g->url, g->nosign ? NULL : g->method ? g->method : g->head ? "HEAD"
							: g->read ? "PUT" : "GET",
		  errbuf, g->connect_ms);
	if (g->range) {
		snprintf(line, sizeof(line), "Range: %s", g->range);
		hl = curl_slist_append(NULL, line);
	}
	for (int i = 0; g->headers && g->headers[i]; i++)
		hl = curl_slist_append(hl, g->headers[i]);
	if (hl && g->read)   /* bare_hdrs' two, after the caller's */
		hl = curl_slist_append(curl_slist_append(hl, "Expect:"), "Content-Type:");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl ? hl : g->read ? bare_hdrs : NULL);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, get_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &s);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, get_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_NOBODY, g->head ? 1L : 0L);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, g->method);
	if (g->read) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, put_body);
		curl_easy_setopt(c, CURLOPT_READDATA, &s);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)g->size);
	}
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, g->follow ? 1L : 0L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 4L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, g->timeout_ms);
	if (g->stall_s) {
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, g->stall_s);
	}
	if (g->bufsize)
		curl_easy_setopt(c, CURLOPT_BUFFERSIZE, g->bufsize);
	st = outcome(c, curl_easy_perform(c), errbuf, err);
	curl_slist_free_all(hl);
	if (s.md) {
		g->md5[0] = '\0';
		if (st >= 0)
			md5_final_hex(s.md, g->md5);
		md5_free(s.md);
	}
	return st;
}

/* httpc_do's body: in from memory, the answer's out to a buf. */
struct mem {
	const char *p;
	size_t n;
	struct buf *b;
	size_t max;
};

static ssize_t mem_read(void *ctx, char *p, size_t n)
{
	struct mem *m = ctx;
	n = n < m->n ? n : m->n;
	memcpy(p, m->p, n);
	m->p += n;
	m->n -= n;
	return (ssize_t)n;
}

static bool mem_write(void *ctx, const char *p, size_t n)
{
	struct mem *m = ctx;
	if (m->b && m->max && m->b->len + n > m->max)
		return false;
	if (m->b)
		buf_append(m->b, p, n);
	return true;
}

int httpc_do(const char *method, const char *url, const void *body, size_t bodylen,
	     long timeout_ms, struct buf *resp, size_t resp_max, char *err)
{
	struct mem m = {body ? body : "", bodylen, resp, resp_max};
	struct httpc_call c = {.url = url, .method = method, .head = !strcmp(method, "HEAD"),
			       .connect_ms = timeout_ms, .timeout_ms = timeout_ms,
			       .body = mem_write, .ctx = &m};
	if (body || !strcmp(method, "PUT")) {
		c.read = mem_read;
		c.size = bodylen;
	}
	return httpc_call(&c, err);
}

bool httpc_header(const char *p, size_t len, const char *name, char *out, size_t n)
{
	size_t vn;
	const char *v = vresp_value(p, len, name, &vn);
	if (v)
		snprintf(out, n, "%.*s", (int)vn, v);
	return v != NULL;
}

time_t httpc_parse_date(const char *s)
{
	return s ? curl_getdate(s, NULL) : -1;
}

/* ---- the streaming engine ----
 *
 * Each reader (a replica's PUT, or the pull reader) reads the ring from its
 * own position; a PUT pauses when it has caught up with the producer.  The
 * producer (httpc_stream_feed on another thread, or httpc_copy_to's GET in
 * the same multi) writes at head and stops when the slowest reader is a
 * ring behind.  The run loop un-pauses whoever can move again. */

struct rep {
	struct httpc_stream *s;
	struct httpc_req *req;
	CURL *h;
	uint64_t pos;           /* bytes of the body handed to curl */
	uint64_t active_ms;     /* last progress */
	bool paused, done;
};

struct httpc_stream {
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* finish and abort */
	struct httpc_stream_cfg cfg;
	char *ring;
	uint64_t head;          /* bytes taken from the producer */
	bool eof, aborted, want_space, quiet;
	bool room_waits;        /* httpc_stream_feed_wait waits on cv */
	uint64_t rpos;          /* the pull reader's position */
	bool reader_waits;      /* it found nothing: call readable */
	int npaused;            /* replicas waiting for bytes */
	int first;              /* the first replica that failed, or -1 */
	CURLM *multi;           /* while the run lasts: feed wakes it */
	struct md5 *md;
	char md5[33];
	struct rep *rep;
	/* httpc_copy_to's source */
	CURL *src;
	const char *want_md5;
	long src_status;
	bool src_paused, src_done, started;
	char why[256];          /* why the source failed */
	char src_err[CURL_ERROR_SIZE];
	void (*async_done)(void *, int);   /* httpc_stream_run_async's */
	void *async_arg;
};

struct httpc_stream *httpc_stream_new(const struct httpc_stream_cfg *cfg)
{
	struct httpc_stream *s = xcalloc(1, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->cfg = *cfg;
	s->ring = xmalloc(cfg->cap);
	s->first = -1;
	s->rep = xcalloc((size_t)cfg->n, sizeof(*s->rep));
	s->md = cfg->readable ? NULL : md5_new();  /* a pull reader has no use for it */
	for (int i = 0; i < cfg->n; i++) {
		s->rep[i] = (struct rep){.s = s, .req = &cfg->reqs[i]};
		cfg->reqs[i] = (struct httpc_req){cfg->reqs[i].url, -1, false, ""};
	}
	return s;
}

void httpc_stream_free(struct httpc_stream *s)
{
	md5_free(s->md);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s->rep);
	free(s->ring);
	free(s);
}

/* The oldest byte a replica still needs (mu held): a replica that is done
 * holds nothing back. */
static uint64_t tail_of(struct httpc_stream *s)
{
	uint64_t t = s->cfg.readable ? s->rpos : s->head;
	for (int i = 0; i < s->cfg.n; i++)
		if (!s->rep[i].done && s->rep[i].pos < t)
			t = s->rep[i].pos;
	return t;
}

/* Compare the md5 of everything taken with the wanted one (mu held). */
static bool md5_ok(struct httpc_stream *s)
{
	md5_final_hex(s->md, s->md5);
	if (!s->want_md5 || !strcmp(s->md5, s->want_md5))
		return true;
	snprintf(s->why, sizeof(s->why), "source bytes do not match md5 %s (got %s)",
		 s->want_md5, s->md5);
	return false;
}

/* Take up to n bytes into the ring (mu held); how many it took. */
static size_t take(struct httpc_stream *s, const char *p, size_t n)
{
	size_t cap = s->cfg.cap, room = cap - (size_t)(s->head - tail_of(s));
	size_t off = (size_t)(s->head % cap), first;
	if (n > room) {
		n = room;
		s->want_space = true;
	}
	if (s->md)
		md5_update(s->md, p, n);
	/* A copy's last bytes reach the PUTs only once the whole blob
	 * checked out: a volume never installs a body that did not. */
	if (n && s->want_md5 && s->cfg.clen >= 0 && s->head + n == (uint64_t)s->cfg.clen &&
	    !md5_ok(s)) {
		s->aborted = true;
		return n;
	}
	first = cap - off < n ? cap - off : n;
	memcpy(s->ring + off, p, first);
	memcpy(s->ring, p + first, n - first);
	s->head += n;
	return n;
}

/* Copy n bytes from ring position pos out (mu held). */
static void ring_out(struct httpc_stream *s, uint64_t pos, char *out, size_t n)
{
	size_t cap = s->cfg.cap, off = (size_t)(pos % cap), first = cap - off < n ? cap - off : n;
	memcpy(out, s->ring + off, first);
	memcpy(out + first, s->ring, n - first);
}

/* A reader moved on (mu held): tell a producer that waits for room. */
static void freed(struct httpc_stream *s)
{
	size_t cap = s->cfg.cap;
	if (cap - (s->head - tail_of(s)) < cap / 2)
		return;
	if (s->want_space && !s->quiet && s->cfg.wake) {
		s->want_space = false;
		s->cfg.wake(s->cfg.arg); /* under mu, so httpc_stream_quiet cannot race it */
	}
	if (s->room_waits)
		pthread_cond_broadcast(&s->cv);
}

/* Wake the pull reader when it waits (mu held; unlocks it). */
static void unlock_tell_reader(struct httpc_stream *s)
{
	bool tell = s->reader_waits && (s->head > s->rpos || s->eof || s->aborted);
	if (tell)
		s->reader_waits = false;
	pthread_mutex_unlock(&s->mu);
	if (tell)
		s->cfg.readable(s->cfg.arg);
}

size_t httpc_stream_feed(struct httpc_stream *s, const char *p, size_t n)
{
	uint64_t held;
	pthread_mutex_lock(&s->mu);
	n = take(s, p, n);
	held = s->head - tail_of(s);
	/* A busy run finds the bytes by itself; a waiting one is woken for a
	 * good batch (or a full ring), not for every piece the client sends:
	 * the wakeups, not the bytes, would cost the most. */
	if (n && s->npaused && s->multi &&
	    (held >= WAKE_BYTES || s->cfg.cap - held < WAKE_BYTES))
		curl_multi_wakeup(s->multi);
	unlock_tell_reader(s);
	return n;
}

size_t httpc_stream_feed_wait(struct httpc_stream *s, const char *p, size_t n, long ms)
{
	size_t k = httpc_stream_feed(s, p, n);
	if (k || !n)
		return k;
	pthread_mutex_lock(&s->mu);
	if (!s->aborted && s->cfg.cap - (s->head - tail_of(s)) < s->cfg.cap / 2) {
		s->room_waits = true;
		cond_wait_ms(&s->cv, &s->mu, (uint64_t)ms);
		s->room_waits = false;
	}
	pthread_mutex_unlock(&s->mu);
	return httpc_stream_feed(s, p, n);
}

bool httpc_stream_aborted(struct httpc_stream *s)
{
	bool a;
	pthread_mutex_lock(&s->mu);
	a = s->aborted;
	pthread_mutex_unlock(&s->mu);
	return a;
}

ssize_t httpc_stream_read(struct httpc_stream *s, char *out, size_t max)
{
	ssize_t got;
	uint64_t avail;
	pthread_mutex_lock(&s->mu);
	avail = s->head - s->rpos;
	if (s->aborted) {
		got = HTTPC_STREAM_ABORTED;
	} else if (!avail) {
		got = s->eof ? HTTPC_STREAM_END : 0;
		s->reader_waits = !s->eof;
	} else {
		got = (ssize_t)(avail < max ? avail : max);
		ring_out(s, s->rpos, out, (size_t)got);
		s->rpos += (uint64_t)got;
		freed(s);
	}
	pthread_mutex_unlock(&s->mu);
	return got;
}

/* Mark the end (eof) or abort, and wake whoever waits for it. */
static void stream_end(struct httpc_stream *s, bool eof)
{
	pthread_mutex_lock(&s->mu);
	if (eof)
		s->eof = true;
	else
		s->aborted = true;
	pthread_cond_broadcast(&s->cv);
	if (s->multi)
		curl_multi_wakeup(s->multi);
	unlock_tell_reader(s);
}

void httpc_stream_finish(struct httpc_stream *s, char md5[33])
{
	pthread_mutex_lock(&s->mu);
	if (s->md)
		md5_ok(s);
	if (md5)
		memcpy(md5, s->md5, 33);
	pthread_mutex_unlock(&s->mu);
	stream_end(s, true);
}

void httpc_stream_abort(struct httpc_stream *s)
{
	stream_end(s, false);
}

void httpc_stream_quiet(struct httpc_stream *s)
{
	pthread_mutex_lock(&s->mu);
	s->quiet = true;
	pthread_mutex_unlock(&s->mu);
}

bool httpc_stream_wait_end(struct httpc_stream *s, uint64_t *fed)
{
	bool eof;
	pthread_mutex_lock(&s->mu);
	while (!s->eof && !s->aborted)
		pthread_cond_wait(&s->cv, &s->mu);
	eof = !s->aborted;
	*fed = s->head;
	pthread_mutex_unlock(&s->mu);
	return eof;
}

static size_t rep_read(char *buf, size_t size, size_t nmemb, void *ud)
{
	struct rep *r = ud;
	struct httpc_stream *s = r->s;
	size_t n = size * nmemb;
	uint64_t avail;

	pthread_mutex_lock(&s->mu);
	avail = s->head - r->pos;
	if (s->aborted || (!avail && !s->eof)) {
		bool aborted = s->aborted;
		if (!aborted) {
			r->paused = true;
			s->npaused++;
		}
		pthread_mutex_unlock(&s->mu);
		return aborted ? CURL_READFUNC_ABORT : CURL_READFUNC_PAUSE;
	}
	if (n > avail)
		n = (size_t)avail;
	ring_out(s, r->pos, buf, n);
	r->pos += n;
	r->active_ms = now_ms();
	freed(s);
	pthread_mutex_unlock(&s->mu);
	return n;
}

static void start_puts(struct httpc_stream *s, struct conns *c)
{
	for (int i = 0; i < s->cfg.n; i++) {
		struct rep *r = &s->rep[i];
		r->h = c->h[i];
		base_opts(r->h, r->req->url, "PUT", r->req->err, s->cfg.connect_ms);
		curl_easy_setopt(r->h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(r->h, CURLOPT_READFUNCTION, rep_read);
		curl_easy_setopt(r->h, CURLOPT_READDATA, r);
		curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, bare_hdrs);
		curl_easy_setopt(r->h, CURLOPT_PRIVATE, (char *)r);
		if (!s->src) /* a copy keeps libcurl's default: many run at once */
			curl_easy_setopt(r->h, CURLOPT_UPLOAD_BUFFERSIZE, 512L * 1024);
		if (s->cfg.clen >= 0)
			curl_easy_setopt(r->h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)s->cfg.clen);
		r->active_ms = now_ms();
		curl_multi_add_handle(c->multi, r->h);
	}
	s->started = true;
}

/* A transfer of the multi finished. */
static void xfer_done(struct httpc_stream *s, CURL *h, CURLcode rc)
{
	struct rep *r;
	pthread_mutex_lock(&s->mu);
	if (h == s->src) {
		s->src_done = true;
		if (rc != CURLE_OK && !s->aborted && !s->why[0])
			snprintf(s->why, sizeof(s->why), "%s",
				 s->src_err[0] ? s->src_err : curl_easy_strerror(rc));
		if (rc == CURLE_OK && s->src_status == 200 && !s->aborted) {
			if (s->cfg.clen >= 0 && s->head != (uint64_t)s->cfg.clen)
				snprintf(s->why, sizeof(s->why), "source sent %llu of %lld bytes",
					 (unsigned long long)s->head, (long long)s->cfg.clen);
			else if (s->cfg.clen >= 0 || md5_ok(s))
				s->eof = true;
		}
		s->aborted = !s->eof;
	} else {
		curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&r);
		r->done = true;
		r->req->status = outcome(h, rc, r->req->err, r->req->err);
		r->req->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
		freed(s);   /* a reader that is done holds nothing back */
		if ((r->req->status < 200 || r->req->status > 299) && s->first < 0)
			s->first = (int)(r - s->rep);
	}
	pthread_mutex_unlock(&s->mu);
}

/* Under mu: the paused transfers that can move again (into un), and
 * whether a replica stalled. */
static int movable(struct httpc_stream *s, CURL **un, bool *stalled)
{
	int nun = 0, ndone = 0;
	uint64_t now = now_ms();
	for (int i = 0; i < s->cfg.n && s->started; i++) {
		struct rep *r = &s->rep[i];
		if (r->done) {
			ndone++;
		} else if (r->paused && (s->head > r->pos || s->eof || s->aborted)) {
			r->paused = false;
			s->npaused--;
			r->active_ms = now;
			un[nun++] = r->h;
		} else if (s->cfg.down && s->cfg.down(s->cfg.down_arg, i)) {
			snprintf(r->req->err, sizeof(r->req->err), HTTPC_DOWN_ERR);
			*stalled = true;
			if (s->first < 0)
				s->first = i;
		} else if (!r->paused && s->cfg.stall_ms &&
			   now - r->active_ms > (uint64_t)s->cfg.stall_ms) {
			snprintf(r->req->err, sizeof(r->req->err), "no progress for %ld ms",
				 s->cfg.stall_ms);
			r->req->timed_out = *stalled = true;
			if (s->first < 0)
				s->first = i;
		}
	}
	if (s->src && s->started && s->cfg.n && ndone == s->cfg.n && !s->src_done)
		s->aborted = true; /* nobody left to send to */
	if (s->src_paused && (s->cfg.cap - (s->head - tail_of(s)) >= s->cfg.cap / 2 || s->aborted)) {
		s->src_paused = false;
		un[nun++] = s->src;
	}
	return nun;
}

/* The loop: drive the transfers of c's multi until all are done, or a
 * replica failed and not every one must finish. */
static void drive(struct httpc_stream *s, struct conns *c)
{
	CURL **un = xmalloc(sizeof(*un) * (size_t)(s->cfg.n + 1));
	int running = 1;

	while (running && (s->first < 0 || s->cfg.all)) {
		bool stalled = false;
		int nun, left;
		CURLMsg *msg;

		curl_multi_perform(c->multi, &running);
		while ((msg = curl_multi_info_read(c->multi, &left)))
			if (msg->msg == CURLMSG_DONE)
				xfer_done(s, msg->easy_handle, msg->data.result);
		if (s->src && !s->started && s->src_status == 200 && !s->aborted) {
			start_puts(s, c);
			running = 1;
		}
		pthread_mutex_lock(&s->mu);
		nun = movable(s, un, &stalled);
		pthread_mutex_unlock(&s->mu);
		if (stalled)
			break;
		for (int i = 0; i < nun; i++)
			curl_easy_pause(un[i], CURLPAUSE_CONT);
		if (!nun && running)
			curl_multi_poll(c->multi, NULL, 0, 100, NULL);
	}
	free(un);
}

/* All of the body is here already, and small: head and body go in one
 * request per replica (vconn's). */
static bool small(struct httpc_stream *s)
{
	bool yes;
	pthread_mutex_lock(&s->mu);
	yes = s->eof && !s->src && s->cfg.clen > 0 && s->head <= HTTPC_SMALL_MAX &&
	      s->head < s->cfg.cap;
	pthread_mutex_unlock(&s->mu);
	return yes;
}

/* A small body's fan-out ended: the replica down failed (gone), else the
 * first that failed, or -1. */
static int small_first(struct httpc_stream *s, int gone)
{
	for (int i = s->cfg.n - 1; i >= 0; i--)
		if (s->cfg.reqs[i].status < 200 || s->cfg.reqs[i].status > 299)
			s->first = i;
	return gone >= 0 ? gone : s->first;
}

int httpc_stream_run(struct httpc_stream *s)
{
	struct conns *c;
	if (small(s))
		return small_first(s, vconn_wait("PUT", s->cfg.reqs, s->cfg.n, s->ring,
						 (size_t)s->head, s->cfg.stall_ms, s->cfg.down,
						 s->cfg.down_arg, NULL, 0));
	c = conns(s->cfg.n + 1);
	pthread_mutex_lock(&s->mu);
	s->multi = c->multi;
	pthread_mutex_unlock(&s->mu);
	if (!s->src)
		start_puts(s, c);
	drive(s, c);
	pthread_mutex_lock(&s->mu);
	s->multi = NULL;
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < s->cfg.n && s->started; i++) {
		if (!s->rep[i].done && !s->rep[i].req->err[0])
			snprintf(s->rep[i].req->err, sizeof(s->rep[i].req->err),
				 "stopped: another replica failed");
		curl_multi_remove_handle(c->multi, s->rep[i].h);
	}
	if (s->src)
		curl_multi_remove_handle(c->multi, s->src);
	return s->first;
}

/* ---- httpc_copy_to: a GET as the stream's source ---- */

static size_t src_header(char *p, size_t size, size_t n, void *ud)
{
	struct httpc_stream *s = ud;
	size_t len = size * n;
	curl_off_t clen = -1;
	if (len <= 2 && (p[0] == '\r' || p[0] == '\n') && !s->src_status) {
		curl_easy_getinfo(s->src, CURLINFO_RESPONSE_CODE, &s->src_status);
		curl_easy_getinfo(s->src, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &clen);
		s->cfg.clen = clen;
		if (s->src_status == 200 && clen == 0 && s->want_md5 && !md5_ok(s))
			s->aborted = true;
	}
	return len;
}

static size_t src_write(char *p, size_t size, size_t n, void *ud)
{
	struct httpc_stream *s = ud;
	size_t len = size * n;
	pthread_mutex_lock(&s->mu);
	if (s->src_status != 200) {
		;          /* an error page: swallow it */
	} else if (s->aborted) {
		len = 0;
	} else if (s->cfg.clen >= 0 && s->head + len > (uint64_t)s->cfg.clen) {
		snprintf(s->why, sizeof(s->why), "source sent more than its Content-Length");
		len = 0;
	} else if (len > s->cfg.cap) {
		snprintf(s->why, sizeof(s->why), "a piece of %zu bytes does not fit the ring", len);
		len = 0;
	} else if (s->cfg.cap - (s->head - tail_of(s)) < len) {
		s->src_paused = true;
		len = CURL_WRITEFUNC_PAUSE; /* curl hands the same bytes again */
	} else {
		take(s, p, len);
	}
	if (!len)
		s->aborted = true;
	pthread_mutex_unlock(&s->mu);
	return len;
}

#define COPY_RING (256u << 10)

int httpc_outcome(const char *who, const char *method, const struct httpc_req *reqs, int n,
		  bool *ok)
{
	int good = 0;
	bool del = !strcmp(method, "DELETE");
	for (int i = 0; i < n; i++) {
		int st = reqs[i].status;
		bool g = (st >= 200 && st < 300) || (del && st == 404);
		if (!g)
			log_msg("%s%s %s failed (%d%s%s)", who, method, reqs[i].url, st,
				st < 0 ? ": " : "", st < 0 ? reqs[i].err : "");
		if (ok)
			ok[i] = g;
		good += g;
	}
	return good;
}

int httpc_delete_all(char *const *locs, int n, const char *path, long timeout_ms,
		     const char *who)
{
	struct httpc_req *reqs = xcalloc((size_t)(n > 0 ? n : 1), sizeof(*reqs));
	int ngone;
	for (int i = 0; i < n; i++)
		reqs[i].url = httpc_url(locs[i], path);
	vconn_wait("DELETE", reqs, n, NULL, 0, timeout_ms, NULL, NULL, NULL, 0);
	ngone = httpc_outcome(who, "DELETE", reqs, n, NULL);
	for (int i = 0; i < n; i++)
		free((char *)reqs[i].url);
	free(reqs);
	return ngone;
}

int httpc_copy_to(const char *src_url, char *const *dst_urls, int ndst, const char *md5,
	     long timeout_ms, char *err)
{
	struct httpc_req reqs[HTTPC_COPY_MAXDST];
	struct httpc_stream_cfg cfg = {.reqs = reqs, .n = ndst, .clen = -1, .cap = COPY_RING,
				       .connect_ms = timeout_ms, .stall_ms = 60000, .all = true};
	struct httpc_stream *s;
	int rc = 0;

	if (ndst > HTTPC_COPY_MAXDST) {
		snprintf(err, 256, "more than %d destinations", HTTPC_COPY_MAXDST);
		return -1;
	}
	for (int i = 0; i < ndst; i++)
		reqs[i].url = dst_urls[i];
	s = httpc_stream_new(&cfg);
	s->src = conns(ndst + 1)->h[ndst];
	s->want_md5 = md5 && strlen(md5) == 32 ? md5 : NULL;
	base_opts(s->src, src_url, "GET", s->src_err, timeout_ms);
	curl_easy_setopt(s->src, CURLOPT_HEADERFUNCTION, src_header);
	curl_easy_setopt(s->src, CURLOPT_HEADERDATA, s);
	curl_easy_setopt(s->src, CURLOPT_WRITEFUNCTION, src_write);
	curl_easy_setopt(s->src, CURLOPT_WRITEDATA, s);
	/* A volume that stops sending for a minute fails the copy. */
	curl_easy_setopt(s->src, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(s->src, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_multi_add_handle(tl->multi, s->src);
	httpc_stream_run(s);
	/* The source's failure first: the PUTs fail with it. */
	if (s->src_status != 200 || s->why[0]) {
		if (s->src_status > 0 && s->src_status != 200)
			snprintf(err, 256, "GET %s: status %ld", src_url, s->src_status);
		else
			snprintf(err, 256, "GET %s: %.160s", src_url, s->why[0] ? s->why : "no answer");
		rc = 1;
	}
	for (int i = 0; i < ndst && !rc; i++) {
		if (reqs[i].status < 0)
			snprintf(err, 256, "PUT %s: %.160s", dst_urls[i], reqs[i].err);
		else if (reqs[i].status != 200 && reqs[i].status != 201 && reqs[i].status != 204)
			snprintf(err, 256, "PUT %s: status %d", dst_urls[i], reqs[i].status);
		else
			continue;
		rc = -1;
	}
	httpc_stream_free(s);
	return rc;
}

static void stream_async_done(void *arg, int gone)
{
	struct httpc_stream *s = arg;
	s->async_done(s->async_arg, small_first(s, gone));
}

int httpc_stream_run_async(struct httpc_stream *s, void (*done)(void *arg, int first), void *arg)
{
	if (!small(s) || !loop_current())
		return -1;
	s->async_done = done;
	s->async_arg = arg;
	return vconn_fanout("PUT", s->cfg.reqs, s->cfg.n, s->ring, (size_t)s->head,
				  s->cfg.stall_ms, s->cfg.down, s->cfg.down_arg, stream_async_done, s);
}
