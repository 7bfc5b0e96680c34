/* loop.h -- an event loop on one thread: descriptors, deadlines, and calls
 * posted from other threads, on one epoll.  The front runs one per core,
 * each serving its own share of the connections (front.c), and the volume
 * client drives its transfers on the loop of the thread that starts them
 * (httpc.h's async calls): a small write's volume requests, its answer and
 * the next request's parsing then run on one thread, with no handoff.
 * docs/architecture.md. */
#ifndef MKV_LOOP_H
#define MKV_LOOP_H

#include <stdbool.h>
#include <stdint.h>

struct loop;

/* A descriptor's watcher: fn(arg, epoll events) on the loop's thread. */
struct loop_fd {
	void (*fn)(void *arg, uint32_t events);
	void *arg;
	bool dead;               /* unwatched: events already fetched are dropped */
	bool added;              /* in the epoll set (loop_watch's) */
};
/* A deadline: fire(arg) on the loop's thread once now_ms() >= at (0: none).
 * Set at from the loop's thread. */
struct loop_timer {
	uint64_t at;
	void (*fire)(void *arg);
	void *arg;
};

struct loop *loop_new(void);
/* Run on this thread until loop_stop was called and nothing is held. */
void loop_run(struct loop *l);
/* From any thread: end loop_run once nothing is held. */
void loop_stop(struct loop *l);
void loop_free(struct loop *l);
/* The loop this thread runs, or NULL. */
struct loop *loop_current(void);

/* On the loop's thread: watch fd for events (EPOLLIN, EPOLLOUT; edge
 * triggered with EPOLLET), or stop watching it (events 0).  w stays the
 * caller's; once unwatched it may be freed with loop_defer_free (an event
 * fetched for it in this turn still points at it). */
void loop_watch(struct loop *l, int fd, uint32_t events, struct loop_fd *w);
void loop_defer_free(struct loop *l, void *p);
/* On the loop's thread: t's deadline counts from now on (t stays the
 * caller's for the loop's life).  before(arg) runs at every turn, before
 * the loop sleeps (it may set deadlines). */
void loop_timer_add(struct loop *l, struct loop_timer *t);
void loop_before(struct loop *l, void (*before)(void *arg), void *arg);

/* From any thread: fn(arg) on the loop's thread, in the order posted.  One
 * wake-up for however many are posted before the loop gets to them. */
void loop_post(struct loop *l, void (*fn)(void *), void *arg);
/* The same, and wait until it ran. */
void loop_call(struct loop *l, void (*fn)(void *), void *arg);
/* Work under way that loop_run waits for before it ends (a transfer, a
 * commit to come back). */
void loop_hold(struct loop *l);
void loop_release(struct loop *l);

#endif
