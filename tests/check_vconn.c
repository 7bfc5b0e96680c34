/* check_vconn.c -- the lean volume client (common/vconn.c) against fake
 * volumes: a socket server thread per test that answers as told (closes a
 * kept-alive connection, closes before answering, stops half way through a
 * head, sends garbage, a 100 Continue, a chunked answer with trailers...).
 * Each request gets its answer or a clear error, never a crash (the suite
 * runs under ASan too).  The client runs on a loop thread of its own, as
 * on the master's. */
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/httpc.h"
#include "../common/loop.h"
#include "../common/util.h"
#include "../common/vconn.h"

/* ---- a fake volume ---- */

enum mode {
	M_OK,             /* 201, Content-Length: 0, kept alive */
	M_CLOSE_BETWEEN,  /* answers, then closes the kept-alive connection */
	M_DROP_SECOND,    /* reads the second request and closes without answering */
	M_DROP_FIRST,     /* reads the first request and closes without answering */
	M_HALF,           /* half a head, then nothing (until the client goes) */
	M_GARBAGE,        /* not HTTP */
	M_CONTINUE,       /* 100 Continue, then 201 */
	M_CHUNKED,        /* 200, chunked with trailers */
	M_BADCHUNK,       /* a chunk size that is not hex */
	M_TWOLENGTHS,     /* Content-Length headers that disagree */
	M_SILENT,         /* reads, never answers */
	M_HALF_BODY,      /* 200 with 3 of 100 bytes, then closes */
	M_BOTHFRAMINGS,   /* Content-Length and chunked: where it ends is in doubt */
	M_HALF_SECOND,    /* answers the first request, half of the second's, closes */
};

struct fake {
	int fd, port;
	enum mode mode;
	atomic_int reqs, conns;
	atomic_bool stop;
	char body[256];          /* the last request's body */
	pthread_t t;
};

static const char *answer_of(enum mode m)
{
	switch (m) {
	case M_HALF:
		return "HTTP/1.1 201 Created\r\nContent-Le";
	case M_HALF_BODY:
		return "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc";
	case M_GARBAGE:
		return "SSH-2.0-OpenSSH_9.2\r\n\r\n";
	case M_CONTINUE:
		return "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
	case M_CHUNKED:
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n"
		       "0\r\nX-Checksum: abc\r\nX-More: 1\r\n\r\n";
	case M_BADCHUNK:
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n";
	case M_TWOLENGTHS:
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhey";
	case M_BOTHFRAMINGS:
		return "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
		       "3\r\nhey\r\n0\r\n\r\n";
	default:
		return "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
	}
}

/* One request off c into buf: false when the client closed. */
static bool read_request(struct fake *f, int c, char *buf, size_t cap, size_t *have)
{
	for (;;) {
		char *end = memmem(buf, *have, "\r\n\r\n", 4);
		if (end) {
			size_t head = (size_t)(end + 4 - buf), len = 0;
			char *cl = memmem(buf, head, "Content-Length: ", 16);
			if (cl)
				len = strtoul(cl + 16, NULL, 10);
			if (*have >= head + len) {
				snprintf(f->body, sizeof(f->body), "%.*s", (int)len, buf + head);
				memmove(buf, buf + head + len, *have - head - len);
				*have -= head + len;
				return true;
			}
		}
		struct pollfd p = {.fd = c, .events = POLLIN};
		ssize_t n;
		if (atomic_load(&f->stop))
			return false;
		if (poll(&p, 1, 50) <= 0)
			continue;
		if (*have == cap || (n = read(c, buf + *have, cap - *have)) <= 0)
			return false;
		*have += (size_t)n;
	}
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	while (!atomic_load(&f->stop)) {
		struct pollfd p = {.fd = f->fd, .events = POLLIN};
		char buf[8192];
		size_t have = 0;
		int c;
		if (poll(&p, 1, 50) <= 0 || (c = accept(f->fd, NULL, NULL)) < 0)
			continue;
		atomic_fetch_add(&f->conns, 1);
		while (read_request(f, c, buf, sizeof(buf), &have)) {
			int n = atomic_fetch_add(&f->reqs, 1) + 1;
			bool cut = f->mode == M_HALF_SECOND && n == 2;
			const char *a = answer_of(cut ? M_HALF_BODY : f->mode);
			if ((f->mode == M_DROP_SECOND && n == 2) || (f->mode == M_DROP_FIRST && n == 1))
				break;
			if (f->mode == M_SILENT)
				continue;
			if (write(c, a, strlen(a)) < 0)
				break;
			if (f->mode == M_CLOSE_BETWEEN || f->mode == M_HALF_BODY || cut)
				break;
		}
		close(c);
	}
	return NULL;
}

static void fake_start(struct fake *f, enum mode m)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int one = 1;
	memset(f, 0, sizeof(*f));
	f->mode = m;
	f->fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(f->fd, 0);
	setsockopt(f->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(f->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(f->fd, 64), 0);
	ck_assert_int_eq(getsockname(f->fd, (struct sockaddr *)&a, &al), 0);
	f->port = ntohs(a.sin_port);
	ck_assert_int_eq(pthread_create(&f->t, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->t, NULL);
	close(f->fd);
}

/* ---- the client on a loop thread ---- */

static struct loop *L;
static pthread_t lt;

static void *loop_main(void *arg)
{
	(void)arg;
	loop_run(L);
	vconn_thread_cleanup();
	return NULL;
}

static void setup(void)
{
	L = loop_new();
	ck_assert_int_eq(pthread_create(&lt, NULL, loop_main, NULL), 0);
}

static void teardown(void)
{
	loop_stop(L);
	pthread_join(lt, NULL);
	loop_free(L);
}

struct call {
	const char *method;
	struct httpc_req req[2];
	int n;
	const char *body;
	long timeout_ms;
	bool (*down)(void *, int);
	int gone;
	bool done;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static void call_done(void *arg, int gone)
{
	struct call *c = arg;
	pthread_mutex_lock(&c->mu);
	c->gone = gone;
	c->done = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void call_start(void *arg)
{
	struct call *c = arg;
	ck_assert_int_eq(vconn_fanout(c->method, c->req, c->n, c->body,
				      c->body ? strlen(c->body) : 0, c->timeout_ms, c->down, c,
				      call_done, c),
			 0);
}

/* method on url (and url2 when not NULL) at once; the first's status. */
static int run2(struct call *c, const char *method, const char *url, const char *url2,
		const char *body, long timeout_ms)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->method = method;
	c->req[0].url = url;
	c->req[1].url = url2;
	c->n = url2 ? 2 : 1;
	c->body = body;
	c->timeout_ms = timeout_ms;
	loop_post(L, call_start, c);
	pthread_mutex_lock(&c->mu);
	while (!c->done)
		pthread_cond_wait(&c->cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
	return c->req[0].status;
}

static int run1(struct call *c, const char *method, const char *url, const char *body)
{
	return run2(c, method, url, NULL, body, 5000);
}

static char *url_of(struct fake *f, const char *path)
{
	return xasprintf("http://127.0.0.1:%d%s", f->port, path);
}

/* ---- the cases ---- */

START_TEST(keepalive_reused)
{
	struct fake f;
	struct call c;
	char *u;
	fake_start(&f, M_OK);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(run1(&c, i % 2 ? "DELETE" : "PUT", u, i % 2 ? NULL : "hello"), 201);
	ck_assert_int_eq(atomic_load(&f.reqs), 5);
	ck_assert_int_eq(atomic_load(&f.conns), 1);   /* one connection, kept alive */
	ck_assert_str_eq(f.body, "hello");
	fake_stop(&f);
	free(u);
}
END_TEST

/* A volume that closes a kept-alive connection between requests: the next
 * request gets its answer all the same (the closed one is noticed when
 * idle, or on its read, and a DELETE goes again on a fresh connection). */
START_TEST(closed_between_requests)
{
	struct fake f;
	struct call c;
	char *u;
	fake_start(&f, M_CLOSE_BETWEEN);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	for (int i = 0; i < 4; i++)
		ck_assert_msg(run1(&c, "DELETE", u, NULL) == 201, "DELETE %d: %d %s", i,
			      c.req[0].status, c.req[0].err);
	ck_assert_int_eq(atomic_load(&f.conns), 4);
	fake_stop(&f);
	free(u);
}
END_TEST

/* Closed after the request, before the answer, on a reused connection:
 * a DELETE and a PUT are sent once more on a fresh connection (a volume
 * that reloads closes its idle connections); on a fresh connection a PUT
 * is not (it fails, with a reason). */
START_TEST(closed_before_answer)
{
	struct fake f;
	struct call c;
	char *u;
	fake_start(&f, M_DROP_SECOND);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	ck_assert_int_eq(run1(&c, "DELETE", u, NULL), 201);
	ck_assert_msg(run1(&c, "DELETE", u, NULL) == 201, "%d %s", c.req[0].status, c.req[0].err);
	ck_assert_int_eq(atomic_load(&f.reqs), 3);   /* the second sent twice */
	ck_assert_int_eq(atomic_load(&f.conns), 2);
	fake_stop(&f);

	fake_start(&f, M_DROP_SECOND);
	free(u);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	ck_assert_int_eq(run1(&c, "PUT", u, "one"), 201);
	ck_assert_msg(run1(&c, "PUT", u, "two") == 201, "%d %s", c.req[0].status, c.req[0].err);
	ck_assert_int_eq(atomic_load(&f.reqs), 3);   /* the second sent twice */
	ck_assert_int_eq(atomic_load(&f.conns), 2);
	fake_stop(&f);

	fake_start(&f, M_DROP_FIRST);
	free(u);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	ck_assert_int_eq(run1(&c, "PUT", u, "one"), -1);
	ck_assert_msg(strstr(c.req[0].err, "closed the connection before answering"), "%s",
		      c.req[0].err);
	ck_assert_int_eq(atomic_load(&f.reqs), 1);   /* a fresh connection: not sent again */
	fake_stop(&f);
	free(u);
}
END_TEST

/* A kept-alive connection that closes part way through an answer: the
 * volume took the request, and it is not sent again (only an answer of
 * which no byte came goes once more). */
START_TEST(closed_mid_answer)
{
	struct fake f;
	struct call c;
	char *u;
	fake_start(&f, M_HALF_SECOND);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	ck_assert_int_eq(run1(&c, "DELETE", u, NULL), 201);
	ck_assert_int_eq(run1(&c, "DELETE", u, NULL), -1);
	ck_assert_int_eq(atomic_load(&f.reqs), 2);   /* not sent again */
	fake_stop(&f);
	free(u);
}
END_TEST

/* Half a head, then nothing: failed at the request's deadline. */
START_TEST(half_head)
{
	struct fake f;
	struct call c;
	char *u;
	fake_start(&f, M_HALF);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	ck_assert_int_eq(run2(&c, "PUT", u, NULL, "x", 300), -1);
	ck_assert(c.req[0].timed_out);
	ck_assert_msg(strstr(c.req[0].err, "no answer within"), "%s", c.req[0].err);
	fake_stop(&f);
	free(u);
}
END_TEST

static bool always_down(void *arg, int i)
{
	(void)arg;
	return i == 1;
}

/* A volume the health check marks down fails its request at once (not at
 * the deadline), and stops the others. */
START_TEST(marked_down)
{
	struct fake f, g;
	struct call c;
	char *u, *v;
	fake_start(&f, M_SILENT);
	fake_start(&g, M_SILENT);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	v = url_of(&g, "/sv00/ab/cd/a2V5");
	memset(&c, 0, sizeof(c));
	pthread_mutex_init(&c.mu, NULL);
	pthread_cond_init(&c.cv, NULL);
	c.method = "PUT";
	c.req[0].url = u;
	c.req[1].url = v;
	c.n = 2;
	c.body = "x";
	c.timeout_ms = 600000;
	c.down = always_down;
	loop_post(L, call_start, &c);
	pthread_mutex_lock(&c.mu);
	while (!c.done)
		pthread_cond_wait(&c.cv, &c.mu);
	pthread_mutex_unlock(&c.mu);
	ck_assert_int_eq(c.gone, 1);
	ck_assert_int_eq(c.req[1].status, -1);
	ck_assert_msg(strstr(c.req[1].err, "marked down"), "%s", c.req[1].err);
	ck_assert_int_eq(c.req[0].status, -1);
	ck_assert_msg(strstr(c.req[0].err, "another replica failed"), "%s", c.req[0].err);
	fake_stop(&f);
	fake_stop(&g);
	free(u);
	free(v);
}
END_TEST

/* Answers that are not HTTP, or not as HTTP allows: a clear error each. */
static const struct {
	enum mode mode;
	int status;          /* expected */
	const char *err;     /* in the error, when status is -1 */
} answers[] = {
	{M_GARBAGE, -1, "not an HTTP answer"},
	{M_CONTINUE, 201, NULL},
	{M_CHUNKED, 200, NULL},
	{M_BADCHUNK, -1, "malformed chunk size"},
	{M_TWOLENGTHS, -1, "Content-Length headers that disagree"},
	{M_BOTHFRAMINGS, -1, "both Content-Length and chunked"},
};

START_TEST(odd_answers)
{
	struct fake f;
	struct call c;
	char *u;
	fake_start(&f, answers[_i].mode);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	for (int k = 0; k < 2; k++) {   /* the second: on the same connection, or a new one */
		int st = run1(&c, "DELETE", u, NULL);
		ck_assert_msg(st == answers[_i].status, "mode %d: %d %s", answers[_i].mode, st,
			      c.req[0].err);
		if (answers[_i].err)
			ck_assert_msg(strstr(c.req[0].err, answers[_i].err), "%s", c.req[0].err);
	}
	ck_assert_int_eq(atomic_load(&f.conns), answers[_i].status < 0 ? 2 : 1);
	fake_stop(&f);
	free(u);
}
END_TEST

START_TEST(refused)
{
	struct fake f;
	struct call c;
	char *u;
	fake_start(&f, M_OK);
	fake_stop(&f);   /* nothing listens there now */
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	ck_assert_int_eq(run1(&c, "PUT", u, "x"), -1);
	ck_assert_msg(strstr(c.req[0].err, "refused") || strstr(c.req[0].err, "connect"), "%s",
		      c.req[0].err);
	ck_assert_int_eq(run1(&c, "DELETE", "http://127.0.0.1:1/x", NULL), -1);
	ck_assert_int_eq(run1(&c, "DELETE", "ftp://nowhere/x", NULL), -1);
	free(u);
}
END_TEST

/* ---- pipelined GETs and blocking calls, on a thread of no loop ---- */

struct gets {
	int answered, ok;
	char err[256];
};

static void get_done(void *arg, int status, const char *body, size_t len, const char *err)
{
	struct gets *g = arg;
	(void)body;
	(void)len;
	g->answered++;
	g->ok += status == 201;
	if (status < 0)
		snprintf(g->err, sizeof(g->err), "%s", err);
}

/* n GETs of url at once, vconn_run until all are answered. */
static void get_n(struct gets *g, const char *url, int n)
{
	memset(g, 0, sizeof(*g));
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(vconn_get(url, 0, get_done, g), 0);
	vconn_run();
	ck_assert_int_eq(g->answered, n);
}

/* Four GETs go out on one connection, pipelined, and are answered in
 * turn; a volume that answers one per connection and closes (the others
 * unread) gets the rest again, each on a new connection, all answered. */
START_TEST(pipelined)
{
	struct fake f;
	struct gets g;
	char *u;
	fake_start(&f, M_OK);
	u = url_of(&f, "/ab/");
	get_n(&g, u, 4);
	ck_assert_int_eq(g.ok, 4);
	ck_assert_int_eq(atomic_load(&f.conns), 1);
	ck_assert_int_eq(atomic_load(&f.reqs), 4);
	fake_stop(&f);
	free(u);

	fake_start(&f, M_CLOSE_BETWEEN);
	u = url_of(&f, "/ab/");
	get_n(&g, u, 3);
	ck_assert_msg(g.ok == 3, "%d of 3: %s", g.ok, g.err);
	ck_assert_int_eq(atomic_load(&f.conns), 3);
	fake_stop(&f);
	free(u);
}
END_TEST

/* A GET whose answer is always cut short fails after 4 sends, with the
 * reason; so does one no volume listens for. */
START_TEST(pipelined_fails)
{
	struct fake f;
	struct gets g;
	char *u;
	fake_start(&f, M_HALF_BODY);
	u = url_of(&f, "/ab/");
	get_n(&g, u, 1);
	ck_assert_int_eq(g.ok, 0);
	ck_assert_msg(strstr(g.err, "mid-answer"), "%s", g.err);
	ck_assert_int_eq(atomic_load(&f.reqs), 4);
	fake_stop(&f);
	free(u);
	get_n(&g, "http://127.0.0.1:1/ab/", 1);
	ck_assert_msg(strstr(g.err, "refused"), "%s", g.err);
}
END_TEST

/* vconn_wait: a blocking PUT; a GET's body kept, or refused past its cap. */
START_TEST(wait_blocking)
{
	struct fake f;
	struct httpc_req r = {0};
	struct buf b = {0};
	char *u;
	fake_start(&f, M_OK);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	r.url = u;
	ck_assert_int_eq(vconn_wait("PUT", &r, 1, "hello", 5, 5000, NULL, 0), 0);
	ck_assert_int_eq(r.status, 201);
	ck_assert_str_eq(f.body, "hello");
	fake_stop(&f);
	free(u);

	fake_start(&f, M_CHUNKED);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	r.url = u;
	ck_assert_int_eq(vconn_wait("GET", &r, 1, NULL, 0, 5000, &b, 64), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(b.len, 5);
	ck_assert(!memcmp(b.data, "hello", 5));
	b.len = 0;
	ck_assert_int_eq(vconn_wait("GET", &r, 1, NULL, 0, 5000, &b, 3), VCONN_OVER);
	ck_assert_int_eq(r.status, -1);
	buf_free(&b);
	fake_stop(&f);
	free(u);
}
END_TEST

/* ---- the parser on its own ---- */

START_TEST(parser_pieces)
{
	const char *a = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
			"3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: 1\r\n\r\n";
	/* fed a byte at a time, as any split may come */
	struct buf b = {0};
	struct vresp r;
	size_t off = 0, have = 0, n = strlen(a);
	vresp_init(&r, false, &b, 0);
	while (r.state != VR_DONE && r.state != VR_ERR && have < n) {
		have++;
		off += vresp_feed(&r, a + off, have - off);
	}
	ck_assert_int_eq(r.state, VR_DONE);
	ck_assert_int_eq(off, n);
	ck_assert(r.close);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(b.len, 19);
	ck_assert(!memcmp(b.data, "abc0123456789abcdef", 19));
	buf_free(&b);

	vresp_init(&r, false, NULL, 0);   /* a body that ends with the connection */
	ck_assert_int_eq(vresp_feed(&r, "HTTP/1.0 200 OK\r\n\r\nabc", 22), 22);
	ck_assert_int_eq(r.state, VR_EOF);
	vresp_eof(&r);
	ck_assert_int_eq(r.state, VR_DONE);

	vresp_init(&r, false, NULL, 0);   /* cut mid-body */
	vresp_feed(&r, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", 41);
	vresp_eof(&r);
	ck_assert_int_eq(r.state, VR_ERR);

	vresp_init(&r, true, NULL, 0);   /* a HEAD's answer has no body */
	vresp_feed(&r, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", 38);
	ck_assert_int_eq(r.state, VR_DONE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("vconn");
	TCase *tc = tcase_create("vconn");
	SRunner *sr;
	int failed;
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, keepalive_reused);
	tcase_add_test(tc, closed_between_requests);
	tcase_add_test(tc, closed_before_answer);
	tcase_add_test(tc, closed_mid_answer);
	tcase_add_test(tc, half_head);
	tcase_add_test(tc, marked_down);
	tcase_add_loop_test(tc, odd_answers, 0, (int)(sizeof(answers) / sizeof(answers[0])));
	tcase_add_test(tc, refused);
	tcase_add_test(tc, pipelined);
	tcase_add_test(tc, pipelined_fails);
	tcase_add_test(tc, wait_blocking);
	tcase_add_test(tc, parser_pieces);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
