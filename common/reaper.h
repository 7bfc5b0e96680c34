/* reaper.h -- cut off a client connection that takes too long to send a
 * request head.  One dribbling its head (slowloris) is never idle, so
 * libmicrohttpd's own timeout never fires; nginx's client_header_timeout
 * is the model.  The front (front.c) keeps one entry per connection and
 * says when a head is awaited; the reaper's thread shuts the socket down
 * once a head has been awaited for the timeout, and the connection's own
 * thread then sees the end and closes it.  Every 250 ms it also looks
 * whether the client of a running request has gone (an upload cut off),
 * which libmicrohttpd may not notice, and wakes the connection to see it. */
#ifndef MKV_REAPER_H
#define MKV_REAPER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct reaper_conn {
	struct reaper_conn *prev, *next;
	int fd;
	atomic_ullong since_ms;   /* waiting for a request head since (0: a request runs) */
	bool cut;
};

/* Starts the process's one reaper thread; when there is none (logged),
 * nothing is cut. */
void reaper_start(uint64_t timeout_ms);
void reaper_stop(void);
/* Watch k (the caller's, until reaper_remove) for fd, awaiting a head
 * from now (not watched by any thread when none runs). */
void reaper_add(struct reaper_conn *k, int fd);
void reaper_remove(struct reaper_conn *k);
/* A head is awaited from now (true), or is in (false). */
void reaper_waiting(struct reaper_conn *k, bool waiting);

#endif
