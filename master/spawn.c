/* spawn.c -- see spawn.h.
 *
 * Idle threads wait on a stack, each on a semaphore of its own: spawn pops
 * the one that ran last (its stack and connections are the warmest), hands
 * it the job and posts its semaphore, which wakes exactly that thread.  No
 * thread shares a condition variable, so a busy server does not spend its
 * time with woken threads fighting over one lock. */
#include "spawn.h"
#include "../common/httpc.h"
#include "../common/util.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <time.h>

#define IDLE_SECONDS 30

struct worker {
	struct worker *next;     /* on the idle stack */
	sem_t go;                /* posted when fn is set */
	void (*fn)(void *);      /* the job; NULL while idle */
	void *arg;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct worker *idle;
static int busy;

/* Call with mu held: take w off the idle stack if it is there. */
static bool idle_remove(struct worker *w)
{
	for (struct worker **pp = &idle; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			return true;
		}
	}
	return false;
}

static void *loop(void *arg)
{
	struct worker *w = arg;
	for (;;) {
		struct timespec until;
		w->fn(w->arg);
		pthread_mutex_lock(&mu);
		w->fn = NULL;
		busy--;
		w->next = idle;
		idle = w;
		pthread_mutex_unlock(&mu);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += IDLE_SECONDS;
		while (sem_timedwait(&w->go, &until) < 0) {
			bool gone;
			if (errno == EINTR)
				continue;
			pthread_mutex_lock(&mu);   /* timed out: leave, unless just handed a job */
			gone = idle_remove(w);
			pthread_mutex_unlock(&mu);
			if (gone)
				goto out;
			while (sem_wait(&w->go) < 0)
				;
			break;
		}
	}
out:
	sem_destroy(&w->go);
	free(w);
	httpc_thread_cleanup();
	return NULL;
}

int spawn(void (*fn)(void *), void *arg)
{
	struct worker *w;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	pthread_mutex_lock(&mu);
	busy++;
	w = idle;
	if (w) {
		idle = w->next;
		w->fn = fn;
		w->arg = arg;
	}
	pthread_mutex_unlock(&mu);
	if (w) {
		sem_post(&w->go);
		return 0;
	}
	w = xcalloc(1, sizeof(*w));
	w->fn = fn;
	w->arg = arg;
	sem_init(&w->go, 0, 0);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 512 * 1024); /* many may run at once */
	rc = pthread_create(&t, &attr, loop, w);
	pthread_attr_destroy(&attr);
	if (rc) {
		sem_destroy(&w->go);
		free(w);
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
