/* front.h -- the one HTTP front both daemons run on (one per process):
 * start and stop, routes, request heads, answers, and connections that
 * sleep while a worker runs.  front.c alone includes microhttpd.h; a
 * connection is an opaque struct MHD_Connection.  docs/architecture.md. */
#ifndef MKV_FRONT_H
#define MKV_FRONT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "util.h"

struct MHD_Connection;
struct spawn_queue;

/* What a route's handler returns: go on, or close the connection. */
#define FRONT_YES 1
#define FRONT_NO  0
/* What a streamed body's reader returns at its end. */
#define FRONT_READER_END   ((ssize_t)-1)
#define FRONT_READER_ERROR ((ssize_t)-2)

/* ---- routes ----
 * A request goes to the first route whose claim takes it, at its first
 * call (head in): claim returns the route's state, or NULL to pass (path:
 * the target up to '?', raw; query: raw, or NULL).  An answer queued in
 * claim closes the connection: only refusals go there.  handler: every
 * later call, with body bytes (*size; it leaves *size unread) or none (the
 * body is in, or the connection was woken); FRONT_YES or FRONT_NO.
 * status (may be NULL): the status answered, for the request log.  done:
 * the request is over, answered or not; the route frees its state. */
struct front_route {
	void *(*claim)(struct MHD_Connection *c, const char *method, const char *path,
		       const char *query);
	int (*handler)(void *req, const char *data, size_t *size);
	int (*status)(const void *req);
	void (*done)(void *req);
};
/* A layer that answers some requests itself (S3), added before the front
 * starts, so that the daemon never names it. */
void front_route_add(const struct front_route *r);

/* What is wrong with a request's head.  Such a request goes to the
 * daemon's own route alone, whose claim answers it in its own words. */
enum front_head {
	FRONT_HEAD_OK,
	FRONT_HEAD_CODING,   /* a Transfer-Encoding other than chunked */
	FRONT_HEAD_LENGTHS,  /* Content-Length headers that disagree */
	FRONT_HEAD_BOTH,     /* Transfer-Encoding and Content-Length */
	FRONT_HEAD_HOST,     /* HTTP/1.1 without Host */
	FRONT_HEAD_TARGET,   /* absolute_form: the target is not a path */
};
enum front_head front_head_error(struct MHD_Connection *c);

/* ---- start and stop ---- */

struct front_opts {
	int port;
	const struct front_route *route;  /* takes what no added route claims */
	unsigned max_conns;      /* clients at once */
	size_t conn_memory;      /* request line and headers, per connection */
	uint64_t idle_ms;        /* a connection silent, or sending a head, this long is cut off */
	unsigned backlog;        /* listen backlog; 0: the library's */
	bool absolute_form;      /* take an absolute-form target's path (RFC 9112
				  * §3.2.2, as Go's server); any other target not
				  * starting with '/' is FRONT_HEAD_TARGET */
	bool verbose;            /* log one line per request */
	bool threads;            /* libmicrohttpd's own epoll threads (one per core)
				  * instead of the event loops: for a daemon that
				  * makes no volume requests (mkv-volume, whose
				  * wire.c follows that mode's calls) */
	void (*opened)(int fd);  /* a connection on socket fd starts (may be NULL) */
	const char *accesslog;   /* -accesslog FILE ("-": stderr), or NULL */
	const char *metrics;     /* -metrics HOST:PORT, or NULL: the listener below */
	const char *tls;         /* -tls CERT,KEY (PEM): the port speaks HTTPS; NULL: HTTP */
	const struct front_page *pages;   /* its pages besides /metrics; path NULL ends */
};
/* A page of the metrics listener (GET or HEAD): render appends the body. */
struct front_page {
	const char *path, *ctype;
	void (*render)(struct buf *b);
};
/* Raise the open file limit for conns clients holding per descriptors
 * each, and 256 more; returns how many clients fit (fewer when it cannot
 * be raised enough).  Call before opening what sizes itself by
 * the limit (LevelDB). */
unsigned front_nofile(unsigned conns, unsigned per);
/* Start one epoll thread per core (at least two) on port; with
 * o->metrics, a listener of its own on that address (one thread) serving
 * /metrics (common/metrics.h) and o->pages; with o->accesslog, the access
 * log (common/accesslog.h).  Then tells systemd READY=1 (sd_notify: nothing
 * without $NOTIFY_SOCKET).  0, or -1 (logged: the address that cannot be
 * bound, the log that cannot be opened). */
int front_start(const struct front_opts *o);
/* SIGHUP: reopen the access log by its name (logrotate), and load -tls's
 * files again (a renewed certificate; a bad one keeps the old, logged). */
void front_reload(void);
/* Tells systemd STOPPING=1.  Stop accepting; let the requests in flight finish for up to drain_ms
 * (their answers close their connections); then refuse new requests and
 * put no connection to sleep.  drain_ms 0: no drain, only no more sleep
 * (nginx's fast stop; front_stop closes the rest).  Returns how many still
 * sleep on a worker: front_stop must wait until they are woken. */
int front_drain(uint64_t drain_ms);
/* Close every connection and stop the threads, the metrics listener and
 * the access log (what it buffered is written). */
void front_stop(void);
/* The HTTP library's version ("0.9.75"). */
const char *front_version(void);

/* ---- a request ---- */

const char *front_header(struct MHD_Connection *c, const char *name);
/* Is query argument name given (its name compared without case)?
 * front_args: fn for each argument in order (value NULL when bare). */
bool front_has_arg(struct MHD_Connection *c, const char *name);
void front_args(struct MHD_Connection *c, void (*fn)(void *cls, const char *k, const char *v),
		void *cls);
/* fn for each request header in order. */
void front_headers(struct MHD_Connection *c, void (*fn)(void *cls, const char *k, const char *v),
		   void *cls);
/* The connection's socket, or -1. */
int front_fd(struct MHD_Connection *c);
/* Who signed the request (common/sigv4.h), by the keys of ring: the
 * access phase both APIs run in their claim when -keys is on. */
struct keyring;
struct sig_result;
void front_sig_check(struct MHD_Connection *c, const char *method, const char *path,
		     const char *query, const struct keyring *ring, struct sig_result *out);

/* ---- answers ----
 * Each queues status, headers h[0..nh) and a body ("Connection: close"
 * while draining), and returns FRONT_YES or FRONT_NO.
 * front_send: body[0..len) (copied).
 * front_stream: size bytes (-1: unknown, chunked) from reader, which
 * returns how many bytes it wrote to out, 0 after putting the connection
 * to sleep, or FRONT_READER_*; 256 KiB reads.  front_stream_ex: reads of
 * block bytes, done(cls) (may be NULL) once the answer is over or could
 * not be made, http10: as HTTP/1.0 (no chunks; the connection closes).
 * front_file: len bytes of file fd from off, by sendfile; the answer
 * closes fd; -1 when none could be made (fd is still the caller's). */
struct front_hdr {
	const char *name, *value;
};
int front_send(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh,
	       const char *body, size_t len);
int front_stream(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh,
		 int64_t size, ssize_t (*reader)(void *, uint64_t, char *, size_t), void *cls);
int front_stream_ex(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh,
		    int64_t size, size_t block, ssize_t (*reader)(void *, uint64_t, char *, size_t),
		    void (*done)(void *), void *cls, bool http10);
int front_file(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh, int fd,
	       uint64_t off, uint64_t len);

/* ---- sleeping connections ----
 * A request's connection sleeps (front_wait, from the handler) until
 * another thread wakes it (front_wake).  The owner sets conn and
 * initialises mu, which guards the flags; gone: the request is over.
 * Whoever puts a connection to sleep names, where it does, what wakes it:
 * a sleep nothing ends holds its client, and a key's lock, for good.
 * A woken connection keeps its loop running (loop_hold) until its request
 * ends or it sleeps again, so that a loop told to stop still sends the
 * answer it was woken for. */
struct front_sleep {
	struct MHD_Connection *conn;
	pthread_mutex_t mu;
	bool suspended, woken, gone, async_started, async_done;
};
void front_wake(void *z);   /* z: a struct front_sleep (so it can be put.h's wake) */
/* The same two under z->mu, held by the caller: sleep now (a streamed
 * body's reader with nothing to give), wake. */
void front_sleep_locked(struct front_sleep *z);
void front_wake_locked(struct front_sleep *z);
/* Sleeps unless woken since the last call, or the worker is done: returns
 * whether it is (then it does not sleep). */
bool front_wait(struct front_sleep *z);
/* fn(arg) on a pool thread (front_spawn), or item to queue q (spawn.h),
 * while the connection sleeps; the work ends with front_finish, which
 * wakes it.  front_begin: the caller starts the work itself once this
 * returns 0 (on its loop: store_delete_start).  -1 when no thread can be
 * had or the front is stopping (then start nothing: the connection could
 * not sleep, and a client that went away would free the request under
 * the work). */
int front_spawn(struct front_sleep *z, void (*fn)(void *), void *arg);
int front_queue(struct front_sleep *z, struct spawn_queue *q, void *item);
int front_begin(struct front_sleep *z);
void front_finish(struct front_sleep *z);

#endif
