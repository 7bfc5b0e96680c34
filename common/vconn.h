/* vconn.h -- the lean volume client on the event loops: requests whose
 * body is in memory or absent (a small PUT's replica writes, a DELETE's
 * fan-out; off the loops, on a loop of the thread's own, every other
 * fan-out: gc's and rebalance's DELETEs, small moves, rebuild's pipelined
 * listings), on keep-alive connections of the loop's thread.
 *
 * Each loop thread keeps a bounded pool per volume (32 connections, more
 * requests wait; 16 idle, closed after 30 s), each connection registered
 * with the loop's epoll once (edge triggered) and peeked before reuse; a
 * request whose reused connection closed before any byte of its answer
 * is sent once more on a fresh one (a PUT too: see conn_lost).  Names are
 * looked up on a thread of their own, the last good addresses kept.
 * Answers are parsed strictly (vresp_feed).  Each request is signed as it
 * is sent (volsign_url) and ends in httpc's observer.  libcurl
 * (httpc.h) keeps the streamed bodies.  docs/architecture.md. */
#ifndef MKV_VCONN_H
#define MKV_VCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "util.h"

struct httpc_req;

/* -cacert FILE: the CAs every https:// peer is verified by, this client's
 * (OpenSSL) and libcurl's (httpc.c); NULL: the system's. */
extern const char *vol_cacert;

/* Perform method on every reqs[i].url at once on this thread's event loop,
 * the same body (NULL: none) to each: returns at once, and done(arg, gone)
 * is called on the loop once all have answered or failed (reqs[i].status,
 * or -1 with reqs[i].err).  Each request must end within timeout_ms (0:
 * none; timed_out set when it did not).  down (may be NULL) is asked every
 * 100 ms about each request still running: true fails it (gone: its
 * index, else -1) and stops the others.  body stays the caller's until
 * done.  -1 (nothing started) when this thread runs no loop. */
int vconn_fanout(const char *method, struct httpc_req *reqs, int n, const void *body,
		 size_t bodylen, long timeout_ms, bool (*down)(void *, int), void *down_arg,
		 void (*done)(void *arg, int gone), void *arg);

/* On a thread that runs no loop (a worker's, a command's): what
 * vconn_fanout does, on a loop of the thread's own (kept, with its
 * connections, until vconn_thread_cleanup), and return once every request
 * answered or failed: the index down failed, or -1.  resp (NULL: dropped)
 * gets the answer's body when n is 1, up to resp_max bytes (0: any): past
 * that, or a Content-Length past it, the request fails and VCONN_OVER is
 * returned.  On a loop's thread every request fails ("on an event
 * loop"). */
#define VCONN_OVER (-2)
int vconn_wait(const char *method, struct httpc_req *reqs, int n, const void *body,
	       size_t bodylen, long timeout_ms, bool (*down)(void *, int), void *down_arg,
	       struct buf *resp, size_t resp_max);

/* A GET of url (http://), pipelined: sent on a kept-alive connection of
 * its volume while the answers to those sent before are still to come
 * (RFC 9112 9.3; nginx and mkv-volume answer in order), up to 16 on a
 * connection, 4 connections a volume before more open.  A GET whose
 * connection failed before its answer goes again, 4 sends in all (those
 * that waited behind it, uncounted); each send gets 2 minutes.
 * done(arg, status, body, len, err) gets the answer (its body up to max
 * bytes, 0: any) or -1 and err, on the loop.  On this thread's event loop,
 * or on a thread of none, its own: vconn_run then runs it.  -1 when not
 * started. */
int vconn_get(const char *url, size_t max,
	      void (*done)(void *arg, int status, const char *body, size_t len, const char *err),
	      void *arg);
/* On a thread of no loop: run its own until nothing is left (a done may
 * start more).  vconn_loop: that loop, for other work vconn_run then
 * runs with its requests (the caller must be on a thread of no loop). */
void vconn_run(void);
struct loop *vconn_loop(void);

/* For libcurl's CURLOPT_RESOLVE: "host:port:addr[,addr...]" of url's
 * host, a name, as its last good lookup found it (the first waited for,
 * up to 10 s, on the caller's thread): its length, 0 for a literal
 * address or a name with none (libcurl looks it up). */
size_t vconn_pin(const char *url, char *out, size_t n);

/* Called (url, status) for each request that ends, of both clients:
 * httpc_observe sets it. */
extern void (*vconn_observer)(const char *url, int status);

/* Close this thread's connections (at the loop thread's end); requests
 * still under way fail ("its thread ended"), their done called. */
void vconn_thread_cleanup(void);

/* ---- the answer parser (fuzz/targets_master.c fuzzes it) ---- */
#define VRESP_HEAD_MAX (16u << 10)   /* a head, or a chunked body's trailers */
#define VRESP_INTERIM_MAX 8          /* 1xx answers before the final one */
enum vresp_state { VR_HEAD, VR_LEN, VR_CSIZE, VR_CDATA, VR_CCRLF, VR_TRAILER, VR_EOF, VR_DONE,
		   VR_ERR };
struct vresp {
	enum vresp_state state;
	int status;              /* the final answer's */
	bool head;               /* the request was a HEAD: no body */
	bool close;              /* the server closes after this answer */
	int interim;             /* 1xx answers so far */
	uint64_t rem;            /* VR_LEN, VR_CDATA: bytes to come */
	size_t trailers;         /* VR_TRAILER: bytes of trailers so far */
	struct buf *body;        /* the body goes here (NULL: dropped) */
	size_t body_max;         /* past this many bytes the answer fails (0: any) */
	bool over;               /* VR_ERR: for that (or its Content-Length said so) */
	char why[128];           /* VR_ERR: the reason */
};
void vresp_init(struct vresp *r, bool head, struct buf *body, size_t body_max);
/* The value of header line p[0..n) (its CRLF may end it) when it is named
 * name (in any case), blanks trimmed, its length in *vn; else NULL. */
const char *vresp_value(const char *p, size_t n, const char *name, size_t *vn);
/* Parse p[0..n) (what follows the bytes consumed before): returns how many
 * bytes it consumed.  Call again with the rest while it consumes some and
 * the state is neither VR_DONE nor VR_ERR; 0 consumed means it needs more
 * bytes. */
size_t vresp_feed(struct vresp *r, const char *p, size_t n);
/* The server closed the connection: an answer read to its end (VR_EOF) is
 * done, any other unfinished one fails. */
void vresp_eof(struct vresp *r);

#endif
