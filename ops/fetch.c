/* fetch.c -- many GETs in flight on one thread (curl multi), for
 * rebuild's hundreds of thousands of small listings.  See ops.h. */
#include "ops.h"
#include "../common/util.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fetch_req {
	char *url;
	void *req;
	struct fetch_req *next;
};

struct fetch_xfer {
	CURL *h;
	struct fetch_req *rq;
	struct buf body;
	size_t max;
	bool over;
	char err[CURL_ERROR_SIZE];
	struct fetch_xfer *next;     /* free list */
};

struct ops_fetch {
	CURLM *multi;
	int concurrency, active, queued;
	size_t max;
	struct fetch_req *head, *tail;
	struct fetch_xfer *free;
};

struct ops_fetch *ops_fetch_new(int concurrency, size_t max)
{
	struct ops_fetch *f = xcalloc(1, sizeof(*f));
	f->multi = curl_multi_init();
	if (!f->multi)
		die("curl_multi_init failed");
	f->concurrency = concurrency < 1 ? 1 : concurrency;
	f->max = max;
	curl_multi_setopt(f->multi, CURLMOPT_MAXCONNECTS, (long)f->concurrency * 2 + 8);
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

static size_t fetch_write(char *p, size_t size, size_t n, void *ud)
{
	struct fetch_xfer *x = ud;
	size_t len = size * n;
	if (x->max && x->body.len + len > x->max) {
		x->over = true;
		return 0;
	}
	buf_append(&x->body, p, len);
	return len;
}

static void fetch_start(struct ops_fetch *f)
{
	struct fetch_req *r = f->head;
	struct fetch_xfer *x = f->free;
	f->head = r->next;
	if (!f->head)
		f->tail = NULL;
	f->queued--;
	if (x) {
		f->free = x->next;
	} else {
		x = xcalloc(1, sizeof(*x));
		x->h = curl_easy_init();
		if (!x->h)
			die("curl_easy_init failed");
		curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, fetch_write);
		curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
		curl_easy_setopt(x->h, CURLOPT_PRIVATE, (char *)x);
		curl_easy_setopt(x->h, CURLOPT_ERRORBUFFER, x->err);
		curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, 120000L);
		curl_easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	}
	x->rq = r;
	x->max = f->max;
	x->over = false;
	x->err[0] = '\0';
	x->body.len = 0;
	curl_easy_setopt(x->h, CURLOPT_URL, r->url);
	curl_multi_add_handle(f->multi, x->h);
	f->active++;
}

void ops_fetch_run(struct ops_fetch *f, int (*more)(void *ctx),
		   void (*done)(void *ctx, void *req, int status, const char *body, size_t len,
				const char *err),
		   void *ctx)
{
	bool finished = false;
	for (;;) {
		CURLMsg *msg;
		int q, running;
		while (!finished && f->active + f->queued < f->concurrency) {
			int m = more(ctx);
			if (m < 0)
				finished = true;
			if (m <= 0)
				break;
		}
		while (f->head && f->active < f->concurrency)
			fetch_start(f);
		if (!f->active) {
			if (finished && !f->head)
				break;
			usleep(1000);   /* more() waits on someone else */
			continue;
		}
		curl_multi_perform(f->multi, &running);
		while ((msg = curl_multi_info_read(f->multi, &q))) {
			struct fetch_xfer *x;
			long st = -1;
			char *priv;
			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
			x = (struct fetch_xfer *)priv;
			if (msg->data.result == CURLE_OK)
				curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &st);
			else if (x->over)
				snprintf(x->err, sizeof(x->err), "listing larger than %zu bytes", f->max);
			else if (!x->err[0])
				snprintf(x->err, sizeof(x->err), "%s",
					 curl_easy_strerror(msg->data.result));
			curl_multi_remove_handle(f->multi, x->h);
			f->active--;
			done(ctx, x->rq->req, (int)st, x->body.data ? x->body.data : "", x->body.len,
			     x->err);
			free(x->rq->url);
			free(x->rq);
			x->rq = NULL;
			x->next = f->free;
			f->free = x;
		}
		if (f->active)
			curl_multi_poll(f->multi, NULL, 0, 100, NULL);
	}
}

void ops_fetch_free(struct ops_fetch *f)
{
	if (!f)
		return;
	while (f->free) {
		struct fetch_xfer *x = f->free;
		f->free = x->next;
		curl_easy_cleanup(x->h);
		buf_free(&x->body);
		free(x);
	}
	while (f->head) {
		struct fetch_req *r = f->head;
		f->head = r->next;
		free(r->url);
		free(r);
	}
	curl_multi_cleanup(f->multi);
	free(f);
}
