/* vconn.c -- the lean volume client on the event loops (vconn.h).
 *
 * libcurl's multi_socket cost a small write ~60 system calls on the
 * master: a liveness poll of every reused connection, epoll_ctl from its
 * socket callbacks, reads until EAGAIN.  Here a connection is
 * added to the loop's epoll once, edge triggered, and lives there until it
 * closes; a request is one sendmsg (head and body), its answer usually one
 * recv: a read shorter than the room offered drained the socket, and the
 * next bytes bring a new edge. */
#include "vconn.h"
#include "httpc.h"
#include "loop.h"
#include "volsign.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the answer parser ---- */

void vresp_init(struct vresp *r, bool head, struct buf *body, size_t body_max)
{
	*r = (struct vresp){.state = VR_HEAD, .head = head, .body = body, .body_max = body_max};
}

static size_t fail(struct vresp *r, const char *why)
{
	r->state = VR_ERR;
	snprintf(r->why, sizeof(r->why), "%s", why);
	return 0;
}

static bool tchar(int c)
{
	return c > 0 && c < 127 && (isalnum(c) || strchr("!#$%&'*+-.^_`|~", c));
}

const char *vresp_value(const char *p, size_t n, const char *name, size_t *vn)
{
	size_t k = strlen(name);
	const char *v, *end = p + n;
	if (n <= k || p[k] != ':' || strncasecmp(p, name, k))
		return NULL;
	for (v = p + k + 1; v < end && (*v == ' ' || *v == '\t'); v++)
		;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' || end[-1] == '\n'))
		end--;
	*vn = (size_t)(end - v);
	return v;
}

/* Does the list v[0..n) ("a, b") hold the token t, in any case? */
static bool token(const char *v, size_t n, const char *t)
{
	const char *end = v + n, *e;
	size_t k = strlen(t);
	for (; v < end; v = e + 1) {
		if (!(e = memchr(v, ',', (size_t)(end - v))))
			e = end;
		while (v < e && (*v == ' ' || *v == '\t'))
			v++;
		if ((size_t)(e - v) >= k && !strncasecmp(v, t, k)) {
			const char *w = v + k;
			while (w < e && (*w == ' ' || *w == '\t'))
				w++;
			if (w == e)
				return true;
		}
	}
	return false;
}

/* A head p[0..n), its empty line included. */
static void parse_head(struct vresp *r, const char *p, size_t n)
{
	const char *line = p, *end = p + n - 2, *eol;
	bool chunked = false, has_len = false, http10;
	uint64_t len = 0;
	if (n < 14 || memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1') || p[8] != ' ' ||
	    !isdigit((unsigned char)p[9]) || !isdigit((unsigned char)p[10]) ||
	    !isdigit((unsigned char)p[11]) || (p[12] != ' ' && p[12] != '\r')) {
		fail(r, "not an HTTP/1.x status line");
		return;
	}
	http10 = p[7] == '0';
	r->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	if (r->status < 100) {
		fail(r, "a status below 100");
		return;
	}
	r->close = http10;
	eol = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
	for (const char *q = p + 12; q < eol; q++)
		if ((unsigned char)*q < ' ' && *q != '\t')
			return (void)fail(r, "a control character in the status line");
	for (line = eol + 2; line < end; line = eol + 2) {
		size_t ln, vn;
		const char *v, *q;
		eol = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
		ln = (size_t)(eol - line);
		for (q = line; q < eol && tchar((unsigned char)*q); q++)
			;
		if (q == line || q == eol || *q != ':')
			return (void)fail(r, "a malformed header line");
		for (; q < eol; q++)
			if (((unsigned char)*q < ' ' && *q != '\t') || *q == 127)
				return (void)fail(r, "a control character in a header");
		if ((v = vresp_value(line, ln, "Content-Length", &vn))) {
			uint64_t x = 0;
			if (!vn || vn > 18)
				return (void)fail(r, "a malformed Content-Length");
			for (size_t i = 0; i < vn; i++) {
				if (!isdigit((unsigned char)v[i]))
					return (void)fail(r, "a malformed Content-Length");
				x = x * 10 + (uint64_t)(v[i] - '0');
			}
			if (has_len && x != len)
				return (void)fail(r, "Content-Length headers that disagree");
			has_len = true;
			len = x;
		} else if ((v = vresp_value(line, ln, "Transfer-Encoding", &vn))) {
			if (vn != 7 || strncasecmp(v, "chunked", 7) || chunked)
				return (void)fail(r, "a Transfer-Encoding other than chunked");
			chunked = true;
		} else if ((v = vresp_value(line, ln, "Connection", &vn))) {
			if (token(v, vn, "close"))
				r->close = true;
			else if (http10 && token(v, vn, "keep-alive"))
				r->close = false;
		}
	}
	if (r->status < 200) {
		if (r->status == 101)
			fail(r, "101 Switching Protocols");
		else if (++r->interim > VRESP_INTERIM_MAX)
			fail(r, "more than 8 interim (1xx) answers");
		return;   /* an interim answer (100 Continue...): the final one follows */
	}
	if (chunked && has_len)
		fail(r, "both Content-Length and chunked");
	else if (has_len && r->body && r->body_max && len > r->body_max && !r->head) {
		fail(r, "an answer body over the size allowed");
		r->over = true;
	}
	else if (r->head || r->status == 204 || r->status == 304)
		r->state = VR_DONE;
	else if (chunked)
		r->state = VR_CSIZE;
	else if (has_len)
		r->state = (r->rem = len) ? VR_LEN : VR_DONE;
	else {
		r->state = VR_EOF;   /* the body ends when the connection does */
		r->close = true;
	}
}

static bool body(struct vresp *r, const char *p, size_t n)
{
	if (!r->body)
		return true;
	if (r->body_max && r->body->len + n > r->body_max) {
		snprintf(r->why, sizeof(r->why), "an answer body over %zu bytes", r->body_max);
		r->state = VR_ERR;
		r->over = true;
		return false;
	}
	buf_append(r->body, p, n);
	return true;
}

static size_t step(struct vresp *r, const char *p, size_t n)
{
	const char *e;
	size_t k;
	switch (r->state) {
	case VR_HEAD:
		if (memcmp(p, "HTTP/", n < 5 ? n : 5))
			return fail(r, "not an HTTP answer");
		e = memmem(p, n < VRESP_HEAD_MAX ? n : VRESP_HEAD_MAX, "\r\n\r\n", 4);
		k = e ? (size_t)(e - p) : n;
		for (const char *lf = p; (lf = memchr(lf, '\n', k - (size_t)(lf - p))); lf++)
			if (lf == p || lf[-1] != '\r')   /* it would wait for a CRLF CRLF */
				return fail(r, "a bare LF in an answer's head");
		if (!e)
			return n >= VRESP_HEAD_MAX ? fail(r, "an answer head over 16 KiB") : 0;
		parse_head(r, p, (size_t)(e + 4 - p));
		return (size_t)(e + 4 - p);
	case VR_LEN:
	case VR_CDATA:
		k = n < r->rem ? n : (size_t)r->rem;
		if (!body(r, p, k))
			return 0;
		if (!(r->rem -= k))
			r->state = r->state == VR_LEN ? VR_DONE : VR_CCRLF;
		return k;
	case VR_EOF:
		return body(r, p, n) ? n : 0;
	case VR_CSIZE: {
		uint64_t x = 0;
		size_t i;
		if (!(e = memmem(p, n < 1024 ? n : 1024, "\r\n", 2)))
			return n >= 1024 ? fail(r, "a chunk size line over 1 KiB") : 0;
		for (i = 0; p + i < e && isxdigit((unsigned char)p[i]); i++) {
			if (i == 15)
				return fail(r, "a chunk size over 15 hex digits");
			x = x * 16 + (uint64_t)(isdigit((unsigned char)p[i]) ? p[i] - '0'
									   : (tolower((unsigned char)p[i]) - 'a' + 10));
		}
		if (!i || (p + i < e && p[i] != ';'))
			return fail(r, "a malformed chunk size");
		r->rem = x;
		r->state = x ? VR_CDATA : VR_TRAILER;
		return (size_t)(e + 2 - p);
	}
	case VR_CCRLF:
		if (memcmp(p, "\r\n", n < 2 ? n : 2))
			return fail(r, "a chunk not followed by CRLF");
		if (n < 2)
			return 0;
		r->state = VR_CSIZE;
		return 2;
	case VR_TRAILER:
		if (!(e = memmem(p, n, "\r\n", 2)))
			return r->trailers + n > VRESP_HEAD_MAX ? fail(r, "trailers over 16 KiB") : 0;
		k = (size_t)(e - p);
		if (!k) {
			r->state = VR_DONE;
			return 2;
		}
		if ((r->trailers += k + 2) > VRESP_HEAD_MAX)
			return fail(r, "trailers over 16 KiB");
		if (!memchr(p, ':', k) || !tchar((unsigned char)p[0]))
			return fail(r, "a malformed trailer");
		return k + 2;
	default:
		return 0;
	}
}

size_t vresp_feed(struct vresp *r, const char *p, size_t n)
{
	size_t used = 0, k;
	while (used < n && r->state != VR_DONE && r->state != VR_ERR &&
	       (k = step(r, p + used, n - used)))
		used += k;
	return used;
}

void vresp_eof(struct vresp *r)
{
	if (r->state == VR_EOF)
		r->state = VR_DONE;
	else if (r->state != VR_DONE && r->state != VR_ERR)
		fail(r, r->state == VR_HEAD ? "the connection closed before the answer's head ended"
					    : "the connection closed mid-answer");
}

/* ---- names: each looked up on a thread of its own, never on a loop ---- */

/* A name (not a literal address) is looked up at its first use, every
 * RESOLVE_MS after, and again when a connect to it fails (at most every
 * RETRY_MS).  A failed lookup keeps the addresses of the last good one;
 * requests wait for a name's first lookup, never a loop. */
#define RESOLVE_MS 60000
#define RETRY_MS 1000
#define NADDR 8
#define CONNECT_MS 10000      /* a connect that has not completed fails; a first lookup waited for */

struct name {               /* a host: its volumes, whatever their ports, share it */
	char host[256];
	struct sockaddr_storage addr[NADDR];
	socklen_t alen[NADDR];
	int naddr;
	unsigned gen;             /* lookups ended; 0: none yet */
	uint64_t at, due;         /* the last lookup's end, the next (due 0: literal) */
	char err[200];            /* the last lookup failed: why */
	struct name *next;
};

struct vstate;
static pthread_mutex_t names_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t names_cv = PTHREAD_COND_INITIALIZER;   /* a lookup is due, or ended */
static struct name *names;

/* Fill nm from ai (names_mu held). */
static void name_set(struct name *nm, struct addrinfo *ai)
{
	for (nm->naddr = 0; ai && nm->naddr < NADDR; ai = ai->ai_next) {
		memcpy(&nm->addr[nm->naddr], ai->ai_addr, ai->ai_addrlen);
		nm->alen[nm->naddr++] = ai->ai_addrlen;
	}
	nm->err[0] = '\0';
}

/* A name's own thread: one that never answers holds no other name. */
static void *resolver(void *arg)
{
	struct name *nm = arg;
	pthread_mutex_lock(&names_mu);
	for (;;) {
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
		uint64_t now = now_ms();
		int rc;
		if (now < nm->due) {
			cond_wait_ms(&names_cv, &names_mu, nm->due - now);
			continue;
		}
		pthread_mutex_unlock(&names_mu);
		rc = getaddrinfo(nm->host, NULL, &hints, &ai);   /* host never changes */
		pthread_mutex_lock(&names_mu);
		if (rc == 0)
			name_set(nm, ai);
		else
			snprintf(nm->err, sizeof(nm->err), "could not resolve %.100s: %s", nm->host,
				 gai_strerror(rc));
		if (ai)
			freeaddrinfo(ai);
		nm->gen++;
		nm->at = now_ms();
		nm->due = nm->at + (rc || !nm->naddr ? RETRY_MS : RESOLVE_MS);
		pthread_cond_broadcast(&names_cv);
	}
	return NULL;
}

/* The process's entry for the host of "host:port" name[0..n): made, and
 * its lookup started, at first use. */
static struct name *name_of(const char *name, size_t n)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai;
	const char *colon = memrchr(name, ':', n), *h = name;
	size_t hn = colon ? (size_t)(colon - name) : n;
	struct name *nm;
	pthread_t t;
	if (hn >= 2 && h[0] == '[' && h[hn - 1] == ']') {
		h++;
		hn -= 2;
	}
	pthread_mutex_lock(&names_mu);
	for (nm = names; nm; nm = nm->next)
		if (!strncmp(nm->host, h, hn) && !nm->host[hn])
			goto out;
	nm = xcalloc(1, sizeof(*nm));
	snprintf(nm->host, sizeof(nm->host), "%.*s", (int)(hn < 255 ? hn : 255), h);
	if (getaddrinfo(nm->host, NULL, &hints, &ai) == 0) {   /* no lookup: never waits */
		name_set(nm, ai);
		freeaddrinfo(ai);
		nm->gen = 1;
	} else {
		nm->due = 1;
		if (pthread_create(&t, NULL, resolver, nm) == 0)
			pthread_detach(t);
	}
	nm->next = names;
	names = nm;
out:
	pthread_mutex_unlock(&names_mu);
	return nm;
}

size_t vconn_pin(const char *url, char *out, size_t n)
{
	const char *hp = strstr(url, "://"), *colon;
	size_t len, k = 0;
	struct name *nm;
	if (!hp || hp[3] == '[')
		return 0;
	hp += 3;
	len = strcspn(hp, "/?#");
	colon = memchr(hp, ':', len);
	nm = name_of(hp, len);
	pthread_mutex_lock(&names_mu);
	for (uint64_t end = now_ms() + CONNECT_MS; !nm->gen && now_ms() < end;)
		cond_wait_ms(&names_cv, &names_mu, 100);
	if (nm->due && nm->naddr)
		k = (size_t)snprintf(out, n, "%s:%.*s:", nm->host, colon ? (int)(hp + len - colon - 1) : 3,
				     colon ? colon + 1 : strncmp(url, "https", 5) ? "80" : "443");
	for (int i = 0; k && k < n && i < nm->naddr; i++) {
		char a[INET6_ADDRSTRLEN];
		struct sockaddr_storage *sa = &nm->addr[i];
		bool v6 = sa->ss_family == AF_INET6;
		inet_ntop(sa->ss_family, v6 ? (void *)&((struct sockaddr_in6 *)sa)->sin6_addr
					  : (void *)&((struct sockaddr_in *)sa)->sin_addr, a, sizeof(a));
		k += (size_t)snprintf(out + k, n - k, "%s%s%s%s", i ? "," : "", v6 ? "[" : "", a,
				      v6 ? "]" : "");
	}
	pthread_mutex_unlock(&names_mu);
	return k < n ? k : 0;
}

/* A connect to nm failed: look it up again soon (its address may have
 * changed), RETRY_MS after the last. */
static void name_doubt(struct name *nm)
{
	pthread_mutex_lock(&names_mu);
	if (nm->due > nm->at + RETRY_MS) {
		nm->due = nm->at + RETRY_MS;
		pthread_cond_broadcast(&names_cv);
	}
	pthread_mutex_unlock(&names_mu);
}

/* ---- connections ---- */

#define READ_ROOM 16384
/* The pool, per volume on each loop thread (libcurl's and nginx's
 * upstream keepalive shape): at most HOST_MAX connections, requests past
 * that wait for one; at most IDLE_MAX idle, each closed after IDLE_MS.
 * Against stock Debian nginx (worker_connections 768 a worker, shared with
 * the clients the master redirects there; keepalive_timeout 75 s): a
 * master of 8 loops holds at most 256 of a volume's connections, and
 * closes an idle one well before nginx would (docs/deploy.md). */
#define HOST_MAX 32
#define IDLE_MAX 16
#define IDLE_MS 30000
/* Pipelined GETs (vconn_get): a connection carries up to PIPE at once, a
 * host up to HOST_CONNS such connections (another opens once each has
 * SPREAD); every GET a broken connection carried has used a send, and
 * fails after TRIES. */
#define HOST_CONNS 4
#define PIPE 16
#define SPREAD 4
#define TRIES 4
#define PIPE_MS 120000        /* a pipelined GET's answer within this of its send */
#define TARGET_MAX 2048

struct vop;

struct vc {
	struct loop_fd w;
	int fd;
	SSL *ssl;                 /* an https:// volume's, or NULL */
	struct vhost *h;
	struct vop *op;           /* the request on it; NULL: idle */
	bool connecting, reused, refused;
	int addr;                 /* which of h's addresses it connected to */
	int answers;              /* answers read on it */
	uint64_t since;           /* connecting: since; idle: since */
	char head[TARGET_MAX + VOLSIGN_EXTRA + 512];
	size_t headlen, off;      /* the request: head, then the body; off sent */
	struct buf in;            /* bytes read, not yet parsed, from in_off */
	size_t in_off;
	struct vresp resp;
	struct vc *next;          /* the host's idle ones */
	struct vc *prev_all, *next_all;   /* this thread's, all */
	/* Pipelined GETs: op is the one whose answer is read, those behind
	 * it were sent after it; depth counts them all. */
	bool pipe, dirty;          /* dirty: pipelined GETs to write at the turn's end */
	struct vop *behind, **behind_tail;
	int depth;
	struct vc *pnext;         /* the host's pipelining ones */
};

struct vhost {
	char *name;               /* "host:port" */
	uint16_t port;
	bool tls;                 /* https:// (its URLs say) */
	struct name *nm;
	unsigned gen;             /* nm's addresses as of this lookup are below */
	struct sockaddr_storage addr[NADDR];
	socklen_t alen[NADDR];
	int first, naddr;         /* the address tried first (one refused before it), of naddr */
	int nconn, nidle;
	struct vc *idle;
	struct vc *pipes;         /* connections carrying pipelined GETs */
	struct vop *wait, **wait_tail;   /* waiting for a connection or the name's lookup */
	struct vhost *next;
};

struct vfan;
struct vop {
	struct vfan *f;
	int i;
	struct vhost *h;
	struct vc *c;
	const char *path;         /* the request's target, unsigned (in its URL) */
	bool done, retried, fresh, waiting;
	int tries;                /* pipelined: sends on connections that broke */
	int refused;              /* fresh connections refused: the name's next address */
	struct vop *next;         /* pipelined: the one sent after it; waiting: the next */
};

struct vfan {
	struct httpc_req *reqs;
	int n, left, gone;
	const char *method;
	const void *body;
	size_t bodylen;
	uint64_t deadline;        /* 0: none */
	bool (*down)(void *, int);
	void *down_arg;
	void (*done)(void *, int);
	void *arg;
	struct buf *resp;         /* reqs[0]'s answer body (n is 1), or NULL */
	size_t resp_max;
	bool over;                /* reqs[0] failed for the body's size */
	bool pipe;                /* a GET that may be pipelined (vconn_get) */
	struct vop *ops;
	struct vfan *prev, *next;
};

struct vstate {
	struct loop *loop;
	struct vhost *hosts;
	struct vfan *fans;
	struct vc *all;
	uint64_t tick;            /* the next down check */
	bool kick;                /* a host's waiting requests may go: at the turn's end */
	bool ending;              /* vconn_thread_cleanup: nothing starts again */
	/* Connections with pipelined GETs to write: written together before
	 * the loop sleeps, so the GETs asked for in one turn go out in one
	 * send a connection. */
	struct vc **dirty;
	int ndirty, cdirty;
};

static __thread struct vstate *vs;
static __thread struct loop *own;   /* vconn_wait's and vconn_run's loop */
/* The timer and the hook live with the thread, so the loop never holds
 * freed memory after vconn_thread_cleanup. */
static __thread struct loop_timer timer;
static __thread struct loop *hooked;
void (*vconn_observer)(const char *url, int status);

static void timer_near(uint64_t at)
{
	if (!timer.at || at < timer.at)
		timer.at = at;
}

/* c carries no pipelined GET any more. */
static void pipe_off(struct vc *c)
{
	struct vc **pp = &c->h->pipes;
	while (*pp && *pp != c)
		pp = &(*pp)->pnext;
	if (*pp)
		*pp = c->pnext;
	c->pipe = false;
}

/* Take c off its host's idle list. */
static void idle_take(struct vc *c)
{
	struct vc **pp = &c->h->idle;
	while (*pp && *pp != c)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = c->next;
		c->h->nidle--;
	}
}

/* c is done with. */
static void conn_drop(struct vc *c)
{
	if (!c->op)
		idle_take(c);   /* an idle one */
	if (c->pipe)
		pipe_off(c);
	for (int i = 0; c->dirty && i < vs->ndirty; i++)
		if (vs->dirty[i] == c)
			vs->dirty[i] = vs->dirty[--vs->ndirty];
	if (c->prev_all)
		c->prev_all->next_all = c->next_all;
	else
		vs->all = c->next_all;
	if (c->next_all)
		c->next_all->prev_all = c->prev_all;
	if (--c->h->nconn < HOST_MAX && c->h->wait)
		vs->kick = true;
	c->dirty = false;
	c->op = NULL;
	c->w.dead = true;
	SSL_free(c->ssl);
	close(c->fd);   /* leaves the epoll set with it */
	buf_free(&c->in);
	loop_defer_free(vs->loop, c);
}

/* c's exchange ended with the connection reusable: idle, or closed past
 * IDLE_MAX. */
static void conn_idle(struct vc *c)
{
	struct vhost *h = c->h;
	c->op = NULL;
	c->in.len = c->in_off = 0;
	if (h->nidle >= IDLE_MAX && !h->wait) {   /* one that waits takes it (host_kick) */
		conn_drop(c);
		return;
	}
	c->since = now_ms();
	c->next = h->idle;
	h->idle = c;
	h->nidle++;
	if (h->wait)
		vs->kick = true;
	timer_near(c->since + IDLE_MS);
}

static void fan_end(struct vfan *f)
{
	if (f->prev)
		f->prev->next = f->next;
	else
		vs->fans = f->next;
	if (f->next)
		f->next->prev = f->prev;
	loop_release(vs->loop);
	f->done(f->arg, f->gone);
	free(f->ops);
	free(f);
}

/* op waits no more for a connection. */
static void unwait(struct vop *op)
{
	struct vop **pp = &op->h->wait;
	while (*pp && *pp != op)
		pp = &(*pp)->next;
	if (*pp && !(*pp = op->next))
		op->h->wait_tail = pp;
	op->next = NULL;
	op->waiting = false;
}

/* op ended with status (-1: why); its connection is the caller's. */
static void op_end(struct vop *op, int status, const char *why, bool timed_out)
{
	struct vfan *f = op->f;
	struct httpc_req *r = &f->reqs[op->i];
	if (op->waiting)
		unwait(op);
	op->done = true;
	op->c = NULL;
	r->status = status;
	r->timed_out = timed_out;
	if (why)
		snprintf(r->err, sizeof(r->err), "%s", why);
	if (vconn_observer)
		vconn_observer(r->url, status);
	if (--f->left == 0)
		fan_end(f);
}

static void pipe_broken(struct vc *c, const char *why, bool timed_out);

/* op fails: its connection, in the middle of an exchange, is closed. */
static void op_fail(struct vop *op, const char *why, bool timed_out)
{
	if (op->c && op->c->pipe)
		return pipe_broken(op->c, why, timed_out);
	if (op->c)
		conn_drop(op->c);
	op_end(op, -1, why, timed_out);
}

static void on_event(void *arg, uint32_t ev);

/* h's addresses, as its name's last good lookup found them: 1, 0 while
 * the first lookup is to come, or -1 with err when it failed. */
static int host_ready(struct vhost *h, char *err, size_t en)
{
	struct name *nm = h->nm;
	int rc;
	pthread_mutex_lock(&names_mu);
	if (h->gen != nm->gen) {
		h->gen = nm->gen;
		h->naddr = nm->naddr;
		memcpy(h->addr, nm->addr, sizeof(h->addr));
		memcpy(h->alen, nm->alen, sizeof(h->alen));
		for (int i = 0; i < h->naddr; i++)   /* the same port in either family */
			((struct sockaddr_in *)&h->addr[i])->sin_port = htons(h->port);
		h->first = h->naddr ? h->first % h->naddr : 0;
	}
	rc = h->naddr ? 1 : nm->gen ? -1 : 0;
	if (rc < 0)
		snprintf(err, en, "%s", nm->err);
	pthread_mutex_unlock(&names_mu);
	return rc;
}

/* ---- https:// volumes: OpenSSL on the connection's non-blocking socket,
 * verified by vol_cacert or the system's CAs, for the name or address in
 * the volume's host:port ---- */
const char *vol_cacert;
static SSL_CTX *tls_ctx;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static __thread char tls_err[200];

static void tls_init(void)
{
	tls_ctx = SSL_CTX_new(TLS_client_method());
	if (tls_ctx && !(vol_cacert ? SSL_CTX_load_verify_locations(tls_ctx, vol_cacert, NULL)
				    : SSL_CTX_set_default_verify_paths(tls_ctx))) {
		SSL_CTX_free(tls_ctx);
		tls_ctx = NULL;
	}
	if (tls_ctx) {
		SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_PEER, NULL);
		SSL_CTX_set_options(tls_ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);   /* a close is a close */
		SSL_CTX_set_mode(tls_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
				 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	}
}

/* Why the last TLS call failed: the certificate's verdict, else OpenSSL's. */
static const char *tls_why(void)
{
	unsigned long e = ERR_peek_last_error();
	if (!tls_err[0])
		ERR_error_string_n(e ? e : ERR_PACK(ERR_LIB_SSL, 0, 0), tls_err, sizeof(tls_err));
	ERR_clear_error();
	return tls_err;
}

/* host: the name's (never changes once made). */
static SSL *tls_new(const char *host, int fd)
{
	unsigned char a[16];
	SSL *ssl;
	pthread_once(&tls_once, tls_init);
	if (!tls_ctx || !(ssl = SSL_new(tls_ctx)))
		return NULL;
	SSL_set_fd(ssl, fd);
	SSL_set_connect_state(ssl);
	if (inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1) {
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
	} else {
		SSL_set_tlsext_host_name(ssl, host);
		SSL_set1_host(ssl, host);
	}
	return ssl;
}

/* SSL_write or SSL_read as send or recv answer: bytes, 0 (closed), or -1
 * with errno (EAGAIN: the socket's next edge; EPROTO: tls_why). */
static ssize_t tls_io(SSL *ssl, void *p, size_t n, bool out)
{
	size_t k = 0;
	int e;
	ERR_clear_error();
	if (out ? SSL_write_ex(ssl, p, n, &k) : SSL_read_ex(ssl, p, n, &k))
		return (ssize_t)k;
	switch ((e = SSL_get_error(ssl, 0))) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		if (!ERR_peek_error()) {   /* the socket's own error */
			errno = errno ? errno : ECONNRESET;
			return -1;
		}
		/* fall through */
	default:
		tls_err[0] = 0;
		if (SSL_get_verify_result(ssl) != X509_V_OK)
			snprintf(tls_err, sizeof(tls_err), "certificate: %s",
				 X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
		errno = EPROTO;
		return -1;
	}
}

static struct vc *conn_new(struct vhost *h, char *err, size_t en)
{
	int fd = -1, e = 0, k;
	struct vc *c;
	for (k = 0; k < h->naddr; k++) {
		int j = (h->first + k) % h->naddr, one = 1;
		fd = socket(h->addr[j].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			e = errno;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (struct sockaddr *)&h->addr[j], h->alen[j]) == 0 ||
		    errno == EINPROGRESS)
			break;
		e = errno;
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		name_doubt(h->nm);
		snprintf(err, en, "could not connect to %.100s: %s", h->name, strerror(e));
		return NULL;
	}
	c = xcalloc(1, sizeof(*c));
	c->fd = fd;
	c->h = h;
	if (h->tls && !(c->ssl = tls_new(h->nm->host, fd))) {
		snprintf(err, en, "TLS to %.100s: %.120s", h->name, tls_why());
		close(fd);
		free(c);
		return NULL;
	}
	c->addr = (h->first + k) % h->naddr;
	c->connecting = true;
	c->since = now_ms();
	h->nconn++;
	c->next_all = vs->all;
	if (vs->all)
		vs->all->prev_all = c;
	vs->all = c;
	timer_near(c->since + CONNECT_MS);
	c->w = (struct loop_fd){.fn = on_event, .arg = c};
	loop_watch(vs->loop, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, &c->w);
	return c;
}

static void op_start(struct vop *op, bool fresh);

/* Has any byte of c's answer come?  (Bytes parsed are gone from c->in.) */
static bool answer_came(const struct vc *c)
{
	return c->resp.state != VR_HEAD || c->resp.status || c->in.len > c->in_off;
}

/* op goes again on a fresh connection (c, its last, dropped). */
static void op_again(struct vop *op, struct vc *c)
{
	op->c = NULL;
	conn_drop(c);
	op_start(op, true);
}

/* The connection ended before op's answer did (closed, reset, refused):
 * on a reused connection that gave no byte of the answer, the request
 * goes once more on a fresh one -- a PUT too, as libcurl does: a volume
 * that reloads closes its idle connections at any moment, and sending
 * the same bytes to the same path again (the master holds the key's
 * lock) stores what one PUT would have.  Not on a fresh connection: that
 * volume took the request and failed it. */
static void conn_lost(struct vc *c, const char *why)
{
	struct vop *op = c->op;
	struct vhost *h = c->h;
	/* Refused (its connect failed): the name's next address is tried
	 * first from now on, and a request goes there at once -- "localhost"
	 * is ::1 first on many systems, and a volume may listen on 127.0.0.1
	 * alone. */
	if (c->refused) {
		name_doubt(h->nm);
		if (h->naddr > 1 && h->first == c->addr)
			h->first = (c->addr + 1) % h->naddr;
		if (h->naddr > 1 && !c->pipe && op->refused++ < h->naddr - 1)
			return op_again(op, c);
	}
	if (c->pipe)
		return pipe_broken(c, why, false);
	if (c->reused && !answer_came(c) && !op->retried) {
		op->retried = true;
		return op_again(op, c);
	}
	op_fail(op, why, false);
}

/* Pipelined GETs go again on other connections, in the order sent; when
 * their connection broke (counted), each has used a send. */
static void pipe_again(struct vop *op, bool counted, const char *why, bool timed_out)
{
	while (op) {
		struct vop *next = op->next;
		op->next = NULL;
		op->c = NULL;
		if (counted && (++op->tries >= TRIES || op->f->over))
			op_end(op, -1, why, timed_out);
		else
			op_start(op, false);
		op = next;
	}
}

/* c, carrying pipelined GETs, failed (closed, reset, a malformed answer,
 * no answer in time): each GET on it has used a send and goes again, up
 * to TRIES sends (a volume that answers no GET on any connection); one
 * whose answer was too big fails at once. */
static void pipe_broken(struct vc *c, const char *why, bool timed_out)
{
	struct vop *op = c->op;
	if (op)
		op->next = c->behind;
	c->op = c->behind = NULL;
	c->depth = 0;
	conn_drop(c);
	pipe_again(op, true, why, timed_out);
}

static bool put_head(struct vc *c, struct vop *op);

static void conn_write(struct vc *c)
{
	struct vfan *f = c->op->f;
	size_t total = c->headlen + f->bodylen;
	while (c->off < total) {
		struct iovec iov[2];
		struct msghdr m = {.msg_iov = iov};
		ssize_t k;
		if (c->off < c->headlen) {
			iov[m.msg_iovlen++] = (struct iovec){c->head + c->off, c->headlen - c->off};
			if (f->bodylen)
				iov[m.msg_iovlen++] = (struct iovec){(void *)f->body, f->bodylen};
		} else {
			iov[m.msg_iovlen++] = (struct iovec){(char *)f->body + (c->off - c->headlen),
							     total - c->off};
		}
		k = c->ssl ? tls_io(c->ssl, iov[0].iov_base, iov[0].iov_len, true)
			   : sendmsg(c->fd, &m, MSG_NOSIGNAL);
		if (k < 0) {
			char why[260];
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;   /* EPOLLOUT's edge brings us back */
			c->refused = c->off == 0 && (errno == ECONNREFUSED || errno == ENETUNREACH ||
						     errno == EHOSTUNREACH || errno == EADDRNOTAVAIL);
			snprintf(why, sizeof(why), "sending to %.100s: %.140s", c->h->name,
				 errno == EPROTO && c->ssl ? tls_why() : strerror(errno));
			conn_lost(c, why);
			return;
		}
		c->off += (size_t)k;
	}
}

/* A refused signature on a connection that served before goes once more
 * on a fresh one, signed anew: a volume that took a new -volumesecret may
 * still serve the connections it had with the old one (nginx's old
 * workers do, after a reload).  A refusal touched nothing on the volume. */
static bool resign(struct vc *c, struct vop *op, int status)
{
	if ((status != 403 && status != 410) || (!c->reused && c->answers < 2) || op->retried ||
	    !volsign_on())
		return false;
	op->retried = true;
	return true;
}

/* A pipelined connection's answer to op is complete: true when c reads
 * on, for the GET sent after it. */
static bool pipe_answered(struct vc *c, struct vop *op, int status, bool keep)
{
	struct vop *next = c->behind;
	bool again = resign(c, op, status), on = next && !c->resp.close;
	c->depth--;
	if (on) {
		if (!(c->behind = next->next))
			c->behind_tail = &c->behind;
		next->next = NULL;
		c->op = next;
		vresp_init(&c->resp, false, next->f->resp, next->f->resp_max);
	} else if (!next && keep) {
		pipe_off(c);
		conn_idle(c);
	} else {   /* it closes after this answer: those behind go again, uncounted */
		c->op = c->behind = NULL;
		conn_drop(c);
		pipe_again(next, false, NULL, false);
	}
	if (again)
		op_start(op, true);
	else
		op_end(op, status, NULL, false);
	return on && !c->w.dead && c->op;
}

/* c's answer is complete: true when c reads on (a pipelined GET's). */
static bool answered(struct vc *c)
{
	struct vop *op = c->op;
	int status = c->resp.status;
	bool keep = !c->resp.close && c->in_off == c->in.len && c->off == c->headlen + op->f->bodylen;
	c->answers++;
	if (c->pipe)
		return pipe_answered(c, op, status, keep);
	if (resign(c, op, status)) {
		op_again(op, c);
		return false;
	}
	if (keep)
		conn_idle(c);
	else
		conn_drop(c);
	op_end(op, status, NULL, false);
	return false;
}

/* hup: the volume closed its side (EPOLLRDHUP), so a short read is no
 * sign of a drained socket: the end is still to be read, and no new edge
 * will tell. */
static void conn_read(struct vc *c, bool hup)
{
	for (;;) {
		ssize_t k;
		size_t room;
		if (c->in_off == c->in.len)
			c->in.len = c->in_off = 0;
		if (c->in.cap - c->in.len < READ_ROOM) {
			if (c->in_off) {
				memmove(c->in.data, c->in.data + c->in_off, c->in.len - c->in_off);
				c->in.len -= c->in_off;
				c->in_off = 0;
			}
			if (c->in.cap - c->in.len < READ_ROOM) {
				c->in.cap = c->in.len + 2 * READ_ROOM;
				c->in.data = xrealloc(c->in.data, c->in.cap);
			}
		}
		room = c->in.cap - c->in.len;
		k = c->ssl ? tls_io(c->ssl, c->in.data + c->in.len, room, false)
			   : recv(c->fd, c->in.data + c->in.len, room, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (k <= 0) {
			char why[300];
			if (k < 0) {
				snprintf(why, sizeof(why), "reading from %.100s: %.120s", c->h->name,
					 errno == EPROTO && c->ssl ? tls_why() : strerror(errno));
				conn_lost(c, why);
				return;
			}
			if (!answer_came(c)) {
				snprintf(why, sizeof(why),
					 "%.100s closed the connection before answering", c->h->name);
				conn_lost(c, why);
				return;
			}
			vresp_eof(&c->resp);
			if (c->resp.state == VR_DONE) {
				c->resp.close = true;
				answered(c);
			} else {
				snprintf(why, sizeof(why), "%.100s: %s", c->h->name, c->resp.why);
				op_fail(c->op, why, false);
			}
			return;
		}
		c->in.len += (size_t)k;
		for (;;) {   /* pipelined GETs: one answer after another */
			c->in_off += vresp_feed(&c->resp, c->in.data + c->in_off,
						c->in.len - c->in_off);
			if (c->resp.state == VR_DONE) {
				if (!answered(c))
					return;
				if (c->in_off < c->in.len)
					continue;
			} else if (c->resp.state == VR_ERR) {
				char why[200];
				snprintf(why, sizeof(why), "%.60s answered %s", c->h->name,
					 c->resp.why);
				c->op->f->over = c->resp.over;
				op_fail(c->op, why, false);
				return;
			}
			break;
		}
		if ((size_t)k < room && !hup && !c->ssl)
			return;   /* drained: more bytes bring a new edge (TLS: a record
				     is read at a time, so on to EAGAIN) */
	}
}

static void on_event(void *arg, uint32_t ev)
{
	struct vc *c = arg;
	if (!c->op) {   /* idle: the volume closed it (or said something unasked) */
		if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			conn_drop(c);
		return;
	}
	if (c->connecting && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
		c->connecting = false;   /* a failed connect shows in sendmsg's errno */
	if (!c->connecting && c->off < c->headlen + c->op->f->bodylen) {
		conn_write(c);
		if (c->w.dead || !c->op)
			return;
	}
	if (!c->connecting && (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		conn_read(c, ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR));
}

/* op's request head after what c has still to send, signed as it goes
 * (volsign_url): false when it does not fit (a pipelined GET then
 * takes another connection). */
static bool put_head(struct vc *c, struct vop *op)
{
	struct vfan *f = op->f;
	char target[TARGET_MAX + VOLSIGN_EXTRA];
	size_t room;
	int n;
	if (!volsign_url(op->path, f->method, VOLSIGN_SELF_TTL, target, sizeof(target)))
		return false;
	memmove(c->head, c->head + c->off, c->headlen - c->off);
	c->headlen -= c->off;
	c->off = 0;
	room = sizeof(c->head) - c->headlen;
	n = snprintf(c->head + c->headlen, room, "%s %s HTTP/1.1\r\nHost: %s\r\n", f->method,
		     target, op->h->name);
	if (n >= 0 && (size_t)n < room && (f->body || !strcmp(f->method, "PUT")))
		n += snprintf(c->head + c->headlen + n, room - (size_t)n,
			      "Content-Length: %zu\r\n", f->bodylen);
	if (n >= 0 && (size_t)n < room)
		n += snprintf(c->head + c->headlen + n, room - (size_t)n, "\r\n");
	if (n < 0 || (size_t)n >= room)
		return false;
	c->headlen += (size_t)n;
	return true;
}

/* Start what waits for a connection of h, as far as the pool allows. */
static void host_kick(struct vhost *h)
{
	char err[256];
	int rc = h->wait ? host_ready(h, err, sizeof(err)) : 0;
	while (h->wait && rc && (rc < 0 || h->idle || h->nconn < HOST_MAX)) {
		struct vop *op = h->wait;
		unwait(op);
		if (rc < 0)
			op_end(op, -1, err, false);
		else
			op_start(op, op->fresh);
	}
	while (!h->wait && h->nidle > IDLE_MAX)
		conn_drop(h->idle);
}

/* Start what may go: a connection freed, a lookup ended (the timer asks
 * every 100 ms while requests wait). */
static void kick_all(void)
{
	for (struct vhost *h = vs->hosts; h; h = h->next)
		host_kick(h);
}

/* Before the loop sleeps: what the turn's pipelined GETs have to send,
 * and the requests a freed connection lets go. */
static void flush(void *arg)
{
	(void)arg;
	while (vs && vs->ndirty) {
		struct vc *c = vs->dirty[--vs->ndirty];
		c->dirty = false;
		if (!c->connecting && c->op)
			conn_write(c);   /* may drop c (and others: off the list) */
	}
	while (vs && vs->kick) {
		vs->kick = false;
		kick_all();
	}
}

/* c's requests go out before the loop sleeps. */
static void mark_dirty(struct vc *c)
{
	if (c->dirty)
		return;
	if (vs->ndirty == vs->cdirty) {
		vs->cdirty = vs->cdirty ? 2 * vs->cdirty : 16;
		vs->dirty = xrealloc(vs->dirty, sizeof(*vs->dirty) * (size_t)vs->cdirty);
	}
	vs->dirty[vs->ndirty++] = c;
	c->dirty = true;
}

/* The pipelining connection of h that takes the next GET when none is
 * idle, or NULL: a new one first while each has SPREAD and h has fewer
 * than HOST_CONNS; one when all are full. */
static struct vc *pipe_pick(struct vhost *h)
{
	struct vc *best = NULL;
	int n = 0;
	for (struct vc *c = h->pipes; c; c = c->pnext, n++)
		if (c->depth < PIPE && (!best || c->depth < best->depth))
			best = c;
	return best && (best->depth < SPREAD || n >= HOST_CONNS || h->nconn >= HOST_MAX) ? best
											     : NULL;
}

/* An idle connection of h that the volume has not closed (its close, or
 * bytes it was not asked for, may wait unread: a loop of the thread's own
 * does not run between calls), or NULL. */
static struct vc *idle_pick(struct vhost *h)
{
	struct vc *c;
	while ((c = h->idle)) {
		char b;
		h->idle = c->next;
		h->nidle--;
		if (recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
		    (errno == EAGAIN || errno == EWOULDBLOCK)) {
			c->reused = true;
			return c;
		}
		conn_drop(c);
	}
	return NULL;
}

static void op_start(struct vop *op, bool fresh)
{
	struct vfan *f = op->f;
	struct vhost *h = op->h;
	struct vc *c = NULL;
	char err[256];
	int rc;
	if (vs->ending)
		return op_end(op, -1, "its thread ended", false);
	if (f->resp)
		f->resp->len = 0;
	op->fresh = fresh;
	if (f->pipe) {
		f->deadline = now_ms() + PIPE_MS;
		timer_near(f->deadline);
		/* an idle connection first: the least loaded */
		if (!fresh && !h->idle && (c = pipe_pick(h)) && put_head(c, op)) {
			*c->behind_tail = op;   /* sent after the others, answered so */
			c->behind_tail = &op->next;
			c->depth++;
			op->c = c;
			mark_dirty(c);
			return;
		}
		c = NULL;
	}
	if (!fresh)
		c = idle_pick(h);
	else if (h->idle && h->nconn >= HOST_MAX)   /* room for it: else it waits on forever */
		conn_drop(h->idle);
	if (!c && ((rc = host_ready(h, err, sizeof(err))) == 0 || (rc > 0 && h->nconn >= HOST_MAX))) {
		if (f->pipe)
			f->deadline = 0;   /* counts from its send */
		op->waiting = true;
		*h->wait_tail = op;
		h->wait_tail = &op->next;
		timer_near(now_ms() + 100);
		return;
	}
	if (!c && (rc < 0 || !(c = conn_new(h, err, sizeof(err))))) {
		op_end(op, -1, err, false);
		return;
	}
	c->next = NULL;
	c->op = op;
	op->c = c;
	if (f->pipe) {
		c->pipe = true;
		c->depth = 1;
		c->behind = NULL;
		c->behind_tail = &c->behind;
		c->pnext = h->pipes;
		h->pipes = c;
	}
	vresp_init(&c->resp, !strcmp(f->method, "HEAD"), f->resp, f->resp_max);
	c->headlen = c->off = 0;
	if (!put_head(c, op))
		return op_fail(op, "a volume URL too long", false);
	if (f->pipe)
		mark_dirty(c);
	else if (!c->connecting)
		conn_write(c);
}

/* The next deadline: a fan's, a down check, a connect's, an idle
 * connection's. */
static void rearm(void)
{
	uint64_t at = 0;
	for (struct vfan *f = vs->fans; f; f = f->next) {
		if (f->deadline && (!at || f->deadline < at))
			at = f->deadline;
		if (f->down && (!at || vs->tick < at))
			at = vs->tick;
	}
	timer.at = at;
	for (struct vc *c = vs->all; c; c = c->next_all)
		if (c->connecting || !c->op)
			timer_near(c->since + (c->connecting ? CONNECT_MS : IDLE_MS));
	for (struct vhost *h = vs->hosts; h; h = h->next)
		if (h->wait)
			timer_near(now_ms() + 100);
}

static void stop_fan(struct vfan *f, int gone, const char *why, bool timed_out)
{
	f->left++;   /* f lives until the last op ended */
	for (int i = 0; i < f->n; i++)
		if (!f->ops[i].done)
			op_fail(&f->ops[i], i == gone || gone < 0 ? why : "stopped: another replica failed",
				timed_out && (i == gone || gone < 0));
	if (--f->left == 0)
		fan_end(f);
}

/* Connects that took too long fail, idle connections past IDLE_MS close. */
static void sweep(uint64_t now)
{
	struct vc *c;
again:
	for (c = vs->all; c; c = c->next_all) {
		char why[200];
		if (!c->op && now >= c->since + IDLE_MS) {
			conn_drop(c);
			goto again;
		}
		if (c->connecting && now >= c->since + CONNECT_MS) {
			snprintf(why, sizeof(why), "could not connect to %.100s within %d s",
				 c->h->name, CONNECT_MS / 1000);
			c->refused = true;   /* the next address, if any */
			conn_lost(c, why);
			goto again;
		}
	}
}

static void on_timer(void *arg)
{
	uint64_t now = now_ms();
	bool tick = now >= vs->tick;
	struct vfan *f, *next;
	(void)arg;
	if (tick)
		vs->tick = now + 100;
	sweep(now);
	kick_all();
again:
	for (f = vs->fans; f; f = next) {
		next = f->next;
		if (f->pipe && f->deadline && now >= f->deadline) {
			/* its connection fails, and with it the GET whose answer
			 * was due: that may end another fan (next among them) */
			op_fail(&f->ops[0], "no answer within the time allowed", true);
			goto again;
		}
		if (f->deadline && now >= f->deadline) {
			stop_fan(f, -1, "no answer within the time allowed", true);
			continue;
		}
		if (!tick || !f->down)
			continue;
		for (int i = 0; i < f->n; i++)
			if (!f->ops[i].done && f->down(f->down_arg, i)) {
				f->gone = i;
				stop_fan(f, i, HTTPC_DOWN_ERR, false);
				break;
			}
	}
	rearm();
}

/* This thread's client on loop l (a thread keeps to one loop). */
static struct vstate *state(struct loop *l)
{
	if (!l || (vs && vs->loop != l))
		return NULL;
	if (!vs) {
		vs = xcalloc(1, sizeof(*vs));
		vs->loop = l;
	}
	if (hooked != l) {
		timer = (struct loop_timer){0, on_timer, NULL};
		loop_timer_add(l, &timer);
		loop_before(l, flush, NULL);
		hooked = l;
	}
	return vs;
}

static struct vhost *host(const char *name, size_t n)
{
	const char *colon = memrchr(name, ':', n);
	struct vhost *h;
	for (h = vs->hosts; h; h = h->next)
		if (!strncmp(h->name, name, n) && !h->name[n])
			return h;
	h = xcalloc(1, sizeof(*h));
	h->name = xstrndup(name, n);
	h->nm = name_of(name, n);
	h->port = (uint16_t)(colon ? strtoul(colon + 1, NULL, 10) : 80);
	h->wait_tail = &h->wait;
	h->next = vs->hosts;
	vs->hosts = h;
	return h;
}

/* A fan-out on loop l, not yet started (fan_go), or NULL when this thread
 * may not use l. */
static struct vfan *fan_new(struct loop *l, const char *method, struct httpc_req *reqs, int n,
			    const void *body, size_t bodylen, long timeout_ms,
			    bool (*down)(void *, int), void *down_arg,
			    void (*done)(void *arg, int gone), void *arg)
{
	struct vfan *f;
	if (!state(l))
		return NULL;
	f = xcalloc(1, sizeof(*f));
	*f = (struct vfan){.reqs = reqs, .n = n, .left = n + 1, .gone = -1, .method = method,
			   .body = body, .bodylen = bodylen, .down = down, .down_arg = down_arg,
			   .done = done, .arg = arg,
			   .deadline = timeout_ms > 0 ? now_ms() + (uint64_t)timeout_ms : 0,
			   .ops = xcalloc((size_t)(n > 0 ? n : 1), sizeof(struct vop))};
	return f;
}

static void fan_go(struct vfan *f)
{
	struct httpc_req *reqs = f->reqs;
	int n = f->n;
	f->next = vs->fans;
	if (vs->fans)
		vs->fans->prev = f;
	vs->fans = f;
	loop_hold(vs->loop);
	if (f->down && vs->tick <= now_ms())
		vs->tick = now_ms() + 100;
	for (int i = 0; i < n; i++) {
		struct vop *op = &f->ops[i];
		bool tls = !strncmp(reqs[i].url, "https://", 8);
		const char *hp = reqs[i].url + 7 + tls;
		op->f = f;
		op->i = i;
		reqs[i] = (struct httpc_req){reqs[i].url, -1, false, ""};
		op->path = hp + strcspn(hp, "/");
		if ((!tls && strncmp(reqs[i].url, "http://", 7)) || strlen(op->path) >= TARGET_MAX) {
			op_end(op, -1, "a volume URL too long or not http(s)://", false);
			continue;
		}
		op->h = host(hp, (size_t)(op->path - hp));
		op->h->tls = tls;
		if (!*op->path)
			op->path = "/";
	}
	for (int i = 0; i < n; i++)
		if (!f->ops[i].done)
			op_start(&f->ops[i], false);
	/* f can only bring the timer nearer (on_timer scans them all) */
	if (f->deadline)
		timer_near(f->deadline);
	if (f->down)
		timer_near(vs->tick);
	if (--f->left == 0)
		fan_end(f);
}

int vconn_fanout(const char *method, struct httpc_req *reqs, int n, const void *body,
		 size_t bodylen, long timeout_ms, bool (*down)(void *, int), void *down_arg,
		 void (*done)(void *arg, int gone), void *arg)
{
	struct vfan *f = fan_new(loop_current(), method, reqs, n, body, bodylen, timeout_ms, down,
				 down_arg, done, arg);
	if (!f)
		return -1;
	fan_go(f);
	return 0;
}

/* ---- on a thread of no loop: a loop of its own, run while it waits ---- */

struct loop *vconn_loop(void)
{
	if (!own) {
		own = loop_new();
		loop_stop(own);   /* loop_run returns once nothing is held */
	}
	return own;
}

void vconn_run(void)
{
	if (own && !loop_current())
		loop_run(own);
}

struct waiter {
	struct vfan *f;
	bool done;
	int gone;
};

static void waited(void *arg, int gone)
{
	struct waiter *w = arg;
	w->done = true;
	w->gone = w->f->over ? VCONN_OVER : gone;   /* f is freed after this */
}

int vconn_wait(const char *method, struct httpc_req *reqs, int n, const void *body,
	       size_t bodylen, long timeout_ms, bool (*down)(void *, int), void *down_arg,
	       struct buf *resp, size_t resp_max)
{
	struct waiter w = {0};
	if (loop_current()) {
		for (int i = 0; i < n; i++)
			reqs[i] = (struct httpc_req){reqs[i].url, -1, false, "on an event loop"};
		return -1;
	}
	w.f = fan_new(vconn_loop(), method, reqs, n, body, bodylen, timeout_ms, down, down_arg,
		      waited, &w);
	w.f->resp = n == 1 ? resp : NULL;
	w.f->resp_max = resp_max;
	fan_go(w.f);
	while (!w.done)
		loop_run(own);
	return w.gone;
}

/* vconn_get's: the answer handed on, then forgotten. */
struct vget {
	struct httpc_req req;
	struct buf body;
	void (*done)(void *arg, int status, const char *body, size_t len, const char *err);
	void *arg;
};

static void got(void *arg, int gone)
{
	struct vget *g = arg;
	(void)gone;
	g->done(g->arg, g->req.status, g->body.data ? g->body.data : "", g->body.len, g->req.err);
	buf_free(&g->body);
	free((char *)g->req.url);
	free(g);
}

int vconn_get(const char *url, size_t max,
	      void (*done)(void *arg, int status, const char *body, size_t len, const char *err),
	      void *arg)
{
	struct loop *l = loop_current() ? loop_current() : vconn_loop();
	struct vget *g = xcalloc(1, sizeof(*g));
	struct vfan *f;
	g->req.url = xstrdup(url);
	g->done = done;
	g->arg = arg;
	if (!(f = fan_new(l, "GET", &g->req, 1, NULL, 0, 0, NULL, NULL, got, g))) {
		free((char *)g->req.url);
		free(g);
		return -1;
	}
	f->resp = &g->body;
	f->resp_max = max;
	f->pipe = true;
	fan_go(f);
	return 0;
}

void vconn_thread_cleanup(void)
{
	struct vstate *s = vs;
	if (!s)
		return;
	s->ending = true;
	while (s->fans)   /* what is under way fails */
		stop_fan(s->fans, -1, "its thread ended", false);
	while (s->all) {
		struct vc *c = s->all;
		s->all = c->next_all;
		SSL_free(c->ssl);
		close(c->fd);
		buf_free(&c->in);
		free(c);
	}
	while (s->hosts) {
		struct vhost *h = s->hosts;
		s->hosts = h->next;
		free(h->name);
		free(h);
	}
	timer.at = 0;
	vs = NULL;
	free(s->dirty);
	free(s);
	if (own) {
		loop_free(own);   /* what was dropped in its last turn with it */
		hooked = NULL;
	}
	own = NULL;
}
