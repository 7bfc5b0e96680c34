/* check_s3.c -- REPLACE and the S3 API (SPEC §4's last rows, docs/s3.md)
 * against a real cluster: three mkv-volumes, then three stock nginx
 * volumes.  The protocol row by row with libcurl, then the real clients
 * (boto3, aws, rclone, s3cmd: tests/s3_clients.py). */
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <leveldb/c.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/placement.h"
#include "harness.h"

static struct vol vols[3];
static struct master m;

static void cluster_up(enum vol_kind k)
{
	for (int i = 0; i < 3; i++)
		h_vol_start(&vols[i], k);
	memset(&m, 0, sizeof(m));
	h_master_start(&m, vols, 3, NULL);
}

static void cluster_down(void)
{
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&vols[i]);
}

static void up_mkv(void) { cluster_up(VOL_MKV); }
static void up_nginx(void) { cluster_up(VOL_NGINX); }

static const char *const SIGNED[] = {"X-Amz-Content-Sha256: UNSIGNED-PAYLOAD",
				     "Authorization: AWS4-HMAC-SHA256 Credential=x/y, Signature=z",
				     NULL};

/* One request; path is appended to the master's base URL. */
static long s3(const char *method, const char *path, const void *body, size_t len,
	       const char *const *headers, struct resp *r)
{
	char *u = xasprintf("%s%s", m.base, path);
	long st = h_http(method, u, body, len, headers ? headers : SIGNED, false, r);
	free(u);
	return st;
}

static char *fresh(const char *stem)
{
	static int n;
	return xasprintf("%s-%d-%d", stem, (int)getpid(), n++);
}

static bool has(const struct resp *r, const char *s)
{
	return r->body.data && strstr(r->body.data, s);
}

/* GET key natively, following the redirect; the body into out. */
static long native_get(const char *key, struct resp *r)
{
	char *u = xasprintf("%s%s", m.base, key);
	long st = h_http("GET", u, NULL, 0, NULL, true, r);
	free(u);
	return st;
}

START_TEST(test_replace)
{
	char *k = fresh("/rep/k"), md5[33], *h;
	struct resp r;
	char *u = xasprintf("%s%s", m.base, k);
	ck_assert_int_eq(h_http("REPLACE", u, "first", 5, NULL, false, &r), 201); /* new key */
	h_resp_free(&r);
	ck_assert_int_eq(h_http("PUT", u, "again", 5, NULL, false, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("REPLACE", u, "second value", 12, NULL, false, &r), 201);
	h_resp_free(&r);
	ck_assert_int_eq(native_get(k, &r), 200);
	ck_assert_int_eq(r.body.len, 12);
	ck_assert(!memcmp(r.body.data, "second value", 12));
	h_resp_free(&r);
	ck_assert_int_eq(h_http("HEAD", u, NULL, 0, NULL, false, &r), 302);
	md5_hex("second value", 12, md5);
	h = h_header(&r, "Content-Md5");
	ck_assert_str_eq(h, md5);
	free(h);
	h_resp_free(&r);
	/* an unlinked key is replaced as a new one */
	ck_assert_int_eq(h_status("UNLINK", u), 204);
	ck_assert_int_eq(h_http("REPLACE", u, "third", 5, NULL, false, &r), 201);
	h_resp_free(&r);
	ck_assert_int_eq(native_get(k, &r), 200);
	ck_assert(r.body.len == 5 && !memcmp(r.body.data, "third", 5));
	h_resp_free(&r);
	free(u);
	u = xasprintf("%s%s?x", m.base, k);
	ck_assert_int_eq(h_http("REPLACE", u, "x", 1, NULL, false, &r), 400);
	h_resp_free(&r);
	free(u);
	free(k);
}
END_TEST

/* Readers during REPLACEs get the old bytes or the new, never a mix. */
struct reader_arg {
	const char *key;
	volatile bool stop;
	int reads, mixed;
};

static void *reader_main(void *p)
{
	struct reader_arg *a = p;
	while (!a->stop) {
		struct resp r;
		if (native_get(a->key, &r) == 200 && r.body.len) {
			for (size_t i = 1; i < r.body.len; i++)
				if (r.body.data[i] != r.body.data[0]) {
					a->mixed++;
					break;
				}
			if (r.body.len != 256 * 1024)
				a->mixed++;
			a->reads++;
		}
		h_resp_free(&r);
	}
	return NULL;
}

START_TEST(test_replace_atomic)
{
	char *k = fresh("/rep/atomic"), *u = xasprintf("%s%s", m.base, k);
	size_t n = 256 * 1024;
	char *a = malloc(n), *b = malloc(n);
	struct reader_arg ra = {.key = k};
	pthread_t t;
	struct resp r;
	memset(a, 'a', n);
	memset(b, 'b', n);
	ck_assert_int_eq(h_http("PUT", u, a, n, NULL, false, &r), 201);
	h_resp_free(&r);
	pthread_create(&t, NULL, reader_main, &ra);
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(h_http("REPLACE", u, i % 2 ? a : b, n, NULL, false, &r), 201);
		h_resp_free(&r);
	}
	ra.stop = true;
	pthread_join(t, NULL);
	ck_assert_int_gt(ra.reads, 0);
	ck_assert_int_eq(ra.mixed, 0);
	free(a), free(b), free(u), free(k);
}
END_TEST

START_TEST(test_objects)
{
	char *b = fresh("/objb"), *k = xasprintf("%s/dir/x y", b), *ke = xasprintf("%s/dir/x%%20y", b);
	struct resp r;
	char *h, md5[33];
	const char *rng[] = {SIGNED[0], "Range: bytes=2-4", NULL};
	const char *bad[] = {SIGNED[0], "Range: bytes=100-", NULL};
	char inm[80], *im[] = {(char *)SIGNED[0], inm, NULL};

	ck_assert_int_eq(s3("PUT", ke, "0123456789", 10, NULL, &r), 200);
	md5_hex("0123456789", 10, md5);
	h = h_header(&r, "ETag");
	ck_assert_ptr_nonnull(h);
	ck_assert(strlen(h) == 34 && !strncmp(h + 1, md5, 32) && h[0] == '"');
	free(h);
	h_resp_free(&r);
	/* GET is streamed by the master, not redirected */
	ck_assert_int_eq(s3("GET", ke, NULL, 0, NULL, &r), 200);
	ck_assert(r.body.len == 10 && !memcmp(r.body.data, "0123456789", 10));
	ck_assert_ptr_null(r.location);
	h = h_header(&r, "Last-Modified");
	ck_assert_ptr_nonnull(h);
	free(h);
	h_resp_free(&r);
	ck_assert_int_eq(s3("HEAD", ke, NULL, 0, NULL, &r), 200);
	h = h_header(&r, "Content-Length");
	ck_assert_str_eq(h, "10");
	free(h);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", ke, NULL, 0, rng, &r), 206);
	ck_assert(r.body.len == 3 && !memcmp(r.body.data, "234", 3));
	h = h_header(&r, "Content-Range");
	ck_assert_str_eq(h, "bytes 2-4/10");
	free(h);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", ke, NULL, 0, bad, &r), 416);
	ck_assert(has(&r, "<Code>InvalidRange</Code>"));
	h_resp_free(&r);
	/* a Range that is not one S3 acts on is ignored: the whole object */
	bad[1] = "Range: bytes=abc";
	ck_assert_int_eq(s3("GET", ke, NULL, 0, bad, &r), 200);
	ck_assert_int_eq(r.body.len, 10);
	h_resp_free(&r);
	bad[1] = "Range: bytes=5-2";
	ck_assert_int_eq(s3("GET", ke, NULL, 0, bad, &r), 200);
	ck_assert_int_eq(r.body.len, 10);
	h_resp_free(&r);
	snprintf(inm, sizeof(inm), "If-None-Match: \"%s\"", md5);
	ck_assert_int_eq(s3("GET", ke, NULL, 0, (const char *const *)im, &r), 304);
	h_resp_free(&r);
	snprintf(inm, sizeof(inm), "If-Match: \"0000\"");
	ck_assert_int_eq(s3("GET", ke, NULL, 0, (const char *const *)im, &r), 412);
	ck_assert(has(&r, "<Code>PreconditionFailed</Code>"));
	h_resp_free(&r);
	/* the time conditions: If-Unmodified-Since, If-Modified-Since */
	snprintf(inm, sizeof(inm), "If-Unmodified-Since: Mon, 01 Jan 2001 00:00:00 GMT");
	ck_assert_int_eq(s3("GET", ke, NULL, 0, (const char *const *)im, &r), 412);
	h_resp_free(&r);
	snprintf(inm, sizeof(inm), "If-Modified-Since: Mon, 01 Jan 2001 00:00:00 GMT");
	ck_assert_int_eq(s3("GET", ke, NULL, 0, (const char *const *)im, &r), 200);
	ck_assert_int_eq(r.body.len, 10);
	h_resp_free(&r);
	snprintf(inm, sizeof(inm), "If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT");
	ck_assert_int_eq(s3("GET", ke, NULL, 0, (const char *const *)im, &r), 304);
	h_resp_free(&r);
	ck_assert_int_eq(s3("HEAD", ke, NULL, 0, (const char *const *)im, &r), 304);
	h_resp_free(&r);
	/* overwrite */
	ck_assert_int_eq(s3("PUT", ke, "new", 3, NULL, &r), 200);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", ke, NULL, 0, NULL, &r), 200);
	ck_assert(r.body.len == 3 && !memcmp(r.body.data, "new", 3));
	h_resp_free(&r);
	/* the native API on the same key is unchanged */
	ck_assert_int_eq(native_get(ke, &r), 200);
	ck_assert(r.body.len == 3);
	h_resp_free(&r);
	/* missing: error XML on the S3 path only */
	free(k);
	k = xasprintf("%s/missing", b);
	ck_assert_int_eq(s3("GET", k, NULL, 0, NULL, &r), 404);
	ck_assert(has(&r, "<Error><Code>NoSuchKey</Code>"));
	h = h_header(&r, "Content-Type");
	ck_assert_str_eq(h, "application/xml");
	free(h);
	h_resp_free(&r);
	ck_assert_int_eq(s3("HEAD", k, NULL, 0, NULL, &r), 404);
	ck_assert_int_eq(r.body.len, 0);
	h_resp_free(&r);
	ck_assert_int_eq(s3("DELETE", k, NULL, 0, NULL, &r), 204);
	h_resp_free(&r);
	ck_assert_int_eq(s3("DELETE", ke, NULL, 0, NULL, &r), 204);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", ke, NULL, 0, NULL, &r), 404);
	h_resp_free(&r);
	/* empty objects exist on the S3 path */
	ck_assert_int_eq(s3("PUT", k, NULL, 0, NULL, &r), 200);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", k, NULL, 0, NULL, &r), 200);
	ck_assert_int_eq(r.body.len, 0);
	h_resp_free(&r);
	{	/* an empty object has no byte for a Range to name */
		const char *rg[] = {"Range: bytes=0-", "X-Amz-Date: 20260101T000000Z", NULL};
		ck_assert_int_eq(s3("GET", k, NULL, 0, rg, &r), 416);
		ck_assert(has(&r, "InvalidRange"));
		h_resp_free(&r);
	}
	free(b), free(k), free(ke);
}
END_TEST

START_TEST(test_aws_chunked)
{
	char *k = fresh("/chunked/k");
	const char *hd[] = {"X-Amz-Content-Sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER",
			    "Content-Encoding: aws-chunked", "X-Amz-Decoded-Content-Length: 11",
			    "X-Amz-Trailer: x-amz-checksum-crc32", NULL};
	const char body[] = "5\r\nhello\r\n6;chunk-signature=abc\r\n world\r\n0\r\n"
			    "x-amz-checksum-crc32:DUoRhQ==\r\n\r\n";
	const char trunc[] = "5\r\nhello\r\n6\r\n wo";
	const char junk[] = "zz\r\nhello\r\n";
	struct resp r;
	char bad[sizeof(body)];
	ck_assert_int_eq(s3("PUT", k, body, sizeof(body) - 1, hd, &r), 200);
	ck_assert(r.body.len == 0);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", k, NULL, 0, NULL, &r), 200);
	ck_assert_int_eq(r.body.len, 11);
	ck_assert(!memcmp(r.body.data, "hello world", 11));
	h_resp_free(&r);
	/* the trailer's checksum is checked: a wrong one writes nothing */
	memcpy(bad, body, sizeof(body));
	memcpy(strstr(bad, "DUoRhQ=="), "DUoRhA==", 8);
	ck_assert_int_eq(s3("PUT", k, bad, sizeof(bad) - 1, hd, &r), 400);
	ck_assert_msg(has(&r, "<Code>BadDigest</Code>") && has(&r, "CRC32"), "%s", r.body.data);
	h_resp_free(&r);
	hd[2] = "X-Amz-Decoded-Content-Length: 15";
	ck_assert_int_eq(s3("PUT", k, trunc, sizeof(trunc) - 1, hd, &r), 400);
	ck_assert(has(&r, "IncompleteBody"));
	h_resp_free(&r);
	hd[2] = "X-Amz-Meta-X: 1";
	ck_assert_int_eq(s3("PUT", k, junk, sizeof(junk) - 1, hd, &r), 400);
	h_resp_free(&r);
	/* a failed overwrite left the old value */
	ck_assert_int_eq(s3("GET", k, NULL, 0, NULL, &r), 200);
	ck_assert(r.body.len == 11 && !memcmp(r.body.data, "hello world", 11));
	h_resp_free(&r);
	free(k);
}
END_TEST

/* A Content-MD5 is checked before anything is replaced: 400 BadDigest
 * leaves the old value (or no key), 400 InvalidDigest for one that is not
 * a digest.  Also for a part. */
START_TEST(test_content_md5)
{
	char *k = fresh("/md5b/k"), *n = fresh("/md5b/new"), *p, *id;
	const char *ok[] = {SIGNED[0], "Content-MD5: kAFQmDzST7DWlj99KOF/cg==", NULL};
	const char *junk[] = {SIGNED[0], "Content-MD5: abc", NULL};
	struct resp r;
	ck_assert_int_eq(s3("PUT", k, "abc", 3, ok, &r), 200);
	h_resp_free(&r);
	ck_assert_int_eq(s3("PUT", k, "abd", 3, ok, &r), 400);
	ck_assert(has(&r, "<Code>BadDigest</Code>"));
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", k, NULL, 0, NULL, &r), 200);
	ck_assert(r.body.len == 3 && !memcmp(r.body.data, "abc", 3));
	h_resp_free(&r);
	ck_assert_int_eq(s3("PUT", n, "abd", 3, ok, &r), 400);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", n, NULL, 0, NULL, &r), 404);
	h_resp_free(&r);
	ck_assert_int_eq(s3("PUT", k, "abc", 3, junk, &r), 400);
	ck_assert(has(&r, "<Code>InvalidDigest</Code>"));
	h_resp_free(&r);
	p = xasprintf("%s?uploads", n);
	ck_assert_int_eq(s3("POST", p, NULL, 0, NULL, &r), 200);
	id = xstrndup(strstr(r.body.data, "<UploadId>") + 10, 32);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s?partNumber=1&uploadId=%s", n, id);
	ck_assert_int_eq(s3("PUT", p, "abd", 3, ok, &r), 400);
	ck_assert(has(&r, "<Code>BadDigest</Code>"));
	h_resp_free(&r);
	/* SlowDown while the refused part is cleaned up, as S3 clients retry */
	for (int i = 0; i < 50 && s3("PUT", p, "abc", 3, ok, &r) == 503; i++) {
		h_resp_free(&r);
		usleep(100000);
	}
	ck_assert_int_eq(r.status, 200);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s?uploadId=%s", n, id);
	ck_assert_int_eq(s3("DELETE", p, NULL, 0, NULL, &r), 204);
	h_resp_free(&r);
	free(p), free(id), free(k), free(n);
}
END_TEST

/* CopyObject's x-amz-copy-source-if-* conditions: 412, nothing copied. */
START_TEST(test_copy_conditions)
{
	char *src = fresh("/cpb/src"), *dst = fresh("/cpb/dst"), cs[128], cond[128], md5[33];
	const char *hd[] = {SIGNED[0], cs, cond, NULL};
	struct resp r;
	md5_hex("v1", 2, md5);
	snprintf(cs, sizeof(cs), "X-Amz-Copy-Source: %s", src);
	ck_assert_int_eq(s3("PUT", src, "v1", 2, NULL, &r), 200);
	h_resp_free(&r);
	snprintf(cond, sizeof(cond), "X-Amz-Copy-Source-If-Match: \"0000\"");
	ck_assert_int_eq(s3("PUT", dst, NULL, 0, hd, &r), 412);
	ck_assert(has(&r, "<Code>PreconditionFailed</Code>"));
	h_resp_free(&r);
	snprintf(cond, sizeof(cond), "X-Amz-Copy-Source-If-None-Match: \"%s\"", md5);
	ck_assert_int_eq(s3("PUT", dst, NULL, 0, hd, &r), 412);
	h_resp_free(&r);
	snprintf(cond, sizeof(cond), "X-Amz-Copy-Source-If-Unmodified-Since: "
		 "Mon, 01 Jan 2001 00:00:00 GMT");
	ck_assert_int_eq(s3("PUT", dst, NULL, 0, hd, &r), 412);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", dst, NULL, 0, NULL, &r), 404);
	h_resp_free(&r);
	snprintf(cond, sizeof(cond), "X-Amz-Copy-Source-If-Match: \"%s\"", md5);
	ck_assert_int_eq(s3("PUT", dst, NULL, 0, hd, &r), 200);
	ck_assert(has(&r, "<CopyObjectResult"));
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", dst, NULL, 0, NULL, &r), 200);
	ck_assert(r.body.len == 2 && !memcmp(r.body.data, "v1", 2));
	h_resp_free(&r);
	free(src), free(dst);
}
END_TEST

/* UploadPartCopy: a part from a range of an object, or from all of it. */
START_TEST(test_part_copy)
{
	char *src = fresh("/pcb/src"), *dst = fresh("/pcb/dst"), *p, *id, cs[128];
	char e1[40], e2[40], cmu[300];
	const char *hd[] = {SIGNED[0], cs, "X-Amz-Copy-Source-Range: bytes=2-4", NULL};
	struct resp r;
	snprintf(cs, sizeof(cs), "X-Amz-Copy-Source: %s", src);
	ck_assert_int_eq(s3("PUT", src, "0123456789", 10, NULL, &r), 200);
	h_resp_free(&r);
	p = xasprintf("%s?uploads", dst);
	ck_assert_int_eq(s3("POST", p, NULL, 0, NULL, &r), 200);
	id = xstrndup(strstr(r.body.data, "<UploadId>") + 10, 32);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s?partNumber=1&uploadId=%s", dst, id);
	ck_assert_int_eq(s3("PUT", p, NULL, 0, hd, &r), 200);
	ck_assert(has(&r, "<CopyPartResult"));
	md5_hex("234", 3, e1);
	ck_assert(has(&r, e1));
	h_resp_free(&r);
	hd[2] = "X-Amz-Copy-Source-Range: bytes=5-10"; /* past the end */
	ck_assert_int_eq(s3("PUT", p, NULL, 0, hd, &r), 416);
	ck_assert(has(&r, "<Code>InvalidRange</Code>"));
	h_resp_free(&r);
	hd[2] = "X-Amz-Copy-Source-Range: bytes=5-";
	ck_assert_int_eq(s3("PUT", p, NULL, 0, hd, &r), 400);
	ck_assert(has(&r, "<Code>InvalidArgument</Code>"));
	h_resp_free(&r);
	free(p);
	hd[2] = NULL;
	p = xasprintf("%s?partNumber=2&uploadId=%s", dst, id);
	ck_assert_int_eq(s3("PUT", p, NULL, 0, hd, &r), 200);
	md5_hex("0123456789", 10, e2);
	ck_assert(has(&r, e2));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s?uploadId=%s", dst, id);
	snprintf(cmu, sizeof(cmu), "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
		 "<ETag>\"%s\"</ETag></Part><Part><PartNumber>2</PartNumber><ETag>\"%s\"</ETag>"
		 "</Part></CompleteMultipartUpload>", e1, e2);
	/* S3's clients (ETags listed) get S3's 5 MiB floor for all parts but the last */
	ck_assert_int_eq(s3("POST", p, cmu, strlen(cmu), NULL, &r), 400);
	ck_assert(has(&r, "<Code>EntityTooSmall</Code>"));
	h_resp_free(&r);
	snprintf(cmu, sizeof(cmu), "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
		 "</Part><Part><PartNumber>2</PartNumber></Part></CompleteMultipartUpload>");
	ck_assert_int_eq(s3("POST", p, cmu, strlen(cmu), NULL, &r), 200);
	h_resp_free(&r);
	free(p);
	ck_assert_int_eq(s3("GET", dst, NULL, 0, NULL, &r), 200);
	ck_assert(r.body.len == 13 && !memcmp(r.body.data, "2340123456789", 13));
	h_resp_free(&r);
	free(id), free(src), free(dst);
}
END_TEST

/* DeleteObjects' per-object ETag is a condition (S3's conditional
 * delete); a Size or LastModifiedTime condition, which mkv does not check,
 * is refused rather than ignored. */
START_TEST(test_delete_conditions)
{
	char *b = fresh("/dcb"), *k = xasprintf("%s/k", b), *p = xasprintf("%s?delete", b), doc[300];
	char md5[33];
	struct resp r;
	md5_hex("v1", 2, md5);
	ck_assert_int_eq(s3("PUT", k, "v1", 2, NULL, &r), 200);
	h_resp_free(&r);
	snprintf(doc, sizeof(doc), "<Delete><Object><Key>k</Key><ETag>\"%032d\"</ETag></Object>"
		 "</Delete>", 0);
	ck_assert_int_eq(s3("POST", p, doc, strlen(doc), NULL, &r), 200);
	ck_assert_msg(has(&r, "<Code>PreconditionFailed</Code>"), "%s", r.body.data);
	h_resp_free(&r);
	snprintf(doc, sizeof(doc), "<Delete><Object><Key>k</Key><Size>2</Size></Object></Delete>");
	ck_assert_int_eq(s3("POST", p, doc, strlen(doc), NULL, &r), 501);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", k, NULL, 0, NULL, &r), 200);
	h_resp_free(&r);
	snprintf(doc, sizeof(doc), "<Delete><Object><Key>k</Key><ETag>\"%s\"</ETag></Object>"
		 "</Delete>", md5);
	ck_assert_int_eq(s3("POST", p, doc, strlen(doc), NULL, &r), 200);
	ck_assert_msg(has(&r, "<Deleted><Key>k</Key></Deleted>"), "%s", r.body.data);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", k, NULL, 0, NULL, &r), 404);
	h_resp_free(&r);
	free(b), free(k), free(p);
}
END_TEST

/* minikeyvalue's own S3 forms, unsigned, as its users send them. */
START_TEST(test_minikeyvalue_forms)
{
	char *b = fresh("/mkvb"), *p, *id, *e;
	const char *none[] = {NULL};
	const char cmu[] = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
			   "<Part><PartNumber>2</PartNumber></Part></CompleteMultipartUpload>";
	struct resp r;

	p = xasprintf("%s/one", b);
	ck_assert_int_eq(s3("PUT", p, "1", 1, none, &r), 201); /* unsigned: native */
	h_resp_free(&r);
	ck_assert_int_eq(s3("PUT", p, "1", 1, none, &r), 403);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/big?uploads", b);
	ck_assert_int_eq(s3("POST", p, NULL, 0, none, &r), 200);
	id = strstr(r.body.data, "<UploadId>");
	ck_assert_ptr_nonnull(id);
	id = xstrndup(id + 10, 32);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/big?partNumber=1&uploadId=%s", b, id);
	ck_assert_int_eq(s3("PUT", p, "part one,", 9, none, &r), 200);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/big?partNumber=2&uploadId=%s", b, id);
	ck_assert_int_eq(s3("PUT", p, "part two", 8, none, &r), 200);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/big?uploadId=%s", b, id);
	ck_assert_int_eq(s3("POST", p, cmu, sizeof(cmu) - 1, none, &r), 200);
	ck_assert(has(&r, "<CompleteMultipartUploadResult"));
	ck_assert(has(&r, "-2&quot;</ETag>"));
	h_resp_free(&r);
	ck_assert_int_eq(s3("POST", p, cmu, sizeof(cmu) - 1, none, &r), 404);
	ck_assert(has(&r, "NoSuchUpload"));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/big", b);
	ck_assert_int_eq(native_get(p, &r), 200);
	ck_assert(r.body.len == 17 && !memcmp(r.body.data, "part one,part two", 17));
	h_resp_free(&r);
	free(p);
	/* no part is left behind */
	ck_assert_int_eq(s3("GET", "/.mkv-mpu/?list", NULL, 0, none, &r), 200);
	e = xasprintf("/.mkv-mpu/%s", id);
	ck_assert(!has(&r, e));
	free(e);
	h_resp_free(&r);
	/* ListObjectsV2 with a prefix: full keys, as S3 */
	p = xasprintf("%s?list-type=2&prefix=b", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, none, &r), 200);
	ck_assert(has(&r, "<Key>big</Key>") && !has(&r, "<Key>one</Key>"));
	ck_assert(has(&r, "<Size>17</Size>"));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s?delete", b);
	ck_assert_int_eq(s3("POST", p, "<Delete><Object><Key>big</Key></Object><Object><Key>one"
				       "</Key></Object></Delete>", 77, none, &r), 200);
	ck_assert(has(&r, "<Deleted><Key>big</Key></Deleted>"));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s?list-type=2", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, none, &r), 200);
	ck_assert(!has(&r, "<Contents>"));
	h_resp_free(&r);
	free(p), free(id), free(b);
}
END_TEST

START_TEST(test_listing)
{
	char *b = fresh("/lsb"), *p;
	struct resp r;
	const char *keys[] = {"a", "a b", "a+b", "d/1", "d/2", "d/e/3", "z&<"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		struct buf e = {0};
		buf_puts(&e, b);
		buf_puts(&e, "/");
		for (const char *c = keys[i]; *c; c++)
			buf_printf(&e, "%%%02X", (unsigned char)*c);
		ck_assert_int_eq(s3("PUT", e.data, "v", 1, NULL, &r), 200);
		h_resp_free(&r);
		buf_free(&e);
	}
	p = xasprintf("%s?list-type=2&delimiter=/&encoding-type=url", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
	ck_assert(has(&r, "<Key>a%20b</Key>") && has(&r, "<Key>a%2Bb</Key>") &&
		  has(&r, "<Key>z%26%3C</Key>"));
	ck_assert(has(&r, "<CommonPrefixes><Prefix>d/</Prefix></CommonPrefixes>"));
	ck_assert(has(&r, "<KeyCount>5</KeyCount>") && has(&r, "<EncodingType>url</EncodingType>"));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/?delimiter=/&max-keys=2", b); /* V1 */
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
	ck_assert(has(&r, "<IsTruncated>true</IsTruncated>") && has(&r, "<NextMarker>a b</NextMarker>"));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/?delimiter=/&marker=a%%2Bb", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
	ck_assert(has(&r, "<Prefix>d/</Prefix>") && has(&r, "<Key>z&amp;&lt;</Key>") &&
		  !has(&r, "<Key>a"));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s?list-type=2&prefix=d/&delimiter=/&start-after=d/1", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
	ck_assert(has(&r, "<Key>d/2</Key>") && has(&r, "<Prefix>d/e/</Prefix>") &&
		  !has(&r, "<Key>d/1</Key>"));
	h_resp_free(&r);
	free(p);
	/* a marker inside a common prefix: the prefix is listed, keys past
	 * the marker are in it; a marker equal to it (where the page before
	 * ended) steps over it */
	p = xasprintf("%s/?delimiter=/&marker=d/1", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
	ck_assert(has(&r, "<Prefix>d/</Prefix>") && has(&r, "<Key>z&amp;&lt;</Key>"));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/?delimiter=/&marker=d/", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
	ck_assert(!has(&r, "<Prefix>d/</Prefix>") && has(&r, "<Key>z&amp;&lt;</Key>"));
	h_resp_free(&r);
	free(p);
	/* an empty continuation-token is none: start-after still applies */
	p = xasprintf("%s?list-type=2&continuation-token=&start-after=d/2", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
	ck_assert(has(&r, "<Key>d/e/3</Key>") && !has(&r, "<Key>a</Key>") &&
		  !has(&r, "<Key>d/2</Key>"));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s?list-type=2&max-keys=x", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 400);
	ck_assert(has(&r, "<Code>InvalidArgument</Code>"));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s?list-type=2&continuation-token=zz", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 400);
	h_resp_free(&r);
	free(p);
	ck_assert_int_eq(s3("GET", "/", NULL, 0, NULL, &r), 200);
	ck_assert(has(&r, b + 1));
	ck_assert(!has(&r, ".mkv-mpu"));
	h_resp_free(&r);
	p = xasprintf("%s?location", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
	ck_assert(has(&r, "<LocationConstraint"));
	h_resp_free(&r);
	free(p);
	/* ListMultipartUploads keeps to its prefix */
	{
		const char *names[] = {"up/one", "zz"};
		char *ids[2];
		for (int i = 0; i < 2; i++) {
			p = xasprintf("%s/%s?uploads", b, names[i]);
			ck_assert_int_eq(s3("POST", p, NULL, 0, NULL, &r), 200);
			ids[i] = xstrndup(strstr(r.body.data, "<UploadId>") + 10, 32);
			h_resp_free(&r);
			free(p);
		}
		p = xasprintf("%s?uploads&prefix=up/", b);
		ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
		ck_assert(has(&r, ids[0]) && !has(&r, ids[1]) && has(&r, "<Prefix>up/</Prefix>"));
		h_resp_free(&r);
		free(p);
		p = xasprintf("%s?uploads", b);
		ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
		ck_assert(has(&r, ids[0]) && has(&r, ids[1]));
		h_resp_free(&r);
		free(p);
		for (int i = 0; i < 2; i++) {
			p = xasprintf("%s/%s?uploadId=%s", b, names[i], ids[i]);
			ck_assert_int_eq(s3("DELETE", p, NULL, 0, NULL, &r), 204);
			h_resp_free(&r);
			free(p);
			free(ids[i]);
		}
	}
	free(b);
}
END_TEST

START_TEST(test_bad_requests)
{
	char *b = fresh("/badb"), *p;
	struct resp r;
	size_t big = 3u << 20;
	char *junk = malloc(big);
	memset(junk, '<', big);
	p = xasprintf("%s?delete", b);
	ck_assert_int_eq(s3("POST", p, "not xml", 7, NULL, &r), 400);
	ck_assert(has(&r, "MalformedXML"));
	h_resp_free(&r);
	ck_assert_int_eq(s3("POST", p, junk, big, NULL, &r), 400);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/k?uploadId=0123456789abcdef0123456789abcdef", b);
	ck_assert_int_eq(s3("POST", p, "<CompleteMultipartUpload/>", 26, NULL, &r), 404);
	ck_assert(has(&r, "NoSuchUpload"));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/k?partNumber=1&uploadId=nope", b);
	ck_assert_int_eq(s3("PUT", p, "x", 1, NULL, &r), 404);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/k?acl", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 501);
	ck_assert(has(&r, "NotImplemented"));
	h_resp_free(&r);
	free(p);
	/* PutBucketVersioning is refused, not taken for a CreateBucket */
	p = xasprintf("%s?versioning", b);
	ck_assert_int_eq(s3("PUT", p, "<VersioningConfiguration><Status>Enabled</Status>"
				      "</VersioningConfiguration>", 75, NULL, &r), 501);
	ck_assert(has(&r, "<Code>NotImplemented</Code>"));
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
	ck_assert(has(&r, "<VersioningConfiguration") && !has(&r, "Enabled"));
	h_resp_free(&r);
	free(p);
	ck_assert_int_eq(s3("PATCH", "/x/y", NULL, 0, NULL, &r), 405); /* not S3: native */
	h_resp_free(&r);
	ck_assert_int_eq(s3("POST", "/", NULL, 0, NULL, &r), 405);
	h_resp_free(&r);
	free(junk);
	free(b);
}
END_TEST

/* DeleteBucket (docs/s3.md): 409 BucketNotEmpty while an object is in
 * the bucket, which stays listed and the object readable; 204 once it is
 * empty, and ListBuckets no longer names it. */
START_TEST(test_delete_bucket)
{
	char *b = fresh("/delb"), *k = xasprintf("%s/obj", b), *name = xasprintf("<Name>%s</Name>", b + 1);
	struct resp r;
	ck_assert_int_eq(s3("PUT", b, NULL, 0, NULL, &r), 200);                /* CreateBucket */
	h_resp_free(&r);
	ck_assert_int_eq(s3("PUT", k, "v", 1, NULL, &r), 200);
	h_resp_free(&r);
	ck_assert_int_eq(s3("DELETE", b, NULL, 0, NULL, &r), 409);
	ck_assert_msg(has(&r, "<Code>BucketNotEmpty</Code>"), "DeleteBucket: %s", r.body.data);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", "/", NULL, 0, NULL, &r), 200);              /* ListBuckets */
	ck_assert_msg(has(&r, name), "a bucket refused DeleteBucket is gone: %s", r.body.data);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", k, NULL, 0, NULL, &r), 200);
	ck_assert(r.body.len == 1 && r.body.data[0] == 'v');
	h_resp_free(&r);
	ck_assert_int_eq(s3("DELETE", k, NULL, 0, NULL, &r), 204);
	h_resp_free(&r);
	ck_assert_int_eq(s3("DELETE", b, NULL, 0, NULL, &r), 204);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", "/", NULL, 0, NULL, &r), 200);
	ck_assert_msg(!has(&r, name), "a deleted bucket is still listed: %s", r.body.data);
	h_resp_free(&r);
	free(b), free(k), free(name);
}
END_TEST

/* Presigned URLs, unsigned requests: signature version 4 and the
 * version 2 form (AWSAccessKeyId, Signature, Expires) that `aws s3
 * presign` and boto3 make for us-east-1.  Both are S3: the object is
 * streamed, and a PUT overwrites. */
START_TEST(test_presigned)
{
	char *k = fresh("/psb/k"), *p;
	const char *none[] = {NULL};
	const char *q[] = {"?AWSAccessKeyId=mkv&Signature=c2ln%2B%3D&Expires=1796081097",
			   "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=mkv%2F20261130%2F"
			   "us-east-1%2Fs3%2Faws4_request&X-Amz-Signature=ab"};
	struct resp r;
	for (int i = 0; i < 2; i++) {
		p = xasprintf("%s%s", k, q[i]);
		ck_assert_int_eq(s3("PUT", p, "presigned", 9, none, &r), 200);
		h_resp_free(&r);
		ck_assert_int_eq(s3("PUT", p, i ? "again" : "Again", 5, none, &r), 200);
		h_resp_free(&r);
		ck_assert_int_eq(s3("GET", p, NULL, 0, none, &r), 200);
		ck_assert(r.body.len == 5 && !memcmp(r.body.data, i ? "again" : "Again", 5));
		h_resp_free(&r);
		ck_assert_int_eq(s3("DELETE", p, NULL, 0, none, &r), 204);
		h_resp_free(&r);
		free(p);
	}
	free(k);
}
END_TEST

/* Uploads and sizes are in the sidecar index: they survive a restart. */
START_TEST(test_restart)
{
	char *b = fresh("/rsb"), *p, *id;
	struct resp r;
	char cmu[200];
	p = xasprintf("%s/sized", b);
	ck_assert_int_eq(s3("PUT", p, "12345", 5, NULL, &r), 200);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/mp?uploads", b);
	ck_assert_int_eq(s3("POST", p, NULL, 0, NULL, &r), 200);
	id = xstrndup(strstr(r.body.data, "<UploadId>") + 10, 32);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/mp?partNumber=1&uploadId=%s", b, id);
	ck_assert_int_eq(s3("PUT", p, "abc", 3, NULL, &r), 200);
	h_resp_free(&r);
	free(p);
	/* The fixture's master (not this process's child: the harness checks
	 * that it went and its log; the runner reaps it), then this test's own
	 * (its exit 0 checked too). */
	h_master_down(&m);
	h_master_restart(&m, vols, 3, NULL);
	p = xasprintf("%s?list-type=2", b);
	for (int i = 0; i < 50 && s3("GET", p, NULL, 0, NULL, &r) != 200; i++) {
		h_resp_free(&r);
		usleep(100000);
	}
	if (r.status != 200) {
		char *log = h_read_file(m.log);
		size_t n = strlen(log);
		ck_abort_msg("list after restart: %ld; master log: %s", r.status,
			     log + (n > 2000 ? n - 2000 : 0));
	}
	ck_assert(has(&r, "<Key>sized</Key>") && has(&r, "<Size>5</Size>"));
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/mp?uploadId=%s", b, id);
	snprintf(cmu, sizeof(cmu), "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
		 "</Part></CompleteMultipartUpload>");
	ck_assert_int_eq(s3("POST", p, cmu, strlen(cmu), NULL, &r), 200);
	h_resp_free(&r);
	free(p);
	p = xasprintf("%s/mp", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
	ck_assert(r.body.len == 3 && !memcmp(r.body.data, "abc", 3));
	h_resp_free(&r);
	free(p);

	/* `mkv rebuild` into an empty index restores sizes (and times) */
	{
		char *bin = h_bin("mkv"), *va = h_volumes_arg(vols, 3), *cmd;
		h_master_down(&m);
		cmd = xasprintf("rm -rf '%s' && '%s' -volumes %s -db '%s' rebuild >/dev/null 2>&1",
				m.db, bin, va, m.db);
		ck_assert_int_eq(system(cmd), 0);
		free(cmd), free(bin), free(va);
	}
	h_master_restart(&m, vols, 3, NULL);
	p = xasprintf("%s?list-type=2", b);
	ck_assert_int_eq(s3("GET", p, NULL, 0, NULL, &r), 200);
	ck_assert(has(&r, "<Key>sized</Key>") && has(&r, "<Size>5</Size>") &&
		  has(&r, "<Key>mp</Key>") && has(&r, "<Size>3</Size>"));
	ck_assert(!has(&r, "<LastModified>1970"));
	h_resp_free(&r);
	free(p), free(id), free(b);
	h_master_down(&m);   /* else it dies with this test's process, unchecked */
}
END_TEST

/* What a failed REPLACE leaves, on a cluster of the test's own.  Its
 * master checks the volumes every 30 s, so the volume stopped below is
 * still up as far as it knows (else the REPLACE is 503 before anything
 * is written, whenever the master happened to notice). */
START_TEST(test_replace_failures)
{
	static const char *const slow_checks[] = {"-voltimeout", "30s", NULL};
	struct vol v[3];
	struct master mm = {0};
	struct resp r;
	char *u, *h, *path;
	long st;
	for (int i = 0; i < 3; i++)
		h_vol_start(&v[i], VOL_MKV);
	h_master_start(&mm, v, 3, slow_checks);
	u = xasprintf("%s/rf/key", mm.base);
	ck_assert_int_eq(h_http("PUT", u, "old", 3, NULL, false, &r), 201);
	h_resp_free(&r);

	/* a volume dies: the REPLACE either places the copy elsewhere (201)
	 * or says it is partly done; the new value is what is served */
	h_vol_down(&v[0]);
	st = h_http("REPLACE", u, "new!", 4, NULL, false, &r);
	ck_assert_msg(st == 201 || (st >= 500 && strstr(r.body.data, "partly done")),
		      "REPLACE with a volume down: %ld %s", st, r.body.data ? r.body.data : "");
	h_resp_free(&r);
	if (st != 201) { /* the record names the two new copies only */
		ck_assert_int_eq(h_http("HEAD", u, NULL, 0, NULL, false, &r), 302);
		h = h_header(&r, "Key-Volumes");
		ck_assert_ptr_nonnull(h);
		ck_assert_ptr_nonnull(strchr(h, ','));
		ck_assert_ptr_null(strchr(strchr(h, ',') + 1, ','));
		free(h);
		h = h_header(&r, "Key-Balance");
		ck_assert_str_eq(h, "unbalanced");
		free(h);
		h_resp_free(&r);
	}
	ck_assert_int_eq(h_http("GET", u, NULL, 0, SIGNED, false, &r), 200); /* any live copy */
	ck_assert_msg(r.body.len == 4 && !memcmp(r.body.data, "new!", 4), "after %ld: read %zu bytes",
		      st, r.body.len);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("HEAD", u, NULL, 0, SIGNED, false, &r), 200); /* the metadata too */
	h = h_header(&r, "Content-Length");
	ck_assert_str_eq(h, "4");
	free(h);
	h_resp_free(&r);

	/* a crash mid-REPLACE (its marker in the sidecar): the next start
	 * reads the copies the record names and keeps those that agree, so
	 * copies that differ are never served, and the value is not lost */
	h_stop(mm.pid, SIGKILL);
	mm.pid = 0;
	path = xasprintf("%s/mkv-meta", mm.db);
	{
		leveldb_options_t *o = leveldb_options_create();
		leveldb_writeoptions_t *w = leveldb_writeoptions_create();
		char *err = NULL;
		leveldb_t *db = leveldb_open(o, path, &err);
		ck_assert_msg(db && !err, "open sidecar: %s", err ? err : "");
		leveldb_put(db, w, "r/rf/key", 8, "", 0, &err);
		ck_assert_ptr_null(err);
		leveldb_close(db);
		leveldb_writeoptions_destroy(w);
		leveldb_options_destroy(o);
	}
	free(path);
	h_vol_respawn(&v[0]);
	h_master_restart(&mm, v, 3, slow_checks);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, SIGNED, false, &r), 200);
	ck_assert_msg(r.body.len == 4 && !memcmp(r.body.data, "new!", 4),
		      "after a restart mid-REPLACE: read %zu bytes", r.body.len);
	h_resp_free(&r);
	h = xasprintf("%s/rf/?unlinked", mm.base);
	ck_assert_int_eq(h_http("GET", h, NULL, 0, NULL, false, &r), 200);
	ck_assert(!has(&r, "\"/rf/key\""));
	h_resp_free(&r);
	free(h);
	h = xasprintf("%s/rf/key", mm.base);
	ck_assert_int_eq(h_status("RELINK", h) == 204 || h_status("DELETE", h) == 204, 1);
	free(h);
	free(u);
	h_master_stop(&mm);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&v[i]);
}
END_TEST

/* -maxsize with S3 (docs/s3.md): PutObject and UploadPart of a larger
 * value are 400 EntityTooLarge -- by Content-Length before the body,
 * mid-body for a chunked or aws-chunked one -- and an object overwritten
 * by one keeps its old value; a value of -maxsize bytes is stored. */
START_TEST(test_s3_maxsize)
{
	static const char *const flags[] = {"-maxsize", "10", "-replicas", "1", NULL};
	const char *const chunked[] = {SIGNED[0], SIGNED[1], "Transfer-Encoding: chunked", NULL};
	const char *const aws[] = {SIGNED[0], "X-Amz-Content-Sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER",
				   "Content-Encoding: aws-chunked", NULL};
	const char awsbody[] = "6\r\n012345\r\n6\r\n6789AB\r\n0\r\n\r\n";
	struct vol v[1];
	struct master mm = {0};
	struct resp r;
	char *u, *id;
	long st = 0;
	h_vol_start(&v[0], VOL_MKV);
	h_master_start(&mm, v, 1, flags);
	u = xasprintf("%s/mxb/k", mm.base);
	for (int i = 0; i < 100 && (st = h_http("PUT", u, "0123456789", 10, SIGNED, false, &r)) == 503;
	     i++) {
		h_resp_free(&r);
		usleep(50000);
	}
	ck_assert_int_eq(st, 200);                                   /* 10 bytes: fits */
	h_resp_free(&r);
	for (int how = 0; how < 3; how++) {
		const char *const *hd = how == 0 ? SIGNED : how == 1 ? chunked : aws;
		const char *body = how == 2 ? awsbody : "0123456789A";
		size_t len = how == 2 ? sizeof(awsbody) - 1 : 11;
		st = h_http("PUT", u, body, len, hd, false, &r);
		ck_assert_msg(st == 400 && has(&r, "<Code>EntityTooLarge</Code>"),
			      "PutObject of 11 bytes (%s): %ld %s", how == 0 ? "Content-Length" :
			      how == 1 ? "chunked" : "aws-chunked", st, r.body.data ? r.body.data : "");
		h_resp_free(&r);
		ck_assert_int_eq(h_http("GET", u, NULL, 0, SIGNED, false, &r), 200);
		ck_assert_msg(r.body.len == 10 && !memcmp(r.body.data, "0123456789", 10),
			      "the old value after a refused overwrite: %zu bytes", r.body.len);
		h_resp_free(&r);
	}
	free(u);
	u = xasprintf("%s/mxb/mp?uploads", mm.base);
	ck_assert_int_eq(h_http("POST", u, NULL, 0, SIGNED, false, &r), 200);
	id = xstrndup(strstr(r.body.data, "<UploadId>") + 10, 32);
	h_resp_free(&r);
	free(u);
	u = xasprintf("%s/mxb/mp?partNumber=1&uploadId=%s", mm.base, id);
	ck_assert_int_eq(h_http("PUT", u, "0123456789A", 11, SIGNED, false, &r), 400);
	ck_assert(has(&r, "<Code>EntityTooLarge</Code>"));
	h_resp_free(&r);
	for (int i = 0; i < 50 && (st = h_http("PUT", u, "0123456789", 10, SIGNED, false, &r)) == 503;
	     i++) {                                     /* SlowDown while the refused one is let go */
		h_resp_free(&r);
		usleep(100000);
	}
	ck_assert_int_eq(st, 200);
	h_resp_free(&r);
	free(u);
	u = xasprintf("%s/mxb/mp?uploadId=%s", mm.base, id);
	ck_assert_int_eq(h_http("DELETE", u, NULL, 0, SIGNED, false, &r), 204);
	h_resp_free(&r);
	free(u), free(id);
	h_master_stop(&mm);
	h_vol_stop(&v[0]);
}
END_TEST

/* -protect: DeleteObject(s) of a live key is 403 AccessDenied with its
 * reason; a multipart upload's parts still go once it is completed or
 * aborted. */
START_TEST(test_protect)
{
	struct vol v[1];
	struct master mm = {0};
	static const char *const flags[] = {"-protect", "-replicas", "1", NULL};
	const char cmu[] = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
			   "</CompleteMultipartUpload>";
	struct resp r;
	char *u, *id;
	h_vol_start(&v[0], VOL_MKV);
	h_master_start(&mm, v, 1, flags);
	u = xasprintf("%s/pb/k", mm.base);
	ck_assert_int_eq(h_http("PUT", u, "v", 1, SIGNED, false, &r), 200);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("DELETE", u, NULL, 0, SIGNED, false, &r), 403);
	ck_assert(has(&r, "<Code>AccessDenied</Code>") && has(&r, "-protect"));
	h_resp_free(&r);
	free(u);
	u = xasprintf("%s/pb?delete", mm.base);
	ck_assert_int_eq(h_http("POST", u, "<Delete><Object><Key>k</Key></Object></Delete>", 46,
				SIGNED, false, &r), 200);
	ck_assert(has(&r, "<Error><Key>k</Key><Code>AccessDenied</Code>"));
	h_resp_free(&r);
	free(u);
	for (int abort = 0; abort < 2; abort++) {
		u = xasprintf("%s/pb/mp?uploads", mm.base);
		ck_assert_int_eq(h_http("POST", u, NULL, 0, SIGNED, false, &r), 200);
		id = xstrndup(strstr(r.body.data, "<UploadId>") + 10, 32);
		h_resp_free(&r);
		free(u);
		u = xasprintf("%s/pb/mp?partNumber=1&uploadId=%s", mm.base, id);
		ck_assert_int_eq(h_http("PUT", u, "abc", 3, SIGNED, false, &r), 200);
		h_resp_free(&r);
		free(u);
		u = xasprintf("%s/pb/mp?uploadId=%s", mm.base, id);
		ck_assert_int_eq(h_http(abort ? "DELETE" : "POST", u, cmu, abort ? 0 : sizeof(cmu) - 1,
					SIGNED, false, &r), abort ? 204 : 200);
		h_resp_free(&r);
		free(u);
		free(id);
	}
	u = xasprintf("%s/.mkv-mpu/?list", mm.base);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	ck_assert_msg(has(&r, "\"keys\":[]"), "parts left: %s", r.body.data);
	h_resp_free(&r);
	free(u);
	h_master_stop(&mm);
	h_vol_stop(&v[0]);
}
END_TEST

/* boto3, the aws CLI, rclone and s3cmd against this cluster. */
START_TEST(test_clients)
{
	char *script = h_root("tests/s3_clients.py"), *dir = h_tmpdir(), *log = xasprintf("%s.log", dir);
	char *argv[] = {"/usr/bin/python3", script, m.base, dir, NULL};
	pid_t pid = h_spawn(argv, log);
	int st;
	waitpid(pid, &st, 0);
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		char *out = h_read_file(log);
		size_t n = strlen(out);
		ck_abort_msg("s3_clients.py failed (%s):\n%s", log, out + (n > 3000 ? n - 3000 : 0));
	} else {   /* which clients ran and which were skipped: its last lines */
		char *out = h_read_file(log), *p = strstr(out, "s3_clients: ran");
		fprintf(stderr, "%s", p ? p : "s3_clients.py said nothing of what ran\n");
		free(out);
	}
	unlink(log);
	h_rmrf(dir);
	free(script), free(dir), free(log);
}
END_TEST

static int volume_fds(void)
{
	int n = 0;
	for (int i = 0; i < 3; i++)
		n += h_fd_count(vols[i].pid);
	return n;
}

/* GetObject's bytes pass through the streaming engine: a client that goes
 * away mid-body stops the worker, which lets go of its volume connection;
 * a replica cut off mid-body ends the answer short (never a hang, never a
 * whole-looking body). */
START_TEST(test_get_cut)
{
	enum { BIG = 16 << 20 };
	char *big = xmalloc(BIG), *req, buf[65536];
	struct resp r;
	size_t got = 0;
	ssize_t n;
	int fds0, fds, fd;
	for (size_t i = 0; i < BIG; i++)
		big[i] = (char)(i * 7 + i / 4096);
	cluster_up(VOL_MKV);
	ck_assert_int_eq(s3("PUT", "/cutb/big", big, BIG, NULL, &r), 200);
	h_resp_free(&r);
	ck_assert_int_eq(s3("GET", "/cutb/big", NULL, 0, NULL, &r), 200);
	ck_assert(r.body.len == BIG && !memcmp(r.body.data, big, BIG));
	h_resp_free(&r);
	fds0 = volume_fds();
	req = xasprintf("GET /cutb/big HTTP/1.1\r\nHost: x\r\n%s\r\n%s\r\n\r\n", SIGNED[0],
			SIGNED[1]);
	for (int i = 0; i < 8; i++) {   /* read 64 KiB, go away */
		fd = h_connect(m.port);
		ck_assert(h_send(fd, req, strlen(req)));
		ck_assert_int_gt(recv(fd, buf, sizeof(buf), MSG_WAITALL), 0);
		close(fd);
	}
	/* A worker left feeding a ring nobody reads would hold its volume
	 * connection (the volume blocked in send) for good. */
	for (int t = 0; t < 400 && (fds = volume_fds()) > fds0 + 2; t++)
		usleep(50000);
	ck_assert_msg(fds <= fds0 + 2, "volumes hold %d descriptors, %d before 8 GetObjects "
		      "whose clients went away", fds, fds0);
	ck_assert_int_eq(s3("GET", "/cutb/big", NULL, 0, NULL, &r), 200);
	ck_assert(r.body.len == BIG && !memcmp(r.body.data, big, BIG));
	h_resp_free(&r);
	/* Every volume killed while the client reads slowly. */
	fd = h_connect(m.port);
	ck_assert(h_send(fd, req, strlen(req)));
	ck_assert_int_gt(n = recv(fd, buf, sizeof(buf), MSG_WAITALL), 0);
	got += (size_t)n;
	for (int i = 0; i < 3; i++)
		h_vol_down(&vols[i]);
	{
		struct timeval tv = {.tv_sec = 90};   /* 1.5 x -puttimeout: no hang */
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
		got += (size_t)n;
	ck_assert_msg(n == 0 || errno == ECONNRESET, "the answer hangs after its volumes died: %s",
		      strerror(errno));
	ck_assert_msg(got < BIG, "a cut replica gave a whole-looking answer (%zu bytes)", got);
	close(fd);
	free(req);
	free(big);
	cluster_down();
}
END_TEST

/* docs/s3.md: "A write that finds the key busy (another write of it
 * running) answers 503 SlowDown, which S3 clients retry: PutObject ... at
 * once, DeleteObject(s), CopyObject ... after waiting up to a second."  A
 * native chunked PUT holds the key, its body half sent; once the master
 * has taken it (a native DELETE gets 409, 404 before), PutObject,
 * CopyObject onto the key and DeleteObject each get 503 SlowDown.  The
 * PUT then ends with 201, its bytes are the key's, and a PutObject after
 * it overwrites them. */
START_TEST(test_slowdown)
{
	char *key = fresh("/busy/k"), *src = fresh("/busy/src"), *u = xasprintf("%s%s", m.base, key);
	char head[256], copy[300];
	const char *copy_h[] = {SIGNED[0], SIGNED[1], copy, NULL};
	struct buf out = {0};
	struct resp r;
	uint64_t end = now_ms() + 20000;
	long st;
	int fd;

	ck_assert_int_eq(s3("PUT", src, "source", 6, NULL, &r), 200);
	h_resp_free(&r);
	snprintf(copy, sizeof(copy), "x-amz-copy-source: %s", src);
	fd = h_connect(m.port);
	ck_assert(fd >= 0);
	snprintf(head, sizeof(head), "PUT %s HTTP/1.1\r\nHost: x\r\n"
		 "Transfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n", key);
	ck_assert(h_send(fd, head, strlen(head)));
	while ((st = h_status("DELETE", u)) == 404 && now_ms() < end)
		usleep(20000);
	ck_assert_msg(st == 409, "the master never took the PUT of %s (DELETE: %ld)", key, st);

	ck_assert_int_eq(s3("PUT", key, "second", 6, NULL, &r), 503);
	ck_assert_msg(has(&r, "<Code>SlowDown</Code>"), "PutObject: %s", r.body.data);
	h_resp_free(&r);
	ck_assert_int_eq(s3("PUT", key, NULL, 0, copy_h, &r), 503);
	ck_assert_msg(has(&r, "<Code>SlowDown</Code>"), "CopyObject: %s", r.body.data);
	h_resp_free(&r);
	ck_assert_int_eq(s3("DELETE", key, NULL, 0, NULL, &r), 503);
	ck_assert_msg(has(&r, "<Code>SlowDown</Code>"), "DeleteObject: %s", r.body.data);
	h_resp_free(&r);

	ck_assert(h_send(fd, "0\r\n\r\n", 5));
	ck_assert_int_eq(h_recv_resp(fd, &out, 20000, false), 201);
	buf_free(&out);
	close(fd);
	ck_assert_int_eq(native_get(key, &r), 200);
	ck_assert_uint_eq(r.body.len, 5);
	ck_assert_mem_eq(r.body.data, "first", 5);
	h_resp_free(&r);
	ck_assert_int_eq(s3("PUT", key, "second", 6, NULL, &r), 200);
	h_resp_free(&r);
	ck_assert_int_eq(native_get(key, &r), 200);
	ck_assert_uint_eq(r.body.len, 6);
	ck_assert_mem_eq(r.body.data, "second", 6);
	h_resp_free(&r);
	free(key), free(src), free(u);
}
END_TEST

static TCase *s3_case(const char *name, void (*up)(void))
{
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, 300);
	tcase_add_unchecked_fixture(tc, up, cluster_down);
	tcase_add_test(tc, test_replace);
	tcase_add_test(tc, test_replace_atomic);
	tcase_add_test(tc, test_objects);
	tcase_add_test(tc, test_aws_chunked);
	tcase_add_test(tc, test_content_md5);
	tcase_add_test(tc, test_copy_conditions);
	tcase_add_test(tc, test_part_copy);
	tcase_add_test(tc, test_minikeyvalue_forms);
	tcase_add_test(tc, test_delete_conditions);
	tcase_add_test(tc, test_listing);
	tcase_add_test(tc, test_bad_requests);
	tcase_add_test(tc, test_presigned);
	tcase_add_test(tc, test_delete_bucket);
	tcase_add_test(tc, test_clients);
	tcase_add_test(tc, test_restart); /* last: it stops the fixture's master */
	return tc;
}

int main(void)
{
	Suite *s = suite_create("s3");
	SRunner *sr;
	int failed;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	signal(SIGPIPE, SIG_IGN);
	suite_add_tcase(s, s3_case("mkv-volume", up_mkv));
	suite_add_tcase(s, s3_case("nginx", up_nginx));
	{
		TCase *tc = tcase_create("slowdown");   /* the master's: one kind of volume */
		tcase_set_timeout(tc, 60);
		tcase_add_unchecked_fixture(tc, up_mkv, cluster_down);
		tcase_add_test(tc, test_slowdown);
		suite_add_tcase(s, tc);
	}
	{
		TCase *tc = tcase_create("failures");
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, test_replace_failures);
		tcase_add_test(tc, test_protect);
		tcase_add_test(tc, test_s3_maxsize);
		tcase_add_test(tc, test_get_cut);
		suite_add_tcase(s, tc);
	}
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
