/* s3.c -- see s3.h and docs/s3.md: which requests are S3, which operation
 * each is, and the access handler that drives it.
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
#include "s3req.h"
#include "../common/httpc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- detection ---- */

#define OP_PARAMS 6   /* the first six name an operation (route) */
static const char *const s3_queries[] = {
	"uploads", "uploadId", "partNumber", "delete", "location", "versioning", "list-type",
	"prefix", "delimiter", "marker", "max-keys", "continuation-token", "start-after",
	"encoding-type", "acl", "X-Amz-Signature", "X-Amz-Algorithm",
	"AWSAccessKeyId", "Signature",   /* a presigned URL of signature version 2 */
	NULL,
};

static bool has_param(const char *query, const char *name)
{
	size_t n;
	return query && query_param(query, name, &n);
}

static bool is_s3(struct MHD_Connection *c, const char *method, const char *query)
{
	const char *auth;
	if (strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "PUT") &&
	    strcmp(method, "POST") && strcmp(method, "DELETE"))
		return false;
	auth = front_header(c, "Authorization");
	/* A SigV4 header is S3's with x-amz-content-sha256 (AWS requires it
	 * there, and every S3 client sends it); without, it is curl's
	 * --aws-sigv4 on the native API.  A SigV2 header, or one of the
	 * headers only S3 clients send, is S3's. */
	if (auth && !strncmp(auth, "AWS4-HMAC-SHA256", 16)) {
		if (front_header(c, "X-Amz-Content-Sha256"))
			return true;
	} else if ((auth && !strncmp(auth, "AWS ", 4)) || front_header(c, "X-Amz-Date") ||
		   front_header(c, "X-Amz-Decoded-Content-Length") ||
		   front_header(c, "X-Amz-Content-Sha256") || front_header(c, "Amz-Sdk-Invocation-Id")) {
		return true;
	}
	if (!query || is_list_query(query))
		return false; /* native ?list and ?unlinked */
	for (int i = 0; s3_queries[i]; i++)
		if (has_param(query, s3_queries[i]))
			return true;
	return false;
}

/* ---- the operations a worker thread runs ---- */

static void bucket_head(struct s3req *s)
{
	s->status = 200; /* every bucket name exists (docs/s3.md) */
	s3_hdr(s, "x-amz-bucket-region", "us-east-1");
}

/* S3's rules for a new bucket's name (existing keys stay readable under
 * any): 3-63 of a-z 0-9 . -, a letter or digit at each end, no "..", ".-"
 * or "-.", not an IP address, none of S3's reserved prefixes and suffixes. */
static bool bucket_name_ok(const char *b, size_t n)
{
	unsigned a, c, d, e;
	char end;
	return n >= 3 && n <= 63 && strspn(b, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n &&
	       isalnum((unsigned char)b[0]) && isalnum((unsigned char)b[n - 1]) &&
	       !strstr(b, "..") && !strstr(b, ".-") && !strstr(b, "-.") &&
	       sscanf(b, "%u.%u.%u.%u%c", &a, &c, &d, &e, &end) != 4 && strncmp(b, "xn--", 4) &&
	       strncmp(b, "sthree-", 7) && (n < 8 || strcmp(b + n - 8, "-s3alias")) &&
	       (n < 7 || strcmp(b + n - 7, "--ol-s3"));
}

/* CreateBucket: remembered (its time and LocationConstraint) for
 * ListBuckets and GetBucketLocation. */
static void bucket_create(struct s3req *s)
{
	const char *p = s->in.data ? s->in.data : "";
	size_t n = 0;
	char *loc = s3_xml_next(p, p + s->in.len, "LocationConstraint", &n, NULL);
	char *v = xasprintf("%lld %s", (long long)time(NULL), loc ? loc : "");
	if (!bucket_name_ok(s->bucket, s->blen))
		s3_error(s, 400, "InvalidBucketName", "The specified bucket is not valid.");
	else if (s->in_too_big || n > 64 || (loc && strcspn(loc, " <&") != n))
		s3_error(s, 400, "InvalidLocationConstraint",
			 "The specified location-constraint is not valid.");
	else if (meta_raw_put('b', s->bucket, s->blen, v, true) < 0)
		s3_error(s, 500, "InternalError", "index write failed");
	else
		s3_hdr(s, "Location", "/%s", s->bucket);
	if (!s->status)
		s->status = 200;
	free(v);
	free(loc);
}

/* No live key under the bucket? */
static bool bucket_empty(const char *bucket)
{
	char *p = xasprintf("/%s/", bucket);
	size_t plen = strlen(p), klen, vlen;
	struct index_iter *it = index_iter_new(store_index(), p, plen);
	bool empty = true;
	for (; empty && index_iter_valid(it); index_iter_next(it)) {
		const char *k = index_iter_key(it, &klen), *v = index_iter_value(it, &vlen);
		if (klen < plen || memcmp(k, p, plen))
			break;
		empty = record_deleted(v, vlen);
	}
	index_iter_free(it);
	free(p);
	return empty;
}

/* DeleteBucket: refused while a key is listed under it. */
static void bucket_delete(struct s3req *s)
{
	if (!bucket_empty(s->bucket))
		s3_error(s, 409, "BucketNotEmpty", "The bucket you tried to delete is not empty");
	else if (meta_raw_delete('b', s->bucket, s->blen) < 0)
		s3_error(s, 503, "ServiceUnavailable", "the sidecar refused the write: try again");
	else
		s->status = 204;
}

/* GetBucketLocation (CreateBucket's, else us-east-1: "") and
 * GetBucketVersioning (never enabled). */
static void bucket_config(struct s3req *s)
{
	bool loc = s->op == S3_BUCKET_LOCATION;
	const char *root = loc ? "LocationConstraint" : "VersioningConfiguration";
	char *v = loc ? meta_raw_get('b', s->bucket, s->blen) : NULL, *sp = v ? strchr(v, ' ') : NULL;
	s3_xml_start(s, root);
	buf_printf(&s->body, "%s</%s>", sp ? sp + 1 : "", root);
	free(v);
}

static void (*const workers[])(struct s3req *) = {
	[S3_LIST_BUCKETS] = s3_list_buckets,
	[S3_BUCKET_HEAD] = bucket_head,
	[S3_BUCKET_CREATE] = bucket_create,
	[S3_BUCKET_DELETE] = bucket_delete,
	[S3_BUCKET_LOCATION] = bucket_config,
	[S3_BUCKET_VERSIONING] = bucket_config,
	[S3_LIST] = s3_list,
	[S3_LIST_UPLOADS] = s3_list_uploads,
	[S3_DELETE_MANY] = s3_delete_many,
	[S3_DELETE] = s3_delete_object,
	[S3_MPU_CREATE] = s3_mpu_create,
	[S3_MPU_ABORT] = s3_mpu_abort,
	[S3_MPU_LIST_PARTS] = s3_mpu_list_parts,
	[S3_MPU_COMPLETE] = s3_mpu_complete,
	[S3_COPY] = s3_copy,
	[S3_MPU_PART_COPY] = s3_mpu_part_copy,
};

static void async_main(void *arg)
{
	struct s3req *s = arg;
	workers[s->op](s);
	front_finish(&s->sleep);
	s3_unref(s);
}

/* ---- the request ---- */

/* Which operation a method makes on /bucket or /bucket/key: the first row
 * whose query parameter (if any) is present.  takes: the OP_PARAMS it may
 * carry; any other is refused (DELETE /b/k?uploads is not a DeleteObject,
 * nor PUT /b/k?location a PutObject). */

static const struct route {
	bool object;
	const char *method, *param;
	enum s3op op;
	const char *takes;
} op_routes[] = {
	{false, "GET", "location", S3_BUCKET_LOCATION, "location"},
	{false, "GET", "versioning", S3_BUCKET_VERSIONING, "versioning"},
	{false, "GET", "uploads", S3_LIST_UPLOADS, "uploads"},
	{false, "GET", NULL, S3_LIST, ""},
	{false, "HEAD", NULL, S3_BUCKET_HEAD, ""},
	{false, "PUT", NULL, S3_BUCKET_CREATE, ""},
	{false, "DELETE", NULL, S3_BUCKET_DELETE, ""},
	{false, "POST", "delete", S3_DELETE_MANY, "delete"},
	{true, "GET", "uploadId", S3_MPU_LIST_PARTS, "uploadId"},
	{true, "GET", NULL, S3_GET, "partNumber"},
	{true, "HEAD", NULL, S3_GET, "partNumber"},
	{true, "PUT", "partNumber", S3_MPU_PART, "partNumber uploadId"},
	{true, "PUT", "uploadId", S3_MPU_PART, "partNumber uploadId"},
	{true, "PUT", NULL, S3_PUT, ""},
	{true, "POST", "uploads", S3_MPU_CREATE, "uploads"},
	{true, "POST", "uploadId", S3_MPU_COMPLETE, "uploadId"},
	{true, "DELETE", "uploadId", S3_MPU_ABORT, "uploadId"},
	{true, "DELETE", NULL, S3_DELETE, ""},
};

static void route(struct s3req *s, bool object)
{
	bool part = has_param(s->query, "partNumber") || has_param(s->query, "uploadId");
	const char *takes = NULL;
	if (object && !strcmp(s->method, "PUT") && s3_req_header(s, "X-Amz-Copy-Source")) {
		s->op = part ? S3_MPU_PART_COPY : S3_COPY;
		takes = part ? "partNumber uploadId" : "";
	} else if (!object && strcmp(s->method, "GET") && has_param(s->query, "versioning")) {
		/* not a CreateBucket: a 200 would say versioning is on */
		s3_error(s, 501, "NotImplemented", "versioning is not supported");
		return;
	}
	for (size_t i = 0; !takes && i < sizeof(op_routes) / sizeof(op_routes[0]); i++) {
		const struct route *r = &op_routes[i];
		if (r->object == object && !strcmp(r->method, s->method) &&
		    (!r->param || has_param(s->query, r->param))) {
			s->op = r->op;
			takes = r->takes;
		}
	}
	for (int i = 0; takes && i < OP_PARAMS; i++) {
		if (has_param(s->query, s3_queries[i]) && !strstr(takes, s3_queries[i])) {
			char msg[80];
			snprintf(msg, sizeof(msg), "?%s names another operation than this one",
				 s3_queries[i]);
			s3_error(s, 400, "InvalidRequest", msg);
			return;
		}
	}
	if (!takes)
		s3_error(s, 405, "MethodNotAllowed",
			 object ? "not an object operation" : "not a bucket operation");
}

/* Headers asking for what mkv does not do (docs/s3.md lists them): refused,
 * naming the header, never a 200 that did something else.  A name ending
 * in '*' is a prefix; ok: values that ask for nothing mkv lacks.  Every
 * code but NotImplemented (501) is a 400. */
static const struct refusal {
	const char *name, *ok[2], *code, *what;
} refusal_table[] = {
	{"x-amz-server-side-encryption*", {0}, "NotImplemented", "mkv does not encrypt objects"},
	{"x-amz-copy-source-server-side-encryption*", {0}, "NotImplemented", "no encryption"},
	{"x-amz-object-lock-*", {0}, "InvalidRequest", "mkv has no object lock"},
	{"x-amz-bucket-object-lock-enabled", {"false"}, "InvalidRequest", "no object lock"},
	{"x-amz-acl", {"private", "bucket-owner-full-control"}, "AccessControlListNotSupported",
	 "mkv keeps no ACLs"},
	{"x-amz-grant-*", {0}, "AccessControlListNotSupported", "mkv keeps no ACLs"},
	{"x-amz-tagging", {0}, "NotImplemented", "mkv keeps no tags"},
	{"x-amz-website-redirect-location", {0}, "NotImplemented", "mkv has no websites"},
	{"x-amz-storage-class", {"STANDARD"}, "InvalidStorageClass", "STANDARD is the one class"},
	{"x-amz-write-offset-bytes", {0}, "NotImplemented", "mkv does not append"},
	{"x-amz-checksum-crc64nvme", {0}, "NotImplemented", "CRC32, CRC32C, SHA1, SHA256 only"},
	{"x-amz-if-match-*", {0}, "NotImplemented", "If-Match is the one delete condition"},
};

static void refuse(void *cls, const char *k, const char *v)
{
	struct s3req *s = cls;
	char msg[160];
	if (!strcasecmp(k, "x-amz-trailer"))   /* a trailer is refused as its header is */
		refuse(cls, v, "");
	for (size_t i = 0; !s->status && i < sizeof(refusal_table) / sizeof(refusal_table[0]); i++) {
		const struct refusal *r = &refusal_table[i];
		size_t n = strlen(r->name) - (r->name[strlen(r->name) - 1] == '*');
		if (strncasecmp(k, r->name, n) || (k[n] && n == strlen(r->name)) ||
		    (r->ok[0] && !strcasecmp(v, r->ok[0])) || (r->ok[1] && !strcasecmp(v, r->ok[1])))
			continue;
		snprintf(msg, sizeof(msg), "%s: %s (docs/s3.md)", k, r->what);
		s3_error(s, strcmp(r->code, "NotImplemented") ? 400 : 501, r->code, msg);
	}
}

/* Which operation, and its key or bucket.  Sets an error on a bad path. */
static void classify(struct s3req *s)
{
	const char *m = s->method, *why, *slash;
	size_t plen = strlen(s->path), n;
	char dec[KEY_MAX * 3 + 8];
	int st;
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
	for (int i = 0; !s->status && unsupported[i]; i++)
		if (has_param(s->query, unsupported[i]))
			s3_error(s, 501, "NotImplemented", "this subresource is not supported");
	if (s->status)
		return;
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
		route(s, false);
		return;
	}
	st = key_decode(s->path, plen, s->key, &s->klen, &why);
	if (st)
		s3_error(s, 400, st == 414 ? "KeyTooLongError" : "InvalidArgument", why);
	else
		route(s, true);
}

/* ---- keys (-keys: docs/security.md) ---- */

static const struct {
	int status;
	const char *code;
} sig_errors[] = {
	[SIG_MALFORMED] = {400, "AuthorizationHeaderMalformed"},
	[SIG_QUERY_MALFORMED] = {400, "AuthorizationQueryParametersError"},
	[SIG_UNKNOWN_KEY] = {403, "InvalidAccessKeyId"},
	[SIG_MISMATCH] = {403, "SignatureDoesNotMatch"},
	[SIG_SKEWED] = {403, "RequestTimeTooSkewed"},
	[SIG_UNSIGNED] = {403, "AccessDenied"},
	[SIG_EXPIRED] = {403, "AccessDenied"},
};

/* What the operation needs of the signer's key: an AccessDenied if not. */
static void permit(struct s3req *s)
{
	const struct key *k = s->sig.key;
	char bp[sizeof(s->bucket) + 2], *pre, *lp;
	size_t bl = (size_t)snprintf(bp, sizeof(bp), "/%s/", s->bucket);
	bool ok = false;
	switch (s->op) {
	case S3_LIST_BUCKETS:   /* and it shows only the buckets the key may list in */
		ok = k && (k->perms & PERM_LIST);
		break;
	case S3_BUCKET_HEAD:
	case S3_BUCKET_LOCATION:
	case S3_BUCKET_VERSIONING:
		ok = key_touches(k, ~0u, bp, bl);
		break;
	case S3_BUCKET_CREATE:
		ok = key_touches(k, PERM_WRITE, bp, bl);
		break;
	case S3_BUCKET_DELETE:
		ok = key_allows(k, PERM_DELETE, bp, bl);
		break;
	case S3_DELETE_MANY:   /* and each key (s3put.c) */
		ok = key_touches(k, PERM_DELETE, bp, bl);
		break;
	case S3_LIST:
	case S3_LIST_UPLOADS:
		pre = s3_req_param(s, "prefix");
		lp = xasprintf("%s%s", bp, pre ? pre : "");
		ok = key_allows(k, PERM_LIST, lp, strlen(lp));
		free(pre);
		free(lp);
		break;
	case S3_GET:
		ok = key_allows(k, PERM_READ, s->key, s->klen);
		break;
	case S3_DELETE:
		ok = key_allows(k, PERM_DELETE, s->key, s->klen);
		break;
	default:   /* PutObject, multipart, copies (and the source: s3mpu.c) */
		ok = key_allows(k, PERM_WRITE, s->key, s->klen);
	}
	if (!ok)
		s3_error(s, 403, "AccessDenied", "Access Denied");
}

/* With -keys: who signed, and may they; else the error is set. */
static void authorize(struct s3req *s)
{
	if (!s->ring)
		return;
	front_sig_check(s->sleep.conn, s->method, s->path, s->query, s->ring, &s->sig);
	if (s->sig.st == SIG_MISMATCH && s->blen && !s->klen && !strchr(s->path + 1, '/')) {
		/* botocore signs a bucket's V2 resource as "/bucket/" (S3 takes both) */
		char *p = xasprintf("%s/", s->path);
		front_sig_check(s->sleep.conn, s->method, p, s->query, s->ring, &s->sig);
		free(p);
	}
	if (s->sig.st != SIG_OK)
		s3_error(s, sig_errors[s->sig.st].status, sig_errors[s->sig.st].code, s->sig.why);
	else if (!s->status)
		permit(s);
}

static void *claim(struct MHD_Connection *c, const char *method, const char *path,
		     const char *query)
{
	struct s3req *s;
	const char *code, *msg, *h;
	if (!is_s3(c, method, query))
		return NULL;
	s = xcalloc(1, sizeof(*s));
	s->sleep.conn = c;
	snprintf(s->method, sizeof(s->method), "%s", method);
	s->path = xstrdup(path);
	s->query = query ? xstrdup(query) : NULL;
	s->refs = 1;
	pthread_mutex_init(&s->sleep.mu, NULL);
	classify(s);
	/* Is the body aws-chunked?  Content-Encoding says so (unsigned, as
	 * boto3 sends it), or a STREAMING- payload mode.  What decides whether
	 * the bytes are covered is x-amz-content-sha256: a hex hash is checked
	 * against the decoded bytes, what is stored, whatever the framing. */
	s->aws_chunked = ((h = front_header(c, "Content-Encoding")) && strstr(h, "aws-chunked")) ||
			 ((h = front_header(c, "X-Amz-Content-Sha256")) && !strncmp(h, "STREAMING-", 10));
	if (!s->status)
		front_headers(c, refuse, s);
	s->ring = keys_current();
	authorize(s);
	if (!s->status && (s->op == S3_PUT || s->op == S3_MPU_PART || s->op == S3_DELETE_MANY ||
			   s->op == S3_MPU_COMPLETE || s->op == S3_BUCKET_CREATE) &&
	    !s3sum_new(c, s->op == S3_MPU_COMPLETE, &s->sum, &code, &msg))   /* the body's digests */
		s3_error(s, strcmp(code, "NotImplemented") ? 400 : 501, code, msg);
	if (!s->status && strcmp(method, "GET") && strcmp(method, "HEAD")) {
		char why[256];
		if (!store_writable(why, sizeof(why)))
			s3_error(s, 503, "ServiceUnavailable", why);
	}
	return s;
}

static int handler(void *req, const char *data, size_t *size)
{
	struct s3req *s = req;
	if (s->answered || s->status)
		return s3_swallow(s, size);
	if (s->op == S3_PUT || s->op == S3_MPU_PART)
		return s3_put_run(s, data, size);
	if (*size) {
		if (s->op == S3_DELETE_MANY || s->op == S3_MPU_COMPLETE || s->op == S3_BUCKET_CREATE)
			s3_body_take(s, data, *size);
		*size = 0;
		return FRONT_YES;
	}
	if (s->op == S3_GET)
		return s3_get_run(s);
	if (!s->sleep.async_started)
		return s3_body_signed(s) ? s3_start_async(s, async_main) : s3_send(s);
	/* woken by async_main's front_finish */
	return front_wait(&s->sleep) ? s3_send(s) : FRONT_YES;
}

static int status(const void *req)
{
	const struct s3req *s = req;
	return s->answered ? s->status : 0;
}

static void done(void *req)
{
	struct s3req *s = req;
	if (s->put)
		put_done(s->put);
	s->put = NULL;
	pthread_mutex_lock(&s->sleep.mu);
	s->sleep.gone = true;
	pthread_mutex_unlock(&s->sleep.mu);
	if (s->st)
		httpc_stream_abort(s->st); /* a GetObject's worker stops feeding */
	s3_unref(s);
}

const struct front_route s3_route = {claim, handler, status, done};
