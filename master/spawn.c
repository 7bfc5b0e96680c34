/* spawn.c -- see spawn.h. */
#include "spawn.h"
#include "../common/httpc.h"
#include "../common/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define IDLE_SECONDS 30

struct job {
	struct job *next;
	void (*fn)(void *);
	void *arg;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct job *head, **tail = &head;
static int idle, queued, busy;

static void *loop(void *arg)
{
	struct job *j = arg;
	for (;;) {
		struct timespec until;
		j->fn(j->arg);
		free(j);
		j = NULL;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += IDLE_SECONDS;
		pthread_mutex_lock(&mu);
		busy--;
		idle++;
		while (!head) {
			if (pthread_cond_timedwait(&cv, &mu, &until) == ETIMEDOUT && !head)
				break;
		}
		idle--;
		if (head) {
			j = head;
			head = j->next;
			if (!head)
				tail = &head;
			queued--;
		}
		pthread_mutex_unlock(&mu);
		if (!j)
			break;
	}
	httpc_thread_cleanup();
	return NULL;
}

int spawn(void (*fn)(void *), void *arg)
{
	struct job *j = xmalloc(sizeof(*j));
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	j->fn = fn;
	j->arg = arg;
	j->next = NULL;
	pthread_mutex_lock(&mu);
	busy++;
	if (idle > queued) {      /* someone is waiting for exactly this */
		*tail = j;
		tail = &j->next;
		queued++;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
		return 0;
	}
	pthread_mutex_unlock(&mu);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 512 * 1024); /* many may run at once */
	rc = pthread_create(&t, &attr, loop, j);
	pthread_attr_destroy(&attr);
	if (rc) {
		free(j);
		pthread_mutex_lock(&mu);
		busy--;
		pthread_mutex_unlock(&mu);
		return -1;
	}
	return 0;
}

int spawn_busy(void)
{
	int n;
	pthread_mutex_lock(&mu);
	n = busy;
	pthread_mutex_unlock(&mu);
	return n;
}
