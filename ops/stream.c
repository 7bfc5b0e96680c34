/* stream.c -- streamed GETs and PUTs of whole blobs and files, a HEAD
 * that reads the headers the tools need, and the -rate token bucket: what
 * verify, put and get share.  See ops.h. */
#include "ops.h"
#include "../common/httpc.h"
#include "../common/placement.h"
#include "../common/util.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* ---- -rate ---- */

static pthread_mutex_t rate_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rate_bps;        /* 0: no cap */
static double rate_next;         /* when the bytes taken so far are paid for (s) */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void ops_rate_init(uint64_t bytes_per_s)
{
	rate_bps = bytes_per_s;
	rate_next = now_s();
}

/* Every reader books its bytes on one timeline and sleeps until its slot:
 * over any stretch the total stays at rate_bps (plus one read's worth). */
void ops_rate_take(uint64_t n)
{
	double now, wait;
	if (!rate_bps || !n)
		return;
	pthread_mutex_lock(&rate_mu);
	now = now_s();
	if (rate_next < now - 1)
		rate_next = now - 1;     /* an idle second earns at most one second's bytes */
	rate_next += (double)n / (double)rate_bps;
	wait = rate_next - now;
	pthread_mutex_unlock(&rate_mu);
	if (wait > 0)
		usleep((useconds_t)(wait * 1e6));
}

/* ---- one curl handle per thread ---- */

static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void handle_free(void *h)
{
	curl_easy_cleanup(h);
}

static void key_init(void)
{
	if (pthread_key_create(&key, handle_free))
		die("pthread_key_create failed");
}

static CURL *handle(void)
{
	CURL *h;
	pthread_once(&once, key_init);
	h = pthread_getspecific(key);
	if (!h) {
		if (!(h = curl_easy_init()))
			die("curl_easy_init failed");
		pthread_setspecific(key, h);
	}
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	return h;
}


/* ---- headers ---- */

/* Copy the value of header line p[0..len) into out when it is `name`. */
static bool header_is(const char *p, size_t len, const char *name, char *out, size_t n)
{
	size_t nl = strlen(name);
	const char *v, *end = p + len;
	if (len <= nl || strncasecmp(p, name, nl) || p[nl] != ':')
		return false;
	v = p + nl + 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	snprintf(out, n, "%.*s", (int)(end - v), v);
	return true;
}

struct head {
	struct ops_head_info *info;
	bool first_done;            /* the first response's headers are over */
};

static size_t head_header(char *p, size_t size, size_t n, void *ud)
{
	struct head *h = ud;
	struct ops_head_info *i = h->info;
	size_t len = size * n;
	char num[32];
	if (h->first_done)
		return len;
	if (len <= 2 && (p[0] == '\r' || p[0] == '\n')) {
		h->first_done = true;
		return len;
	}
	if (header_is(p, len, "Content-Length", num, sizeof(num)))
		i->size = (int64_t)strtoll(num, NULL, 10);
	else if (!header_is(p, len, "Content-Md5", i->md5, sizeof(i->md5)) &&
		 !header_is(p, len, "Key-Volumes", i->volumes, sizeof(i->volumes)) &&
		 !header_is(p, len, "Key-Balance", i->balance, sizeof(i->balance)))
		header_is(p, len, "Last-Modified", i->lastmod, sizeof(i->lastmod));
	return len;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p, (void)ud;
	return size * n;
}

int ops_head_info(const char *url, long timeout_ms, struct ops_head_info *info, char *err)
{
	struct head h = {info, false};
	char eb[CURL_ERROR_SIZE] = "";
	long status = -1;
	CURL *c = handle();
	CURLcode rc;
	memset(info, 0, sizeof(*info));
	info->size = -1;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, eb);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, head_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK) {
		snprintf(err, 256, "%s", eb[0] ? eb : curl_easy_strerror(rc));
		return -1;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (info->md5[0] && (strlen(info->md5) != 32 || strspn(info->md5, "0123456789abcdef") != 32))
		info->md5[0] = '\0';
	return (int)status;
}

/* ---- GET ---- */

struct sink {
	CURL *c;
	int fd;
	bool rate;
	bool body;                  /* the final response's body is arriving */
	long status;
	EVP_MD_CTX *md;
	uint64_t size;
	int werr;                   /* errno of a failed write */
	char *hdr_md5;
	bool first_done;
};

static size_t get_header(char *p, size_t size, size_t n, void *ud)
{
	struct sink *s = ud;
	size_t len = size * n;
	if (len <= 2 && (p[0] == '\r' || p[0] == '\n'))
		s->first_done = true;
	else if (!s->first_done)   /* the master's Content-Md5, before the redirect */
		header_is(p, len, "Content-Md5", s->hdr_md5, 33);
	return len;
}

static size_t get_write(char *p, size_t size, size_t n, void *ud)
{
	struct sink *s = ud;
	size_t len = size * n;
	if (!s->body) {
		curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &s->status);
		s->body = true;
	}
	if (s->status != 200)
		return len;   /* an error page */
	if (s->rate)
		ops_rate_take(len);
	EVP_DigestUpdate(s->md, p, len);
	s->size += len;
	for (size_t off = 0; s->fd >= 0 && off < len;) {
		ssize_t w = write(s->fd, p + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			s->werr = errno;
			return 0;
		}
		off += (size_t)w;
	}
	return len;
}

int ops_stream_get(const char *url, bool follow, int fd, bool rate, char md5[33],
		   uint64_t *size, char hdr_md5[33], char *err)
{
	struct sink s = {.fd = fd, .rate = rate, .hdr_md5 = hdr_md5};
	char eb[CURL_ERROR_SIZE] = "";
	unsigned char d[16];
	long status = -1;
	CURLcode rc;

	s.c = handle();
	hdr_md5[0] = md5[0] = '\0';
	*size = 0;
	s.md = EVP_MD_CTX_new();
	if (!s.md || !EVP_DigestInit_ex(s.md, EVP_md5(), NULL))
		die("md5 init failed");
	curl_easy_setopt(s.c, CURLOPT_URL, url);
	curl_easy_setopt(s.c, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
	curl_easy_setopt(s.c, CURLOPT_MAXREDIRS, 4L);
	curl_easy_setopt(s.c, CURLOPT_ERRORBUFFER, eb);
	curl_easy_setopt(s.c, CURLOPT_HEADERFUNCTION, get_header);
	curl_easy_setopt(s.c, CURLOPT_HEADERDATA, &s);
	curl_easy_setopt(s.c, CURLOPT_WRITEFUNCTION, get_write);
	curl_easy_setopt(s.c, CURLOPT_WRITEDATA, &s);
	/* A volume that stops sending for a minute fails the read. */
	curl_easy_setopt(s.c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(s.c, CURLOPT_LOW_SPEED_TIME, 60L);
	rc = curl_easy_perform(s.c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(s.c, CURLINFO_RESPONSE_CODE, &status);
	else if (s.werr)
		snprintf(err, 256, "write failed (%s)", strerror(s.werr));
	else
		snprintf(err, 256, "%s", eb[0] ? eb : curl_easy_strerror(rc));
	if (status == 200) {
		EVP_DigestFinal_ex(s.md, d, NULL);
		digest_hex(d, md5);
		*size = s.size;
	} else if (status > 0) {
		snprintf(err, 256, "status %ld", status);
	}
	EVP_MD_CTX_free(s.md);
	if (hdr_md5[0] && (strlen(hdr_md5) != 32 || strspn(hdr_md5, "0123456789abcdef") != 32))
		hdr_md5[0] = '\0';
	return rc == CURLE_OK ? (int)status : -1;
}

/* ---- PUT ---- */

struct source {
	int fd;
	EVP_MD_CTX *md;
	int rerr;
};

static size_t put_read(char *p, size_t size, size_t n, void *ud)
{
	struct source *s = ud;
	for (;;) {
		ssize_t r = read(s->fd, p, size * n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			s->rerr = errno;
			return CURL_READFUNC_ABORT;
		}
		EVP_DigestUpdate(s->md, p, (size_t)r);
		return (size_t)r;
	}
}

int ops_stream_put(const char *url, int fd, uint64_t size, char md5[33], char *err)
{
	struct source s = {.fd = fd};
	char eb[CURL_ERROR_SIZE] = "";
	unsigned char d[16];
	long status = -1;
	struct curl_slist *hdrs = curl_slist_append(NULL, "Expect:");
	CURL *c = handle();
	CURLcode rc;

	md5[0] = '\0';
	s.md = EVP_MD_CTX_new();
	if (!hdrs || !s.md || !EVP_DigestInit_ex(s.md, EVP_md5(), NULL))
		die("md5 init failed");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, put_read);
	curl_easy_setopt(c, CURLOPT_READDATA, &s);
	curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, eb);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		EVP_DigestFinal_ex(s.md, d, NULL);
		digest_hex(d, md5);
	} else if (s.rerr) {
		snprintf(err, 256, "read failed (%s)", strerror(s.rerr));
	} else {
		snprintf(err, 256, "%s", eb[0] ? eb : curl_easy_strerror(rc));
	}
	EVP_MD_CTX_free(s.md);
	curl_slist_free_all(hdrs);
	return rc == CURLE_OK ? (int)status : -1;
}

char *ops_master_url(const char *m)
{
	char *u;
	if (!m)
		return NULL;
	u = strstr(m, "://") ? xstrdup(m) : xasprintf("http://%s", m);
	if (u[strlen(u) - 1] == '/')
		u[strlen(u) - 1] = '\0';
	return u;
}

/* ---- the master's key listing ---- */

#define PAGE 1000

int ops_list_page(const char *master, const char *prefix, bool unlinked, char **start,
		  struct ops_page *pg, const char *who)
{
	struct buf b = {0};
	char err[256], *url, *es = url_escape(*start, strlen(*start), false);
	char *ep = url_escape(prefix, strlen(prefix), true);
	json_error_t je;
	json_t *doc = NULL, *keys, *next;
	int st, rc = -1;

	memset(pg, 0, sizeof(*pg));
	url = xasprintf("%s%s?%s&limit=%d%s%s", master, *ep ? ep : "/",
			unlinked ? "unlinked" : "list", PAGE, **start ? "&start=" : "", es);
	free(es);
	free(ep);
	st = httpc_do("GET", url, NULL, 0, 60000, &b, 0, err);
	if (st != 200) {
		if (st > 0)
			snprintf(err, sizeof(err), "the master answered %d", st);
		log_msg("%s: GET %s: %s", who, url, err);
		goto out;
	}
	doc = json_loadb(b.data ? b.data : "", b.len, 0, &je);
	keys = doc ? json_object_get(doc, "keys") : NULL;
	next = doc ? json_object_get(doc, "next") : NULL;
	if (!json_is_array(keys) || !json_is_string(next)) {
		log_msg("%s: the master's key listing is not {\"next\":..,\"keys\":[..]}", who);
		goto out;
	}
	if (**start && !strcmp(*start, json_string_value(next))) {
		log_msg("%s: the master's listing does not advance past %s", who, *start);
		goto out;
	}
	pg->keys = xcalloc(json_array_size(keys) + 1, sizeof(*pg->keys));
	pg->klens = xcalloc(json_array_size(keys) + 1, sizeof(*pg->klens));
	for (size_t i = 0; i < json_array_size(keys); i++) {
		json_t *k = json_array_get(keys, i);
		if (!json_is_string(k))
			continue;
		pg->klens[pg->n] = json_string_length(k);
		pg->keys[pg->n++] = xstrndup(json_string_value(k), json_string_length(k));
	}
	free(*start);
	*start = xstrdup(json_string_value(next));
	rc = 0;
out:
	json_decref(doc);
	buf_free(&b);
	free(url);
	return rc;
}

void ops_page_free(struct ops_page *pg)
{
	for (size_t i = 0; i < pg->n; i++)
		free(pg->keys[i]);
	free(pg->keys);
	free(pg->klens);
	memset(pg, 0, sizeof(*pg));
}

int ops_list_each(const char *master, const char *prefix, bool unlinked, const char *who,
		  int workers, char ***keys, size_t **klens, void (*fn)(void *ctx, size_t i),
		  void *ctx)
{
	char *start = xstrdup("");
	struct ops_page pg;
	int rc = 0;
	do {
		if (ops_list_page(master, prefix, unlinked, &start, &pg, who) < 0) {
			rc = -1;
			break;
		}
		*keys = pg.keys;
		*klens = pg.klens;
		ops_pool_run(workers, pg.n, fn, ctx);
		*keys = NULL;
		*klens = NULL;
		ops_page_free(&pg);
	} while (*start);
	free(start);
	return rc;
}
