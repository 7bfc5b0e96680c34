/* s3.c -- see s3.h and docs/s3.md.
 *
 * Threads, as in server.c: nothing here waits on a volume or an fsync on a
 * poll thread.  GetObject streams from a replica on a worker thread into a
 * ring the response reads from (the connection sleeps while the ring is
 * empty); PutObject and UploadPart go through put.c (REPLACE semantics);
 * everything else runs on a spawned thread while the connection sleeps.
 *
 * Multipart parts are ordinary keys, /.mkv-mpu/<upload id>/<part number>
 * (replicated, rebalanced and verified like any blob); the upload itself
 * is a sidecar entry (meta.h).  CompleteMultipartUpload streams the parts,
 * in order, from their volumes into a REPLACE of the final key. */
#include "s3.h"
#include "handlers.h"
#include "health.h"
#include "keylock.h"
#include "meta.h"
#include "put.h"
#include "s3list.h"
#include "spawn.h"
#include "../common/placement.h"
#include "../common/record.h"
#include "../common/util.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <malloc.h>
#include <microhttpd.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"
#define XML_BODY_MAX (2u << 20)   /* DeleteObjects (1,000 keys), CompleteMultipartUpload */
#define RING_CAP (256u << 10)   /* a GetObject's bytes between volume and client */
#define S3_RING (1u << 20)        /* a PutObject's or part's ring (put.h): clients send ~10 at once */
#define PARTS_MAX 10000
#define CHUNK_LINE_MAX 4096
#define NHDR 12

enum { BAD_FRAMING = 1, BAD_SIZE };

enum s3op {
	S3_BAD, S3_UNSUPPORTED, S3_LIST_BUCKETS, S3_BUCKET_HEAD, S3_BUCKET_CREATE,
	S3_BUCKET_DELETE, S3_BUCKET_LOCATION, S3_BUCKET_VERSIONING, S3_LIST, S3_LIST_UPLOADS,
	S3_DELETE_MANY, S3_GET, S3_PUT, S3_DELETE, S3_MPU_CREATE, S3_MPU_PART, S3_MPU_COMPLETE,
	S3_MPU_ABORT, S3_MPU_LIST_PARTS, S3_COPY
};

/* aws-chunked framing: "<hex size>[;ext]\r\n<data>\r\n" ... "0[;ext]\r\n"
 * then trailer lines and an empty line. */
enum dec_state { DEC_SIZE, DEC_DATA, DEC_DATA_END, DEC_TRAILER, DEC_DONE, DEC_ERROR };
struct chunkdec {
	enum dec_state st;
	char line[CHUNK_LINE_MAX];
	size_t llen;
	uint64_t left;
};

struct s3req {
	struct MHD_Connection *conn;
	char method[16];
	char *path, *query;
	enum s3op op;
	bool head;
	char key[KEY_MAX * 3 + 8];    /* the whole key, /bucket/object */
	size_t klen;
	char bucket[256];
	size_t blen;                  /* key[blen + 2..] is the object name */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool suspended, woken, gone;
	int refs;

	/* the answer */
	int status;
	struct buf body;
	const char *hname[NHDR];
	char *hval[NHDR];
	int nhdr;
	bool answered, ready;

	bool async_started, async_done;
	struct buf in;                /* a POST's XML body */
	bool in_too_big;

	/* PutObject / UploadPart */
	bool prepared;
	struct put *put;
	bool put_finished;
	char target[KEY_MAX + 1];     /* the key written (a part's own key for UploadPart) */
	size_t tlen;
	bool aws_chunked;
	struct chunkdec dec;
	struct buf pending;           /* decoded bytes the put has not taken yet */
	size_t poff;
	uint64_t fed;                 /* body bytes (decoded) so far */
	int bad;                      /* BAD_*: the body is refused */

	/* GetObject */
	bool stream;
	char *urls[RECORD_MAX_LOCS];
	int nurls;
	char range[128];
	char *ring;
	uint64_t rhead, rtail;
	bool hdr_done, eof, failed;
	long vstatus;
	int64_t vlen;
	char crange[128], vlastmod[64];
	char etag[META_ETAG_MAX];
	int64_t mtime;
	uint64_t size;
	bool have_meta;
};

static const struct config *cfg;
static struct index *idx;

/* GetObjects streaming now.  Their rings, and libcurl's and
 * libmicrohttpd's buffers of the same size, are below the mmap threshold
 * and land in per-thread arenas; when the last one ends those pages go
 * back to the kernel, so a burst of GETs does not stay resident. */
static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER;
static int streams;

void s3_init(const struct config *c, struct index *i)
{
	cfg = c;
	idx = i;
}

/* ---- detection ---- */

static const char *const s3_queries[] = {
	"list-type", "uploads", "uploadId", "partNumber", "delete", "location", "prefix",
	"delimiter", "marker", "max-keys", "continuation-token", "start-after", "encoding-type",
	"versioning", "acl", "X-Amz-Signature", "X-Amz-Algorithm", NULL,
};

bool s3_is_request(struct MHD_Connection *c, const char *method, const char *query)
{
	const char *auth;
	if (strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "PUT") &&
	    strcmp(method, "POST") && strcmp(method, "DELETE"))
		return false;
	auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	if ((auth && (!strncmp(auth, "AWS4-HMAC-SHA256", 16) || !strncmp(auth, "AWS ", 4))) ||
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Amz-Date") ||
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Amz-Decoded-Content-Length") ||
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Amz-Content-Sha256"))
		return true;
	if (!query)
		return false;
	if (s3_has_param(query, "list") || s3_has_param(query, "unlinked"))
		return false; /* native ?list and ?unlinked */
	for (int i = 0; s3_queries[i]; i++)
		if (s3_has_param(query, s3_queries[i]))
			return true;
	return false;
}

/* ---- answers ---- */

static void hdr(struct s3req *s, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void hdr(struct s3req *s, const char *name, const char *fmt, ...)
{
	va_list ap;
	if (s->nhdr == NHDR)
		return;
	va_start(ap, fmt);
	if (vasprintf(&s->hval[s->nhdr], fmt, ap) < 0)
		die("out of memory");
	va_end(ap);
	s->hname[s->nhdr++] = name;
}

static void xml_start(struct s3req *s, int status)
{
	s->status = status;
	s->body.len = 0;
	buf_puts(&s->body, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
}

/* S3's error document (HEAD answers carry none). */
static void s3_error(struct s3req *s, int status, const char *code, const char *msg)
{
	s->status = status;
	s->body.len = 0;
	s->stream = false;
	if (s->head)
		return;
	xml_start(s, status);
	buf_printf(&s->body, "<Error><Code>%s</Code><Message>", code);
	xml_escape(&s->body, msg, strlen(msg));
	buf_puts(&s->body, "</Message><Resource>");
	xml_escape(&s->body, s->path, strlen(s->path));
	buf_puts(&s->body, "</Resource><RequestId>mkv</RequestId></Error>");
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max);

static enum MHD_Result s_send(struct s3req *s)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	if (s->stream)
		r = MHD_create_response_from_callback(s->vlen >= 0 ? (uint64_t)s->vlen : MHD_SIZE_UNKNOWN,
						      256 * 1024, reader, s, NULL);
	else
		r = MHD_create_response_from_buffer(s->body.len, s->body.data ? s->body.data : "",
						    MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	for (int i = 0; i < s->nhdr; i++)
		MHD_add_response_header(r, s->hname[i], s->hval[i]);
	if (s->body.len && !s->stream)
		MHD_add_response_header(r, "Content-Type", "application/xml");
	MHD_add_response_header(r, "x-amz-request-id", "mkv");
	ret = MHD_queue_response(s->conn, (unsigned)s->status, r);
	MHD_destroy_response(r);
	s->answered = true;
	return ret;
}

/* ---- suspension (as server.c's req_wake/req_wait) ---- */

static void s_wake(void *arg)
{
	struct s3req *s = arg;
	pthread_mutex_lock(&s->mu);
	s->woken = true;
	if (s->suspended && !s->gone) {
		s->suspended = false;
		MHD_resume_connection(s->conn);
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void s_wait(struct s3req *s)
{
	pthread_mutex_lock(&s->mu);
	if (!s->woken) {
		s->suspended = true;
		MHD_suspend_connection(s->conn);
	}
	s->woken = false;
	pthread_mutex_unlock(&s->mu);
}

static char *stream_begin(void)
{
	pthread_mutex_lock(&streams_mu);
	streams++;
	pthread_mutex_unlock(&streams_mu);
	return xmalloc(RING_CAP);
}

static void stream_end(char *ring)
{
	bool last;
	free(ring);
	pthread_mutex_lock(&streams_mu);
	last = --streams == 0;
	pthread_mutex_unlock(&streams_mu);
	if (last)
		malloc_trim(0);
}

static void unref(struct s3req *s)
{
	bool last;
	pthread_mutex_lock(&s->mu);
	last = --s->refs == 0;
	pthread_mutex_unlock(&s->mu);
	if (!last)
		return;
	buf_free(&s->body);
	buf_free(&s->in);
	buf_free(&s->pending);
	for (int i = 0; i < s->nhdr; i++)
		free(s->hval[i]);
	for (int i = 0; i < s->nurls; i++)
		free(s->urls[i]);
	if (s->ring)
		stream_end(s->ring);
	free(s->path);
	free(s->query);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

static enum MHD_Result start_async(struct s3req *s, void (*fn)(void *))
{
	pthread_mutex_lock(&s->mu);
	s->refs++;
	if (spawn(fn, s) < 0) {
		s->refs--;
		pthread_mutex_unlock(&s->mu);
		s3_error(s, 503, "SlowDown", "server busy: no thread for this request");
		return s_send(s);
	}
	s->async_started = true;
	s->suspended = true;
	MHD_suspend_connection(s->conn);
	pthread_mutex_unlock(&s->mu);
	return MHD_YES;
}

static void async_finish(struct s3req *s)
{
	pthread_mutex_lock(&s->mu);
	s->async_done = true;
	pthread_mutex_unlock(&s->mu);
	s_wake(s);
	unref(s);
}

/* ---- small helpers ---- */

static char *param(struct s3req *s, const char *name)
{
	bool bad = false;
	return s->query ? s3_param(s->query, name, &bad) : NULL;
}

static const char *header(struct s3req *s, const char *name)
{
	return MHD_lookup_connection_value(s->conn, MHD_HEADER_KIND, name);
}

/* A key from XML (raw bytes, not percent-encoded) under the bucket, checked
 * as key_decode checks a path.  0, or a status with *why. */
static int xml_key(struct s3req *s, const char *name, size_t n, char *out, size_t *outlen,
		   const char **why)
{
	struct buf enc = {0};
	int st;
	buf_puts(&enc, "/");
	buf_append(&enc, s->bucket, s->blen);
	buf_puts(&enc, "/");
	for (size_t i = 0; i < n; i++) {
		if (name[i] == '%')
			buf_puts(&enc, "%25");
		else
			buf_append(&enc, &name[i], 1);
	}
	if (enc.len > KEY_MAX * 3) {
		buf_free(&enc);
		*why = "key longer than 189 bytes";
		return 414;
	}
	st = key_decode(enc.data, enc.len, out, outlen, why);
	buf_free(&enc);
	return st;
}

/* The text of the next <tag>...</tag> in [*p, end), XML entities decoded,
 * into a fresh string; *p moves past it.  NULL when there is none. */
static char *xml_next(const char **p, const char *end, const char *tag, size_t *outlen)
{
	char open[64], close[64];
	const char *a, *b;
	struct buf o = {0};
	int ol = snprintf(open, sizeof(open), "<%s>", tag);
	int cl = snprintf(close, sizeof(close), "</%s>", tag);
	a = memmem(*p, (size_t)(end - *p), open, (size_t)ol);
	if (!a)
		return NULL;
	a += ol;
	b = memmem(a, (size_t)(end - a), close, (size_t)cl);
	if (!b)
		return NULL;
	*p = b + cl;
	buf_puts(&o, "");
	for (const char *c = a; c < b; c++) {
		if (*c != '&') {
			buf_append(&o, c, 1);
			continue;
		}
		const char *semi = memchr(c, ';', (size_t)(b - c));
		size_t el = semi ? (size_t)(semi - c) : 0;
		if (el == 4 && !memcmp(c, "&amp", 4))
			buf_puts(&o, "&");
		else if (el == 3 && !memcmp(c, "&lt", 3))
			buf_puts(&o, "<");
		else if (el == 3 && !memcmp(c, "&gt", 3))
			buf_puts(&o, ">");
		else if (el == 5 && !memcmp(c, "&quot", 5))
			buf_puts(&o, "\"");
		else if (el == 5 && !memcmp(c, "&apos", 5))
			buf_puts(&o, "'");
		else if (el > 2 && el < 12 && c[1] == '#') {
			unsigned long v = c[2] == 'x' ? strtoul(c + 3, NULL, 16) : strtoul(c + 2, NULL, 10);
			char u[4];
			int n = 0;
			if (v < 0x80) {
				u[n++] = (char)v;
			} else if (v < 0x800) {
				u[n++] = (char)(0xc0 | v >> 6);
				u[n++] = (char)(0x80 | (v & 63));
			} else if (v < 0x10000) {
				u[n++] = (char)(0xe0 | v >> 12);
				u[n++] = (char)(0x80 | ((v >> 6) & 63));
				u[n++] = (char)(0x80 | (v & 63));
			} else {
				u[n++] = (char)(0xf0 | ((v >> 18) & 7));
				u[n++] = (char)(0x80 | ((v >> 12) & 63));
				u[n++] = (char)(0x80 | ((v >> 6) & 63));
				u[n++] = (char)(0x80 | (v & 63));
			}
			buf_append(&o, u, (size_t)n);
		} else {
			buf_append(&o, c, 1);
			continue;
		}
		c = semi;
	}
	*outlen = o.len;
	return o.data;
}

static void strip_quotes(char *e)
{
	size_t n = strlen(e);
	if (n >= 2 && e[0] == '"' && e[n - 1] == '"') {
		memmove(e, e + 1, n - 2);
		e[n - 2] = '\0';
	}
}

/* Take key's lock, waiting a little: S3 clients retry their own requests
 * on 503, not on 409. */
static bool lock_key(const char *key, size_t klen)
{
	for (int i = 0; i < 50; i++) {
		if (keylock_try(key, klen))
			return true;
		usleep(20000);
	}
	return false;
}

/* A live record of key into r (v keeps its storage; caller frees *v). */
static bool live_record(const char *key, size_t klen, char **v, struct record *r)
{
	size_t vlen;
	*v = index_get(idx, key, klen, &vlen);
	if (!*v)
		return false;
	if (record_parse(*v, vlen, r) < 0 || r->deleted || !r->nlocs) {
		free(*v);
		*v = NULL;
		return false;
	}
	return true;
}

static void part_key(const char *upload, int n, char *out, size_t *len)
{
	*len = (size_t)snprintf(out, KEY_MAX + 1, "/" S3_MPU_BUCKET "/%s/%05d", upload, n);
}

/* The upload's key (heap string) when upload names one, else NULL. */
static char *upload_key(const char *upload, int64_t *initiated)
{
	char *v = upload && strlen(upload) == 32 && strspn(upload, "0123456789abcdef") == 32
			  ? meta_raw_get('u', upload, 32)
			  : NULL;
	char *sp, *k;
	if (!v)
		return NULL;
	sp = strchr(v, ' ');
	if (!sp) {
		free(v);
		return NULL;
	}
	if (initiated)
		*initiated = strtoll(v, NULL, 10);
	k = xstrdup(sp + 1);
	free(v);
	return k;
}

/* ---- GetObject / HeadObject: streamed from a replica ---- */

static size_t on_header(char *b, size_t size, size_t n, void *ud)
{
	struct s3req *s = ud;
	size_t len = size * n;
	if (len >= 15 && !strncasecmp(b, "Content-Range:", 14))
		snprintf(s->crange, sizeof(s->crange), "%.*s", (int)(len - 15), b + 15);
	else if (len >= 16 && !strncasecmp(b, "Content-Length:", 15))
		s->vlen = strtoll(b + 15, NULL, 10);
	else if (len >= 15 && !strncasecmp(b, "Last-Modified:", 14))
		snprintf(s->vlastmod, sizeof(s->vlastmod), "%.*s", (int)(len - 15), b + 15);
	else if (len == 2 && b[0] == '\r') {
		long st = s->vstatus; /* from the status line */
		if (st == 200 || st == 206 || st == 416) {
			for (char *c = s->crange + strlen(s->crange); c > s->crange &&
			     (c[-1] == '\r' || c[-1] == '\n'); c--)
				c[-1] = '\0';
			for (char *c = s->vlastmod + strlen(s->vlastmod); c > s->vlastmod &&
			     (c[-1] == '\r' || c[-1] == '\n'); c--)
				c[-1] = '\0';
			pthread_mutex_lock(&s->mu);
			s->hdr_done = true;
			pthread_mutex_unlock(&s->mu);
			if (st == 416)
				return 0; /* nothing to stream */
			s_wake(s);
		} else {
			return 0; /* this replica cannot serve: try the next */
		}
	} else if (len > 9 && !strncmp(b, "HTTP/", 5)) {
		const char *sp = strchr(b, ' ');
		s->vstatus = sp ? strtol(sp + 1, NULL, 10) : 0;
		s->crange[0] = s->vlastmod[0] = '\0';
		s->vlen = -1;
	}
	return len;
}

static size_t on_body(char *b, size_t size, size_t n, void *ud)
{
	struct s3req *s = ud;
	size_t len = size * n, done = 0;
	pthread_mutex_lock(&s->mu);
	while (done < len) {
		size_t room = RING_CAP - (size_t)(s->rhead - s->rtail), off, chunk;
		if (s->gone)
			break;
		if (!room) {
			pthread_cond_wait(&s->cv, &s->mu);
			continue;
		}
		chunk = len - done < room ? len - done : room;
		off = (size_t)(s->rhead % RING_CAP);
		if (chunk > RING_CAP - off)
			chunk = RING_CAP - off;
		memcpy(s->ring + off, b + done, chunk);
		s->rhead += chunk;
		done += chunk;
		if (s->suspended) {
			s->suspended = false;
			MHD_resume_connection(s->conn);
		}
	}
	pthread_mutex_unlock(&s->mu);
	return done;
}

/* Easy handles kept between GETs, and with them their connections to the
 * volumes. */
#define CURL_IDLE_MAX 32
static pthread_mutex_t curl_mu = PTHREAD_MUTEX_INITIALIZER;
static CURL *curl_idle[CURL_IDLE_MAX];
static int ncurl_idle;

static CURL *curl_get(void)
{
	CURL *h = NULL;
	pthread_mutex_lock(&curl_mu);
	if (ncurl_idle)
		h = curl_idle[--ncurl_idle];
	pthread_mutex_unlock(&curl_mu);
	return h ? h : curl_easy_init();
}

static void curl_put(CURL *h)
{
	pthread_mutex_lock(&curl_mu);
	if (ncurl_idle < CURL_IDLE_MAX) {
		curl_idle[ncurl_idle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&curl_mu);
	if (h)
		curl_easy_cleanup(h);
}

static void stream_main(void *arg)
{
	struct s3req *s = arg;
	CURL *h = curl_get();
	struct curl_slist *hl = NULL;
	int start = s->nurls ? (int)(now_ms() % (uint64_t)s->nurls) : 0;
	bool missing = true;

	if (!h)
		die("curl_easy_init failed");
	if (s->range[0]) {
		char line[160];
		snprintf(line, sizeof(line), "Range: %s", s->range);
		hl = curl_slist_append(hl, line);
	}
	for (int i = 0; i < s->nurls && !s->hdr_done; i++) {
		CURLcode rc;
		curl_easy_reset(h);
		curl_easy_setopt(h, CURLOPT_URL, s->urls[(start + i) % s->nurls]);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, s);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->voltimeout_ms);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
				 (long)(cfg->puttimeout_ms / 1000 ? cfg->puttimeout_ms / 1000 : 1));
		curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L * 1024);
		if (s->head)
			curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
		rc = curl_easy_perform(h);
		if (!s->hdr_done && s->vstatus != 404)
			missing = false;
		if (s->hdr_done && rc != CURLE_OK && s->vstatus != 416) {
			pthread_mutex_lock(&s->mu);
			s->failed = true; /* cut off mid-body: the client sees a short answer */
			pthread_mutex_unlock(&s->mu);
		}
	}
	curl_slist_free_all(hl);
	if (s->failed || s->gone)
		curl_easy_cleanup(h); /* its connection may be mid-body */
	else
		curl_put(h);
	pthread_mutex_lock(&s->mu);
	if (!s->hdr_done)
		s->vstatus = missing ? 404 : 503;
	s->eof = true;
	if (s->suspended && !s->gone) {
		s->suspended = false;
		MHD_resume_connection(s->conn);
	}
	s->woken = true;
	pthread_mutex_unlock(&s->mu);
	unref(s);
}

/* MHD's content reader: what the ring holds; sleep while it is empty. */
static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct s3req *s = cls;
	size_t avail, off, n;
	(void)pos;
	pthread_mutex_lock(&s->mu);
	avail = (size_t)(s->rhead - s->rtail);
	if (!avail) {
		bool eof = s->eof, failed = s->failed;
		if (eof) {
			pthread_mutex_unlock(&s->mu);
			return failed ? MHD_CONTENT_READER_END_WITH_ERROR
				      : MHD_CONTENT_READER_END_OF_STREAM;
		}
		s->suspended = true;
		MHD_suspend_connection(s->conn);
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	n = avail < max ? avail : max;
	off = (size_t)(s->rtail % RING_CAP);
	if (n > RING_CAP - off)
		n = RING_CAP - off;
	memcpy(out, s->ring + off, n);
	s->rtail += n;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return (ssize_t)n;
}

static bool etag_matches(const char *list, const char *etag)
{
	char one[META_ETAG_MAX + 8];
	while (*list) {
		size_t n;
		list += strspn(list, " ,");
		n = strcspn(list, ",");
		while (n && list[n - 1] == ' ')
			n--;
		if (n == 1 && list[0] == '*')
			return true;
		if (n < sizeof(one)) {
			memcpy(one, list, n);
			one[n] = '\0';
			if (!strncmp(one, "W/", 2))
				memmove(one, one + 2, n - 1);
			strip_quotes(one);
			if (!strcmp(one, etag))
				return true;
		}
		list += n;
		list += strspn(list, " ,");
	}
	return false;
}

static void object_headers(struct s3req *s)
{
	char when[40];
	if (s->etag[0])
		hdr(s, "ETag", "\"%s\"", s->etag);
	if (s->have_meta) {
		s3_http_time(s->mtime, when);
		hdr(s, "Last-Modified", "%s", when);
	} else if (s->vlastmod[0]) {
		hdr(s, "Last-Modified", "%s", s->vlastmod);
	}
	hdr(s, "Accept-Ranges", "bytes");
	hdr(s, "Content-Type", "binary/octet-stream");
}

/* First part of GetObject/HeadObject: the index and the sidecar only.
 * true when answered (s->status set) without a volume. */
static bool get_prepare(struct s3req *s)
{
	struct record r;
	char *v, path[PATH_MAX_LEN];
	struct meta m;
	const char *im = header(s, "If-Match"), *inm = header(s, "If-None-Match"),
		   *rg = header(s, "Range");

	if (!live_record(s->key, s->klen, &v, &r)) {
		s3_error(s, 404, "NoSuchKey", "The specified key does not exist.");
		return true;
	}
	s->have_meta = meta_get(s->key, s->klen, &m);
	snprintf(s->etag, sizeof(s->etag), "%s", s->have_meta && m.etag[0] ? m.etag : r.hash);
	s->mtime = m.mtime;
	s->size = m.size;
	placement_path(s->key, s->klen, path);
	for (int i = 0; i < r.nlocs; i++)
		if (health_up(r.locs[i], strlen(r.locs[i])))
			s->urls[s->nurls++] = xasprintf("http://%s%s", r.locs[i], path);
	free(v);
	if (s->etag[0] && im && !etag_matches(im, s->etag)) {
		s3_error(s, 412, "PreconditionFailed", "At least one of the preconditions you "
			 "specified did not hold.");
		return true;
	}
	if (s->etag[0] && inm && etag_matches(inm, s->etag)) {
		s->status = 304;
		hdr(s, "ETag", "\"%s\"", s->etag);
		return true;
	}
	if (!s->nurls) {
		s3_error(s, 503, "ServiceUnavailable", "no replica of this key is on a volume that is up");
		return true;
	}
	if (rg && !strchr(rg, ',') && strlen(rg) < sizeof(s->range))
		snprintf(s->range, sizeof(s->range), "%s", rg);
	if (s->head && s->have_meta && !s->range[0]) {
		s->status = 200;
		s->stream = true;  /* an empty stream: MHD sends no body to HEAD */
		s->vlen = (int64_t)s->size;
		s->eof = true;
		object_headers(s);
		return true;
	}
	return false;
}

static enum MHD_Result get_run(struct s3req *s)
{
	bool done, eof;
	if (!s->async_started) {
		if (get_prepare(s))
			return s_send(s);
		s->ring = stream_begin();
		s->vlen = -1;
		return start_async(s, stream_main);
	}
	pthread_mutex_lock(&s->mu);
	done = s->hdr_done;
	eof = s->eof;
	pthread_mutex_unlock(&s->mu);
	if (!done && !eof) {
		s_wait(s);
		return MHD_YES;
	}
	if (!done) {
		if (s->vstatus == 404)
			s3_error(s, 404, "NoSuchKey", "no replica holds this key's bytes");
		else
			s3_error(s, 503, "ServiceUnavailable", "no replica could be read");
		return s_send(s);
	}
	if (s->vstatus == 416) {
		s3_error(s, 416, "InvalidRange", "The requested range is not satisfiable");
		if (s->crange[0])
			hdr(s, "Content-Range", "%s", s->crange);
		return s_send(s);
	}
	s->status = (int)s->vstatus;
	s->stream = true;
	if (s->crange[0])
		hdr(s, "Content-Range", "%s", s->crange);
	object_headers(s);
	return s_send(s);
}

/* ---- PutObject / UploadPart ---- */

/* Decode aws-chunked input into s->pending.  false on malformed framing. */
static bool dec_feed(struct s3req *s, const char *p, size_t n)
{
	struct chunkdec *d = &s->dec;
	while (n && d->st != DEC_ERROR) {
		switch (d->st) {
		case DEC_DATA: {
			size_t k = n < d->left ? n : (size_t)d->left;
			buf_append(&s->pending, p, k);
			p += k;
			n -= k;
			d->left -= k;
			if (!d->left)
				d->st = DEC_DATA_END;
			break;
		}
		case DEC_DONE:
			return false; /* bytes after the end */
		default:
			if (d->llen == CHUNK_LINE_MAX) {
				d->st = DEC_ERROR;
				break;
			}
			d->line[d->llen++] = *p++;
			n--;
			if (d->llen < 2 || d->line[d->llen - 2] != '\r' || d->line[d->llen - 1] != '\n')
				break;
			d->line[d->llen - 2] = '\0';
			if (d->st == DEC_DATA_END) {
				d->st = d->llen == 2 ? DEC_SIZE : DEC_ERROR;
			} else if (d->st == DEC_SIZE) {
				char *e;
				uint64_t v;
				if (!d->line[0] || hex_value(d->line[0]) < 0) {
					d->st = DEC_ERROR;
					break;
				}
				v = strtoull(d->line, &e, 16);
				if (*e && *e != ';')
					d->st = DEC_ERROR;
				else if (v)
					d->st = DEC_DATA, d->left = v;
				else
					d->st = DEC_TRAILER;
			} else if (d->st == DEC_TRAILER) {
				if (d->llen == 2)
					d->st = DEC_DONE;
			}
			d->llen = 0;
		}
	}
	return d->st != DEC_ERROR;
}

/* Before the body: what can be refused, then the put.  true when answered. */
static bool put_prepare(struct s3req *s)
{
	const char *ce = header(s, "Content-Encoding"), *sha = header(s, "X-Amz-Content-Sha256");
	const char *cl, *why;
	char locs[RECORD_MAX_LOCS][LOC_MAX], *lp[RECORD_MAX_LOCS];
	uint64_t clen = 0;
	bool known;
	int n;

	s->aws_chunked = (ce && strstr(ce, "aws-chunked")) || (sha && !strncmp(sha, "STREAMING-", 10));
	cl = s->aws_chunked ? header(s, "X-Amz-Decoded-Content-Length") : header(s, "Content-Length");
	known = cl && parse_u64(cl, 0, INT64_MAX, &clen);
	if (known && cfg->maxsize && clen > cfg->maxsize) {
		s3_error(s, 400, "EntityTooLarge", "value larger than -maxsize");
		return true;
	}
	if (s->op == S3_MPU_PART) {
		char *up = param(s, "uploadId"), *pn = param(s, "partNumber"), *k;
		uint64_t num = 0;
		k = upload_key(up, NULL);
		if (!k || strlen(k) != s->klen || memcmp(k, s->key, s->klen)) {
			s3_error(s, 404, "NoSuchUpload", "The specified upload does not exist.");
		} else if (!pn || !parse_u64(pn, 1, PARTS_MAX, &num)) {
			s3_error(s, 400, "InvalidArgument", "Part number must be an integer between 1 "
				 "and 10000, inclusive");
		} else {
			part_key(up, (int)num, s->target, &s->tlen);
		}
		free(up);
		free(pn);
		free(k);
		if (s->status)
			return true;
	} else {
		memcpy(s->target, s->key, s->klen);
		s->tlen = s->klen;
	}
	if (!keylock_try(s->target, s->tlen)) { /* a poll thread: no waiting here */
		s3_error(s, 503, "SlowDown", "another write of this key is in progress");
		return true;
	}
	n = handle_put_locations(cfg, s->target, s->tlen, locs, &why);
	if (n < 0) {
		keylock_release(s->target, s->tlen);
		s3_error(s, 503, "ServiceUnavailable", why);
		return true;
	}
	for (int i = 0; i < n; i++)
		lp[i] = locs[i];
	/* An aws-chunked body goes to the volumes unannounced (chunked), even
	 * with its decoded length known: then no replica can finish before
	 * the framing has been checked to its end, and bad framing leaves
	 * the old value everywhere. */
	s->put = put_start_replace(cfg, idx, s->target, s->tlen, lp, n,
				   known && !s->aws_chunked ? (int64_t)clen : -1, s_wake, s, S3_RING);
	return false;
}

/* The body went wrong mid-way: stop the put (the old value stays). */
static void put_refuse(struct s3req *s, int why)
{
	if (!s->bad)
		put_abort(s->put);
	s->bad = why;
}

static enum MHD_Result put_run(struct s3req *s, const char *data, size_t *size)
{
	int st;
	const char *why;

	if (!s->prepared) {
		s->prepared = true;
		if (put_prepare(s))
			return s3_handler(s, data, size); /* answered once the body is in */
	}
	/* what was decoded but not yet taken goes first */
	while (s->poff < s->pending.len) {
		size_t took = put_feed(s->put, s->pending.data + s->poff, s->pending.len - s->poff);
		s->poff += took;
		if (s->poff < s->pending.len) {
			s_wait(s);
			return MHD_YES;
		}
	}
	s->pending.len = s->poff = 0;
	if (*size) {
		size_t took = *size;
		if (s->aws_chunked) {
			if (!dec_feed(s, data, *size))
				put_refuse(s, BAD_FRAMING);
			took = s->pending.len;
		}
		if (cfg->maxsize && s->fed + took > cfg->maxsize) {
			put_refuse(s, BAD_SIZE);
			s->pending.len = 0;
		}
		if (s->bad || s->aws_chunked) {
			s->fed += s->bad ? 0 : took;
			*size = 0;
			return MHD_YES;
		}
		took = put_feed(s->put, data, *size);
		s->fed += took;
		*size -= took;
		if (*size)
			s_wait(s);
		return MHD_YES;
	}
	if (s->aws_chunked && s->dec.st != DEC_DONE)
		put_refuse(s, BAD_FRAMING);
	if (s->bad) {
		if (!put_result(s->put, &st, &why)) {
			s_wait(s);
			return MHD_YES;
		}
		if (s->bad == BAD_SIZE)
			s3_error(s, 400, "EntityTooLarge", "value larger than -maxsize");
		else
			s3_error(s, 400, "IncompleteBody", "malformed or truncated aws-chunked body");
		return s_send(s);
	}
	if (!s->put_finished) {
		put_finish(s->put);
		s->put_finished = true;
	}
	if (!put_result(s->put, &st, &why)) {
		s_wait(s);
		return MHD_YES;
	}
	if (st != 201) {
		s3_error(s, st >= 500 ? st : 500, "InternalError", why);
		return s_send(s);
	}
	s->status = 200;
	hdr(s, "ETag", "\"%s\"", put_md5(s->put));
	return s_send(s);
}

/* ---- everything else, on a thread of its own ---- */

static int delete_key(const char *key, size_t klen, const char **why)
{
	struct answer a = {0};
	int st;
	if (!lock_key(key, klen)) {
		*why = "another write of this key is in progress";
		return 503;
	}
	handle_delete(cfg, idx, key, klen, false, &a);
	keylock_release(key, klen);
	st = a.status == 404 ? 204 : a.status;
	*why = st == 204 ? NULL : "a volume refused the delete; the key stays unlinked";
	answer_free(&a);
	return st;
}

static void do_delete_many(struct s3req *s)
{
	const char *p = s->in.data ? s->in.data : "", *end = p + s->in.len, *why;
	char *quiet = NULL;
	size_t ql;
	bool q;
	int n = 0;
	struct buf out = {0};

	if (s->in_too_big) {
		s3_error(s, 400, "MalformedXML", "request body too large");
		return;
	}
	{
		const char *qp = p;
		quiet = xml_next(&qp, end, "Quiet", &ql);
	}
	q = quiet && !strcmp(quiet, "true");
	free(quiet);
	buf_puts(&out, "");
	for (;;) {
		size_t olen, kl, fl;
		char *obj, *k, full[KEY_MAX * 3 + 8];
		const char *op;
		int st;
		obj = xml_next(&p, end, "Object", &olen);
		if (!obj)
			break;
		op = obj;
		k = xml_next(&op, obj + olen, "Key", &kl);
		if (++n > 1000 || !k) {
			free(k);
			free(obj);
			buf_free(&out);
			s3_error(s, 400, "MalformedXML", n > 1000 ? "more than 1000 keys" : "an Object without a Key");
			return;
		}
		st = xml_key(s, k, kl, full, &fl, &why);
		if (!st)
			st = delete_key(full, fl, &why);
		if (st == 204) {
			if (!q) {
				buf_puts(&out, "<Deleted><Key>");
				xml_escape(&out, k, kl);
				buf_puts(&out, "</Key></Deleted>");
			}
		} else {
			buf_puts(&out, "<Error><Key>");
			xml_escape(&out, k, kl);
			buf_printf(&out, "</Key><Code>%s</Code><Message>",
				   st == 503 ? "SlowDown" : st < 500 ? "InvalidArgument" : "InternalError");
			xml_escape(&out, why, strlen(why));
			buf_puts(&out, "</Message></Error>");
		}
		free(k);
		free(obj);
	}
	if (!n && !memmem(s->in.data ? s->in.data : "", s->in.len, "<Delete", 7)) {
		buf_free(&out);
		s3_error(s, 400, "MalformedXML", "no <Delete> document");
		return;
	}
	xml_start(s, 200);
	buf_puts(&s->body, "<DeleteResult xmlns=\"" XMLNS "\">");
	buf_append(&s->body, out.data, out.len);
	buf_puts(&s->body, "</DeleteResult>");
	buf_free(&out);
}

static void do_list(struct s3req *s)
{
	struct s3_list_args a = {.bucket = s->bucket};
	char *lt = param(s, "list-type"), *et = param(s, "encoding-type"), *fo = param(s, "fetch-owner");
	char *pre = param(s, "prefix"), *dl = param(s, "delimiter"), *mk = param(s, "max-keys");
	char *tok = param(s, "continuation-token"), *sa = param(s, "start-after"), *mr = param(s, "marker");
	const char *why = NULL;
	int st;
	a.v2 = lt && !strcmp(lt, "2");
	a.url = et && !strcmp(et, "url");
	a.fetch_owner = fo && !strcmp(fo, "true");
	a.prefix = pre;
	a.delimiter = dl;
	a.max_keys = mk;
	a.token = a.v2 ? tok : NULL;
	a.after = a.v2 ? sa : mr;
	if (et && !a.url) {
		s3_error(s, 400, "InvalidArgument", "Invalid Encoding Method specified in Request");
	} else {
		s->body.len = 0;
		st = s3_list_objects(idx, &a, &s->body, &why);
		if (st != 200)
			s3_error(s, st, "InvalidArgument", why);
		else
			s->status = 200;
	}
	free(lt), free(et), free(fo), free(pre), free(dl), free(mk), free(tok), free(sa), free(mr);
}

static void do_list_uploads(struct s3req *s)
{
	struct index *side = meta_index();
	struct index_iter *it;
	int n = 0;
	xml_start(s, 200);
	buf_puts(&s->body, "<ListMultipartUploadsResult xmlns=\"" XMLNS "\"><Bucket>");
	xml_escape(&s->body, s->bucket, s->blen);
	buf_puts(&s->body, "</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>"
			   "<MaxUploads>1000</MaxUploads>");
	if (side) {
		it = index_iter_new(side, "u", 1);
		for (; index_iter_valid(it) && n < 1000; index_iter_next(it)) {
			size_t kl, vl;
			const char *k = index_iter_key(it, &kl), *v = index_iter_value(it, &vl), *sp;
			char iso[32];
			if (!kl || k[0] != 'u')
				break;
			sp = memchr(v, ' ', vl);
			if (!sp || kl != 33)
				continue;
			/* the key must be /<bucket>/... */
			if ((size_t)(v + vl - sp - 1) <= s->blen + 2 || sp[1] != '/' ||
			    memcmp(sp + 2, s->bucket, s->blen) || sp[2 + s->blen] != '/')
				continue;
			s3_iso_time(strtoll(v, NULL, 10), iso);
			buf_puts(&s->body, "<Upload><Key>");
			xml_escape(&s->body, sp + 3 + s->blen, (size_t)(v + vl - sp - 3) - s->blen);
			buf_printf(&s->body, "</Key><UploadId>%.32s</UploadId><Initiated>%s</Initiated>"
					     "<StorageClass>STANDARD</StorageClass></Upload>", k + 1, iso);
			n++;
		}
		index_iter_free(it);
	}
	buf_puts(&s->body, "<IsTruncated>false</IsTruncated></ListMultipartUploadsResult>");
}

static void do_mpu_create(struct s3req *s)
{
	unsigned char r[16];
	char id[33], *v;
	static const char hex[] = "0123456789abcdef";
	if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
		s3_error(s, 500, "InternalError", "no randomness for an upload id");
		return;
	}
	for (int i = 0; i < 16; i++) {
		id[2 * i] = hex[r[i] >> 4];
		id[2 * i + 1] = hex[r[i] & 15];
	}
	id[32] = '\0';
	v = xasprintf("%lld %.*s", (long long)time(NULL), (int)s->klen, s->key);
	if (meta_raw_put('u', id, 32, v, true) < 0) {
		free(v);
		s3_error(s, 500, "InternalError", "index write failed");
		return;
	}
	free(v);
	xml_start(s, 200);
	buf_puts(&s->body, "<InitiateMultipartUploadResult xmlns=\"" XMLNS "\"><Bucket>");
	xml_escape(&s->body, s->bucket, s->blen);
	buf_puts(&s->body, "</Bucket><Key>");
	xml_escape(&s->body, s->key + s->blen + 2, s->klen - s->blen - 2);
	buf_printf(&s->body, "</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>", id);
}

/* Every part key of an upload, in order, by callback. */
static void each_part(const char *upload, void (*fn)(void *, const char *, size_t, int, const char *,
						     size_t), void *ctx)
{
	char pfx[64];
	size_t plen = (size_t)snprintf(pfx, sizeof(pfx), "/" S3_MPU_BUCKET "/%s/", upload);
	struct index_iter *it = index_iter_new(idx, pfx, plen);
	for (; index_iter_valid(it); index_iter_next(it)) {
		size_t kl, vl;
		const char *k = index_iter_key(it, &kl), *v = index_iter_value(it, &vl);
		if (kl < plen || memcmp(k, pfx, plen))
			break;
		if (kl != plen + 5 || (vl >= 7 && !memcmp(v, "DELETED", 7)))
			continue;
		fn(ctx, k, kl, atoi(k + plen), v, vl);
	}
	index_iter_free(it);
}

struct keys { char (*k)[64]; size_t *len; int n; };

static void collect(void *ctx, const char *k, size_t kl, int num, const char *v, size_t vl)
{
	struct keys *ks = ctx;
	(void)num, (void)v, (void)vl;
	if (ks->n == PARTS_MAX || kl >= 64)
		return;
	memcpy(ks->k[ks->n], k, kl);
	ks->len[ks->n++] = kl;
}

static void drop_parts(const char *upload)
{
	struct keys ks = {xmalloc(PARTS_MAX * 64), xmalloc(PARTS_MAX * sizeof(size_t)), 0};
	const char *why;
	each_part(upload, collect, &ks);
	for (int i = 0; i < ks.n; i++)
		if (delete_key(ks.k[i], ks.len[i], &why) != 204)
			log_msg("multipart %s: part %.*s not removed: %s", upload, (int)ks.len[i],
				ks.k[i], why);
	free(ks.k);
	free(ks.len);
}

static void do_mpu_abort(struct s3req *s)
{
	char *up = param(s, "uploadId"), *k = upload_key(up, NULL);
	if (!k || strlen(k) != s->klen || memcmp(k, s->key, s->klen)) {
		s3_error(s, 404, "NoSuchUpload", "The specified upload does not exist.");
	} else {
		meta_raw_delete('u', up, 32);
		drop_parts(up);
		s->status = 204;
	}
	free(up);
	free(k);
}

struct partlist { struct buf *b; int marker, max, n, last; bool more; };

static void list_part(void *ctx, const char *k, size_t kl, int num, const char *v, size_t vl)
{
	struct partlist *pl = ctx;
	struct meta m;
	char iso[32];
	(void)v, (void)vl;
	if (num <= pl->marker)
		return;
	if (pl->n == pl->max) {
		pl->more = true;
		return;
	}
	meta_get(k, kl, &m);
	s3_iso_time(m.mtime, iso);
	buf_printf(pl->b, "<Part><PartNumber>%d</PartNumber><LastModified>%s</LastModified>"
			  "<ETag>&quot;%s&quot;</ETag><Size>%" PRIu64 "</Size></Part>",
		   num, iso, m.etag, m.size);
	pl->n++;
	pl->last = num;
}

static void do_mpu_list_parts(struct s3req *s)
{
	char *up = param(s, "uploadId"), *k = upload_key(up, NULL), *mp = param(s, "max-parts"),
	     *pm = param(s, "part-number-marker");
	uint64_t max = 1000, marker = 0;
	struct buf parts = {0};
	struct partlist pl = {&parts, 0, 0, 0, 0, false};
	if (!k || strlen(k) != s->klen || memcmp(k, s->key, s->klen)) {
		s3_error(s, 404, "NoSuchUpload", "The specified upload does not exist.");
	} else if ((mp && !parse_u64(mp, 0, 1000000, &max)) ||
		   (pm && !parse_u64(pm, 0, PARTS_MAX, &marker))) {
		s3_error(s, 400, "InvalidArgument", "max-parts and part-number-marker are integers");
	} else {
		pl.max = max > 1000 ? 1000 : (int)max;
		pl.marker = (int)marker;
		buf_puts(&parts, "");
		each_part(up, list_part, &pl);
		xml_start(s, 200);
		buf_puts(&s->body, "<ListPartsResult xmlns=\"" XMLNS "\"><Bucket>");
		xml_escape(&s->body, s->bucket, s->blen);
		buf_puts(&s->body, "</Bucket><Key>");
		xml_escape(&s->body, s->key + s->blen + 2, s->klen - s->blen - 2);
		buf_printf(&s->body, "</Key><UploadId>%s</UploadId><PartNumberMarker>%d"
				     "</PartNumberMarker><NextPartNumberMarker>%d</NextPartNumberMarker>"
				     "<MaxParts>%d</MaxParts><IsTruncated>%s</IsTruncated>"
				     "<StorageClass>STANDARD</StorageClass>",
			   up, pl.marker, pl.last, pl.max, pl.more ? "true" : "false");
		buf_append(&s->body, parts.data, parts.len);
		buf_puts(&s->body, "</ListPartsResult>");
	}
	buf_free(&parts);
	free(up), free(k), free(mp), free(pm);
}

/* CompleteMultipartUpload's copy: parts stream from a replica into a put. */
struct feeder {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool woken;
	struct put *p;
	uint64_t got;
};

static void feeder_wake(void *arg)
{
	struct feeder *f = arg;
	pthread_mutex_lock(&f->mu);
	f->woken = true;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

static void feeder_wait(struct feeder *f)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += 100 * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&f->mu);
	if (!f->woken)
		pthread_cond_timedwait(&f->cv, &f->mu, &t);
	f->woken = false;
	pthread_mutex_unlock(&f->mu);
}

static size_t feed_body(char *b, size_t size, size_t n, void *ud)
{
	struct feeder *f = ud;
	size_t len = size * n, done = 0;
	while (done < len) {
		done += put_feed(f->p, b + done, len - done);
		if (done < len)
			feeder_wait(f);
	}
	f->got += len;
	return len;
}

/* Copy one part (size bytes) into the put from a live replica.  0 or -1. */
static int copy_part(struct feeder *f, const char *key, size_t klen, uint64_t size)
{
	struct record r;
	char *v, path[PATH_MAX_LEN];
	CURL *h;
	int rc = -1;
	if (!live_record(key, klen, &v, &r))
		return -1;
	placement_path(key, klen, path);
	h = curl_get();
	for (int i = 0; i < r.nlocs && rc < 0; i++) {
		char url[LOC_MAX + PATH_MAX_LEN + 16];
		long st = 0;
		if (!health_up(r.locs[i], strlen(r.locs[i])))
			continue;
		if (f->got) /* bytes of this part already went in: no retry elsewhere */
			break;
		snprintf(url, sizeof(url), "http://%s%s", r.locs[i], path);
		curl_easy_reset(h);
		curl_easy_setopt(h, CURLOPT_URL, url);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, feed_body);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
		curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->voltimeout_ms);
		curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L * 1024);
		if (curl_easy_perform(h) == CURLE_OK) {
			curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
			if (st == 200 && (size == UINT64_MAX || f->got == size))
				rc = 0;
		}
	}
	if (rc == 0)
		curl_put(h);
	else
		curl_easy_cleanup(h);
	free(v);
	return rc;
}

/* Write s->key (REPLACE) from the bytes of keys[0..n), in order, streamed
 * from their volumes (sizes[i] each; UINT64_MAX = unknown).  etag: what
 * the metadata keeps (NULL: the md5).  200, or a status with *why. */
static int write_from(struct s3req *s, char (*keys)[KEY_MAX + 1], const size_t *klens,
		      const uint64_t *sizes, int n, uint64_t total, const char *etag,
		      const char **why)
{
	char locs[RECORD_MAX_LOCS][LOC_MAX], *lp[RECORD_MAX_LOCS];
	struct feeder f = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	int np, st;

	if (!lock_key(s->key, s->klen)) {
		*why = "another write of this key is in progress";
		return 503;
	}
	np = handle_put_locations(cfg, s->key, s->klen, locs, why);
	if (np < 0) {
		keylock_release(s->key, s->klen);
		return 503;
	}
	for (int i = 0; i < np; i++)
		lp[i] = locs[i];
	f.p = put_start_replace(cfg, idx, s->key, s->klen, lp, np,
				total == UINT64_MAX ? -1 : (int64_t)total, feeder_wake, &f, 0);
	if (etag)
		put_set_etag(f.p, etag);
	for (int i = 0; i < n; i++) {
		f.got = 0;
		if (copy_part(&f, keys[i], klens[i], sizes[i]) < 0) {
			put_abort(f.p);
			break;
		}
	}
	put_finish(f.p);
	while (!put_result(f.p, &st, why))
		feeder_wait(&f);
	if (st == 201)
		snprintf(s->etag, sizeof(s->etag), "%s", etag ? etag : put_md5(f.p));
	else
		snprintf(s->range, sizeof(s->range), "%s", *why); /* outlives the put */
	put_release(f.p);
	if (st != 201)
		*why = s->range;
	return st == 201 ? 200 : st >= 500 ? st : 500;
}

static void do_copy(struct s3req *s)
{
	const char *src = header(s, "X-Amz-Copy-Source"), *why;
	char key[KEY_MAX * 3 + 8], *v, iso[32];
	char (*keys)[KEY_MAX + 1] = xmalloc(sizeof(*keys));
	size_t n = strcspn(src, "?"), klen;
	struct buf path = {0};
	struct record r;
	struct meta m;
	int st;
	uint64_t size;

	buf_puts(&path, "/");
	buf_append(&path, src[0] == '/' ? src + 1 : src, src[0] == '/' ? n - 1 : n);
	st = path.len > KEY_MAX * 3 ? 414 : key_decode(path.data, path.len, key, &klen, &why);
	buf_free(&path);
	if (st) {
		s3_error(s, 400, "InvalidArgument", "x-amz-copy-source is not a valid key");
		goto out;
	}
	if (!live_record(key, klen, &v, &r)) {
		s3_error(s, 404, "NoSuchKey", "The specified key does not exist.");
		goto out;
	}
	free(v);
	bool known = meta_get(key, klen, &m);
	size = known ? m.size : UINT64_MAX;
	if (klen == s->klen && !memcmp(key, s->key, klen)) {
		/* a copy onto itself changes metadata only, which mkv does not keep */
		snprintf(s->etag, sizeof(s->etag), "%s", known && m.etag[0] ? m.etag : r.hash);
	} else {
		memcpy(keys[0], key, klen);
		st = write_from(s, keys, &klen, &size, 1, size,
				known && strchr(m.etag, '-') ? m.etag : NULL, &why);
		if (st != 200) {
			s3_error(s, st, st == 503 ? "SlowDown" : "InternalError", why);
			goto out;
		}
	}
	s3_iso_time((int64_t)time(NULL), iso);
	xml_start(s, 200);
	buf_printf(&s->body, "<CopyObjectResult xmlns=\"" XMLNS "\"><LastModified>%s</LastModified>"
			     "<ETag>&quot;%s&quot;</ETag></CopyObjectResult>", iso, s->etag);
out:
	free(keys);
}

static void do_mpu_complete(struct s3req *s)
{
	char *up = param(s, "uploadId"), *k = upload_key(up, NULL);
	const char *p = s->in.data ? s->in.data : "", *end = p + s->in.len, *why;
	int *nums = xmalloc(PARTS_MAX * sizeof(int)), n = 0, last = 0;
	uint64_t *sizes = xmalloc(PARTS_MAX * sizeof(uint64_t)), total = 0;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	char etag[META_ETAG_MAX];
	unsigned char d[16];
	int st;

	EVP_DigestInit_ex(md, EVP_md5(), NULL);
	if (!k || strlen(k) != s->klen || memcmp(k, s->key, s->klen)) {
		s3_error(s, 404, "NoSuchUpload", "The specified upload does not exist.");
		goto out;
	}
	if (s->in_too_big) {
		s3_error(s, 400, "MalformedXML", "request body too large");
		goto out;
	}
	for (;;) {
		size_t pl, nl, el;
		char *part = xml_next(&p, end, "Part", &pl), *num, *et, pk[KEY_MAX + 1];
		const char *pp = part;
		uint64_t v = 0;
		struct meta m;
		size_t pkl;
		if (!part)
			break;
		num = xml_next(&pp, part + pl, "PartNumber", &nl);
		pp = part;
		et = xml_next(&pp, part + pl, "ETag", &el);
		if (!num || !parse_u64(num, 1, PARTS_MAX, &v) || (int)v <= last) {
			s3_error(s, 400, num && v ? "InvalidPartOrder" : "MalformedXML",
				 "parts must be listed in ascending order, each once");
		} else {
			part_key(up, (int)v, pk, &pkl);
			if (et)
				strip_quotes(et);
			if (!meta_get(pk, pkl, &m) || strlen(m.etag) != 32 || (et && strcmp(et, m.etag)))
				s3_error(s, 400, "InvalidPart", "One or more of the specified parts "
					 "could not be found or its ETag does not match.");
			else {
				unsigned char bin[16];
				for (int i = 0; i < 16; i++)
					bin[i] = (unsigned char)(hex_value(m.etag[2 * i]) << 4 |
								 hex_value(m.etag[2 * i + 1]));
				EVP_DigestUpdate(md, bin, 16);
				nums[n] = (int)v;
				sizes[n++] = m.size;
				total += m.size;
				last = (int)v;
			}
		}
		free(num);
		free(et);
		free(part);
		if (s->status)
			goto out;
	}
	if (!n) {
		s3_error(s, 400, "MalformedXML", "no parts listed");
		goto out;
	}
	EVP_DigestFinal_ex(md, d, NULL);
	for (int i = 0; i < 16; i++)
		snprintf(etag + 2 * i, 3, "%02x", d[i]);
	snprintf(etag + 32, sizeof(etag) - 32, "-%d", n);

	{
		char (*keys)[KEY_MAX + 1] = xmalloc((size_t)n * sizeof(*keys));
		size_t *klens = xmalloc((size_t)n * sizeof(size_t));
		for (int i = 0; i < n; i++)
			part_key(up, nums[i], keys[i], &klens[i]);
		st = write_from(s, keys, klens, sizes, n, total, etag, &why);
		free(keys);
		free(klens);
		if (st != 200) {
			s3_error(s, st, st == 503 ? "SlowDown" : "InternalError", why);
			goto out;
		}
	}
	meta_raw_delete('u', up, 32);
	drop_parts(up);
	xml_start(s, 200);
	buf_puts(&s->body, "<CompleteMultipartUploadResult xmlns=\"" XMLNS "\"><Location>");
	xml_escape(&s->body, s->key, s->klen);
	buf_puts(&s->body, "</Location><Bucket>");
	xml_escape(&s->body, s->bucket, s->blen);
	buf_puts(&s->body, "</Bucket><Key>");
	xml_escape(&s->body, s->key + s->blen + 2, s->klen - s->blen - 2);
	buf_printf(&s->body, "</Key><ETag>&quot;%s&quot;</ETag></CompleteMultipartUploadResult>", etag);
out:
	EVP_MD_CTX_free(md);
	free(nums);
	free(sizes);
	free(up);
	free(k);
}

static void async_main(void *arg)
{
	struct s3req *s = arg;
	const char *why;
	char num[24];
	switch (s->op) {
	case S3_LIST_BUCKETS:
		s->body.len = 0;
		s3_list_buckets(idx, &s->body);
		s->status = 200;
		break;
	case S3_BUCKET_HEAD:
		s->status = 200; /* every bucket name exists (docs/s3.md) */
		hdr(s, "x-amz-bucket-region", "us-east-1");
		break;
	case S3_BUCKET_CREATE:
		snprintf(num, sizeof(num), "%lld", (long long)time(NULL));
		if (meta_raw_put('b', s->bucket, s->blen, num, true) < 0) {
			s3_error(s, 500, "InternalError", "index write failed");
			break;
		}
		s->status = 200;
		hdr(s, "Location", "/%s", s->bucket);
		break;
	case S3_BUCKET_DELETE: {
		struct s3_list_args a = {.bucket = s->bucket, .max_keys = "1", .v2 = true};
		struct buf b = {0};
		s3_list_objects(idx, &a, &b, &why);
		if (b.data && strstr(b.data, "<Contents>")) {
			s3_error(s, 409, "BucketNotEmpty", "The bucket you tried to delete is not empty");
		} else {
			meta_raw_delete('b', s->bucket, s->blen);
			s->status = 204;
		}
		buf_free(&b);
		break;
	}
	case S3_BUCKET_LOCATION:
		xml_start(s, 200);
		buf_puts(&s->body, "<LocationConstraint xmlns=\"" XMLNS "\"></LocationConstraint>");
		break;
	case S3_BUCKET_VERSIONING:
		xml_start(s, 200);
		buf_puts(&s->body, "<VersioningConfiguration xmlns=\"" XMLNS "\"/>");
		break;
	case S3_LIST:
		do_list(s);
		break;
	case S3_LIST_UPLOADS:
		do_list_uploads(s);
		break;
	case S3_DELETE_MANY:
		do_delete_many(s);
		break;
	case S3_DELETE: {
		int st = delete_key(s->key, s->klen, &why);
		if (st == 204)
			s->status = 204;
		else
			s3_error(s, st, st == 503 ? "SlowDown" : "InternalError", why);
		break;
	}
	case S3_MPU_CREATE:
		do_mpu_create(s);
		break;
	case S3_MPU_ABORT:
		do_mpu_abort(s);
		break;
	case S3_MPU_LIST_PARTS:
		do_mpu_list_parts(s);
		break;
	case S3_MPU_COMPLETE:
		do_mpu_complete(s);
		break;
	case S3_COPY:
		do_copy(s);
		break;
	default:
		s3_error(s, 501, "NotImplemented", "not supported");
	}
	async_finish(s);
}

/* ---- the request ---- */

static bool has(struct s3req *s, const char *name)
{
	return s->query && s3_has_param(s->query, name);
}

/* Which operation, and its key or bucket.  Sets an error on a bad path. */
static void classify(struct s3req *s)
{
	const char *m = s->method, *why;
	size_t plen = strlen(s->path), n;
	const char *slash;
	char dec[KEY_MAX * 3 + 8];
	static const char *const unsupported[] = {
		"acl", "tagging", "policy", "cors", "lifecycle", "encryption", "website", "logging",
		"notification", "replication", "requestPayment", "ownershipControls",
		"publicAccessBlock", "object-lock", "retention", "legal-hold", "torrent", "restore",
		"select", "attributes", "accelerate", "analytics", "inventory", "metrics",
		"intelligent-tiering", "policyStatus", "versionId", "versions", NULL,
	};

	s->head = !strcmp(m, "HEAD");
	if (plen == 1) {
		if (!strcmp(m, "GET") || s->head)
			s->op = S3_LIST_BUCKETS;
		else
			s3_error(s, 405, "MethodNotAllowed", "only ListBuckets (GET /) is supported here");
		return;
	}
	for (int i = 0; unsupported[i]; i++) {
		if (has(s, unsupported[i])) {
			s->op = S3_UNSUPPORTED;
			s3_error(s, 501, "NotImplemented", "this subresource is not supported");
			return;
		}
	}
	slash = memchr(s->path + 1, '/', plen - 1);
	n = slash ? (size_t)(slash - s->path - 1) : plen - 1;
	if (plen > KEY_MAX * 3 || path_decode(s->path + 1, n, dec, &s->blen) < 0 || !s->blen ||
	    s->blen >= sizeof(s->bucket) || memchr(dec, '/', s->blen)) {
		s3_error(s, 400, "InvalidBucketName", "The specified bucket is not valid.");
		return;
	}
	memcpy(s->bucket, dec, s->blen);
	s->bucket[s->blen] = '\0';
	if (!slash || slash == s->path + plen - 1) {   /* /bucket or /bucket/ */
		if (!strcmp(m, "GET") && has(s, "location"))
			s->op = S3_BUCKET_LOCATION;
		else if (!strcmp(m, "GET") && has(s, "versioning"))
			s->op = S3_BUCKET_VERSIONING;
		else if (!strcmp(m, "GET") && has(s, "uploads"))
			s->op = S3_LIST_UPLOADS;
		else if (!strcmp(m, "GET"))
			s->op = S3_LIST;
		else if (s->head)
			s->op = S3_BUCKET_HEAD;
		else if (!strcmp(m, "PUT"))
			s->op = S3_BUCKET_CREATE;
		else if (!strcmp(m, "DELETE"))
			s->op = S3_BUCKET_DELETE;
		else if (!strcmp(m, "POST") && has(s, "delete"))
			s->op = S3_DELETE_MANY;
		else
			s3_error(s, 405, "MethodNotAllowed", "not a bucket operation");
		return;
	}
	{
		int st = key_decode(s->path, plen, s->key, &s->klen, &why);
		if (st) {
			s3_error(s, 400, st == 414 ? "KeyTooLongError" : "InvalidArgument", why);
			return;
		}
	}
	if (!strcmp(m, "GET") && has(s, "uploadId"))
		s->op = S3_MPU_LIST_PARTS;
	else if (!strcmp(m, "GET") || s->head)
		s->op = S3_GET;
	else if (!strcmp(m, "PUT") && header(s, "X-Amz-Copy-Source") &&
		 (has(s, "partNumber") || has(s, "uploadId")))
		s3_error(s, 501, "NotImplemented", "UploadPartCopy is not supported");
	else if (!strcmp(m, "PUT") && header(s, "X-Amz-Copy-Source"))
		s->op = S3_COPY;
	else if (!strcmp(m, "PUT") && (has(s, "partNumber") || has(s, "uploadId")))
		s->op = S3_MPU_PART;
	else if (!strcmp(m, "PUT"))
		s->op = S3_PUT;
	else if (!strcmp(m, "POST") && has(s, "uploads"))
		s->op = S3_MPU_CREATE;
	else if (!strcmp(m, "POST") && has(s, "uploadId"))
		s->op = S3_MPU_COMPLETE;
	else if (!strcmp(m, "DELETE") && has(s, "uploadId"))
		s->op = S3_MPU_ABORT;
	else if (!strcmp(m, "DELETE"))
		s->op = S3_DELETE;
	else
		s3_error(s, 405, "MethodNotAllowed", "not an object operation");
}

struct s3req *s3_new(struct MHD_Connection *c, const char *method, const char *path,
		     const char *query)
{
	struct s3req *s = xcalloc(1, sizeof(*s));
	s->conn = c;
	snprintf(s->method, sizeof(s->method), "%s", method);
	s->path = xstrdup(path);
	s->query = query ? xstrdup(query) : NULL;
	s->refs = 1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	classify(s);
	return s;
}

int s3_handler(struct s3req *s, const char *data, size_t *size)
{
	bool done;
	if (s->answered) {
		*size = 0;
		return MHD_YES;
	}
	if (s->status) {
		/* Refused before the body: libmicrohttpd queues an answer only
		 * once the whole body is in, so the rest is swallowed first. */
		if (*size) {
			*size = 0;
			return MHD_YES;
		}
		return s_send(s);
	}
	if (s->op == S3_PUT || s->op == S3_MPU_PART)
		return put_run(s, data, size);
	if (*size) {
		if (s->op == S3_DELETE_MANY || s->op == S3_MPU_COMPLETE) {
			if (s->in.len + *size > XML_BODY_MAX)
				s->in_too_big = true;
			else
				buf_append(&s->in, data, *size);
		}
		*size = 0;
		return MHD_YES;
	}
	if (s->op == S3_GET)
		return get_run(s);
	if (!s->async_started)
		return start_async(s, async_main);
	pthread_mutex_lock(&s->mu);
	done = s->async_done;
	pthread_mutex_unlock(&s->mu);
	if (done)
		return s_send(s);
	s_wait(s);
	return MHD_YES;
}

int s3_status(const struct s3req *s)
{
	return s->answered ? s->status : 0;
}

void s3_done(struct s3req *s)
{
	if (s->put) {
		int st;
		const char *w;
		if (!put_result(s->put, &st, &w))
			put_abort(s->put); /* the client went away mid-body */
		put_release(s->put);
		s->put = NULL;
	}
	pthread_mutex_lock(&s->mu);
	s->gone = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	unref(s);
}
