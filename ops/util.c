/* util.c -- worker pool, progress line and small helpers shared by
 * rebuild and rebalance.  See ops.h. */
#include "ops.h"
#include "../common/httpc.h"
#include "../common/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- worker pool ---- */

struct pool {
	void (*fn)(void *ctx, size_t i);
	void *ctx;
	size_t n;
	atomic_size_t next;
};

static void *pool_thread(void *arg)
{
	struct pool *p = arg;
	for (;;) {
		size_t i = atomic_fetch_add(&p->next, 1);
		if (i >= p->n)
			break;
		p->fn(p->ctx, i);
	}
	httpc_thread_cleanup();
	return NULL;
}

void ops_pool_run(int workers, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
	struct pool p = {.fn = fn, .ctx = ctx, .n = n};
	pthread_t *t;
	if (workers < 1)
		workers = 1;
	if ((size_t)workers > n)
		workers = n ? (int)n : 1;
	atomic_init(&p.next, 0);
	t = xcalloc((size_t)workers, sizeof(*t));
	for (int i = 0; i < workers; i++)
		if (pthread_create(&t[i], NULL, pool_thread, &p))
			die("pthread_create failed");
	for (int i = 0; i < workers; i++)
		pthread_join(t[i], NULL);
	free(t);
}

struct ops_threads {
	int n;
	void (*fn)(void *ctx);
	void *ctx;
	pthread_t t[];
};

static void *plain_thread(void *arg)
{
	struct ops_threads *t = arg;
	t->fn(t->ctx);
	httpc_thread_cleanup();
	return NULL;
}

struct ops_threads *ops_threads_start(int workers, void (*fn)(void *ctx), void *ctx)
{
	struct ops_threads *t;
	if (workers < 1)
		workers = 1;
	t = xcalloc(1, sizeof(*t) + (size_t)workers * sizeof(pthread_t));
	t->n = workers;
	t->fn = fn;
	t->ctx = ctx;
	for (int i = 0; i < workers; i++)
		if (pthread_create(&t->t[i], NULL, plain_thread, t))
			die("pthread_create failed");
	return t;
}

void ops_threads_join(struct ops_threads *t)
{
	for (int i = 0; i < t->n; i++)
		pthread_join(t->t[i], NULL);
	free(t);
}

/* ---- progress line ---- */

struct ops_progress {
	void (*line)(void *ctx, char *out, size_t n);
	void *ctx;
	pthread_t t;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, running;
};

static void *progress_thread(void *arg)
{
	struct ops_progress *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		char text[256];
		cond_wait_ms(&p->cv, &p->mu, 250);
		if (p->stop)
			break;
		p->line(p->ctx, text, sizeof(text));
		fprintf(stderr, "\r\033[K%s", text);
		fflush(stderr);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

struct ops_progress *ops_progress_start(void (*line)(void *ctx, char *out, size_t n), void *ctx)
{
	struct ops_progress *p = xcalloc(1, sizeof(*p));
	p->line = line;
	p->ctx = ctx;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (isatty(2) && pthread_create(&p->t, NULL, progress_thread, p) == 0)
		p->running = true;
	return p;
}

void ops_progress_stop(struct ops_progress *p)
{
	if (!p)
		return;
	if (p->running) {
		pthread_mutex_lock(&p->mu);
		p->stop = true;
		pthread_cond_signal(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->t, NULL);
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

void ops_fmt_duration(uint64_t ms, char *out, size_t n)
{
	if (ms < 60000)
		snprintf(out, n, "%.1f s", (double)ms / 1000);
	else if (ms < 3600000)
		snprintf(out, n, "%u min %u s", (unsigned)(ms / 60000), (unsigned)(ms / 1000 % 60));
	else
		snprintf(out, n, "%u h %u min", (unsigned)(ms / 3600000),
			 (unsigned)(ms / 60000 % 60));
}

