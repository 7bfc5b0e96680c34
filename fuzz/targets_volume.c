/* targets_volume.c -- fuzz targets for mkv-volume's request parsing (see
 * targets.h): the Range header and the path that becomes a file name. */
#include "targets.h"
#include "../common/util.h"
#include "../volume/path.h"
#include "../common/range.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                                   \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz property broken: %s (%s:%d): ", #cond, \
				__FILE__, __LINE__);                            \
			fprintf(stderr, __VA_ARGS__);                           \
			fputc('\n', stderr);                                    \
			abort();                                                \
		}                                                               \
	} while (0)

/* The bytes up to the first NUL, as the C string a header arrives as. */
static char *cstr(const uint8_t *p, size_t n)
{
	const uint8_t *z = memchr(p, '\0', n);
	size_t l = z ? (size_t)(z - p) : n;
	char *s = xmalloc(l + 1);
	memcpy(s, p, l);
	s[l] = '\0';
	return s;
}

/* ---- Range ---- */

/* "bytes=A-B", "bytes=A-" or "bytes=-B" with plain digits, as nginx reads
 * one range (max_ranges 1); false for anything else. */
static bool ref_one_range(const char *h, uint64_t size, enum range *res, uint64_t *start,
			  uint64_t *len)
{
	uint64_t a = 0, b = 0;
	bool has_a = false, has_b = false;
	const char *p;
	if (strncasecmp(h, "bytes=", 6))
		return false;
	p = h + 6;
	for (; *p >= '0' && *p <= '9'; p++, has_a = true) {
		if (a > 100000000000000000ull)
			return false;
		a = a * 10 + (uint64_t)(*p - '0');
	}
	if (*p++ != '-')
		return false;
	for (; *p >= '0' && *p <= '9'; p++, has_b = true) {
		if (b > 100000000000000000ull)
			return false;
		b = b * 10 + (uint64_t)(*p - '0');
	}
	if (*p || (!has_a && !has_b) || size > INT64_MAX)
		return false;
	if (!has_a) {                /* suffix: the last b bytes */
		a = b < size ? size - b : 0;
		b = size;
	} else if (!has_b || b >= size) {
		b = size;
	} else {
		b++;
	}
	if (a < b) {
		*res = RANGE_ONE;
		*start = a;
		*len = b - a;
	} else {
		*res = a == 0 ? RANGE_ALL : RANGE_BAD;
	}
	return true;
}

void fuzz_range(const uint8_t *data, size_t n)
{
	uint64_t size = 0, start = ~0ull, len = ~0ull, rs = 0, rlen = 0;
	enum range r, want;
	char *h;
	/* byte 0 picks how the size is made: small, or any 63-bit value */
	if (n >= 1 && data[0] & 1) {
		for (size_t i = 1; i < 9 && i < n; i++)
			size = size << 8 | data[i];
		size &= INT64_MAX;
		data += n < 9 ? n : 9;
		n -= n < 9 ? n : 9;
	} else if (n >= 2) {
		size = data[1];
		data += 2;
		n -= 2;
	} else {
		r = range_parse(NULL, 100, &start, &len);
		FUZZ_CHECK(r == RANGE_ALL, "no header must mean the whole file");
		return;
	}
	h = cstr(data, n);
	r = range_parse(h, size, &start, &len);
	FUZZ_CHECK(r == RANGE_ALL || r == RANGE_ONE || r == RANGE_BAD, "result %d",
		   (int)r);
	if (r == RANGE_ONE)
		FUZZ_CHECK(len >= 1 && start < size && len <= size - start,
			   "range [%llu, +%llu) outside a file of %llu bytes",
			   (unsigned long long)start, (unsigned long long)len,
			   (unsigned long long)size);
	if (ref_one_range(h, size, &want, &rs, &rlen)) {
		FUZZ_CHECK(r == want, "\"%s\" on %llu bytes: %d, want %d", h,
			   (unsigned long long)size, (int)r, (int)want);
		if (r == RANGE_ONE)
			FUZZ_CHECK(start == rs && len == rlen, "\"%s\": [%llu,+%llu), want [%llu,+%llu)",
				   h, (unsigned long long)start, (unsigned long long)len,
				   (unsigned long long)rs, (unsigned long long)rlen);
	}
	free(h);
}

/* ---- request path -> file path ---- */

static int ref_hex(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decode, split on '/', drop "" and ".", refuse ".." and NUL; join.
 * Returns 0 or 400; *dir as path.h says; *dots when a "." or ".."
 * segment was seen (the code under test may run out of room on those). */
static int ref_clean(const char *raw, char *out, bool *dir, bool *dots)
{
	size_t n = strlen(raw), d = 0, o = 0;
	char *dec = xmalloc(n + 1);
	int st = 0;
	*dir = false;
	*dots = false;
	if (raw[0] != '/') {
		free(dec);
		return 400;
	}
	for (size_t i = 0; i < n; i++) {
		if (raw[i] == '%') {
			if (ref_hex((unsigned char)raw[i + 1]) < 0 || ref_hex((unsigned char)raw[i + 2]) < 0) {
				free(dec);
				return 400;
			}
			dec[d] = (char)(ref_hex((unsigned char)raw[i + 1]) * 16 +
					ref_hex((unsigned char)raw[i + 2]));
			if (!dec[d++]) {
				free(dec);
				return 400;
			}
			i += 2;
		} else {
			dec[d++] = raw[i];
		}
	}
	dec[d] = '\0';
	for (char *s = dec, *e;; s = e + 1) {
		size_t l;
		e = strchr(s, '/');
		if (!e)
			e = s + strlen(s);
		l = (size_t)(e - s);
		if (l == 2 && !memcmp(s, "..", 2)) {
			*dots = true;
			st = 400;
			break;
		}
		if (l == 1 && *s == '.')
			*dots = true;
		else if (l) {
			if (o)
				out[o++] = '/';
			memcpy(out + o, s, l);
			o += l;
		}
		if (!*e) {
			*dir = d > 0 && (dec[d - 1] == '/' || (l == 1 && *s == '.'));
			break;
		}
	}
	out[o] = '\0';
	if (!o)
		*dir = true;
	free(dec);
	return st;
}

void fuzz_path(const uint8_t *data, size_t n)
{
	size_t outsz = n && data[0] < 128 ? (size_t)data[0] + 1 : 4096;
	char *raw = cstr(n ? data + 1 : data, n ? n - 1 : 0);
	char *out = xmalloc(outsz), *ref = xmalloc(3 * strlen(raw) + 2);
	const char *why = NULL;
	bool dir = false, rdir, dots;
	int st = vol_path_clean(raw, out, outsz, &dir, &why);
	int rst = ref_clean(raw, ref, &rdir, &dots);

	FUZZ_CHECK(st == 0 || st == 400 || st == 414, "status %d", st);
	if (st) {
		FUZZ_CHECK(why && *why, "status %d without a reason", st);
		if (rst == 0 && !dots)
			FUZZ_CHECK(st == 414 && strlen(ref) + 1 > outsz,
				   "\"%s\" refused (%d: %s) but cleans to \"%s\" (%zu bytes room)",
				   raw, st, why, ref, outsz);
		if (rst == 0 && st == 400)
			FUZZ_CHECK(0, "\"%s\" refused with 400 (%s), cleans to \"%s\"", raw, why, ref);
	} else {
		size_t l = strlen(out);
		FUZZ_CHECK(l < outsz, "wrote %zu bytes into %zu", l + 1, outsz);
		FUZZ_CHECK(rst == 0, "\"%s\" accepted as \"%s\", but it holds .., NUL or bad %%XX",
			   raw, out);
		FUZZ_CHECK(!strcmp(out, ref), "\"%s\" cleaned to \"%s\", want \"%s\"", raw, out, ref);
		FUZZ_CHECK(dir == rdir, "\"%s\": dir %d, want %d", raw, dir, rdir);
		FUZZ_CHECK(out[0] != '/' && !strstr(out, "//") && strcmp(out, "..") &&
				   strncmp(out, "../", 3) && !strstr(out, "/../") &&
				   (l < 3 || strcmp(out + l - 3, "/..")),
			   "\"%s\" cleaned to an unsafe \"%s\"", raw, out);
	}
	free(raw);
	free(out);
	free(ref);
}
