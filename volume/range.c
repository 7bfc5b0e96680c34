/* range.c -- see range.h.  vol_range_parse transcribes
 * ngx_http_range_parse(); vol_etag_listed, ngx_http_test_if_match(). */
#include "range.h"

#include <string.h>
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

bool vol_etag_listed(const char *list, const char *etag, bool weak)
{
	size_t n = strlen(etag);
	const char *p = list, *end = list + strlen(list);
	if (!strcmp(list, "*"))
		return true;
	while (p < end) {
		if (weak && end - p > 2 && p[0] == 'W' && p[1] == '/')
			p += 2;
		if ((size_t)(end - p) < n)
			return false;
		if (!strncmp(p, etag, n)) {
			p += n;
			while (p < end && (*p == ' ' || *p == '\t'))
				p++;
			if (p == end || *p == ',')
				return true;
		}
		while (p < end && *p != ',')
			p++;
		while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
			p++;
	}
	return false;
}

/* The process never calls setlocale, so %a and %b are English. */
time_t vol_http_time(const char *s)
{
	static const char *const forms[] = {
		"%a, %d %b %Y %H:%M:%S GMT",   /* Sun, 06 Nov 1994 08:49:37 GMT */
		"%A, %d-%b-%y %H:%M:%S GMT",   /* Sunday, 06-Nov-94 08:49:37 GMT */
		"%a %b %e %H:%M:%S %Y",        /* Sun Nov  6 08:49:37 1994 */
	};
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		struct tm tm = {0};
		const char *end = strptime(s, forms[i], &tm);
		if (end && !*end)
			return timegm(&tm);
	}
	return -1;
}
