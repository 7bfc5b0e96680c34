/* front.h -- the one HTTP front both daemons run on: start and stop,
 * routes, request heads, answers, and connections that sleep while a
 * worker runs.  front.c is the only file that includes microhttpd.h; a
 * connection is an opaque struct MHD_Connection.  One front per process.
 * Why it is built this way: docs/architecture.md ("The front"). */
#ifndef MKV_FRONT_H
#define MKV_FRONT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct MHD_Connection;
struct spawn_queue;

/* What a route's handler returns: go on, or close the connection. */
#define FRONT_YES 1
#define FRONT_NO  0
/* What a streamed body's reader returns at its end. */
#define FRONT_READER_END   ((ssize_t)-1)
#define FRONT_READER_ERROR ((ssize_t)-2)

/* ---- routes ----
 * A request goes to the first route whose claim takes it.  claim runs at
 * the request's first call, once its head is in: it returns the route's
 * state for the request, or NULL to pass (path: the target up to '?', as
 * it came; query: the raw query string or NULL).  An answer queued in
 * claim closes the connection (the body is not read): claim queues only
 * refusals.  handler: every later call, with body bytes (*size: how many;
 * it sets how many it left unread) or none (*size 0: the body is in, or
 * the connection was woken); FRONT_YES or FRONT_NO.  status: the status
 * answered, 0 before (the request log).  done: the request is over,
 * answered or not; the route frees its state. */
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

/* What the front found wrong with a request's head.  Such a request goes
 * to the daemon's own route (front_opts.route) only, whose claim answers
 * it in the daemon's words (front_head_error tells which). */
enum front_head {
	FRONT_HEAD_OK,
	FRONT_HEAD_CODING,   /* a Transfer-Encoding other than chunked */
	FRONT_HEAD_LENGTHS,  /* Content-Length headers that disagree */
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
	void (*opened)(int fd);  /* a connection on socket fd starts (may be NULL) */
};
/* Raise the open file limit for conns clients holding per descriptors
 * each, and 256 more; returns how many clients fit (fewer when it cannot
 * be raised enough).  Call before opening what sizes itself by
 * the limit (LevelDB). */
unsigned front_nofile(unsigned conns, unsigned per);
/* Start one epoll thread per core (at least two) on port.  0, or -1
 * (logged). */
int front_start(const struct front_opts *o);
/* Stop accepting; let the requests in flight finish for up to drain_ms,
 * their answers closing their connections; then close any new request's
 * connection unanswered and put no connection to sleep any more.  Returns
 * how many connections still sleep on a worker: front_stop must not run
 * until they are woken (a worker queue's end wakes its own). */
int front_drain(uint64_t drain_ms);
/* Close every connection and stop the threads. */
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
/* The connection's socket, or -1. */
int front_fd(struct MHD_Connection *c);

/* ---- answers ----
 * Each queues an answer: status, headers h[0..nh), and a body; while the
 * front drains, with "Connection: close".  They return FRONT_YES or
 * FRONT_NO (as the handler's result).
 * front_send: body[0..len) (copied).
 * front_stream: size bytes (-1: unknown, then chunked) from reader, which
 * returns how many bytes it wrote to out, 0 after putting the connection
 * to sleep, or FRONT_READER_*; read in 256 KiB blocks.
 * front_stream_ex: the same in blocks of block bytes; done(cls) (may be
 * NULL) once the answer is over or could not be made; http10: answer as
 * HTTP/1.0 (no chunks; the connection closes).
 * front_file: len bytes of file fd from off, by sendfile; the answer
 * closes fd.  -1 when no answer could be made (fd is still the caller's). */
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
 * another thread wakes it (front_wake).  mu guards the flags; gone: the
 * request is over, its connection is not to be touched again.  The
 * request's owner sets conn and initialises mu. */
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
/* Runs fn(arg) on a pool thread (front_spawn), or hands item to queue q
 * (front_queue, spawn.h), while the connection sleeps; the work ends with
 * front_finish, which wakes it.  -1 when no thread can be had or the
 * front is stopping (nothing runs then). */
int front_spawn(struct front_sleep *z, void (*fn)(void *), void *arg);
int front_queue(struct front_sleep *z, struct spawn_queue *q, void *item);
void front_finish(struct front_sleep *z);

#endif
