/* s3get.c -- GetObject and HeadObject, streamed by the master from a live
 * replica (S3 clients do not follow a 302).  See s3req.h. */
#include "s3req.h"
#include "../common/httpc.h"
#include "../common/range.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* GetObjects streaming now.  Their rings, and libcurl's and
 * libmicrohttpd's buffers of the same size, are below the mmap threshold
 * and land in per-thread arenas; when the last one ends those pages go
 * back to the kernel, so a burst of GETs does not stay resident. */
static atomic_int streams;

/* The replica's bytes reach the client through the streaming engine: the
 * worker feeds it, libmicrohttpd's reader (get_reader) pulls. */
static void stream_begin(struct s3req *s)
{
	struct httpc_stream_cfg c = {.clen = -1, .cap = RING_CAP, .readable = front_wake,
				     .arg = &s->sleep};
	atomic_fetch_add(&streams, 1);
	s->st = httpc_stream_new(&c);
}

static void stream_end(struct s3req *s)
{
	httpc_stream_free(s->st);
	if (atomic_fetch_sub(&streams, 1) == 1)
		malloc_trim(0);
}

/* The replica's headers; at their end, whether it can serve. */
static bool on_header(void *ctx, int status, const char *b, size_t len)
{
	struct s3req *s = ctx;
	if (len > 9 && !strncmp(b, "HTTP/", 5)) {
		s->vstatus = status;
		s->crange[0] = s->vlastmod[0] = '\0';
		s->vlen = -1;
	} else if (len > 2) {
		char num[32];
		httpc_header(b, len, "Content-Range", s->crange, sizeof(s->crange));
		httpc_header(b, len, "Last-Modified", s->vlastmod, sizeof(s->vlastmod));
		if (httpc_header(b, len, "Content-Length", num, sizeof(num)))
			s->vlen = strtoll(num, NULL, 10);
	} else if (status == 200 || status == 206 || status == 416) {
		pthread_mutex_lock(&s->sleep.mu);
		s->hdr_done = true;
		pthread_mutex_unlock(&s->sleep.mu);
		if (status == 416)
			return false; /* nothing to stream */
		front_wake(&s->sleep);
	} else {
		return false; /* this replica cannot serve: try the next */
	}
	return true;
}

static bool on_body(void *ctx, const char *b, size_t len)
{
	struct s3req *s = ctx;
	while (len) {
		size_t k = httpc_stream_feed_wait(s->st, b, len, 1000);
		if (!k && httpc_stream_aborted(s->st))
			return false; /* the client went away */
		b += k;
		len -= k;
	}
	return true;
}

static void stream_main(void *arg)
{
	struct s3req *s = arg;
	int start = s->nurls ? (int)(now_ms() % (uint64_t)s->nurls) : 0;
	uint64_t stall = store_cfg()->puttimeout_ms / 1000;
	struct httpc_call g = {.range = s->range[0] ? s->range : NULL, .head = s->head,
			      .connect_ms = (long)store_cfg()->voltimeout_ms,
			      .stall_s = (long)(stall ? stall : 1), .bufsize = 256L * 1024,
			      .header = on_header, .body = on_body, .ctx = s};
	bool missing = true, cut = false;
	char err[256];

	for (int i = 0; i < s->nurls && !s->hdr_done; i++) {
		int st;
		g.url = s->urls[(start + i) % s->nurls];
		st = httpc_call(&g, err);
		if (!s->hdr_done && s->vstatus != 404)
			missing = false;
		cut = s->hdr_done && st < 0 && s->vstatus != 416;
	}
	if (cut)
		httpc_stream_abort(s->st); /* cut off mid-body: the client sees a short answer */
	else
		httpc_stream_finish(s->st, NULL);
	pthread_mutex_lock(&s->sleep.mu);
	if (!s->hdr_done)
		s->vstatus = missing ? 404 : 503;
	s->eof = true;
	front_wake_locked(&s->sleep);
	pthread_mutex_unlock(&s->sleep.mu);
	s3_unref(s);
}

/* libmicrohttpd's content reader: what the stream holds; sleep while it
 * is empty (a HEAD answered from the sidecar has no stream: no body). */
static ssize_t get_reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct s3req *s = cls;
	ssize_t n = HTTPC_STREAM_END;
	(void)pos;
	pthread_mutex_lock(&s->sleep.mu);
	/* woken by the stream's readable: bytes fed, or its end or abort
	 * (stream_main ends it on every path, and done aborts it) */
	if (s->st && (n = httpc_stream_read(s->st, out, max)) == 0)
		front_sleep_locked(&s->sleep);
	pthread_mutex_unlock(&s->sleep.mu);
	return n == HTTPC_STREAM_END ? FRONT_READER_END
	       : n == HTTPC_STREAM_ABORTED ? FRONT_READER_ERROR : n;
}

int s3_preconditions(struct s3req *s, const char *const names[4], const char *etag,
		     int64_t mtime)
{
	const char *im = s3_req_header(s, names[0]), *inm = s3_req_header(s, names[1]);
	time_t ius = httpc_parse_date(s3_req_header(s, names[2]));
	time_t ims = httpc_parse_date(s3_req_header(s, names[3]));
	/* If-Unmodified-Since counts without an If-Match, If-Modified-Since
	 * without an If-None-Match (S3's rules, RFC 9110's); both need a time
	 * (a header that is no date is ignored, as S3 does) */
	bool stale = !im && mtime >= 0 && ius != -1 && mtime > (int64_t)ius;
	bool fresh = !inm && mtime >= 0 && ims != -1 && mtime <= (int64_t)ims;
	char q[META_ETAG_MAX + 2];
	snprintf(q, sizeof(q), "\"%s\"", etag);
	if ((etag[0] && im && !etag_listed(im, q, ETAG_WEAK | ETAG_S3)) || stale)
		return 412;
	if ((etag[0] && inm && etag_listed(inm, q, ETAG_WEAK | ETAG_S3)) || fresh)
		return 304;
	return 0;
}

/* GetObject's response-* parameters set their headers (S3's, for
 * presigned links); Content-Type is binary/octet-stream otherwise. */
static void object_headers(struct s3req *s)
{
	static const char *const set[] = {   /* the header is the name after "response-" */
		"response-content-type", "response-content-language", "response-expires",
		"response-cache-control", "response-content-disposition", "response-content-encoding",
	};
	char when[40], *v;
	if (s->meta.etag[0])
		s3_hdr(s, "ETag", "\"%s\"", s->meta.etag);
	if (s->have_meta) {
		http_date((time_t)s->meta.mtime, when);
		s3_hdr(s, "Last-Modified", "%s", when);
	} else if (s->vlastmod[0]) {
		s3_hdr(s, "Last-Modified", "%s", s->vlastmod);
	}
	s3_hdr(s, "Accept-Ranges", "bytes");
	for (int i = 0; i < 6; i++, free(v))
		if ((v = s3_req_param(s, set[i])) && !strpbrk(v, "\r\n"))
			s3_hdr(s, set[i] + 9, "%s", v);
		else if (!i)
			s3_hdr(s, "Content-Type", "binary/octet-stream");
}

/* First part of GetObject/HeadObject: the index and the sidecar only.
 * true when answered (s->status set) without a volume. */
static bool get_prepare(struct s3req *s)
{
	struct store_urls u;
	struct range_spec r;
	const char *rg = s3_req_header(s, "Range");
	static const char *const conds[4] = {"If-Match", "If-None-Match", "If-Unmodified-Since",
					     "If-Modified-Since"};
	int pre;
	uint64_t part = 0;
	const char *dash;

	if (store_urls(store_index(), s->key, s->klen, &u) < 0) {
		s3_no_such_key(s);
		return true;
	}
	s->have_meta = meta_get(s->key, s->klen, &s->meta);
	if (!s->meta.etag[0])
		snprintf(s->meta.etag, sizeof(s->meta.etag), "%s", u.hash);
	for (int i = 0; i < u.n; i++)   /* s frees them */
		s->urls[s->nurls++] = u.url[i];
	pre = s3_preconditions(s, conds, s->meta.etag, s->have_meta ? s->meta.mtime : -1);
	/* S3 ignores any other Range (the whole object, 200); a Range past
	 * the end is still 416, the replica's */
	if (rg && range_s3(rg, &r) && strlen(rg) < sizeof(s->range))
		snprintf(s->range, sizeof(s->range), "%s", rg);
	/* partNumber: 1 of a plain object is all of it; mkv keeps no part
	 * boundaries of a multipart object */
	dash = strchr(s->meta.etag, '-');
	if (s3_num_param(s, "partNumber", 1, PARTS_MAX, &part) < 0 ||
	    part > (dash ? strtoull(dash + 1, NULL, 10) : 1))
		s3_error(s, 400, "InvalidPart", "The requested partnumber is not satisfiable");
	else if (part && dash)
		s3_error(s, 501, "NotImplemented", "partNumber of a multipart object: mkv keeps "
			 "no part boundaries (docs/s3.md)");
	else if (pre == 412)
		s3_precondition_failed(s);
	else if (pre == 304) {
		s->status = 304;
		s3_hdr(s, "ETag", "\"%s\"", s->meta.etag);
	} else if (!s->nurls)
		s3_error(s, 503, "ServiceUnavailable", "no replica of this key is on a volume that is up");
	else if (s->range[0] && s->have_meta && !s->meta.size)   /* no byte to give, as S3 */
		s3_error(s, 416, "InvalidRange", "The requested range is not satisfiable");
	else if (s->head && s->have_meta && !s->range[0]) {
		s->status = 200;
		s->reader = get_reader;  /* an empty stream: MHD sends no body to HEAD */
		s->vlen = (int64_t)s->meta.size;
		object_headers(s);
	}
	return s->status != 0;
}

int s3_get_run(struct s3req *s)
{
	bool done, eof;
	if (!s->sleep.async_started) {
		if (get_prepare(s))
			return s3_send(s);
		stream_begin(s);
		s->release = stream_end;
		s->vlen = -1;
		return s3_start_async(s, stream_main);
	}
	pthread_mutex_lock(&s->sleep.mu);
	done = s->hdr_done;
	eof = s->eof;
	pthread_mutex_unlock(&s->sleep.mu);
	if (!done && !eof) {
		front_wait(&s->sleep);   /* woken by on_header, or stream_main's end */
		return FRONT_YES;
	}
	if (!done && s->vstatus == 404)
		s3_error(s, 404, "NoSuchKey", "no replica holds this key's bytes");
	else if (!done)
		s3_error(s, 503, "ServiceUnavailable", "no replica could be read");
	else if (s->vstatus == 416)
		s3_error(s, 416, "InvalidRange", "The requested range is not satisfiable");
	if (done && s->crange[0])
		s3_hdr(s, "Content-Range", "%s", s->crange);
	if (done && s->vstatus != 416) {
		s->status = (int)s->vstatus;
		s->reader = get_reader;
		object_headers(s);
	}
	return s3_send(s);
}
