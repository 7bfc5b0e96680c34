/* range.h -- the Range and If-Match / If-None-Match headers of a request,
 * read as nginx 1.22 reads them (max_ranges 1, see deploy/nginx: so that
 * mkv-volume answers as nginx does) or as S3 does.  One grammar, two
 * readings. */
#ifndef MKV_RANGE_H
#define MKV_RANGE_H

#include <stdbool.h>
#include <stdint.h>

/* nginx: what to answer for Range hdr (NULL: none) on size bytes.  Several
 * satisfiable ranges give RANGE_ALL; unsatisfiable ones among satisfiable
 * ones are dropped.  *start and *len mean something only with RANGE_ONE. */
enum range {
	RANGE_ALL,           /* no usable Range: 200 with the whole body */
	RANGE_ONE,           /* 206 with [*start, *start + *len) */
	RANGE_BAD,           /* 416 with Content-Range: bytes * / size */
};
enum range range_parse(const char *hdr, uint64_t size, uint64_t *start, uint64_t *len);

/* S3: is hdr one range S3 acts on, "bytes=first-last" (first <= last),
 * "bytes=first-" or "bytes=-suffix"?  (S3 ignores any other Range.)  The
 * numbers saturate at UINT64_MAX. */
struct range_spec {
	uint64_t first, last;
	bool open;           /* "first-": to the end (last unset) */
	bool suffix;         /* "-last": the last `last` bytes (first unset) */
};
bool range_s3(const char *hdr, struct range_spec *r);

/* Does an If-Match / If-None-Match list name etag (quoted, as the ETag
 * header sends it)?  "*" alone names any.  ETAG_WEAK: a W/ before an
 * entry is ignored.  ETAG_S3: an entry "*" names any, and an entry may
 * leave out the quotes. */
#define ETAG_WEAK 1
#define ETAG_S3   2
bool etag_listed(const char *list, const char *etag, int flags);

#endif
