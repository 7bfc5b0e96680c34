/* range.h -- HTTP Range headers, parsed exactly as nginx 1.22 does with
 * max_ranges 1 (see deploy/nginx), so both kinds of volume answer alike;
 * and the validators of the conditional headers, compared as nginx does. */
#ifndef VOL_RANGE_H
#define VOL_RANGE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

enum vol_range {
	VOL_RANGE_ALL,       /* no usable Range: answer 200 with the whole file */
	VOL_RANGE_ONE,       /* answer 206 with [*start, *start + *len) */
	VOL_RANGE_BAD,       /* answer 416 with Content-Range: bytes * / size */
};

/* hdr may be NULL (no Range header).  Several satisfiable ranges give
 * VOL_RANGE_ALL; unsatisfiable ones among satisfiable ones are dropped.
 * *start and *len mean something only with VOL_RANGE_ONE. */
enum vol_range vol_range_parse(const char *hdr, uint64_t size, uint64_t *start, uint64_t *len);

/* Does the If-Match / If-None-Match list name etag ("*" names any)?  weak
 * (If-None-Match): a W/ before an entry is ignored. */
bool vol_etag_listed(const char *list, const char *etag, bool weak);

/* An HTTP date in any of its three forms (RFC 1123, RFC 850, asctime), or
 * -1 when it is none of them. */
time_t vol_http_time(const char *s);

#endif
