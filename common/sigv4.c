/* sigv4.c -- see sigv4.h.  AWS's documents: "Signature Calculations for
 * the Authorization Header", "... Transfer Payload in Multiple Chunks",
 * "Authenticating Requests: Using Query Parameters", and Signature
 * Version 2's "Signing and Authenticating REST Requests". */
#include "sigv4.h"
#include "placement.h"
#include "util.h"

#include <ctype.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define ALGO "AWS4-HMAC-SHA256"

/* The algorithms are fetched once, and each thread keeps its HMAC
 * context: OpenSSL 3's one-shot HMAC() and EVP_sha256() look them up on
 * every call, which cost more than the hashing of a request's few hundred
 * bytes. */
static EVP_MAC *hmac_alg;
static EVP_MD *sha_md;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t tl_key;   /* frees a thread's context at its exit */
static __thread EVP_MAC_CTX *tl_mac;

static void free_mac(void *c)
{
	EVP_MAC_CTX_free(c);
}

static void init(void)
{
	if (!(hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL)) ||
	    !(sha_md = EVP_MD_fetch(NULL, "SHA256", NULL)) || pthread_key_create(&tl_key, free_mac))
		die("sigv4: no HMAC or SHA-256");
}

static void hmac256(const void *key, size_t klen, const char *data, size_t n, unsigned char out[32])
{
	size_t len = 32;
	pthread_once(&once, init);
	if (!tl_mac) {
		OSSL_PARAM p[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
				  OSSL_PARAM_construct_end()};
		if (!(tl_mac = EVP_MAC_CTX_new(hmac_alg)) || !EVP_MAC_CTX_set_params(tl_mac, p))
			die("HMAC-SHA256: no context");
		pthread_setspecific(tl_key, tl_mac);
	}
	if (!EVP_MAC_init(tl_mac, key, klen, NULL) ||
	    !EVP_MAC_update(tl_mac, (const unsigned char *)data, n) ||
	    !EVP_MAC_final(tl_mac, out, &len, 32))
		die("HMAC-SHA256 failed");
}

static void sha256_hex(const char *p, size_t n, char out[65])
{
	unsigned char d[32];
	pthread_once(&once, init);
	if (!EVP_Digest(p, n, d, NULL, sha_md, NULL))
		die("SHA-256 failed");
	to_hex(d, 32, out);
}

struct sha256 *sha256_new(void)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	pthread_once(&once, init);
	if (!c || !EVP_DigestInit_ex(c, sha_md, NULL))
		die("SHA-256: init failed");
	return (struct sha256 *)c;
}

void sha256_update(struct sha256 *h, const void *p, size_t n)
{
	if (n && !EVP_DigestUpdate((EVP_MD_CTX *)h, p, n))
		die("SHA-256: update failed");
}

void sha256_final(struct sha256 *h, unsigned char out[32])
{
	if (!EVP_DigestFinal_ex((EVP_MD_CTX *)h, out, NULL))
		die("SHA-256: final failed");
	EVP_MD_CTX_free((EVP_MD_CTX *)h);
}

void sha256_free(struct sha256 *h)
{
	EVP_MD_CTX_free((EVP_MD_CTX *)h);
}

void sigv4_key(const char *secret, const char *date, const char *region, const char *service,
	       unsigned char out[32])
{
	char *k = xasprintf("AWS4%s", secret);
	unsigned char a[32], b[32];
	hmac256(k, strlen(k), date, strlen(date), a);
	hmac256(a, 32, region, strlen(region), b);
	hmac256(b, 32, service, strlen(service), a);
	hmac256(a, 32, "aws4_request", 12, out);
	OPENSSL_cleanse(k, strlen(k));
	free(k);
}

/* sigv4_key, remembered per thread for the last secret, date, region and
 * service: one key signs a day's requests, so four HMACs of five are
 * saved.  Compared by content, so a reloaded secret is never confused. */
static void signing_key(const char *secret, const char *date, const char *region,
			const char *service, unsigned char out[32])
{
	static __thread struct {
		char secret[128], date[9], region[64], service[64];
		unsigned char k[32];
	} c;
	if (strlen(secret) >= sizeof(c.secret)) {
		sigv4_key(secret, date, region, service, out);
		return;
	}
	if (strcmp(c.secret, secret) || strcmp(c.date, date) || strcmp(c.region, region) ||
	    strcmp(c.service, service)) {
		sigv4_key(secret, date, region, service, c.k);
		snprintf(c.secret, sizeof(c.secret), "%s", secret);
		snprintf(c.date, sizeof(c.date), "%s", date);
		snprintf(c.region, sizeof(c.region), "%s", region);
		snprintf(c.service, sizeof(c.service), "%s", service);
	}
	memcpy(out, c.k, 32);
}

static void sign_string(const unsigned char key[32], const char *sts, char out[65])
{
	unsigned char sig[32];
	hmac256(key, 32, sts, strlen(sts), sig);
	to_hex(sig, 32, out);
}

void sigv4_sign(const unsigned char key[32], const char *amzdate, const char *scope,
		const char *creq, char out[65])
{
	char h[65], *sts;
	sha256_hex(creq, strlen(creq), h);
	sts = xasprintf(ALGO "\n%s\n%s\n%s", amzdate, scope, h);
	sign_string(key, sts, out);
	free(sts);
}

bool sig_chunk(struct sig_result *s, const unsigned char hash[32], const char *sig, size_t siglen)
{
	char h[65], *sts, want[65];
	bool ok;
	to_hex(hash, 32, h);
	sts = xasprintf(ALGO "-PAYLOAD\n%s\n%s\n%s\n" SHA256_EMPTY "\n%s", s->amzdate, s->scope,
			s->prev, h);
	sign_string(s->kSigning, sts, want);
	free(sts);
	ok = siglen == 64 && !CRYPTO_memcmp(want, sig, 64);
	if (ok)
		memcpy(s->prev, want, 65);
	return ok;
}

/* ---- canonical forms ---- */

/* s[0..n) percent-decoded ('+' as a space when plus_space) then encoded
 * as AWS's UriEncode: every byte but A-Za-z0-9-._~ (and '/' when
 * keep_slash).  false when the decoding fails. */
static bool recode(struct buf *b, const char *s, size_t n, bool keep_slash, bool plus_space)
{
	char *d = xmalloc(n + 1);
	size_t dl;
	bool ok = pct_decode(s, n, d, &dl, plus_space) == 0;
	if (ok)
		buf_url_escape(b, d, dl, keep_slash);
	free(d);
	return ok;
}

struct param {
	char *s;    /* "name=value", encoded */
	size_t nl;  /* name's length */
};

static int param_cmp(const void *a, const void *b)
{
	const struct param *x = a, *y = b;
	int c = bytes_cmp(x->s, x->nl, y->s, y->nl);
	return c ? c : strcmp(x->s + x->nl, y->s + y->nl);
}

/* The canonical query string of q (each name and value encoded, sorted;
 * skip: a parameter left out, the presigned signature), onto b.  The
 * routes match names as sent, so "upload%49d" must not sign as "uploadId":
 * a name is decoded only when sent in its canonical form.  Values are
 * decoded with '+' a space, as query_decode reads them. */
static void canonical_query(struct buf *b, const char *q, const char *skip)
{
	struct param *p = NULL;
	size_t np = 0;
	while (q && *q) {
		size_t len = strcspn(q, "&"), nl = strcspn(q, "=");
		struct buf e = {0};
		if (nl > len)
			nl = len;
		if (len && !(skip && nl == strlen(skip) && !memcmp(q, skip, nl))) {
			if (!recode(&e, q, nl, false, false) || e.len != nl ||
			    (nl && memcmp(e.data, q, nl))) {   /* "=v": no name, e.data NULL */
				e.len = 0;   /* not sent in its canonical form: as sent, '%' too */
				buf_url_escape(&e, q, nl, false);
			}
			size_t enl = e.len;
			buf_append(&e, "=", 1);
			if (nl < len && !recode(&e, q + nl + 1, len - nl - 1, false, true))
				buf_append(&e, q + nl + 1, len - nl - 1);
			buf_append(&e, "", 1);
			p = xrealloc(p, sizeof(*p) * (np + 1));
			p[np++] = (struct param){e.data, enl};
		}
		q += len;
		if (*q == '&')
			q++;
	}
	if (np)
		qsort(p, np, sizeof(*p), param_cmp);
	for (size_t i = 0; i < np; i++) {
		if (i)
			buf_append(b, "&", 1);
		buf_puts(b, p[i].s);
		free(p[i].s);
	}
	free(p);
}

/* name:value (trimmed, inner runs of blanks made one) and '\n'. */
static void canonical_header(struct buf *b, const char *name, size_t nl, const char *v)
{
	bool blank = false;
	buf_append(b, name, nl);
	buf_append(b, ":", 1);
	while (v && (*v == ' ' || *v == '\t'))
		v++;
	for (; v && *v; v++) {
		if (*v == ' ' || *v == '\t') {
			blank = true;
			continue;
		}
		if (blank)
			buf_append(b, " ", 1);
		blank = false;
		buf_append(b, v, 1);
	}
	buf_append(b, "\n", 1);
}

/* ---- SigV4 ---- */

struct v4 {
	const char *id, *sig, *signed_headers, *payload;
	const char *date_hdr;   /* the header form's date: "x-amz-date" or "date" */
	size_t idl, sigl, shl;
	char date[9], region[64], service[64], amzdate[17];
};

/* "id/date/region/service/aws4_request" (cl bytes) into v. */
static bool parse_credential(const char *c, size_t cl, struct v4 *v)
{
	const char *f[5];
	size_t fl[5];
	int n = 0;
	for (const char *p = c, *end = c + cl; n < 5; n++) {
		const char *s = memchr(p, '/', (size_t)(end - p));
		f[n] = p;
		fl[n] = s ? (size_t)(s - p) : (size_t)(end - p);
		if (!s) {
			n++;
			break;
		}
		p = s + 1;
	}
	if (n != 5 || fl[1] != 8 || !fl[0] || !fl[2] || fl[2] >= sizeof(v->region) || !fl[3] ||
	    fl[3] >= sizeof(v->service) || fl[4] != 12 || memcmp(f[4], "aws4_request", 12))
		return false;
	v->id = f[0];
	v->idl = fl[0];
	memcpy(v->date, f[1], 8);
	v->date[8] = '\0';
	snprintf(v->region, sizeof(v->region), "%.*s", (int)fl[2], f[2]);
	snprintf(v->service, sizeof(v->service), "%.*s", (int)fl[3], f[3]);
	return true;
}

/* "20130524T000000Z" as Unix seconds, or -1. */
static int64_t amz_time(const char *s)
{
	struct tm tm = {0};
	if (!s || strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z' ||
	    sscanf(s, "%4d%2d%2dT%2d%2d%2dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
		   &tm.tm_min, &tm.tm_sec) != 6)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm);
}

/* The canonical request of r with v's signed headers; uri_raw/query_raw:
 * the path and query as sent (curl 7.88 signs them so) instead of
 * canonical.  NULL when SignedHeaders is malformed. */
static char *canonical_request(const struct sig_req *r, const struct v4 *v, bool presigned,
			       bool raw)
{
	struct buf b = {0};
	const char *h = v->signed_headers, *end;
	if (!h || !v->shl)
		return NULL;
	end = h + v->shl;
	buf_puts(&b, r->method);
	buf_append(&b, "\n", 1);
	if (raw || !recode(&b, r->path, strlen(r->path), true, false))
		buf_puts(&b, r->path);
	buf_append(&b, "\n", 1);
	if (raw)
		buf_puts(&b, r->query ? r->query : "");
	else
		canonical_query(&b, r->query, presigned ? "X-Amz-Signature" : NULL);
	buf_append(&b, "\n", 1);
	while (h < end) {
		const char *s = memchr(h, ';', (size_t)(end - h));
		size_t n = s ? (size_t)(s - h) : (size_t)(end - h);
		char name[128];
		const char *val;
		if (!n || n >= sizeof(name))
			goto bad;
		memcpy(name, h, n);
		name[n] = '\0';
		/* absent: as empty (curl 7.88 signs the "Expect:" it was told to
		 * leave out, as "expect:") */
		val = r->header(r->cls, name);
		canonical_header(&b, name, n, val ? val : "");
		h += n + (s != NULL);
	}
	buf_printf(&b, "\n%.*s\n%s", (int)v->shl, v->signed_headers, v->payload);
	return b.data;
bad:
	buf_free(&b);
	return NULL;
}

/* Is name one of v's SignedHeaders? */
static bool is_signed(const struct v4 *v, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = v->signed_headers, *end = p + v->shl; p < end;) {
		const char *s = memchr(p, ';', (size_t)(end - p));
		size_t k = s ? (size_t)(s - p) : (size_t)(end - p);
		if (k == n && !strncasecmp(p, name, n))
			return true;
		p += k + 1;
	}
	return false;
}

struct unsigned_scan {
	const struct v4 *v;
	bool bad;
};

static void scan_amz(void *arg, const char *k, const char *val)
{
	struct unsigned_scan *u = arg;
	(void)val;
	if (!strncasecmp(k, "x-amz-", 6) && !is_signed(u->v, k))
		u->bad = true;
}

/* Nothing unsigned may change what a request does (AWS's rule): host,
 * the header that dated it (v->date_hdr, the header form's) and every
 * x-amz-* header it carries must be signed; a presigned link signs only
 * host, so an x-amz-* header added to it is refused. */
static bool all_signed(const struct sig_req *r, const struct v4 *v)
{
	struct unsigned_scan u = {v, false};
	if (r->each_header)
		r->each_header(r->cls, scan_amz, &u);
	return !u.bad && is_signed(v, "host") && (!v->date_hdr || is_signed(v, v->date_hdr));
}

/* Check v's signature over r by the key it names. */
static int v4_verify(const struct keyring *ring, const struct sig_req *r, struct v4 *v,
		     bool presigned, struct sig_result *out)
{
	unsigned char k[32];
	char scope[160], want[65];
	const struct key *key = keyring_find(ring, v->id, v->idl);
	bool ok = false;
	if (!all_signed(r, v))
		return sig_refuse(out, SIG_UNSIGNED,
				  "There were headers present in the request which were not signed");
	if (!key)
		return sig_refuse(out, SIG_UNKNOWN_KEY, SIG_NO_KEY);
	if (v->sigl != 64)
		return sig_refuse(out, presigned ? SIG_QUERY_MALFORMED : SIG_MALFORMED,
				  "the signature is not 64 hex digits");
	snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", v->date, v->region, v->service);
	signing_key(key->secret, v->date, v->region, v->service, k);
	/* the canonical forms, then (curl 7.88) the path and query as sent ('+', '(' raw) */
	for (int raw = 0; raw < 2 && !ok; raw++) {
		char *creq = canonical_request(r, v, presigned, raw);
		if (!creq)
			break;
		sigv4_sign(k, v->amzdate, scope, creq, want);
		free(creq);
		ok = !CRYPTO_memcmp(want, v->sig, 64);
	}
	if (!ok)
		return sig_refuse(out, SIG_MISMATCH, SIG_NO_MATCH);
	out->st = SIG_OK;
	out->key = key;
	out->is_signed = true;
	if (out->payload == PAYLOAD_CHUNKS) {
		memcpy(out->kSigning, k, 32);
		snprintf(out->amzdate, sizeof(out->amzdate), "%s", v->amzdate);
		snprintf(out->scope, sizeof(out->scope), "%s", scope);
		memcpy(out->prev, want, 65);
	}
	OPENSSL_cleanse(k, sizeof(k));
	return 0;
}

/* Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=... */
static int v4_header(const struct keyring *ring, const struct sig_req *r, const char *auth,
		     struct sig_result *out)
{
	struct v4 v = {0};
	const char *p = auth + strlen(ALGO), *cred = NULL, *date;
	size_t credl = 0;
	int64_t t;
	while (*p) {
		size_t n, vl;
		const char *val;
		p += strspn(p, " ,");
		n = strcspn(p, "=");
		if (!p[n])
			break;
		val = p + n + 1;
		vl = strcspn(val, ", ");
		if (n == 10 && !memcmp(p, "Credential", 10))
			cred = val, credl = vl;
		else if (n == 13 && !memcmp(p, "SignedHeaders", 13))
			v.signed_headers = val, v.shl = vl;
		else if (n == 9 && !memcmp(p, "Signature", 9))
			v.sig = val, v.sigl = vl;
		p = val + vl;
	}
	if (!cred || !v.signed_headers || !v.sig || !parse_credential(cred, credl, &v))
		return sig_refuse(out, SIG_MALFORMED, "The authorization header is malformed; want "
				  "Credential=ID/DATE/REGION/SERVICE/aws4_request, SignedHeaders=..., "
				  "Signature=...");
	v.date_hdr = "x-amz-date";
	if (!(date = r->header(r->cls, "x-amz-date")))
		date = r->header(r->cls, v.date_hdr = "date");
	if ((t = amz_time(date)) < 0 || strncmp(date, v.date, 8))
		return sig_refuse(out, SIG_MALFORMED, "The authorization header is malformed; "
				  "x-amz-date is missing, or not the credential's date");
	memcpy(v.amzdate, date, 17);
	if (t > r->now + SIG_SKEW_S || t < r->now - SIG_SKEW_S)
		return sig_refuse(out, SIG_SKEWED, SIG_TOO_SKEWED);
	/* curl 7.88 sends no x-amz-content-sha256 and signs the empty hash:
	 * its body is unsigned, as with UNSIGNED-PAYLOAD (MinIO does the same). */
	v.payload = r->header(r->cls, "x-amz-content-sha256");
	if (!v.payload) {
		v.payload = SHA256_EMPTY;
		out->payload = PAYLOAD_UNSIGNED;
	} else if (!strcmp(v.payload, "UNSIGNED-PAYLOAD") ||
		   !strcmp(v.payload, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")) {
		out->payload = PAYLOAD_UNSIGNED;
	} else if (!strcmp(v.payload, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD") ||
		   !strcmp(v.payload, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER")) {
		out->payload = PAYLOAD_CHUNKS;
	} else if (strlen(v.payload) == 64 && strspn(v.payload, "0123456789abcdefABCDEF") == 64) {
		out->payload = PAYLOAD_SHA256;
		for (int i = 0; i < 65; i++)
			out->sha256[i] = (char)tolower((unsigned char)v.payload[i]);
	} else {
		return sig_refuse(out, SIG_MALFORMED,
				  "x-amz-content-sha256 is neither a hex SHA-256 nor a payload mode");
	}
	return v4_verify(ring, r, &v, false, out);
}

/* A presigned URL's X-Amz-* query. */
static int v4_query(const struct keyring *ring, const struct sig_req *r, struct sig_result *out)
{
	struct v4 v = {0};
	const char *alg, *cred, *date, *exp, *sh, *sig;
	size_t al, cl, dl, el, sl, gl;
	char cbuf[512], dbuf[17], ebuf[16], *shd;
	size_t n;
	uint64_t expires;
	int64_t t;
	int rc;
	alg = query_param(r->query, "X-Amz-Algorithm", &al);
	cred = query_param(r->query, "X-Amz-Credential", &cl);
	date = query_param(r->query, "X-Amz-Date", &dl);
	exp = query_param(r->query, "X-Amz-Expires", &el);
	sh = query_param(r->query, "X-Amz-SignedHeaders", &sl);
	sig = query_param(r->query, "X-Amz-Signature", &gl);
	if (!alg || !cred || !date || !exp || !sh || !sig)
		return sig_refuse(out, SIG_QUERY_MALFORMED, "Query-string authentication version 4 "
				  "requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, "
				  "X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.");
	if (al != strlen(ALGO) || memcmp(alg, ALGO, al))
		return sig_refuse(out, SIG_QUERY_MALFORMED,
				  "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"");
	/* the credential's '/' and SignedHeaders' ';' come as %2F and %3B */
	if (cl >= sizeof(cbuf) || path_decode(cred, cl, cbuf, &n) < 0 ||
	    !parse_credential(cbuf, n, &v))
		return sig_refuse(out, SIG_QUERY_MALFORMED,
				  "X-Amz-Credential: want ID/DATE/REGION/SERVICE/aws4_request");
	snprintf(dbuf, sizeof(dbuf), "%.*s", (int)(dl < 16 ? dl : 16), date);
	snprintf(ebuf, sizeof(ebuf), "%.*s", (int)(el < 15 ? el : 15), exp);
	if (dl != 16 || (t = amz_time(dbuf)) < 0 || strncmp(dbuf, v.date, 8))
		return sig_refuse(out, SIG_QUERY_MALFORMED, "X-Amz-Date must be in the ISO8601 Long "
				  "Format \"yyyyMMdd'T'HHmmss'Z'\" and the credential's date");
	if (!parse_u64(ebuf, 1, SIG_PRESIGN_MAX_S, &expires))
		return sig_refuse(out, SIG_QUERY_MALFORMED, "X-Amz-Expires must be a number of "
				  "seconds from 1 to 604800 (7 days)");
	memcpy(v.amzdate, dbuf, 17);
	if (path_decode(sh, sl, shd = xmalloc(sl + 1), &v.shl) < 0) {
		free(shd);
		return sig_refuse(out, SIG_QUERY_MALFORMED, "X-Amz-SignedHeaders is malformed");
	}
	v.signed_headers = shd;
	v.sig = sig;
	v.sigl = gl;
	v.payload = "UNSIGNED-PAYLOAD";
	out->payload = PAYLOAD_UNSIGNED;
	if (t > r->now + SIG_SKEW_S)
		rc = sig_refuse(out, SIG_EXPIRED, "Request is not valid yet");
	else if (t + (int64_t)expires < r->now)
		rc = sig_refuse(out, SIG_EXPIRED, "Request has expired");
	else
		rc = v4_verify(ring, r, &v, true, out);
	free(shd);
	return rc;
}

void sig_check(const struct keyring *ring, const struct sig_req *r, struct sig_result *out)
{
	const char *auth = r->header(r->cls, "Authorization");
	size_t n;
	memset(out, 0, sizeof(*out));
	if (auth && !strncmp(auth, ALGO " ", strlen(ALGO) + 1))
		v4_header(ring, r, auth, out);
	else if (auth && !strncmp(auth, "AWS ", 4))
		sigv2_header(ring, r, auth, out);
	else if (auth)
		sig_refuse(out, SIG_MALFORMED,
			   "unsupported Authorization: sign with AWS Signature Version 4");
	else if (r->query && (query_param(r->query, "X-Amz-Signature", &n) ||
				query_param(r->query, "X-Amz-Credential", &n) ||
				query_param(r->query, "X-Amz-Algorithm", &n)))
		v4_query(ring, r, out);
	else if (r->query && query_param(r->query, "AWSAccessKeyId", &n))
		sigv2_query(ring, r, out);
	else {
		out->st = SIG_OK;   /* unsigned: what the anonymous line allows */
		out->key = ring->anonymous;
	}
}
