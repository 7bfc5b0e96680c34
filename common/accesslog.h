/* accesslog.h -- the access log: one line per request, nginx's combined
 * format with the request time added, written by a thread of its own so
 * that a slow or full disk never holds up a request.
 *
 * Lines go into a 1 MiB buffer; the writer swaps it for an empty one and
 * writes it out (every 100 ms, or sooner when it is half full).  A line
 * that finds the buffer full, or a write that fails (ENOSPC), is dropped
 * and counted (mkv_accesslog_dropped_lines_total). */
#ifndef MKV_ACCESSLOG_H
#define MKV_ACCESSLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Open path for appending ("-": stderr) and start the writer.  0, or -1
 * with the reason logged ("cannot open access log ..."). */
int accesslog_open(const char *path);
bool accesslog_on(void);
/* One request's line (any thread). */
struct accesslog_entry {
	const char *addr;        /* the client's address */
	const char *method, *target, *query, *version;   /* query may be NULL */
	int status;
	uint64_t bytes;          /* answer body bytes */
	const char *referer, *agent;   /* may be NULL: "-" */
	double seconds;          /* from the request's head to its end */
};
void accesslog_add(const struct accesslog_entry *e);
/* s, a query (or, when url, a target: what follows its '?'), into
 * out[0..cap) as nginx logs a variable ('"', '\\' and bytes outside
 * printable ASCII as \xHH), its signatures' values as "…"; NULL or "": "-". */
void accesslog_redact(char *out, size_t cap, const char *s, bool url);
/* Reopen the file by its name (SIGHUP: logrotate moved it); the writer
 * does it before its next write. */
void accesslog_reopen(void);
/* Write what is buffered, stop the writer, close the file. */
void accesslog_close(void);

#endif
