/* path.c -- see path.h. */
#include "path.h"

#include <stdint.h>

#include "../common/util.h"

/* Decoding happens before splitting into segments, so "%2e%2e" is "..",
 * "%2f" is a separator and "%00" is caught like a raw NUL: nothing can
 * smuggle a segment past the checks below. */
int vol_path_clean(const char *raw, char *out, size_t outsz, bool *dir, const char **why)
{
	size_t n = 0, seg = 0;   /* seg: where the current segment starts in out */
	int prev = 0;            /* previous decoded byte */
	bool dot = false;        /* the last segment was "." */

	*dir = false;
	if (raw[0] != '/') {
		*why = "path must start with /";
		return 400;
	}
	for (const unsigned char *p = (const unsigned char *)raw;; p++) {
		int c = *p;
		if (c == '%') {
			/* raw ends in a NUL, which stops pct_value before the end */
			if ((c = pct_value((const char *)p, SIZE_MAX)) < 0) {
				*why = "bad percent-encoding";
				return 400;
			}
			if (c == 0) {
				*why = "NUL byte in path";
				return 400;
			}
			p += 2;
		}
		if (c == '/' || c == '\0') {
			size_t len = n - seg;
			if (len == 2 && out[seg] == '.' && out[seg + 1] == '.') {
				*why = "\"..\" in path";
				return 400;
			}
			dot = len == 1 && out[seg] == '.';
			if (dot)
				n = seg;        /* drop "." */
			if (n > 0 && n == seg)
				n--;            /* empty segment: drop its '/' too */
			if (c == '\0') {
				*dir = prev == '/' || dot || n == 0;
				break;
			}
			if (n > 0)
				out[n++] = '/';
			seg = n;
			prev = c;
			continue;
		}
		prev = c;
		if (n + 2 > outsz) {
			*why = "path too long";
			return 414;
		}
		out[n++] = (char)c;
	}
	out[n] = '\0';
	return 0;
}
