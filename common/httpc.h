/* httpc.h -- the volume client: every HTTP request the master and the
 * tools make goes through here, the only file that includes curl.h.
 *
 * Each thread keeps its handles (and so its keep-alive connections to the
 * volumes); httpc_thread_cleanup parks them at thread exit for the next
 * thread. */
#ifndef MKV_HTTPC_H
#define MKV_HTTPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include "util.h"

/* Must be called once, before threads start. */
void httpc_global_init(void);

/* fn(url, status) for every transfer that ends (status -1: no answer),
 * from the thread that ran it: the master counts each volume's requests.
 * Set once, before threads start. */
void httpc_observe(void (*fn)(const char *url, int status));

/* Give this thread's handles back (call at thread exit): they are parked,
 * connections and all, for the next thread that needs them. */
void httpc_thread_cleanup(void);

/* The master's URL prefix ("http://host:port"; NULL: none): the commands
 * talk to it too.  With a volume secret (common/volsign.h), every request
 * is signed for its method as it starts (VOLSIGN_SELF_TTL), but those to
 * URLs under prefix; with user ("ID:SECRET"), those are signed as curl
 * --aws-sigv4 "aws:amz:us-east-1:s3" --user user does, for a master with
 * -keys.  Both are copied (up to 1023 bytes).  Before any transfer. */
void httpc_master(const char *prefix, const char *user);

/* Why a request to a volume the health check marked down failed (at once,
 * not at its deadline), the same from both clients. */
#define HTTPC_DOWN_ERR "its volume was marked down by the health check"

/* ---- volumes over TLS ----
 * A -volumes entry written https://host:port is reached over TLS; records
 * and names keep host:port.  vol_scheme strips an entry's scheme and
 * marks an https one (at start, before threads): returns what follows it.
 * vol_tls: is loc[0..len) ("host:port", "host:port/svNN") a marked one?
 * libcurl verifies every https peer (volumes and -master) by vol_cacert
 * (vconn.h: -cacert FILE), else by the system's CAs, as vconn.c does. */
const char *vol_scheme(const char *entry);
bool vol_tls(const char *loc, size_t len);
#define VOL_PREFIX(loc, len) (vol_tls(loc, len) ? "https://" : "http://")

/* The URL of the blob at path (placement_path's) on volume loc
 * ("host:port" or "host:port/svNN"): a heap string. */
char *httpc_url(const char *loc, const char *path);

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
	bool timed_out;          /* no answer (or no progress) within the time allowed */
	char err[256];           /* curl's reason when status is -1 */
};

/* The outcome of a fan-out of method (vconn_wait's, vconn_fanout's): how
 * many of reqs[0..n) answered 2xx, or for a DELETE were gone (2xx, or 404:
 * already: the one rule of every DELETE of a copy); ok[i] (ok may be
 * NULL) says which.  Each other is logged as "<who><method> <url> failed
 * (<status>[: <reason>])". */
int httpc_outcome(const char *who, const char *method, const struct httpc_req *reqs, int n,
		  bool *ok);

/* ---- one streamed request: a GET (or HEAD), or a PUT from a reader ---- */
struct httpc_call {
	const char *url;
	const char *range;       /* a Range header's value, or NULL */
	bool head;               /* HEAD: no body */
	bool follow;             /* follow redirects (at most 4) */
	long connect_ms;         /* 0: 10 s */
	long timeout_ms;         /* the whole transfer, 0: none */
	long stall_s;            /* fail when nothing moved for this long, 0: never */
	long bufsize;            /* body pieces up to this size, 0: libcurl's */
	/* Every header line of every answer, the status line and the empty
	 * line that ends them included; status is that answer's.  false
	 * stops the transfer. */
	bool (*header)(void *ctx, int status, const char *line, size_t len);
	/* A piece of the answer's body; false stops the transfer. */
	bool (*body)(void *ctx, const char *p, size_t n);
	/* Set for a PUT of size bytes: fills p with up to n (a count, 0 at
	 * the end, -1 to fail). */
	ssize_t (*read)(void *ctx, char *p, size_t n);
	uint64_t size;
	/* When set: once an answer came, the md5 (hex) of the bytes read (a
	 * PUT) or of the 200's body; else "". */
	char *md5;
	void *ctx;
	/* Another method (REBALANCE ...), with no body; NULL: GET, or HEAD
	 * (head), or PUT (read). */
	const char *method;
	/* More request headers, "Name: value" each, NULL-terminated; or NULL. */
	const char *const *headers;
	/* url goes as it is, never signed (the health check's probe of a
	 * volume that should refuse it). */
	bool nosign;
};
/* Returns the final status, or -1 with err (256 bytes) when the transfer
 * failed or a callback stopped it. */
int httpc_call(const struct httpc_call *c, char *err);

/* Copy the value of header line p[0..len) into out (n bytes) when the
 * line is `name: value`. */
bool httpc_header(const char *p, size_t len, const char *name, char *out, size_t n);
/* An HTTP date in any of its three forms (RFC 1123, RFC 850, asctime) as
 * unix seconds; -1 when s is none (or NULL).  libcurl's curl_getdate: it
 * also takes a few looser forms (no weekday, a numeric zone). */
time_t httpc_parse_date(const char *s);

/* ---- the streaming engine: one source, a ring, its readers ----
 *
 * Every body that passes through a process without being held whole
 * passes through one of these: a ring of cap bytes, so memory does not
 * depend on the body's size.  Its source is a producer on another thread
 * (httpc_stream_feed, or httpc_stream_feed_wait that blocks while the ring
 * is full), or a GET (httpc_copy_to).  Its readers are one PUT per reqs[i].url,
 * driven by httpc_stream_run on the calling thread (the outcome lands in
 * reqs[i]), or one pull reader (cfg.readable set: httpc_stream_read).  A
 * body of at most HTTPC_SMALL_MAX bytes that is complete (and of length
 * clen) when the run starts goes whole, with the head, in one request per
 * replica. */
#define HTTPC_SMALL_MAX (64u << 10)
/* wake(arg) is called, with the stream's lock held, from the run's thread
 * when ring space freed after feed took less than offered; never after
 * httpc_stream_quiet returned. */
struct httpc_stream_cfg {
	struct httpc_req *reqs;  /* the replicas: url in, outcome out */
	int n;
	int64_t clen;            /* the body's length, -1: unknown (chunked) */
	size_t cap;              /* ring bytes */
	long connect_ms;
	long stall_ms;           /* a replica that takes no bytes this long fails (timed_out) */
	bool all;                /* drive every replica to its end even after one failed */
	void (*wake)(void *);
	void *arg;
	/* When set, asked about every replica still running, at least every
	 * 100 ms: true fails replica i at once (a volume the health check
	 * marked down answers nothing until a timeout far longer). */
	bool (*down)(void *down_arg, int i);
	void *down_arg;
	/* A pull reader (n is 0): readable(arg), without the stream's lock,
	 * once bytes (or the end) came after httpc_stream_read found none. */
	void (*readable)(void *);
};
struct httpc_stream;
struct httpc_stream *httpc_stream_new(const struct httpc_stream_cfg *cfg);
/* Offer body bytes; returns how many were taken (fewer when the ring is
 * full: wait for wake, then offer the rest). */
size_t httpc_stream_feed(struct httpc_stream *s, const char *p, size_t n);
/* The same, but wait (up to ms) for room when the ring is full: 0 taken
 * means none came in time, or the stream was aborted
 * (httpc_stream_aborted). */
size_t httpc_stream_feed_wait(struct httpc_stream *s, const char *p, size_t n, long ms);
bool httpc_stream_aborted(struct httpc_stream *s);
/* The pull reader's next bytes into out: their count, 0 when none yet
 * (cfg.readable is called when some come), HTTPC_STREAM_END at the end,
 * HTTPC_STREAM_ABORTED when it was aborted. */
#define HTTPC_STREAM_END (-1)
#define HTTPC_STREAM_ABORTED (-2)
ssize_t httpc_stream_read(struct httpc_stream *s, char *out, size_t max);
/* The body is complete; md5 (hex) of what was fed (md5 may be NULL; ""
 * for a pull reader's stream). */
void httpc_stream_finish(struct httpc_stream *s, char md5[33]);
/* Stop: the PUTs fail (a volume never installs a partial body). */
void httpc_stream_abort(struct httpc_stream *s);
/* No wake() once this returns. */
void httpc_stream_quiet(struct httpc_stream *s);
/* Drive the PUTs until every replica is done, or (without cfg->all) one
 * failed.  Returns the index of the first that failed, or -1. */
int httpc_stream_run(struct httpc_stream *s);
/* httpc_stream_run on this thread's event loop, for a small body that is
 * complete (see above): returns at once, and done(arg, first) gets what
 * httpc_stream_run would have returned.  -1 (nothing started) for any
 * other body, or on a thread without a loop: call httpc_stream_run. */
int httpc_stream_run_async(struct httpc_stream *s, void (*done)(void *arg, int first), void *arg);
/* Wait for httpc_stream_finish (true) or httpc_stream_abort (false);
 * *fed: how many bytes were fed. */
bool httpc_stream_wait_end(struct httpc_stream *s, uint64_t *fed);
void httpc_stream_free(struct httpc_stream *s);

/* DELETE the blob at path (placement_path's) on each of locs[0..n) at
 * once, each within timeout_ms.  Returns how many are gone (2xx, or 404:
 * already).  Each failure is logged as "<who>DELETE <url> failed
 * (<status>[: <reason>])". */
int httpc_delete_all(char *const *locs, int n, const char *path, long timeout_ms,
		     const char *who);

/* Copy the blob at src_url to each of dst_urls[0..ndst), streamed
 * (httpc_copy_to: a ring, never whole in memory).  When md5 is a 32-hex
 * string the bytes read must match it, and a PUT gets its last bytes only
 * once they did: a volume renames only a complete body into place, so a
 * truncated or corrupt source leaves no copy.  Returns 0, 1 when the
 * source could not be read whole (missing, cut short) or did not match
 * md5, -1 when a destination failed; err (256 bytes) gets a reason when
 * non-zero.  ndst <= HTTPC_COPY_MAXDST. */
#define HTTPC_COPY_MAXDST 16
int httpc_copy_to(const char *src_url, char *const *dst_urls, int ndst, const char *md5,
	     long timeout_ms, char *err);

#endif
