/* s3req.c -- an S3 request's answers (headers, error XML, the response),
 * its suspension while a worker runs, and the small functions the S3 files
 * share.  See s3req.h. */
#include "s3req.h"
#include "../common/range.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* ---- answers ---- */

void s3_hdr(struct s3req *s, const char *name, const char *fmt, ...)
{
	va_list ap;
	char *v;
	if (s->nhdr == NHDR)
		return;
	va_start(ap, fmt);
	if (vasprintf(&v, fmt, ap) < 0)
		die("out of memory");
	va_end(ap);
	s->hdr[s->nhdr++] = (struct front_hdr){name, v};
}

void s3_xml_start(struct s3req *s, const char *root)
{
	s->status = 200;
	s->body.len = 0;
	buf_printf(&s->body, XML_HEAD "<%s xmlns=\"" XMLNS "\">", root);
}

/* S3's error document (HEAD answers carry none). */
void s3_error(struct s3req *s, int status, const char *code, const char *msg)
{
	s->status = status;
	s->body.len = 0;
	s->reader = NULL;
	if (s->head)
		return;
	buf_printf(&s->body, XML_HEAD "<Error><Code>%s</Code>", code);
	xml_tag(&s->body, "Message", msg, strlen(msg), false);
	xml_tag(&s->body, "Resource", s->path, strlen(s->path), false);
	buf_puts(&s->body, "<RequestId>mkv</RequestId></Error>");
}

const char *s3_code(int status)
{
	return status == 503 ? "SlowDown" : status == 403 ? "AccessDenied"
		: status == 412 ? "PreconditionFailed" : status < 500 ? "InvalidArgument"
		: "InternalError";
}

void s3_fail(struct s3req *s, int status, const char *why)
{
	s3_error(s, status, s3_code(status), why);
}

void s3_no_such_key(struct s3req *s)
{
	s3_error(s, 404, "NoSuchKey", "The specified key does not exist.");
}

void s3_precondition_failed(struct s3req *s)
{
	s3_error(s, 412, "PreconditionFailed",
		 "At least one of the preconditions you specified did not hold.");
}

int s3_etag_is(const char *key, size_t klen, const char *list)
{
	char *v, q[META_ETAG_MAX + 2];
	struct record r;
	struct meta m;
	if (!store_live(store_index(), key, klen, &v, &r))
		return -1;
	free(v);
	snprintf(q, sizeof(q), "\"%s\"", meta_get(key, klen, &m) && m.etag[0] ? m.etag : r.hash);
	return list && etag_listed(list, q, ETAG_S3);
}

bool s3_write_condition(struct s3req *s, const char *key, size_t klen)
{
	const char *im = s3_req_header(s, "If-Match"), *inm = s3_req_header(s, "If-None-Match");
	int e = im || inm ? s3_etag_is(key, klen, im) : -1;
	if (e < 0 && im)
		s3_no_such_key(s);
	else if (e >= 0 && ((im && !e) || (inm && s3_etag_is(key, klen, inm) == 1)))
		s3_precondition_failed(s);
	return !s->status;
}

int s3_send(struct s3req *s)
{
	struct front_hdr h[NHDR + 2];
	int nh = s->nhdr;
	memcpy(h, s->hdr, sizeof(*h) * (size_t)nh);
	if (s->body.len && !s->reader)
		h[nh++] = (struct front_hdr){"Content-Type", "application/xml"};
	h[nh++] = (struct front_hdr){"x-amz-request-id", "mkv"};
	s->answered = true;
	if (s->reader)
		return front_stream(s->sleep.conn, s->status, h, nh, s->vlen, s->reader, s);
	return front_send(s->sleep.conn, s->status, h, nh, s->body.data, s->body.len);
}

/* ---- suspension ---- */

int s3_swallow(struct s3req *s, size_t *size)
{
	if (s->answered || *size) {
		*size = 0;
		return FRONT_YES;
	}
	return s3_send(s);
}

void s3_unref(struct s3req *s)
{
	if (atomic_fetch_sub(&s->refs, 1) > 1)
		return;
	buf_free(&s->body);
	buf_free(&s->in);
	buf_free(&s->pending);
	s3sum_free(s->sum);
	sha256_free(s->sha);
	sha256_free(s->chunk_sha);
	keyring_put(s->ring);
	for (int i = 0; i < s->nhdr; i++)
		free((char *)s->hdr[i].value);
	for (int i = 0; i < s->nurls; i++)
		free(s->urls[i]);
	if (s->release)
		s->release(s);
	free(s->path);
	free(s->query);
	pthread_mutex_destroy(&s->sleep.mu);
	free(s);
}

int s3_start_async(struct s3req *s, void (*fn)(void *))
{
	atomic_fetch_add(&s->refs, 1);   /* the worker's */
	if (front_spawn(&s->sleep, fn, s) == 0)
		return FRONT_YES;
	s3_unref(s);
	s3_error(s, 503, "SlowDown", "server busy: no thread for this request");
	return s3_send(s);
}

/* ---- parameters, XML, keys and uploads ---- */

char *s3_req_param(struct s3req *s, const char *name)
{
	size_t n, len;
	const char *v = s->query ? query_param(s->query, name, &n) : NULL;
	char *out;
	if (!v)
		return NULL;
	out = xmalloc(n + 1);
	if (query_decode(v, n, out, &len) < 0) {
		free(out);
		return NULL;
	}
	out[len] = '\0';
	return out;
}

int s3_num_param(struct s3req *s, const char *name, uint64_t min, uint64_t max, uint64_t *v)
{
	char *p = s3_req_param(s, name);
	int rc = !p ? 0 : parse_u64(p, min, max, v) ? 1 : -1;
	free(p);
	return rc;
}

const char *s3_req_header(struct s3req *s, const char *name)
{
	return front_header(s->sleep.conn, name);
}

static void xml_escape(struct buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (c) {
		case '&': buf_puts(b, "&amp;"); break;
		case '<': buf_puts(b, "&lt;"); break;
		case '>': buf_puts(b, "&gt;"); break;
		case '"': buf_puts(b, "&quot;"); break;
		case '\'': buf_puts(b, "&apos;"); break;
		default:
			if (c < 0x20 && c != '\t' && c != '\n')
				buf_printf(b, "&#x%x;", c);
			else
				buf_append(b, &s[i], 1);
		}
	}
}

void xml_tag(struct buf *b, const char *name, const char *s, size_t n, bool url)
{
	buf_printf(b, "<%s>", name);
	if (url)
		buf_url_escape(b, s, n, true);
	else
		xml_escape(b, s, n);
	buf_printf(b, "</%s>", name);
}

void s3_iso_time(int64_t t, char out[32])
{
	struct tm tm;
	time_t tt = (time_t)t;
	gmtime_r(&tt, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

static void utf8_put(struct buf *o, unsigned long v)
{
	static const unsigned char lead[] = {0, 0, 0xc0, 0xe0, 0xf0};
	int n = v < 0x80 ? 1 : v < 0x800 ? 2 : v < 0x10000 ? 3 : 4;
	char u[4];
	for (int i = n - 1; i > 0; i--, v >>= 6)
		u[i] = (char)(0x80 | (v & 63));
	u[0] = (char)(lead[n] | (n == 4 ? v & 7 : v));
	buf_append(o, u, (size_t)n);
}

/* The text of the first <tag>...</tag> in [p, end), XML entities decoded,
 * into a fresh string (*outlen its length); *next past it.  NULL when
 * there is none.  outlen and next may be NULL. */
char *s3_xml_next(const char *p, const char *end, const char *tag, size_t *outlen,
		  const char **next)
{
	static const char *const entities[][2] = {
		{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"},
	};
	char open[64], close[64];
	const char *a, *b;
	struct buf o = {0};
	int ol = snprintf(open, sizeof(open), "<%s>", tag);
	int cl = snprintf(close, sizeof(close), "</%s>", tag);
	a = memmem(p, (size_t)(end - p), open, (size_t)ol);
	if (!a)
		return NULL;
	a += ol;
	b = memmem(a, (size_t)(end - a), close, (size_t)cl);
	if (!b)
		return NULL;
	if (next)
		*next = b + cl;
	buf_puts(&o, "");
	for (const char *c = a; c < b; c++) {
		const char *semi = *c == '&' ? memchr(c, ';', (size_t)(b - c)) : NULL;
		size_t el = semi ? (size_t)(semi - c) + 1 : 0, i = 0;   /* with the ';' */
		while (i < 5 && !(el == strlen(entities[i][0]) && !memcmp(c, entities[i][0], el)))
			i++;
		if (i < 5)
			buf_puts(&o, entities[i][1]);
		else if (el > 3 && el < 13 && c[1] == '#')
			utf8_put(&o, c[2] == 'x' ? strtoul(c + 3, NULL, 16) : strtoul(c + 2, NULL, 10));
		else {
			buf_append(&o, c, 1);
			continue;
		}
		c = semi;
	}
	if (outlen)
		*outlen = o.len;
	return o.data;
}

/* Take key's lock, waiting a little: S3 clients retry their own requests
 * on 503, not on 409. */
bool s3_lock_key(const char *key, size_t klen)
{
	for (int i = 0; i < 50; i++) {
		if (keylock_try(key, klen))
			return true;
		usleep(20000);
	}
	return false;
}

void s3_part_key(const char *upload, int n, char *out, size_t *len)
{
	*len = (size_t)snprintf(out, KEY_MAX + 1, "/" S3_MPU_BUCKET "/%s/%05d", upload, n);
}

bool s3_part_target(struct s3req *s, char *out, size_t *len)
{
	char *up = s3_upload(s);
	uint64_t num = 0;
	if (up && s3_num_param(s, "partNumber", 1, PARTS_MAX, &num) < 1)
		s3_error(s, 400, "InvalidArgument",
			 "Part number must be an integer between 1 and 10000, inclusive");
	else if (up)
		s3_part_key(up, (int)num, out, len);
	free(up);
	return !s->status;
}

/* The request's uploadId (heap string) when it names an upload of s->key;
 * else NULL, with NoSuchUpload answered. */
char *s3_upload(struct s3req *s)
{
	char *up = s3_req_param(s, "uploadId"), *v = NULL, *sp;
	bool ok;
	if (up && strlen(up) == 32 && strspn(up, "0123456789abcdef") == 32)
		v = meta_raw_get('u', up, 32);
	sp = v ? strchr(v, ' ') : NULL;
	ok = sp && strlen(sp + 1) == s->klen && !memcmp(sp + 1, s->key, s->klen);
	free(v);
	if (ok)
		return up;
	free(up);
	s3_error(s, 404, "NoSuchUpload", "The specified upload does not exist.");
	return NULL;
}

bool s3_may(const struct s3req *s, unsigned perm, const char *key, size_t n)
{
	return !s->ring || key_allows(s->sig.key, perm, key, n);
}
