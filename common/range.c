/* range.c -- see range.h.  range_parse transcribes ngx_http_range_parse();
 * etag_listed, ngx_http_test_if_match(). */
#include "range.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

static void spaces(const char **p)
{
	while (**p == ' ')
		(*p)++;
}

/* The digits at *p, saturated at UINT64_MAX. */
static uint64_t number(const char **p)
{
	uint64_t v = 0;
	for (; isdigit((unsigned char)**p); (*p)++) {
		unsigned d = (unsigned)(**p - '0');
		v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
	}
	return v;
}

/* One "first-last", "first-" or "-suffix" at *p; *p moves past it and the
 * spaces after it.  Spaces may come before each number; nginx also takes
 * them between the first number and the '-', S3 does not. */
static bool spec(const char **pp, bool s3, struct range_spec *r)
{
	const char *p = *pp;
	*r = (struct range_spec){0};
	spaces(&p);
	if (*p == '-') {
		r->suffix = true;
		p++;
	} else {
		if (!isdigit((unsigned char)*p))
			return false;
		r->first = number(&p);
		if (!s3)
			spaces(&p);
		if (*p++ != '-')
			return false;
		spaces(&p);
		r->open = *p == ',' || *p == '\0';
	}
	if (!r->open) {
		if (!isdigit((unsigned char)*p))
			return false;
		r->last = number(&p);
		spaces(&p);
	}
	*pp = p;
	return true;
}

enum range range_parse(const char *hdr, uint64_t usize, uint64_t *ostart, uint64_t *olen)
{
	int64_t size = (int64_t)usize;
	const char *p;
	int found = 0;

	/* nginx ignores a header shorter than "bytes=N" or of another unit. */
	if (!hdr || strncasecmp(hdr, "bytes=", 6) || !hdr[6])
		return RANGE_ALL;
	p = hdr + 6;
	for (;;) {
		struct range_spec r;
		int64_t start, end;
		/* numbers past off_t are malformed too */
		if (!spec(&p, false, &r) || (*p != ',' && *p != '\0') || r.first > INT64_MAX ||
		    r.last > INT64_MAX)
			return RANGE_BAD;
		start = (int64_t)r.first;
		end = (int64_t)r.last;
		if (r.suffix) {
			start = end < size ? size - end : 0;
			end = size;
		} else if (r.open || end >= size) {
			end = size;
		} else {
			end++;
		}
		if (start < end) {
			if (found++ == 1)
				return RANGE_ALL;   /* a second range: past max_ranges */
			*ostart = (uint64_t)start;
			*olen = (uint64_t)(end - start);
		} else if (start == 0) {
			return RANGE_ALL;
		}
		if (*p++ != ',')
			break;
	}
	return found ? RANGE_ONE : RANGE_BAD;
}

bool range_s3(const char *hdr, struct range_spec *r)
{
	const char *p = hdr;
	if (strncmp(hdr, "bytes=", 6))
		return false;
	p += 6;
	return spec(&p, true, r) && !*p && (r->open || r->suffix || r->first <= r->last);
}

bool etag_listed(const char *list, const char *etag, int flags)
{
	const char *ws = flags & ETAG_S3 ? " " : " \t";   /* S3 trims spaces only */
	size_t el = strlen(etag);
	if (!strcmp(list, "*"))
		return true;
	for (const char *p = list; *p; p += *p == ',') {
		const char *e = p + strspn(p, ws);
		size_t n = strcspn(e, ",");
		p = e + n;
		while (n && strchr(ws, e[n - 1]))
			n--;
		if ((flags & ETAG_S3) && n == 1 && e[0] == '*')
			return true;
		if ((flags & ETAG_WEAK) && n > 2 && !strncmp(e, "W/", 2))
			e += 2, n -= 2;
		if ((n == el && !memcmp(e, etag, n)) ||
		    ((flags & ETAG_S3) && el >= 2 && n == el - 2 && !memcmp(e, etag + 1, n)))
			return true;
	}
	return false;
}
