/* check_hostile.c -- the master against hostile clients (raw sockets):
 * keys with path traversal in every encoding, NUL, huge request lines and
 * header blocks, bad percent-encoding, hostile queries, lying
 * Content-Length, garbage, slowloris, idle clients, unknown methods,
 * Range, 5,000 idle connections.  Each gets a clear 4xx or a closed
 * connection, never a hang or a 5xx; after each the master still serves;
 * nothing next to the volumes' data directories or the index is read,
 * written or deleted; its RSS stays bounded.
 *
 * One cluster (three mkv-volumes, a master with -idletimeout 2s) serves the
 * whole suite (unchecked fixture), so the last test measures RSS after the
 * barrage.  check_volume_hostile.c does the same to mkv-volume alone. */
#include <check.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/placement.h"
#include "harness.h"

#define SECRET "SECRET-outside-the-data-directory\n"
#define T_MS 5000           /* longest a hostile request may wait for its answer */
#define NVOL 3

static struct vol vols[NVOL];
static struct master m;
static char *parents[NVOL + 1];   /* directories holding each data dir, and the db */
static char *snapshot0;
static const char *skip_prefix;   /* the data dir (or db) skipped while snapshotting */

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
		/* the data directory (or index) itself and its log are not "outside" */
		if (!strcmp(p, skip_prefix) || (!strncmp(p, skip_prefix, strlen(skip_prefix)) &&
						!strcmp(p + strlen(skip_prefix), ".log")) ||
		    !strcmp(e->d_name, "master.log")) {
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
	for (int i = 0; i <= NVOL; i++) {
		skip_prefix = i < NVOL ? vols[i].dir : m.db;
		buf_printf(&b, "== %d\n", i);
		snap_dir(&b, parents[i], "");
	}
	return b.data;
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot create %s", path);
	fputs(s, f);
	fclose(f);
}

static char *url(const char *path)
{
	return xasprintf("%s%s", m.base, path);
}

static void setup(void)
{
	static const char *const flags[] = {"-idletimeout", "2s", NULL};
	struct rlimit rl;
	/* Room for 5,000 client sockets here and in the servers (inherited). */
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGPIPE, SIG_IGN);

	for (int i = 0; i < NVOL; i++)
		h_vol_start(&vols[i], VOL_MKV);
	memset(&m, 0, sizeof(m));
	h_master_start(&m, vols, NVOL, flags);
	for (int i = 0; i <= NVOL; i++) {
		char *p;
		parents[i] = xstrdup(i < NVOL ? vols[i].dir : m.db);
		*strrchr(parents[i], '/') = '\0';
		/* Bait next to each data directory and the index. */
		p = xasprintf("%s/planted", parents[i]);
		write_file(p, SECRET);
		free(p);
		p = xasprintf("%s/outside", parents[i]);
		mkdir(p, 0755);
		free(p);
		p = xasprintf("%s/outside/victim", parents[i]);
		write_file(p, SECRET);
		free(p);
	}
	snapshot0 = snapshot();
	{
		struct resp r;
		char *u = url("/ok");
		long st = 0;
		/* the volumes are marked up by the master's first check round */
		for (int i = 0; i < 100 && (st = h_http("PUT", u, "hello", 5, NULL, false, &r)) == 503; i++) {
			h_resp_free(&r);
			usleep(50000);
		}
		ck_assert_int_eq(st, 201);
		h_resp_free(&r);
		free(u);
	}
}

static void teardown(void)
{
	h_master_stop(&m);
	for (int i = 0; i < NVOL; i++)
		h_vol_stop(&vols[i]);
	for (int i = 0; i <= NVOL; i++)
		free(parents[i]);
	free(snapshot0);
}

/* A second master over the same volumes with the default -idletimeout
 * (60 s), for the tests whose failure is "held until the idle timeout":
 * against it a liveness bound of 20 s tells that failure from a slow
 * machine, where the fixture's 2 s would need a speed threshold. */
static void long_master(struct master *lm)
{
	struct resp r;
	char *u;
	long st = 0;
	memset(lm, 0, sizeof(*lm));
	h_master_start(lm, vols, NVOL, NULL);
	u = xasprintf("%s/ok", lm->base);
	for (int i = 0; i < 400 && (st = h_http("PUT", u, "hello", 5, NULL, false, &r)) == 503; i++) {
		h_resp_free(&r);
		usleep(50000);
	}
	ck_assert_int_eq(st, 201);
	h_resp_free(&r);
	free(u);
}

/* The master still answers a normal request, promptly, and the value
 * reads back through the redirect. */
static void alive(const char *after)
{
	struct resp r;
	char *u = url("/ok");
	uint64_t t0 = now_ms();
	long st = h_http("GET", u, NULL, 0, NULL, true, &r);
	ck_assert_msg(st == 200 && r.body.len == 5 && !memcmp(r.body.data, "hello", 5),
		      "after %s: GET /ok gave %ld", after, st);
	ck_assert_msg(now_ms() - t0 < 2000, "after %s: a normal GET took %llu ms", after,
		      (unsigned long long)(now_ms() - t0));
	h_resp_free(&r);
	free(u);
}

static void untouched(const char *after)
{
	char *s = snapshot();
	ck_assert_msg(!strcmp(s, snapshot0), "after %s: files outside the data directories "
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

static long send_req(const char *req, size_t n, struct buf *out)
{
	return h_raw(m.port, req, n, out, T_MS);
}

static char *repeat(const char *s, size_t times)
{
	size_t l = strlen(s);
	char *r = xmalloc(l * times + 1);
	for (size_t i = 0; i < times; i++)
		memcpy(r + i * l, s, l);
	r[l * times] = '\0';
	return r;
}

/* ---- path traversal ---- */

/* For the master a key is opaque bytes: its blob lives at base64(key) on
 * a volume, so "/../planted" is just a key.  Whatever the answer, the
 * bytes stay inside the volumes' data directories and nothing outside is
 * read. */
static const char *const trav[] = {
	"/../planted", "/..", "/../", "/%2e%2e/planted", "/%2E%2E/planted",
	"/%2e%2e%2fplanted", "/%2E%2E%2Fplanted", "/..%2fplanted", "/..%2Foutside%2Fvictim",
	"/%2e./planted", "/.%2e/planted", "/a/b/../../../planted", "/./../planted",
	"//../planted", "/a/%2e%2e/%2e%2e/planted", "/../outside/victim",
	"/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
	"/%252e%252e/planted", "/%252e%252e%252fplanted", "/..\\planted",
	"/a/..\\..\\planted", "/%5c..%5cplanted", "/%c0%ae%c0%ae/planted", "/..;/planted",
	"../planted", "planted", "http://127.0.0.1/../planted",
};

START_TEST(test_traversal)
{
	static const char *const methods[] = {"PUT", "GET", "HEAD", "REBALANCE", "UNLINK",
					      "DELETE"};
	for (size_t i = 0; i < sizeof(trav) / sizeof(trav[0]); i++)
		for (size_t k = 0; k < sizeof(methods) / sizeof(methods[0]); k++) {
			bool put = !strcmp(methods[k], "PUT");
			char *req = xasprintf("%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
					      "Connection: close\r\n\r\n%s",
					      methods[k], trav[i], put ? 6 : 0, put ? "PWNED\n" : "");
			char *what = xasprintf("%s %s", methods[k], trav[i]);
			struct buf out = {0};
			long st = send_req(req, strlen(req), &out);
			ck_assert_msg(!out.data || !strstr(out.data, "SECRET"), "%s read %s", what,
				      out.data);
			ck_assert_msg(st > 0 && st < 500, "%s: got %ld", what, st);
			if (!strcmp(methods[k], "GET") && st == 302) {
				/* Following the redirect gives the stored value, not the bait. */
				char *loc = strstr(out.data, "\r\nLocation: ");
				struct resp r;
				ck_assert_ptr_nonnull(loc);
				loc = xstrndup(loc + 12, strcspn(loc + 12, "\r\n"));
				ck_assert_int_eq(h_http("GET", loc, NULL, 0, NULL, false, &r), 200);
				ck_assert_msg(r.body.len == 6 && !memcmp(r.body.data, "PWNED\n", 6),
					      "%s: the blob is not what was PUT", what);
				h_resp_free(&r);
				free(loc);
			}
			buf_free(&out);
			free(req);
			free(what);
		}
	untouched("traversal keys");
	alive("traversal keys");
}
END_TEST

/* ---- malformed requests ---- */

START_TEST(test_nul_and_encoding)
{
	static const char *const paths[] = {"/a%00b", "/%00", "/%zz", "/%", "/%4", "/%%",
					    "/%g0", "/a%2", "/ok%ZZ", "/%0", "/", "/a%00"};
	static const char raw_nul[] = "GET /o\0k HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char hdr_nul[] = "GET /ok HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n";
	static const char *const methods[] = {"GET", "PUT", "DELETE", "UNLINK"};
	long st;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		for (size_t k = 0; k < 4; k++) {
			struct buf out = {0};
			char *req = xasprintf("%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
					      "Connection: close\r\n\r\n%s", methods[k], paths[i],
					      k == 1 ? 5 : 0, k == 1 ? "hello" : "");
			st = send_req(req, strlen(req), &out);
			ck_assert_msg(st == 400, "%s %s: got %ld, want 400", methods[k], paths[i], st);
			ck_assert_msg(strstr(out.data, "\r\n\r\n")[4] != '\0',
				      "%s %s: 400 without a reason", methods[k], paths[i]);
			buf_free(&out);
			free(req);
		}
	refused(send_req(raw_nul, sizeof(raw_nul) - 1, NULL), "a NUL byte in the request line");
	st = send_req(hdr_nul, sizeof(hdr_nul) - 1, NULL);
	ck_assert_msg(st == 0 || st == 302 || (st >= 400 && st < 500),
		      "a NUL in a header: got %ld", st);
	alive("NUL and bad percent-encoding");
}
END_TEST

/* A request target that is not a path is refused, but the absolute form
 * (through a proxy) names its path's key, as Go's server reads it; a
 * transfer coding libmicrohttpd cannot frame, or Content-Lengths that
 * disagree, are refused at once instead of read to the close. */
START_TEST(test_target_and_framing)
{
	static const char *const reqs[] = {
		"PUT noslash HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nv",
		"GET noslash?list HTTP/1.1\r\nHost: x\r\n\r\n",
		"PUT /fr/te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nvv",
		"GET /ok HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"PUT /fr/cl HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nvv"};
	static const char absreq[] =
		"PUT http://127.0.0.1/fr/abs HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nv";
	struct resp r;
	char *u;
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		struct buf out = {0};
		long st = send_req(reqs[i], strlen(reqs[i]), &out);
		ck_assert_msg(st == 400, "request %zu: got %ld, want 400", i, st);
		ck_assert_msg(strstr(out.data, "\r\n\r\n")[4] != '\0', "request %zu: no reason", i);
		buf_free(&out);
	}
	ck_assert_int_eq(send_req(absreq, sizeof(absreq) - 1, NULL), 201);
	u = url("/fr/abs");
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, true, &r), 200);
	ck_assert_msg(r.body.len == 1 && r.body.data[0] == 'v', "the absolute form's key");
	h_resp_free(&r);
	free(u);
	u = url("/?list");
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	ck_assert_msg(!strstr(r.body.data, "noslash") && !strstr(r.body.data, "/fr/te") &&
			      !strstr(r.body.data, "/fr/cl"), "a refused request stored: %s", r.body.data);
	h_resp_free(&r);
	free(u);
	alive("targets and framing");
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
	req = xasprintf("GET /?list&start=%s HTTP/1.1\r\nHost: x\r\n\r\n", a);
	refused(send_req(req, strlen(req), NULL), "a 64 KiB query");
	free(req);
	free(a);
	a = repeat("b", 1 << 20);
	req = xasprintf("GET /%s", a);
	refused(send_req(req, strlen(req), NULL), "a 1 MiB request line");
	free(req);
	free(a);
	free(dots);
	/* Keys just past the limit, in every size class. */
	{
		char *k = repeat("k", 189), *kk = repeat("%41", 190);
		req = xasprintf("PUT /%s HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx", k);
		ck_assert_int_eq(send_req(req, strlen(req), NULL), 414);
		free(req);
		req = xasprintf("GET /%s HTTP/1.1\r\nHost: x\r\n\r\n", kk);
		ck_assert_int_eq(send_req(req, strlen(req), NULL), 414);
		free(req);
		free(k);
		free(kk);
	}
	alive("huge request lines");
}
END_TEST

START_TEST(test_many_headers)
{
	char *h = repeat("X-Header: value\r\n", 5000), *req;
	char *big = repeat("v", 1 << 20);
	req = xasprintf("GET /ok HTTP/1.1\r\nHost: x\r\n%s\r\n", h);
	refused(send_req(req, strlen(req), NULL), "5,000 headers");
	free(req);
	req = xasprintf("PUT /many HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n%s\r\nhello", h);
	refused(send_req(req, strlen(req), NULL), "a PUT with 5,000 headers");
	free(req);
	req = xasprintf("GET /ok HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", big);
	refused(send_req(req, strlen(req), NULL), "a 1 MiB header");
	free(req);
	free(h);
	free(big);
	alive("thousands of headers");
}
END_TEST

START_TEST(test_hostile_queries)
{
	static const struct {
		const char *target;
		int want;        /* 0: any 4xx */
	} qs[] = {
		{"/?list&limit=-1", 400}, {"/?list&limit=0", 400}, {"/?list&limit=abc", 400},
		{"/?list&limit=99999999999999999999999", 400}, {"/?list&limit=", 400},
		{"/?list&limit=1e3", 400}, {"/?list&limit=%zz", 400}, {"/?list&limit=%30", 400},
		{"/?list&start=%zz", 400}, {"/%zz?list", 400}, {"/%00?list", 400},
		{"/ok?x", 403}, {"/ok?", 403}, {"/ok?%00", 403}, {"/ok?listx", 403},
		{"/?unlinked&limit=-5", 400},
	};
	char *many = repeat("&list", 2000), *req;
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		long st;
		req = xasprintf("GET %s HTTP/1.1\r\nHost: x\r\n\r\n", qs[i].target);
		st = send_req(req, strlen(req), NULL);
		if (qs[i].want)
			ck_assert_msg(st == qs[i].want, "GET %s: got %ld, want %d", qs[i].target, st,
				      qs[i].want);
		else
			refused(st, qs[i].target);
		free(req);
	}
	req = xasprintf("PUT /q?%s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", many);
	refused(send_req(req, strlen(req), NULL), "PUT with a 10 KB query");
	free(req);
	req = xasprintf("GET /?list%s HTTP/1.1\r\nHost: x\r\n\r\n", many);
	{
		long st = send_req(req, strlen(req), NULL);
		ck_assert_msg(st == 200 || st == 0 || (st >= 400 && st < 500),
			      "GET ?list&list...: got %ld", st);
	}
	free(req);
	free(many);
	alive("hostile queries");
}
END_TEST

/* A short URL with many query arguments (600 bytes, 300 arguments) must
 * be answered (or refused) at once, not left hanging until -idletimeout
 * closes it.  (Found here: libmicrohttpd runs out of the connection's
 * 16 KiB pool storing the arguments and stalls; the request's state,
 * allocated in the URI callback, is never freed -- leak-checked by
 * test_clean_exit under SANITIZE=1.) */
START_TEST(test_many_query_args)
{
	static const int counts[] = {300, 1000, 5000};
	static const char *const heads[] = {"GET /?list", "GET /ok?a", "PUT /q?a", "DELETE /ok?a"};
	struct master lm;
	long_master(&lm);
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		for (size_t k = 0; k < sizeof(heads) / sizeof(heads[0]); k++) {
			char *args = repeat("&a", (size_t)counts[i]), *what;
			char *req = xasprintf("%s%s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
					      "hello", heads[k], args);
			long st = h_raw(lm.port, req, strlen(req), NULL, 20000);
			what = xasprintf("%s with %d query arguments", heads[k], counts[i]);
			ck_assert_msg(st != -1, "%s: no answer in 20 s (hangs until -idletimeout)", what);
			refused(st, what);
			free(what), free(req), free(args);
		}
	h_master_stop(&lm);
	alive("many query arguments");
}
END_TEST

START_TEST(test_lying_content_length)
{
	static const char shortreq[] =
		"PUT /lie/short HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789";
	struct buf out = {0};
	struct resp r;
	char *u;
	int fd;
	long st;
	/* Shorter body, then close: the key is not stored, and its lock is
	 * free again (a new PUT of it succeeds). */
	fd = h_connect(m.port);
	ck_assert_int_ge(fd, 0);
	h_send(fd, shortreq, sizeof(shortreq) - 1);
	u = url("/lie/short");
	/* the master has taken the PUT: it holds the key (a DELETE gets 409) */
	for (uint64_t end = now_ms() + 20000; (st = h_status("DELETE", u)) == 404 && now_ms() < end;)
		usleep(20000);
	ck_assert_msg(st == 409, "the PUT cut short was never taken: DELETE %ld", st);
	close(fd);
	for (int i = 0; i < 50 && (st = h_http("GET", u, NULL, 0, NULL, false, &r)) != 404; i++) {
		h_resp_free(&r);
		usleep(100000);
	}
	ck_assert_msg(st == 404, "a PUT cut short left a visible key: GET %ld", st);
	h_resp_free(&r);
	for (int i = 0; i < 50 && (st = h_http("PUT", u, "whole", 5, NULL, false, &r)) == 409; i++) {
		h_resp_free(&r);
		usleep(100000);
	}
	ck_assert_msg(st == 201, "PUT after a PUT cut short: %ld", st);
	h_resp_free(&r);
	free(u);

	/* Longer body: the first Content-Length bytes are the value; the rest
	 * is read as the next request (garbage: refused or closed). */
	{
		static const char req[] = "PUT /lie/long HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
					  "helloEXTRA BYTES THAT ARE NOT HTTP\r\n\r\n";
		fd = h_connect(m.port);
		h_send(fd, req, sizeof(req) - 1);
		st = h_recv_resp(fd, &out, T_MS, false);
		ck_assert_msg(st == 201, "PUT with a body longer than Content-Length: %ld", st);
		buf_free(&out);
		refused(h_recv_resp(fd, NULL, T_MS, false), "the bytes past Content-Length");
		close(fd);
		u = url("/lie/long");
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, true, &r), 200);
		ck_assert_msg(r.body.len == 5 && !memcmp(r.body.data, "hello", 5),
			      "stored %zu bytes, want the 5 of Content-Length", r.body.len);
		h_resp_free(&r);
		free(u);
	}
	/* One byte past its length: the value is the length's bytes, on
	 * every replica, and its record's md5 is theirs. */
	{
		static const char req[] = "PUT /lie/one HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
					  "hello!";
		char path[PATH_MAX_LEN], *locs, *save = NULL, *md5;
		int n = 0;
		fd = h_connect(m.port);
		h_send(fd, req, sizeof(req) - 1);
		st = h_recv_resp(fd, NULL, T_MS, false);
		close(fd);
		ck_assert_msg(st == 201, "PUT with one byte past Content-Length: %ld", st);
		u = url("/lie/one");
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 302);
		md5 = h_header(&r, "Content-Md5");
		locs = h_header(&r, "Key-Volumes");
		ck_assert_msg(md5 && !strcmp(md5, "5d41402abc4b2a76b9719d911017c592"),
			      "the record's md5 is not hello's: %s", md5 ? md5 : "(none)");
		h_resp_free(&r);
		placement_path("/lie/one", 8, path);
		for (char *l = strtok_r(locs, ",", &save); l; l = strtok_r(NULL, ",", &save), n++) {
			char *b = xasprintf("http://%s%s", l, path);
			ck_assert_int_eq(h_http("GET", b, NULL, 0, NULL, false, &r), 200);
			ck_assert_msg(r.body.len == 5 && !memcmp(r.body.data, "hello", 5),
				      "replica %s holds %zu bytes", b, r.body.len);
			h_resp_free(&r);
			free(b);
		}
		ck_assert_int_eq(n, NVOL);
		free(md5), free(locs), free(u);
	}
	/* Content-Lengths that are not numbers, or two that disagree. */
	{
		static const char *const cls[] = {
			"Content-Length: -1\r\n", "Content-Length: abc\r\n",
			"Content-Length: 99999999999999999999999\r\n",
			"Content-Length: 5\r\nContent-Length: 7\r\n",
			"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
			"Transfer-Encoding: chunked\r\n", "Transfer-Encoding: gzip\r\n"};
		for (size_t i = 0; i < sizeof(cls) / sizeof(cls[0]); i++) {
			char *req = xasprintf("PUT /lie/cl%zu HTTP/1.1\r\nHost: x\r\n%s\r\n"
					      "zzzzzzzzzzzz\r\n0\r\n\r\n", i, cls[i]);
			st = send_req(req, strlen(req), NULL);
			ck_assert_msg(st == 0 || (st >= 400 && st < 500) || st == 201,
				      "Content-Length case %zu: got %ld", i, st);
			free(req);
		}
	}
	/* A chunk size that overflows: refused, nothing stored. */
	{
		static const char req[] = "PUT /lie/chunk HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
					  "fffffffffffffffffffff\r\nabc\r\n0\r\n\r\n";
		st = send_req(req, sizeof(req) - 1, NULL);
		ck_assert_msg(st == 0 || (st >= 400 && st < 500),
			      "an overflowing chunk size: got %ld", st);
		u = url("/lie/chunk");
		for (int i = 0; i < 50 && (st = h_http("GET", u, NULL, 0, NULL, false, &r)) != 404; i++) {
			h_resp_free(&r);
			usleep(100000);
		}
		ck_assert_msg(st == 404, "a refused chunked PUT left a visible key: GET %ld", st);
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
		"GET /ok HTTP/1.1 extra\r\n\r\n",
		"GET\r\n\r\n",
		"GET /ok\r\n\r\n",
		"GET /ok HTTP/1.1\r\nNo colon here\r\n\r\n",
		"GET /ok HTTP/1.1\r\n: empty name\r\n\r\n",
		"GET /ok HTTP/1.1\r\n folded: header\r\n\r\n",
		"GET /ok HTTP/1.1\nHost: x\n\n\x01\x02\x03\r\n\r\n",
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
 * and by a length (the PUT that once hung and held its key's lock until a
 * restart, the same through S3, and a length past the chunks), a request
 * line that is not HTTP, HTTP/1.1 without Host.  Nothing is stored, and
 * the key is free at once. */
#define R(s) {s, sizeof(s) - 1}
static const struct {
	const char *s;
	size_t n;
} nginx_400s[] = {
	R("PUT /te-cl HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
	  "c\r\nhello world!\r\n0\r\n\r\n"),
	R("PUT /te-cl-long HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
	  "Content-Length: 100000\r\n\r\nc\r\nhello world!\r\n0\r\n\r\n"),
	R("PUT /b/te-cl HTTP/1.1\r\nHost: x\r\nX-Amz-Date: 20261202T000000Z\r\n"
	  "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nc\r\nhello world!\r\n0\r\n\r\n"),
	R("GARBAGE\r\n\r\n"),
	R("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"), /* a ClientHello's start */
	R("GET\r\n\r\n"),
	R("GET /ok HTTP/1.1\r\n\r\n"),
	R("PUT /no-host HTTP/1.1\r\nContent-Length: 1\r\n\r\nv"),
};

/* st and out: a 400 with a one-line reason that closes the connection. */
static void nginx_400(long st, const struct buf *out, const char *what)
{
	const char *body = st > 0 ? strstr(out->data, "\r\n\r\n") : NULL;
	ck_assert_msg(st == 400, "%s: got %ld, want 400 as nginx%s", what, st,
		      st == -1 ? " (no answer: hang)" : st == 0 ? " (closed unanswered)" : "");
	ck_assert_msg(strcasestr(out->data, "\r\nConnection: close\r\n"), "%s: not closed: %s",
		      what, out->data);
	body += 4;
	ck_assert_msg(body[0] && strchr(body, '\n') == body + strlen(body) - 1,
		      "%s: not a one-line reason: %s", what, body);
}

START_TEST(test_nginx_400s)
{
	static const char *const keys[] = {"/te-cl", "/te-cl-long", "/b/te-cl", "/no-host"};
	for (size_t i = 0; i < sizeof(nginx_400s) / sizeof(nginx_400s[0]); i++) {
		struct buf out = {0};
		char what[64];
		snprintf(what, sizeof(what), "request %zu (%.12s)", i, nginx_400s[i].s);
		nginx_400(send_req(nginx_400s[i].s, nginx_400s[i].n, &out), &out, what);
		buf_free(&out);
	}
	/* HTTP/1.0 needs no Host */
	ck_assert_int_eq(send_req("GET /ok HTTP/1.0\r\n\r\n", 20, NULL), 302);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		struct resp r;
		char *u = url(keys[i]);
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 404);
		h_resp_free(&r);
		/* the key is free: no 409 */
		ck_assert_int_eq(h_http("PUT", u, "whole", 5, NULL, false, &r), 201);
		h_resp_free(&r);
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, true, &r), 200);
		ck_assert_msg(r.body.len == 5 && !memcmp(r.body.data, "whole", 5), "%s", keys[i]);
		h_resp_free(&r);
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
	int bad = h_junk_rounds(m.port, good, 100, false, &why);
	ck_assert_msg(bad == 0, "%d of 1,200 good requests: %s", bad, why);
	bad = h_junk_rounds(m.port, good, 100, true, &why);
	ck_assert_msg(bad == 0, "half-closed, %d of 1,200 good requests: %s", bad, why);
	alive("junk then good requests");
}
END_TEST

START_TEST(test_unknown_methods)
{
	static const char *const ms[] = {"FOO", "PROPFIND", "MKCOL", "TRACE", "OPTIONS", "PATCH",
					  "POST", "get", "COPY", "MOVE", "LOCK", "CONNECT"};
	char *longm = repeat("X", 10000), *req;
	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		struct buf out = {0};
		long st;
		req = xasprintf("%s /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", ms[i]);
		st = send_req(req, strlen(req), &out);
		refused(st, ms[i]);
		if (st == 405)
			ck_assert_msg(strstr(out.data, "\r\nAllow: ") != NULL, "%s: 405 without Allow",
				      ms[i]);
		buf_free(&out);
		free(req);
	}
	refused(send_req("G\x01T /ok HTTP/1.1\r\nHost: x\r\n\r\n", 30, NULL), "a control byte in the method");
	req = xasprintf("%s /ok HTTP/1.1\r\nHost: x\r\n\r\n", longm);
	refused(send_req(req, strlen(req), NULL), "a 10,000-byte method");
	free(req);
	free(longm);
	alive("unknown methods");
}
END_TEST

START_TEST(test_range_on_master)
{
	static const char *const ranges[] = {"bytes=abc", "bytes=5-1", "bytes=--1",
					     "bytes=99999999999999999999-", "bytes=0-0,1-1", "bits=0-1"};
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		char *req = xasprintf("GET /ok HTTP/1.1\r\nHost: x\r\nRange: %s\r\n\r\n", ranges[i]);
		long st = send_req(req, strlen(req), NULL);
		/* The master redirects; the volume judges the Range. */
		ck_assert_msg(st == 302 || (st >= 400 && st < 500), "Range: %s gave %ld", ranges[i],
			      st);
		free(req);
	}
	alive("Range");
}
END_TEST

/* Uploads cut off mid-body (a megabyte of ten, or of an endless chunked
 * body, then the client closed): each is let go at once, so a retry of the
 * key is not refused 409 until the idle timeout (60 s on this master: 20 s
 * tells the two apart), and no DELETED record of it lingers. */
START_TEST(test_cut_uploads_freed)
{
	static const char *const heads[] = {
		"PUT /cut/%d HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n",
		"PUT /cut/%d HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
		"10000000\r\n"};
	enum { NCUT = 4, BODY = 1 << 20 };
	char *body = xcalloc(1, BODY);
	struct master lm;
	long_master(&lm);
	memset(body, 'a', BODY);
	for (int i = 0; i < NCUT; i++) {
		char *head = xasprintf(heads[i % 2], i);
		char *u = xasprintf("%s/cut/%d", lm.base, i);
		int fd = h_connect(lm.port);
		struct resp r;
		uint64_t t0;
		long st;
		ck_assert_int_ge(fd, 0);
		memcpy(body, head, strlen(head));   /* head and body in one send */
		h_send(fd, body, BODY);
		close(fd);
		t0 = now_ms();
		while ((st = h_http("PUT", u, "x", 1, NULL, false, &r)) == 409 &&
		       now_ms() - t0 < 20000) {
			h_resp_free(&r);
			usleep(20000);
		}
		h_resp_free(&r);
		fprintf(stderr, "master cut upload %d: a retry got %ld after %llu ms\n", i, st,
			(unsigned long long)(now_ms() - t0));
		ck_assert_msg(st == 201, "upload %d cut off: a retry of the key got %ld for %llu ms", i,
			      st, (unsigned long long)(now_ms() - t0));
		free(head);
		free(u);
	}
	free(body);
	{
		struct resp r;
		char *u = xasprintf("%s/cut/?unlinked", lm.base);
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
		ck_assert_msg(strstr(r.body.data, "\"keys\":[]"), "after cut uploads: %s",
			      r.body.data);
		h_resp_free(&r);
		free(u);
	}
	h_master_stop(&lm);
	alive("cut uploads");
}
END_TEST

START_TEST(test_slowloris)
{
	enum { NSLOW = 200, ROUNDS = 30 };
	static const char req[] = "GET /ok HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa\r\n";
	int fds[NSLOW], slow = 0;
	uint64_t worst = 0;
	for (int i = 0; i < NSLOW; i++) {
		fds[i] = h_connect(m.port);
		ck_assert_int_ge(fds[i], 0);
	}
	for (int r = 0; r < ROUNDS; r++) {
		uint64_t t0, ms;
		for (int i = 0; i < NSLOW; i++)
			if (fds[i] >= 0 && !h_send(fds[i], req + (size_t)r % (sizeof(req) - 1), 1)) {
				close(fds[i]);
				fds[i] = -1;
			}
		t0 = now_ms();
		alive("slowloris round");
		ms = now_ms() - t0;
		worst = ms > worst ? ms : worst;
		slow += ms >= 1000;
		usleep(50000);
	}
	for (int i = 0; i < NSLOW; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	fprintf(stderr, "master slowloris: %d dribbling connections, slowest normal GET %llu ms\n",
		NSLOW, (unsigned long long)worst);
	/* Not a speed test: a server stalled by the dribblers would answer
	 * every round late; one slow round is the machine, not the server. */
	ck_assert_msg(slow <= ROUNDS / 10, "%d of %d normal GETs took a second or more beside slow "
		      "clients", slow, ROUNDS);
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
	int *fds = xcalloc(NIDLE, sizeof(int)), opened = 0, shed = 0, base = h_fd_count(m.pid);
	bool served_while_held;
	uint64_t t0 = now_ms();
	for (int i = 0; i < NIDLE; i++)
		fds[i] = connect_nb(m.port);
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
	fprintf(stderr, "master idle: %d connections in %llu ms\n", opened,
		(unsigned long long)(now_ms() - t0));
	/* Which of them has the server closed (beyond its connection limit)? */
	for (int i = 0; i < NIDLE; i++) {
		struct pollfd p = {.fd = fds[i], .events = POLLIN};
		char c;
		if (fds[i] >= 0 && poll(&p, 1, 0) == 1 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0)
			shed++;
	}
	{
		static const char get[] = "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n";
		served_while_held = h_raw(m.port, get, sizeof(get) - 1, NULL, T_MS) == 302;
	}
	fprintf(stderr, "master idle: %d of %d connected, %d closed by the server, a GET while "
		"held %s; RSS %ld KiB\n", opened, NIDLE, shed,
		served_while_held ? "served" : "refused", h_rss_kib(m.pid));
	/* -maxconns is 10,000 by default: 5,000 idle clients fit. */
	ck_assert_msg(served_while_held, "with %d idle connections held (shed %d), a GET was "
		      "not served within %d ms", opened, shed, T_MS);
	for (int i = 0; i < NIDLE; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	/* the master has closed its side of them (its descriptors are back
	 * near what they were) */
	for (t0 = now_ms(); h_fd_count(m.pid) > base + 50 && now_ms() - t0 < 30000;)
		usleep(50000);
	ck_assert_msg(h_fd_count(m.pid) <= base + 50, "the master holds %d descriptors, %d before "
		      "the 5,000 connections (closed 30 s ago)", h_fd_count(m.pid), base);
	alive("5,000 idle connections");
}
END_TEST

/* A client that sends half a request and goes silent is dropped after
 * -idletimeout (2 s here). */
START_TEST(test_idle_dropped)
{
	int fd = h_connect(m.port);
	uint64_t t0 = now_ms();
	long st;
	ck_assert_int_ge(fd, 0);
	h_send(fd, "GET /ok HTTP/1.1\r\nHost:", 24);
	/* dropped at 2 s; 15 s tells it from the default 60 s on any machine */
	st = h_recv_resp(fd, NULL, 15000, false);
	fprintf(stderr, "master idle client: %ld after %llu ms\n", st,
		(unsigned long long)(now_ms() - t0));
	ck_assert_msg(st == 0 || (st >= 400 && st < 500), "a silent half request: %ld%s", st,
		      st == -1 ? " (kept past 15 s, -idletimeout 2s)" : "");
	close(fd);
	alive("a silent client");
}
END_TEST

/* A slowloris client sends a byte now and then, so it is never idle; like
 * nginx's client_header_timeout, the whole request head must arrive within
 * the timeout (-idletimeout, 2 s here), or the client is dropped. */
START_TEST(test_slow_headers_dropped)
{
	static const char req[] = "GET /ok HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	int fd = h_connect(m.port);
	uint64_t t0 = now_ms();
	bool dropped = false;
	ck_assert_int_ge(fd, 0);
	for (size_t i = 0; i < sizeof(req) - 1 && now_ms() - t0 < 15000; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char c[512];
		if (!h_send(fd, req + i, 1) ||
		    (poll(&p, 1, 250) == 1 && recv(fd, c, sizeof(c), 0) <= 0)) {
			dropped = true;
			break;
		}
	}
	fprintf(stderr, "master slow headers: %s after %llu ms\n", dropped ? "dropped" : "still open",
		(unsigned long long)(now_ms() - t0));
	close(fd);
	/* dropped at 2 s; kept 15 s, it would not be by -idletimeout */
	ck_assert_msg(dropped, "a client dribbling its headers was kept %llu ms (-idletimeout 2s)",
		      (unsigned long long)(now_ms() - t0));
	alive("slow headers");
}
END_TEST

START_TEST(test_rss_bounded)
{
	long kib = h_rss_kib(m.pid);
	fprintf(stderr, "master RSS after the barrage: %ld KiB\n", kib);
	ck_assert_msg(kib > 0 && kib < 200 * 1024, "master RSS %ld KiB after the barrage", kib);
	untouched("the whole barrage");
	alive("the whole barrage");
}
END_TEST

/* Last: the master stops cleanly on SIGTERM after the barrage, and its log
 * holds no sanitizer report (under SANITIZE=1: no memory error, no leak). */
START_TEST(test_clean_exit)
{
	char *log;
	ck_assert_int_eq(kill(m.pid, SIGTERM), 0);
	ck_assert_msg(h_wait_gone(m.pid, 15000), "the master did not exit on SIGTERM");
	log = h_read_file(m.log);
	ck_assert_msg(!strstr(log, "Sanitizer") && !strstr(log, "runtime error"),
		      "the master's log after the barrage holds a sanitizer report:\n%s", log);
	free(log);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("master hostile input");
	TCase *tc = tcase_create("hostile");
	SRunner *sr;
	int failed;
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_traversal);
	tcase_add_test(tc, test_nul_and_encoding);
	tcase_add_test(tc, test_target_and_framing);
	tcase_add_test(tc, test_huge_request_line);
	tcase_add_test(tc, test_many_headers);
	tcase_add_test(tc, test_hostile_queries);
	tcase_add_test(tc, test_many_query_args);
	tcase_add_test(tc, test_lying_content_length);
	tcase_add_test(tc, test_garbage);
	tcase_add_test(tc, test_nginx_400s);
	tcase_add_test(tc, test_junk_then_good);
	tcase_add_test(tc, test_unknown_methods);
	tcase_add_test(tc, test_range_on_master);
	tcase_add_test(tc, test_cut_uploads_freed);
	tcase_add_test(tc, test_slowloris);
	tcase_add_test(tc, test_idle_dropped);
	tcase_add_test(tc, test_slow_headers_dropped);
	tcase_add_test(tc, test_idle_connections);
	tcase_add_test(tc, test_rss_bounded);
	tcase_add_test(tc, test_clean_exit);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
