/* httpc.h -- small blocking HTTP client on libcurl, for talking to volumes.
 *
 * Each thread keeps one curl handle so connections to volumes are reused;
 * handles of threads that end are reused by the next ones.
 * Only this module (and the streaming parts of master/) include curl.h. */
#ifndef MKV_HTTPC_H
#define MKV_HTTPC_H

#include <stdbool.h>
#include <stddef.h>
#include "util.h"

/* Must be called once, before threads start. */
void httpc_global_init(void);

/* Perform method on url with an optional body (body may be NULL for none).
 * Response body goes to resp when non-NULL (appended; caller frees) and is
 * capped at resp_max bytes (0 = no cap; past the cap the transfer fails).
 * Returns the HTTP status, or -1 when no answer came (then err, if given,
 * holds curl's reason, up to 256 bytes).  timeout_ms bounds the whole
 * transfer (0 = none). */
int httpc_do(const char *method, const char *url, const void *body, size_t bodylen,
	     long timeout_ms, struct buf *resp, size_t resp_max, char *err);

/* One request of a fan-out: url in, the answer out. */
struct httpc_req {
	const char *url;
	int status;              /* HTTP status, or -1 when no answer came */
	bool timed_out;          /* no answer within timeout_ms */
	char err[256];           /* curl's reason when status is -1 */
};

/* Perform method on every reqs[i].url at once, the same body (NULL: none;
 * sent with the request head, no `Expect: 100-continue`) to each, over this
 * thread's keep-alive connections, and return when all have answered or
 * failed.  Each transfer is bounded by timeout_ms (0 = none).  For bodies
 * that fit in memory: a volume's answer body is read and dropped. */
void httpc_fanout(const char *method, struct httpc_req *reqs, int n, const void *body,
		  size_t bodylen, long timeout_ms);

/* Give this thread's handles back (call at thread exit): they are parked,
 * connections and all, for the next thread that needs them. */
void httpc_thread_cleanup(void);

#endif
