/* server.c -- the master's native HTTP API on the front (common/front.h),
 * and the server's start and stop.
 *
 * GET/HEAD of a key is answered on the front's thread that read it: one
 * index read, no volume traffic (health.c knows which volumes are up).
 * Anything that waits on a volume or fsyncs the index runs elsewhere while
 * the connection sleeps: PUT on its put's worker (put.c), the rest on a
 * pool thread (front_spawn). */
#include "handlers.h"
#include "health.h"
#include "store.h"
#include "mkv.h"
#include "move.h"
#include "put.h"
#include "status.h"
#include "../common/front.h"
#include "../common/volsign.h"
#include "../common/spawn.h"
#include "../common/httpc.h"
#include "../common/keys.h"
#include "../common/page.h"
#include "../common/sigv4.h"
#include "../common/placement.h"
#include "../common/record.h"
#include "../common/util.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALLOW "GET, HEAD, PUT, DELETE, UNLINK, REBALANCE, RELINK, REPLACE"

enum op { OP_GET, OP_HEAD, OP_PUT, OP_DELETE, OP_UNLINK, OP_REBALANCE, OP_RELINK, OP_OTHER };

struct req {
	struct front_sleep sl;   /* its connection, and its sleep while a worker runs */
	const char *uri;         /* the path, raw (the front's) */
	const char *query;       /* the raw query string, or NULL */
	enum op op;
	uint64_t bytes;
	char key[KEY_MAX * 3 + 8];
	size_t klen;
	int key_status;          /* 0, or 400/414 from key_decode */
	const char *key_why;
	bool locked;             /* holds key's keylock */
	bool replace;            /* REPLACE: a PUT that may overwrite */

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

/* ---- native answers ---- */

static int send_answer(struct req *r)
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
		return front_stream(r->sl.conn, a->status, h, nh, a->stream_len, answer_read, a);
	return front_send(r->sl.conn, a->status, h, nh, a->body.data, a->body.len);
}

static void unlock_key(struct req *r)
{
	if (r->locked)
		keylock_release(r->key, r->klen);
	r->locked = false;
}

/* An answer that ends the request's write (an error, a PUT's outcome): a
 * key it locked is freed before the client hears back, so its next
 * request finds it free. */
static int send_error(struct req *r, int status, const char *why)
{
	unlock_key(r);
	answer_error(&r->ans, status, why);
	return send_answer(r);
}

static int send_conflict(struct req *r)
{
	status_count_conflict();
	return send_error(r, 409, "another write of this key is in progress");
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
			handle_list(cfg, idx, r->key, r->klen, r->query, r->op == OP_HEAD, &r->ans);
		else
			handle_get(cfg, idx, r->key, r->klen, r->uri, r->op == OP_HEAD, &r->ans);
		break;
	case OP_RELINK:
		handle_relink(cfg, idx, r->key, r->klen, &r->ans);
		break;
	case OP_REBALANCE:
		/* ?unlinked: move an unlinked key's blob too (online rebalance) */
		st = move_key(cfg, idx, r->key, r->klen, r->query ? MOVE_UNLINKED : 0,
				   &moved, &why);
		answer_error(&r->ans, st, why ? why : "rebalance failed");
		if (st == 204)   /* what this request did: nothing (already home), or a move */
			r->ans.balance = moved ? "rebalanced" : "balanced";
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

/* Sleeps until the work's front_finish: async_main's, or deleted's. */
static int run_async(struct req *r)
{
	if (r->sl.async_started)
		return front_wait(&r->sl) ? send_answer(r) : FRONT_YES;
	if (front_spawn(&r->sl, async_main, r) < 0)
		return send_error(r, 503, "server busy: no thread for this request");
	return FRONT_YES;
}

/* DELETE and UNLINK on the loop (store_delete_start). */
static void deleted(void *arg, int st, const char *why)
{
	struct req *r = arg;
	answer_error(&r->ans, st, why);
	unlock_key(r);          /* free the key before the client hears back */
	front_finish(&r->sl);
}

/* The connection sleeps before the work starts (front_begin): the work
 * on the loop points at r, which a client that went away while its
 * connection was awake would free.  Woken by deleted, on every path. */
static int delete_start(struct req *r)
{
	const char *why = NULL;
	int st;
	if (front_begin(&r->sl) < 0)
		return send_error(r, 503, "server stopping: no new delete starts");
	st = store_delete_start(cfg, idx, r->key, r->klen,
				r->query ? DEL_UNLINKED : r->op == OP_UNLINK ? DEL_UNLINK : DEL_DELETE,
				&why, deleted, r);
	if (st)
		deleted(r, st, why);   /* answered at once */
	return FRONT_YES;
}

/* ---- PUT ---- */

/* First call: everything that can be refused before reading the body. */
static int put_begin(struct req *r)
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
		return send_conflict(r);
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
	return FRONT_YES;
}

static int put_body(struct req *r, const char *data, size_t *size)
{
	int st;
	const char *why;

	if (*size && !r->put) {
		const char *cl = front_header(r->sl.conn, "Content-Length");
		uint64_t clen = 0;
		int64_t len = cl && parse_u64(cl, 0, INT64_MAX, &clen) ? (int64_t)clen : -1;
		r->put = put_start(cfg, idx, r->key, r->klen, r->locs, r->nlocs, len, front_wake, &r->sl,
				   r->replace, 0);
		r->locked = false; /* the put owns the key's lock now */
	}
	if (*size && cfg->maxsize && r->bytes + *size > cfg->maxsize) {
		if (!r->too_big)          /* chunked past -maxsize: drop what was written */
			put_abort(r->put);
		r->too_big = true;
		*size = 0;
		return FRONT_YES;
	}
	if (*size) {
		size_t took = put_feed(r->put, data, *size);
		r->bytes += took;
		*size -= took;
		/* A failed put swallows the rest of the body (put_feed takes it
		 * all), and the answer waits for its end: answering mid-body and
		 * closing with unread bytes makes the kernel reset the connection,
		 * which can destroy the answer before the client reads it.
		 * Woken by the put's wake: a replica took bytes (the ring's
		 * room), or the put ended (put.c's finish).  A small put has
		 * no worker to take bytes, but its ring holds its whole length
		 * and put_feed refuses more: it never gets here. */
		if (*size)
			front_wait(&r->sl);
		return FRONT_YES;
	}
	if (!r->put)
		return send_error(r, 411, "PUT needs a non-empty body");
	if (r->too_big)
		return send_error(r, 413, "value larger than -maxsize");
	if (!r->put_finished) {
		put_finish(r->put);
		r->put_finished = true;
	}
	if (put_result(r->put, &st, &why))
		return send_error(r, st, why);
	front_wait(&r->sl);   /* woken by the put's end (put.c's finish), on every path */
	return FRONT_YES;
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
	plen = strlen(r->uri);
	if (plen > KEY_MAX * 3) {
		r->key_status = 414;
		r->key_why = "key longer than 189 bytes";
		return;
	}
	r->key_status = key_decode(r->uri, plen, r->key, &r->klen, &r->key_why);
}

/* ?list and ?unlinked take any prefix, "/" included. */
static int list(struct req *r)
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

/* A DELETE or UNLINK of a key with no record and no write in progress
 * is answered 404 without taking the key's lock: taken, even for the
 * moment of the lookup, it would refuse a PUT of the key arriving then
 * (409) for a DELETE that changes nothing. */
static bool absent(const struct req *r)
{
	size_t vlen;
	char *v;
	if (keylock_held(r->key, r->klen))
		return false;   /* 409 below, as for any write in progress */
	v = index_get(idx, r->key, r->klen, &vlen);
	free(v);
	return !v;
}

/* Every method but PUT, once its body (ignored) is in. */
static int req_answer(struct req *r)
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
		handle_get(cfg, idx, r->key, r->klen, r->uri, r->op == OP_HEAD, &r->ans);
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
	if ((r->op == OP_DELETE || r->op == OP_UNLINK) && !r->query && absent(r))
		return send_error(r, 404, "key not found");
	if (!keylock_try(r->key, r->klen))
		return send_conflict(r);
	r->locked = true;
	if (r->op == OP_DELETE || r->op == OP_UNLINK)
		return delete_start(r);
	return run_async(r);
}

/* ---- keys (-keys: docs/security.md) ---- */

/* What r needs (PERM_*), and of which key or prefix (into path). */
static unsigned needs(const struct req *r, char *path, size_t *n)
{
	if (r->op == OP_OTHER)
		return 0;
	if ((r->op == OP_GET || r->op == OP_HEAD) && r->query) {
		if (path_decode(r->uri, strlen(r->uri) < KEY_MAX * 3 ? strlen(r->uri) : KEY_MAX * 3,
				path, n) < 0)
			return 0;   /* answered 400 later */
		/* &locations hands out the replicas' URLs: a read of every key */
		return query_param(r->query, "locations", &(size_t){0}) ? PERM_LIST | PERM_READ
									: PERM_LIST;
	}
	if (r->key_status)
		return 0;   /* answered 400 or 414 later */
	memcpy(path, r->key, r->klen);
	*n = r->klen;
	switch (r->op) {
	case OP_GET:
	case OP_HEAD:
		return PERM_READ;
	case OP_PUT:
		return PERM_WRITE;
	case OP_DELETE:
		return r->query ? PERM_ADMIN : PERM_DELETE;   /* DELETE ?unlinked */
	case OP_REBALANCE:
		return PERM_ADMIN;
	default:   /* UNLINK, RELINK */
		return PERM_DELETE;
	}
}

static const char *perm_name(unsigned p)
{
	return p == PERM_READ ? "read" : p == PERM_LIST ? "list" : p == PERM_WRITE ? "write"
	       : p == PERM_DELETE ? "delete" : p == PERM_ADMIN ? "admin" : "list and read";
}

/* With -keys: is r signed by a key that may do it?  Answers 401 (no or
 * bad credentials) or 403 (no permission) when not. */
static bool refused(struct req *r, const char *method)
{
	struct keyring *ring = keys_current();
	struct sig_result s;
	char path[KEY_MAX * 3 + 8], *why;
	size_t n = 0;
	unsigned perm;
	if (!ring)   /* -keys off */
		return false;
	front_sig_check(r->sl.conn, method, r->uri, r->query, ring, &s);
	perm = s.st == SIG_OK ? needs(r, path, &n) : 0;
	if (s.st != SIG_OK)
		why = xasprintf("%s", s.why);
	else if (perm && !key_allows(s.key, perm, path, n) && !s.is_signed)
		why = xasprintf("unsigned requests may not %s %.*s: sign with AWS Signature "
				"Version 4 (curl --aws-sigv4 \"aws:amz:us-east-1:s3\" --user ID:SECRET)",
				perm_name(perm), (int)n, path);
	else if (perm && !key_allows(s.key, perm, path, n))
		why = xasprintf("key %s may not %s %.*s", s.key->id, perm_name(perm), (int)n, path);
	else
		why = NULL;
	if (why)
		send_error(r, s.st == SIG_OK && s.is_signed ? 403 : 401, why);
	free(why);
	keyring_put(ring);
	return r->answered;
}

/* What the front found wrong with a request's head (as nginx and Go). */
static const char *const head_why[FRONT_HEAD_TARGET + 1] = {
	[FRONT_HEAD_CODING] = "unsupported Transfer-Encoding: only chunked",
	[FRONT_HEAD_LENGTHS] = "Content-Length headers disagree",
	[FRONT_HEAD_BOTH] = "both Transfer-Encoding and Content-Length: the body's end is in doubt",
	[FRONT_HEAD_HOST] = "an HTTP/1.1 request needs a Host header",
	[FRONT_HEAD_TARGET] = "the request target must be a path starting with /",
};

/* The first call: the request's head is in (the front found it sound,
 * or says what is wrong with it). */
static void *claim(struct MHD_Connection *c, const char *method, const char *path,
		   const char *query)
{
	struct req *r = xcalloc(1, sizeof(*r));
	enum front_head bad = front_head_error(c);
	char why[256];
	r->sl.conn = c;
	pthread_mutex_init(&r->sl.mu, NULL);
	r->uri = path;
	r->query = query;
	req_parse(r, method);
	if (bad)
		send_error(r, 400, head_why[bad]);
	else if (!refused(r, method) && r->op != OP_GET && r->op != OP_HEAD && r->op != OP_OTHER) {
		if (!store_writable(why, sizeof(why)))
			send_error(r, 503, why);
		else if (r->op == OP_PUT)
			put_begin(r);
	}
	return r;
}

static int handler(void *req, const char *data, size_t *size)
{
	struct req *r = req;
	if (r->op == OP_PUT && !r->answered)
		return put_body(r, data, size);
	if (*size || r->answered) {  /* answered early, or a body that is ignored */
		*size = 0;
		return FRONT_YES;
	}
	return req_answer(r);
}

static int status(const void *req)
{
	return ((const struct req *)req)->ans.status;
}

static void done(void *req)
{
	struct req *r = req;
	if (r->put)
		put_done(r->put);
	unlock_key(r);
	/* front_wake may still be between resuming the connection and its unlock. */
	pthread_mutex_lock(&r->sl.mu);
	pthread_mutex_unlock(&r->sl.mu);
	answer_free(&r->ans);
	free(r->locs);
	pthread_mutex_destroy(&r->sl.mu);
	free(r);
}

static const struct front_route api_route = {claim, handler, status, done};

/* ---- start and stop ---- */

/* Let what is in flight finish (bounded), then close.  A kept-alive
 * connection may carry one more request, answered with "Connection:
 * close"; once none runs, any later one is refused. */
static void stop(void)
{
	uint64_t deadline = now_ms() + 20000;
	int n = front_drain(10000);
	if (n > 0) {
		/* Requests waiting on volumes for 10 s: the front cannot stop
		 * under them.  Their writes' records stay DELETED. */
		log_msg("stopping with %d requests unfinished after 10 s (waiting on volumes); "
			"their writes' records stay DELETED", n);
		_exit(1);
	}
	front_stop();
	move_drain(5000); /* old copies waiting out REBALANCE's grace period */
	/* Writers cut off by the stop are still cleaning up, on the index. */
	while (spawn_busy() > 0 && now_ms() < deadline)
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
	struct front_opts o = {0};
	sigset_t set;
	int sig, ok;
	char *why = NULL;

	cfg = c;
	log_stamps();
	/* Rings and buffers of a MiB or more (a PUT's ring; S3 uploads run
	 * ten at once) go back to the kernel when freed: glibc's adaptive
	 * threshold would keep them in per-thread arenas, and the master's
	 * resident size would grow with how many ran at once, not how many
	 * run now. */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	/* ...which also fixes the heap's trim threshold at 128 KiB, and each
	 * volume transfer's buffers (libcurl's, 64 KiB and more) then grew
	 * the heap and gave it back, page faults and all, request after
	 * request. */
	mallopt(M_TRIM_THRESHOLD, 8 << 20);
	/* Room for -maxconns clients plus volumes and the index. */
	if (front_nofile((unsigned)cfg->maxconns, 1) < (unsigned)cfg->maxconns)
		log_msg("open file limit too low: fewer than -maxconns clients can connect");
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
	if (cfg->keys && keys_start(cfg->keys) < 0) {
		meta_close();
		index_close(idx);
		return 1;
	}
	put_sweep_replaces(cfg, idx);
	move_sweep_notes(idx);
	store_init(cfg, idx);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGPIPE);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* every thread inherits this */
	health_start(cfg);
	if (vol_check_names(cfg, false) < 0)
		exit(2);
	status_start(cfg, idx);
	o.port = cfg->port;
	o.route = &api_route;
	o.max_conns = (unsigned)cfg->maxconns;
	o.conn_memory = 16 * 1024;
	o.idle_ms = cfg->idletimeout_ms;
	o.backlog = 1024;
	o.absolute_form = true;   /* as Go's server reads it */
	o.verbose = cfg->verbose;
	o.metrics = cfg->metrics;
	o.pages = page_pages;
	o.accesslog = cfg->accesslog;
	o.tls = cfg->tls;
	ok = front_start(&o) == 0;
	if (ok) {
		if (cfg->verbose)
			log_msg("listening on port %d, %d volumes, replicas %d, subvolumes %d",
				cfg->port, cfg->nvol, cfg->replicas, cfg->subvolumes);
		sigdelset(&set, SIGPIPE);
		while (!sigwait(&set, &sig) && sig == SIGHUP) {
			front_reload();        /* logrotate, a renewed -tls */
			volsign_reload();      /* a rotated -volumesecret */
			keys_reload();
		}
		stop();
	}
	status_stop();
	health_stop();
	meta_close();
	index_close(idx);
	keys_stop();
	return ok ? 0 : 1;
}
