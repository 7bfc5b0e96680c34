/* ops.h -- the operator commands' shared parts: the worker pool,
 * progress line, streamed transfers and key listing that rebuild,
 * rebalance, verify, gc, put and get share.
 */
#ifndef MKV_OPS_H
#define MKV_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct index;

#define OPS_REASON 1024
#define OPS_ERR (OPS_REASON + 256)   /* every err buffer of the commands */
struct ops_why {              /* an answer's first bytes (ops_ask) */
	size_t n;
	char text[OPS_REASON + 1];
};

/* ---- shared by the commands (util.c) ---- */

/* Run fn(ctx, i) for i in [0, n) on `workers` threads of the pool
 * (common/spawn.h); returns when all are done. */
void ops_pool_run(int workers, size_t n, void (*fn)(void *ctx, size_t i), void *ctx);

/* For the commands (not the server), before any thread starts: SIGINT,
 * SIGTERM and SIGHUP end the process at once, as they would by default
 * (every command is safe to kill and rerun), but first log where it was
 * -- the current progress line, terminal or not -- as its last line.
 * Exit status 128 + the signal.  The thread that takes them also draws
 * the progress line. */
void ops_signals_init(void);
/* The progress line on stderr, one at a time: redrawn every 250 ms while
 * stderr is a terminal (and never otherwise).  line(ctx, out, n) formats
 * the text; after stop (which clears it) line is not called again. */
void ops_progress_start(void (*line)(void *ctx, char *out, size_t n), void *ctx);
void ops_progress_stop(void);

/* n per second over ms milliseconds (0 when ms is 0). */
double ops_per_s(double n, uint64_t ms);
/* The milliseconds since t0, also into dur as "1.2 s", "3 min 4 s" ... */
uint64_t ops_elapsed(uint64_t t0, char dur[32]);
/* Append ", ETA 3 min 4 s" to the line in out when 0 < done < total: the
 * rest at the pace of done in ms. */
void ops_eta(char *out, size_t n, uint64_t done, uint64_t total, uint64_t ms);

/* The index at db for a command, or NULL after logging "<who>: <why>"
 * and, when a master holds it (and hint is not NULL), "<who>: a master is
 * serving this index: <hint>".  Unless create, an index must already be
 * there: a mistyped -db is an error, not an empty index (in which gc
 * would take every blob for an orphan). */
struct index *ops_index_open(const char *db, bool create, const char *who, const char *hint);

/* The keys at hand, n of them: a batch of the index's records
 * (ops_index_each: keys and values, heap copies, NUL-terminated: a value
 * can be given to record_parse) or a page of the master's ?list
 * (ops_list_page: keys; with OPS_LIST_LOCATIONS, locs and md5s). */
struct ops_keys {
	char **keys, **vals;
	size_t *klens, *vlens;
	char **locs;          /* each key's replica URLs, one a line ("" when none is up) */
	char (*md5s)[33];     /* each key's md5, "" when unknown */
	size_t n;
};
/* Offline: every record of idx, a batch at a time, through fn(ctx, i) on
 * `workers` threads; while a batch runs, b holds it. */
void ops_index_each(struct index *idx, int workers, struct ops_keys *b,
		    void (*fn)(void *ctx, size_t i), void *ctx);

/* host ("http://h:p" or "h:p") + path[0..n) percent-encoded (but '/') +
 * query ("" or "?..."), as a heap string. */
char *ops_url(const char *host, const char *path, size_t n, const char *query);

/* At most 20 problems logged as "<who>: <text>", then one "<who>: more
 * problems: counted, not logged"; *logged counts them. */
void ops_note(unsigned long *logged, const char *who, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* key2path's inverse: the key (at most KEY_MAX bytes, into key[PATH_MAX_LEN])
 * whose blob sits at path "/xx/yy/<name>", or -1 when none would (then
 * the file is no blob at all). */
long ops_path_key(const char *path, char *key);

/* A root's directory names: "5d" -> 0x5d, -1 unless two lowercase hex
 * digits (as key2path makes them); "sv00".."svFFFF"? */
int ops_hash_dir(const char *name);
bool ops_subvolume_dir(const char *name);

#define OPS_LIST_MAX (256u << 20)   /* the largest volume listing accepted */
/* Offline rebalance: keys moved at once per -workers.  A move is a chain
 * of short requests (pull or copy, the index's sync, deletes), each
 * waiting on a volume's fsync, so one per worker leaves the volumes idle. */
#define OPS_MOVES_PER_WORKER 4
/* A JSON directory listing's array from a volume's answer to a GET, or
 * NULL with err (OPS_ERR bytes) saying why (ops_why; 404 included). */
struct json_t *ops_listing(int status, const char *body, size_t len, char *err);
/* A listing entry's name (NULL when it has none), and its *type: 'd' for a
 * directory, 'f' for a file, else 0. */
const char *ops_entry(struct json_t *e, char *type);

/* Many GETs in flight on one thread, at most `concurrency` at once and 64
 * to a host, pipelined by the volume client (fetch.c says why; vconn.h's
 * vconn_get: a loop of the thread's own runs them).  run() asks more(ctx)
 * for work while fewer than `concurrency` are queued or in flight; more()
 * adds GETs with ops_fetch_add and returns 1, returns 0 when it has none
 * yet, -1 when it never will; done() gets each answer (status, its body up
 * to OPS_LIST_MAX bytes) or -1 and err, and may add more.  run returns when
 * more() said -1 and every GET is answered.  URLs are "http://host:port/path". */
struct ops_fetch;
struct ops_fetch *ops_fetch_new(int concurrency);
void ops_fetch_add(struct ops_fetch *f, const char *url, void *req);
void ops_fetch_run(struct ops_fetch *f, int (*more)(void *ctx),
		   void (*done)(void *ctx, void *req, int status, const char *body, size_t len,
				const char *err),
		   void *ctx);
void ops_fetch_free(struct ops_fetch *f);

/* ---- streamed transfers for verify, rebalance, put and get (stream.c) ---- */

/* -rate: all reads that ask (rate=true below, or ops_rate_take) share at
 * most bytes_per_s (0: no cap).  Call before the workers start. */
void ops_rate_init(uint64_t bytes_per_s);
/* Book n bytes read; sleeps while the reads are ahead of the rate. */
void ops_rate_take(uint64_t n);

/* What a HEAD (or another request of ops_ask's) answered: the first
 * response's headers, not followed. */
struct ops_head_info {
	struct ops_why why;      /* the body's first bytes (not a HEAD's) */
	int64_t size;            /* Content-Length, -1 when absent */
	char md5[33];            /* Content-Md5 when 32 lowercase hex, else "" */
	char volumes[1024];      /* Key-Volumes (the master), "" when absent */
	char lastmod[64];        /* Last-Modified, "" when absent */
	char balance[32];        /* Key-Balance (the master), "" when absent */
};
/* HEAD url, or (method) another request with no body (REBALANCE, DELETE).
 * Returns the status, or -1 with err (OPS_ERR bytes) when no answer came;
 * after a HEAD, err (ops_why, from a GET's answer) says why a status >= 400
 * but 404 (after another method, ops_why on info->why says). */
int ops_ask(const char *method, const char *url, long timeout_ms, struct ops_head_info *info,
	    char *err);

/* HEAD master/key (master as ops_master_url gives it), again while the
 * answer is 503 (no replica up, for now) or none, `tries` in all.  On
 * a 302, r (when not NULL) gets the record the master tells: Key-Volumes
 * as locations (pointing into h->volumes) and Content-Md5 as HASH.
 * Returns the status, or -1 with err (OPS_ERR bytes). */
struct record;
int ops_master_head(const char *master, const char *key, size_t klen, int tries,
		    struct ops_head_info *h, struct record *r, char *err);

/* GET url (following redirects when follow), body streamed into fd (-1:
 * nowhere) through a small buffer; md5 and *size of the body of a 200.
 * hdr_md5 gets the Content-Md5 of the first response (the master's, when
 * following), "" when none.  rate: the bytes count against -rate.
 * Returns the final status, or -1; err (OPS_ERR bytes) says why when not 200. */
int ops_stream_get(const char *url, bool follow, int fd, bool rate, char md5[33],
		   uint64_t *size, char hdr_md5[33], char *err);

/* PUT size bytes read from fd to url, streamed; md5 of what was sent.
 * Returns the status, or -1; err (ops_why) says why when not 2xx. */
int ops_stream_put(const char *url, int fd, uint64_t size, char md5[33], char *err);

/* One page of the master's GET PREFIX?list (or ?unlinked: what has
 * OPS_LIST_UNLINKED; ?list&locations&md5s: OPS_LIST_LOCATIONS), from
 * *start ("" for the first; start NULL: the first page only) into pg
 * (keys, and with OPS_LIST_LOCATIONS locs and md5s).  *start (heap, freed
 * and replaced) becomes where the next page starts, "" after the last.
 * Returns 0, or -1 after logging "<who>: <why>" (pg is then empty).
 * ops_keys_free frees pg's keys and arrays. */
enum { OPS_LIST_LIVE = 0, OPS_LIST_UNLINKED = 1, OPS_LIST_LOCATIONS = 2 };
int ops_list_page(const char *master, const char *prefix, int what, char **start,
		  struct ops_keys *pg, const char *who);
void ops_keys_free(struct ops_keys *pg);
/* A key from ?list that the master then does not know (404): deleted
 * meanwhile -- unless its name holds U+FFFD, which is what Go's
 * encoding/json, and so ?list, writes for bytes that are not UTF-8: the
 * real key is then out of reach through the master.  In that case true,
 * and logged ("<who>: ..."): the caller counts it failed. */
bool ops_unreachable(const char *who, const char *key, size_t klen);
/* Page through PREFIX?list (what: as ops_list_page's) and run fn(ctx, i)
 * on every key of each page on `workers` threads; while a page runs, *pg
 * holds it (empty after).  Returns 0, or -1 once a page failed. */
int ops_list_each(const char *master, const char *prefix, int what, const char *who,
		  int workers, struct ops_keys *pg, void (*fn)(void *ctx, size_t i), void *ctx);

/* "http://host:port" of -master, or NULL (offline); a heap string.  main
 * makes cfg->master this before any command runs. */
char *ops_master_url(const char *master);

/* Why a request to url failed, into err (OPS_ERR bytes), for every command's
 * "<what failed>: <err>": "<status> <the server's one-line reason, whole>".
 * The first time in a run it logs what the command lacks: a key (401/403
 * from the master), the volumes' secret or clock (403/410 from a volume).
 * status -1: err keeps the client's. */
void ops_why(char *err, int status, const char *url, const char *body, size_t len);

#endif
