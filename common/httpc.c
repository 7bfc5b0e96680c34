/* httpc.c -- see httpc.h. */
#include "httpc.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
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
}

void httpc_thread_cleanup(void)
{
	CURL *c = tl_curl;
	tl_curl = NULL;
	if (!c)
		return;
	pthread_mutex_lock(&idle_mu);
	if (nidle < IDLE_MAX) {
		idle[nidle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&idle_mu);
	if (c)
		curl_easy_cleanup(c);
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
