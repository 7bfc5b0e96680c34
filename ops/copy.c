/* copy.c -- the streaming volume-to-volume copy of rebalance and
 * verify -fix.  See ops.h. */
#include "ops.h"
#include "../common/placement.h"
#include "../common/util.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- streaming copy ----
 *
 * One GET and up to COPY_MAXDST PUTs run in one curl multi handle on the
 * calling thread.  The GET's write callback appends to a fixed buffer and
 * pauses when it is full; each PUT's read callback takes from its own
 * offset and pauses when it has caught up; the loop un-pauses whichever
 * side can move again.  The buffer is compacted when every PUT has read
 * its head, so memory stays at COPY_BUF per copy whatever the blob's size.
 *
 * A PUT gets its last bytes only after the whole blob was read and matched
 * the md5: a truncated or corrupt source aborts the PUTs mid-body, and a
 * volume never installs a partial upload (it writes to a temporary file and
 * renames only a complete body). */

#define COPY_BUF (256 * 1024)
#define COPY_MAXDST OPS_COPY_MAXDST

struct copy;
struct put_src {
	struct copy *c;
	int i;
};

struct copy {
	char *buf;
	size_t cap, len;
	size_t off[COPY_MAXDST];
	bool put_paused[COPY_MAXDST];
	struct put_src src[COPY_MAXDST];
	int nput;
	bool get_paused;
	bool headers_done;
	bool get_done;      /* GET finished and its bytes were verified */
	bool bad;           /* source failed or mismatched: abort the PUTs */
	long status;
	curl_off_t clen;    /* -1 when unknown */
	curl_off_t got;
	EVP_MD_CTX *md;
	CURL *get;
	const char *want_md5;
	char why[128];
};

/* Per-thread handles, reused so connections to volumes stay open; freed
 * by a pthread key destructor when the thread exits. */
struct ops_tls {
	CURLM *multi;
	CURL *get, *put[COPY_MAXDST];
	struct curl_slist *hdrs;
};
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_free(void *p)
{
	struct ops_tls *t = p;
	curl_easy_cleanup(t->get);   /* NULL is fine */
	for (int i = 0; i < COPY_MAXDST; i++)
		curl_easy_cleanup(t->put[i]);
	curl_multi_cleanup(t->multi);
	curl_slist_free_all(t->hdrs);
	free(t);
}

static void tls_init(void)
{
	if (pthread_key_create(&tls_key, tls_free))
		die("pthread_key_create failed");
}

static struct ops_tls *tls(void)
{
	struct ops_tls *t;
	pthread_once(&tls_once, tls_init);
	t = pthread_getspecific(tls_key);
	if (t)
		return t;
	/* handles are made on first use: a server thread that moves one key
	 * needs one GET and a PUT per new location, not all of them */
	t = xcalloc(1, sizeof(*t));
	t->multi = curl_multi_init();
	t->hdrs = curl_slist_append(NULL, "Expect:");
	if (!t->multi || !t->hdrs)
		die("curl init failed");
	curl_multi_setopt(t->multi, CURLMOPT_MAXCONNECTS, 64L);
	pthread_setspecific(tls_key, t);
	return t;
}

static CURL *tls_handle(CURL **h)
{
	if (!*h && !(*h = curl_easy_init()))
		die("curl_easy_init failed");
	return *h;
}

static void copy_buf_compact(struct copy *c)
{
	size_t min = c->len;
	if (!c->nput)
		return;
	for (int i = 0; i < c->nput; i++)
		if (c->off[i] < min)
			min = c->off[i];
	if (!min)
		return;
	memmove(c->buf, c->buf + min, c->len - min);
	c->len -= min;
	for (int i = 0; i < c->nput; i++)
		c->off[i] -= min;
}

/* Compare the md5 of everything read with the wanted one; false (and c->bad)
 * on mismatch. */
static bool copy_verify(struct copy *c)
{
	unsigned char d[16];
	char h[33];
	if (!c->want_md5)
		return true;
	EVP_DigestFinal_ex(c->md, d, NULL);
	digest_hex(d, h);
	if (strcmp(h, c->want_md5)) {
		c->bad = true;
		snprintf(c->why, sizeof(c->why), "source bytes do not match md5 %s (got %s)",
			 c->want_md5, h);
		return false;
	}
	return true;
}

static size_t get_header(char *p, size_t size, size_t n, void *ud)
{
	struct copy *c = ud;
	size_t len = size * n;
	if (len <= 2 && (p[0] == '\r' || p[0] == '\n') && !c->headers_done) {
		c->headers_done = true;
		curl_easy_getinfo(c->get, CURLINFO_RESPONSE_CODE, &c->status);
		curl_easy_getinfo(c->get, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &c->clen);
		if (c->status == 200 && c->clen == 0)
			copy_verify(c);
	}
	return len;
}

static size_t get_write(char *p, size_t size, size_t n, void *ud)
{
	struct copy *c = ud;
	size_t len = size * n;
	if (c->status != 200 || c->bad)
		return len;      /* an error page: swallow it */
	copy_buf_compact(c);
	if (c->cap - c->len < len) {
		if (c->len) {
			c->get_paused = true;
			return CURL_WRITEFUNC_PAUSE;
		}
		c->cap = len;    /* a re-delivered chunk bigger than the buffer */
		c->buf = xrealloc(c->buf, c->cap);
	}
	if (c->want_md5)
		EVP_DigestUpdate(c->md, p, len);
	c->got += (curl_off_t)len;
	if (c->clen >= 0 && c->got > c->clen) {
		c->bad = true;
		snprintf(c->why, sizeof(c->why), "source sent more than its Content-Length");
		return len;
	}
	/* The last bytes reach the PUTs only once the whole blob checked out. */
	if (c->clen >= 0 && c->got == c->clen && !copy_verify(c))
		return len;
	memcpy(c->buf + c->len, p, len);
	c->len += len;
	return len;
}

static size_t put_read(char *p, size_t size, size_t n, void *ud)
{
	struct put_src *s = ud;
	struct copy *c = s->c;
	size_t avail, len = size * n;
	if (c->bad)
		return CURL_READFUNC_ABORT;
	avail = c->len - c->off[s->i];
	if (!avail) {
		if (c->get_done)
			return 0;
		c->put_paused[s->i] = true;
		return CURL_READFUNC_PAUSE;
	}
	if (len > avail)
		len = avail;
	memcpy(p, c->buf + c->off[s->i], len);
	c->off[s->i] += len;
	return len;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p, (void)ud;
	return size * n;
}

static void copy_common_opts(CURL *h, const char *url, long timeout_ms)
{
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 10000L);
	/* A volume that stops moving bytes for a minute fails the copy. */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
}

int ops_copy(const char *src_url, char *const *dst_urls, int ndst, const char *md5,
	     long timeout_ms, char *err)
{
	struct copy c = {.clen = -1, .status = 0};
	CURLcode get_rc = CURLE_OK, put_rc[COPY_MAXDST] = {CURLE_OK};
	bool put_done[COPY_MAXDST] = {0}, puts_added = false, get_finished = false;
	int rc = 0, running;
	struct ops_tls *t;
	CURLM *tl_multi;
	CURL *tl_get, **tl_put;

	if (ndst > COPY_MAXDST) {
		snprintf(err, 256, "more than %d destinations", COPY_MAXDST);
		return -1;
	}
	t = tls();
	tl_multi = t->multi;
	tl_get = tls_handle(&t->get);
	tl_put = t->put;
	for (int i = 0; i < ndst; i++)
		tls_handle(&tl_put[i]);
	c.get = tl_get;
	c.cap = COPY_BUF;
	c.buf = xmalloc(c.cap);
	c.nput = ndst;
	c.want_md5 = md5 && strlen(md5) == 32 ? md5 : NULL;
	if (c.want_md5) {
		c.md = EVP_MD_CTX_new();
		if (!c.md || !EVP_DigestInit_ex(c.md, EVP_md5(), NULL))
			die("md5 init failed");
	}

	curl_easy_reset(tl_get);
	copy_common_opts(tl_get, src_url, timeout_ms);
	curl_easy_setopt(tl_get, CURLOPT_HEADERFUNCTION, get_header);
	curl_easy_setopt(tl_get, CURLOPT_HEADERDATA, &c);
	curl_easy_setopt(tl_get, CURLOPT_WRITEFUNCTION, get_write);
	curl_easy_setopt(tl_get, CURLOPT_WRITEDATA, &c);
	curl_multi_add_handle(tl_multi, tl_get);

	for (;;) {
		CURLMsg *msg;
		int q;
		curl_multi_perform(tl_multi, &running);
		while ((msg = curl_multi_info_read(tl_multi, &q))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			if (msg->easy_handle == tl_get) {
				get_finished = true;
				get_rc = msg->data.result;
			}
			for (int i = 0; i < ndst; i++)
				if (msg->easy_handle == tl_put[i]) {
					put_done[i] = true;
					put_rc[i] = msg->data.result;
				}
		}
		if (get_finished && !c.get_done && !c.bad) {
			if (get_rc != CURLE_OK || c.status != 200) {
				c.bad = true;
			} else if (c.clen >= 0 && c.got != c.clen) {
				c.bad = true;
				snprintf(c.why, sizeof(c.why), "source sent %lld of %lld bytes",
					 (long long)c.got, (long long)c.clen);
			} else if (c.clen < 0 && !copy_verify(&c)) {
				/* c.bad set */
			} else {
				c.get_done = true;
			}
		}
		if (c.status == 200 && !puts_added && !c.bad) {
			for (int i = 0; i < ndst; i++) {
				CURL *h = tl_put[i];
				c.src[i] = (struct put_src){&c, i};
				curl_easy_reset(h);
				copy_common_opts(h, dst_urls[i], timeout_ms);
				curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
				curl_easy_setopt(h, CURLOPT_READFUNCTION, put_read);
				curl_easy_setopt(h, CURLOPT_READDATA, &c.src[i]);
				curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
				curl_easy_setopt(h, CURLOPT_HTTPHEADER, t->hdrs);
				if (c.clen >= 0)
					curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, c.clen);
				curl_multi_add_handle(tl_multi, h);
			}
			puts_added = true;
		}
		if (get_finished && (!puts_added || c.bad)) {
			/* nothing (more) to send: abort the PUTs that are waiting */
			bool all = true;
			for (int i = 0; puts_added && i < ndst; i++) {
				if (c.put_paused[i]) {
					c.put_paused[i] = false;
					curl_easy_pause(tl_put[i], CURLPAUSE_CONT);
				}
				all = all && put_done[i];
			}
			if (all)
				break;
		}
		if (puts_added && !c.bad) {
			bool all = get_finished;
			for (int i = 0; i < ndst; i++)
				all = all && put_done[i];
			if (all)
				break;
		}
		if (c.get_paused) {
			copy_buf_compact(&c);
			if (c.len < c.cap) {
				c.get_paused = false;
				curl_easy_pause(tl_get, CURLPAUSE_CONT);
			}
		}
		for (int i = 0; puts_added && i < ndst; i++)
			if (c.put_paused[i] && (c.off[i] < c.len || c.get_done || c.bad)) {
				c.put_paused[i] = false;
				curl_easy_pause(tl_put[i], CURLPAUSE_CONT);
			}
		curl_multi_poll(tl_multi, NULL, 0, 100, NULL);
	}

	if (!c.get_done) {
		rc = 1;
		if (c.why[0])
			snprintf(err, 256, "GET %s: %s", src_url, c.why);
		else if (get_rc != CURLE_OK && c.status <= 0)
			snprintf(err, 256, "GET %s: %s", src_url, curl_easy_strerror(get_rc));
		else
			snprintf(err, 256, "GET %s: status %ld", src_url, c.status);
	} else {
		for (int i = 0; i < ndst; i++) {
			long st = 0;
			curl_easy_getinfo(tl_put[i], CURLINFO_RESPONSE_CODE, &st);
			if (put_rc[i] != CURLE_OK) {
				snprintf(err, 256, "PUT %s: %s", dst_urls[i],
					 curl_easy_strerror(put_rc[i]));
				rc = -1;
				break;
			}
			if (st != 200 && st != 201 && st != 204) {
				snprintf(err, 256, "PUT %s: status %ld", dst_urls[i], st);
				rc = -1;
				break;
			}
		}
	}
	curl_multi_remove_handle(tl_multi, tl_get);
	for (int i = 0; puts_added && i < ndst; i++)
		curl_multi_remove_handle(tl_multi, tl_put[i]);
	if (c.md)
		EVP_MD_CTX_free(c.md);
	free(c.buf);
	return rc;
}
