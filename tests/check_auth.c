/* check_auth.c -- keys (common/keys.h) and signatures (common/sigv4.h)
 * with no server: AWS's published examples for Signature Version 4 (the
 * Authorization header's GET and PUT, the chunked upload's seed and chunk
 * signatures, a presigned URL) and Version 2, then the keys file's lines,
 * good and bad, and what a key may do. */
#include <check.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../common/keys.h"
#include "../common/sigv4.h"

#define AKID "AKIAIOSFODNN7EXAMPLE"
#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T20130524 1369353600

/* a request's headers: "name", "value" pairs, NULL-ended */
static const char *hdr(void *cls, const char *name)
{
	for (const char *const *h = cls; *h; h += 2)
		if (!strcasecmp(h[0], name))
			return h[1];
	return NULL;
}

static void each(void *cls, void (*fn)(void *, const char *, const char *), void *arg)
{
	for (const char *const *h = cls; *h; h += 2)
		fn(arg, h[0], h[1]);
}

/* The test keys; kept to the end, since results point into them. */
static struct keyring *ring(void)
{
	static struct keyring *k;
	char *why = NULL;
	if (k)
		return k;
	k = keyring_parse(AKID " " SECRET " read,list,write /\n"
					  "anonymous read /public/\n", "test", &why);
	ck_assert_msg(k, "%s", why ? why : "");
	return k;
}

static void check(const char *method, const char *path, const char *query, const char **h,
		  int64_t now, struct sig_result *out)
{
	struct keyring *k = ring();
	struct sig_req r = {method, path, query, hdr, each, (void *)h, now};
	sig_check(k, &r, out);
}

/* "Example: GET Object" */
START_TEST(test_get_object)
{
	const char *h[] = {"Host", "examplebucket.s3.amazonaws.com",
		"Authorization", "AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/s3/aws4_request,"
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
		"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		"Range", "bytes=0-9", "x-amz-content-sha256", SHA256_EMPTY,
		"x-amz-date", "20130524T000000Z", NULL};
	struct sig_result s;
	check("GET", "/test.txt", NULL, h, T20130524, &s);
	ck_assert_msg(s.st == SIG_OK, "%d %s", s.st, s.why);
	ck_assert_str_eq(s.key->id, AKID);
	ck_assert_int_eq(s.payload, PAYLOAD_SHA256);
	/* one byte off, anywhere: no */
	h[3] = "AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/s3/aws4_request,"
	       "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
	       "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb42";
	check("GET", "/test.txt", NULL, h, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_MISMATCH);
	h[5] = "bytes=0-8";
	h[3] = "AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/s3/aws4_request,"
	       "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
	       "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41";
	check("GET", "/test.txt", NULL, h, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_MISMATCH);
	h[5] = "bytes=0-9";
	/* 15 minutes either way, no more */
	check("GET", "/test.txt", NULL, h, T20130524 + 900, &s);
	ck_assert_int_eq(s.st, SIG_OK);
	check("GET", "/test.txt", NULL, h, T20130524 - 900, &s);
	ck_assert_int_eq(s.st, SIG_OK);
	check("GET", "/test.txt", NULL, h, T20130524 + 901, &s);
	ck_assert_int_eq(s.st, SIG_SKEWED);
	check("GET", "/test.txt", NULL, h, T20130524 - 901, &s);
	ck_assert_int_eq(s.st, SIG_SKEWED);
	/* an unknown key, a malformed header */
	h[3] = "AWS4-HMAC-SHA256 Credential=NOSUCHKEY/20130524/us-east-1/s3/aws4_request,"
	       "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
	       "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41";
	check("GET", "/test.txt", NULL, h, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_UNKNOWN_KEY);
	h[3] = "AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/s3, Signature=00";
	check("GET", "/test.txt", NULL, h, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_MALFORMED);
}
END_TEST

/* "Example: PUT Object": a path that must be encoded, a hex body hash */
START_TEST(test_put_object)
{
	const char *h[] = {"Host", "examplebucket.s3.amazonaws.com",
		"Date", "Fri, 24 May 2013 00:00:00 GMT",
		"Authorization", "AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/s3/aws4_request,"
		"SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"
		"Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
		"x-amz-date", "20130524T000000Z", "x-amz-storage-class", "REDUCED_REDUNDANCY",
		"x-amz-content-sha256", "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
		NULL};
	struct sig_result s;
	check("PUT", "/test%24file.text", NULL, h, T20130524, &s);
	ck_assert_msg(s.st == SIG_OK, "%d %s", s.st, s.why);
	ck_assert_int_eq(s.payload, PAYLOAD_SHA256);
	ck_assert_str_eq(s.sha256, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
	check("PUT", "/test$file.text", NULL, h, T20130524, &s);   /* the same, unencoded */
	ck_assert_int_eq(s.st, SIG_OK);
}
END_TEST

/* "Example: PUT Object" of the chunked upload: the seed signature, then
 * 64 KiB, 1 KiB and the empty final chunk, each chained to the last. */
START_TEST(test_chunked)
{
	const char *h[] = {"Host", "s3.amazonaws.com", "x-amz-date", "20130524T000000Z",
		"x-amz-storage-class", "REDUCED_REDUNDANCY",
		"Authorization", "AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/s3/aws4_request,"
		"SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
		"x-amz-decoded-content-length;x-amz-storage-class,"
		"Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
		"x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
		"Content-Encoding", "aws-chunked", "x-amz-decoded-content-length", "66560",
		"Content-Length", "66824", NULL};
	static const char *const sigs[] = {
		"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
		"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
		"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"};
	size_t sizes[] = {65536, 1024, 0};
	char *a = malloc(65536);
	struct sig_result s, forged;
	memset(a, 'a', 65536);
	check("PUT", "/examplebucket/chunkObject.txt", NULL, h, T20130524, &s);
	ck_assert_msg(s.st == SIG_OK, "%d %s", s.st, s.why);
	ck_assert_int_eq(s.payload, PAYLOAD_CHUNKS);
	ck_assert_str_eq(s.prev, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");
	for (int i = 0; i < 3; i++) {
		unsigned char d[32];
		struct sha256 *x = sha256_new();
		sha256_update(x, a, sizes[i]);
		sha256_final(x, d);
		forged = s;
		ck_assert(!sig_chunk(&forged, d, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5498", 64));
		ck_assert_msg(sig_chunk(&s, d, sigs[i], 64), "chunk %d", i);
	}
	free(a);
}
END_TEST

/* "Example: Presigned URL" (query string authentication) */
START_TEST(test_presigned)
{
	const char *h[] = {"Host", "examplebucket.s3.amazonaws.com", NULL};
	const char *q = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" AKID
			"%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z"
			"&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature="
			"aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
	struct sig_result s;
	check("GET", "/test.txt", q, h, T20130524 + 3600, &s);
	ck_assert_msg(s.st == SIG_OK, "%d %s", s.st, s.why);
	ck_assert_int_eq(s.payload, PAYLOAD_UNSIGNED);
	check("GET", "/test.txt", q, h, T20130524 + 86401, &s);
	ck_assert_int_eq(s.st, SIG_EXPIRED);
	check("GET", "/test.tx", q, h, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_MISMATCH);
	check("GET", "/test.txt", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=00", h,
	      T20130524, &s);
	ck_assert_int_eq(s.st, SIG_QUERY_MALFORMED);
	/* X-Amz-Expires at most 7 days */
	check("GET", "/test.txt",
	      "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" AKID
	      "%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z"
	      "&X-Amz-Expires=604801&X-Amz-SignedHeaders=host&X-Amz-Signature=00", h, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_QUERY_MALFORMED);
}
END_TEST

/* Signature Version 2's "Example Object GET" */
START_TEST(test_v2)
{
	const char *h[] = {"Host", "johnsmith.s3.amazonaws.com",
			   "Date", "Tue, 27 Mar 2007 19:36:42 +0000",
			   "Authorization", "AWS " AKID ":bWq2s1WEIj+Ydj0vQ697zp+IXMU=", NULL};
	struct tm tm = {.tm_year = 107, .tm_mon = 2, .tm_mday = 27, .tm_hour = 19, .tm_min = 36,
			.tm_sec = 42};
	int64_t t = (int64_t)timegm(&tm);
	struct sig_result s;
	check("GET", "/johnsmith/photos/puppy.jpg", NULL, h, t, &s);
	ck_assert_msg(s.st == SIG_OK, "%d %s", s.st, s.why);
	check("GET", "/johnsmith/photos/puppy.jpg", NULL, h, t + 901, &s);
	ck_assert_int_eq(s.st, SIG_SKEWED);
	check("DELETE", "/johnsmith/photos/puppy.jpg", NULL, h, t, &s);
	ck_assert_int_eq(s.st, SIG_MISMATCH);
	/* the query form: Expires stands for Date */
	{
		const char *none[] = {NULL};
		char q[256];
		snprintf(q, sizeof(q), "AWSAccessKeyId=" AKID "&Expires=%lld&Signature=x",
			 (long long)t + 60);
		check("GET", "/johnsmith/photos/puppy.jpg", q, none, t, &s);
		ck_assert_int_eq(s.st, SIG_MISMATCH);
		check("GET", "/johnsmith/photos/puppy.jpg", q, none, t + 61, &s);
		ck_assert_int_eq(s.st, SIG_EXPIRED);
	}
}
END_TEST

/* Finding 1 (issue 41): an x-amz-* header outside SignedHeaders -- an
 * X-Amz-Copy-Source added to a signed PUT or a presigned link -- is
 * refused, whatever the signature says. */
START_TEST(test_unsigned_header)
{
	const char *h[] = {"Host", "examplebucket.s3.amazonaws.com",
		"Authorization", "AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/s3/aws4_request,"
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
		"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		"Range", "bytes=0-9", "x-amz-content-sha256", SHA256_EMPTY,
		"x-amz-date", "20130524T000000Z", "X-Amz-Copy-Source", "/bucket/secret", NULL};
	const char *p[] = {"Host", "examplebucket.s3.amazonaws.com",
			   "x-amz-copy-source", "/bucket/secret", NULL};
	const char *q = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" AKID
			"%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z"
			"&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature="
			"aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
	struct sig_result s;
	check("GET", "/test.txt", NULL, h, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_UNSIGNED);
	ck_assert_str_eq(s.why, "There were headers present in the request which were not signed");
	h[10] = NULL;   /* without it: the example verifies */
	check("GET", "/test.txt", NULL, h, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_OK);
	check("GET", "/test.txt", q, p, T20130524 + 60, &s);
	ck_assert_int_eq(s.st, SIG_UNSIGNED);
	p[2] = NULL;
	check("GET", "/test.txt", q, p, T20130524 + 60, &s);
	ck_assert_int_eq(s.st, SIG_OK);
}
END_TEST

/* A header-form request of curl's shape (no x-amz-content-sha256)
 * signed here over signed_headers. */
static void curl_signed(const char *signed_headers, struct sig_result *s)
{
	unsigned char k[32];
	char creq[512], sig[65], auth[512];
	const char *h[] = {"Host", "example.com", "x-amz-date", "20130524T000000Z",
			   "Authorization", auth, NULL};
	snprintf(creq, sizeof(creq), "GET\n/k\n\n%s%s\n%s\n" SHA256_EMPTY,
		 strstr(signed_headers, "host") ? "host:example.com\n" : "",
		 strstr(signed_headers, "x-amz-date") ? "x-amz-date:20130524T000000Z\n" : "",
		 signed_headers);
	sigv4_key(SECRET, "20130524", "us-east-1", "s3", k);
	sigv4_sign(k, "20130524T000000Z", "20130524/us-east-1/s3/aws4_request", creq, sig);
	snprintf(auth, sizeof(auth), "AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/s3/"
		 "aws4_request, SignedHeaders=%s, Signature=%s", signed_headers, sig);
	check("GET", "/k", NULL, h, T20130524, s);
}

/* Finding 4: SignedHeaders must hold host and, in the header form, the
 * date's header; else the request could be replayed to any host. */
START_TEST(test_host_signed)
{
	struct sig_result s;
	curl_signed("host;x-amz-date", &s);
	ck_assert_msg(s.st == SIG_OK, "%d %s", s.st, s.why);
	curl_signed("x-amz-date", &s);
	ck_assert_int_eq(s.st, SIG_UNSIGNED);
	curl_signed("host", &s);
	ck_assert_int_eq(s.st, SIG_UNSIGNED);
}
END_TEST

/* A SigV2 query link for path (+ extra, unsigned), signed over sts_path. */
static void v2_link(const char *sts_path, const char *path, const char *extra, int64_t expires,
		    int64_t now, struct sig_result *s)
{
	const char *none[] = {NULL};
	char sts[512], q[512], b64[40], enc[80];
	unsigned char mac[20];
	unsigned int ml = 20;
	size_t o = 0;
	snprintf(sts, sizeof(sts), "GET\n\n\n%lld\n%s", (long long)expires, sts_path);
	HMAC(EVP_sha1(), SECRET, (int)strlen(SECRET), (unsigned char *)sts, strlen(sts), mac, &ml);
	EVP_EncodeBlock((unsigned char *)b64, mac, 20);
	for (const char *c = b64; *c; c++)
		o += (size_t)snprintf(enc + o, sizeof(enc) - o, *c == '+' ? "%%2B" : *c == '/' ? "%%2F"
				      : *c == '=' ? "%%3D" : "%c", *c);
	snprintf(q, sizeof(q), "%sAWSAccessKeyId=" AKID "&Expires=%lld&Signature=%s", extra,
		 (long long)expires, enc);
	check("GET", path, q, none, now, s);
}

/* Finding 2: SigV2 signs mkv's own parameters as sub-resources (a link
 * for one key is no listing), and its Expires is at most 7 days ahead. */
START_TEST(test_v2_native)
{
	struct sig_result s;
	v2_link("/d/k", "/d/k", "", T20130524 + 300, T20130524, &s);
	ck_assert_msg(s.st == SIG_OK, "%d %s", s.st, s.why);
	v2_link("/d/", "/d/", "list&locations&ttl=24h&", T20130524 + 300, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_MISMATCH);
	v2_link("/d/?list&locations&ttl=24h", "/d/", "list&locations&ttl=24h&", T20130524 + 300,
		T20130524, &s);
	ck_assert_msg(s.st == SIG_OK, "%d %s", s.st, s.why);
	v2_link("/d/?list", "/d/", "list&limit=5&", T20130524 + 300, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_MISMATCH);
	v2_link("/d/?list", "/d/", "list&unlinked&", T20130524 + 300, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_MISMATCH);
	v2_link("/d/?list", "/d/", "list&start=/d/x&", T20130524 + 300, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_MISMATCH);
	v2_link("/d/?list", "/d/", "list&md5s&", T20130524 + 300, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_MISMATCH);
	v2_link("/d/k", "/d/k", "", T20130524 + 604800, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_OK);
	v2_link("/d/k", "/d/k", "", T20130524 + 604801, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_QUERY_MALFORMED);
	v2_link("/d/k", "/d/k", "", T20130524 + 10 * 365 * 86400, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_QUERY_MALFORMED);
}
END_TEST

/* Unsigned: the anonymous line; curl's missing x-amz-content-sha256. */
START_TEST(test_unsigned)
{
	const char *none[] = {NULL};
	struct sig_result s;
	check("GET", "/public/x", NULL, none, T20130524, &s);
	ck_assert_int_eq(s.st, SIG_OK);
	ck_assert(!s.is_signed);
	ck_assert(key_allows(s.key, PERM_READ, "/public/x", 9));
	ck_assert(!key_allows(s.key, PERM_READ, "/private", 8));
	ck_assert(!key_allows(s.key, PERM_WRITE, "/public/x", 9));
}
END_TEST

static const struct { const char *text, *err; } bad_files[] = {
	{"k 0123456789abcdef read /\nk 0123456789abcdef0 read /\n", "test:2: this id is given twice"},
	{"k short read /\n", "test:1: secret shorter than 16 bytes"},
	{"k 0123456789abcdef readd /\n", "test:1: permissions are"},
	{"k 0123456789abcdef read\n", "test:1: want: ID SECRET"},
	{"k 0123456789abcdef read datasets/\n", "test:1: a prefix starts with /"},
	{"# c\n\nanonymous read\n", "test:3: want: anonymous"},
	{"anonymous read /a/\nanonymous list /b/\n", "test:2: this id is given twice"},
	/* finding 6: cut mid-write, "/datasets/" read as "/" */
	{"k 0123456789abcdef read /", "test:1: the last line has no newline"},
	{"# keys\nk 0123456789abcdef read /a/\nj 0123456789abcdef read /", "test:3: the last line"},
};

START_TEST(test_bad_files)
{
	char *why = NULL;
	struct keyring *k = keyring_parse(bad_files[_i].text, "test", &why);
	ck_assert_ptr_null(k);
	ck_assert_msg(why && !strncmp(why, bad_files[_i].err, strlen(bad_files[_i].err)), "%s", why);
	free(why);
}
END_TEST

START_TEST(test_file)
{
	char *why = NULL;
	struct keyring *k = keyring_parse(
		"# id secret perms prefixes\n"
		"trainer 3f9a6c1d0b7e4a52c8d1e6f0a9b3c7d2 read,list /datasets/a/ /shared/  # two\n"
		"admin\t77a01c4e5f6b8d9e0a1b2c3d4e5f6a7b read,list,write,delete,admin /\n"
		"anonymous read /public/\n", "test", &why);
	const struct key *t, *a;
	ck_assert_msg(k, "%s", why);
	ck_assert_int_eq(k->n, 3);
	t = keyring_find(k, "trainer", 7);
	a = keyring_find(k, "admin", 5);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_null(keyring_find(k, "anonymous", 9));   /* no secret: never signs */
	ck_assert_ptr_null(keyring_find(k, "train", 5));
	ck_assert_str_eq(k->anonymous->id, "anonymous");
	ck_assert(key_allows(t, PERM_READ, "/datasets/a/x", 13));
	ck_assert(key_allows(t, PERM_LIST, "/datasets/a/", 12));
	ck_assert(key_allows(t, PERM_READ, "/shared/x", 9));
	ck_assert(!key_allows(t, PERM_READ, "/datasets/b/x", 13));
	ck_assert(!key_allows(t, PERM_LIST, "/datasets/", 10));
	ck_assert(!key_allows(t, PERM_WRITE, "/datasets/a/x", 13));
	ck_assert(key_touches(t, PERM_LIST, "/datasets/", 10));   /* its bucket */
	ck_assert(!key_touches(t, PERM_LIST, "/other/", 7));
	ck_assert(key_allows(a, PERM_ADMIN | PERM_DELETE, "/anything", 9));
	keyring_put(k);
}
END_TEST

/* '#' starts a comment anywhere in a line, so a prefix holding one (a
 * key may: "/data/#tmp/") was cut to what comes before it -- "/data/", a
 * wider grant than written, with no word said.  It must be refused, or
 * kept whole. */
START_TEST(test_hash_in_prefix)
{
	char *why = NULL;
	struct keyring *k = keyring_parse("k 0123456789abcdef read /data/#tmp/\n", "test", &why);
	if (k) {
		const struct key *t = keyring_find(k, "k", 1);
		ck_assert_ptr_nonnull(t);
		ck_assert_msg(!key_allows(t, PERM_READ, "/data/other", 11),
			      "the prefix /data/#tmp/ grants /data/other");
		keyring_put(k);
	}
	free(why);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("sigv4");
	SRunner *sr;
	int failed;
	tcase_add_test(tc, test_get_object);
	tcase_add_test(tc, test_put_object);
	tcase_add_test(tc, test_chunked);
	tcase_add_test(tc, test_presigned);
	tcase_add_test(tc, test_v2);
	tcase_add_test(tc, test_unsigned_header);
	tcase_add_test(tc, test_host_signed);
	tcase_add_test(tc, test_v2_native);
	tcase_add_test(tc, test_unsigned);
	suite_add_tcase(s, tc);
	tc = tcase_create("keys");
	tcase_add_loop_test(tc, test_bad_files, 0, sizeof(bad_files) / sizeof(bad_files[0]));
	tcase_add_test(tc, test_file);
	tcase_add_test(tc, test_hash_in_prefix);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
