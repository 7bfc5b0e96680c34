/* harness.c -- see harness.h. */
#include "harness.h"

#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/placement.h"

int h_free_port(void)
{
	static int last;
	for (;;) {
		struct sockaddr_in a = {.sin_family = AF_INET};
		socklen_t al = sizeof(a);
		int fd = socket(AF_INET, SOCK_STREAM, 0), port;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
			die("free port: %s", strerror(errno));
		port = ntohs(a.sin_port);
		close(fd);
		if (port != last) {
			last = port;
			return port;
		}
	}
}

char *h_tmpdir(void)
{
	const char *t = getenv("TMPDIR");
	char *d = xasprintf("%s/mkvtest.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(d))
		die("mkdtemp: %s", strerror(errno));
	return d;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	remove(p);
	return 0;
}

void h_rmrf(const char *dir)
{
	if (dir && *dir)
		nftw(dir, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

char *h_bin(const char *name)
{
	const char *b = getenv("MKV_BIN");
	return xasprintf("%s/%s", b && *b ? b : "bin", name);
}

char *h_root(const char *rel)
{
	const char *r = getenv("MKV_ROOT");
	return xasprintf("%s/%s", r && *r ? r : ".", rel);
}

pid_t h_spawn(char *const argv[], const char *logfile)
{
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setpgid(0, 0);
		/* Under SANITIZE=1 the test runner skips leak checks (test code
		 * leaks freely); the servers it starts are checked. */
		if (getenv("MKV_CHILD_ASAN_OPTIONS"))
			setenv("ASAN_OPTIONS", getenv("MKV_CHILD_ASAN_OPTIONS"), 1);
		if (logfile) {
			int fd = open(logfile, O_WRONLY | O_CREAT | O_APPEND, 0644);
			if (fd >= 0) {
				dup2(fd, 1);
				dup2(fd, 2);
				close(fd);
			}
		}
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

bool h_wait_port(int port, int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;
	do {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			close(fd);
			return true;
		}
		close(fd);
		usleep(10000);
	} while (now_ms() < end);
	return false;
}

int h_stop(pid_t pid, int sig)
{
	int st = 0;
	pid_t w;
	uint64_t end;
	if (pid <= 0)
		return -1;
	/* h_spawn made pid a process group leader: signal the whole group, so
	 * that nginx's workers go with their master even on SIGKILL. */
	if (kill(-pid, sig) < 0)
		kill(pid, sig);
	end = now_ms() + 5000;
	while ((w = waitpid(pid, &st, WNOHANG)) == 0) {
		if (now_ms() > end) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			break;
		}
		usleep(5000);
	}
	if (w < 0) {   /* not our child: it cannot be waited for */
		if (!h_wait_gone(pid, 5000)) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
		}
		return -1;
	}
	return st;
}

/* How long a server may take to stop on SIGTERM: a liveness bound.  The
 * slowest stop measured in the suites took 2.0 s (mkv-volume under
 * SANITIZE=1, whose leak check runs at exit); a master still serving
 * requests drains them for up to 10 s first. */
#define STOP_MS 30000

/* Fail the test: the message goes to stderr as well, because a failure in
 * an unchecked teardown (run in the runner, CK_FORK) ends the runner with
 * exit 1 and check itself prints nothing of it. */
#define h_fail(...) do { \
		fprintf(stderr, "harness: " __VA_ARGS__); \
		fputc('\n', stderr); \
		ck_assert_msg(0, __VA_ARGS__); \
	} while (0)

void h_log_check(const char *log)
{
	static const char *const reports[] = {
		"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
		"SUMMARY: UndefinedBehaviorSanitizer",
	};
	char *text, *first = NULL;
	if (!log)
		return;
	text = h_read_file(log);
	for (size_t i = 0; i < sizeof(reports) / sizeof(reports[0]); i++) {
		char *at = strstr(text, reports[i]);
		if (at && (!first || at < first))
			first = at;
	}
	if (first) {
		while (first > text && first[-1] != '\n')
			first--;
		h_fail("sanitizer report in %s: %.*s", log, (int)strcspn(first, "\n"), first);
	}
	free(text);
}

/* Stop *pid (if any) with SIGTERM and check the end: exit 0, within
 * STOP_MS, and a log with no sanitizer report.  A server another process
 * started (an unchecked fixture's, seen from a test) cannot be waited for:
 * then only that it went and its log are checked.  *pid is 0 after. */
static void stop_checked(pid_t *pid, const char *what, int port, const char *log)
{
	pid_t p = *pid;
	int st = 0;
	bool mine = true;
	uint64_t end = now_ms() + STOP_MS;
	*pid = 0;
	if (p > 0) {
		if (kill(-p, SIGTERM) < 0)
			kill(p, SIGTERM);
		kill(-p, SIGCONT);   /* a test that failed may have left it stopped */
		for (;;) {
			pid_t w = mine ? waitpid(p, &st, WNOHANG) : 0;
			if (w == p)
				break;
			if (w < 0)
				mine = false;   /* ECHILD: another process's child */
			if (!mine && h_wait_gone(p, 10))
				break;
			if (now_ms() > end) {
				kill(-p, SIGKILL);
				kill(p, SIGKILL);
				if (mine)
					waitpid(p, &st, 0);
				h_fail("%s on port %d did not stop within %d s of SIGTERM (killed; see %s)",
				       what, port, STOP_MS / 1000, log ? log : "no log");
			}
			if (mine)
				usleep(5000);
		}
	}
	h_log_check(log);
	if (p > 0 && mine && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		h_fail("%s on port %d: %s %d on SIGTERM, not exit 0 (see %s)", what, port,
		       WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
		       log ? log : "no log");
}

/* Start v's server and wait until it listens.  Returns false (the child
 * reaped) when it exits first, e.g. because its port is taken. */
/* nginx's worker_connections for v: Debian's stock 768 unless v says. */
static void nginx_conns(const struct vol *v)
{
	char n[16];
	snprintf(n, sizeof(n), "%d", v->conns ? v->conns : 768);
	setenv("MKV_NGINX_CONNECTIONS", n, 1);
}

static bool vol_try_spawn(struct vol *v, const char *log)
{
	char port[16];
	uint64_t end = now_ms() + 10000;
	snprintf(port, sizeof(port), "%d", v->port);
	if (v->kind == VOL_MKV) {
		char *bin = h_bin("mkv-volume");
		char *argv[11] = {bin, "-port", port};
		int n = 3;
		if (v->peers) {   /* -peers LIST before the directory */
			argv[n++] = "-peers";
			argv[n++] = (char *)v->peers;
		}
		if (v->secret) {
			argv[n++] = "-volumesecret";
			argv[n++] = (char *)v->secret;
		}
		if (v->tls) {
			argv[n++] = "-tls";
			argv[n++] = (char *)v->tls;
		}
		argv[n++] = v->dir;
		v->pid = h_spawn(argv, log);
		free(bin);
	} else {
		char *script = h_root("deploy/nginx/mkv-nginx-volume");
		char *argv[9] = {"/bin/sh", script};
		int n = 2;
		nginx_conns(v);
		if (v->secret) {
			argv[n++] = "-volumesecret";
			argv[n++] = (char *)v->secret;
		}
		if (v->tls) {
			argv[n++] = "-tls";
			argv[n++] = (char *)v->tls;
		}
		argv[n++] = port;
		argv[n++] = v->dir;
		v->pid = h_spawn(argv, log);
		free(script);
	}
	while (now_ms() < end) {
		int st;
		if (h_wait_port(v->port, 20))
			return true;
		if (waitpid(v->pid, &st, WNOHANG) == v->pid) {
			v->pid = 0;
			return false;
		}
	}
	return false;
}

static void vol_spawn(struct vol *v)
{
	char *log = xasprintf("%s.log", v->dir);
	if (!vol_try_spawn(v, log))
		die("volume on port %d did not start (see %s)", v->port, log);
	free(log);
}

void h_vol_down(struct vol *v)
{
	char *log = xasprintf("%s.log", v->dir);
	stop_checked(&v->pid, v->kind == VOL_MKV ? "mkv-volume" : "nginx", v->port, log);
	free(log);
}

void h_vol_respawn(struct vol *v)
{
	char *log = xasprintf("%s.log", v->dir);
	h_vol_down(v);
	/* The port is in the ephemeral range: while the server was down an
	 * outgoing connection may have taken it as its local port.  It is
	 * free again once that connection ends. */
	for (int i = 0; !vol_try_spawn(v, log); i++) {
		if (i == 50)
			die("volume on port %d did not restart (see %s)", v->port, log);
		usleep(200000);
	}
	free(log);
}


void h_vol_reload(struct vol *v)
{
	if (v->kind == VOL_MKV) {
		kill(v->pid, SIGHUP);
	} else {
		char port[16], *script = h_root("deploy/nginx/mkv-nginx-volume"), *log =
			xasprintf("%s.log", v->dir);
		char *argv[10] = {"/bin/sh", script, "-reload"};
		int st, n = 3;
		if (v->secret) {
			argv[n++] = "-volumesecret";
			argv[n++] = (char *)v->secret;
		}
		if (v->tls) {
			argv[n++] = "-tls";
			argv[n++] = (char *)v->tls;
		}
		argv[n++] = port;
		argv[n++] = v->dir;
		snprintf(port, sizeof(port), "%d", v->port);
		nginx_conns(v);
		waitpid(h_spawn(argv, log), &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			h_fail("mkv-nginx-volume -reload on port %d failed (see %s)", v->port, log);
		free(script);
		free(log);
	}
}

static void vol_start(struct vol *v, enum vol_kind kind, const char *secret, const char *tls,
		      int conns)
{
	char *tmp = h_tmpdir();
	v->conns = conns;
	v->tls = tls;
	v->kind = kind;
	v->peers = NULL;   /* a test sets it before a restart */
	v->secret = secret;
	v->port = h_free_port();
	v->dir = xasprintf("%s/data", tmp);
	mkdir(v->dir, 0755);
	free(tmp);
	v->name = xasprintf("127.0.0.1:%d", v->port);
	vol_spawn(v);
}

void h_vol_start_conns(struct vol *v, int conns)
{
	vol_start(v, VOL_NGINX, NULL, NULL, conns);
}

void h_vol_start(struct vol *v, enum vol_kind kind)
{
	vol_start(v, kind, NULL, NULL, 0);
}

void h_vol_start_secret(struct vol *v, enum vol_kind kind, const char *secret)
{
	vol_start(v, kind, secret, NULL, 0);
}

void h_vol_start_tls(struct vol *v, enum vol_kind kind, const char *tls)
{
	vol_start(v, kind, NULL, tls, 0);
}

void h_vol_restart(struct vol *v)
{
	h_vol_down(v);
	vol_spawn(v);
}

void h_vol_stop(struct vol *v)
{
	char *parent;
	if (!v->dir)
		return;
	h_vol_down(v);
	parent = xstrdup(v->dir);
	*strrchr(parent, '/') = '\0';
	h_rmrf(parent);
	free(parent);
	free(v->dir);
	free(v->name);
	v->dir = v->name = NULL;
}

char *h_volumes_arg(struct vol *vols, int nvol)
{
	struct buf b = {0};
	buf_puts(&b, "");
	for (int i = 0; i < nvol; i++)
		buf_printf(&b, "%s%s%s", i ? "," : "", vols[i].tls ? "https://" : "", vols[i].name);
	return b.data;
}

/* Spawn the master on m->port over m->db and wait for it to listen.
 * retry: when it exits first (its port taken by an outgoing connection's
 * local port while it was down), try again for up to 10 s. */
static void master_spawn(struct master *m, struct vol *vols, int nvol, const char *const *flags,
			 bool retry)
{
	char *bin = h_bin("mkv"), *volarg = h_volumes_arg(vols, nvol), port[16];
	char *argv[64];
	int n = 0;
	snprintf(port, sizeof(port), "%d", m->port);
	snprintf(m->base, sizeof(m->base), "http://127.0.0.1:%d", m->port);
	argv[n++] = bin;
	argv[n++] = "-volumes";
	argv[n++] = volarg;
	argv[n++] = "-db";
	argv[n++] = m->db;
	argv[n++] = "-port";
	argv[n++] = port;
	for (int i = 0; flags && flags[i] && n < 60; i++)
		argv[n++] = (char *)flags[i];
	argv[n++] = "server";
	argv[n] = NULL;
	for (int attempt = 0;; attempt++) {
		uint64_t end = now_ms() + 10000;
		bool up = false, exited = false;
		m->pid = h_spawn(argv, m->log);
		while (!up && !exited && now_ms() < end) {
			int st;
			up = h_wait_port(m->port, 20);
			exited = !up && waitpid(m->pid, &st, WNOHANG) == m->pid;
		}
		if (up)
			break;
		if (!retry || !exited || attempt == 50)
			die("master on port %d did not start (see %s)", m->port, m->log);
		m->pid = 0;
		usleep(200000);
	}
	free(bin);
	free(volarg);
}

void h_master_start(struct master *m, struct vol *vols, int nvol, const char *const *flags)
{
	if (!m->db) {
		char *tmp = h_tmpdir();
		m->db = xasprintf("%s/db", tmp);
		m->log = xasprintf("%s/master.log", tmp);
		free(tmp);
	}
	m->port = h_free_port();
	master_spawn(m, vols, nvol, flags, false);
}

void h_master_down(struct master *m)
{
	stop_checked(&m->pid, "mkv", m->port, m->log);
}

void h_master_restart(struct master *m, struct vol *vols, int nvol, const char *const *flags)
{
	h_master_down(m);   /* waits: the index's LOCK is free after */
	master_spawn(m, vols, nvol, flags, true);
}

void h_master_stop(struct master *m)
{
	char *parent;
	h_master_down(m);
	if (!m->db)
		return;
	parent = xstrdup(m->db);
	*strrchr(parent, '/') = '\0';
	h_rmrf(parent);
	free(parent);
	free(m->db);
	free(m->log);
	m->db = m->log = NULL;
}

static size_t on_body(char *p, size_t s, size_t n, void *ud)
{
	buf_append(ud, p, s * n);
	return s * n;
}

struct src {
	const char *p;
	size_t left;
};

static size_t on_read(char *p, size_t s, size_t n, void *ud)
{
	struct src *src = ud;
	size_t len = s * n < src->left ? s * n : src->left;
	memcpy(p, src->p, len);
	src->p += len;
	src->left -= len;
	return len;
}

static const char *sign_user;

void h_http_sign(const char *user)
{
	sign_user = user;
}

long h_http(const char *method, const char *url, const void *body, size_t len,
	    const char *const *headers, bool follow, struct resp *r)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hl = NULL;
	struct src src = {body, len};
	char *loc = NULL;
	bool chunked = false;
	CURLcode rc;
	memset(r, 0, sizeof(*r));
	buf_puts(&r->body, "");
	buf_puts(&r->headers, "");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &r->headers);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	if (sign_user) {   /* as curl --aws-sigv4 "aws:amz:us-east-1:s3" --user ID:SECRET */
		curl_easy_setopt(c, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
		curl_easy_setopt(c, CURLOPT_USERPWD, sign_user);
	}
	for (int i = 0; headers && headers[i]; i++) {
		hl = curl_slist_append(hl, headers[i]);
		chunked |= !strcasecmp(headers[i], "Transfer-Encoding: chunked");
	}
	hl = curl_slist_append(hl, "Expect:");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	if (!strcmp(method, "HEAD")) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (body) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, &src);
		if (!chunked)             /* else the length is unknown, as curl -T - */
			curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
		if (strcmp(method, "PUT"))
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	} else if (strcmp(method, "GET")) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	rc = curl_easy_perform(c);
	r->status = -1;
	if (rc == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
		curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &loc);
		if (loc)
			r->location = xstrdup(loc);
	}
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	return r->status;
}

char *h_header(const struct resp *r, const char *name)
{
	size_t nl = strlen(name);
	const char *p = r->headers.data, *found = NULL;
	/* The last block wins (after redirects). */
	while (p && *p) {
		const char *eol = strstr(p, "\r\n");
		if (!eol)
			break;
		if ((size_t)(eol - p) > nl && !strncasecmp(p, name, nl) && p[nl] == ':')
			found = p;
		p = eol + 2;
	}
	if (!found)
		return NULL;
	found += nl + 1;
	while (*found == ' ')
		found++;
	return xstrndup(found, strcspn(found, "\r\n"));
}

void h_resp_free(struct resp *r)
{
	buf_free(&r->body);
	buf_free(&r->headers);
	free(r->location);
	r->location = NULL;
}

long h_status(const char *method, const char *url)
{
	struct resp r;
	long s = h_http(method, url, NULL, 0, NULL, false, &r);
	h_resp_free(&r);
	return s;
}

void h_wait_put_taken(const char *base, const char *key)
{
	char *u = xasprintf("%s%s", base, key);
	uint64_t end = now_ms() + 20000;
	long st;
	while ((st = h_status("DELETE", u)) == 404 && now_ms() < end)
		usleep(20000);
	ck_assert_msg(st == 409, "the master never took the PUT of %s (DELETE: %ld)", key, st);
	free(u);
}

/* ---- raw sockets ---- */

int h_connect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

bool h_send(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

/* Is the response in b complete?  *status gets its code once known. */
static bool resp_complete(const struct buf *b, long *status, bool head)
{
	const char *hend, *cl;
	size_t hl;
	if (!b->len || !(hend = memmem(b->data, b->len, "\r\n\r\n", 4)))
		return false;
	if (b->len < 12 || strncmp(b->data, "HTTP/1.", 7))
		return false;
	*status = strtol(b->data + 9, NULL, 10);
	hl = (size_t)(hend - b->data) + 4;
	if (head || *status == 204 || *status == 304 || (*status >= 100 && *status < 200))
		return true;
	cl = strcasestr(b->data, "\r\nContent-Length:");
	if (cl && cl < hend)
		return b->len >= hl + strtoul(cl + 17, NULL, 10);
	cl = strcasestr(b->data, "\r\nTransfer-Encoding: chunked");
	if (cl && cl < hend)
		return memmem(b->data + hl, b->len - hl, "0\r\n\r\n", 5) != NULL;
	return false; /* read to close */
}

long h_recv_resp(int fd, struct buf *out, int timeout_ms, bool head)
{
	struct buf b = {0};
	long status = 0;
	uint64_t end = now_ms() + (uint64_t)timeout_ms;
	bool closed = false;
	buf_puts(&b, "");
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char chunk[16384];
		ssize_t r;
		int64_t left = (int64_t)(end - now_ms());
		if (resp_complete(&b, &status, head))
			break;
		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			if (!status && !resp_complete(&b, &status, head) && b.len < 12)
				status = -1;   /* no answer in time: a hang */
			break;
		}
		r = recv(fd, chunk, sizeof(chunk), 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			closed = true;
			break;
		}
		buf_append(&b, chunk, (size_t)r);
	}
	if (!status && b.len >= 12 && !strncmp(b.data, "HTTP/1.", 7))
		status = strtol(b.data + 9, NULL, 10);
	if (closed && !status)
		status = 0;
	if (out)
		*out = b;
	else
		buf_free(&b);
	return status;
}

long h_raw(int port, const void *req, size_t n, struct buf *out, int timeout_ms)
{
	int fd = h_connect(port);
	long st;
	if (fd < 0)
		return -2;
	h_send(fd, req, n);   /* the server may answer and close before all is sent */
	st = h_recv_resp(fd, out, timeout_ms, n >= 5 && !memcmp(req, "HEAD ", 5));
	close(fd);
	return st;
}

/* Did the peer close fd within timeout_ms (nothing more but the end)? */
static bool closed_within(int fd, int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char c[512];
		int64_t left = (int64_t)(end - now_ms());
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return false;
		if (recv(fd, c, sizeof(c), 0) <= 0)
			return true;
	}
}

/* h_junk_rounds' liveness bounds, not speed tests.  JUNK_ANSWER_MS for
 * each answer: the slowest measured was 131 ms (SANITIZE=1); a hung request
 * waits for the idle timeout.  JUNK_CLOSE_MS for the close of a half-closed
 * connection after its answer: the slowest measured was 16 ms; it must stay
 * below the idle timeout of check_hostile's master (2 s), which would close
 * the connection anyway. */
#define JUNK_ANSWER_MS 5000
#define JUNK_CLOSE_MS 1000

int h_junk_rounds(int port, const char *good, int rounds, bool half_close, const char **why)
{
	static char nuls[1004];
	static const char *const junk[] = {
		"GET\r\n\r\n", "GET /\r\n\r\n", "GET / HTTP/9.9\r\n\r\n",
		"GET / FOO/1.1\r\n\r\n", "\r\n\r\n", "x\r\n\r\n",
		"GET /a HTTP/1.1\r\nNo colon\r\n\r\n", "GET /a HTTP/1.1\r\n: v\r\n\r\n",
		"GET /a HTTP/1.1\r\n folded: h\r\n\r\n", "PUT /a HTTP/1.1\r\nContent-Length: x\r\n\r\n",
		"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", nuls,
	};
	size_t nj = sizeof(junk) / sizeof(junk[0]);
	int bad = 0;
	memcpy(nuls + 1000, "\r\n\r\n", 4);
	*why = NULL;
	for (int round = 0; round < rounds && !bad; round++) {
		for (size_t j = 0; j < nj && !bad; j++) {
			int a = h_connect(port), b = h_connect(port);
			long st;
			bool ok;
			if (a >= 0)
				h_send(a, junk[j], junk[j] == nuls ? sizeof(nuls) : strlen(junk[j]));
			if (b < 0) {
				if (a >= 0)
					close(a);
				bad++;
				*why = "no connection";
				continue;
			}
			h_send(b, good, strlen(good));
			if (half_close)
				shutdown(b, SHUT_WR);
			st = h_recv_resp(b, NULL, JUNK_ANSWER_MS, !strncmp(good, "HEAD ", 5));
			ok = st > 0 && (!half_close || closed_within(b, JUNK_CLOSE_MS));
			if (!ok) {
				static char msg[128];
				bad++;
				if (st <= 0)
					snprintf(msg, sizeof(msg), "after junk %zu, no answer within %d ms",
						 j, JUNK_ANSWER_MS);
				else
					snprintf(msg, sizeof(msg), "after junk %zu, the half-closed "
						 "connection still open %d ms after the answer", j,
						 JUNK_CLOSE_MS);
				*why = msg;
			}
			close(b);
			if (a >= 0)
				close(a);
		}
	}
	return bad;
}

long h_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = strtol(line + 6, NULL, 10);
	fclose(f);
	return kib;
}

bool h_wait_gone(pid_t pid, int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;
	do {
		char path[64], st[512];
		FILE *f;
		size_t n;
		const char *rp;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		f = fopen(path, "r");
		if (!f)
			return true;
		n = fread(st, 1, sizeof(st) - 1, f);
		fclose(f);
		st[n] = '\0';
		rp = strrchr(st, ')');       /* "pid (comm) S ..." */
		if (rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'))
			return true;
		usleep(10000);
	} while (now_ms() < end);
	return false;
}

char *h_read_file(const char *path)
{
	struct buf b = {0};
	char chunk[4096];
	size_t n;
	FILE *f = fopen(path, "r");
	buf_puts(&b, "");
	if (!f)
		return b.data;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_append(&b, chunk, n);
	fclose(f);
	return b.data;
}

int h_fd_count(pid_t pid)
{
	char path[64];
	int n = 0;
	DIR *d;
	struct dirent *e;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if (!(d = opendir(path)))
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A file of the key being looked for (blob_tail), or a write half done. */
static const char *blob_tail;
static char blob_left[PATH_MAX];

static int blob_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	size_t n = strlen(p), t = blob_tail ? strlen(blob_tail) : 0;
	(void)st;
	if (flag == FTW_F && ((t && n > t && !strcmp(p + n - t, blob_tail)) ||
			      strstr(p + f->base, ".mkv-tmp.") || strstr(p, "/.nginx/body/"))) {
		snprintf(blob_left, sizeof(blob_left), "%s", p);
		return 1;
	}
	return 0;
}

bool h_wait_no_blob(struct vol *vols, int nvol, const char *key, int timeout_ms,
		    const char **left)
{
	char tail[PATH_MAX_LEN];
	uint64_t end = now_ms() + (uint64_t)timeout_ms;
	if (key)
		placement_path(key, strlen(key), tail);
	blob_tail = key ? tail : NULL;
	for (;;) {
		int found = 0;
		for (int i = 0; i < nvol && !found; i++)
			found = nftw(vols[i].dir, blob_one, 32, FTW_PHYS);
		if (!found)
			return true;
		if (now_ms() > end) {
			*left = blob_left;
			return false;
		}
		usleep(20000);
	}
}
