/* reaper.c -- see reaper.h. */
#include "reaper.h"
#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct reaper {
	pthread_mutex_t mu;
	struct reaper_conn ring;   /* its own head */
	uint64_t timeout_ms;
	atomic_bool stop;
	pthread_t thread;
};

static void *reap(void *arg)
{
	struct reaper *r = arg;
	while (!atomic_load(&r->stop)) {
		uint64_t now = now_ms();
		pthread_mutex_lock(&r->mu);
		for (struct reaper_conn *k = r->ring.next; k != &r->ring; k = k->next) {
			uint64_t since = atomic_load(&k->since_ms);
			char c;
			if (k->cut || k->fd < 0)
				continue;
			if (!since) {
				/* A request runs.  libmicrohttpd's edge-triggered loop
				 * misses a FIN that came with the last bytes it read: a
				 * client gone mid-upload would keep its key's lock and
				 * the temporary file until the idle timeout.  Shutting
				 * the reading side wakes the loop to see the end; an
				 * answer can still be sent. */
				if (recv(k->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
					shutdown(k->fd, SHUT_RD);
					k->cut = true;
				}
			} else if (now >= since + r->timeout_ms) {
				shutdown(k->fd, SHUT_RDWR);
				k->cut = true;
			}
		}
		pthread_mutex_unlock(&r->mu);
		usleep(250000);
	}
	return NULL;
}

struct reaper *reaper_start(uint64_t timeout_ms)
{
	struct reaper *r = xcalloc(1, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	r->ring.prev = r->ring.next = &r->ring;
	r->timeout_ms = timeout_ms;
	if (pthread_create(&r->thread, NULL, reap, r)) {
		log_msg("pthread_create failed: slow request heads are not cut off");
		pthread_mutex_destroy(&r->mu);
		free(r);
		return NULL;
	}
	return r;
}

void reaper_stop(struct reaper *r)
{
	if (!r)
		return;
	atomic_store(&r->stop, true);
	pthread_join(r->thread, NULL);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

void reaper_add(struct reaper *r, struct reaper_conn *k, int fd)
{
	k->fd = fd;
	k->cut = false;
	atomic_store(&k->since_ms, now_ms());
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	k->next = &r->ring;
	k->prev = r->ring.prev;
	r->ring.prev->next = k;
	r->ring.prev = k;
	pthread_mutex_unlock(&r->mu);
}

void reaper_remove(struct reaper *r, struct reaper_conn *k)
{
	if (!r || !k)
		return;
	pthread_mutex_lock(&r->mu);
	k->prev->next = k->next;
	k->next->prev = k->prev;
	pthread_mutex_unlock(&r->mu);
}

void reaper_waiting(struct reaper_conn *k, bool waiting)
{
	atomic_store(&k->since_ms, waiting ? now_ms() : 0);
}
