/* util.c -- see util.h. */
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog = "mkv";

/* p, unless an allocation failed: then abort. */
static void *live(void *p)
{
	if (!p) {
		fprintf(stderr, "%s: out of memory\n", prog);
		abort();
	}
	return p;
}

void *xmalloc(size_t n)
{
	return live(malloc(n ? n : 1));
}

void *xcalloc(size_t n, size_t size)
{
	return live(calloc(n ? n : 1, size ? size : 1));
}

void *xrealloc(void *p, size_t n)
{
	return live(realloc(p, n ? n : 1));
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = live(NULL);
	va_end(ap);
	return s;
}

void log_init(const char *progname)
{
	const char *slash = strrchr(progname, '/');
	prog = slash ? slash + 1 : progname;
}

static bool stamps;
static _Thread_local const char *req_method, *req_target;

void log_stamps(void)
{
	stamps = true;
}

void log_request(const char *method, const char *target)
{
	req_method = method;
	req_target = target;
}

static void vlog(const char *fmt, va_list ap)
{
	char line[4096], when[48] = "";
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	if (n < 0)
		return;
	if (stamps) {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = (int)strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(when + n, sizeof(when) - (size_t)n, ".%03ldZ ", ts.tv_nsec / 1000000);
	}
	if (req_method)
		fprintf(stderr, "%s%s: %s %s: %s\n", when, prog, req_method,
			req_target ? req_target : "", line);
	else
		fprintf(stderr, "%s%s: %s\n", when, prog, line);
}

void log_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
	exit(1);
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t now_ms(void)
{
	return now_ns() / 1000000;
}

bool retry_wait(struct retry p, int n)
{
	if (n >= p.tries)
		return false;
	if (n)
		usleep((p.doubling ? p.ms << (n - 1) : p.ms) * 1000u);
	return true;
}

void cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + ms % 1000 * 1000000u;
	ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	pthread_cond_timedwait(cv, mu, &ts);
}

void to_hex(const void *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (const unsigned char *d = in; n--; d++) {
		*out++ = digits[*d >> 4];
		*out++ = digits[*d & 15];
	}
	*out = '\0';
}

int pct_value(const char *p, size_t left)
{
	int hi = left >= 3 && p[0] == '%' ? hex_value(p[1]) : -1;
	int lo = hi < 0 ? -1 : hex_value(p[2]);
	return lo < 0 ? -1 : hi << 4 | lo;
}

int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;
	if (!s || *s < '0' || *s > '9')   /* strtoull would take blanks and a sign */
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end || errno || v < min || v > max)
		return false;
	*out = v;
	return true;
}

bool parse_duration_ms(const char *s, uint64_t *out_ms)
{
	/* Go's time.ParseDuration units, in ns; "µs" in either code point */
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {
		{"ns", 1}, {"us", 1000}, {"\xc2\xb5s", 1000}, {"\xce\xbcs", 1000},
		{"ms", 1000000}, {"s", 1000000000}, {"m", 60000000000}, {"h", 3600000000000},
	};
	const uint64_t max = 365 * 86400 * UINT64_C(1000000000);
	const char *start;
	uint64_t total = 0;
	if (!s || !*s)
		return false;
	s += *s == '+';
	start = s;
	while (*s) {
		const char *comp = s;
		uint64_t whole = 0, frac = 0, scale = 1, ns;
		bool digits = false, bare;
		size_t ulen = 0, u;
		for (; *s >= '0' && *s <= '9'; s++, digits = true)
			if ((whole = whole * 10 + (uint64_t)(*s - '0')) > max)
				return false;
		if (*s == '.')
			for (s++; *s >= '0' && *s <= '9'; s++, digits = true)
				if (scale < UINT64_C(1000000000000000))   /* finer digits add nothing */
					frac = frac * 10 + (uint64_t)(*s - '0'), scale *= 10;
		if (!digits)
			return false;
		while (s[ulen] && s[ulen] != '.' && (s[ulen] < '0' || s[ulen] > '9'))
			ulen++;
		bare = !ulen && !*s && comp == start;         /* the whole value is a number */
		for (u = 0; !bare && u < sizeof(units) / sizeof(units[0]); u++)
			if (strlen(units[u].name) == ulen && !memcmp(s, units[u].name, ulen))
				break;
		if (!bare && u == sizeof(units) / sizeof(units[0]))
			return false;
		ns = bare ? 1000000000 : units[u].ns;        /* a bare number: seconds */
		if (whole > max / ns)
			return false;
		total += whole * ns + (uint64_t)((double)frac * (double)ns / (double)scale);
		if (total > max)
			return false;
		s += ulen;
	}
	*out_ms = total && total < 1000000 ? 1 : total / 1000000;   /* 100us: 1 ms, not none */
	return true;
}

char *buf_room(struct buf *b, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		b->data = xrealloc(b->data, cap);
		b->cap = cap;
	}
	return b->data + b->len;
}

void buf_append(struct buf *b, const void *p, size_t n)
{
	memcpy(buf_room(b, n), p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void buf_puts(struct buf *b, const char *s)
{
	buf_append(b, s, strlen(s));
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;
	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		live(NULL);
	buf_append(b, s, (size_t)n);
	free(s);
}

void buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

/* The process never calls setlocale, so %a and %b are English. */
void http_date(time_t t, char out[HTTP_DATE_LEN])
{
	struct tm tm;
	if (!gmtime_r(&t, &tm) || !strftime(out, HTTP_DATE_LEN, "%a, %d %b %Y %H:%M:%S GMT", &tm))
		strcpy(out, "Thu, 01 Jan 1970 00:00:00 GMT");
}

const char *query_param(const char *q, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	while (q && *q) {
		size_t len = strcspn(q, "&");
		if (len >= nl && !memcmp(q, name, nl) && (len == nl || q[nl] == '=')) {
			*vlen = len > nl ? len - nl - 1 : 0;
			return len > nl ? q + nl + 1 : q + nl;
		}
		q += len;
		if (*q == '&')
			q++;
	}
	return NULL;
}

void buf_url_escape(struct buf *b, const char *s, size_t n, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
			buf_append(b, &s[i], 1);
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 15]};
			buf_append(b, e, 3);
		}
	}
}

char *url_escape(const char *s, size_t n, bool keep_slash)
{
	struct buf b = {0};
	buf_url_escape(&b, s, n, keep_slash);
	buf_append(&b, "", 1);
	return b.data;
}

int bytes_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

bool is_list_query(const char *query)
{
	size_t n;
	return query_param(query, "list", &n) || query_param(query, "unlinked", &n);
}
