/* s3list.h -- S3's listings (ListObjects V1/V2 and ListBuckets: s3_list and
 * s3_list_buckets in s3req.h) from the index and the sidecar, never a
 * volume, and the small XML and time functions every S3 answer uses.
 * Memory is bounded by max-keys (at most 1000). */
#ifndef MKV_S3LIST_H
#define MKV_S3LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "index.h"
#include "../common/util.h"

#define S3_MPU_BUCKET ".mkv-mpu"   /* where multipart parts live (not a valid S3 bucket name) */

void xml_escape(struct buf *b, const char *s, size_t n);
/* <name>s[0..n), escaped</name> */
void xml_tag(struct buf *b, const char *name, const char *s, size_t n);
/* ISO 8601 with milliseconds ("2026-11-30T17:00:00.000Z") and RFC 7231. */
void s3_iso_time(int64_t t, char out[32]);
void s3_http_time(int64_t t, char out[40]);

/* No live key under the bucket? */
bool s3_bucket_empty(struct index *idx, const char *bucket);

#endif
