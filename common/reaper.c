/* reaper.c -- see reaper.h. */
#include "reaper.h"
#include "util.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

static struct {
	pthread_mutex_t mu;
	struct reaper_conn ring;   /* its own head */
	uint64_t timeout_ms;
	atomic_bool on, stop;
	pthread_t thread;
} r = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *reap(void *arg)
{
	(void)arg;
	while (!atomic_load(&r.stop)) {
		uint64_t now = now_ms();
		pthread_mutex_lock(&r.mu);
		for (struct reaper_conn *k = r.ring.next; k != &r.ring; k = k->next) {
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
			} else if (now >= since + r.timeout_ms) {
				shutdown(k->fd, SHUT_RDWR);
				k->cut = true;
			}
		}
		pthread_mutex_unlock(&r.mu);
		usleep(250000);
	}
	return NULL;
}

void reaper_start(uint64_t timeout_ms)
{
	r.ring.prev = r.ring.next = &r.ring;
	r.timeout_ms = timeout_ms;
	atomic_store(&r.stop, false);
	if (pthread_create(&r.thread, NULL, reap, NULL))
		log_msg("pthread_create failed: slow request heads are not cut off");
	else
		atomic_store(&r.on, true);
}

void reaper_stop(void)
{
	if (!atomic_exchange(&r.on, false))
		return;
	atomic_store(&r.stop, true);
	pthread_join(r.thread, NULL);
}

void reaper_add(struct reaper_conn *k, int fd)
{
	k->fd = fd;
	k->cut = false;
	k->next = NULL;
	atomic_store(&k->since_ms, now_ms());
	if (!atomic_load(&r.on))
		return;
	pthread_mutex_lock(&r.mu);
	k->next = &r.ring;
	k->prev = r.ring.prev;
	r.ring.prev->next = k;
	r.ring.prev = k;
	pthread_mutex_unlock(&r.mu);
}

void reaper_remove(struct reaper_conn *k)
{
	if (!k->next)
		return;   /* never on the ring */
	pthread_mutex_lock(&r.mu);
	k->prev->next = k->next;
	k->next->prev = k->prev;
	pthread_mutex_unlock(&r.mu);
}

void reaper_waiting(struct reaper_conn *k, bool waiting)
{
	atomic_store(&k->since_ms, waiting ? now_ms() : 0);
}
