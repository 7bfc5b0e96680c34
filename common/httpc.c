/* httpc.c -- see httpc.h. */
#include "httpc.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A thread keeps its handle (and so its connections to the volumes) until
 * httpc_thread_cleanup, which parks it here for the next short-lived
 * thread: a request thread then reuses warm connections instead of
 * connecting anew. */
#define IDLE_MAX 64
static __thread CURL *tl_curl;
static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static CURL *idle[IDLE_MAX];
static int nidle;

/* A fan-out's multi handle (its connection cache) and easy handles, kept
 * per thread and parked the same way. */
struct fan {
	CURLM *m;
	CURL **h;
	int nh;
};
static __thread struct fan *tl_fan;
static struct fan *idle_fan[IDLE_MAX];
static int nidle_fan;
static struct curl_slist *fan_hdrs;

struct sink {
	struct buf *b;
	size_t max;
};

struct source {
	const char *p;
	size_t left;
};

void httpc_global_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	/* A body goes with the head: no 100-continue round trip, and no
	 * Content-Type that volumes would ignore anyway. */
	fan_hdrs = curl_slist_append(NULL, "Expect:");
	fan_hdrs = curl_slist_append(fan_hdrs, "Content-Type:");
}

static void fan_free(struct fan *f)
{
	for (int i = 0; i < f->nh; i++)
		curl_easy_cleanup(f->h[i]);
	curl_multi_cleanup(f->m);
	free(f->h);
	free(f);
}

void httpc_thread_cleanup(void)
{
	CURL *c = tl_curl;
	struct fan *f = tl_fan;
	tl_curl = NULL;
	tl_fan = NULL;
	pthread_mutex_lock(&idle_mu);
	if (c && nidle < IDLE_MAX) {
		idle[nidle++] = c;
		c = NULL;
	}
	if (f && nidle_fan < IDLE_MAX) {
		idle_fan[nidle_fan++] = f;
		f = NULL;
	}
	pthread_mutex_unlock(&idle_mu);
	if (c)
		curl_easy_cleanup(c);
	if (f)
		fan_free(f);
}

static CURL *handle(void)
{
	if (tl_curl)
		return tl_curl;
	pthread_mutex_lock(&idle_mu);
	if (nidle)
		tl_curl = idle[--nidle];
	pthread_mutex_unlock(&idle_mu);
	if (!tl_curl)
		tl_curl = curl_easy_init();
	if (!tl_curl)
		die("curl_easy_init failed");
	return tl_curl;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
	struct sink *s = ud;
	size_t len = size * n;
	if (!s->b)
		return len;
	if (s->max && s->b->len + len > s->max)
		return 0;
	buf_append(s->b, p, len);
	return len;
}

static size_t on_read(char *p, size_t size, size_t n, void *ud)
{
	struct source *s = ud;
	size_t len = size * n;
	if (len > s->left)
		len = s->left;
	memcpy(p, s->p, len);
	s->p += len;
	s->left -= len;
	return len;
}

int httpc_do(const char *method, const char *url, const void *body, size_t bodylen,
	     long timeout_ms, struct buf *resp, size_t resp_max, char *err)
{
	struct sink sink = {resp, resp_max};
	struct source src = {body, bodylen};
	char errbuf[CURL_ERROR_SIZE] = "";
	long status = -1;
	CURL *c;
	CURLcode rc;

	c = handle();
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms ? timeout_ms : 10000L);
	if (!strcmp(method, "HEAD")) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(method, "PUT")) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, &src);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)bodylen);
	} else if (strcmp(method, "GET")) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	else if (err)
		snprintf(err, 256, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
	if (rc != CURLE_OK)
		return -1;
	return (int)status;
}

/* This thread's fan-out handles, with at least n easy handles. */
static struct fan *fan_get(int n)
{
	struct fan *f = tl_fan;
	if (!f) {
		pthread_mutex_lock(&idle_mu);
		if (nidle_fan)
			f = idle_fan[--nidle_fan];
		pthread_mutex_unlock(&idle_mu);
	}
	if (!f) {
		f = xcalloc(1, sizeof(*f));
		f->m = curl_multi_init();
		if (!f->m)
			die("curl_multi_init failed");
		curl_multi_setopt(f->m, CURLMOPT_MAXCONNECTS, 64L);
	}
	tl_fan = f;
	if (f->nh < n) {
		f->h = xrealloc(f->h, sizeof(*f->h) * (size_t)n);
		for (; f->nh < n; f->nh++)
			if (!(f->h[f->nh] = curl_easy_init()))
				die("curl_easy_init failed");
	}
	return f;
}

void httpc_fanout(const char *method, struct httpc_req *reqs, int n, const void *body,
		  size_t bodylen, long timeout_ms)
{
	struct fan *f = fan_get(n);
	char (*errbuf)[CURL_ERROR_SIZE] = xmalloc(sizeof(*errbuf) * (size_t)(n ? n : 1));
	struct sink drop = {NULL, 0};
	int running = 1;

	for (int i = 0; i < n; i++) {
		CURL *c = f->h[i];
		reqs[i].status = -1;
		reqs[i].timed_out = false;
		reqs[i].err[0] = errbuf[i][0] = '\0';
		curl_easy_reset(c);
		curl_easy_setopt(c, CURLOPT_URL, reqs[i].url);
		curl_easy_setopt(c, CURLOPT_PRIVATE, (char *)&reqs[i]);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf[i]);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &drop);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms ? timeout_ms : 10000L);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, fan_hdrs);
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
		if (!strcmp(method, "HEAD"))
			curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
		if (body) {
			curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
			curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)bodylen);
		}
		curl_multi_add_handle(f->m, c);
	}
	while (running) {
		CURLMsg *msg;
		int left;
		curl_multi_perform(f->m, &running);
		while ((msg = curl_multi_info_read(f->m, &left))) {
			struct httpc_req *r;
			long status = -1;
			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
			if (msg->data.result == CURLE_OK) {
				curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
				r->status = (int)status;
			} else {
				int i = (int)(r - reqs);
				r->timed_out = msg->data.result == CURLE_OPERATION_TIMEDOUT;
				snprintf(r->err, sizeof(r->err), "%s",
					 errbuf[i][0] ? errbuf[i] : curl_easy_strerror(msg->data.result));
			}
		}
		if (running)
			curl_multi_poll(f->m, NULL, 0, 1000, NULL);
	}
	for (int i = 0; i < n; i++)
		curl_multi_remove_handle(f->m, f->h[i]);
	free(errbuf);
}
