/* front.h -- the master's HTTP front as the request code sees it: answer,
 * read a header, put a connection to sleep and wake it.  server.c
 * implements it and is the only file of the master that includes
 * microhttpd.h; the native requests and the S3 files (s3/) both use it. */
#ifndef MKV_FRONT_H
#define MKV_FRONT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct MHD_Connection;
struct put;

/* What the access handler returns (enum MHD_Result's values). */
#define FRONT_YES 1
#define FRONT_NO  0
/* What a streamed body's reader returns at its end (libmicrohttpd's values). */
#define FRONT_READER_END   ((ssize_t)-1)
#define FRONT_READER_ERROR ((ssize_t)-2)

struct front_hdr {
	const char *name, *value;
};
/* Queue an answer: status, headers h[0..nh) and body[0..len) (copied).
 * front_stream: a body of size bytes (-1: unknown) from reader, which
 * returns how many bytes it wrote to out, 0 after suspending the
 * connection, or FRONT_READER_*.  Both return FRONT_YES or FRONT_NO. */
int front_send(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh,
	       const char *body, size_t len);
int front_stream(struct MHD_Connection *c, int status, const struct front_hdr *h, int nh,
		 int64_t size, ssize_t (*reader)(void *, uint64_t, char *, size_t), void *cls);
const char *front_header(struct MHD_Connection *c, const char *name);

/* A request's connection sleeps (front_wait, from the handler) until
 * another thread wakes it (front_wake).  mu guards the flags; gone: the
 * request is over, its connection is not to be touched again. */
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
/* Runs fn(arg) on a thread of its own while the connection sleeps; -1
 * when no thread can be had.  The thread ends with front_finish. */
int front_spawn(struct front_sleep *z, void (*fn)(void *), void *arg);
void front_finish(struct front_sleep *z);
/* A layer that answers some requests itself (S3), added before the server
 * starts (ops/main.c), so that the front never names it.  claim: at a
 * request's first call, the layer's state for it when it takes it, else
 * NULL (path raw, query the raw query string or NULL); handler: every
 * later call (FRONT_YES/NO); status: the status answered, 0 before (the
 * request log); done: the request is over, answered or not. */
struct front_route {
	void *(*claim)(struct MHD_Connection *c, const char *method, const char *path,
		       const char *query);
	int (*handler)(void *req, const char *data, size_t *size);
	int (*status)(const void *req);
	void (*done)(void *req);
};
void front_route_add(const struct front_route *r);

/* The request is over: abort the put if the client went away mid-body,
 * and release it. */
void front_put_done(struct put *p);

#endif
