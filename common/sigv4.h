/* sigv4.h -- who signed a request: AWS Signature Version 4 (the
 * Authorization header, presigned X-Amz-* queries, aws-chunked chunk
 * signatures) and Version 2 (s3cmd's header and signurl's query), checked
 * against the keys of keys.h.  Pure functions over plain strings: the
 * front, the native API and S3 each hand in their request's parts, so the
 * tests run AWS's published examples with no server.  SHA-256 and HMAC
 * are libcrypto's; signatures are compared in constant time. */
#ifndef MKV_SIGV4_H
#define MKV_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "keys.h"

#define SIG_SKEW_S (15 * 60)          /* clock skew accepted either way */
#define SIG_PRESIGN_MAX_S 604800      /* X-Amz-Expires at most (7 days) */
#define SHA256_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* A request as the signature sees it.  path: the target up to '?', raw;
 * query: raw, or NULL.  header(cls, name): a header's value (name in any
 * case), or NULL; each_header: fn for every header (SigV2's x-amz-*). */
struct sig_req {
	const char *method, *path, *query;
	const char *(*header)(void *cls, const char *name);
	void (*each_header)(void *cls, void (*fn)(void *arg, const char *k, const char *v),
			    void *arg);
	void *cls;
	int64_t now;   /* Unix seconds */
};

enum sig_status {
	SIG_OK,               /* signed by key (or unsigned: key is the anonymous line, or NULL) */
	SIG_MALFORMED,        /* the Authorization header: 400 AuthorizationHeaderMalformed */
	SIG_QUERY_MALFORMED,  /* a presigned query: 400 AuthorizationQueryParametersError */
	SIG_UNKNOWN_KEY,      /* 403 InvalidAccessKeyId */
	SIG_MISMATCH,         /* 403 SignatureDoesNotMatch */
	SIG_SKEWED,           /* 403 RequestTimeTooSkewed */
	SIG_UNSIGNED,         /* an x-amz-* header, host or the date not signed: 403 AccessDenied */
	SIG_EXPIRED,          /* a presigned URL past its time: 403 AccessDenied */
};

/* What the body must be, once the head is checked. */
enum sig_payload {
	PAYLOAD_UNSIGNED,     /* UNSIGNED-PAYLOAD, a presigned URL, SigV2, curl's missing header */
	PAYLOAD_SHA256,       /* x-amz-content-sha256 is the body's hex SHA-256: sha256 */
	PAYLOAD_CHUNKS,       /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD: each chunk signed, chained */
};

struct sig_result {
	enum sig_status st;
	const char *why;                /* one line, static */
	const struct key *key;          /* who: a key, the anonymous line, or NULL */
	bool is_signed;
	enum sig_payload payload;
	char sha256[65];                /* PAYLOAD_SHA256: the hex digest the body must have */
	/* PAYLOAD_CHUNKS: what the next chunk's signature chains from */
	unsigned char kSigning[32];
	char amzdate[17], scope[160], prev[65];
};

/* The whys S3 words alike for both versions. */
#define SIG_NO_KEY "The AWS Access Key Id you provided does not exist in our records."
#define SIG_NO_MATCH "The request signature we calculated does not match the signature you " \
	"provided. Check your key and signing method."
#define SIG_TOO_SKEWED "The difference between the request time and the current time is too large."

/* Who signed r, by the keys of ring (not NULL). */
void sig_check(const struct keyring *ring, const struct sig_req *r, struct sig_result *out);
/* The next aws-chunked chunk: data's SHA-256 (hash) and the signature its
 * header carried (sig, siglen).  true when it matches the chain, which
 * then moves on. */
bool sig_chunk(struct sig_result *s, const unsigned char hash[32], const char *sig, size_t siglen);

/* SigV2's header ("AWS id:sig", auth) and query (sigv2.c), for sig_check:
 * 0, or -1 refused.  sig_refuse: out refused (st, why), -1. */
int sigv2_header(const struct keyring *ring, const struct sig_req *r, const char *auth,
		 struct sig_result *out);
int sigv2_query(const struct keyring *ring, const struct sig_req *r, struct sig_result *out);
static inline int sig_refuse(struct sig_result *out, enum sig_status st, const char *why)
{
	out->st = st;
	out->why = why;
	return -1;
}

/* ---- a running SHA-256 (a body as it passes) ---- */
struct sha256;
struct sha256 *sha256_new(void);
void sha256_update(struct sha256 *h, const void *p, size_t n);
/* The digest; frees h. */
void sha256_final(struct sha256 *h, unsigned char out[32]);
void sha256_free(struct sha256 *h);   /* NULL is fine */

/* ---- the pieces, for the tests ---- */
/* SigV4's signing key for secret, date (YYYYMMDD), region, service. */
void sigv4_key(const char *secret, const char *date, const char *region, const char *service,
	       unsigned char out[32]);
/* The signature (64 hex digits) of the canonical request creq made at
 * amzdate (YYYYMMDDTHHMMSSZ) for scope (date/region/service/aws4_request). */
void sigv4_sign(const unsigned char key[32], const char *amzdate, const char *scope,
		const char *creq, char out[65]);

#endif
