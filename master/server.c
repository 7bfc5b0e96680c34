/* server.c -- the master's HTTP front on libmicrohttpd (the only file of
 * the master that includes microhttpd.h).
 *
 * GET/HEAD of a key is answered on the poll thread that read it: one index
 * read, no volume traffic (health.c knows which volumes are up).  Anything
 * that waits on a volume or fsyncs the index runs elsewhere while the
 * connection is suspended: PUT on its put's worker (put.c), the rest on a
 * thread of its own.  Responses are queued on the handler's second call or
 * later, never the first: libmicrohttpd answers a response queued on the
 * first call with "Connection: close", which costs keep-alive. */
#include "handlers.h"
#include "health.h"
#include "store.h"
#include "mkv.h"
#include "move.h"
#include "put.h"
#include "front.h"
#include "../common/spawn.h"
#include "../common/httpc.h"
#include "../common/placement.h"
#include "../common/reaper.h"
#include "../common/record.h"
#include "../common/util.h"

#include <malloc.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define ALLOW "GET, HEAD, PUT, DELETE, UNLINK, REBALANCE, RELINK, REPLACE"

enum op { OP_GET, OP_HEAD, OP_PUT, OP_DELETE, OP_UNLINK, OP_REBALANCE, OP_RELINK, OP_OTHER };

struct req {
	struct front_sleep sl;   /* its connection, and its sleep while a worker runs */
	struct reaper_conn *sock; /* its connection's entry */
	char *uri;               /* raw, with the query */
	char *query;             /* into uri, after '?', or NULL */
	enum op op;
	int calls;
	uint64_t start_ms, bytes;
	char key[KEY_MAX * 3 + 8];
	size_t klen;
	int key_status;          /* 0, or 400/414 from key_decode */
	const char *key_why;
	bool locked;             /* holds key's keylock */
	bool replace;            /* REPLACE: a PUT that may overwrite */
	const struct front_route *route; /* a layer that took the request (S3) */
	void *route_req;         /* its state */

	struct answer ans;
	bool answered;           /* ans is ready to send */

	struct put *put;
	bool put_finished;
	bool too_big;            /* the body went past -maxsize */
	char (*locs)[LOC_MAX];   /* where a PUT writes (heap, PUT only) */
	int nlocs;
};

static const struct config *cfg;
static struct index *idx;
static atomic_int inflight;
/* Stopping (stop_daemon): draining, every answer closes its connection;
 * refusing, a new request's connection is closed unanswered; no_sleep, a
 * request no longer suspends, so that libmicrohttpd can be stopped (it
 * aborts the process if a connection is suspended then). */
static atomic_bool draining, refusing, no_sleep;
static atomic_int nsuspended;

/* The layers that answer some requests themselves (front_route_add). */
static const struct front_route *routes[4];
static int nroutes;

void front_route_add(const struct front_route *r)
{
	if (nroutes < (int)(sizeof(routes) / sizeof(routes[0])))
		routes[nroutes++] = r;
}

/* Cuts off a connection whose request head takes over -idletimeout. */
static struct reaper *reaper;

/* ---- the front: answers, headers, suspension (s3.h) ---- */

static enum MHD_Result queue(struct MHD_Connection *c, int status, const struct front_hdr *h,
			     int nh, struct MHD_Response *resp)
{
	enum MHD_Result ret;
	if (!resp)
		return MHD_NO;
	for (int i = 0; i < nh; i++)
		MHD_add_response_header(resp, h[i].name, h[i].value);
	if (atomic_load(&draining))
		MHD_add_response_header(resp, "Connection", "close");
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

int front_send(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh,
	       const char *body, size_t len)
{
	return queue(c, status, h, nh,
		     MHD_create_response_from_buffer(len, body ? (void *)body : "", MHD_RESPMEM_MUST_COPY));
}

int front_stream(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh,
		 int64_t size, ssize_t (*reader)(void *, uint64_t, char *, size_t), void *cls)
{
	return queue(c, status, h, nh,
		     MHD_create_response_from_callback(size >= 0 ? (uint64_t)size : MHD_SIZE_UNKNOWN,
						       256 * 1024, reader, cls, NULL));
}

const char *front_header(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

void front_sleep_locked(struct front_sleep *z)
{
	atomic_fetch_add(&nsuspended, 1);
	if (atomic_load(&no_sleep)) {   /* the handler is called again instead */
		atomic_fetch_sub(&nsuspended, 1);
		return;
	}
	z->suspended = true;
	MHD_suspend_connection(z->conn);
}

void front_wake_locked(struct front_sleep *z)
{
	z->woken = true;
	if (z->suspended && !z->gone) {
		z->suspended = false;
		atomic_fetch_sub(&nsuspended, 1);
		MHD_resume_connection(z->conn);
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

int front_spawn(struct front_sleep *z, void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&z->mu);   /* fn's front_finish waits for the suspend */
	/* Once fn runs the connection must stay suspended until it is done
	 * (fn uses the request; a stop that closed the connection would free
	 * it): counted before no_sleep is read, so stop_daemon either sees it
	 * or it is refused here. */
	atomic_fetch_add(&nsuspended, 1);
	if (atomic_load(&no_sleep)) {
		atomic_fetch_sub(&nsuspended, 1);
		pthread_mutex_unlock(&z->mu);
		return -1;
	}
	if (spawn(fn, arg) < 0) {
		atomic_fetch_sub(&nsuspended, 1);
		pthread_mutex_unlock(&z->mu);
		log_msg("pthread_create failed: out of threads");
		return -1;
	}
	z->async_started = true;
	z->suspended = true;
	MHD_suspend_connection(z->conn);
	pthread_mutex_unlock(&z->mu);
	return 0;
}

void front_put_done(struct put *p)
{
	int st;
	const char *w;
	if (!put_result(p, &st, &w))
		put_abort(p); /* the client went away mid-body */
	put_release(p);
}

_Static_assert(FRONT_YES == MHD_YES && FRONT_NO == MHD_NO, "results");
_Static_assert(FRONT_READER_END == MHD_CONTENT_READER_END_OF_STREAM &&
	       FRONT_READER_ERROR == MHD_CONTENT_READER_END_WITH_ERROR, "reader ends");

/* ---- native answers ---- */

static enum MHD_Result send_answer(struct req *r)
{
	struct answer *a = &r->ans;
	struct front_hdr h[6];
	int nh = 0;
	if (r->op == OP_HEAD && a->status >= 300)
		a->body.len = 0;   /* as minikeyvalue: a HEAD error says Content-Length: 0 */
	if (a->location[0])
		h[nh++] = (struct front_hdr){"Location", a->location};
	if (a->md5[0])
		h[nh++] = (struct front_hdr){"Content-Md5", a->md5};
	if (a->volumes)
		h[nh++] = (struct front_hdr){"Key-Volumes", a->volumes};
	if (a->balance)
		h[nh++] = (struct front_hdr){"Key-Balance", a->balance};
	if (a->body.len || a->stream)
		h[nh++] = (struct front_hdr){"Content-Type",
					     a->ctype ? a->ctype : "text/plain; charset=utf-8"};
	if (a->status == 405)
		h[nh++] = (struct front_hdr){"Allow", ALLOW};
	r->answered = true;
	if (a->stream)   /* a long listing */
		return (enum MHD_Result)front_stream(r->sl.conn, a->status, h, nh, a->stream_len,
						     answer_read, a);
	return (enum MHD_Result)front_send(r->sl.conn, a->status, h, nh, a->body.data, a->body.len);
}

static void unlock_key(struct req *r)
{
	if (r->locked)
		keylock_release(r->key, r->klen);
	r->locked = false;
}

/* An error ends the request's write, if it took the key's lock: the key is
 * freed before the client hears back, so its next request finds it free. */
static enum MHD_Result send_error(struct req *r, int status, const char *why)
{
	unlock_key(r);
	answer_error(&r->ans, status, why);
	return send_answer(r);
}

/* ---- work done off the poll threads ---- */

static void run_op(struct req *r)
{
	const char *why = NULL;
	bool moved = false;
	int st;
	switch (r->op) {
	case OP_GET:
	case OP_HEAD:
		if (r->query)
			handle_list(idx, r->key, r->klen, r->query, r->op == OP_HEAD, &r->ans);
		else
			handle_get(cfg, idx, r->key, r->klen, r->uri, &r->ans);
		break;
	case OP_DELETE:
	case OP_UNLINK:
		handle_delete(cfg, idx, r->key, r->klen,
			      r->query ? DEL_UNLINKED : r->op == OP_UNLINK ? DEL_UNLINK : DEL_DELETE,
			      &r->ans);
		break;
	case OP_RELINK:
		handle_relink(cfg, idx, r->key, r->klen, &r->ans);
		break;
	case OP_REBALANCE:
		/* ?unlinked: move an unlinked key's blob too (online rebalance) */
		st = move_key(cfg, idx, r->key, r->klen, r->query ? MOVE_UNLINKED : 0,
				   &moved, &why);
		if (st == 204) {
			r->ans.status = 204;
			/* what this request did: nothing (already home), or a move */
			r->ans.balance = moved ? "rebalanced" : "balanced";
		} else
			answer_error(&r->ans, st, why ? why : "rebalance failed");
		break;
	default:
		break;
	}
}

static void async_main(void *arg)
{
	struct req *r = arg;
	run_op(r);
	unlock_key(r);          /* free the key before the client hears back */
	front_finish(&r->sl);
}

static enum MHD_Result run_async(struct req *r)
{
	if (r->sl.async_started)
		return front_wait(&r->sl) ? send_answer(r) : MHD_YES;
	if (front_spawn(&r->sl, async_main, r) < 0)
		return send_error(r, 503, "server busy: no thread for this request");
	return MHD_YES;
}

/* ---- PUT ---- */

/* First call: everything that can be refused before reading the body. */
static enum MHD_Result put_begin(struct req *r)
{
	const char *cl = front_header(r->sl.conn, "Content-Length");
	const char *te = front_header(r->sl.conn, "Transfer-Encoding");
	const char *why;
	uint64_t clen;
	size_t vlen;
	char *v;

	if (r->query)
		return send_error(r, 400, "PUT takes no query string");
	if (r->key_status)
		return send_error(r, r->key_status, r->key_why);
	if ((!cl && !te) || (cl && !strcmp(cl, "0")))
		return send_error(r, 411, "PUT needs a non-empty body");
	if (cl && cfg->maxsize && !(parse_u64(cl, 0, UINT64_MAX, &clen) && clen <= cfg->maxsize))
		return send_error(r, 413, "value larger than -maxsize");
	if (!keylock_try(r->key, r->klen))
		return send_error(r, 409, "another write of this key is in progress");
	r->locked = true;
	v = index_get(idx, r->key, r->klen, &vlen);
	if (v) {
		bool live = !record_deleted(v, vlen);
		free(v);
		if (live && !r->replace)
			return send_error(r, 403, "key exists: DELETE it first");
	}
	r->locs = xmalloc(sizeof(*r->locs) * RECORD_MAX_LOCS);
	r->nlocs = store_locations(cfg, r->key, r->klen, r->locs, &why);
	if (r->nlocs < 0)
		return send_error(r, 503, why);
	return MHD_YES;
}

static enum MHD_Result put_body(struct req *r, const char *data, size_t *size)
{
	int st;
	const char *why;

	if (*size && !r->put) {
		char *lp[RECORD_MAX_LOCS];
		const char *cl = front_header(r->sl.conn, "Content-Length");
		uint64_t clen = 0;
		for (int i = 0; i < r->nlocs; i++)
			lp[i] = r->locs[i];
		int64_t len = cl && parse_u64(cl, 0, INT64_MAX, &clen) ? (int64_t)clen : -1;
		r->put = r->replace ? put_start_replace(cfg, idx, r->key, r->klen, lp, r->nlocs, len,
							front_wake, &r->sl, 0)
				    : put_start(cfg, idx, r->key, r->klen, lp, r->nlocs, len, front_wake, &r->sl);
		r->locked = false; /* the put owns the key's lock now */
	}
	if (*size && cfg->maxsize && r->bytes + *size > cfg->maxsize) {
		if (!r->too_big)          /* chunked past -maxsize: drop what was written */
			put_abort(r->put);
		r->too_big = true;
		*size = 0;
		return MHD_YES;
	}
	if (*size) {
		size_t took = put_feed(r->put, data, *size);
		r->bytes += took;
		*size -= took;
		/* A failed put swallows the rest of the body (put_feed takes it
		 * all), and the answer waits for its end: answering mid-body and
		 * closing with unread bytes makes the kernel reset the connection,
		 * which can destroy the answer before the client reads it. */
		if (*size)
			front_wait(&r->sl);
		return MHD_YES;
	}
	if (!r->put)
		return send_error(r, 411, "PUT needs a non-empty body");
	if (r->too_big)
		return send_error(r, 413, "value larger than -maxsize");
	if (!r->put_finished) {
		put_finish(r->put);
		r->put_finished = true;
	}
	if (put_result(r->put, &st, &why)) {
		if (st == 201) {
			r->ans.status = 201;
			return send_answer(r);
		}
		return send_error(r, st, why);
	}
	front_wait(&r->sl);
	return MHD_YES;
}

/* ---- the handler ---- */

static const char *const op_names[] = {"GET", "HEAD", "PUT", "DELETE", "UNLINK", "REBALANCE",
				       "RELINK", "OTHER"};

/* Decode the key once, at the first call. */
static void req_parse(struct req *r, const char *method)
{
	size_t plen;
	r->op = OP_GET;
	while (r->op < OP_OTHER && strcmp(method, op_names[r->op]))
		r->op++;
	if (!strcmp(method, "REPLACE")) {
		r->op = OP_PUT;
		r->replace = true;
	}
	/* The absolute form (RFC 9112 §3.2.2, what a client sends through a
	 * proxy) names the same key as its path, as Go's server reads it. */
	if (!strncasecmp(r->uri, "http://", 7) || !strncasecmp(r->uri, "https://", 8)) {
		char *a = strstr(r->uri, "://") + 3, *p = a + strcspn(a, "/?"), *n;
		n = xasprintf("%s%s", *p == '/' ? "" : "/", p);
		free(r->uri);
		r->uri = n;
	}
	r->query = strchr(r->uri, '?');
	if (r->query)
		*r->query++ = '\0';
	plen = strlen(r->uri);
	if (plen > KEY_MAX * 3) {
		r->key_status = 414;
		r->key_why = "key longer than 189 bytes";
		return;
	}
	r->key_status = key_decode(r->uri, plen, r->key, &r->klen, &r->key_why);
}

/* Counts the Content-Length headers that disagree with the first. */
static enum MHD_Result count_cl(void *cls, enum MHD_ValueKind kind, const char *key,
				const char *value)
{
	const char **first = cls;
	(void)kind;
	if (strcasecmp(key, "Content-Length"))
		return MHD_YES;
	if (!first[0])
		first[0] = value;
	else if (strcmp(first[0], value))
		first[1] = value;
	return MHD_YES;
}

/* The first call: the request's head is in. */
static enum MHD_Result req_begin(struct req *r, struct MHD_Connection *conn, const char *method)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	const char *te = front_header(conn, "Transfer-Encoding"), *cl[2] = {NULL, NULL};
	r->sl.conn = conn;
	r->sock = ci ? ci->socket_context : NULL;
	reaper_waiting(r->sock, false);
	req_parse(r, method);
	/* libmicrohttpd would read any other coding's body up to the close,
	 * leaving the client waiting: refuse it, as nginx and Go do. */
	if (te && strcasecmp(te, "chunked"))
		return send_error(r, 400, "unsupported Transfer-Encoding: only chunked");
	if (front_header(conn, "Content-Length"))   /* a GET has none: no header walk */
		MHD_get_connection_values(conn, MHD_HEADER_KIND, count_cl, cl);
	if (cl[1])
		return send_error(r, 400, "Content-Length headers disagree");
	if (r->uri[0] != '/')
		return send_error(r, 400, "the request target must be a path starting with /");
	for (int i = 0; i < nroutes; i++) {
		r->route_req = routes[i]->claim(conn, method, r->uri, r->query);
		if (r->route_req) {
			r->route = routes[i];
			return MHD_YES;
		}
	}
	return r->op == OP_PUT ? put_begin(r) : MHD_YES;
}

/* ?list and ?unlinked take any prefix, "/" included. */
static enum MHD_Result list(struct req *r)
{
	if (!is_list_query(r->query))
		return send_error(r, 403, "unknown query: only ?list and ?unlinked");
	if (r->sl.async_started)
		return run_async(r);
	if (r->key_status == 414)
		return send_error(r, 414, r->key_why);
	if (path_decode(r->uri, strlen(r->uri), r->key, &r->klen) < 0)
		return send_error(r, 400, "invalid percent-encoding or NUL in prefix");
	return run_async(r);
}

/* Every method but PUT, once its body (ignored) is in. */
static enum MHD_Result req_answer(struct req *r)
{
	if (r->op == OP_OTHER)
		return send_error(r, 405, "method not allowed");
	if (r->op == OP_GET || r->op == OP_HEAD) {
		if (r->query)
			return list(r);
		if (r->key_status)
			return send_error(r, r->key_status, r->key_why);
		if (cfg->headcheck)
			return run_async(r);
		handle_get(cfg, idx, r->key, r->klen, r->uri, &r->ans);
		return send_answer(r);
	}
	/* DELETE, UNLINK, REBALANCE, RELINK: under the key's lock */
	if (r->sl.async_started)
		return run_async(r);
	if (r->query && !((r->op == OP_REBALANCE || r->op == OP_DELETE) &&
			  !strcmp(r->query, "unlinked")))
		return send_error(r, 400, "this method takes no query string");
	if (r->key_status)
		return send_error(r, r->key_status, r->key_why);
	if (!keylock_try(r->key, r->klen))
		return send_error(r, 409, "another write of this key is in progress");
	r->locked = true;
	return run_async(r);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
			       const char *method, const char *version, const char *data,
			       size_t *size, void **con_cls)
{
	struct req *r = *con_cls;
	(void)cls, (void)url, (void)version;

	if (!r)                      /* refused in on_uri */
		return MHD_NO;
	if (r->calls++ == 0)
		return req_begin(r, conn, method);
	if (r->route)
		return (enum MHD_Result)r->route->handler(r->route_req, data, size);
	if (r->op == OP_PUT && !r->answered)
		return put_body(r, data, size);
	if (*size || r->answered) {  /* answered early, or a body that is ignored */
		*size = 0;
		return MHD_YES;
	}
	return req_answer(r);
}

static int conn_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct req *r;
	(void)cls;
	/* Counted before refusing is read: stop_daemon sets refusing, then
	 * waits for inflight to reach 0, and misses no request. */
	atomic_fetch_add(&inflight, 1);
	if (atomic_load(&refusing) || uri_has_too_many_args(uri)) {
		atomic_fetch_sub(&inflight, 1);
		shutdown(conn_fd(conn), SHUT_RDWR);
		return NULL;
	}
	r = xcalloc(1, sizeof(*r));
	r->uri = xstrdup(uri);
	r->start_ms = now_ms();
	pthread_mutex_init(&r->sl.mu, NULL);
	return r;
}

/* Keep the path raw: key_decode does the one percent-decoding. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls, (void)c;
	return strlen(s);
}

static void on_done(void *cls, struct MHD_Connection *conn, void **con_cls,
		    enum MHD_RequestTerminationCode why)
{
	struct req *r = *con_cls;
	(void)cls, (void)conn;
	if (!r)
		return;
	if (r->route)
		r->ans.status = r->route->status(r->route_req);
	if (cfg->verbose)
		log_msg("%s %s%s%s %d %llu %llums%s", op_names[r->op], r->uri, r->query ? "?" : "",
			r->query ? r->query : "", r->ans.status,
			(unsigned long long)(r->op == OP_PUT ? r->bytes : r->ans.body.len),
			(unsigned long long)(now_ms() - r->start_ms),
			why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection lost)");
	if (r->route)
		r->route->done(r->route_req);
	if (r->put)
		front_put_done(r->put);
	unlock_key(r);
	reaper_waiting(r->sock, true);
	if (why == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		conn_close_if_eof(conn_fd(conn));
	/* front_wake may still be between MHD_resume_connection and its unlock. */
	pthread_mutex_lock(&r->sl.mu);
	pthread_mutex_unlock(&r->sl.mu);
	answer_free(&r->ans);
	free(r->locs);
	pthread_mutex_destroy(&r->sl.mu);
	free(r->uri);
	free(r);
	*con_cls = NULL;
	atomic_fetch_sub(&inflight, 1);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	(void)cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		*socket_context = reaper_add(reaper, conn_fd(c));
	} else {
		reaper_remove(reaper, *socket_context);
		*socket_context = NULL;
	}
}

/* ---- start and stop ---- */

/* Room for -maxconns clients plus volumes and the index. */
static void raise_nofile(rlim_t want)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur < want)
		log_msg("open file limit is %llu: fewer than -maxconns clients can connect",
			(unsigned long long)rl.rlim_cur);
}

static struct MHD_Daemon *start_daemon(void)
{
	unsigned threads = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	return MHD_start_daemon(
		MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_TURBO | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC,
		(uint16_t)cfg->port, NULL, NULL, handler, NULL,
		MHD_OPTION_THREAD_POOL_SIZE, threads < 2 ? 2u : threads,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
		MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
		MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(cfg->idletimeout_ms / 1000),
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->maxconns,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16 * 1024,
		MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
		MHD_OPTION_END);
}

/* Stop accepting, let what is in flight finish (bounded), then close.
 * A kept-alive connection may carry one more request, answered with
 * "Connection: close"; once none runs, any later one is refused. */
static void stop_daemon(struct MHD_Daemon *d)
{
	MHD_socket fd = MHD_quiesce_daemon(d);
	uint64_t deadline = now_ms() + 10000;
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	atomic_store(&draining, true);
	while (atomic_load(&inflight) > 0 && now_ms() < deadline)
		usleep(10000);
	atomic_store(&refusing, true);
	while (atomic_load(&inflight) > 0 && now_ms() < deadline)
		usleep(10000);
	atomic_store(&no_sleep, true);
	if (atomic_load(&nsuspended) > 0) {
		/* Requests waiting on volumes for 10 s: libmicrohttpd cannot
		 * stop under them.  Their writes' records stay DELETED. */
		log_msg("stopping with %d requests unfinished after 10 s (waiting on volumes); "
			"their writes' records stay DELETED", atomic_load(&nsuspended));
		_exit(1);
	}
	MHD_stop_daemon(d);
	reaper_stop(reaper);   /* after: the daemon's last closes leave its ring */
	move_drain(5000); /* old copies waiting out REBALANCE's grace period */
	/* Writers cut off by the stop are still cleaning up, on the index. */
	while (spawn_busy() > 0 && now_ms() < deadline + 10000)
		usleep(10000);
	if (spawn_busy() > 0) {
		log_msg("stopping with %d writes unfinished; their records stay DELETED",
			spawn_busy());
		_exit(1);
	}
	/* ...which may have queued deletes that read the index: before it closes. */
	move_drain(5000);
}

int server_main(const struct config *c)
{
	struct MHD_Daemon *d;
	sigset_t set;
	int sig;
	char *why = NULL;

	cfg = c;
	/* Rings and buffers of a MiB or more (a PUT's ring; S3 uploads run
	 * ten at once) go back to the kernel when freed: glibc's adaptive
	 * threshold would keep them in per-thread arenas, and the master's
	 * resident size would grow with how many ran at once, not how many
	 * run now. */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	raise_nofile((rlim_t)cfg->maxconns + 256);
	idx = index_open(cfg->db, &why);
	if (!idx) {
		log_msg("%s", why);
		free(why);
		return 1;
	}
	if (meta_open(cfg->db) < 0) {
		index_close(idx);
		return 1;
	}
	httpc_global_init();
	put_sweep_replaces(cfg, idx);
	store_init(cfg, idx);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* every thread inherits this */
	health_start(cfg);
	reaper = reaper_start(cfg->idletimeout_ms);
	d = start_daemon();
	if (d) {
		if (cfg->verbose)
			log_msg("listening on port %d, %d volumes, replicas %d, subvolumes %d",
				cfg->port, cfg->nvol, cfg->replicas, cfg->subvolumes);
		sigdelset(&set, SIGPIPE);
		sigwait(&set, &sig);
		stop_daemon(d);
	} else {
		log_msg("cannot listen on port %d", cfg->port);
		reaper_stop(reaper);
	}
	health_stop();
	meta_close();
	index_close(idx);
	return d ? 0 : 1;
}
