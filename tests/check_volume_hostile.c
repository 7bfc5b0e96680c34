/* check_volume_hostile.c -- mkv-volume against hostile clients (raw
 * sockets): path traversal in every encoding, NUL, huge request lines and
 * header blocks, bad percent-encoding, lying Content-Length, garbage,
 * slowloris, unknown methods, malformed Range, 5,000 idle connections.
 * Each gets a clear 4xx or a closed connection, never a hang or a 5xx;
 * after each the server still serves; nothing next to the data directory
 * is read, written or deleted; its RSS stays bounded.
 *
 * One volume serves the whole suite (unchecked fixture), so the last test
 * measures RSS after the barrage. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define SECRET "SECRET-outside-the-data-directory\n"
/* Longest a request may wait for its answer: a liveness bound ("answered,
 * not hung"), 30 times the slowest normal answer measured (150 ms, under
 * SANITIZE=1 beside 200 dribbling clients); a hung request waits for the
 * volume's idle timeout, 60 s. */
#define T_MS 5000

static struct vol v;
static char *parent;        /* the directory holding v.dir: the planted files */
static char *snapshot0;

/* Everything under parent but the data directory and its log: names,
 * sizes and contents, as one string. */
static void snap_dir(struct buf *b, const char *dir, const char *rel)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char *p, *r;
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		p = xasprintf("%s/%s", dir, e->d_name);
		r = xasprintf("%s/%s", rel, e->d_name);
		if (!strcmp(p, v.dir) || (!strncmp(p, v.dir, strlen(v.dir)) &&
					  !strcmp(p + strlen(v.dir), ".log"))) {
			free(p), free(r);
			continue;
		}
		if (lstat(p, &st) == 0) {
			buf_printf(b, "%s %o %lld\n", r, st.st_mode, (long long)st.st_size);
			if (S_ISDIR(st.st_mode)) {
				snap_dir(b, p, r);
			} else if (S_ISREG(st.st_mode)) {
				char c[256];
				FILE *f = fopen(p, "r");
				size_t n = f ? fread(c, 1, sizeof(c), f) : 0;
				if (f)
					fclose(f);
				buf_append(b, c, n);
			}
		}
		free(p), free(r);
	}
	if (d)
		closedir(d);
}

static char *snapshot(void)
{
	struct buf b = {0};
	buf_puts(&b, "");
	snap_dir(&b, parent, "");
	return b.data;
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot create %s", path);
	fputs(s, f);
	fclose(f);
}

static void setup(void)
{
	struct rlimit rl;
	char *p;
	/* Room for 5,000 client sockets here and in the volume (inherited). */
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGPIPE, SIG_IGN);

	h_vol_start(&v, VOL_MKV);
	parent = xstrdup(v.dir);
	*strrchr(parent, '/') = '\0';
	/* Bait next to the data directory, and a sibling whose name the data
	 * directory's is a prefix of. */
	p = xasprintf("%s/planted", parent);
	write_file(p, SECRET);
	free(p);
	p = xasprintf("%s/outside", parent);
	mkdir(p, 0755);
	free(p);
	p = xasprintf("%s/outside/victim", parent);
	write_file(p, SECRET);
	free(p);
	p = xasprintf("%s-sibling", v.dir);
	mkdir(p, 0755);
	free(p);
	p = xasprintf("%s-sibling/victim", v.dir);
	write_file(p, SECRET);
	free(p);
	snapshot0 = snapshot();
	{
		struct resp r;
		char *u = xasprintf("http://%s/ok/file", v.name);
		ck_assert_int_eq(h_http("PUT", u, "hello", 5, NULL, false, &r), 201);
		h_resp_free(&r);
		free(u);
	}
}

static void teardown(void)
{
	char *p = xasprintf("%s-sibling", v.dir);
	h_rmrf(p);
	free(p);
	h_vol_stop(&v);
	free(parent);
	free(snapshot0);
}

/* The server still answers a normal request (within T_MS: not hung). */
static void alive(const char *after)
{
	struct resp r;
	char *u = xasprintf("http://%s/ok/file", v.name);
	uint64_t t0 = now_ms();
	long st = h_http("GET", u, NULL, 0, NULL, false, &r);
	ck_assert_msg(st == 200 && r.body.len == 5 && !memcmp(r.body.data, "hello", 5),
		      "after %s: GET /ok/file gave %ld", after, st);
	ck_assert_msg(now_ms() - t0 < T_MS, "after %s: a normal GET took %llu ms", after,
		      (unsigned long long)(now_ms() - t0));
	h_resp_free(&r);
	free(u);
}

static void untouched(const char *after)
{
	char *s = snapshot();
	ck_assert_msg(!strcmp(s, snapshot0), "after %s: files outside the data directory "
		      "changed:\nwas:\n%s\nnow:\n%s", after, snapshot0, s);
	free(s);
}

/* A refusal: a 4xx, or the connection closed without an answer. */
static void refused(long st, const char *what)
{
	ck_assert_msg(st == 0 || (st >= 400 && st < 500),
		      "%s: got %ld, want a 4xx or a closed connection%s", what, st,
		      st == -1 ? " (no answer: hang)" : "");
}

/* Wait up to T_MS until the volume holds n files open in the data
 * directory's directory rel (an upload's temporary file, O_TMPFILE or
 * named: /proc/PID/fd shows either); false if it never does. */
static bool files_open_become(const char *rel, int n)
{
	char *fddir = xasprintf("/proc/%d/fd", (int)v.pid), *in = xasprintf("%s/%s/", v.dir, rel);
	uint64_t end = now_ms() + T_MS;
	int found;
	do {
		DIR *d = opendir(fddir);
		struct dirent *e;
		found = 0;
		while (d && (e = readdir(d))) {
			char link[PATH_MAX + 1], *p = xasprintf("%s/%s", fddir, e->d_name);
			ssize_t l = readlink(p, link, PATH_MAX);
			free(p);
			found += l > 0 && (link[l] = '\0', !strncmp(link, in, strlen(in)));
		}
		if (d)
			closedir(d);
		if (found != n)
			usleep(10000);
	} while (found != n && now_ms() < end);
	free(fddir), free(in);
	return found == n;
}

static long send_req(const char *req, size_t n, struct buf *out)
{
	return h_raw(v.port, req, n, out, T_MS);
}

/* ---- path traversal ---- */

static const struct {
	const char *path;
	bool escapes;     /* decodes to a path with a ".." segment (or NUL): must be refused */
} trav[] = {
	{"/../planted", true},
	{"/..", true},
	{"/../", true},
	{"/%2e%2e/planted", true},
	{"/%2E%2E/planted", true},
	{"/%2e%2e%2fplanted", true},
	{"/%2E%2E%2Fplanted", true},
	{"/..%2fplanted", true},
	{"/..%2Foutside%2Fvictim", true},
	{"/%2e./planted", true},
	{".%2e/planted", true},
	{"/.%2e/planted", true},
	{"/a/b/../../../planted", true},
	{"/./../planted", true},
	{"//../planted", true},
	{"/a/%2e%2e/%2e%2e/planted", true},
	{"/../outside/victim", true},
	{"/../data-sibling/victim", true},
	{"/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd", true},
	{"/planted%00", true},
	{"/%00/../planted", true},
	{"/a%00/../../planted", true},
	{"/ok/file%00.jpg", true},
	{"../planted", true},
	{"planted", true},
	{"http://127.0.0.1/../planted", true},
	{"*", true},
	/* Names that only look like traversal once decoded twice or read as
	 * Windows paths: legal file names inside the data directory. */
	{"/%252e%252e/planted", false},
	{"/%252e%252e%252fplanted", false},
	{"/..\\planted", false},
	{"/a/..\\..\\planted", false},
	{"/%5c..%5cplanted", false},
	{"/%c0%ae%c0%ae/planted", false},
	{"/..;/planted", false},
	{"/...", false},
};

START_TEST(test_traversal)
{
	static const char *const methods[] = {"GET", "HEAD", "PUT", "DELETE"};
	for (size_t i = 0; i < sizeof(trav) / sizeof(trav[0]); i++)
		for (size_t m = 0; m < 4; m++) {
			char *req = xasprintf("%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
					      "Connection: close\r\n\r\n%s",
					      methods[m], trav[i].path, m == 2 ? 6 : 0,
					      m == 2 ? "PWNED\n" : "");
			char *what = xasprintf("%s %s", methods[m], trav[i].path);
			struct buf out = {0};
			long st = send_req(req, strlen(req), &out);
			ck_assert_msg(!out.data || !strstr(out.data, "SECRET"), "%s read %s", what,
				      out.data);
			ck_assert_msg(st != -1 && !(st >= 500), "%s: got %ld", what, st);
			if (trav[i].escapes)
				refused(st, what);
			buf_free(&out);
			free(req);
			free(what);
		}
	untouched("traversal");
	alive("traversal");
}
END_TEST

/* ---- malformed requests ---- */

static char *repeat(const char *s, size_t times)
{
	size_t l = strlen(s);
	char *r = xmalloc(l * times + 1);
	for (size_t i = 0; i < times; i++)
		memcpy(r + i * l, s, l);
	r[l * times] = '\0';
	return r;
}

START_TEST(test_nul_and_encoding)
{
	static const char *const paths[] = {"/a%00b", "/%00", "/%zz", "/%", "/%4", "/%%",
					    "/%g0", "/a%2", "/ok/%ZZfile", "/%0"};
	static const char raw_nul[] = "GET /ok/fi\0le HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char hdr_nul[] = "GET /ok/file HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n";
	long st;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char *req = xasprintf("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
				      paths[i]);
		st = send_req(req, strlen(req), NULL);
		ck_assert_msg(st == 400, "GET %s: got %ld, want 400", paths[i], st);
		free(req);
	}
	refused(send_req(raw_nul, sizeof(raw_nul) - 1, NULL), "a NUL byte in the request line");
	st = send_req(hdr_nul, sizeof(hdr_nul) - 1, NULL);
	ck_assert_msg(st == 0 || st == 200 || (st >= 400 && st < 500),
		      "a NUL in a header: got %ld", st);
	alive("NUL and bad percent-encoding");
}
END_TEST

START_TEST(test_huge_request_line)
{
	char *a = repeat("a", 65536), *dots = repeat("%2e%2e/", 65536 / 7), *req;
	req = xasprintf("GET /%s HTTP/1.1\r\nHost: x\r\n\r\n", a);
	refused(send_req(req, strlen(req), NULL), "a 64 KiB request line");
	free(req);
	req = xasprintf("PUT /%s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", dots);
	refused(send_req(req, strlen(req), NULL), "a 64 KiB line of %2e%2e/");
	free(req);
	/* A 1 MiB request line, no end in sight. */
	free(a);
	a = repeat("b", 1 << 20);
	req = xasprintf("GET /%s", a);
	refused(send_req(req, strlen(req), NULL), "a 1 MiB request line");
	free(req);
	free(a);
	free(dots);
	alive("huge request lines");
}
END_TEST

START_TEST(test_many_headers)
{
	char *h = repeat("X-Header: value\r\n", 5000), *req;
	char *big = repeat("v", 1 << 20);
	req = xasprintf("GET /ok/file HTTP/1.1\r\nHost: x\r\n%s\r\n", h);
	refused(send_req(req, strlen(req), NULL), "5,000 headers");
	free(req);
	req = xasprintf("GET /ok/file HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", big);
	refused(send_req(req, strlen(req), NULL), "a 1 MiB header");
	free(req);
	free(h);
	free(big);
	alive("thousands of headers");
}
END_TEST

/* Many query arguments in a short URL (2 KB, 1,000 arguments) are
 * answered (or refused) at once, not left hanging until the idle timeout.
 * (libmicrohttpd stalls when the arguments overflow the connection's
 * memory pool.) */
START_TEST(test_many_query_args)
{
	static const int counts[] = {1000, 5000};
	static const char *const heads[] = {"GET /ok/file?a", "PUT /q/x?a", "DELETE /q/y?a"};
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		for (size_t k = 0; k < sizeof(heads) / sizeof(heads[0]); k++) {
			char *args = repeat("&a", (size_t)counts[i]), *what;
			char *req = xasprintf("%s%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s",
					      heads[k], args, k == 1 ? 5 : 0, k == 1 ? "hello" : "");
			uint64_t t0 = now_ms();
			long st = h_raw(v.port, req, strlen(req), NULL, T_MS);
			what = xasprintf("%s with %d query arguments", heads[k], counts[i]);
			ck_assert_msg(st != -1 && now_ms() - t0 < T_MS,
				      "%s: no answer in %llu ms (hangs until the idle timeout)", what,
				      (unsigned long long)(now_ms() - t0));
			ck_assert_msg(st == 0 || (st >= 200 && st < 500), "%s: got %ld", what, st);
			free(what), free(req), free(args);
		}
	alive("many query arguments");
}
END_TEST

START_TEST(test_lying_content_length)
{
	struct buf out = {0};
	struct resp r;
	char *u;
	int fd;
	long st;
	/* Shorter body, then close: nothing is stored. */
	fd = h_connect(v.port);
	ck_assert_int_ge(fd, 0);
	h_send(fd, "PUT /lie/short HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789",
	       strlen("PUT /lie/short HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789"));
	ck_assert_msg(files_open_become("lie", 1), "the short upload never began (no file open)");
	close(fd);
	ck_assert_msg(files_open_become("lie", 0), "the upload cut short still holds its file");
	u = xasprintf("http://%s/lie/short", v.name);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 404);
	h_resp_free(&r);
	free(u);

	/* Longer body: the first Content-Length bytes are the value; the rest
	 * is read as the next request (garbage: refused or closed). */
	{
		static const char req[] = "PUT /lie/long HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
					  "helloEXTRA BYTES THAT ARE NOT HTTP\r\n\r\n";
		fd = h_connect(v.port);
		h_send(fd, req, sizeof(req) - 1);
		st = h_recv_resp(fd, &out, T_MS, false);
		ck_assert_msg(st == 201, "PUT with a body longer than Content-Length: %ld", st);
		buf_free(&out);
		refused(h_recv_resp(fd, NULL, T_MS, false), "the bytes past Content-Length");
		close(fd);
		u = xasprintf("http://%s/lie/long", v.name);
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
		ck_assert_msg(r.body.len == 5 && !memcmp(r.body.data, "hello", 5),
			      "stored %zu bytes, want the 5 of Content-Length", r.body.len);
		h_resp_free(&r);
		free(u);
	}
	/* Content-Lengths that are not numbers, or two that disagree. */
	{
		static const char *const cls[] = {
			"Content-Length: -1\r\n", "Content-Length: abc\r\n",
			"Content-Length: 99999999999999999999999\r\n",
			"Content-Length: 5\r\nContent-Length: 7\r\n",
			"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
			"Transfer-Encoding: chunked\r\n"};
		for (size_t i = 0; i < sizeof(cls) / sizeof(cls[0]); i++) {
			char *req = xasprintf("PUT /lie/cl%zu HTTP/1.1\r\nHost: x\r\n%s\r\n"
					      "zzzzzzzzzzzz\r\n0\r\n\r\n", i, cls[i]);
			st = send_req(req, strlen(req), NULL);
			ck_assert_msg(st == 0 || (st >= 400 && st < 500) || st == 201,
				      "Content-Length case %zu: got %ld", i, st);
			free(req);
		}
	}
	/* A chunk size that overflows. */
	{
		static const char req[] = "PUT /lie/chunk HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
					  "fffffffffffffffffffff\r\nabc\r\n0\r\n\r\n";
		refused(send_req(req, sizeof(req) - 1, NULL), "an overflowing chunk size");
		u = xasprintf("http://%s/lie/chunk", v.name);
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 404);
		h_resp_free(&r);
		free(u);
	}
	alive("lying Content-Length");
}
END_TEST

START_TEST(test_garbage)
{
	static const char tls[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n";
	static const char *const junk[] = {
		"GET / HTTP/9.9\r\n\r\n",
		"GET / FOO/1.1\r\n\r\n",
		"GET /ok/file HTTP/1.1 extra\r\n\r\n",
		"GET\r\n\r\n",
		"GET /ok/file\r\n\r\n",
		"GET /ok/file HTTP/1.1\r\nNo colon here\r\n\r\n",
		"GET /ok/file HTTP/1.1\r\n: empty name\r\n\r\n",
		"GET /ok/file HTTP/1.1\r\n folded: header\r\n\r\n",
		"GET /ok/file HTTP/1.1\nHost: x\n\n\x01\x02\x03\r\n\r\n",
	};
	unsigned seed = 12345;
	refused(send_req(tls, sizeof(tls) - 1, NULL), "a TLS ClientHello");
	/* Blank lines before a request are to be skipped (RFC 9112 2.2): the
	 * server may wait for the request, like for any idle client. */
	{
		long st = send_req("\r\n\r\n\r\n\r\n", 8, NULL);
		ck_assert_msg(st == -1 || st == 0 || (st >= 400 && st < 500), "blank lines: %ld", st);
		st = send_req("     \r\n\r\n", 9, NULL);
		ck_assert_msg(st == -1 || st == 0 || (st >= 400 && st < 500), "spaces: %ld", st);
	}
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		long st = send_req(junk[i], strlen(junk[i]), NULL);
		/* A few of these are tolerable HTTP (a bare LF, an extra token):
		 * an answer to them is fine (505 for HTTP/9.9 too), a 5xx or a hang
		 * is not. */
		ck_assert_msg(st != -1 && !(st >= 500 && st != 505), "junk %zu: got %ld", i, st);
	}
	for (int round = 0; round < 20; round++) {
		char b[4100];
		long st;
		for (size_t j = 0; j < 4096; j++) {
			seed = seed * 1103515245u + 12345u;
			b[j] = (char)(seed >> 16);
		}
		memcpy(b + 4096, "\r\n\r\n", 4);
		st = send_req(b, sizeof(b), NULL);
		refused(st, "4 KiB of random bytes");
	}
	alive("garbage");
}
END_TEST

/* What nginx answers with a 400 (and closes) gets a 400 here too, with a
 * one-line reason and "Connection: close": a body framed both by chunks
 * and by a length, a request line that is not HTTP, HTTP/1.1 without
 * Host.  Nothing is stored. */
#define R(s) {s, sizeof(s) - 1}
static const struct {
	const char *s;
	size_t n;
} nginx_400s[] = {
	R("PUT /te/cl HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
	  "c\r\nhello world!\r\n0\r\n\r\n"),
	R("PUT /te/cl-long HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
	  "Content-Length: 100000\r\n\r\nc\r\nhello world!\r\n0\r\n\r\n"),
	R("GARBAGE\r\n\r\n"),
	R("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"), /* a ClientHello's start */
	R("GET\r\n\r\n"),
	R("GET /ok/file HTTP/1.1\r\n\r\n"),
	R("PUT /te/no-host HTTP/1.1\r\nContent-Length: 1\r\n\r\nv"),
};

START_TEST(test_nginx_400s)
{
	static const char *const paths[] = {"/te/cl", "/te/cl-long", "/te/no-host"};
	for (size_t i = 0; i < sizeof(nginx_400s) / sizeof(nginx_400s[0]); i++) {
		struct buf out = {0};
		long st = send_req(nginx_400s[i].s, nginx_400s[i].n, &out);
		const char *body = st > 0 ? strstr(out.data, "\r\n\r\n") : NULL;
		ck_assert_msg(st == 400, "request %zu (%.12s): got %ld, want 400 as nginx%s", i,
			      nginx_400s[i].s, st,
			      st == -1 ? " (no answer: hang)" : st == 0 ? " (closed unanswered)" : "");
		ck_assert_msg(strcasestr(out.data, "\r\nConnection: close\r\n"),
			      "request %zu: not closed: %s", i, out.data);
		body += 4;
		ck_assert_msg(body[0] && strchr(body, '\n') == body + strlen(body) - 1,
			      "request %zu: not a one-line reason: %s", i, body);
		buf_free(&out);
	}
	/* HTTP/1.0 needs no Host */
	ck_assert_int_eq(send_req("GET /ok/file HTTP/1.0\r\n\r\n", 25, NULL), 200);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char *u = xasprintf("http://%s%s", v.name, paths[i]);
		ck_assert_int_eq(h_status("GET", u), 404);
		free(u);
	}
	alive("requests nginx answers with a 400");
}
END_TEST

/* Every request is answered, and a half-closed connection closed right
 * after its answer, whatever came before on other connections. */
START_TEST(test_junk_then_good)
{
	static const char good[] = "GET /nokey HTTP/1.1\r\nHost: x\r\n\r\n";
	const char *why;
	ck_assert_msg(!h_junk_rounds(v.port, good, 100, false, &why), "1,200 good requests: %s",
		      why);
	ck_assert_msg(!h_junk_rounds(v.port, good, 100, true, &why),
		      "1,200 good requests, half-closed: %s", why);
	alive("junk then good requests");
}
END_TEST

START_TEST(test_unknown_methods)
{
	static const char *const ms[] = {"FOO", "PROPFIND", "MKCOL", "TRACE", "OPTIONS", "PATCH",
					  "POST", "get", "G\x01T", "COPY", "MOVE", "LOCK"};
	char *longm = repeat("X", 10000), *req;
	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		req = xasprintf("%s /ok/file HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", ms[i]);
		refused(send_req(req, strlen(req), NULL), ms[i]);
		free(req);
	}
	req = xasprintf("%s /ok/file HTTP/1.1\r\nHost: x\r\n\r\n", longm);
	refused(send_req(req, strlen(req), NULL), "a 10,000-byte method");
	free(req);
	free(longm);
	refused(send_req("CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n", 43, NULL), "CONNECT");
	alive("unknown methods");
	/* The file was not changed by any of them. */
}
END_TEST

START_TEST(test_malformed_range)
{
	static const char *const ranges[] = {
		"bytes=abc", "bytes=5-1", "bytes=--1", "bytes=-", "bytes=1-2-3", "bytes=,",
		"bytes=99999999999999999999-", "bytes=0-99999999999999999999",
		"bytes=-99999999999999999999", "bytes=9223372036854775807-",
		"bytes=-9223372036854775808", "bytes= 0 - 1 ", "bytes=0-0,1-1,2-2",
		"bits=0-1", "bytes=\x01", "bytes=5-", "bytes=100-", "bytes=4-4", "=", "bytes"};
	char *many = repeat("0-0,", 15000), *req;
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		struct buf out = {0};
		long st;
		req = xasprintf("GET /ok/file HTTP/1.1\r\nHost: x\r\nRange: %s\r\n\r\n", ranges[i]);
		st = send_req(req, strlen(req), &out);
		ck_assert_msg(st == 200 || st == 206 || st == 416 || (st >= 400 && st < 500),
			      "Range: %s gave %ld", ranges[i], st);
		if (st == 206)
			ck_assert_msg(strstr(out.data, "Content-Range: bytes ") != NULL,
				      "206 without Content-Range for %s", ranges[i]);
		if (st == 416)
			ck_assert_msg(strstr(out.data, "Content-Range: bytes */5") != NULL,
				      "416 without Content-Range: bytes */5 for %s", ranges[i]);
		buf_free(&out);
		free(req);
	}
	req = xasprintf("GET /ok/file HTTP/1.1\r\nHost: x\r\nRange: bytes=%s0-0\r\n\r\n", many);
	{
		long st = send_req(req, strlen(req), NULL);
		ck_assert_msg(st == 0 || st == 200 || st == 206 || (st >= 400 && st < 500),
			      "a 60 KB Range gave %ld", st);
	}
	free(req);
	free(many);
	alive("malformed Range");
}
END_TEST

/* Uploads cut off mid-body (the client sent a megabyte of ten, or of an
 * endless chunked body, then closed): each connection and its temporary
 * file are let go at once, not after the idle timeout (60 s). */
START_TEST(test_cut_uploads_freed)
{
	static const char *const heads[] = {
		"PUT /cut/%d HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n",
		"PUT /cut/%d HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
		"10000000\r\n"};
	enum { NCUT = 16, BODY = 1 << 20 };
	char *body = xcalloc(1, BODY);
	int before = h_fd_count(v.pid), now = 0;
	uint64_t t0;
	memset(body, 'a', BODY);
	for (int i = 0; i < NCUT; i++) {
		char *head = xasprintf(heads[i % 2], i);
		int fd = h_connect(v.port);
		ck_assert_int_ge(fd, 0);
		memcpy(body, head, strlen(head));   /* head and body in one send */
		h_send(fd, body, BODY);
		close(fd);
		free(head);
	}
	free(body);
	/* at once: 0.8 s at most measured (SANITIZE=1); 20 s is a liveness
	 * bound, and still a third of the idle timeout */
	t0 = now_ms();
	while ((now = h_fd_count(v.pid)) > before && now_ms() - t0 < 20000)
		usleep(50000);
	fprintf(stderr, "volume cut uploads: %d descriptors before, %d after %llu ms\n", before,
		now, (unsigned long long)(now_ms() - t0));
	ck_assert_msg(now <= before, "%d uploads cut off: the volume holds %d descriptors, %d "
		      "before", NCUT, now, before);
	alive("cut uploads");
}
END_TEST

/* ---- slow and idle clients ---- */

START_TEST(test_slowloris)
{
	enum { NSLOW = 200, ROUNDS = 30 };
	static const char req[] = "GET /ok/file HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa\r\n";
	int fds[NSLOW];
	uint64_t worst = 0;
	for (int i = 0; i < NSLOW; i++) {
		fds[i] = h_connect(v.port);
		ck_assert_int_ge(fds[i], 0);
	}
	for (int r = 0; r < ROUNDS; r++) {
		uint64_t t0;
		for (int i = 0; i < NSLOW; i++)
			if (fds[i] >= 0 && !h_send(fds[i], req + (size_t)r % (sizeof(req) - 1), 1)) {
				close(fds[i]);
				fds[i] = -1;
			}
		t0 = now_ms();
		alive("slowloris round");
		if (now_ms() - t0 > worst)
			worst = now_ms() - t0;
		usleep(50000);
	}
	for (int i = 0; i < NSLOW; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* Not a speed test (alive() bounds each GET at T_MS): a server
	 * stalled by the dribblers would hold the GET until its idle timeout. */
	fprintf(stderr, "volume slowloris: %d dribbling connections, slowest normal GET %llu ms\n",
		NSLOW, (unsigned long long)worst);
}
END_TEST

/* A slowloris client sends a byte now and then, so it is never idle; as
 * with nginx's client_header_timeout (60 s), the whole request head must
 * arrive within 60 s, or the client is dropped: else 16,384 of them hold
 * every connection the volume serves. */
START_TEST(test_slow_headers_dropped)
{
	static const char req[] = "GET /ok/file HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	/* its own volume, with -idletimeout 2s rather than a minute */
	char *bin = h_bin("mkv-volume"), *dir = h_tmpdir(), *log = xasprintf("%s.log", dir), port[16];
	int p = h_free_port(), fd;
	uint64_t t0;
	bool dropped = false;
	pid_t pid;
	snprintf(port, sizeof(port), "%d", p);
	{
		char *argv[] = {bin, "-port", port, "-idletimeout", "2s", dir, NULL};
		pid = h_spawn(argv, log);
	}
	ck_assert(h_wait_port(p, 10000));
	fd = h_connect(p);
	ck_assert_int_ge(fd, 0);
	t0 = now_ms();
	for (size_t i = 0; i < sizeof(req) - 1 && now_ms() - t0 < 30000; i++) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		char c[512];
		if (!h_send(fd, req + i, 1) ||
		    (poll(&pf, 1, 500) == 1 && recv(fd, c, sizeof(c), 0) <= 0)) {
			dropped = true;
			break;
		}
	}
	close(fd);
	ck_assert_msg(dropped && now_ms() - t0 < 20000, "a client dribbling its headers was kept "
		      "%llu ms (-idletimeout 2s)", (unsigned long long)(now_ms() - t0));
	{
		static const char get[] = "GET /x HTTP/1.1\r\nHost: x\r\n\r\n";
		ck_assert_int_eq(h_raw(p, get, sizeof(get) - 1, NULL, 5000), 404);
	}
	{
		int st = h_stop(pid, SIGTERM);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "mkv-volume -idletimeout 2s: "
			      "status %#x on SIGTERM (see %s)", st, log);
	}
	h_log_check(log);
	unlink(log);
	h_rmrf(dir);
	free(bin), free(dir), free(log);
}
END_TEST

/* A connection begun but not waited for: the kernel completes it (or
 * not) while we open the next thousands. */
static int connect_nb(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

START_TEST(test_idle_connections)
{
	enum { NIDLE = 5000 };
	int *fds = xcalloc(NIDLE, sizeof(int)), opened = 0, shed = 0;
	bool served_while_held;
	int before = h_fd_count(v.pid), now;
	uint64_t t0 = now_ms();
	for (int i = 0; i < NIDLE; i++)
		fds[i] = connect_nb(v.port);
	/* Wait (up to 5 s) for the handshakes: the server accepts them at its pace. */
	for (int round = 0; round < 50 && opened < NIDLE; round++) {
		usleep(100000);
		opened = 0;
		for (int i = 0; i < NIDLE; i++) {
			struct pollfd p = {.fd = fds[i], .events = POLLOUT};
			int err = 0;
			socklen_t el = sizeof(err);
			if (fds[i] >= 0 && poll(&p, 1, 0) == 1 &&
			    !getsockopt(fds[i], SOL_SOCKET, SO_ERROR, &err, &el) && !err)
				opened++;
		}
	}
	fprintf(stderr, "volume idle: %d connections in %llu ms\n", opened,
		(unsigned long long)(now_ms() - t0));
	/* Which of them has the server closed (beyond its connection limit)? */
	for (int i = 0; i < NIDLE; i++) {
		struct pollfd p = {.fd = fds[i], .events = POLLIN};
		char c;
		if (fds[i] >= 0 && poll(&p, 1, 0) == 1 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0)
			shed++;
	}
	{
		static const char get[] = "GET /ok/file HTTP/1.1\r\nHost: x\r\n\r\n";
		served_while_held = h_raw(v.port, get, sizeof(get) - 1, NULL, T_MS) == 200;
	}
	fprintf(stderr, "volume idle: %d of %d connected, %d closed by the server, a GET while "
		"held %s; RSS %ld KiB\n", opened, NIDLE, shed,
		served_while_held ? "served" : "refused", h_rss_kib(v.pid));
	ck_assert_msg(served_while_held || shed > 0,
		      "with %d idle connections held, the server neither serves a GET within "
		      "%d ms nor closes any of them", opened, T_MS);
	for (int i = 0; i < NIDLE; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	/* The server lets each go as it sees it closed, not at its idle
	 * timeout (60 s). */
	t0 = now_ms();
	while ((now = h_fd_count(v.pid)) > before && now_ms() - t0 < 20000)
		usleep(50000);
	ck_assert_msg(now <= before, "%llu ms after the clients closed, the volume holds %d "
		      "descriptors, %d before", (unsigned long long)(now_ms() - t0), now, before);
	alive("5,000 idle connections");
}
END_TEST

START_TEST(test_rss_bounded)
{
	long kib = h_rss_kib(v.pid);
	fprintf(stderr, "volume RSS after the barrage: %ld KiB\n", kib);
	ck_assert_msg(kib > 0 && kib < 200 * 1024, "volume RSS %ld KiB after the barrage", kib);
	untouched("the whole barrage");
	alive("the whole barrage");
}
END_TEST

/* Last: the volume stops cleanly on SIGTERM after the barrage, and its log
 * holds no sanitizer report (under SANITIZE=1: no memory error, no leak):
 * h_vol_down checks both (the exit status in the teardown, whose child it
 * is). */
START_TEST(test_clean_exit)
{
	h_vol_down(&v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("volume hostile input");
	TCase *tc = tcase_create("hostile");
	SRunner *sr;
	int failed;
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_traversal);
	tcase_add_test(tc, test_nul_and_encoding);
	tcase_add_test(tc, test_huge_request_line);
	tcase_add_test(tc, test_many_headers);
	tcase_add_test(tc, test_many_query_args);
	tcase_add_test(tc, test_lying_content_length);
	tcase_add_test(tc, test_garbage);
	tcase_add_test(tc, test_nginx_400s);
	tcase_add_test(tc, test_junk_then_good);
	tcase_add_test(tc, test_unknown_methods);
	tcase_add_test(tc, test_malformed_range);
	tcase_add_test(tc, test_cut_uploads_freed);
	tcase_add_test(tc, test_slowloris);
	tcase_add_test(tc, test_idle_connections);
	tcase_add_test(tc, test_rss_bounded);
	tcase_add_test(tc, test_clean_exit);
	tcase_add_test(tc, test_slow_headers_dropped);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
