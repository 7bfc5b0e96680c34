/* fetch.c -- many GETs in flight on one thread, for rebuild's hundreds of
 * thousands of small listings: a queue in front of the volume client's
 * httpc_multi.  See ops.h. */
#include "ops.h"
#include "../common/httpc.h"
#include "../common/util.h"

#include <stdlib.h>
#include <unistd.h>

struct fetch_req {
	char *url;
	void *req;
	struct fetch_req *next;
};

struct ops_fetch {
	struct httpc_multi *m;
	int concurrency, active, queued;
	size_t max;
	struct fetch_req *head, *tail;
	void (*done)(void *ctx, void *req, int status, const char *body, size_t len,
		     const char *err);
	void *ctx;
};

struct ops_fetch *ops_fetch_new(int concurrency, size_t max)
{
	struct ops_fetch *f = xcalloc(1, sizeof(*f));
	f->concurrency = concurrency < 1 ? 1 : concurrency;
	f->max = max;
	f->m = httpc_multi_new(f->concurrency * 2 + 8);
	return f;
}

void ops_fetch_add(struct ops_fetch *f, const char *url, void *req)
{
	struct fetch_req *r = xmalloc(sizeof(*r));
	r->url = xstrdup(url);
	r->req = req;
	r->next = NULL;
	if (f->tail)
		f->tail->next = r;
	else
		f->head = r;
	f->tail = r;
	f->queued++;
}

static void fetch_done(void *ctx, void *req, int status, const char *body, size_t len,
		       const char *err)
{
	struct ops_fetch *f = ctx;
	f->active--;
	f->done(f->ctx, req, status, body, len, err);
}

void ops_fetch_run(struct ops_fetch *f, int (*more)(void *ctx),
		   void (*done)(void *ctx, void *req, int status, const char *body, size_t len,
				const char *err),
		   void *ctx)
{
	bool finished = false;
	f->done = done;
	f->ctx = ctx;
	for (;;) {
		while (!finished && f->active + f->queued < f->concurrency) {
			int m = more(ctx);
			if (m < 0)
				finished = true;
			if (m <= 0)
				break;
		}
		while (f->head && f->active < f->concurrency) {
			struct fetch_req *r = f->head;
			if (!(f->head = r->next))
				f->tail = NULL;
			f->queued--;
			f->active++;
			httpc_multi_get(f->m, r->url, f->max, r->req);
			free(r->url);
			free(r);
		}
		if (f->active)
			httpc_multi_poll(f->m, fetch_done, f);
		else if (finished && !f->head)
			break;
		else
			usleep(1000);   /* more() waits on someone else */
	}
}

void ops_fetch_free(struct ops_fetch *f)
{
	if (!f)
		return;
	while (f->head) {
		struct fetch_req *r = f->head;
		f->head = r->next;
		free(r->url);
		free(r);
	}
	httpc_multi_free(f->m);
	free(f);
}
