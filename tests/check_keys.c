/* check_keys.c -- -keys on a real cluster (docs/security.md): requests
 * signed as curl --aws-sigv4 signs them on the native API (401, 403, the
 * permissions and prefixes), streamed S3 uploads whose chunk signature or
 * body hash is forged (nothing stored), SIGHUP's reload and a bad file at
 * start, then the real S3 clients: the S3 suite with a right key
 * (tests/s3_clients.py) and their clean failures (tests/s3_keys.py). */
#include <check.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/sigv4.h"
#include "harness.h"

#define ADMIN "admin:00112233445566778899aabbccddeeff"
#define RO "ro:ffeeddccbbaa99887766554433221100"
#define A "a:0123456789abcdef0123456789abcdef"
#define LISTER "lister:99999999999999999999999999999999"
#define KEYS "# id secret permissions prefixes\n" \
	"admin 00112233445566778899aabbccddeeff read,list,write,delete,admin /\n" \
	"ro    ffeeddccbbaa99887766554433221100 read,list /\n" \
	"a     0123456789abcdef0123456789abcdef read,list,write,delete /datasets/a/\n" \
	"lister 99999999999999999999999999999999 list /\n" \
	"anonymous read,list /public/\n"

static struct vol vols[3];
static struct master m;
static char *dir, *keys;

static void write_file(const char *path, const char *text, mode_t mode)
{
	char *tmp = xasprintf("%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	chmod(tmp, mode);
	ck_assert_int_eq(rename(tmp, path), 0);
	free(tmp);
}

static void up(void)
{
	const char *flags[] = {"-keys", NULL, NULL};
	dir = h_tmpdir();
	keys = xasprintf("%s/keys", dir);
	write_file(keys, KEYS, 0600);
	flags[1] = keys;
	for (int i = 0; i < 3; i++)
		h_vol_start(&vols[i], VOL_MKV);
	memset(&m, 0, sizeof(m));
	h_master_start(&m, vols, 3, flags);
}

static void down(void)
{
	h_http_sign(NULL);
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&vols[i]);
	h_rmrf(dir);
	free(dir), free(keys);
}

/* One request signed by user ("ID:SECRET", or NULL: unsigned). */
static long req(const char *user, const char *method, const char *path, const char *body,
		const char *const *hd, bool follow, struct resp *r)
{
	char *u = xasprintf("%s%s", m.base, path);
	long st;
	h_http_sign(user);
	st = h_http(method, u, body, body ? strlen(body) : 0, hd, follow, r);
	h_http_sign(NULL);
	free(u);
	return st;
}

static long st_of(const char *user, const char *method, const char *path, const char *body)
{
	struct resp r;
	long st = req(user, method, path, body, NULL, false, &r);
	h_resp_free(&r);
	return st;
}

static bool has(const struct resp *r, const char *s)
{
	return r->body.data && strstr(r->body.data, s);
}

/* curl --aws-sigv4 on the native API: PUT, GET following the 302, ?list,
 * DELETE; the answers are the native ones. */
START_TEST(test_native_curl)
{
	struct resp r;
	ck_assert_int_eq(req(ADMIN, "PUT", "/k/one", "hello", NULL, false, &r), 201);
	h_resp_free(&r);
	ck_assert_int_eq(req(ADMIN, "GET", "/k/one", NULL, NULL, true, &r), 200);
	ck_assert(r.body.len == 5 && !memcmp(r.body.data, "hello", 5));
	h_resp_free(&r);
	ck_assert_int_eq(req(ADMIN, "HEAD", "/k/one", NULL, NULL, false, &r), 302);
	h_resp_free(&r);
	ck_assert_int_eq(req(ADMIN, "GET", "/k/?list", NULL, NULL, false, &r), 200);
	ck_assert_str_eq(r.body.data, "{\"next\":\"\",\"keys\":[\"/k/one\"]}");
	h_resp_free(&r);
	ck_assert_int_eq(req(ADMIN, "GET", "/k/?list&limit=1&start=/k/", NULL, NULL, false, &r), 200);
	h_resp_free(&r);
	ck_assert_int_eq(req(ADMIN, "DELETE", "/k/one", NULL, NULL, false, &r), 204);
	h_resp_free(&r);
	ck_assert_int_eq(req(ADMIN, "GET", "/k/one", NULL, NULL, false, &r), 404);
	h_resp_free(&r);
	/* a key with encoded bytes */
	ck_assert_int_eq(st_of(ADMIN, "PUT", "/k/a%20b%2Bc", "x"), 201);
	ck_assert_int_eq(st_of(ADMIN, "DELETE", "/k/a%20b%2Bc", NULL), 204);
}
END_TEST

/* 401 for no or bad credentials, 403 for a key without the permission,
 * each with a one-line reason; a refused write changes nothing. */
START_TEST(test_native_refused)
{
	struct resp r;
	ck_assert_int_eq(st_of(ADMIN, "PUT", "/r/x", "first"), 201);
	ck_assert_int_eq(req(NULL, "PUT", "/r/y", "v", NULL, false, &r), 401);
	ck_assert(has(&r, "unsigned requests may not write /r/y"));
	ck_assert_int_eq((int)(strchr(r.body.data, '\n') - r.body.data), (int)r.body.len - 1);
	h_resp_free(&r);
	ck_assert_int_eq(req("admin:00000000000000000000000000000000", "GET", "/r/x", NULL, NULL,
			     false, &r), 401);
	ck_assert(has(&r, "signature"));
	h_resp_free(&r);
	ck_assert_int_eq(req("nobody:00112233445566778899aabbccddeeff", "GET", "/r/x", NULL, NULL,
			     false, &r), 401);
	ck_assert(has(&r, "Access Key Id"));
	h_resp_free(&r);
	ck_assert_int_eq(req(RO, "PUT", "/r/y", "v", NULL, false, &r), 403);
	ck_assert(has(&r, "key ro may not write /r/y"));
	h_resp_free(&r);
	ck_assert_int_eq(st_of(RO, "REPLACE", "/r/x", "second"), 403);
	ck_assert_int_eq(st_of(RO, "DELETE", "/r/x", NULL), 403);
	ck_assert_int_eq(st_of(RO, "UNLINK", "/r/x", NULL), 403);
	ck_assert_int_eq(st_of(RO, "REBALANCE", "/r/x", NULL), 403);
	ck_assert_int_eq(st_of(A, "DELETE", "/datasets/a/?unlinked", NULL), 403);   /* admin */
	ck_assert_int_eq(st_of(ADMIN, "REBALANCE", "/r/x", NULL), 204);
	/* list without read: the listing, not the blobs or their URLs */
	ck_assert_int_eq(st_of(LISTER, "GET", "/r/?list", NULL), 200);
	ck_assert_int_eq(st_of(LISTER, "GET", "/r/?list&locations", NULL), 403);
	ck_assert_int_eq(st_of(LISTER, "GET", "/r/x", NULL), 403);
	/* nothing changed */
	ck_assert_int_eq(st_of(ADMIN, "GET", "/r/y", NULL), 404);
	ck_assert_int_eq(req(RO, "GET", "/r/x", NULL, NULL, true, &r), 200);
	ck_assert(r.body.len == 5 && !memcmp(r.body.data, "first", 5));
	h_resp_free(&r);
	/* the anonymous line: unsigned reads and lists under /public/ only */
	ck_assert_int_eq(st_of(ADMIN, "PUT", "/public/p", "pub"), 201);
	ck_assert_int_eq(req(NULL, "GET", "/public/p", NULL, NULL, true, &r), 200);
	ck_assert(r.body.len == 3);
	h_resp_free(&r);
	ck_assert_int_eq(st_of(NULL, "GET", "/public/?list", NULL), 200);
	ck_assert_int_eq(st_of(NULL, "GET", "/?list", NULL), 401);
	ck_assert_int_eq(st_of(NULL, "DELETE", "/public/p", NULL), 401);
	ck_assert_int_eq(st_of(NULL, "GET", "/r/x", NULL), 401);
}
END_TEST

/* A key for /datasets/a/ neither reads /datasets/b/x nor lists
 * /datasets/, and nothing of /datasets/b/ shows in what it may list
 * (native and S3). */
START_TEST(test_prefixes)
{
	struct resp r;
	const char *s3h[] = {"x-amz-content-sha256: UNSIGNED-PAYLOAD", NULL};
	ck_assert_int_eq(st_of(ADMIN, "PUT", "/datasets/b/x", "secret"), 201);
	ck_assert_int_eq(st_of(A, "PUT", "/datasets/a/1", "mine"), 201);
	ck_assert_int_eq(st_of(A, "PUT", "/datasets/b/y", "no"), 403);
	ck_assert_int_eq(st_of(A, "GET", "/datasets/b/x", NULL), 403);
	ck_assert_int_eq(st_of(A, "GET", "/datasets/?list", NULL), 403);
	ck_assert_int_eq(st_of(A, "GET", "/?list", NULL), 403);
	ck_assert_int_eq(req(A, "GET", "/datasets/a/?list", NULL, NULL, false, &r), 200);
	ck_assert_str_eq(r.body.data, "{\"next\":\"\",\"keys\":[\"/datasets/a/1\"]}");
	h_resp_free(&r);
	/* S3: the same key, signed with x-amz-content-sha256 */
	ck_assert_int_eq(req(A, "GET", "/datasets/b/x", NULL, s3h, false, &r), 403);
	ck_assert(has(&r, "<Code>AccessDenied</Code>"));
	h_resp_free(&r);
	ck_assert_int_eq(req(A, "GET", "/datasets?list-type=2", NULL, s3h, false, &r), 403);
	ck_assert(has(&r, "<Code>AccessDenied</Code>"));
	h_resp_free(&r);
	ck_assert_int_eq(req(A, "GET", "/datasets?list-type=2&prefix=a/", NULL, s3h, false, &r), 200);
	ck_assert(has(&r, "<Key>a/1</Key>") && !has(&r, "b/x"));
	h_resp_free(&r);
	ck_assert_int_eq(req(A, "GET", "/datasets/a/1", NULL, s3h, false, &r), 200);
	ck_assert(r.body.len == 4 && !memcmp(r.body.data, "mine", 4));
	h_resp_free(&r);
	ck_assert_int_eq(req(A, "GET", "/", NULL, s3h, false, &r), 200);   /* ListBuckets */
	ck_assert(has(&r, "<Name>datasets</Name>") && !has(&r, "<Name>r</Name>"));
	h_resp_free(&r);
	ck_assert_int_eq(req(ADMIN, "GET", "/", NULL, s3h, false, &r), 200);
	ck_assert(has(&r, "<Name>datasets</Name>") && has(&r, "<Name>public</Name>"));
	h_resp_free(&r);
	/* CopyObject needs read of its source */
	{
		const char *cp[] = {s3h[0], "x-amz-copy-source: /datasets/b/x", NULL};
		ck_assert_int_eq(req(A, "PUT", "/datasets/a/copy", NULL, cp, false, &r), 403);
		h_resp_free(&r);
		ck_assert_int_eq(st_of(ADMIN, "GET", "/datasets/a/copy", NULL), 404);
	}
}
END_TEST

/* ---- S3 requests signed here, by hand (an independent signer) ---- */

static void hmac_hex(const unsigned char *k, size_t kl, const char *s, char out[65])
{
	unsigned char d[32];
	unsigned int n = 32;
	HMAC(EVP_sha256(), k, (int)kl, (const unsigned char *)s, strlen(s), d, &n);
	to_hex(d, 32, out);
}

static void sha_hex(const void *p, size_t n, char out[65])
{
	unsigned char d[32];
	EVP_Digest(p, n, d, NULL, EVP_sha256(), NULL);
	to_hex(d, 32, out);
}

struct signer {
	unsigned char k[32];
	char amzdate[17], scope[64], prev[65];
};

/* The head of a PUT of path by admin: signed headers (sorted), its
 * payload mode; the seed signature into g->prev.  method_query: another
 * method and its query ("POST delete"); unsigned: a header line sent
 * unsigned. */
static char *signed_head_as(struct signer *g, const char *method_query, const char *path,
			    const char *payload, const char *extra, size_t clen,
			    const char *unsigned_hdr)
{
	char method[16] = "PUT", query[96] = "";
	sscanf(method_query, "%15s %95s", method, query);
	time_t now = time(NULL);
	char host[64], *creq, *head;
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(g->amzdate, sizeof(g->amzdate), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(g->scope, sizeof(g->scope), "%.8s/us-east-1/s3/aws4_request", g->amzdate);
	snprintf(host, sizeof(host), "127.0.0.1:%d", m.port);
	{
		char date[9];
		snprintf(date, sizeof(date), "%.8s", g->amzdate);
		sigv4_key("00112233445566778899aabbccddeeff", date, "us-east-1", "s3", g->k);
	}
	creq = xasprintf("%s\n%s\n%s%s\nhost:%s\nx-amz-content-sha256:%s\nx-amz-date:%s\n%s%s\n"
			 "host;x-amz-content-sha256;x-amz-date%s\n%s", method,
			 path, query, query[0] && !strchr(query, '=') ? "=" : "", host, payload, g->amzdate, extra,
			 extra[0] ? "\n" : "",
			 extra[0] ? ";x-amz-decoded-content-length" : "", payload);
	sigv4_sign(g->k, g->amzdate, g->scope, creq, g->prev);
	head = xasprintf("%s %s%s%s HTTP/1.1\r\nHost: %s\r\nx-amz-content-sha256: %s\r\n"
			 "x-amz-date: %s\r\n%s%sContent-Length: %zu\r\n%s%s"
			 "Authorization: AWS4-HMAC-SHA256 Credential=admin/%s, SignedHeaders="
			 "host;x-amz-content-sha256;x-amz-date%s, Signature=%s\r\n\r\n", method,
			 path, query[0] ? "?" : "", query, host, payload, g->amzdate,
			 extra[0] ? extra : "", extra[0] ? "\r\n" : "", clen,
			 extra[0] ? "Content-Encoding: aws-chunked\r\n" : "", unsigned_hdr, g->scope,
			 extra[0] ? ";x-amz-decoded-content-length" : "", g->prev);
	free(creq);
	return head;
}

static char *signed_head(struct signer *g, const char *path, const char *payload,
			 const char *extra, size_t clen)
{
	return signed_head_as(g, "PUT", path, payload, extra, clen, "");
}

/* One aws-chunked chunk of data, signed in g's chain (forged: one digit off). */
static void chunk(struct buf *b, struct signer *g, const char *data, size_t n, bool forged)
{
	char h[65], sig[65], *sts;
	sha_hex(data, n, h);
	sts = xasprintf("AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n" SHA256_EMPTY "\n%s", g->amzdate,
			g->scope, g->prev, h);
	hmac_hex(g->k, 32, sts, sig);
	free(sts);
	memcpy(g->prev, sig, 65);
	if (forged)
		sig[10] = sig[10] == '0' ? '1' : '0';
	buf_printf(b, "%zx;chunk-signature=%s\r\n", n, sig);
	buf_append(b, data, n);
	buf_puts(b, "\r\n");
}

/* A streamed upload (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) of two 64 KiB
 * chunks and the final one; forged: the second chunk's signature. */
static long streamed_put(const char *path, char fill, bool forged, struct buf *out)
{
	enum { N = 65536 };
	char *data = xmalloc(N), *head, dl[64];
	struct signer g;
	struct buf body = {0}, all = {0};
	long st;
	memset(data, fill, N);
	snprintf(dl, sizeof(dl), "x-amz-decoded-content-length:%d", 2 * N);
	/* the body's length: sized first, signed once the head is (chain order) */
	for (int pass = 0; pass < 2; pass++) {
		head = signed_head(&g, path, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", dl, body.len);
		body.len = 0;
		chunk(&body, &g, data, N, false);
		chunk(&body, &g, data, N, forged);
		chunk(&body, &g, "", 0, false);
		if (pass == 0)
			free(head);
	}
	buf_puts(&all, head);
	buf_append(&all, body.data, body.len);
	st = h_raw(m.port, all.data, all.len, out, 20000);
	free(head), free(data);
	buf_free(&body), buf_free(&all);
	return st;
}

/* An aws-chunked upload whose chunk signature is forged mid-body fails,
 * and nothing is visible afterwards: a new key stays absent, an old value
 * stays. */
START_TEST(test_forged_chunk)
{
	struct buf out = {0};
	struct resp r;
	ck_assert_int_eq(streamed_put("/chunks/good", 'g', false, &out), 200);
	buf_free(&out);
	ck_assert_int_eq(req(ADMIN, "GET", "/chunks/good", NULL, NULL, true, &r), 200);
	ck_assert_int_eq(r.body.len, 131072);
	ck_assert(r.body.data[0] == 'g' && r.body.data[131071] == 'g');
	h_resp_free(&r);
	ck_assert_int_eq(streamed_put("/chunks/new", 'n', true, &out), 403);
	ck_assert_msg(out.data && strstr(out.data, "<Code>SignatureDoesNotMatch</Code>"), "%s",
		      out.data ? out.data : "");
	buf_free(&out);
	ck_assert_int_eq(st_of(ADMIN, "GET", "/chunks/new", NULL), 404);
	ck_assert_int_eq(streamed_put("/chunks/good", 'x', true, &out), 403);
	buf_free(&out);
	ck_assert_int_eq(req(ADMIN, "GET", "/chunks/good", NULL, NULL, true, &r), 200);
	ck_assert(r.body.len == 131072 && r.body.data[5] == 'g');
	h_resp_free(&r);
	ck_assert_int_eq(req(ADMIN, "GET", "/chunks/?list", NULL, NULL, false, &r), 200);
	ck_assert_str_eq(r.body.data, "{\"next\":\"\",\"keys\":[\"/chunks/good\"]}");
	h_resp_free(&r);
}
END_TEST

/* x-amz-content-sha256 is checked against the body before the answer. */
START_TEST(test_body_hash)
{
	struct signer g;
	char h[65], *head, *all;
	struct buf out = {0};
	sha_hex("right", 5, h);
	head = signed_head(&g, "/hash/k", h, "", 5);
	all = xasprintf("%sright", head);
	ck_assert_int_eq(h_raw(m.port, all, strlen(all), &out, 20000), 200);
	buf_free(&out);
	free(head), free(all);
	head = signed_head(&g, "/hash/k2", h, "", 5);
	all = xasprintf("%swrong", head);
	ck_assert_int_eq(h_raw(m.port, all, strlen(all), &out, 20000), 400);
	ck_assert(strstr(out.data, "<Code>XAmzContentSHA256Mismatch</Code>"));
	buf_free(&out);
	free(head), free(all);
	ck_assert_int_eq(st_of(ADMIN, "GET", "/hash/k2", NULL), 404);
	ck_assert_int_eq(st_of(ADMIN, "HEAD", "/hash/k", NULL), 302);
}
END_TEST

/* Finding 3: a hex x-amz-content-sha256 covers the bytes
 * stored, however the body is framed.  A captured PUT of "" (boto3's
 * put_object(Body=b"")) replayed with an unsigned Content-Encoding:
 * aws-chunked stores nothing else; a right hash with aws-chunked framing
 * is taken. */
START_TEST(test_body_hash_chunked)
{
	struct signer g;
	char h[65], *head, *all;
	struct buf out = {0};
	const char *evil = "5\r\nevil!\r\n0\r\n\r\n", *right = "5\r\nright\r\n0\r\n\r\n";
	head = signed_head_as(&g, "PUT", "/hash/empty", SHA256_EMPTY, "", strlen(evil),
			      "Content-Encoding: aws-chunked\r\n");
	all = xasprintf("%s%s", head, evil);
	ck_assert_int_eq(h_raw(m.port, all, strlen(all), &out, 20000), 400);
	ck_assert_msg(strstr(out.data, "<Code>XAmzContentSHA256Mismatch</Code>"), "%s", out.data);
	buf_free(&out);
	free(head), free(all);
	ck_assert_int_eq(st_of(ADMIN, "GET", "/hash/empty", NULL), 404);
	sha_hex("right", 5, h);
	head = signed_head(&g, "/hash/chunked", h, "x-amz-decoded-content-length:5", strlen(right));
	all = xasprintf("%s%s", head, right);
	ck_assert_int_eq(h_raw(m.port, all, strlen(all), &out, 20000), 200);
	buf_free(&out);
	free(head), free(all);
	{
		struct resp r;
		ck_assert_int_eq(req(ADMIN, "GET", "/hash/chunked", NULL, NULL, true, &r), 200);
		ck_assert(r.body.len == 5 && !memcmp(r.body.data, "right", 5));
		h_resp_free(&r);
	}
}
END_TEST

/* Finding 8: the aws-chunked body of a DeleteObjects is chunk-verified
 * like a PutObject's: a forged chunk deletes nothing. */
START_TEST(test_delete_chunked)
{
	const char *doc = "<Delete><Object><Key>k</Key></Object></Delete>";
	for (int forged = 1; forged >= 0; forged--) {
		struct signer g;
		struct buf body = {0}, all = {0}, out = {0};
		char dl[64], *head = NULL;
		ck_assert_int_eq(st_of(ADMIN, "PUT", "/del/k", "v"), forged ? 201 : 403);
		snprintf(dl, sizeof(dl), "x-amz-decoded-content-length:%zu", strlen(doc));
		for (int pass = 0; pass < 2; pass++) {   /* sized, then signed (streamed_put) */
			free(head);
			head = signed_head_as(&g, "POST delete", "/del", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
					      dl, body.len, "");
			body.len = 0;
			chunk(&body, &g, doc, strlen(doc), forged);
			chunk(&body, &g, "", 0, false);
		}
		buf_puts(&all, head);
		buf_append(&all, body.data, body.len);
		ck_assert_int_eq(h_raw(m.port, all.data, all.len, &out, 20000), forged ? 403 : 200);
		ck_assert_msg(strstr(out.data, forged ? "<Code>SignatureDoesNotMatch</Code>"
						      : "<Deleted><Key>k</Key></Deleted>"), "%s", out.data);
		ck_assert_int_eq(st_of(ADMIN, "GET", "/del/k", NULL), forged ? 302 : 404);
		free(head);
		buf_free(&body), buf_free(&all), buf_free(&out);
	}
}
END_TEST

/* A raw request: a head made by signed_head_as and body; its status,
 * the answer into out. */
static long send_signed(const char *method_query, const char *path, const char *body,
			struct buf *out)
{
	struct signer g;
	char h[65], *head, *all;
	long st;
	sha_hex(body, strlen(body), h);
	head = signed_head_as(&g, method_query, path, h, "", strlen(body), "");
	all = xasprintf("%s%s", head, body);
	st = h_raw(m.port, all, strlen(all), out, 20000);
	free(head), free(all);
	return st;
}

/* Finding 8, the other body: CompleteMultipartUpload's aws-chunked XML
 * is chunk-verified: a forged chunk completes nothing. */
START_TEST(test_complete_chunked)
{
	struct buf out = {0};
	char id[64], q[96], etag[80], doc[256], dl[64], *p;
	ck_assert_int_eq(send_signed("POST uploads", "/mpu/obj", "", &out), 200);
	ck_assert_ptr_nonnull(p = strstr(out.data, "<UploadId>"));
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(p + 10, "<"), p + 10);
	buf_free(&out);
	snprintf(q, sizeof(q), "PUT partNumber=1&uploadId=%s", id);
	ck_assert_int_eq(send_signed(q, "/mpu/obj", "part", &out), 200);
	ck_assert_ptr_nonnull(p = strstr(out.data, "ETag: "));
	snprintf(etag, sizeof(etag), "%.*s", (int)strcspn(p + 6, "\r"), p + 6);
	buf_free(&out);
	snprintf(doc, sizeof(doc), "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
		 "<ETag>%s</ETag></Part></CompleteMultipartUpload>", etag);
	snprintf(dl, sizeof(dl), "x-amz-decoded-content-length:%zu", strlen(doc));
	snprintf(q, sizeof(q), "POST uploadId=%s", id);
	for (int forged = 1; forged >= 0; forged--) {
		struct signer g;
		struct buf body = {0}, all = {0};
		char *head = NULL;
		for (int pass = 0; pass < 2; pass++) {   /* sized, then signed (streamed_put) */
			free(head);
			head = signed_head_as(&g, q, "/mpu/obj", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", dl,
					      body.len, "");
			body.len = 0;
			chunk(&body, &g, doc, strlen(doc), forged);
			chunk(&body, &g, "", 0, false);
		}
		buf_puts(&all, head);
		buf_append(&all, body.data, body.len);
		ck_assert_int_eq(h_raw(m.port, all.data, all.len, &out, 20000), forged ? 403 : 200);
		ck_assert_msg(strstr(out.data, forged ? "<Code>SignatureDoesNotMatch</Code>"
						      : "<CompleteMultipartUploadResult"), "%s", out.data);
		ck_assert_int_eq(st_of(ADMIN, "GET", "/mpu/obj", NULL), forged ? 404 : 302);
		free(head);
		buf_free(&body), buf_free(&all), buf_free(&out);
	}
}
END_TEST

/* The master's log holds line (it is written after the state it names). */
static bool log_has(const char *line)
{
	for (int i = 0; i < 2000; i++) {
		char *l = h_read_file(m.log);
		bool found = strstr(l, line) != NULL;
		free(l);
		if (found)
			return true;
		usleep(10000);
	}
	return false;
}

/* SIGHUP loads the file again; a bad file is logged and the old keys stay. */
START_TEST(test_reload)
{
	ck_assert_int_eq(st_of("new:abcdefabcdefabcdefabcdefabcdefab", "PUT", "/n/x", "v"), 401);
	write_file(keys, KEYS "new abcdefabcdefabcdefabcdefabcdefab write /n/\n", 0600);
	kill(m.pid, SIGHUP);
	ck_assert(log_has("reloaded: 5 keys and an anonymous line"));
	ck_assert_int_eq(st_of("new:abcdefabcdefabcdefabcdefabcdefab", "PUT", "/n/x", "v"), 201);
	write_file(keys, "new short write /n/\n", 0600);
	kill(m.pid, SIGHUP);
	ck_assert(log_has("secret shorter than 16 bytes"));
	ck_assert(log_has("the keys loaded before stay in force"));
	ck_assert_int_eq(st_of("new:abcdefabcdefabcdefabcdefabcdefab", "PUT", "/n/y", "v"), 201);
	ck_assert_int_eq(st_of(ADMIN, "GET", "/n/?list", NULL), 200);
	write_file(keys, KEYS, 0600);
	kill(m.pid, SIGHUP);
	ck_assert(log_has("reloaded: 4 keys"));
	ck_assert_int_eq(st_of("new:abcdefabcdefabcdefabcdefabcdefab", "PUT", "/n/z", "v"), 401);
}
END_TEST

/* A bad file at start: exit non-zero, the reason named.  A file others
 * may read: a warning. */
START_TEST(test_start)
{
	static const struct {
		const char *text, *why;
		mode_t mode;
	} cases[] = {
		{"k short read /\n", "keys:1: secret shorter than 16 bytes", 0600},
		{"k 0123456789abcdef0 reed /\n", "keys:1: permissions are read, list", 0600},
		{"k 0123456789abcdef0 read\n", "want: ID SECRET PERMISSIONS PREFIX", 0600},
		{NULL, "-keys: open() ", 0},
	};
	char *bin = h_bin("mkv"), *d = h_tmpdir(), *kf = xasprintf("%s/keys", d);
	char *log = xasprintf("%s/log", d), *db = xasprintf("%s/db", d);
	char *vol = h_volumes_arg(vols, 3), *out;
	int st;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[] = {bin, "-volumes", vol, "-db", db, "-port", "1", "-keys",
				cases[i].text ? kf : "/nonexistent/keys", "server", NULL};
		if (cases[i].text)
			write_file(kf, cases[i].text, cases[i].mode);
		unlink(log);
		waitpid(h_spawn(argv, log), &st, 0);
		out = h_read_file(log);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s: status %d", cases[i].why, st);
		ck_assert_msg(strstr(out, cases[i].why), "want \"%s\" in:\n%s", cases[i].why, out);
		free(out);
	}
	{	/* group-readable: a warning, and the master runs */
		char port[16];
		char *argv[] = {bin, "-volumes", vol, "-db", db, "-port", port, "-keys", kf, "server", NULL};
		pid_t pid;
		snprintf(port, sizeof(port), "%d", h_free_port());
		write_file(kf, KEYS, 0644);
		unlink(log);
		pid = h_spawn(argv, log);
		for (int t = 0; t < 2000; t++) {
			out = h_read_file(log);
			if (strstr(out, "keys and an anonymous line"))
				break;
			free(out);
			out = NULL;
			usleep(10000);
		}
		ck_assert_ptr_nonnull(out);
		ck_assert_msg(strstr(out, "is readable by others (mode 644): chmod 600 it"), "%s", out);
		free(out);
		kill(pid, SIGTERM);
		waitpid(pid, &st, 0);
	}
	h_rmrf(d);
	free(bin), free(d), free(kf), free(log), free(db), free(vol);
}
END_TEST

/* mkv's own commands sign with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY;
 * their output goes to run_log (NULL: the test's). */
static const char *run_log;
static int mkv_run(char **args)
{
	char *bin = h_bin("mkv"), *vol = h_volumes_arg(vols, 3), *argv[16], mp[32];
	int n = 0, st;
	snprintf(mp, sizeof(mp), "127.0.0.1:%d", m.port);
	argv[n++] = bin;
	if (strcmp(args[0], "put") && strcmp(args[0], "get")) {
		argv[n++] = "-volumes";
		argv[n++] = vol;
	}
	argv[n++] = "-master";
	argv[n++] = mp;
	for (int i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	waitpid(h_spawn(argv, run_log), &st, 0);
	free(bin), free(vol);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_of(const char *s, const char *what)
{
	int n = 0;
	for (; (s = strstr(s, what)); s++)
		n++;
	return n;
}

START_TEST(test_ops)
{
	char *src = h_tmpdir(), *dst = h_tmpdir(), *f = xasprintf("%s/file", src);
	char *back = xasprintf("%s/file", dst), *got, *out, *name2 = xasprintf("file2-%0150d", 2);
	char *f2 = xasprintf("%s/%s", src, name2), *said;
	char *log = xasprintf("%s.log", dst);
	write_file(f, "a file", 0644);
	setenv("AWS_ACCESS_KEY_ID", "admin", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "00112233445566778899aabbccddeeff", 1);
	ck_assert_int_eq(mkv_run((char *[]){"put", src, "/ops", NULL}), 0);
	ck_assert_int_eq(mkv_run((char *[]){"get", "/ops", dst, NULL}), 0);
	got = h_read_file(back);
	ck_assert_str_eq(got, "a file");
	free(got);
	ck_assert_int_eq(mkv_run((char *[]){"verify", NULL}), 0);
	ck_assert_int_eq(mkv_run((char *[]){"gc", NULL}), 0);
	ck_assert_int_eq(mkv_run((char *[]){"rebalance", NULL}), 0);
	unlink(back);
	unsetenv("AWS_ACCESS_KEY_ID");   /* half a key: which half is missing, exit 1 */
	run_log = log;
	ck_assert_int_eq(mkv_run((char *[]){"get", "/ops", dst, NULL}), 1);
	out = h_read_file(log);
	ck_assert_msg(strstr(out, "mkv: AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"),
		      "%s", out);
	free(out);
	unlink(log);
	unsetenv("AWS_SECRET_ACCESS_KEY");   /* unsigned: 401, exit 1 */
	ck_assert_int_eq(mkv_run((char *[]){"get", "/ops", dst, NULL}), 1);
	ck_assert_int_eq(access(back, F_OK), -1);
	/* each refusal carries the master's reason, whole (here near 300
	 * bytes), and once what to set */
	write_file(f2, "another", 0644);
	ck_assert_int_eq(mkv_run((char *[]){"put", src, "/ops2", NULL}), 1);
	run_log = NULL;
	out = h_read_file(log);
	said = xasprintf("/%s: PUT /ops2/%s failed: 401 unsigned requests may not write /ops2/%s: "
			 "sign with AWS Signature Version 4 (curl --aws-sigv4 \"aws:amz:us-east-1:s3\" "
			 "--user ID:SECRET)", name2, name2, name2);
	ck_assert_msg(strstr(out, "get: GET ") && strstr(out, " failed: 401 unsigned requests may not list and read /ops/") &&
		      strstr(out, "/file: PUT /ops2/file failed: 401 unsigned requests may not write /ops2/file") &&
		      strstr(out, said) &&
		      count_of(out, "mkv: the master refused the key: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are one of its -keys, with the permission\n") == 2, "%s", out);
	free(out);
	free(said);
	free(name2);
	h_rmrf(src), h_rmrf(dst);
	unlink(log);
	free(src), free(dst), free(f), free(back), free(f2), free(log);
}
END_TEST

/* curl --aws-sigv4 (7.88) signs the path as sent: a key holding a
 * sub-delimiter or '+' unencoded ("/k/x+y(1)") must verify too.  The
 * raw-path retry is skipped when the path has no '%' and no query,
 * though its canonical form ('+' as %2B, '(' as %28) differs then. */
START_TEST(test_curl_reserved_path)
{
	static const char *const keys[] = {"/k/x+y", "/k/(p)", "/k/a:b", "/k/a;b=c", "/k/x!y*'@,$&"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		ck_assert_msg(st_of(ADMIN, "PUT", keys[i], "v") == 201, "curl PUT %s", keys[i]);
		ck_assert_msg(st_of(ADMIN, "HEAD", keys[i], NULL) == 302, "curl HEAD %s", keys[i]);
		ck_assert_msg(st_of(ADMIN, "DELETE", keys[i], NULL) == 204, "curl DELETE %s", keys[i]);
	}
}
END_TEST

/* -v logs each request's line to the master's log (the journal): the
 * signatures in its query must be written as the access log writes them
 * ("…"), or the log holds live presigned links. */
START_TEST(test_verbose_log_redacted)
{
	const char *flags[] = {"-keys", keys, "-v", NULL};
	struct master v = {0};
	char *u, *l;
	h_master_start(&v, vols, 3, flags);
	u = xasprintf("%s/k/x?AWSAccessKeyId=admin&Signature=SECRETV2SIG&Expires=1", v.base);
	ck_assert_int_ne(h_status("GET", u), 200);
	free(u);
	u = xasprintf("%s/k/x?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=SECRETV4SIG", v.base);
	ck_assert_int_ne(h_status("GET", u), 200);
	free(u);
	h_master_down(&v);   /* its log is whole */
	l = h_read_file(v.log);
	ck_assert_msg(strstr(l, "/k/x?") != NULL, "-v logged no request line:\n%s", l);
	ck_assert_msg(!strstr(l, "SECRETV2SIG") && !strstr(l, "SECRETV4SIG"),
		      "-v logged a signature:\n%s", l);
	free(l);
	h_master_stop(&v);
}
END_TEST

/* A python script against this master, with env (NULL-ended). */
static void script(const char *name, char *const *env)
{
	char *py = h_root(name), *d = h_tmpdir(), *log = xasprintf("%s.log", d);
	char *argv[] = {"/usr/bin/python3", py, m.base, d, NULL};
	pid_t pid;
	int st;
	for (int i = 0; env[i]; i++)
		putenv(env[i]);
	pid = h_spawn(argv, log);
	waitpid(pid, &st, 0);
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		char *out = h_read_file(log);
		size_t n = strlen(out);
		ck_abort_msg("%s failed (%s):\n%s", name, log, out + (n > 3000 ? n - 3000 : 0));
	}
	unlink(log);
	h_rmrf(d);
	free(py), free(d), free(log);
}

/* The S3 suite (boto3, aws, rclone, s3cmd) with a right key. */
START_TEST(test_clients)
{
	script("tests/s3_clients.py",
	       (char *[]){"S3_KEY_ID=admin", "S3_SECRET=00112233445566778899aabbccddeeff", NULL});
}
END_TEST

/* Each client with a wrong secret, an unknown key, a read-only key
 * writing; presigned GETs. */
START_TEST(test_clients_refused)
{
	script("tests/s3_keys.py", (char *[]){"S3_ADMIN=" ADMIN, "S3_RO=" RO, NULL});
}
END_TEST

/* ---- refusals: S3's authorize for each operation (docs/testing.md) ---- */

static const char *const S3H[] = {"x-amz-content-sha256: UNSIGNED-PAYLOAD", NULL};

static long s3_st(const char *user, const char *method, const char *path, const char *body,
		  const char *const *hd, struct resp *r)
{
	return req(user, method, path, body, hd ? hd : S3H, false, r);
}

/* HeadObject is checked as GetObject: a wrong secret or an unknown key
 * learns nothing of the object (no 200, no length); a key without read
 * neither. */
START_TEST(test_s3_head_refused)
{
	struct resp r;
	char *cl;
	ck_assert_int_eq(st_of(ADMIN, "PUT", "/hd/obj", "twelve bytes"), 201);
	ck_assert_int_eq(s3_st(RO, "HEAD", "/hd/obj", NULL, NULL, &r), 200);
	cl = h_header(&r, "Content-Length");
	ck_assert_str_eq(cl, "12");
	free(cl);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st("admin:00000000000000000000000000000000", "HEAD", "/hd/obj", NULL,
			       NULL, &r), 403);
	cl = h_header(&r, "Content-Length");
	ck_assert(!cl || strcmp(cl, "12"));
	free(cl);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st("nobody:00112233445566778899aabbccddeeff", "HEAD", "/hd/obj", NULL,
			       NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(LISTER, "HEAD", "/hd/obj", NULL, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(A, "HEAD", "/hd/obj", NULL, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(A, "HEAD", "/hd", NULL, NULL, &r), 403);   /* HeadBucket */
	h_resp_free(&r);
}
END_TEST

/* A key for /datasets/a/ reads neither bucket datasets' key "a" (the
 * path /datasets/a: its prefix, but for the last '/') nor
 * /datasets/ab/x; on both APIs, GET and HEAD. */
START_TEST(test_prefix_whole)
{
	struct resp r;
	static const char *const paths[] = {"/datasets/a", "/datasets/ab/x"};
	ck_assert_int_eq(st_of(ADMIN, "PUT", "/datasets/a", "bucket datasets, key a"), 201);
	ck_assert_int_eq(st_of(ADMIN, "PUT", "/datasets/ab/x", "not a's"), 201);
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(s3_st(A, "GET", paths[i], NULL, NULL, &r) == 403 &&
			      has(&r, "<Code>AccessDenied</Code>"), "S3 GET %s: %ld", paths[i],
			      r.status);
		h_resp_free(&r);
		ck_assert_int_eq(s3_st(A, "HEAD", paths[i], NULL, NULL, &r), 403);
		h_resp_free(&r);
		ck_assert_int_eq(st_of(A, "GET", paths[i], NULL), 403);
		ck_assert_int_eq(st_of(A, "HEAD", paths[i], NULL), 403);
		ck_assert_int_eq(st_of(ADMIN, "GET", paths[i], NULL), 302);
	}
	ck_assert_int_eq(st_of(A, "GET", "/datasets/ab/?list", NULL), 403);
	ck_assert_int_eq(s3_st(A, "GET", "/datasets?list-type=2&prefix=ab/", NULL, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(A, "DELETE", "/datasets/ab/x", NULL, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(A, "PUT", "/datasets/ab/y", "no", NULL, &r), 403);
	h_resp_free(&r);
}
END_TEST

/* Each S3 operation refused to a key without its permission, and nothing
 * changed: PutObject, DeleteObject, CopyObject, multipart, CreateBucket,
 * DeleteBucket, DeleteObjects, listings; a list-only key reads nothing. */
START_TEST(test_s3_ops_refused)
{
	struct resp r;
	const char *cp[] = {S3H[0], "x-amz-copy-source: /ops/x", NULL};
	const char *del = "<Delete><Object><Key>x</Key></Object></Delete>";
	ck_assert_int_eq(st_of(ADMIN, "PUT", "/ops/x", "kept"), 201);
	ck_assert_int_eq(s3_st(ADMIN, "PUT", "/emptyb", NULL, NULL, &r), 200);   /* CreateBucket */
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(RO, "PUT", "/ops/x", "changed", NULL, &r), 403);
	ck_assert(has(&r, "<Code>AccessDenied</Code>"));
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(RO, "DELETE", "/ops/x", NULL, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(RO, "PUT", "/ops/y", NULL, cp, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(RO, "POST", "/ops/y?uploads", NULL, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(RO, "PUT", "/newbucket", NULL, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(RO, "DELETE", "/emptyb", NULL, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(RO, "POST", "/ops?delete", del, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(LISTER, "GET", "/ops/x", NULL, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(A, "GET", "/ops?list-type=2", NULL, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(A, "GET", "/ops?uploads", NULL, NULL, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(s3_st(A, "GET", "/", NULL, NULL, &r), 200);   /* ListBuckets: not ops */
	ck_assert(!has(&r, "<Name>ops</Name>") && !has(&r, "<Name>emptyb</Name>"));
	h_resp_free(&r);
	/* A may delete in its own bucket, not ops' x: the one Error */
	ck_assert_int_eq(st_of(ADMIN, "PUT", "/datasets/a/d", "d"), 201);
	{
		const char *mine = "<Delete><Object><Key>a/d</Key></Object>"
				   "<Object><Key>b/x</Key></Object></Delete>";
		ck_assert_int_eq(s3_st(A, "POST", "/datasets?delete", mine, NULL, &r), 200);
		ck_assert(has(&r, "<Deleted><Key>a/d</Key>") && has(&r, "<Code>AccessDenied</Code>"));
		h_resp_free(&r);
	}
	/* a wrong secret: S3's code for it */
	ck_assert_int_eq(s3_st("ro:00000000000000000000000000000000", "GET", "/ops/x", NULL, NULL,
			       &r), 403);
	ck_assert(has(&r, "<Code>SignatureDoesNotMatch</Code>"));
	h_resp_free(&r);
	/* DeleteObjects whose body is not the one x-amz-content-sha256 signed */
	{
		char h[65], hd[100];
		const char *sh[] = {hd, NULL};
		sha_hex("another body", 12, h);
		snprintf(hd, sizeof(hd), "x-amz-content-sha256: %s", h);
		ck_assert_int_eq(s3_st(ADMIN, "POST", "/ops?delete", del, sh, &r), 400);
		ck_assert(has(&r, "<Code>XAmzContentSHA256Mismatch</Code>"));
		h_resp_free(&r);
	}
	/* nothing changed */
	ck_assert_int_eq(req(ADMIN, "GET", "/ops/x", NULL, NULL, true, &r), 200);
	ck_assert(r.body.len == 4 && !memcmp(r.body.data, "kept", 4));
	h_resp_free(&r);
	ck_assert_int_eq(st_of(ADMIN, "GET", "/ops/y", NULL), 404);
	ck_assert_int_eq(s3_st(ADMIN, "GET", "/", NULL, NULL, &r), 200);
	ck_assert(has(&r, "<Name>emptyb</Name>") && !has(&r, "<Name>newbucket</Name>"));
	h_resp_free(&r);
}
END_TEST

/* signed requests edited without the secret
 * (tests/s3_attacks.py), one attack a test. */
static void attack(const char *name)
{
	char *a = xasprintf("ATTACK=%s", name);   /* putenv keeps it */
	script("tests/s3_attacks.py", (char *[]){"S3_ADMIN=" ADMIN, a, NULL});
}

/* A presigned UploadPart or Abort link, its parameters' names
 * percent-encoded, must not become a PutObject or DeleteObject. */
START_TEST(test_attack_renamed_params)
{
	attack("renamed_params");
}
END_TEST

/* A presigned listing's "%2B" made "+" must not list another prefix. */
START_TEST(test_attack_plus_in_query)
{
	attack("plus_in_query");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("keys");
	TCase *tc = tcase_create("keys");
	SRunner *sr;
	int failed;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	signal(SIGPIPE, SIG_IGN);
	tcase_set_timeout(tc, 600);
	tcase_add_unchecked_fixture(tc, up, down);
	tcase_add_test(tc, test_native_curl);
	tcase_add_test(tc, test_native_refused);
	tcase_add_test(tc, test_prefixes);
	tcase_add_test(tc, test_forged_chunk);
	tcase_add_test(tc, test_body_hash);
	tcase_add_test(tc, test_body_hash_chunked);
	tcase_add_test(tc, test_delete_chunked);
	tcase_add_test(tc, test_complete_chunked);
	tcase_add_test(tc, test_reload);
	tcase_add_test(tc, test_start);
	tcase_add_test(tc, test_ops);
	suite_add_tcase(s, tc);
	tc = tcase_create("refusals");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, up, down);
	tcase_add_test(tc, test_s3_head_refused);
	tcase_add_test(tc, test_prefix_whole);
	tcase_add_test(tc, test_s3_ops_refused);
	suite_add_tcase(s, tc);
	tc = tcase_create("clients");   /* the real S3 clients: minutes */
	tcase_set_timeout(tc, 900);
	tcase_add_unchecked_fixture(tc, up, down);
	tcase_add_test(tc, test_clients_refused);
	tcase_add_test(tc, test_clients);
	suite_add_tcase(s, tc);
	tc = tcase_create("attacks");
	tcase_set_timeout(tc, 600);
	tcase_add_unchecked_fixture(tc, up, down);
	tcase_add_test(tc, test_attack_renamed_params);
	tcase_add_test(tc, test_attack_plus_in_query);
	tcase_add_test(tc, test_curl_reserved_path);
	tcase_add_test(tc, test_verbose_log_redacted);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
