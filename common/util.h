/* util.h -- allocation that never returns NULL, logging, small string functions.
 *
 * Allocation failure aborts the process: no caller handles a NULL from
 * xmalloc/xrealloc/xstrdup.  Logging goes to stderr, one line per call,
 * prefixed with the program name set by log_init(). */
#ifndef MKV_UTIL_H
#define MKV_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <time.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* printf into a fresh heap string; caller frees. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void log_init(const char *progname);
/* The servers' lines: each starts with the time (UTC, ISO 8601), and a
 * line logged on a thread serving a request names it ("PUT /key: ...");
 * log_request(NULL, NULL) when it is over. */
void log_stamps(void);
void log_request(const char *method, const char *target);
void log_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* log_msg then exit(1). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* An HTTP date, "Sun, 06 Nov 1994 08:49:37 GMT" (29 characters). */
#define HTTP_DATE_LEN 30
void http_date(time_t t, char out[HTTP_DATE_LEN]);

/* Milliseconds from a monotonic clock. */
uint64_t now_ms(void);
uint64_t now_ns(void);
/* pthread_cond_timedwait for at most ms milliseconds (mu held). */
void cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ms);

/* Asking again a server that turned a request away for now.  Before
 * attempt n (0, 1, ...), retry_wait(p, n) returns false when p allows no
 * attempt n, else sleeps (not before attempt 0; then p.ms, doubled before
 * each later one when p.doubling) and returns true. */
struct retry {
	int tries;      /* attempts in all */
	unsigned ms;
	bool doubling;
};
/* Busy (503, or no answer): again after 0.5 s, 1 s, 2 s. */
#define RETRY_BUSY ((struct retry){4, 500, true})
/* Another write of the key runs (409); it ends soon: every 0.1 s for 2 s. */
#define RETRY_LOCKED ((struct retry){21, 100, false})
bool retry_wait(struct retry p, int n);

/* The raw value of query parameter name in q ("a=1&b&c=x"), *vlen its
 * length (0 for a bare "b"); NULL when the name does not occur. */
const char *query_param(const char *q, const char *name, size_t *vlen);

/* Does the raw query string ask for ?list or ?unlinked? */
bool is_list_query(const char *query);

/* Hex: n bytes as 2n lowercase digits and a NUL; one digit's value (either
 * case) or -1; the byte "%XX" at p stands for (left: the bytes readable
 * from p), or -1. */
void to_hex(const void *in, size_t n, char *out);
int hex_value(int c);
int pct_value(const char *p, size_t left);

/* Parse a whole decimal string into [min,max]; false on "", "-1",
 * "12x", overflow. */
bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Parse a duration as Go's time.ParseDuration does ("1s", "500ms", "2m",
 * "1h30m", "1.5s", "300us"; no sign but "+"), or a bare number of seconds;
 * at most a year.  Milliseconds, rounded down, but never from more than
 * nothing to 0. */
bool parse_duration_ms(const char *s, uint64_t *out_ms);

/* A growable byte buffer. */
struct buf {
	char *data;
	size_t len, cap;
};
/* Room for n more bytes (and a NUL) at the end of b: where they go. */
char *buf_room(struct buf *b, size_t n);
void buf_append(struct buf *b, const void *p, size_t n);
void buf_puts(struct buf *b, const char *s);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(struct buf *b);
/* Percent-encode s[0..n) onto b: every byte but [A-Za-z0-9-._~] (and '/'
 * when keep_slash).  url_escape: the same into a fresh heap string. */
void buf_url_escape(struct buf *b, const char *s, size_t n, bool keep_slash);
char *url_escape(const char *s, size_t n, bool keep_slash);

/* Compare a[0..al) and b[0..bl) in byte order, as the index sorts keys. */
int bytes_cmp(const char *a, size_t al, const char *b, size_t bl);

#endif
