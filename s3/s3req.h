/* s3req.h -- what the S3 files (s3*.c) share: one S3 request and the
 * functions that answer it.  Not an interface for the rest of the master:
 * that is s3.h.
 *
 * Threads: a request is driven by libmicrohttpd's calls (s3_handler) and,
 * while its connection sleeps, by one worker thread; s->sleep.mu guards
 * what both touch, s->refs counts them (s3_unref frees on the last). */
#ifndef MKV_S3REQ_H
#define MKV_S3REQ_H

#include "s3.h"
#include "../common/front.h"
#include "../master/store.h"
#include "../common/placement.h"
#include "../common/util.h"
#include "../common/keys.h"
#include "../common/sigv4.h"

#include <stdatomic.h>

#define XML_HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
#define XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"
#define XML_BODY_MAX (2u << 20)   /* DeleteObjects (1,000 keys), CompleteMultipartUpload */
#define RING_CAP (256u << 10)   /* a GetObject's bytes between volume and client */
#define S3_RING (1u << 20)        /* a PutObject's or part's ring (put.h): clients send ~10 at once */
#define PARTS_MAX 10000
#define S3_MPU_BUCKET ".mkv-mpu"   /* where multipart parts live (not a valid S3 bucket name) */
#define CHUNK_LINE_MAX 4096
#define NHDR 12

enum { BAD_FRAMING = 1, BAD_SIZE, BAD_DIGEST, BAD_SHA256, BAD_CHUNK_SIG };

enum s3op {
	S3_BAD, S3_LIST_BUCKETS, S3_BUCKET_HEAD, S3_BUCKET_CREATE,
	S3_BUCKET_DELETE, S3_BUCKET_LOCATION, S3_BUCKET_VERSIONING, S3_LIST, S3_LIST_UPLOADS,
	S3_DELETE_MANY, S3_GET, S3_PUT, S3_DELETE, S3_MPU_CREATE, S3_MPU_PART, S3_MPU_COMPLETE,
	S3_MPU_ABORT, S3_MPU_LIST_PARTS, S3_COPY, S3_MPU_PART_COPY
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

struct httpc_stream;

struct s3req {
	struct front_sleep sleep;   /* its connection; sleep.mu guards what both threads touch */
	atomic_int refs;
	char method[16];
	char *path, *query;
	enum s3op op;
	bool head;
	char key[KEY_MAX * 3 + 8];    /* the whole key, /bucket/object */
	size_t klen;
	char bucket[256];
	size_t blen;                  /* key[blen + 2..] is the object name */

	/* the answer */
	int status;
	struct buf body;
	struct front_hdr hdr[NHDR];   /* values on the heap */
	int nhdr;
	bool answered;

	/* -keys (docs/security.md): the keys in force (NULL: off) and who
	 * signed; a body's SHA-256 as it passes (PAYLOAD_SHA256), a chunk's
	 * (PAYLOAD_CHUNKS) and the signature its header carried */
	struct keyring *ring;
	struct sig_result sig;
	struct sha256 *sha, *chunk_sha;
	char chunk_sig[65];
	size_t chunk_sigl;

	struct buf in;                /* a POST's XML body */
	bool in_too_big;

	/* PutObject / UploadPart */
	struct put *put;
	bool put_finished;
	char target[KEY_MAX + 1];     /* the key written (a part's own key for UploadPart) */
	size_t tlen;
	bool aws_chunked;
	struct chunkdec dec;
	struct buf pending;           /* decoded bytes the put has not taken yet */
	size_t poff;
	uint64_t fed;                 /* body bytes (decoded) so far */
	int64_t decoded;              /* aws-chunked: x-amz-decoded-content-length (-1: none) */
	int bad;                      /* BAD_*: the body is refused */
	struct s3sum *sum;            /* the digests its headers ask to be checked */

	/* GetObject */
	/* a streamed body (GetObject's), and what frees the operation's own
	 * state at the request's end; both NULL for other answers */
	ssize_t (*reader)(void *cls, uint64_t pos, char *out, size_t max);
	void (*release)(struct s3req *s);
	char *urls[RECORD_MAX_LOCS];
	int nurls;
	char range[128];
	struct httpc_stream *st;      /* the replica's bytes on their way (common/httpc.h) */
	bool hdr_done, eof;           /* the replica's headers are in; the worker is done */
	long vstatus;
	int64_t vlen;
	char crange[128], vlastmod[64];
	struct meta meta;             /* its etag: the record's md5 when the sidecar has none */
	bool have_meta;
};

/* ---- answers, suspension and the rest of s3req.c; int results are FRONT_YES/NO ---- */
void s3_hdr(struct s3req *s, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A 200 answer whose XML body opens <root xmlns="..."> */
void s3_xml_start(struct s3req *s, const char *root);
void s3_error(struct s3req *s, int status, const char *code, const char *msg);
/* A failed write's or delete's S3 error code (503 SlowDown, 403
 * AccessDenied, 412 PreconditionFailed, other 4xx InvalidArgument, else
 * InternalError), and that error answered. */
const char *s3_code(int status);
void s3_fail(struct s3req *s, int status, const char *why);
int s3_send(struct s3req *s);
/* An answer set before the body is in: the body is read and dropped
 * (libmicrohttpd queues an answer only once the whole body is in), then
 * the answer goes. */
int s3_swallow(struct s3req *s, size_t *size);
void s3_unref(struct s3req *s);
/* Runs fn(s) on a worker while the connection sleeps (503 SlowDown when no
 * thread can be had); the worker ends with s3_unref, after front_finish
 * when it answers. */
int s3_start_async(struct s3req *s, void (*fn)(void *));
char *s3_req_param(struct s3req *s, const char *name);
/* A numeric query parameter in [min, max] into *v: 1, 0 when absent (*v
 * unchanged), -1 when it is not such a number. */
int s3_num_param(struct s3req *s, const char *name, uint64_t min, uint64_t max, uint64_t *v);
const char *s3_req_header(struct s3req *s, const char *name);
char *s3_xml_next(const char *p, const char *end, const char *tag, size_t *outlen,
		  const char **next);
/* <name>s[0..n), escaped (URL-encoded when url)</name> */
void xml_tag(struct buf *b, const char *name, const char *s, size_t n, bool url);
/* ISO 8601 with milliseconds ("2026-11-30T17:00:00.000Z"). */
void s3_iso_time(int64_t t, char out[32]);
bool s3_lock_key(const char *key, size_t klen);
void s3_no_such_key(struct s3req *s);
void s3_precondition_failed(struct s3req *s);
/* If-Match / If-None-Match (* or ETags) of a write to key (whose lock the
 * caller holds): false with the error set when they do not hold. */
bool s3_write_condition(struct s3req *s, const char *key, size_t klen);
/* Is key's ETag in the If-Match list (NULL: none)?  1 or 0; -1 when the
 * key is not live. */
int s3_etag_is(const char *key, size_t klen, const char *list);
void s3_part_key(const char *upload, int n, char *out, size_t *len);
char *s3_upload(struct s3req *s);
/* UploadPart's key, of its uploadId and partNumber: false with the error set. */
bool s3_part_target(struct s3req *s, char *out, size_t *len);

/* With -keys: may the request's signer do perm on key[0..n)? */
bool s3_may(const struct s3req *s, unsigned perm, const char *key, size_t n);
/* A POST's XML body as it comes into s->in, aws-chunked framing decoded
 * and each chunk's signature checked (s3put.c); s3_body_signed, once it
 * is in: false with the error set when the framing or a chunk is bad or
 * the decoded body is not its x-amz-content-sha256. */
void s3_body_take(struct s3req *s, const char *data, size_t n);
bool s3_body_signed(struct s3req *s);

/* ---- a body's digests (s3sum.c, which answers nothing itself):
 * Content-MD5, x-amz-checksum-* ---- */
/* *out: those the headers (or x-amz-trailer) ask for, NULL when none.
 * false when a value is malformed, x-amz-trailer names no digest checked
 * here, or (md5_only) an x-amz-checksum-* is sent: *code and *msg are
 * S3's error (NotImplemented: 501, else 400). */
bool s3sum_new(struct MHD_Connection *conn, bool md5_only, struct s3sum **out, const char **code,
	       const char **msg);
void s3sum_update(struct s3sum *c, const void *p, size_t n);   /* c may be NULL */
/* An aws-chunked trailer line ("x-amz-checksum-crc32:<base64>"). */
void s3sum_trailer(struct s3sum *c, const char *line);
/* At the body's end (once): every digest matches (true for NULL). */
bool s3sum_ok(struct s3sum *c);
/* After s3sum_ok failed: the name of the digest that did not match. */
const char *s3sum_failed(const struct s3sum *c);
/* After s3sum_ok, from *i = 0: the next x-amz-checksum-* answer header. */
bool s3sum_echo(const struct s3sum *c, int *i, const char **name, char b64[48]);
void s3sum_free(struct s3sum *c);

/* ---- GetObject / HeadObject (s3get.c) ---- */
/* The conditions of the headers names[0..3] (if-match, if-none-match,
 * if-unmodified-since, if-modified-since) on an object of that etag ("":
 * none known) and mtime (-1: unknown): 0 when they hold, else 412 or 304. */
int s3_preconditions(struct s3req *s, const char *const names[4], const char *etag,
		     int64_t mtime);
int s3_get_run(struct s3req *s);

/* ---- PutObject / UploadPart, DeleteObject(s) (s3put.c) ---- */
int s3_put_run(struct s3req *s, const char *data, size_t *size);
/* 204, or a status with *why (valid until the thread's next call).  part:
 * a multipart part's key, removed whatever -protect says.  if_match: 412
 * unless the key's ETag is in it (NULL: none; a missing key is 204). */
int s3_delete_key(const char *key, size_t klen, bool part, const char *if_match, const char **why);
/* DeleteObject: 204, also for a missing key; 403 AccessDenied under -protect. */
void s3_delete_object(struct s3req *s);
void s3_delete_many(struct s3req *s);

/* ---- run on a worker thread: ListObjects V1/V2 and ListBuckets
 * (s3list.c: from the index and the sidecar, never a volume; memory
 * bounded by max-keys); multipart uploads and their listing, CopyObject
 * (s3mpu.c) ---- */
void s3_list(struct s3req *s);
void s3_list_buckets(struct s3req *s);
void s3_list_uploads(struct s3req *s);
void s3_mpu_create(struct s3req *s);
void s3_mpu_abort(struct s3req *s);
void s3_mpu_list_parts(struct s3req *s);
void s3_copy(struct s3req *s);
void s3_mpu_part_copy(struct s3req *s);
void s3_mpu_complete(struct s3req *s);

#endif
