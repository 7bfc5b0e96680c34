/* range.c -- see range.h.  A transcription of ngx_http_range_parse(). */
#include "range.h"

#include <stdbool.h>
#include <strings.h>

#define OFF_MAX INT64_MAX

/* Digits into *v; false on overflow of off_t. */
static bool digits(const char **pp, int64_t *v)
{
	const char *p = *pp;
	*v = 0;
	while (*p >= '0' && *p <= '9') {
		if (*v > (OFF_MAX - (*p - '0')) / 10)
			return false;
		*v = *v * 10 + (*p++ - '0');
	}
	*pp = p;
	return true;
}

static void spaces(const char **p)
{
	while (**p == ' ')
		(*p)++;
}

enum vol_range vol_range_parse(const char *hdr, uint64_t usize, uint64_t *ostart, uint64_t *olen)
{
	const char *p;
	int64_t size = (int64_t)usize;
	int found = 0;

	/* nginx ignores a header shorter than "bytes=N" or of another unit. */
	if (!hdr || strncasecmp(hdr, "bytes=", 6) || !hdr[6])
		return VOL_RANGE_ALL;
	p = hdr + 6;
	for (;;) {
		int64_t start = 0, end = 0;
		bool suffix = false;

		spaces(&p);
		if (*p != '-') {
			if (*p < '0' || *p > '9' || !digits(&p, &start))
				return VOL_RANGE_BAD;
			spaces(&p);
			if (*p++ != '-')
				return VOL_RANGE_BAD;
			spaces(&p);
			if (*p == ',' || *p == '\0') {
				end = size;
				goto found;
			}
		} else {
			suffix = true;
			p++;
		}
		if (*p < '0' || *p > '9' || !digits(&p, &end))
			return VOL_RANGE_BAD;
		spaces(&p);
		if (*p != ',' && *p != '\0')
			return VOL_RANGE_BAD;
		if (suffix) {
			start = end < size ? size - end : 0;
			end = size - 1;
		}
		end = end >= size ? size : end + 1;
found:
		if (start < end) {
			if (found++ == 1)
				return VOL_RANGE_ALL;   /* a second range: past max_ranges */
			*ostart = (uint64_t)start;
			*olen = (uint64_t)(end - start);
		} else if (start == 0) {
			return VOL_RANGE_ALL;
		}
		if (*p++ != ',')
			break;
	}
	if (!found)
		return VOL_RANGE_BAD;
	return VOL_RANGE_ONE;
}
