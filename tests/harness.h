/* harness.h -- what integration tests need: free ports, temporary
 * directories, real processes (mkv, mkv-volume, nginx) started and always
 * stopped, and an HTTP client.
 *
 * Binaries come from $MKV_BIN (default "bin"), the repository from
 * $MKV_ROOT (default "."); the Makefile sets both. */
#ifndef MKV_HARNESS_H
#define MKV_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "../common/util.h"

/* A port nobody listens on right now (bind 127.0.0.1:0). */
int h_free_port(void);
/* mkdtemp under $TMPDIR or /tmp; caller frees (and h_rmrf's). */
char *h_tmpdir(void);
void h_rmrf(const char *dir);
/* Path of a binary in $MKV_BIN, or a file in $MKV_ROOT (static buffer per call site:
 * returns a heap string, caller frees). */
char *h_bin(const char *name);
char *h_root(const char *rel);

/* fork+exec argv (NULL-terminated), stdout+stderr appended to logfile
 * (NULL = inherit).  Returns the pid.  The child dies with the test
 * process (PR_SET_PDEATHSIG). */
pid_t h_spawn(char *const argv[], const char *logfile);
/* Wait until something accepts on 127.0.0.1:port; false after timeout_ms. */
bool h_wait_port(int port, int timeout_ms);
/* Send sig, then wait (SIGKILL after 5 s).  Returns the exit status as
 * waitpid gives it; checks nothing.  For a stop the test judges itself.
 * -1, neither an exit nor a signal, when there is no status to give: pid
 * is 0 or not the caller's child (a fixture's server seen from a test;
 * then it waits up to 5 s for it to go, and kills it). */
int h_stop(pid_t pid, int sig);

/* Stopping a server (h_*_stop, _down, _restart, _respawn below) checks how
 * it ended, and fails the test (ck_assert) if it did not end well:
 *  - SIGTERM, then exit 0 within 30 s (mkv and mkv-volume exit 0 on
 *    SIGTERM; under SANITIZE=1 a leak makes it 23, an ASan report 1;
 *    nginx exits 0);
 *  - its log holds no sanitizer report (h_log_check).
 * A server another process started (an unchecked fixture's, stopped from
 * a test) cannot be waited for: only that it went, and its log.
 * A test that ends a server its own way -- kill -9 on purpose, or a stop
 * expected to fail (the master's exit 1 when its drain times out) -- reaps
 * it itself (h_stop, or kill and waitpid, judging the status as it
 * means to) and sets its pid to 0: the harness then checks only its log,
 * at the next stop or restart.  Volumes log to DIR.log beside their data
 * directory, the master to its log; both go with h_*_stop, unless a check
 * failed.  A failure is also printed on stderr ("harness: ..."): in an
 * unchecked teardown (run by the runner itself) it ends the runner at once
 * with exit 1, and check prints nothing of it. */

/* Fail the test if the server log at path holds a sanitizer report
 * ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
 * "SUMMARY: UndefinedBehaviorSanitizer"), naming the log and the report's
 * first line.  NULL: nothing to check. */
void h_log_check(const char *log);

/* A volume server of either kind on a fresh port and directory. */
enum vol_kind { VOL_MKV, VOL_NGINX };
struct vol {
	enum vol_kind kind;
	int port;
	pid_t pid;
	char *dir;     /* data directory */
	char *name;    /* "127.0.0.1:port" */
	const char *peers;   /* mkv-volume's -peers, or NULL (h_vol_start's); set it
				before h_vol_restart */
	const char *secret;  /* -volumesecret FILE (either kind), or NULL */
	int conns;           /* nginx's worker_connections; 0: Debian's stock 768 (its
				keepalive limits are always nginx's own) */
	const char *tls;     /* -tls CERT,KEY (either kind), or NULL: then the
				master's -volumes names it https:// */
};
/* h_vol_start: a volume of that kind (nginx: Debian's stock limits). */
void h_vol_start(struct vol *v, enum vol_kind kind);
/* h_vol_start with -volumesecret secret (a file; the caller keeps it). */
void h_vol_start_secret(struct vol *v, enum vol_kind kind, const char *secret);
/* An nginx volume with worker_connections conns. */
void h_vol_start_conns(struct vol *v, int conns);
/* h_vol_start with -tls tls ("CERT,KEY"; the caller keeps the files). */
void h_vol_start_tls(struct vol *v, enum vol_kind kind, const char *tls);
/* Have v read its -volumesecret file again: mkv-volume on SIGHUP, nginx
 * by mkv-nginx-volume -reload (nginx -s reload).  Returns once asked;
 * the new secrets take over a moment later (poll for it). */
void h_vol_reload(struct vol *v);
/* Restart on the same port and directory. */
void h_vol_restart(struct vol *v);
/* Stop and remove the directory (and log).  Again, or never started: nothing. */
void h_vol_stop(struct vol *v);
/* Stop, keeping the port and directory for h_vol_restart/_respawn. */
void h_vol_down(struct vol *v);
/* Like h_vol_restart, but when the old port is taken for a while (by an
 * outgoing connection's local port, while the server was down) it keeps
 * trying for 10 s instead of failing. */
void h_vol_respawn(struct vol *v);

/* A master on a fresh port over the given volumes; extra flags appended
 * (NULL-terminated list, may be NULL). */
struct master {
	int port;
	pid_t pid;
	char *db;      /* index directory (owned) */
	char *log;
	char base[64]; /* "http://127.0.0.1:port" */
};
void h_master_start(struct master *m, struct vol *vols, int nvol, const char *const *flags);
/* Restart m (stopped, killed or running) on the same port and db; like
 * h_vol_respawn, it retries while the port is taken. */
void h_master_restart(struct master *m, struct vol *vols, int nvol, const char *const *flags);
/* Stop and remove the index and log. */
void h_master_stop(struct master *m);
/* Stop, keeping the port, index and log for h_master_restart. */
void h_master_down(struct master *m);
/* The -volumes argument for vols ("127.0.0.1:p1,127.0.0.1:p2,..."); caller frees. */
char *h_volumes_arg(struct vol *vols, int nvol);

/* One HTTP exchange.  body/len is the request body (NULL for none);
 * headers is a NULL-terminated list of "Name: value" (may be NULL).
 * follow: follow redirects.  With "Transfer-Encoding: chunked" among the
 * headers the body goes chunked, its length unannounced (curl -T -).
 * Returns the status, -1 on transport error. */
struct resp {
	long status;
	struct buf body;
	struct buf headers;    /* raw header block(s) */
	char *location;        /* redirect target, or NULL */
};
long h_http(const char *method, const char *url, const void *body, size_t len,
	    const char *const *headers, bool follow, struct resp *r);
/* Sign every later h_http as curl --aws-sigv4 "aws:amz:us-east-1:s3"
 * --user ID:SECRET does (user "ID:SECRET"; NULL: unsigned again). */
void h_http_sign(const char *user);
/* Value of a response header (case-insensitive name) in a fresh string, or NULL. */
char *h_header(const struct resp *r, const char *name);
void h_resp_free(struct resp *r);

/* Convenience: status of a request with no body, response discarded. */
long h_status(const char *method, const char *url);
/* Wait (up to 20 s, else fail the test) until the master at base
 * ("http://127.0.0.1:port") has taken a PUT of key that is not finished:
 * it holds the key's lock, so a DELETE of it gets 409 (404 before,
 * changing nothing). */
void h_wait_put_taken(const char *base, const char *key);

/* Raw TCP, for requests no HTTP client would send.  h_connect: a
 * blocking socket to 127.0.0.1:port, -1 on failure.  h_send: all of p,
 * false once the peer has closed. */
int h_connect(int port);
bool h_send(int fd, const void *p, size_t n);
/* Read one response (headers, then the body by Content-Length or chunked,
 * or to close; head: no body).  Returns its status; 0 when the peer
 * closed without answering; -1 when nothing came within timeout_ms (the
 * connection hangs).  out (may be NULL) gets the raw bytes: buf_free it. */
long h_recv_resp(int fd, struct buf *out, int timeout_ms, bool head);
/* Connect, send req, read the response, close.  -2: no connection. */
long h_raw(int port, const void *req, size_t n, struct buf *out, int timeout_ms);
/* rounds x a dozen malformed request heads, each sent on a connection of
 * its own and followed by the good request good on another, half-closed
 * after sending when half_close.  Stops at the first good request not
 * answered within 5 s, or (half_close) whose connection then stayed open
 * 1 s more, and returns 1 (0: all were); *why says which (static).  Both
 * are liveness bounds, many times the slowest normal run (131 ms to
 * answer, 16 ms to close, under SANITIZE=1); the second stays below the
 * 2 s idle timeout of check_hostile's master, which would close the
 * connection anyway. */
int h_junk_rounds(int port, const char *good, int rounds, bool half_close, const char **why);
/* Has pid exited (gone, or a zombie its parent has not reaped)?  Waits up
 * to timeout_ms.  Works for processes another process started. */
bool h_wait_gone(pid_t pid, int timeout_ms);
/* Wait up to timeout_ms until the volumes' data directories hold no byte
 * of key: no file named as its blob (in any subvolume) and no write half
 * done (mkv-volume's hidden ".mkv-tmp.*", a body nginx spooled in
 * .nginx/body/; key NULL: only those).  false when one stays: *left
 * names it (static). */
bool h_wait_no_blob(struct vol *vols, int nvol, const char *key, int timeout_ms,
		    const char **left);
/* The whole file as a string ("" when unreadable); caller frees. */
char *h_read_file(const char *path);
/* VmRSS of pid in KiB, -1 if unknown. */
long h_rss_kib(pid_t pid);
/* Descriptors pid holds open (from /proc), or -1. */
int h_fd_count(pid_t pid);

#endif
