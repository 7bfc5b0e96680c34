/* fetch.c -- rebuild's many listings in flight on one thread, through the
 * volume client's pipelined GETs (common/vconn.h: vconn_get) on a loop of
 * this thread's own.
 *
 * A listing costs a volume little (nginx: ~45 us of CPU), so what the
 * client spends per request decides a rebuild on nginx, where a key costs
 * about three listings.  libcurl's multi spent ~47 us of CPU per listing,
 * a whole core for the one listing thread.  Pipelined on kept-alive
 * connections, many GETs go out in one send and their answers come back
 * in a few recvs, on both sides.  Here: only how many are in flight, and
 * asking the caller for more. */
#include "ops.h"
#include "../common/util.h"
#include "../common/vconn.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct ops_fetch {
	int concurrency, inflight;
	size_t max;
	bool finished;            /* more() said -1 */
	int (*more)(void *ctx);
	void (*done)(void *ctx, void *req, int status, const char *body, size_t len,
		     const char *err);
	void *ctx;
};

struct fget {
	struct ops_fetch *f;
	void *req;
};

struct ops_fetch *ops_fetch_new(int concurrency, size_t max)
{
	struct ops_fetch *f = xcalloc(1, sizeof(*f));
	f->concurrency = concurrency < 1 ? 1 : concurrency;
	f->max = max;
	return f;
}

/* Ask for work while fewer than concurrency GETs are in flight. */
static void refill(struct ops_fetch *f)
{
	while (!f->finished && f->inflight < f->concurrency) {
		int n = f->more(f->ctx);
		if (n < 0)
			f->finished = true;
		if (n <= 0)
			break;
	}
}

static void fetched(void *arg, int status, const char *body, size_t len, const char *err)
{
	struct fget *g = arg;
	struct ops_fetch *f = g->f;
	void *req = g->req;
	free(g);
	f->inflight--;
	f->done(f->ctx, req, status, body, len, err);
	refill(f);
}

void ops_fetch_add(struct ops_fetch *f, const char *url, void *req)
{
	struct fget *g = xcalloc(1, sizeof(*g));
	char err[300];
	g->f = f;
	g->req = req;
	f->inflight++;
	if (vconn_get(url, f->max, fetched, g) < 0) {
		snprintf(err, sizeof(err), "%.200s: not a GET this thread can make", url);
		fetched(g, -1, "", 0, err);
	}
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
		else if (f->finished)
			break;
		else
			usleep(1000);   /* more() waits on someone else */
	}
}

void ops_fetch_free(struct ops_fetch *f)
{
	free(f);
}
