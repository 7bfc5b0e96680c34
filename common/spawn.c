/* spawn.c -- see spawn.h.
 *
 * Idle threads wait on a stack, each on a semaphore of its own: spawn pops
 * the one that ran last (its stack and connections are the warmest), hands
 * it the job and posts its semaphore, which wakes exactly that thread.  No
 * thread shares a condition variable, so a busy server does not spend its
 * time with woken threads fighting over one lock. */
#include "spawn.h"
#include "httpc.h"
#include "util.h"

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
	bool counted;            /* in busy */
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

/* Wait for the next job; false when none came for IDLE_SECONDS. */
static bool wait_job(struct worker *w)
{
	struct timespec until;
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
			return false;
		while (sem_wait(&w->go) < 0)
			;
		break;
	}
	return true;
}

static void *loop(void *arg)
{
	struct worker *w = arg;
	do {
		w->fn(w->arg);
		pthread_mutex_lock(&mu);
		w->fn = NULL;
		busy -= w->counted;
		w->next = idle;
		idle = w;
		pthread_mutex_unlock(&mu);
	} while (wait_job(w));
	sem_destroy(&w->go);
	free(w);
	httpc_thread_cleanup();
	return NULL;
}

static int start(void (*fn)(void *), void *arg, bool counted)
{
	struct worker *w;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	pthread_mutex_lock(&mu);
	busy += counted;
	w = idle;
	if (w) {
		idle = w->next;
		w->fn = fn;
		w->arg = arg;
		w->counted = counted;
	}
	pthread_mutex_unlock(&mu);
	if (w) {
		sem_post(&w->go);
		return 0;
	}
	w = xcalloc(1, sizeof(*w));
	w->fn = fn;
	w->arg = arg;
	w->counted = counted;
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
		busy -= counted;
		pthread_mutex_unlock(&mu);
		return -1;
	}
	return 0;
}

int spawn(void (*fn)(void *), void *arg)
{
	return start(fn, arg, true);
}

int spawn_busy(void)
{
	int n;
	pthread_mutex_lock(&mu);
	n = busy;
	pthread_mutex_unlock(&mu);
	return n;
}

struct spawn_queue {
	pthread_mutex_t mu;
	pthread_cond_t cv;        /* an item pushed, the end, a worker gone */
	void **ring;
	size_t cap, head, n;
	int workers;              /* serving, not yet returned */
	bool ended;
	void (*fn)(void *ctx, void *item);
	void *ctx;
};

static void queue_job(void *arg)
{
	struct spawn_queue *q = arg;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		void *item;
		while (!q->n && !q->ended)
			pthread_cond_wait(&q->cv, &q->mu);
		if (!q->n)
			break;
		item = q->ring[q->head];
		q->head = (q->head + 1) % q->cap;
		q->n--;
		pthread_mutex_unlock(&q->mu);
		q->fn(q->ctx, item);
		pthread_mutex_lock(&q->mu);
	}
	q->workers--;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);   /* the last touch: q may be freed now */
}

struct spawn_queue *spawn_queue(int n, void (*fn)(void *ctx, void *item), void *ctx)
{
	struct spawn_queue *q = xcalloc(1, sizeof(*q));
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	q->fn = fn;
	q->ctx = ctx;
	q->workers = n;
	for (int i = 0; i < n; i++)
		if (start(queue_job, q, false) < 0)
			die("pthread_create failed");
	return q;
}

void spawn_queue_push(struct spawn_queue *q, void *item)
{
	pthread_mutex_lock(&q->mu);
	if (q->n == q->cap) {   /* grow, the items in order from 0 */
		void **ring = xcalloc(q->cap ? 2 * q->cap : 64, sizeof(*ring));
		for (size_t i = 0; i < q->n; i++)
			ring[i] = q->ring[(q->head + i) % q->cap];
		free(q->ring);
		q->ring = ring;
		q->head = 0;
		q->cap = q->cap ? 2 * q->cap : 64;
	}
	q->ring[(q->head + q->n++) % q->cap] = item;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

void spawn_queue_end(struct spawn_queue *q)
{
	pthread_mutex_lock(&q->mu);
	q->ended = true;
	pthread_cond_broadcast(&q->cv);
	while (q->workers > 0)
		pthread_cond_wait(&q->cv, &q->mu);
	pthread_mutex_unlock(&q->mu);
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	free(q->ring);
	free(q);
}
