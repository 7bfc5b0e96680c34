/* loop.c -- see loop.h.  One epoll; an eventfd for posted calls; the
 * deadlines are few (the HTTP library's, the volume client's), so they
 * are scanned, not kept in a heap.
 *
 * The eventfd is watched edge triggered and never read: each write raises
 * an edge whatever its count, and the count (one per wake-up) would take
 * millennia to reach its limit, so a wake-up costs the poster's write
 * alone, not a read on the loop too. */
#include "loop.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define MAX_TIMERS 8
#define MAX_BEFORE 4

struct post {
	void (*fn)(void *);
	void *arg;
	struct post *next;
};

struct loop {
	int ep, efd;
	struct loop_fd ew;                /* the eventfd's watcher */
	pthread_mutex_t mu;               /* posts */
	struct post *head, **tail;
	bool signalled;                   /* efd written, the posts not yet taken */
	atomic_bool stopping;
	atomic_int held;
	struct loop_timer *timers[MAX_TIMERS];
	int ntimers;
	struct {
		void (*fn)(void *);
		void *arg;
	} before[MAX_BEFORE];
	int nbefore;
	void **graves;                    /* freed at the end of the turn */
	int ngraves, cgraves;
};

static __thread struct loop *current;

struct loop *loop_current(void)
{
	return current;
}

/* Posted calls, all that came. */
static void run_posts(void *arg, uint32_t events)
{
	struct loop *l = arg;
	struct post *p;
	(void)events;
	pthread_mutex_lock(&l->mu);
	l->signalled = false;
	p = l->head;
	l->head = NULL;
	l->tail = &l->head;
	pthread_mutex_unlock(&l->mu);
	while (p) {
		struct post *next = p->next;
		p->fn(p->arg);
		free(p);
		p = next;
	}
}

struct loop *loop_new(void)
{
	struct loop *l = xcalloc(1, sizeof(*l));
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->ep < 0 || l->efd < 0)
		die("loop: epoll or eventfd: %s", strerror(errno));
	pthread_mutex_init(&l->mu, NULL);
	l->tail = &l->head;
	l->ew = (struct loop_fd){run_posts, l, false, true};
	ev.data.ptr = &l->ew;
	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, l->efd, &ev) < 0)
		die("loop: epoll_ctl: %s", strerror(errno));
	return l;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	run_posts(l, 0);   /* nothing posted is lost unrun (nor leaked) */
	close(l->ep);
	close(l->efd);
	pthread_mutex_destroy(&l->mu);
	for (int i = 0; i < l->ngraves; i++)
		free(l->graves[i]);
	free(l->graves);
	free(l);
}

void loop_watch(struct loop *l, int fd, uint32_t events, struct loop_fd *w)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};
	if (!events) {
		if (!w || w->added)
			epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
		if (w) {
			w->dead = true;
			w->added = false;
		}
		return;
	}
	w->dead = false;
	if (epoll_ctl(l->ep, w->added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) < 0)
		log_msg("loop: epoll_ctl on %d: %s", fd, strerror(errno));
	w->added = true;
}

void loop_defer_free(struct loop *l, void *p)
{
	if (l->ngraves == l->cgraves) {
		l->cgraves = l->cgraves ? 2 * l->cgraves : 16;
		l->graves = xrealloc(l->graves, sizeof(*l->graves) * (size_t)l->cgraves);
	}
	l->graves[l->ngraves++] = p;
}

void loop_timer_add(struct loop *l, struct loop_timer *t)
{
	if (l->ntimers == MAX_TIMERS)
		die("loop: more than %d timers", MAX_TIMERS);
	l->timers[l->ntimers++] = t;
}

void loop_before(struct loop *l, void (*before)(void *), void *arg)
{
	if (l->nbefore == MAX_BEFORE)
		die("loop: more than %d hooks", MAX_BEFORE);
	l->before[l->nbefore].fn = before;
	l->before[l->nbefore++].arg = arg;
}

void loop_post(struct loop *l, void (*fn)(void *), void *arg)
{
	struct post *p = xmalloc(sizeof(*p));
	bool wake;
	uint64_t one = 1;
	p->fn = fn;
	p->arg = arg;
	p->next = NULL;
	pthread_mutex_lock(&l->mu);
	*l->tail = p;
	l->tail = &p->next;
	wake = !l->signalled;
	l->signalled = true;
	pthread_mutex_unlock(&l->mu);
	if (wake && write(l->efd, &one, sizeof(one)) < 0)
		log_msg("loop: eventfd write: %s", strerror(errno));
}

struct call {
	void (*fn)(void *);
	void *arg;
	sem_t done;
};

static void run_call(void *arg)
{
	struct call *c = arg;
	c->fn(c->arg);
	sem_post(&c->done);
}

void loop_call(struct loop *l, void (*fn)(void *), void *arg)
{
	struct call c = {.fn = fn, .arg = arg};
	if (current == l) {
		fn(arg);
		return;
	}
	sem_init(&c.done, 0, 0);
	loop_post(l, run_call, &c);
	while (sem_wait(&c.done) < 0 && errno == EINTR)
		;
	sem_destroy(&c.done);
}

void loop_hold(struct loop *l)
{
	atomic_fetch_add(&l->held, 1);
}

void loop_release(struct loop *l)
{
	atomic_fetch_sub(&l->held, 1);
}

static void nothing(void *arg)
{
	(void)arg;
}

void loop_stop(struct loop *l)
{
	atomic_store(&l->stopping, true);
	loop_post(l, nothing, NULL);   /* wake it to see */
}

/* Milliseconds until the nearest deadline, -1 for none. */
static int sleep_ms(struct loop *l)
{
	uint64_t now = 0, at = 0;
	for (int i = 0; i < l->ntimers; i++)
		if (l->timers[i]->at && (!at || l->timers[i]->at < at))
			at = l->timers[i]->at;
	if (!at)
		return -1;
	now = now_ms();
	return at <= now ? 0 : at - now > 60000 ? 60000 : (int)(at - now);
}

void loop_run(struct loop *l)
{
	struct epoll_event ev[64];
	current = l;
	while (!atomic_load(&l->stopping) || atomic_load(&l->held) > 0) {
		int n, ms;
		uint64_t now;
		for (int i = 0; i < l->nbefore; i++)
			l->before[i].fn(l->before[i].arg);
		ms = sleep_ms(l);
		if (atomic_load(&l->stopping) && (ms < 0 || ms > 100))
			ms = 100;   /* what is held may need no event to end */
		n = epoll_wait(l->ep, ev, 64, ms);
		for (int i = 0; i < n; i++) {
			struct loop_fd *w = ev[i].data.ptr;
			if (!w->dead)
				w->fn(w->arg, ev[i].events);
		}
		now = now_ms();
		for (int i = 0; i < l->ntimers; i++) {
			struct loop_timer *t = l->timers[i];
			if (t->at && t->at <= now) {
				t->at = 0;
				t->fire(t->arg);
			}
		}
		for (int i = 0; i < l->ngraves; i++)
			free(l->graves[i]);
		l->ngraves = 0;
	}
	current = NULL;
}
