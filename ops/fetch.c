/* fetch.c -- rebuild's many listings in flight on one thread: GETs
 * pipelined on a few kept-alive connections per volume.
 *
 * A listing costs a volume little (nginx: ~45 us of CPU), so what the
 * client spends per request decides a rebuild on nginx, where a key costs
 * about three listings.  libcurl's multi (httpc_multi) spent ~47 us of CPU
 * per listing here, a whole core for the one listing thread, with one
 * send, one recv and two polls per request.  HTTP/1.1 lets a client send
 * its next requests before the answers come (pipelining, RFC 9112 9.3),
 * and nginx and libmicrohttpd answer them in order: so each connection
 * carries up to PIPE GETs at once, written with one send and read back in
 * a few recvs, on both sides.  Only GETs, which may be sent again: a
 * connection that closes (a server's keepalive_requests, an error) puts
 * its unanswered requests back at the front of the queue (conn_close). */
#include "ops.h"
#include "../common/util.h"
#include "../common/vconn.h"
#include "../common/volsign.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define HOST_CONNS 4          /* connections per volume (nginx: its workers share them) */
#define PIPE 16               /* GETs in flight on one connection */
#define SPREAD 4              /* open another connection once each has this many */
#define TRIES 4               /* sends of one GET whose connection closed before its answer */
#define CONNECT_MS 10000
#define IDLE_MS 120000        /* no byte for this long with GETs in flight: failed */
#define READ_CHUNK (64u << 10)

struct fget {
	struct host *host;
	char *target;             /* "/path?query", as sent */
	void *req;
	int tries;
	struct fget *next;
};

struct conn {
	int fd;                   /* -1: closed */
	bool connecting;
	struct addrinfo *ai;      /* the address it connects to */
	struct fget *head, *tail; /* sent, or in out: answered in this order */
	int depth;
	struct buf out;           /* requests not yet written, from out_off */
	size_t out_off;
	struct buf in;            /* bytes read, not yet parsed, from in_off */
	size_t in_off;
	struct vresp resp;        /* the answer being read (common/vconn.c parses it) */
	struct buf body;
	uint64_t last;            /* ms: the last progress */
};

struct host {
	char *name;               /* "host:port" */
	struct addrinfo *ai;      /* NULL: unusable, err says why */
	struct addrinfo *cur;     /* the address to connect to: the next one of ai's
				     after a connect failed ("localhost": ::1, then
				     127.0.0.1) */
	char err[256];            /* or why the last connect failed */
	struct fget *qhead, *qtail;   /* waiting for a connection */
	struct conn c[HOST_CONNS];
	struct host *next;
};

struct ops_fetch {
	int concurrency, inflight, queued;
	size_t max;
	struct host *hosts;
	int nhosts;
	struct pollfd *pf;        /* poll_once's, HOST_CONNS per host */
	struct conn **pc;
	struct host **ph;
	int npoll;                /* their size */
	void (*done)(void *ctx, void *req, int status, const char *body, size_t len,
		     const char *err);
	void *ctx;
};

struct ops_fetch *ops_fetch_new(int concurrency, size_t max)
{
	struct ops_fetch *f = xcalloc(1, sizeof(*f));
	f->concurrency = concurrency < 1 ? 1 : concurrency;
	f->max = max;
	return f;
}

/* "host:port" (or "[v6]:port") into host and port; false when unusable. */
static bool split_host(const char *name, char *host, size_t hn, char *port, size_t pn)
{
	const char *colon, *end = name + strlen(name);
	if (*name == '[') {
		const char *rb = strchr(name, ']');
		if (!rb || (rb[1] && rb[1] != ':'))
			return false;
		snprintf(host, hn, "%.*s", (int)(rb - name - 1), name + 1);
		snprintf(port, pn, "%s", rb[1] ? rb + 2 : "80");
		return true;
	}
	colon = strrchr(name, ':');
	snprintf(host, hn, "%.*s", (int)((colon ? colon : end) - name), name);
	snprintf(port, pn, "%s", colon ? colon + 1 : "80");
	return *host != '\0';
}

static struct host *host_get(struct ops_fetch *f, const char *name, size_t n)
{
	struct host *h;
	char host[256], port[32];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	int rc;
	for (h = f->hosts; h; h = h->next)
		if (strlen(h->name) == n && !memcmp(h->name, name, n))
			return h;
	h = xcalloc(1, sizeof(*h));
	h->name = xstrndup(name, n);
	for (int i = 0; i < HOST_CONNS; i++) {
		h->c[i].fd = -1;
		vresp_init(&h->c[i].resp, false, &h->c[i].body, f->max);
	}
	if (!split_host(h->name, host, sizeof(host), port, sizeof(port)))
		snprintf(h->err, sizeof(h->err), "bad host %.200s", h->name);
	else if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0)
		snprintf(h->err, sizeof(h->err), "could not resolve %.100s: %s", host, gai_strerror(rc));
	else
		h->ai = h->cur = ai;
	h->next = f->hosts;
	f->hosts = h;
	f->nhosts++;
	return h;
}

/* Onto h's queue: at its end, or (a GET sent again) at its front. */
static void enqueue(struct ops_fetch *f, struct host *h, struct fget *g, bool front)
{
	if (front) {
		g->next = h->qhead;
		h->qhead = g;
		if (!h->qtail)
			h->qtail = g;
	} else {
		g->next = NULL;
		if (h->qtail)
			h->qtail->next = g;
		else
			h->qhead = g;
		h->qtail = g;
	}
	f->queued++;
}

void ops_fetch_add(struct ops_fetch *f, const char *url, void *req)
{
	struct fget *g = xcalloc(1, sizeof(*g));
	const char *p = strstr(url, "://") ? strstr(url, "://") + 3 : url;
	size_t n = strcspn(p, "/?");
	g->host = host_get(f, p, n);
	g->target = xstrdup(p[n] == '/' ? p + n : "/");
	g->req = req;
	if (strncmp(url, "http://", 7) && strstr(url, "://") && g->host->ai) {
		freeaddrinfo(g->host->ai);
		g->host->ai = g->host->cur = NULL;
		snprintf(g->host->err, sizeof(g->host->err), "only http:// volumes: %s", url);
	}
	enqueue(f, g->host, g, false);
}

/* g is answered (status, or -1 and err): hand it over and forget it. */
static void finish(struct ops_fetch *f, struct fget *g, int status, const char *body,
		   size_t len, const char *err)
{
	f->done(f->ctx, g->req, status, body ? body : "", len, err ? err : "");
	free(g->target);
	free(g);
}

/* Close c.  Its unanswered GETs go back to the front of the queue, in
 * order.  Unless the server had said it closes (counted: false), the
 * first of them, the one whose answer was due, has used a try, and fails
 * with err after TRIES: the others may never have been read, so a server
 * that answers at least one GET per connection always gets through them. */
static void conn_close(struct ops_fetch *f, struct host *h, struct conn *c, bool counted,
		       const char *err)
{
	struct fget *g = c->head, *first = c->head, *back = NULL, **bt = &back;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->connecting = false;
	c->head = c->tail = NULL;
	f->inflight -= c->depth;
	c->depth = 0;
	c->out.len = c->out_off = 0;
	c->in.len = c->in_off = 0;
	c->body.len = 0;
	vresp_init(&c->resp, false, &c->body, f->max);
	while (g) {
		struct fget *next = g->next;
		if (counted && g == first && ++g->tries >= TRIES) {
			finish(f, g, -1, NULL, 0, err);
		} else {
			*bt = g;
			bt = &g->next;
		}
		g = next;
	}
	*bt = NULL;
	/* back, in order, before what waits */
	if (back) {
		struct fget *last = back;
		int n = 1;
		while (last->next) {
			last = last->next;
			n++;
		}
		last->next = h->qhead;
		h->qhead = back;
		if (!h->qtail)
			h->qtail = last;
		f->queued += n;
	}
}

/* A connect to c->ai failed: the host's next address is tried next. */
static void next_address(struct host *h, struct conn *c)
{
	if (c->ai && h->cur == c->ai)
		h->cur = c->ai->ai_next ? c->ai->ai_next : h->ai;
}

static void conn_open(struct host *h, struct conn *c)
{
	int one = 1, fd = -1;
	for (int tried = 0; h->cur && fd < 0 && tried < 8; tried++) {
		struct addrinfo *a = h->cur;
		int e;
		c->ai = a;
		fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		e = errno;
		if (fd >= 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS)
				break;
			e = errno;
			close(fd);
			fd = -1;
		}
		snprintf(h->err, sizeof(h->err), "connect to %.100s: %s", h->name, strerror(e));
		next_address(h, c);
		if (h->cur == h->ai)
			break;   /* each address tried */
	}
	c->fd = fd;
	c->connecting = fd >= 0;
	c->last = now_ms();
}

/* The connection of h that takes the next GET; NULL when all are full,
 * or (*failed) when none is open and a new one could not be made. */
static struct conn *pick(struct host *h, bool *failed)
{
	struct conn *best = NULL, *closed = NULL;
	*failed = false;
	for (int i = 0; i < HOST_CONNS; i++) {
		struct conn *c = &h->c[i];
		if (c->fd < 0) {
			if (!closed)
				closed = c;
		} else if (c->depth < PIPE && (!best || c->depth < best->depth)) {
			best = c;
		}
	}
	if (closed && (!best || best->depth >= SPREAD)) {
		conn_open(h, closed);
		if (closed->fd >= 0)
			return closed;
		*failed = !best;
	}
	return best;
}

/* Queue a GET of target on c: signed as it goes out (-volumesecret), so
 * one that waited in the queue, or is sent again, is signed anew. */
static void send_get(struct conn *c, const char *target, const char *host)
{
	char signed_[4096];
	if (volsign_on() && volsign_url(target, "GET", VOLSIGN_SELF_TTL, signed_, sizeof(signed_)))
		target = signed_;
	buf_printf(&c->out, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, host);
}

/* Hand the queues' GETs to connections, one host at a time in turn, while
 * fewer than concurrency are in flight. */
static void dispatch(struct ops_fetch *f)
{
	bool any = true;
	while (any && f->inflight < f->concurrency) {
		any = false;
		for (struct host *h = f->hosts; h && f->inflight < f->concurrency; h = h->next) {
			struct fget *g = h->qhead;
			struct conn *c;
			bool failed;
			if (!g)
				continue;
			if (!h->ai || !(c = pick(h, &failed))) {
				/* no address, or no connection to be had: tried
				 * again (each time counted), then failed */
				if (!h->ai || (failed && ++g->tries >= TRIES)) {
					h->qhead = g->next;
					if (!h->qhead)
						h->qtail = NULL;
					f->queued--;
					finish(f, g, -1, NULL, 0, h->err);
				}
				any = any || !h->ai || failed;
				continue;
			}
			h->qhead = g->next;
			if (!h->qhead)
				h->qtail = NULL;
			f->queued--;
			g->next = NULL;
			if (c->tail)
				c->tail->next = g;
			else
				c->head = g;
			c->tail = g;
			if (!c->depth++)
				c->last = now_ms();   /* the wait for an answer starts */
			f->inflight++;
			send_get(c, g->target, h->name);
			any = true;
		}
	}
}

/* Write what c has to send; false when the connection failed. */
static bool conn_write(struct conn *c)
{
	while (c->out_off < c->out.len) {
		ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK;
		c->out_off += (size_t)n;
	}
	c->out.len = c->out_off = 0;
	return true;
}

/* c's oldest request is answered: off its queue, to its caller. */
static void answered(struct ops_fetch *f, struct conn *c)
{
	struct fget *g = c->head;
	if (!(c->head = g->next))
		c->tail = NULL;
	c->depth--;
	f->inflight--;
	finish(f, g, c->resp.status, c->body.data, c->body.len, NULL);
	c->body.len = 0;
}

/* Parse what c has read: every complete answer goes to its GET.  Returns
 * 0, or -1 with err (c must be closed, counted). */
static int conn_parse(struct ops_fetch *f, struct host *h, struct conn *c, char *err,
		      size_t en)
{
	while (c->in_off < c->in.len) {
		bool close_after;
		if (!c->head) {
			snprintf(err, en, "an answer nobody asked for");
			return -1;
		}
		c->in_off += vresp_feed(&c->resp, c->in.data + c->in_off, c->in.len - c->in_off);
		if (c->resp.state == VR_ERR) {
			snprintf(err, en, "%s", c->resp.why);
			return -1;
		}
		if (c->resp.state != VR_DONE)
			return 0;
		close_after = c->resp.close;
		answered(f, c);
		vresp_init(&c->resp, false, &c->body, f->max);
		if (close_after) {
			conn_close(f, h, c, false, NULL);
			return 0;
		}
	}
	return 0;
}

/* c is readable: read what is there and parse it.  false: c failed (err). */
static bool conn_read(struct ops_fetch *f, struct host *h, struct conn *c, char *err, size_t en)
{
	for (;;) {
		ssize_t n;
		if (c->in_off == c->in.len) {
			c->in.len = c->in_off = 0;
		} else if (c->in_off > c->in.len / 2) {
			memmove(c->in.data, c->in.data + c->in_off, c->in.len - c->in_off);
			c->in.len -= c->in_off;
			c->in_off = 0;
		}
		if (c->in.cap - c->in.len < READ_CHUNK) {
			c->in.cap = c->in.len + READ_CHUNK;
			c->in.data = xrealloc(c->in.data, c->in.cap);
		}
		n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n < 0) {
			snprintf(err, en, "recv from %s: %s", h->name, strerror(errno));
			return false;
		}
		if (n == 0) {
			if (c->resp.state == VR_EOF && c->head) {   /* the body ends with the connection */
				answered(f, c);
				conn_close(f, h, c, false, NULL);
				return true;
			}
			if (!c->head) {   /* an idle connection closing is no failure */
				conn_close(f, h, c, false, NULL);
				return true;
			}
			snprintf(err, en, "%s closed the connection%s", h->name,
				 c->in.len > c->in_off || c->resp.state != VR_HEAD ? " mid-answer" : "");
			return false;
		}
		c->in.len += (size_t)n;
		c->last = now_ms();
		if (conn_parse(f, h, c, err, en) < 0)
			return false;
		if (c->fd < 0 || (size_t)n < c->in.cap - c->in.len + (size_t)n)
			return true;   /* closed by the answer, or read all there was */
	}
}

/* One round of poll over every open connection. */
static void poll_once(struct ops_fetch *f)
{
	struct pollfd *pf;
	struct conn **pc;
	struct host **ph;
	int n = 0;
	uint64_t now = now_ms();
	char err[256];
	/* grown here, not when a host is added: a done() may add one while
	 * the arrays are in use below */
	if (f->npoll < HOST_CONNS * f->nhosts) {
		f->npoll = HOST_CONNS * f->nhosts;
		f->pf = xrealloc(f->pf, sizeof(*f->pf) * (size_t)f->npoll);
		f->pc = xrealloc(f->pc, sizeof(*f->pc) * (size_t)f->npoll);
		f->ph = xrealloc(f->ph, sizeof(*f->ph) * (size_t)f->npoll);
	}
	pf = f->pf;
	pc = f->pc;
	ph = f->ph;
	for (struct host *h = f->hosts; h; h = h->next)
		for (int i = 0; i < HOST_CONNS; i++) {
			struct conn *c = &h->c[i];
			if (c->fd < 0)
				continue;
			if (c->depth && now - c->last > (c->connecting ? CONNECT_MS : IDLE_MS)) {
				snprintf(err, sizeof(err), "%s to %s timed out",
					 c->connecting ? "connect" : "answer", h->name);
				conn_close(f, h, c, true, err);
				continue;
			}
			pf[n] = (struct pollfd){.fd = c->fd, .events = (short)(POLLIN |
				 (c->connecting || c->out_off < c->out.len ? POLLOUT : 0))};
			pc[n] = c;
			ph[n++] = h;
		}
	if (!n || poll(pf, (nfds_t)n, 100) <= 0)
		return;
	for (int i = 0; i < n; i++) {
		struct conn *c = pc[i];
		struct host *h = ph[i];
		if (!pf[i].revents || c->fd != pf[i].fd)
			continue;
		if (c->connecting) {
			int e = 0;
			socklen_t el = sizeof(e);
			if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
				e = errno;
			if (!e && !(pf[i].revents & (POLLOUT | POLLIN)))
				continue;
			if (e) {
				snprintf(err, sizeof(err), "connect to %s: %s", h->name, strerror(e));
				next_address(h, c);
				conn_close(f, h, c, true, err);
				continue;
			}
			c->connecting = false;
			c->last = now_ms();
		}
		if (!conn_write(c)) {
			snprintf(err, sizeof(err), "send to %s: %s", h->name, strerror(errno));
			conn_close(f, h, c, true, err);
			continue;
		}
		if ((pf[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    !conn_read(f, h, c, err, sizeof(err)))
			conn_close(f, h, c, true, err);
	}
}

void ops_fetch_run(struct ops_fetch *f, int (*more)(void *ctx),
		   void (*done)(void *ctx, void *req, int status, const char *body, size_t len,
				const char *err),
		   void *ctx)
{
	bool finished = false;
	f->done = done;
	f->ctx = ctx;
	for (;;) {
		while (!finished && f->inflight + f->queued < f->concurrency) {
			int n = more(ctx);
			if (n < 0)
				finished = true;
			if (n <= 0)
				break;
		}
		dispatch(f);
		/* what dispatch gave them goes out now, connected ones at once */
		for (struct host *h = f->hosts; h; h = h->next)
			for (int i = 0; i < HOST_CONNS; i++) {
				struct conn *c = &h->c[i];
				char err[256];
				if (c->fd >= 0 && !c->connecting && c->out_off < c->out.len &&
				    !conn_write(c)) {
					snprintf(err, sizeof(err), "send to %s: %s", h->name,
						 strerror(errno));
					conn_close(f, h, c, true, err);
				}
			}
		if (f->inflight)
			poll_once(f);
		else if (finished && !f->queued)
			break;
		else if (!f->queued)
			usleep(1000);   /* more() waits on someone else */
	}
}

void ops_fetch_free(struct ops_fetch *f)
{
	if (!f)
		return;
	while (f->hosts) {
		struct host *h = f->hosts;
		f->hosts = h->next;
		for (int i = 0; i < HOST_CONNS; i++) {
			struct conn *c = &h->c[i];
			if (c->fd >= 0)
				close(c->fd);
			for (struct fget *g = c->head, *n; g; g = n) {
				n = g->next;
				free(g->target);
				free(g);
			}
			buf_free(&c->out);
			buf_free(&c->in);
			buf_free(&c->body);
		}
		for (struct fget *g = h->qhead, *n; g; g = n) {
			n = g->next;
			free(g->target);
			free(g);
		}
		if (h->ai)
			freeaddrinfo(h->ai);
		free(h->name);
		free(h);
	}
	free(f->pf);
	free(f->pc);
	free(f->ph);
	free(f);
}
