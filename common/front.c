/* front.c -- see front.h.  The only file that includes microhttpd.h.
 *
 * One event loop per core (loop.h), each running its own libmicrohttpd
 * daemon in external-epoll mode on the one listening socket; the volume
 * client's async transfers run on the same loops.  A request is offered to
 * the routes at its handler's first call and answered on a later one: an
 * answer queued on the first call makes libmicrohttpd close the
 * connection, which costs keep-alive (NOTES.md), so only refusals go there. */
#include "front.h"
#include "accesslog.h"
#include "flags.h"
#include "httpc.h"
#include "loop.h"
#include "metrics.h"
#include "reaper.h"
#include "reqstats.h"
#include "sigv4.h"
#include "spawn.h"
#include "util.h"

#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

/* A connection, and the request it runs (one at a time). */
struct conn {
	struct reaper_conn reap;           /* cuts off a head slower than idle_ms */
	const struct front_route *route;   /* the request's; NULL before its first call */
	void *req;                         /* the route's state */
	enum front_head bad;
	char *target;                      /* absolute_form, verbose or the access log: the
					    * target, split at '?' */
	const char *query;
	char method[16];                   /* verbose, the access log: for the log */
	char version[12];                  /* the access log */
	enum reqstats_method rm;
	int status;                        /* the answer's, 0 until one is queued */
	uint64_t start_ms, start_ns, up, down;   /* bytes read, bytes answered */
	bool refused;                      /* counted in refused_open until it closes */
	bool served;                       /* a request line was parsed on it */
	bool held;                         /* holds fl->loop: woken, its answer not out yet */
	bool slept;                        /* slept since its last bytes were read */
	bool tls_up;                       /* its TLS handshake read its last message */
	bool began;                        /* its handshake read its first bytes */
	struct front_loop *fl;             /* the loop it runs on */
	struct MHD_Connection *c;
	struct conn *hs_prev, *hs_next;    /* hs_parked's list */
};

/* A loop thread and its daemon. */
struct front_loop {
	struct loop *loop;
	struct MHD_Daemon *d;
	pthread_t th;
	struct loop_fd w;        /* the daemon's epoll descriptor */
	struct loop_timer t;     /* libmicrohttpd's next deadline */
	bool kick;               /* run it at once: a connection was resumed */
	bool quiesced;
	int handshakes;          /* TLS handshakes begun this turn */
	struct conn *later, *later_end;   /* handshakes put off to the next turns */
};

static __thread struct front_loop *this_loop;
static struct front_opts opts;
static struct front_loop *loops;
static int nloops, listen_fd = -1;
static struct MHD_Daemon *admin, *pool;   /* pool: front_opts.threads */
static const struct front_route *routes[4];
static int nroutes;
static atomic_int inflight, nsuspended;
/* Connections on_uri cut off that libmicrohttpd has not closed yet: it may
 * still be parsing their request, and 0.9.75 dereferences a NULL response
 * (a crash) when the error answer it then makes (a 431 for too many
 * arguments) comes after MHD_stop_daemon began: front_stop waits for them. */
static atomic_int refused_open;
/* Stopping (front_drain): draining, every answer closes its connection;
 * refusing, a new request's connection is closed unanswered; no_sleep, a
 * request no longer sleeps, so that libmicrohttpd can be stopped (it
 * aborts the process if a connection is suspended then). */
static atomic_bool draining, refusing, no_sleep;

_Static_assert(FRONT_YES == MHD_YES && FRONT_NO == MHD_NO, "results");
_Static_assert(FRONT_READER_END == MHD_CONTENT_READER_END_OF_STREAM &&
	       FRONT_READER_ERROR == MHD_CONTENT_READER_END_WITH_ERROR, "reader ends");

void front_route_add(const struct front_route *r)
{
	if (nroutes < (int)(sizeof(routes) / sizeof(routes[0])))
		routes[nroutes++] = r;
}

static struct conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* A woken connection holds its loop until its request ends or it sleeps
 * again: a loop that stops runs until the answer it was woken for is out
 * (the work that woke it may have been the loop's last).  Under z->mu, or
 * on the connection's loop once its route let go (on_done). */
static void hold(struct conn *k, bool on)
{
	if (!k || !k->fl || k->held == on)
		return;
	k->held = on;
	if (on)
		loop_hold(k->fl->loop);
	else
		loop_release(k->fl->loop);
}

int front_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

const char *front_header(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

bool front_has_arg(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, name, strlen(name), NULL,
					     NULL) == MHD_YES;
}

struct each {
	void (*fn)(void *, const char *, const char *);
	void *cls;
};

static enum MHD_Result each_arg(void *cls, enum MHD_ValueKind kind, const char *key,
				const char *value)
{
	struct each *e = cls;
	(void)kind;
	e->fn(e->cls, key, value);
	return MHD_YES;
}

void front_args(struct MHD_Connection *c, void (*fn)(void *, const char *, const char *),
		void *cls)
{
	struct each e = {fn, cls};
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, each_arg, &e);
}

void front_headers(struct MHD_Connection *c, void (*fn)(void *, const char *, const char *),
		   void *cls)
{
	struct each e = {fn, cls};
	MHD_get_connection_values(c, MHD_HEADER_KIND, each_arg, &e);
}

static const char *sig_header(void *cls, const char *name)
{
	return front_header(cls, name);
}

static void sig_headers(void *cls, void (*fn)(void *, const char *, const char *), void *arg)
{
	front_headers(cls, fn, arg);
}

void front_sig_check(struct MHD_Connection *c, const char *method, const char *path,
		     const char *query, const struct keyring *ring, struct sig_result *out)
{
	struct sig_req r = {method, path, query, sig_header, sig_headers, c, (int64_t)time(NULL)};
	sig_check(ring, &r, out);
}

enum front_head front_head_error(struct MHD_Connection *c)
{
	struct conn *k = conn_of(c);
	return k ? k->bad : FRONT_HEAD_OK;
}

/* ---- request heads ---- */

/* Notes a Content-Length header that disagrees with the first. */
static enum MHD_Result length_cmp(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	const char **first = cls;
	(void)kind;
	if (strcasecmp(key, "Content-Length") || !value)
		return MHD_YES;
	if (!first[0])
		first[0] = value;
	else if (strcmp(first[0], value))
		first[1] = value;
	return first[1] ? MHD_NO : MHD_YES;
}

static enum front_head head_check(struct MHD_Connection *c, const char *version)
{
	const char *te = front_header(c, "Transfer-Encoding"), *cl[2] = {NULL, NULL};
	/* libmicrohttpd would read any other coding's body up to the close,
	 * leaving the client waiting. */
	if (te && strcasecmp(te, "chunked"))
		return FRONT_HEAD_CODING;
	/* Both: libmicrohttpd frames the body by the chunks, while a route
	 * may size it by the length.  nginx answers 400 (RFC 9112 §6.3: a
	 * request smuggled past a proxy looks like this). */
	if (te && front_header(c, "Content-Length"))
		return FRONT_HEAD_BOTH;
	/* Two lengths that differ leave where the body ends in doubt
	 * (libmicrohttpd takes the first).  A GET has none: no header walk. */
	if (front_header(c, "Content-Length"))
		MHD_get_connection_values(c, MHD_HEADER_KIND, length_cmp, cl);
	if (cl[1])
		return FRONT_HEAD_LENGTHS;
	/* RFC 9112 §3.2, as nginx (libmicrohttpd takes HTTP/1.2-1.9 as 1.1) */
	if (strcmp(version, MHD_HTTP_VERSION_1_0) && !front_header(c, "Host"))
		return FRONT_HEAD_HOST;
	return FRONT_HEAD_OK;
}

/* k->target split at '?'; with absolute_form, "http://host/p?q" is "/p?q"
 * (RFC 9112 §3.2.2: what a client sends through a proxy). */
static void target_split(struct conn *k)
{
	char *q;
	if (opts.absolute_form &&
	    (!strncasecmp(k->target, "http://", 7) || !strncasecmp(k->target, "https://", 8))) {
		char *a = strstr(k->target, "://") + 3, *p = a + strcspn(a, "/?"), *n;
		n = xasprintf("%s%s", *p == '/' ? "" : "/", p);
		free(k->target);
		k->target = n;
	}
	q = strchr(k->target, '?');
	if (q)
		*q++ = '\0';
	k->query = q;
}

/* The first call: the request's head is in. */
static enum MHD_Result begin(struct conn *k, struct MHD_Connection *c, const char *url,
			     const char *method, const char *version)
{
	const char *path = url, *query = NULL;
	reaper_waiting(&k->reap, false);
	if (opts.metrics || opts.accesslog)
		k->rm = reqstats_method(method);
	if (accesslog_on())
		snprintf(k->version, sizeof(k->version), "%s", version);
	k->bad = head_check(c, version);
	if (k->target) {
		target_split(k);
		snprintf(k->method, sizeof(k->method), "%s", method);
		if (opts.absolute_form) {
			path = k->target;
			query = k->query;
			if (!k->bad && path[0] != '/')
				k->bad = FRONT_HEAD_TARGET;
		}
	}
	for (int i = 0; !k->bad && i < nroutes; i++) {
		k->req = routes[i]->claim(c, method, path, query);
		if (k->req) {
			k->route = routes[i];
			return MHD_YES;
		}
	}
	k->req = opts.route->claim(c, method, path, query);
	if (!k->req)
		return MHD_NO;
	k->route = opts.route;
	return MHD_YES;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *data,
			       size_t *size, void **con_cls)
{
	struct conn *k = *con_cls;
	size_t n = *size;
	enum MHD_Result ret;
	(void)cls;
	if (!k)                          /* refused in on_uri */
		return MHD_NO;
	log_request(method, url);   /* lines logged meanwhile name the request */
	if (!k->route)
		ret = begin(k, c, url, method, version);
	else {
		if (*size)
			k->slept = false;   /* bytes came after it slept */
		ret = (enum MHD_Result)k->route->handler(k->req, data, size);
	}
	log_request(NULL, NULL);
	k->up += n - *size;
	return ret;
}

/* More query arguments than any request of ours needs?  libmicrohttpd
 * 0.9.75 stores each one in the connection's small memory pool before the
 * URI callback runs; a few hundred exhaust it and the connection stalls
 * with no answer, so such a connection is cut off at once. */
static bool too_many_args(const char *uri)
{
	int args = 0;
	for (const char *q = strchr(uri, '?'); q && *q; q++)
		args += *q == '&';
	return args > 100;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct conn *k = conn_of(c);
	(void)cls;
	/* Counted before refusing is read: front_drain sets refusing, then
	 * waits for inflight to reach 0, and misses no request. */
	atomic_fetch_add(&inflight, 1);
	if (k)
		k->served = true;
	if (!k || atomic_load(&refusing) || too_many_args(uri)) {
		atomic_fetch_sub(&inflight, 1);
		if (k && !k->refused) {
			k->refused = true;
			atomic_fetch_add(&refused_open, 1);
		}
		shutdown(front_fd(c), SHUT_RDWR);
		return NULL;
	}
	k->route = NULL;
	k->bad = FRONT_HEAD_OK;
	free(k->target);
	k->target = opts.absolute_form || opts.verbose || accesslog_on() ? xstrdup(uri) : NULL;
	k->query = NULL;
	k->rm = RM_OTHER;
	k->status = 0;
	k->up = k->down = 0;
	if (opts.metrics || opts.accesslog)   /* off, nothing is timed or counted */
		k->start_ns = now_ns();
	k->method[0] = '-';
	k->method[1] = '\0';
	if (opts.verbose)
		k->start_ms = now_ms();
	return k;
}

/* Keep the target raw: the routes decode it, each in one place. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls, (void)c;
	return strlen(s);
}

/* The access log's line of k's request, on connection c. */
static void log_access(struct conn *k, struct MHD_Connection *c, uint64_t ns, uint64_t out)
{
	char addr[NI_MAXHOST] = "-";
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (ci && ci->client_addr)
		getnameinfo(ci->client_addr,
			    ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
								   : sizeof(struct sockaddr_in),
			    addr, sizeof(addr), NULL, 0, NI_NUMERICHOST);
	accesslog_add(&(struct accesslog_entry){
		.addr = addr, .method = k->method, .target = k->target, .query = k->query,
		.version = k->version[0] ? k->version : "-", .status = k->status,
		.bytes = out, .referer = front_header(c, "Referer"),
		.agent = front_header(c, "User-Agent"), .seconds = (double)ns / 1e9});
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
		    enum MHD_RequestTerminationCode why)
{
	struct conn *k = *con_cls;
	uint64_t ns;
	char c1;
	(void)cls;
	if (!k)
		return;
	if (opts.metrics || opts.accesslog) {
		/* the length a HEAD announces is not sent */
		uint64_t out = k->rm == RM_HEAD ? 0 : k->down;
		ns = now_ns() - k->start_ns;
		if (opts.metrics)
			reqstats_add(k->rm, k->status, ns, k->up, out);
		if (accesslog_on() && k->target)
			log_access(k, c, ns, out);
	}
	if (opts.verbose) {
		char t[2048], q[1024];   /* as the access log writes them: no signatures */
		accesslog_redact(t, sizeof(t), k->target, true);
		accesslog_redact(q, sizeof(q), k->query, false);
		log_msg("%s %s%s%s %d %llu %llums%s", k->method, t, k->query ? "?" : "",
			k->query ? q : "",
			k->route && k->route->status ? k->route->status(k->req) : 0,
			(unsigned long long)(k->up ? k->up : k->down),
			(unsigned long long)(now_ms() - k->start_ms),
			why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection lost)");
	}
	if (k->route)
		k->route->done(k->req);   /* after it, nothing wakes the connection */
	k->route = NULL;
	hold(k, false);
	reaper_waiting(&k->reap, true);
	/* libmicrohttpd 0.9.75 with epoll takes a short read to mean the
	 * socket is drained, so a FIN that came with the request raises no
	 * new event, and a client that half-closed after it (nc -N, some
	 * proxies) would wait for the idle timeout: when the peer has sent
	 * nothing more, shut the socket down, which wakes libmicrohttpd to
	 * close it.  A request that slept since its last bytes was read once
	 * more when woken (libmicrohttpd reads a resumed connection before
	 * answering), and that read saw such a FIN. */
	if (why == MHD_REQUEST_TERMINATED_COMPLETED_OK && !k->slept &&
	    recv(k->reap.fd, &c1, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
		shutdown(k->reap.fd, SHUT_RDWR);
	k->slept = false;
	free(k->target);
	k->target = NULL;
	k->query = NULL;
	*con_cls = NULL;
	atomic_fetch_sub(&inflight, 1);
}

/* ---- TLS handshakes that wait for the client ----
 * libmicrohttpd (0.9.75) keeps a connection whose handshake waits for the
 * client's next bytes on its list of ready ones, and so runs that
 * handshake again and again until they come: a few hundred half-done
 * handshakes held a core.  Each session reads through hs_pull instead, and
 * a handshake read that would wait parks its connection: suspended, its
 * socket watched by one thread (the loops' daemons and libmicrohttpd's own
 * threads alike), which resumes it when bytes come (or the reaper's cut). */
static int hs_ep = -1, hs_stop_fd = -1;
static pthread_t hs_th;
static pthread_mutex_t hs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct conn *hs_parked;

static void mhd_fire(void *arg);

/* k runs on (hs_mu held); once resumed it may be gone (a pool thread's). */
static void hs_resume(struct conn *k)
{
	struct front_loop *fl = k->fl;
	epoll_ctl(hs_ep, EPOLL_CTL_DEL, k->reap.fd, NULL);
	if (k->hs_prev)
		k->hs_prev->hs_next = k->hs_next;
	else
		hs_parked = k->hs_next;
	if (k->hs_next)
		k->hs_next->hs_prev = k->hs_prev;
	MHD_resume_connection(k->c);
	if (fl)   /* an external-epoll daemon is told of a resume by a run */
		loop_post(fl->loop, mhd_fire, fl);
}

static void hs_park(struct conn *k)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = k};
	pthread_mutex_lock(&hs_mu);
	if (atomic_load(&no_sleep)) {   /* past hs_stop's resumes: it would stay suspended */
		pthread_mutex_unlock(&hs_mu);
		return;
	}
	MHD_suspend_connection(k->c);
	k->hs_prev = NULL;
	if ((k->hs_next = hs_parked))
		hs_parked->hs_prev = k;
	hs_parked = k;
	if (epoll_ctl(hs_ep, EPOLL_CTL_ADD, k->reap.fd, &ev))
		hs_resume(k);
	pthread_mutex_unlock(&hs_mu);
}

/* A handshake's first message costs the server a signature (milliseconds
 * with RSA), and libmicrohttpd runs every connection that is ready in one
 * go: a burst of ClientHellos held a loop's requests for seconds.  A loop
 * begins at most HS_TURN handshakes a turn; the others wait, suspended, in
 * its queue (later), and begin in the turns that follow, in order.  One a
 * turn: a turn costs microseconds besides (bench row 18g: 4 a turn gave
 * the burst's 302s a 99th percentile of 200 ms, one 30-70 ms). */
#define HS_TURN 1

static ssize_t hs_pull(gnutls_transport_ptr_t p, void *buf, size_t len)
{
	struct conn *k = p;
	struct front_loop *fl = k->fl;
	ssize_t n;
	if (fl && !k->began && fl->handshakes >= HS_TURN && !atomic_load(&no_sleep)) {
		MHD_suspend_connection(k->c);
		k->hs_next = NULL;
		*(fl->later ? &fl->later_end->hs_next : &fl->later) = k;
		fl->later_end = k;
		errno = EAGAIN;
		return -1;
	}
	n = recv(k->reap.fd, buf, len, 0);
	if (n > 0 && !k->began) {
		if (*(unsigned char *)buf & 0x80) {
			errno = EPROTO;   /* gnutls would wait for an SSLv2 hello's length: no client sends one */
			return -1;
		}
		k->began = true;
		if (fl)
			fl->handshakes++;
	}
	if (n < 0 && errno == EAGAIN && !k->tls_up) {
		hs_park(k);
		errno = EAGAIN;
	}
	return n;
}

/* The loop's next turn: the handshakes put off first. */
static void hs_turn(struct front_loop *fl)
{
	fl->handshakes = 0;
	for (int i = 0; i < HS_TURN && fl->later; i++) {
		struct conn *k = fl->later;
		fl->later = k->hs_next;
		MHD_resume_connection(k->c);
		fl->kick = true;
	}
}

static int hs_finished(gnutls_session_t s, unsigned type, unsigned when, unsigned incoming,
		       const gnutls_datum_t *msg)
{
	(void)type, (void)when, (void)msg;
	if (incoming)   /* the client's Finished: the handshake reads no more */
		((struct conn *)gnutls_transport_get_ptr(s))->tls_up = true;
	return 0;
}

static void hs_watch(struct conn *k, struct MHD_Connection *c, int fd)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || hs_ep < 0)
		return;
	gnutls_transport_set_ptr2(ci->tls_session, k, (gnutls_transport_ptr_t)(intptr_t)fd);
	gnutls_transport_set_pull_function(ci->tls_session, hs_pull);
	gnutls_handshake_set_hook_function(ci->tls_session, GNUTLS_HANDSHAKE_FINISHED,
					   GNUTLS_HOOK_POST, hs_finished);
}

static void *hs_main(void *arg)
{
	struct epoll_event ev[64];
	(void)arg;
	for (;;) {
		int n = epoll_wait(hs_ep, ev, 64, -1);
		pthread_mutex_lock(&hs_mu);
		for (int i = 0; i < n; i++) {
			struct conn *k = ev[i].data.ptr;
			if (!k) {
				pthread_mutex_unlock(&hs_mu);
				return NULL;
			}
			hs_resume(k);   /* parked: one event a park (EPOLLONESHOT) */
		}
		pthread_mutex_unlock(&hs_mu);
	}
}

static int hs_start(void)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	if ((hs_ep = epoll_create1(EPOLL_CLOEXEC)) >= 0 &&
	    (hs_stop_fd = eventfd(0, EFD_CLOEXEC)) >= 0 &&
	    !epoll_ctl(hs_ep, EPOLL_CTL_ADD, hs_stop_fd, &ev) &&
	    !pthread_create(&hs_th, NULL, hs_main, NULL))
		return 0;
	log_msg("-tls: no thread for waiting handshakes: %s", strerror(errno));
	close(hs_stop_fd);   /* -1 or its own */
	close(hs_ep);
	hs_ep = hs_stop_fd = -1;
	return -1;
}

/* Before the daemons stop (they refuse to with a connection suspended),
 * after front_drain: no handshake parks or queues after no_sleep. */
static void hs_stop(void)
{
	if (hs_ep < 0)
		return;
	eventfd_write(hs_stop_fd, 1);
	pthread_join(hs_th, NULL);
	pthread_mutex_lock(&hs_mu);
	atomic_store(&no_sleep, true);   /* front_drain's already, unless it was not called */
	while (hs_parked)
		hs_resume(hs_parked);
	pthread_mutex_unlock(&hs_mu);
	for (int i = 0; i < nloops; i++)
		while (loops[i].later)
			hs_turn(&loops[i]);
	close(hs_stop_fd);
	close(hs_ep);
	hs_ep = hs_stop_fd = -1;
}

/* libmicrohttpd closes a connection whose first line it cannot split into
 * method, target and version (GARBAGE, a TLS ClientHello's bytes), or,
 * under -tls, whose handshake fails (plain HTTP), without a word, before
 * any handler runs, and has no option to answer; nginx answers 400.  So,
 * as it closes (the socket is still open): a client that sent bytes, got
 * none back, and was not cut off for being slow is told, in the 400 nginx
 * would send.  Only on a connection's first request (a later one's bytes
 * cannot be told from the earlier requests'). */
static void answer_unparsed(struct conn *k)
{
	static const char plain[] = "not an HTTP request line\n",
			  tls[] = "The plain HTTP request was sent to HTTPS port\n";
	const char *body = opts.tls ? tls : plain;
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);
	char head[256], date[HTTP_DATE_LEN], drain[4096];
	int n;
	if (getsockopt(k->reap.fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) || tl < sizeof(ti) ||
	    !ti.tcpi_bytes_received || ti.tcpi_bytes_sent ||
	    (opts.idle_ms >= 1000 && now_ms() - k->reap.since_ms >= opts.idle_ms / 1000 * 1000))
		return;   /* silent, idle past libmicrohttpd's timeout, or answered */
	/* what is left unread would turn the close into a reset, which can
	 * destroy the answer before the client reads it */
	for (int i = 0; i < 16 && recv(k->reap.fd, drain, sizeof(drain), MSG_DONTWAIT) > 0; i++)
		;
	http_date(time(NULL), date);
	n = snprintf(head, sizeof(head), "HTTP/1.1 400 Bad Request\r\nDate: %s\r\nConnection: close\r\n"
		     "Content-Type: text/plain\r\nContent-Length: %zu\r\n\r\n%s", date,
		     strlen(body), body);
	if (sendto(k->reap.fd, head, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0) == n)
		shutdown(k->reap.fd, SHUT_WR);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct conn *k = *socket_context;
	(void)cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		int fd = front_fd(c);
		k = xcalloc(1, sizeof(*k));
		k->fl = this_loop;
		k->c = c;
		if (opts.opened)
			opts.opened(fd);
		reaper_add(&k->reap, fd);
		*socket_context = k;
		if (opts.tls)
			hs_watch(k, c, fd);
	} else if (k) {
		/* At the connection limit libmicrohttpd stops accepting, and
		 * takes the listening socket back only at the start of a run:
		 * run once more, for a client that waits to be let in. */
		if (this_loop)
			this_loop->kick = true;
		if (k->refused)
			atomic_fetch_sub(&refused_open, 1);
		reaper_remove(&k->reap);
		if (!k->served && !k->refused && !k->reap.cut)
			answer_unparsed(k);
		free(k->target);
		free(k);
		*socket_context = NULL;
	}
}

static void on_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	if (strstr(line, "handshake message out of context"))
		return;   /* a failed TLS handshake: the client's to report, as nginx's "info" */
	log_msg("libmicrohttpd: %s", line);
}

/* ---- TLS (-tls CERT,KEY) ----
 * libmicrohttpd asks tls_pick for the certificate at each handshake, so
 * SIGHUP swaps in a renewed one between two handshakes, none failing.
 * A session may point at the one it took until it ends: the old ones are
 * kept (a few KiB a reload) and freed at front_stop. */
#define TLS_CHAIN_MAX 8
struct tls_cert {
	gnutls_pcert_st pc[TLS_CHAIN_MAX];
	unsigned n;
	gnutls_privkey_t key;
	struct tls_cert *older;
};
static _Atomic(struct tls_cert *) tls_cur;

static void tls_free(struct tls_cert *t)
{
	for (unsigned i = 0; i < t->n; i++)
		gnutls_pcert_deinit(&t->pc[i]);
	if (t->key)
		gnutls_privkey_deinit(t->key);
	free(t);
}

/* spec "CERT,KEY" (PEM; CERT may hold the chain), or NULL (logged). */
static struct tls_cert *tls_load(const char *spec)
{
	struct tls_cert *t = xcalloc(1, sizeof(*t));
	char *cert = xstrdup(spec), *key = strchr(cert, ',');
	gnutls_certificate_credentials_t cr = NULL;
	gnutls_datum_t d = {0};
	unsigned n = TLS_CHAIN_MAX;
	int rc = GNUTLS_E_INVALID_REQUEST;
	if (key)
		*key++ = '\0';
	/* the credentials check that the key is the certificate's */
	if (!key || (rc = gnutls_certificate_allocate_credentials(&cr)) < 0 ||
	    (rc = gnutls_certificate_set_x509_key_file(cr, cert, key, GNUTLS_X509_FMT_PEM)) < 0 ||
	    (rc = gnutls_pcert_list_import_x509_file(t->pc, &n, cert, GNUTLS_X509_FMT_PEM, NULL,
						     NULL, 0)) < 0 ||
	    (t->n = n, rc = gnutls_load_file(key, &d)) < 0 ||
	    (rc = gnutls_privkey_init(&t->key)) < 0 ||
	    (rc = gnutls_privkey_import_x509_raw(t->key, &d, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
		log_msg("-tls %s: %s", spec, key ? gnutls_strerror(rc) : "give CERT,KEY");
		tls_free(t);
		t = NULL;
	}
	gnutls_free(d.data);
	if (cr)
		gnutls_certificate_free_credentials(cr);
	free(cert);
	return t;
}

static int tls_pick(gnutls_session_t s, const gnutls_datum_t *dn, int ndn,
		    const gnutls_pk_algorithm_t *pk, int npk, gnutls_pcert_st **pc,
		    unsigned *n, gnutls_privkey_t *key)
{
	struct tls_cert *t = atomic_load(&tls_cur);
	(void)s, (void)dn, (void)ndn, (void)pk, (void)npk;
	*pc = t->pc;
	*n = t->n;
	*key = t->key;
	return 0;
}

/* Load opts.tls's files: 0, or -1 (logged), the certificate in use staying.
 * The same chain again (a SIGHUP for the access log) keeps the one in use. */
static int tls_reload(void)
{
	struct tls_cert *t = tls_load(opts.tls), *cur = atomic_load(&tls_cur);
	bool same = t && cur && t->n == cur->n;
	for (unsigned i = 0; same && i < t->n; i++)
		same = t->pc[i].cert.size == cur->pc[i].cert.size &&
		       !memcmp(t->pc[i].cert.data, cur->pc[i].cert.data, t->pc[i].cert.size);
	if (!t && cur)
		log_msg("-tls: still serving the certificate loaded before");
	if (same)
		tls_free(t);
	else if (t)
		t->older = atomic_exchange(&tls_cur, t);
	return t ? 0 : -1;
}

static void tls_stop(void)
{
	for (struct tls_cert *t = atomic_exchange(&tls_cur, NULL), *o; t; t = o) {
		o = t->older;
		tls_free(t);
	}
}

/* ---- answers ---- */

static int queue(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh,
		 struct MHD_Response *resp, uint64_t len)
{
	enum MHD_Result ret;
	struct conn *k;
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Server", mkv_server);
	for (int i = 0; i < nh; i++)
		MHD_add_response_header(resp, h[i].name, h[i].value);
	if (atomic_load(&draining))
		MHD_add_response_header(resp, "Connection", "close");
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	if ((opts.metrics || opts.accesslog || opts.verbose) && (k = conn_of(c))) {
		k->status = status;   /* for the counters and the logs */
		k->down = len;
	}
	return ret;
}

int front_send(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh,
	       const char *body, size_t len)
{
	return queue(c, status, h, nh,
		     MHD_create_response_from_buffer(len, body ? (void *)body : "",
						     MHD_RESPMEM_MUST_COPY),
		     len);
}

int front_stream_ex(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh,
		    int64_t size, size_t block, ssize_t (*reader)(void *, uint64_t, char *, size_t),
		    void (*done)(void *), void *cls, bool http10)
{
	struct MHD_Response *r = MHD_create_response_from_callback(
		size >= 0 ? (uint64_t)size : MHD_SIZE_UNKNOWN, block, reader, cls, done);
	if (!r && done)
		done(cls);
	if (r && http10)
		MHD_set_response_options(r, MHD_RF_HTTP_VERSION_1_0_ONLY, MHD_RO_END);
	return queue(c, status, h, nh, r, size >= 0 ? (uint64_t)size : 0);
}

int front_stream(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh,
		 int64_t size, ssize_t (*reader)(void *, uint64_t, char *, size_t), void *cls)
{
	return front_stream_ex(c, status, h, nh, size, 256 * 1024, reader, NULL, cls, false);
}

/* Under -tls there is no sendfile, and libmicrohttpd reads an fd's
 * response 4 KiB at a time (a TLS record and a send each): read it in
 * blocks of FILE_BLOCK instead. */
#define FILE_BLOCK (64 * 1024)
struct file_part {
	int fd;
	uint64_t off;
};

static ssize_t file_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct file_part *f = cls;
	ssize_t n = pread(f->fd, buf, max, (off_t)(f->off + pos));
	return n > 0 ? n : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void file_close(void *cls)
{
	struct file_part *f = cls;
	close(f->fd);
	free(f);
}

int front_file(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh, int fd,
	       uint64_t off, uint64_t len)
{
	struct MHD_Response *r;
	if (opts.tls) {
		struct file_part *f = xmalloc(sizeof(*f));
		*f = (struct file_part){fd, off};
		if (!(r = MHD_create_response_from_callback(len, FILE_BLOCK, file_read, f, file_close)))
			free(f);
	} else {
		r = MHD_create_response_from_fd_at_offset64(len, fd, (int64_t)off);
	}
	return r ? queue(c, status, h, nh, r, len) : -1;
}

/* ---- sleeping connections ---- */

/* z's connection sleeps now (z->mu held, the sleep counted). */
static void suspend(struct front_sleep *z)
{
	struct conn *k = conn_of(z->conn);
	hold(k, false);
	if (k)
		k->slept = true;
	z->suspended = true;
	MHD_suspend_connection(z->conn);
}

void front_sleep_locked(struct front_sleep *z)
{
	atomic_fetch_add(&nsuspended, 1);
	if (atomic_load(&no_sleep)) {   /* the handler is called again instead */
		atomic_fetch_sub(&nsuspended, 1);
		return;
	}
	suspend(z);
}

void front_wake_locked(struct front_sleep *z)
{
	struct conn *k;
	z->woken = true;
	if (z->gone)
		return;
	k = conn_of(z->conn);
	hold(k, true);
	if (z->suspended) {
		struct front_loop *fl = k ? k->fl : NULL;   /* k may go once resumed */
		z->suspended = false;
		atomic_fetch_sub(&nsuspended, 1);
		MHD_resume_connection(z->conn);
		/* libmicrohttpd takes in a resume at the start of a run, and
		 * in external-epoll mode nothing tells its loop of one: the
		 * loop runs it once more (from another thread, a post). */
		if (fl && fl == this_loop)
			fl->kick = true;
		else if (fl)
			loop_post(fl->loop, mhd_fire, fl);
	}
}

void front_wake(void *arg)
{
	struct front_sleep *z = arg;
	pthread_mutex_lock(&z->mu);
	front_wake_locked(z);
	pthread_mutex_unlock(&z->mu);
}

/* One critical section: once the handler sees async_done it may free z. */
void front_finish(struct front_sleep *z)
{
	pthread_mutex_lock(&z->mu);
	z->async_done = true;
	front_wake_locked(z);
	pthread_mutex_unlock(&z->mu);
}

bool front_wait(struct front_sleep *z)
{
	bool done;
	pthread_mutex_lock(&z->mu);
	done = z->async_done;
	if (!done && !z->woken)
		front_sleep_locked(z);
	z->woken = false;
	pthread_mutex_unlock(&z->mu);
	return done;
}

/* fn(arg) on a pool thread, or item to q, or (neither) the caller's work. */
static int run_asleep(struct front_sleep *z, struct spawn_queue *q, void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&z->mu);   /* the work's front_finish waits for the suspend */
	/* Once the work runs the connection must stay suspended until it is
	 * done (it uses the request; a stop that closed the connection would
	 * free it): counted before no_sleep is read, so front_drain either
	 * sees it or it is refused here. */
	atomic_fetch_add(&nsuspended, 1);
	if (atomic_load(&no_sleep)) {
		atomic_fetch_sub(&nsuspended, 1);
		pthread_mutex_unlock(&z->mu);
		return -1;
	}
	if (q) {
		spawn_queue_push(q, arg);
	} else if (fn && spawn(fn, arg) < 0) {
		atomic_fetch_sub(&nsuspended, 1);
		pthread_mutex_unlock(&z->mu);
		log_msg("pthread_create failed: out of threads");
		return -1;
	}
	z->async_started = true;
	suspend(z);
	pthread_mutex_unlock(&z->mu);
	return 0;
}

int front_begin(struct front_sleep *z)
{
	return run_asleep(z, NULL, NULL, NULL);
}

int front_spawn(struct front_sleep *z, void (*fn)(void *), void *arg)
{
	return run_asleep(z, NULL, fn, arg);
}

int front_queue(struct front_sleep *z, struct spawn_queue *q, void *item)
{
	return run_asleep(z, q, NULL, item);
}

/* ---- the metrics listener ---- */

static enum MHD_Result admin_handler(void *cls, struct MHD_Connection *c, const char *url,
				     const char *method, const char *version, const char *data,
				     size_t *size, void **con_cls)
{
	static const struct front_page metrics = {"/metrics", METRICS_CTYPE, metrics_render};
	const struct front_page *p = !strcmp(url, "/metrics") ? &metrics : NULL;
	struct front_hdr h[2] = {{"Content-Type", "text/plain"}, {"Allow", "GET, HEAD"}};
	struct buf b = {0};
	int status = 200, ret;
	(void)cls, (void)version, (void)data, (void)size, (void)con_cls;
	for (const struct front_page *q = opts.pages; !p && q && q->path; q++)
		if (!strcmp(url, q->path))
			p = q;
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		status = 405;
		buf_puts(&b, "only GET and HEAD\n");
	} else if (!p) {
		status = 404;
		buf_puts(&b, "not found: /metrics, /status and / are served here\n");
	} else {
		p->render(&b);
		h[0].value = p->ctype;
	}
	ret = front_send(c, status, h, status == 405 ? 2 : 1, b.data, b.len);
	buf_free(&b);
	return (enum MHD_Result)ret;
}

/* The listener on addr ("HOST:PORT", "[V6]:PORT", ":PORT" for every
 * address); -1 (logged: libmicrohttpd names the bind's failure). */
static int admin_start(const char *addr)
{
	struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
				 .ai_socktype = SOCK_STREAM}, *ai = NULL;
	const char *colon = strrchr(addr, ':');
	char host[256];
	size_t hl = colon ? (size_t)(colon - addr) : 0;
	uint64_t port;
	int rc;
	if (!colon || !parse_u64(colon + 1, 1, 65535, &port) || hl >= sizeof(host)) {
		log_msg("-metrics %s: give HOST:PORT (or :PORT for every address)", addr);
		return -1;
	}
	if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)hl - 2, addr + 1);
	else
		snprintf(host, sizeof(host), "%.*s", (int)hl, addr);
	rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &ai);
	if (rc) {
		log_msg("-metrics %s: %s", addr, gai_strerror(rc));
		return -1;
	}
	metrics_register(reqstats_collect);
	/* epoll: the master's descriptors go past select's 1024 */
	admin = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
					 (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				 (uint16_t)port, NULL, NULL, admin_handler, NULL,
				 MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL,
				 MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				 MHD_OPTION_CONNECTION_LIMIT, 64u,
				 MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!admin) {
		log_msg("-metrics %s: cannot listen there", addr);
		return -1;
	}
	return 0;
}

void front_reload(void)
{
	accesslog_reopen();
	if (opts.tls && tls_reload() == 0)
		log_msg("-tls %s: loaded", opts.tls);
}

/* ---- start and stop ---- */

unsigned front_nofile(unsigned conns, unsigned per)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)conns * per + 256;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return conns;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur >= want)
		return conns;
	return rl.rlim_cur > 256 + 128 * (rlim_t)per ? (unsigned)((rl.rlim_cur - 256) / per) : 128;
}

/* ---- the loops ---- */

static void mhd_events(void *arg, uint32_t events)
{
	(void)events;
	MHD_run(((struct front_loop *)arg)->d);
}

static void mhd_fire(void *arg)
{
	MHD_run(((struct front_loop *)arg)->d);
}

/* Before each sleep: when libmicrohttpd wants to run next (at once when
 * it holds data already read, or a connection times out). */
static void mhd_before(void *arg)
{
	struct front_loop *fl = arg;
	MHD_UNSIGNED_LONG_LONG ms;
	hs_turn(fl);
	if (fl->kick)
		ms = 0;
	else if (MHD_get_timeout(fl->d, &ms) == MHD_NO) {
		fl->t.at = 0;
		return;
	}
	fl->kick = false;
	fl->t.at = now_ms() + ms;
}

static void *loop_main(void *arg)
{
	struct front_loop *fl = arg;
	this_loop = fl;
	loop_run(fl->loop);
	httpc_thread_cleanup();   /* the loop's transfers' handles */
	return NULL;
}

/* On fl's thread: stop accepting (the socket stays open for the others). */
static void quiesce(void *arg)
{
	struct front_loop *fl = arg;
	if (!fl->quiesced)
		MHD_quiesce_daemon(fl->d);
	fl->quiesced = true;
}

static void quiesce_all(void)
{
	if (pool) {
		MHD_socket fd = MHD_quiesce_daemon(pool);
		if (fd != MHD_INVALID_SOCKET)
			close(fd);
	}
	for (int i = 0; i < nloops; i++)
		loop_call(loops[i].loop, quiesce, &loops[i]);
	if (listen_fd >= 0)
		close(listen_fd);
	listen_fd = -1;
}

static void loops_free(void)
{
	for (int i = 0; i < nloops; i++) {
		loop_free(loops[i].loop);   /* runs what was posted to it */
		if (loops[i].d) {
			quiesce(&loops[i]);   /* the socket is closed once, by us */
			MHD_stop_daemon(loops[i].d);
		}
	}
	free(loops);
	loops = NULL;
	nloops = 0;
}

/* A daemon of the front on opts.port, at most limit connections, the
 * options more besides the ones all take. */
static struct MHD_Daemon *daemon_start(unsigned flags, unsigned limit,
				       const struct MHD_OptionItem *more)
{
	struct MHD_OptionItem o[] = {
		{MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_log, NULL},
		{MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, NULL},
		{MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)no_unescape, NULL},
		{MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_done, NULL},
		{MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, NULL},
		{MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)(opts.idle_ms / 1000), NULL},
		{MHD_OPTION_CONNECTION_LIMIT, limit, NULL},
		{MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)opts.conn_memory, NULL},
		{MHD_OPTION_ARRAY, 0, (void *)more},
		{opts.tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, 0, (void *)tls_pick},
		{MHD_OPTION_END, 0, NULL}};
	return MHD_start_daemon(flags | MHD_USE_TURBO | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
					MHD_USE_ERROR_LOG | (opts.tls ? MHD_USE_TLS : 0),
				(uint16_t)opts.port, NULL, NULL, handler, NULL, MHD_OPTION_ARRAY, o,
				MHD_OPTION_END);
}

/* Start n loops, each with its daemon: the first binds the port (as
 * libmicrohttpd binds it: IPv4, every address, SO_REUSEADDR), the others
 * take its socket.  0 or -1. */
static int loops_start(const struct front_opts *o, int n)
{
	unsigned limit = (o->max_conns + (unsigned)n - 1) / (unsigned)n;
	loops = xcalloc((size_t)n, sizeof(*loops));
	for (nloops = 0; nloops < n; nloops++) {
		struct front_loop *fl = &loops[nloops];
		const union MHD_DaemonInfo *di;
		struct MHD_OptionItem listen[] = {
			listen_fd < 0 ? (struct MHD_OptionItem){MHD_OPTION_LISTEN_BACKLOG_SIZE,
								 o->backlog ? o->backlog : SOMAXCONN, NULL}
				      : (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, listen_fd, NULL},
			{MHD_OPTION_END, 0, NULL}};
		fl->loop = loop_new();
		fl->d = daemon_start(MHD_USE_EPOLL, limit ? limit : 1u, listen);
		di = fl->d ? MHD_get_daemon_info(fl->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
		if (!di) {
			nloops++;
			return -1;
		}
		if (listen_fd < 0) {
			di = MHD_get_daemon_info(fl->d, MHD_DAEMON_INFO_LISTEN_FD);
			listen_fd = di ? di->listen_fd : -1;
			di = MHD_get_daemon_info(fl->d, MHD_DAEMON_INFO_EPOLL_FD);
		}
		fl->w = (struct loop_fd){.fn = mhd_events, .arg = fl};
		fl->t = (struct loop_timer){0, mhd_fire, fl};
		loop_watch(fl->loop, di->epoll_fd, EPOLLIN, &fl->w);
		loop_timer_add(fl->loop, &fl->t);
		loop_before(fl->loop, mhd_before, fl);
	}
	for (int i = 0; i < n; i++)
		if (pthread_create(&loops[i].th, NULL, loop_main, &loops[i]))
			die("pthread_create failed: out of threads");
	return 0;
}

/* Undo what front_start made (no loop thread running). */
static void teardown(void)
{
	hs_stop();
	loops_free();
	if (pool)
		MHD_stop_daemon(pool);
	pool = NULL;
	if (listen_fd >= 0)
		close(listen_fd);
	listen_fd = -1;
	reaper_stop();   /* after: the daemons' last closes leave its ring */
	if (admin)
		MHD_stop_daemon(admin);
	admin = NULL;
	accesslog_close();
	tls_stop();
}

int front_start(const struct front_opts *o)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (loops || pool)
		return -1;
	opts = *o;
	atomic_store(&draining, false);
	atomic_store(&refusing, false);
	atomic_store(&no_sleep, false);
	reqstats_init(&inflight);
	if (o->tls && (tls_reload() < 0 || hs_start() < 0))
		return -1;
	if ((o->accesslog && accesslog_open(o->accesslog) < 0) ||
	    (o->metrics && admin_start(o->metrics) < 0)) {
		teardown();
		return -1;
	}
	reaper_start(o->idle_ms);
	listen_fd = -1;
	if (o->threads) {
		struct MHD_OptionItem more[] = {
			{MHD_OPTION_THREAD_POOL_SIZE, ncpu > 2 ? ncpu : 2, NULL},
			{MHD_OPTION_LISTEN_BACKLOG_SIZE, o->backlog ? o->backlog : SOMAXCONN, NULL},
			{MHD_OPTION_END, 0, NULL}};
		pool = daemon_start(MHD_USE_EPOLL_INTERNAL_THREAD, o->max_conns, more);
	}
	if (o->threads ? !pool : loops_start(o, ncpu > 2 ? (int)ncpu : 2) < 0) {
		log_msg("cannot listen on port %d", o->port);
		teardown();
		return -1;
	}
	sd_notify(0, "READY=1");
	return 0;
}

int front_drain(uint64_t drain_ms)
{
	uint64_t deadline = now_ms() + drain_ms;
	sd_notify(0, "STOPPING=1");
	if (!drain_ms)
		goto no_sleep;
	quiesce_all();
	atomic_store(&draining, true);
	while (atomic_load(&inflight) > 0 && now_ms() < deadline)
		usleep(10000);
	atomic_store(&refusing, true);
	while (atomic_load(&inflight) > 0 && now_ms() < deadline)
		usleep(10000);
no_sleep:
	atomic_store(&no_sleep, true);
	return atomic_load(&nsuspended);
}

void front_stop(void)
{
	for (uint64_t end = now_ms() + 2000; atomic_load(&refused_open) > 0 && now_ms() < end;)
		usleep(10000);
	quiesce_all();
	/* The loops end once their transfers have; then the daemons close
	 * what connections are left, from here. */
	for (int i = 0; i < nloops; i++)
		loop_stop(loops[i].loop);
	for (int i = 0; i < nloops; i++)
		pthread_join(loops[i].th, NULL);
	teardown();
}

const char *front_version(void)
{
	return MHD_get_version();
}
