/* sigv2.c -- Signature Version 2, header ("AWS id:sig") and query
 * (AWSAccessKeyId, Expires, Signature): what s3cmd falls back to and what
 * `s3cmd signurl` makes.  HMAC-SHA1 over AWS's string to sign ("Signing
 * and Authenticating REST Requests"); see sigv4.h. */
#include "sigv4.h"
#include "httpc.h"
#include "placement.h"
#include "util.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Sub-resources that are part of V2's CanonicalizedResource, in order:
 * S3's, and mkv's own (list, unlinked, locations, md5s, ttl, start,
 * limit), since V2 signs no other parameter and these change what a
 * native request does. */
static const char *const v2_subres[] = {
	"acl", "cors", "delete", "lifecycle", "limit", "list", "location", "locations",
	"logging", "md5s", "notification", "partNumber", "policy", "requestPayment",
	"response-cache-control", "response-content-disposition", "response-content-encoding",
	"response-content-language", "response-content-type", "response-expires", "restore",
	"start", "tagging", "torrent", "ttl", "unlinked", "uploadId", "uploads", "versionId",
	"versioning", "versions", "website", NULL,
};

struct amzh {
	char **h;   /* "name:value", name lowercased */
	size_t n;
};

/* v without the blanks around it (HTTP's), as clients sign it: *n bytes. */
static const char *trim(const char *v, int *n)
{
	size_t l;
	for (v = v ? v : ""; *v == ' ' || *v == '\t'; v++)
		;
	for (l = strlen(v); l && (v[l - 1] == ' ' || v[l - 1] == '\t'); l--)
		;
	*n = (int)l;
	return v;
}

static void collect_amz(void *arg, const char *k, const char *v)
{
	struct amzh *a = arg;
	char *s;
	int vl;
	if (strncasecmp(k, "x-amz-", 6))
		return;
	v = trim(v, &vl);
	s = xasprintf("%s:%.*s", k, vl, v);
	for (char *p = s; *p != ':'; p++)
		*p = (char)tolower((unsigned char)*p);
	a->h = xrealloc(a->h, sizeof(char *) * (a->n + 1));
	a->h[a->n++] = s;
}

/* By name ("x-amz-meta-a" before "x-amz-meta-a-b"), as clients sort them. */
static int name_cmp(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	return bytes_cmp(x, strcspn(x, ":"), y, strcspn(y, ":"));
}

/* V2's string to sign (*len bytes: a value may decode to NUL); date: the
 * Date line (Expires for a query). */
static char *v2_string(const struct sig_req *r, const char *date, size_t *len)
{
	struct buf b = {0};
	struct amzh a = {0};
	const char *md5 = r->header(r->cls, "Content-MD5"), *ct = r->header(r->cls, "Content-Type");
	char sep = '?';
	int ml, cl;
	md5 = trim(md5, &ml);
	ct = trim(ct, &cl);
	buf_printf(&b, "%s\n%.*s\n%.*s\n%s\n", r->method, ml, md5, cl, ct, date);
	if (r->each_header)
		r->each_header(r->cls, collect_amz, &a);
	if (a.n)
		qsort(a.h, a.n, sizeof(char *), name_cmp);
	for (size_t i = 0; i < a.n; i++) {
		buf_printf(&b, "%s\n", a.h[i]);
		free(a.h[i]);
	}
	free(a.h);
	buf_puts(&b, r->path);
	for (int i = 0; v2_subres[i]; i++) {
		size_t vl;
		const char *v = query_param(r->query, v2_subres[i], &vl);
		if (!v)
			continue;
		buf_printf(&b, "%c%s", sep, v2_subres[i]);
		if (v[-1] == '=')   /* "name=" as sent; the value decoded, as botocore signs it */
			buf_append(&b, "=", 1);   /* and as the routes read it: '+' a space */
		if (query_decode(v, vl, buf_room(&b, vl), &vl) == 0)
			b.len += vl;
		sep = '&';
	}
	*len = b.len;
	return b.data;
}

static int v2_verify(const struct keyring *ring, const struct sig_req *r, const char *id,
		     size_t idl, const char *sig, size_t sigl, const char *date, bool query,
		     struct sig_result *out)
{
	const struct key *key = keyring_find(ring, id, idl);
	unsigned char mac[20];
	unsigned int ml = 20;
	char want[32], got[64], *sts;
	size_t stl;
	if (!key)
		return sig_refuse(out, SIG_UNKNOWN_KEY, SIG_NO_KEY);
	sts = v2_string(r, date, &stl);
	HMAC(EVP_sha1(), key->secret, (int)strlen(key->secret), (unsigned char *)sts, stl,
	     mac, &ml);
	free(sts);
	EVP_EncodeBlock((unsigned char *)want, mac, 20);   /* 28 characters */
	if (query && (sigl >= sizeof(got) || path_decode(sig, sigl, got, &sigl) < 0))
		sigl = 0;   /* the query's comes percent-encoded */
	if (sigl != 28 || CRYPTO_memcmp(want, query ? got : sig, 28))
		return sig_refuse(out, SIG_MISMATCH, SIG_NO_MATCH);
	out->st = SIG_OK;
	out->key = key;
	out->is_signed = true;
	return 0;
}

/* Authorization: AWS id:signature */
int sigv2_header(const struct keyring *ring, const struct sig_req *r, const char *auth,
		 struct sig_result *out)
{
	const char *id = auth + 4, *colon = strrchr(id, ':');
	const char *amz = r->header(r->cls, "x-amz-date"), *date = r->header(r->cls, "Date");
	time_t t = amz ? httpc_parse_date(amz) : date ? httpc_parse_date(date) : -1;
	if (!colon || colon == id)
		return sig_refuse(out, SIG_MALFORMED,
				  "The authorization header is malformed; want AWS ID:SIGNATURE");
	if (t < 0 || t > r->now + SIG_SKEW_S || t < r->now - SIG_SKEW_S)
		return sig_refuse(out, SIG_SKEWED, SIG_TOO_SKEWED);
	/* with x-amz-date, the Date line is empty (it is among the x-amz- headers) */
	return v2_verify(ring, r, id, (size_t)(colon - id), colon + 1, strlen(colon + 1),
		  amz ? "" : date, false, out);
}

/* ?AWSAccessKeyId=...&Expires=...&Signature=... (s3cmd signurl) */
int sigv2_query(const struct keyring *ring, const struct sig_req *r, struct sig_result *out)
{
	size_t il, el, sl;
	const char *id = query_param(r->query, "AWSAccessKeyId", &il);
	const char *exp = query_param(r->query, "Expires", &el);
	const char *sig = query_param(r->query, "Signature", &sl);
	char ebuf[24];
	uint64_t e;
	snprintf(ebuf, sizeof(ebuf), "%.*s", (int)(exp && el < 23 ? el : 0), exp ? exp : "");
	if (!id || !sig || !exp || !parse_u64(ebuf, 0, INT64_MAX, &e))
		return sig_refuse(out, SIG_QUERY_MALFORMED, "Query-string authentication requires "
				  "the Signature, Expires and AWSAccessKeyId parameters");
	if ((int64_t)e < r->now)
		return sig_refuse(out, SIG_EXPIRED, "Request has expired");
	if ((int64_t)e > r->now + SIG_PRESIGN_MAX_S)   /* as SigV4's X-Amz-Expires */
		return sig_refuse(out, SIG_QUERY_MALFORMED,
				  "Expires must be at most 604800 seconds (7 days) from now");
	return v2_verify(ring, r, id, il, sig, sl, ebuf, true, out);
}
