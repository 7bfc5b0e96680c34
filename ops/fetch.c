/* fetch.c -- rebuild's many listings in flight on one thread, through the
 * volume client's pipelined GETs (common/vconn.h: vconn_get) on a loop of
 * this thread's own.
 *
 * A listing costs a volume little (nginx: ~45 us of CPU), so what the
 * client spends per request decides a rebuild on nginx, where a key costs
 * about three listings.  libcurl's multi spent ~47 us of CPU per listing,
 * a whole core for the one listing thread.  Pipelined on kept-alive
 * connections, many GETs go out in one send and their answers come back
 * in a few recvs, on both sides.  Here: how many are in flight, at most
 * HOST_MAX a volume (what its connections pipeline: vconn.h), the volumes
 * served in turn, and asking the caller for more. */
#include "ops.h"
#include "../common/util.h"
#include "../common/vconn.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOST_MAX 64           /* in flight to one volume: 4 connections x 16 */

struct fget {
	struct ops_fetch *f;
	struct fhost *h;
	char *url;
	void *req;
	struct fget *next;
};

/* A volume's GETs waiting for their turn. */
struct fhost {
	char *name;               /* "host:port" */
	struct fget *head, *tail;
	int inflight;
	struct fhost *next;
};

struct ops_fetch {
	int concurrency, inflight, queued;
	struct fhost *hosts, *turn;   /* turn: the volume served next */
	int nhosts;
	bool finished;            /* more() said -1 */
	bool busy;                /* in dispatch */
	int (*more)(void *ctx);
	void (*done)(void *ctx, void *req, int status, const char *body, size_t len,
		     const char *err);
	void *ctx;
};

struct ops_fetch *ops_fetch_new(int concurrency)
{
	struct ops_fetch *f = xcalloc(1, sizeof(*f));
	f->concurrency = concurrency < 1 ? 1 : concurrency;
	return f;
}

static void fetched(void *arg, int status, const char *body, size_t len, const char *err);

/* Start waiting GETs, the volumes in turn, while fewer than concurrency
 * are in flight. */
static void dispatch(struct ops_fetch *f)
{
	int idle = 0;   /* volumes in a row that could take none */
	if (f->busy)
		return;   /* called from a GET answered within it: it goes on */
	f->busy = true;
	while (f->queued && f->inflight < f->concurrency && f->hosts) {
		struct fhost *h = f->turn ? f->turn : f->hosts;
		struct fget *g = h->head;
		f->turn = h->next;
		if (!g || h->inflight >= HOST_MAX) {
			if (++idle >= f->nhosts)
				break;   /* each volume's turn came: none could take one */
			continue;
		}
		idle = 0;
		if (!(h->head = g->next))
			h->tail = NULL;
		f->queued--;
		f->inflight++;
		h->inflight++;
		if (vconn_get(g->url, OPS_LIST_MAX, fetched, g) < 0) {
			char err[OPS_ERR];
			snprintf(err, sizeof(err), "%.200s: not a GET this thread can make", g->url);
			fetched(g, -1, "", 0, err);
		}
	}
	f->busy = false;
}

/* Ask for work while fewer than concurrency GETs are in flight or waiting. */
static void refill(struct ops_fetch *f)
{
	dispatch(f);
	while (!f->finished && f->inflight + f->queued < f->concurrency) {
		int n = f->more(f->ctx);
		if (n < 0)
			f->finished = true;
		if (n <= 0)
			break;
		dispatch(f);
	}
}

static void fetched(void *arg, int status, const char *body, size_t len, const char *err)
{
	struct fget *g = arg;
	struct ops_fetch *f = g->f;
	void *req = g->req;
	g->h->inflight--;
	free(g->url);
	free(g);
	f->inflight--;
	f->done(f->ctx, req, status, body, len, err);
	refill(f);
}

void ops_fetch_add(struct ops_fetch *f, const char *url, void *req)
{
	struct fget *g = xcalloc(1, sizeof(*g));
	const char *p = strstr(url, "://") ? strstr(url, "://") + 3 : url;
	size_t n = strcspn(p, "/?");
	struct fhost *h;
	for (h = f->hosts; h && (strlen(h->name) != n || memcmp(h->name, p, n)); h = h->next)
		;
	if (!h) {
		h = xcalloc(1, sizeof(*h));
		h->name = xstrndup(p, n);
		h->next = f->hosts;
		f->hosts = h;
		f->nhosts++;
	}
	g->f = f;
	g->h = h;
	g->url = xstrdup(url);
	g->req = req;
	if (h->tail)
		h->tail->next = g;
	else
		h->head = g;
	h->tail = g;
	f->queued++;
}

void ops_fetch_run(struct ops_fetch *f, int (*more)(void *ctx),
		   void (*done)(void *ctx, void *req, int status, const char *body, size_t len,
				const char *err),
		   void *ctx)
{
	f->more = more;
	f->done = done;
	f->ctx = ctx;
	f->finished = false;
	for (;;) {
		refill(f);
		if (f->inflight)
			vconn_run();   /* until every GET is answered; done() adds more */
		else if (f->finished && !f->queued)
			break;
		else
			usleep(1000);   /* more() waits on someone else */
	}
}

void ops_fetch_free(struct ops_fetch *f)
{
	while (f->hosts) {   /* their queues are empty: ops_fetch_run returned */
		struct fhost *h = f->hosts;
		f->hosts = h->next;
		free(h->name);
		free(h);
	}
	free(f);
}
