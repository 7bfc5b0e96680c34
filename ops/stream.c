/* stream.c -- streamed GETs and PUTs of whole blobs and files, the
 * volume-to-volume copy, a HEAD that reads the headers the tools need, and
 * the -rate token bucket: what verify, rebalance, put and get share.  See
 * ops.h. */
#include "ops.h"
#include "../common/httpc.h"
#include "../master/store.h"
#include "../common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- -rate ---- */

static pthread_mutex_t rate_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rate_bps;        /* 0: no cap */
static double rate_next;         /* when the bytes taken so far are paid for (s) */

void ops_rate_init(uint64_t bytes_per_s)
{
	rate_bps = bytes_per_s;
	rate_next = (double)now_ms() / 1e3;
}

/* Every reader books its bytes on one timeline and sleeps until its slot:
 * over any stretch the total stays at rate_bps (plus one read's worth). */
void ops_rate_take(uint64_t n)
{
	double now, wait;
	if (!rate_bps || !n)
		return;
	pthread_mutex_lock(&rate_mu);
	now = (double)now_ms() / 1e3;
	if (rate_next < now - 1)
		rate_next = now - 1;     /* an idle second earns at most one second's bytes */
	rate_next += (double)n / (double)rate_bps;
	wait = rate_next - now;
	pthread_mutex_unlock(&rate_mu);
	if (wait > 0)
		usleep((useconds_t)(wait * 1e6));
}

/* ---- HEAD, GET and PUT ---- */

/* md5 when it is 32 lowercase hex digits, else "". */
static void keep_md5(char md5[33])
{
	if (md5[0] && (strlen(md5) != 32 || strspn(md5, "0123456789abcdef") != 32))
		md5[0] = '\0';
}

/* A body's first bytes, into a struct ops_why (httpc_call's body callback). */
static bool why_body(void *ctx, const char *p, size_t n)
{
	struct ops_why *w = ctx;
	size_t k = n < sizeof(w->text) - 1 - w->n ? n : sizeof(w->text) - 1 - w->n;
	memcpy(w->text + w->n, p, k);
	w->text[w->n += k] = '\0';
	return true;
}

static bool head_header(void *ctx, int status, const char *p, size_t len)
{
	struct ops_head_info *i = ctx;
	char num[32];
	(void)status;
	if (httpc_header(p, len, "Content-Length", num, sizeof(num)))
		i->size = (int64_t)strtoll(num, NULL, 10);
	else if (!httpc_header(p, len, "Content-Md5", i->md5, sizeof(i->md5)) &&
		 !httpc_header(p, len, "Key-Volumes", i->volumes, sizeof(i->volumes)) &&
		 !httpc_header(p, len, "Key-Balance", i->balance, sizeof(i->balance)))
		httpc_header(p, len, "Last-Modified", i->lastmod, sizeof(i->lastmod));
	return true;
}

int ops_ask(const char *method, const char *url, long timeout_ms, struct ops_head_info *info,
	    char *err)
{
	struct httpc_call g = {.url = url, .head = !method, .method = method,
			      .timeout_ms = timeout_ms, .header = head_header,
			      .body = why_body, .ctx = info};   /* info->why first */
	int st;
	memset(info, 0, sizeof(*info));
	info->size = -1;
	st = httpc_call(&g, err);
	keep_md5(info->md5);
	if (!method && st >= 400 && st != 404) {   /* the reason is in a GET's answer */
		struct buf b = {0};
		bool same = httpc_do("GET", url, NULL, 0, timeout_ms, &b, 4096, NULL) == st;
		ops_why(err, st, url, b.data, same ? b.len : 0);
		buf_free(&b);
	}
	return st;
}

/* The body's pieces come from libcurl 16 KiB at a time, whatever its
 * buffer: stdio holds them, SINK_HOLD at a time (one write for a 64 KiB
 * file, not four). */
#define SINK_HOLD (64 * 1024)

struct sink {
	FILE *f;                    /* the fd's, buffered; NULL: nowhere */
	bool rate;
	bool first_done;            /* the first response's headers are over */
	int status;                 /* of the response whose body arrives */
	uint64_t size;
	int werr;                   /* errno of a failed write */
	char *hdr_md5;
	struct ops_why why;         /* an error answer's body */
};

static bool get_header(void *ctx, int status, const char *p, size_t len)
{
	struct sink *s = ctx;
	s->status = status;
	if (len <= 2 && (p[0] == '\r' || p[0] == '\n'))
		s->first_done = true;
	else if (!s->first_done)   /* the master's Content-Md5, before the redirect */
		httpc_header(p, len, "Content-Md5", s->hdr_md5, 33);
	return true;
}

static bool get_body(void *ctx, const char *p, size_t len)
{
	struct sink *s = ctx;
	if (s->status != 200)
		return why_body(&s->why, p, len);   /* an error page */
	if (s->rate)
		ops_rate_take(len);
	s->size += len;
	if (s->f && fwrite(p, 1, len, s->f) != len)
		s->werr = errno;
	return !s->werr;
}

int ops_stream_get(const char *url, bool follow, int fd, bool rate, char md5[33],
		   uint64_t *size, char hdr_md5[33], char *err)
{
	struct sink s = {.rate = rate, .hdr_md5 = hdr_md5};
	/* A volume that stops sending for a minute fails the read.  libcurl
	 * reads up to 256 KiB a recv (its 16 KiB made four of a 64 KiB file). */
	struct httpc_call g = {.url = url, .follow = follow, .stall_s = 60, .md5 = md5,
			      .header = get_header, .body = get_body, .ctx = &s,
			      .bufsize = 256L * 1024};
	char hold[SINK_HOLD];
	int st = -1;

	hdr_md5[0] = '\0';
	if (fd >= 0 && ((fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0 || !(s.f = fdopen(fd, "w")))) {
		s.werr = errno;
		if (fd >= 0)
			close(fd);
	}
	if (s.f)
		setvbuf(s.f, hold, _IOFBF, SINK_HOLD);
	if (!s.werr)
		st = httpc_call(&g, err);
	if (s.f && fclose(s.f) != 0 && st == 200) {   /* the last bytes written */
		s.werr = errno;
		st = -1;
	}
	if (st < 0 && s.werr)
		snprintf(err, OPS_ERR, "write failed (%s)", strerror(s.werr));
	else if (st > 0 && st != 200)
		ops_why(err, st, url, s.why.text, s.why.n);
	if (st != 200)
		md5[0] = '\0';
	*size = st == 200 ? s.size : 0;
	keep_md5(hdr_md5);
	return st;
}

struct source {
	struct ops_why why;   /* first: why_body's ctx */
	int fd;
	int rerr;
};

static ssize_t put_read(void *ctx, char *p, size_t n)
{
	struct source *s = ctx;
	ssize_t r;
	while ((r = read(s->fd, p, n)) < 0 && errno == EINTR)
		;
	if (r < 0)
		s->rerr = errno;
	return r;
}

int ops_stream_put(const char *url, int fd, uint64_t size, char md5[33], char *err)
{
	struct source s = {.fd = fd};
	struct httpc_call c = {.url = url, .stall_s = 60, .read = put_read, .size = size,
			      .md5 = md5, .ctx = &s, .body = why_body};
	int st = httpc_call(&c, err);
	if (st < 0 && s.rerr)
		snprintf(err, OPS_ERR, "read failed (%s)", strerror(s.rerr));
	else if (st >= 300)
		ops_why(err, st, url, s.why.text, s.why.n);
	return st;
}

static char master_prefix[256];   /* ops_why: who answered */

char *ops_master_url(const char *m)
{
	const char *id = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
	char *u, *user;
	if (!m)
		return NULL;
	/* a master with -keys: sign with the key the environment names, as
	 * the aws CLI reads it, and as it refuses half of one */
	if (!id != !secret)
		die("%s is set but %s is not: set both (a key of the master's -keys), or neither",
		    id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
		    id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
	u = strstr(m, "://") ? xstrdup(m) : xasprintf("http://%s", m);
	if (u[strlen(u) - 1] == '/')
		u[strlen(u) - 1] = '\0';
	snprintf(master_prefix, sizeof(master_prefix), "%s/", u);
	user = id ? xasprintf("%s:%s", id, secret) : NULL;
	httpc_master(u, user);
	free(user);
	return u;
}

void ops_why(char *err, int status, const char *url, const char *body, size_t len)
{
	static const char *const hints[] = {
		"the master refused the key: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are one of "
		"its -keys, with the permission",
		"a volume refused: the volumes take what is signed with their secret: give this "
		"command -volumesecret FILE",
		"a volume's link expired on arrival: the hosts' clocks must agree within 30 s (NTP)",
	};
	static bool told[3];
	bool master = url && *master_prefix && !strncmp(url, master_prefix, strlen(master_prefix));
	size_t n = 0;
	int h = -1;
	if (status < 0)
		return;
	while (n < len && n < OPS_REASON && body[n] != '\r' && body[n] != '\n')
		n++;
	if (n && (*body == '<' || *body == '{'))
		n = 0;   /* an HTML page (nginx), XML or JSON: no one-line reason */
	if (status == 401 || status == 403)
		h = !master ? 1 : status == 401 || (n && memmem(body, n, " may not ", 9)) ? 0 : -1;
	else if (status == 410 && !master)
		h = 2;
	if (h >= 0 && !__atomic_exchange_n(&told[h], true, __ATOMIC_RELAXED))
		log_msg("%s", hints[h]);   /* once in a run, whatever the lines capped */
	snprintf(err, OPS_ERR, "%d%s%.*s", status, n ? " " : "", (int)n, n ? body : "");
}

/* ---- the master's key listing ---- */

#define PAGE 1000

int ops_list_page(const char *master, const char *prefix, int what, char **start,
		  struct ops_keys *pg, const char *who)
{
	bool unlinked = what & OPS_LIST_UNLINKED, located = what & OPS_LIST_LOCATIONS;
	const char *from = start ? *start : "";
	json_t *locs = NULL, *md5s = NULL;
	struct buf b = {0};
	char err[OPS_ERR], *url, *es = url_escape(from, strlen(from), false);
	char *ep = url_escape(prefix, strlen(prefix), true);
	json_error_t je;
	json_t *doc = NULL, *keys;
	const char *next;
	int st, rc = -1;

	memset(pg, 0, sizeof(*pg));
	url = xasprintf("%s%s?%s&limit=%d%s%s", master, *ep ? ep : "/",
			unlinked ? "unlinked" : located ? "list&locations&md5s" : "list", PAGE,
			*from ? "&start=" : "", es);
	free(es);
	free(ep);
	st = httpc_do("GET", url, NULL, 0, 60000, &b, 0, err);
	if (st != 200) {
		ops_why(err, st, url, b.data, b.len);
		log_msg("%s: GET %s failed: %s", who, url, err);
		goto out;
	}
	doc = json_loadb(b.data ? b.data : "", b.len, 0, &je);
	if (json_unpack(doc, "{s:o, s:s}", "keys", &keys, "next", &next) < 0 ||
	    !json_is_array(keys)) {
		log_msg("%s: the master's key listing is not {\"next\":..,\"keys\":[..]}", who);
		goto out;
	}
	if (*from && !strcmp(from, next)) {
		log_msg("%s: the master's listing does not advance past %s", who, from);
		goto out;
	}
	if (located) {
		locs = json_object_get(doc, "locations");
		md5s = json_object_get(doc, "md5s");
		if (json_array_size(locs) != json_array_size(keys) ||
		    json_array_size(md5s) != json_array_size(keys)) {
			log_msg("%s: the master's listing has no locations and md5s beside its "
				"keys (older than ?list&locations?)", who);
			goto out;
		}
		pg->locs = xcalloc(json_array_size(keys) + 1, sizeof(*pg->locs));
		pg->md5s = xcalloc(json_array_size(keys) + 1, sizeof(*pg->md5s));
	}
	pg->keys = xcalloc(json_array_size(keys) + 1, sizeof(*pg->keys));
	pg->klens = xcalloc(json_array_size(keys) + 1, sizeof(*pg->klens));
	for (size_t i = 0; i < json_array_size(keys); i++) {
		json_t *k = json_array_get(keys, i);
		if (!json_is_string(k))
			continue;
		pg->klens[pg->n] = json_string_length(k);
		if (located) {   /* the URLs one a line; the md5 if it is one */
			struct buf b = {0};
			json_t *l = json_array_get(locs, i), *u, *m = json_array_get(md5s, i);
			size_t j;
			buf_puts(&b, "");
			json_array_foreach(l, j, u)
				if (json_is_string(u))
					buf_printf(&b, "%s%s", b.len ? "\n" : "", json_string_value(u));
			pg->locs[pg->n] = b.data;
			if (json_is_string(m) && json_string_length(m) == 32)
				memcpy(pg->md5s[pg->n], json_string_value(m), 33);
		}
		pg->keys[pg->n++] = xstrndup(json_string_value(k), json_string_length(k));
	}
	if (start) {
		free(*start);
		*start = xstrdup(next);
	}
	rc = 0;
out:
	json_decref(doc);
	buf_free(&b);
	free(url);
	return rc;
}

void ops_keys_free(struct ops_keys *pg)
{
	for (size_t i = 0; i < pg->n; i++) {
		free(pg->keys[i]);
		if (pg->locs)
			free(pg->locs[i]);
	}
	free(pg->keys);
	free(pg->locs);
	free(pg->md5s);
	free(pg->klens);
	memset(pg, 0, sizeof(*pg));
}

int ops_list_each(const char *master, const char *prefix, int what, const char *who,
		  int workers, struct ops_keys *pg, void (*fn)(void *ctx, size_t i), void *ctx)
{
	char *start = xstrdup("");
	int rc = 0;
	do {
		if ((rc = ops_list_page(master, prefix, what, &start, pg, who)) < 0)
			break;
		ops_pool_run(workers, pg->n, fn, ctx);
		ops_keys_free(pg);
	} while (*start);
	free(start);
	return rc;
}

int ops_master_head(const char *master, const char *key, size_t klen, int tries,
		    struct ops_head_info *h, struct record *r, char *err)
{
	char *url = ops_url(master, key, klen, "");
	struct retry busy = RETRY_BUSY;
	int st = -1;
	busy.tries = tries;
	for (int t = 0; retry_wait(busy, t); t++) {
		st = ops_ask(NULL, url, 60000, h, err);
		if (st != 503 && st >= 0)
			break;
	}
	free(url);
	if (st != 302 || !r)
		return st;
	memset(r, 0, sizeof(*r));
	memcpy(r->hash, h->md5, 33);
	for (char *s = h->volumes, *save = NULL, *t; (t = strtok_r(s, ",", &save)); s = NULL)
		if (r->nlocs < RECORD_MAX_LOCS)
			r->locs[r->nlocs++] = t;
	return st;
}

json_t *ops_listing(int status, const char *body, size_t len, char *err)
{
	json_error_t je;
	json_t *doc;
	if (status != 200) {
		ops_why(err, status, NULL, body, len);
		return NULL;
	}
	doc = json_loadb(body ? body : "", len, 0, &je);
	if (json_is_array(doc))
		return doc;
	json_decref(doc);
	snprintf(err, OPS_ERR, "not a JSON listing (autoindex_format json?)");
	return NULL;
}
