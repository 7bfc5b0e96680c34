/* check_vconn.c -- the lean volume client (common/vconn.c) against fake
 * volumes: a socket server thread per test that answers as told (closes a
 * kept-alive connection, closes before answering, stops half way through a
 * head, sends garbage, a 100 Continue, a chunked answer with trailers...).
 * Each request gets its answer or a clear error, never a crash (the suite
 * runs under ASan too).  The client runs on a loop thread of its own, as
 * on the master's. */
#include <check.h>
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
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
#include "../common/volsign.h"

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

static void call_post(struct call *c, const char *method, const char *url, const char *url2,
		      const char *body, long timeout_ms);

static int call_wait(struct call *c)
{
	pthread_mutex_lock(&c->mu);
	while (!c->done)
		pthread_cond_wait(&c->cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
	return c->req[0].status;
}

/* method on url (and url2 when not NULL) at once; the first's status. */
static int run2(struct call *c, const char *method, const char *url, const char *url2,
		const char *body, long timeout_ms)
{
	call_post(c, method, url, url2, body, timeout_ms);
	return call_wait(c);
}

static void call_post(struct call *c, const char *method, const char *url, const char *url2,
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
	ck_assert_int_eq(vconn_wait("PUT", &r, 1, "hello", 5, 5000, NULL, NULL, NULL, 0), -1);
	ck_assert_int_eq(r.status, 201);
	ck_assert_str_eq(f.body, "hello");
	fake_stop(&f);
	free(u);

	fake_start(&f, M_CHUNKED);
	u = url_of(&f, "/sv00/ab/cd/a2V5");
	r.url = u;
	ck_assert_int_eq(vconn_wait("GET", &r, 1, NULL, 0, 5000, NULL, NULL, &b, 64), -1);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(b.len, 5);
	ck_assert(!memcmp(b.data, "hello", 5));
	b.len = 0;
	ck_assert_int_eq(vconn_wait("GET", &r, 1, NULL, 0, 5000, NULL, NULL, &b, 3), VCONN_OVER);
	ck_assert_int_eq(r.status, -1);
	buf_free(&b);
	fake_stop(&f);
	free(u);
}
END_TEST

/* ---- a fake volume of many connections at once (poll) ---- */

/* What the fake does with the nth request (from 1) of its conn-th
 * connection (from 1): the answer to write (NULL: none), and then, by
 * *after, keep the connection (0), close it (1), or shut its writing side
 * (2: the client sees the close; the fake still reads, and counts a
 * request sent after it as late). */
typedef const char *(*script_fn)(int conn, int nth, const char *path, int *after);

#define MF_CONNS 1100
struct mfake {
	int fd, port;
	script_fn script;
	atomic_int conns, open, maxopen, reqs, late;
	atomic_bool stop;
	pthread_t t;
};

struct mconn {
	int fd, id, nth;
	bool shut;
	size_t have;
	char buf[16384];
};

static void mconn_close(struct mfake *m, struct mconn **cs, int i)
{
	close(cs[i]->fd);
	free(cs[i]);
	cs[i] = NULL;
	atomic_fetch_sub(&m->open, 1);
}

/* Serve what c has read: false when it is closed. */
static bool mconn_serve(struct mfake *m, struct mconn *c)
{
	int after = 0;
	for (;;) {
		char *end = memmem(c->buf, c->have, "\r\n\r\n", 4), path[256] = "";
		size_t head, len = 0;
		const char *a, *cl;
		if (!end)
			return true;
		head = (size_t)(end + 4 - c->buf);
		if ((cl = memmem(c->buf, head, "Content-Length: ", 16)))
			len = strtoul(cl + 16, NULL, 10);
		if (c->have < head + len)
			return true;
		sscanf(c->buf, "%*s %255s", path);
		memmove(c->buf, c->buf + head + len, c->have - head - len);
		c->have -= head + len;
		atomic_fetch_add(&m->reqs, 1);
		if (c->shut) {
			atomic_fetch_add(&m->late, 1);
			continue;
		}
		a = m->script(c->id, ++c->nth, path, &after);
		if (a && send(c->fd, a, strlen(a), MSG_NOSIGNAL) < 0)
			return false;
		if (after == 1)
			return false;
		if (after == 2) {
			shutdown(c->fd, SHUT_WR);
			c->shut = true;
		}
	}
}

static void *mfake_main(void *arg)
{
	struct mfake *m = arg;
	static __thread struct mconn *cs[MF_CONNS];
	struct pollfd p[MF_CONNS + 1];
	while (!atomic_load(&m->stop)) {
		int n = 0, map[MF_CONNS + 1];
		p[n++] = (struct pollfd){.fd = m->fd, .events = POLLIN};
		for (int i = 0; i < MF_CONNS; i++)
			if (cs[i]) {
				map[n] = i;
				p[n++] = (struct pollfd){.fd = cs[i]->fd, .events = POLLIN};
			}
		if (poll(p, (nfds_t)n, 50) <= 0)
			continue;
		for (int k = 1; k < n; k++) {
			struct mconn *c = cs[map[k]];
			ssize_t r;
			if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = read(c->fd, c->buf + c->have, sizeof(c->buf) - c->have);
			if (r <= 0) {
				mconn_close(m, cs, map[k]);
				continue;
			}
			c->have += (size_t)r;
			if (!mconn_serve(m, c))
				mconn_close(m, cs, map[k]);
		}
		/* after the closes it saw (poll saw the listener first) */
		if (p[0].revents & POLLIN) {
			int fd = accept(m->fd, NULL, NULL), i;
			for (i = 0; fd >= 0 && i < MF_CONNS && cs[i]; i++)
				;
			if (fd >= 0 && i < MF_CONNS) {
				int o = atomic_fetch_add(&m->open, 1) + 1;
				cs[i] = xcalloc(1, sizeof(*cs[i]));
				cs[i]->fd = fd;
				cs[i]->id = atomic_fetch_add(&m->conns, 1) + 1;
				if (o > atomic_load(&m->maxopen))
					atomic_store(&m->maxopen, o);
			} else if (fd >= 0) {
				close(fd);
			}
		}
	}
	for (int i = 0; i < MF_CONNS; i++)
		if (cs[i])
			mconn_close(m, cs, i);
	return NULL;
}

/* On 127.0.0.1:port (0: any free one). */
static void mfake_start_on(struct mfake *m, script_fn script, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons((uint16_t)port)};
	socklen_t al = sizeof(a);
	int one = 1;
	memset(m, 0, sizeof(*m));
	m->script = script;
	m->fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(m->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(m->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(m->fd, 1024), 0);
	ck_assert_int_eq(getsockname(m->fd, (struct sockaddr *)&a, &al), 0);
	m->port = ntohs(a.sin_port);
	ck_assert_int_eq(pthread_create(&m->t, NULL, mfake_main, m), 0);
}

static void mfake_start(struct mfake *m, script_fn script)
{
	mfake_start_on(m, script, 0);
}

static void mfake_stop(struct mfake *m)
{
	atomic_store(&m->stop, true);
	pthread_join(m->t, NULL);
	close(m->fd);
}

/* Wait (generously) until ok(m) holds. */
static bool mfake_until(struct mfake *m, bool (*ok)(struct mfake *))
{
	for (int i = 0; i < 3000 && !ok(m); i++)
		usleep(10000);
	return ok(m);
}

#define CREATED "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"

static const char *s_ok(int conn, int nth, const char *path, int *after)
{
	(void)conn, (void)nth, (void)path, (void)after;
	return CREATED;
}

struct many {
	struct httpc_req *reqs;
	int n;
	const char *method;
	atomic_bool done;
};

static void many_done(void *arg, int gone)
{
	(void)gone;
	atomic_store(&((struct many *)arg)->done, true);
}

static void many_start(void *arg)
{
	struct many *w = arg;
	ck_assert_int_eq(vconn_fanout(w->method, w->reqs, w->n, NULL, 0, 60000, NULL, NULL,
				      many_done, w), 0);
}

static bool few_open(struct mfake *m)
{
	return atomic_load(&m->open) <= 16;
}

/* 300 DELETEs at once on one loop: no more than 32 connections to the
 * volume (the rest wait for one, none fails), and no more than 16 of them
 * stay open afterwards. */
START_TEST(pool_bounded)
{
	struct mfake m;
	struct many w = {.n = 300, .method = "DELETE"};
	char *u;
	mfake_start(&m, s_ok);
	u = url_of((struct fake *)&(struct fake){.port = m.port}, "/sv00/ab/cd/a2V5");
	w.reqs = xcalloc((size_t)w.n, sizeof(*w.reqs));
	for (int i = 0; i < w.n; i++)
		w.reqs[i].url = u;
	loop_post(L, many_start, &w);
	while (!atomic_load(&w.done))
		usleep(10000);
	for (int i = 0; i < w.n; i++)
		ck_assert_msg(w.reqs[i].status == 201, "%d: %d %s", i, w.reqs[i].status,
			      w.reqs[i].err);
	ck_assert_msg(atomic_load(&m.maxopen) <= 32, "%d open at once", atomic_load(&m.maxopen));
	ck_assert_msg(mfake_until(&m, few_open), "%d left open", atomic_load(&m.open));
	mfake_stop(&m);
	free(w.reqs);
	free(u);
}
END_TEST

/* The volume closes a kept-alive connection (its FIN waits unread: a
 * thread of no loop does not run one between calls): the next request
 * goes on a new connection, never into the closing one. */
static const char *s_shut_after(int conn, int nth, const char *path, int *after)
{
	(void)conn, (void)nth, (void)path;
	*after = 2;
	return CREATED;
}

static bool one_open(struct mfake *m)
{
	return atomic_load(&m->conns) >= 1 && atomic_load(&m->reqs) >= 1;
}

START_TEST(closed_idle_not_reused)
{
	struct mfake m;
	struct httpc_req r = {0};
	char *u;
	mfake_start(&m, s_shut_after);
	u = url_of((struct fake *)&(struct fake){.port = m.port}, "/sv00/ab/cd/a2V5");
	r.url = u;
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(vconn_wait("PUT", &r, 1, "hello", 5, 10000, NULL, NULL, NULL, 0), -1);
		ck_assert_msg(r.status == 201, "%d %s", r.status, r.err);
		ck_assert(mfake_until(&m, one_open));
		usleep(50000);   /* the FIN is there before the next send (not timed) */
	}
	ck_assert_int_eq(atomic_load(&m.late), 0);
	ck_assert_int_eq(atomic_load(&m.conns), 3);
	vconn_thread_cleanup();
	mfake_stop(&m);
	free(u);
}
END_TEST

/* A volume that takes pipelined GETs and closes without answering any:
 * each GET is sent at most 4 times in all, those that waited behind the
 * first included (the documented bound: 4 sends, each within 2 minutes). */
static const char *s_drop(int conn, int nth, const char *path, int *after)
{
	(void)conn, (void)nth, (void)path;
	*after = 1;
	return NULL;
}

START_TEST(pipelined_resends_counted)
{
	struct mfake m;
	struct gets g;
	char *u;
	mfake_start(&m, s_drop);
	u = url_of((struct fake *)&(struct fake){.port = m.port}, "/ab/");
	get_n(&g, u, 64);
	ck_assert_int_eq(g.ok, 0);
	/* 64 fit 4 connections (16 each): 4 rounds of those, not 4 sends of
	 * the first GET of each connection (256 connections) */
	ck_assert_msg(atomic_load(&m.reqs) <= 4 * 64 && atomic_load(&m.conns) <= 32,
		      "%d sends of 64 GETs on %d connections", atomic_load(&m.reqs),
		      atomic_load(&m.conns));
	vconn_thread_cleanup();
	mfake_stop(&m);
	free(u);
}
END_TEST

/* A listener whose accept queue is full: connects to it never complete
 * (the SYN is dropped, as by a host that drops packets).  Its port;
 * fds[0] the listener, the others the connections that filled it. */
static int hung_listener(int fds[9], int *nfds)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fds[0], (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fds[0], 0), 0);
	ck_assert_int_eq(getsockname(fds[0], (struct sockaddr *)&a, &al), 0);
	for (*nfds = 1; *nfds < 9;) {
		struct pollfd p;
		int fd = fds[(*nfds)++] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(fd, (struct sockaddr *)&a, sizeof(a));
		p = (struct pollfd){.fd = fd, .events = POLLOUT};
		if (poll(&p, 1, 300) <= 0)
			break;
	}
	return ntohs(a.sin_port);
}

/* A volume whose connect never completes fails a request at the connect
 * timeout, not never. */
START_TEST(connect_timeout)
{
	int fds[9], n, port = hung_listener(fds, &n);
	struct call c;
	char *u = xasprintf("http://127.0.0.1:%d/sv00/ab/cd/a2V5", port);
	ck_assert_int_eq(run2(&c, "DELETE", u, NULL, NULL, 0), -1);
	ck_assert_msg(strstr(c.req[0].err, "within"), "%s", c.req[0].err);
	while (n--)
		close(fds[n]);
	free(u);
}
END_TEST

/* The same for a rebuild's pipelined listings: each fails after 4 connects
 * that timed out (40 s), not after the kernel's own give up, 4 times over. */
START_TEST(connect_timeout_pipelined)
{
	int fds[9], n, port = hung_listener(fds, &n);
	struct gets g;
	char *u = xasprintf("http://127.0.0.1:%d/ab/", port);
	get_n(&g, u, 16);
	ck_assert_int_eq(g.ok, 0);
	ck_assert_msg(strstr(g.err, "within"), "%s", g.err);
	vconn_thread_cleanup();
	while (n--)
		close(fds[n]);
	free(u);
}
END_TEST

/* Answers the old parser waited on, or took too much of. */
static const char *s_upper_close(int conn, int nth, const char *path, int *after)
{
	(void)conn, (void)path, (void)after;
	return nth == 1 ? "HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: CLOSE\r\n\r\n"
			: NULL;   /* the second on a connection it said it closes: unanswered */
}

START_TEST(close_any_case)
{
	struct mfake m;
	struct call c;
	char *u;
	mfake_start(&m, s_upper_close);
	u = url_of((struct fake *)&(struct fake){.port = m.port}, "/sv00/ab/cd/a2V5");
	for (int i = 0; i < 2; i++)
		ck_assert_msg(run2(&c, "DELETE", u, NULL, NULL, 20000) == 201, "%d: %d %s", i,
			      c.req[0].status, c.req[0].err);
	ck_assert_int_eq(atomic_load(&m.conns), 2);
	mfake_stop(&m);
	free(u);
}
END_TEST

static const char *s_bare_lf(int conn, int nth, const char *path, int *after)
{
	(void)conn, (void)nth, (void)path, (void)after;
	return "HTTP/1.1 201 Created\nContent-Length: 0\n\n";
}

static const char *s_interim(int conn, int nth, const char *path, int *after)
{
	static char a[64 * 32 + 64];
	(void)conn, (void)nth, (void)path, (void)after;
	a[0] = '\0';
	for (int i = 0; i < 64; i++)
		strcat(a, "HTTP/1.1 102 Processing\r\n\r\n");
	return strcat(a, CREATED);
}

START_TEST(bad_heads_fail_at_once)
{
	struct mfake m;
	struct call c;
	char *u;
	mfake_start(&m, s_bare_lf);
	u = url_of((struct fake *)&(struct fake){.port = m.port}, "/sv00/ab/cd/a2V5");
	ck_assert_int_eq(run2(&c, "DELETE", u, NULL, NULL, 600000), -1);
	ck_assert_msg(strstr(c.req[0].err, "bare LF"), "%s", c.req[0].err);
	mfake_stop(&m);
	free(u);
	mfake_start(&m, s_interim);
	u = url_of((struct fake *)&(struct fake){.port = m.port}, "/sv00/ab/cd/a2V5");
	ck_assert_int_eq(run2(&c, "DELETE", u, NULL, NULL, 600000), -1);
	ck_assert_msg(strstr(c.req[0].err, "interim"), "%s", c.req[0].err);
	mfake_stop(&m);
	free(u);
}
END_TEST

/* A pipelined answer over the size allowed fails its GET at once: it is
 * not fetched again. */
START_TEST(pipelined_over_once)
{
	struct fake f;
	struct gets g;
	char *u;
	fake_start(&f, M_CHUNKED);
	u = url_of(&f, "/ab/");
	memset(&g, 0, sizeof(g));
	ck_assert_int_eq(vconn_get(u, 3, get_done, &g), 0);
	vconn_run();
	ck_assert_int_eq(g.answered, 1);
	ck_assert_int_eq(g.ok, 0);
	ck_assert_int_eq(atomic_load(&f.reqs), 1);
	vconn_thread_cleanup();
	fake_stop(&f);
	free(u);
}
END_TEST

/* A refused signature on a pipelined connection that served before goes
 * again on a fresh one, signed anew (a volume's old workers after a
 * -volumesecret rotation). */
static const char *s_refuse_second(int conn, int nth, const char *path, int *after)
{
	(void)path, (void)after;
	return conn == 1 && nth == 2 ? "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"
				     : CREATED;
}

START_TEST(pipelined_resigned)
{
	struct mfake m;
	struct gets g;
	char *u, *secret = xasprintf("/tmp/check_vconn_secret.%d", (int)getpid()), err[256];
	FILE *fp = fopen(secret, "w");
	ck_assert_ptr_nonnull(fp);
	fputs("0123456789abcdef0123456789abcdef\n", fp);
	fclose(fp);
	ck_assert_int_eq(volsign_load(secret, err, sizeof(err)), 0);
	unlink(secret);
	mfake_start(&m, s_refuse_second);
	u = url_of((struct fake *)&(struct fake){.port = m.port}, "/ab/");
	get_n(&g, u, 3);
	ck_assert_msg(g.ok == 3, "%d of 3: %s", g.ok, g.err);
	vconn_thread_cleanup();
	mfake_stop(&m);
	free(u);
	free(secret);
}
END_TEST

/* atk42: a refused signature on a pipelined connection while the volume's
 * pool is full (32 connections).  The GET goes again "fresh" (never on an
 * idle connection), so with the pool full it waits; once only such GETs
 * wait and a connection goes idle, host_kick takes each from the queue,
 * op_start queues it again (fresh: the idle one is not for it; 32 open),
 * and the loop never ends: the thread spins and no GET is answered. */
static const char *s_refuse_after_first(int conn, int nth, const char *path, int *after)
{
	(void)conn, (void)path, (void)after;
	return nth >= 2 ? "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n" : CREATED;
}

START_TEST(resigned_at_pool_cap)
{
	struct mfake m;
	struct gets g;
	char *u, *secret = xasprintf("/tmp/check_vconn_secret.%d", (int)getpid()), err[256];
	FILE *fp = fopen(secret, "w");
	ck_assert_ptr_nonnull(fp);
	fputs("0123456789abcdef0123456789abcdef\n", fp);
	fclose(fp);
	ck_assert_int_eq(volsign_load(secret, err, sizeof(err)), 0);
	unlink(secret);
	mfake_start(&m, s_refuse_after_first);
	u = url_of((struct fake *)&(struct fake){.port = m.port}, "/ab/");
	get_n(&g, u, 600);   /* 32 x 16 pipelined, the rest wait */
	ck_assert_int_eq(g.answered, 600);
	vconn_thread_cleanup();
	mfake_stop(&m);
	free(u);
	free(secret);
}
END_TEST

/* atk42: two volumes on one host whose ports are such that one's digits
 * begin the other's (127.0.0.1:P0 and 127.0.0.1:P, P0 = 10 P + d): the
 * name cache (name_of) compares the port by the new name's length only,
 * so once P0 is known a request for P connects to P0. */
static bool port_free(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	bool ok;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

START_TEST(port_prefix_names)
{
	struct mfake longer, shorter;
	struct call c;
	char *ul, *us;
	int p = 1024 + (int)(getpid() % 4000), tries = 0;
	while ((!port_free(p) || !port_free(p * 10 + 1)) && tries++ < 4000)
		p = p + 1 < 6553 ? p + 1 : 1024;
	mfake_start_on(&longer, s_ok, p * 10 + 1);
	mfake_start_on(&shorter, s_ok, p);
	ul = xasprintf("http://127.0.0.1:%d/sv00/ab/cd/a2V5", p * 10 + 1);
	us = xasprintf("http://127.0.0.1:%d/sv00/ab/cd/a2V5", p);
	ck_assert_int_eq(run2(&c, "DELETE", ul, NULL, NULL, 10000), 201);
	ck_assert_int_eq(run2(&c, "DELETE", us, NULL, NULL, 10000), 201);
	ck_assert_msg(atomic_load(&shorter.reqs) == 1 && atomic_load(&longer.reqs) == 1,
		      "port %d got %d requests, port %d got %d", p, atomic_load(&shorter.reqs),
		      p * 10 + 1, atomic_load(&longer.reqs));
	mfake_stop(&longer);
	mfake_stop(&shorter);
	free(ul);
	free(us);
}
END_TEST

/* A thread that ends with a request under way closes its connection. */
static bool closed_all(struct mfake *m)
{
	return atomic_load(&m->conns) >= 1 && atomic_load(&m->open) == 0;
}

static const char *s_silent(int conn, int nth, const char *path, int *after)
{
	(void)conn, (void)nth, (void)path, (void)after;
	return NULL;
}

static bool one_read(struct mfake *m)
{
	return atomic_load(&m->reqs) >= 1;
}

START_TEST(cleanup_closes_busy)
{
	struct mfake m;
	struct httpc_req r = {0};
	struct gets g = {0};
	char *u;
	mfake_start(&m, s_silent);
	u = url_of((struct fake *)&(struct fake){.port = m.port}, "/sv00/ab/cd/a2V5");
	r.url = u;
	ck_assert_int_eq(vconn_wait("DELETE", &r, 1, NULL, 0, 300, NULL, NULL, NULL, 0), -1);   /* times out */
	ck_assert(mfake_until(&m, one_read));
	ck_assert_int_eq(vconn_get(u, 0, get_done, &g), 0);   /* never run */
	vconn_thread_cleanup();   /* fails it */
	ck_assert_int_eq(g.answered, 1);
	ck_assert_msg(mfake_until(&m, closed_all), "%d still open", atomic_load(&m.open));
	mfake_stop(&m);
	free(u);
}
END_TEST

/* ---- the connection fuzzed: a seed's volume answers each request in a
 * way of its choosing ---- */

#define FZ_GETS 12
static unsigned fz_seed;
static atomic_int fz_sent[FZ_GETS];

static unsigned fz_rand(unsigned *x)
{
	*x = *x * 1103515245u + 12345u;
	return (*x >> 8) & 0xffffff;
}

/* A good answer to the nth request, kind k (0: Content-Length, 1: chunked,
 * 2: behind 1xx answers, 3: Connection: close in upper case). */
static const char *fz_good(unsigned k, unsigned r, char *out, size_t n)
{
	switch (k) {
	case 0:
		return "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
	case 1:
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhe\r\n3;x\r\nllo\r\n"
		       "0\r\nT: 1\r\n\r\n";
	case 2:
		out[0] = '\0';
		for (unsigned i = 0; i < 1 + r % 10; i++)   /* past 8: failed, not waited on */
			strcat(out, "HTTP/1.1 100 Continue\r\n\r\n");
		strcat(out, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
		return out;
	default:
		snprintf(out, n, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: CLOSE\r\n\r\nhello");
		return out;
	}
}

static const char *s_fuzz(int conn, int nth, const char *path, int *after)
{
	static char out[32768];
	unsigned x = fz_seed * 7919u + (unsigned)conn * 131u + (unsigned)nth, r;
	const char *good;
	int i = atoi(path + 3);
	if (!strncmp(path, "/f/", 3) && i >= 0 && i < FZ_GETS)
		atomic_fetch_add(&fz_sent[i], 1);
	r = fz_rand(&x);
	good = fz_good(r % 4, r, out, sizeof(out));
	if (r % 4 == 3)
		*after = 2;
	switch (fz_rand(&x) % 8) {
	case 0:   /* closed before the answer */
		*after = 1;
		return NULL;
	case 1: {   /* cut anywhere, then closed */
		size_t len = strlen(good), cut = fz_rand(&x) % len;
		memmove(out, good, cut);
		out[cut] = '\0';
		*after = 1;
		return out;
	}
	case 2:   /* an over-size head */
		snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nX: %0*d\r\n\r\n", 20000, 0);
		return out;
	case 3:   /* bare LFs */
		return "HTTP/1.1 200 OK\nContent-Length: 5\n\nhello";
	default:
		return good;
	}
}

static void fz_done(void *arg, int status, const char *body, size_t len, const char *err)
{
	struct gets *g = arg;
	g->answered++;
	ck_assert_msg(status == 200 || (status == -1 && err[0]), "%d %s", status, err);
	if (status == 200)
		ck_assert_msg(len == 5 && !memcmp(body, "hello", 5), "%.*s", (int)len, body);
}

/* Pipelined GETs, each answered well, cut anywhere, closed before or
 * inside its answer, behind 1xx answers, with an over-size or bare-LF
 * head: each ends once, answered or failed with a reason, sent at most 4
 * times (the suite runs under ASan too).  A failing seed is _i. */
START_TEST(fuzz_connection)
{
	struct mfake m;
	struct gets g = {0};
	char url[64];
	fz_seed = (unsigned)_i;
	for (int i = 0; i < FZ_GETS; i++)
		atomic_store(&fz_sent[i], 0);
	mfake_start(&m, s_fuzz);
	for (int i = 0; i < FZ_GETS; i++) {
		snprintf(url, sizeof(url), "http://127.0.0.1:%d/f/%d", m.port, i);
		ck_assert_int_eq(vconn_get(url, 64, fz_done, &g), 0);
	}
	vconn_run();
	ck_assert_int_eq(g.answered, FZ_GETS);
	for (int i = 0; i < FZ_GETS; i++)
		ck_assert_msg(atomic_load(&fz_sent[i]) <= 4, "seed %d: GET %d sent %d times", _i, i,
			      atomic_load(&fz_sent[i]));
	vconn_thread_cleanup();
	mfake_stop(&m);
}
END_TEST

/* ---- names, with a resolver of the test's own ---- */

/* A DNS server on UDP 127.x.y.z:53: each query held while dns_mode is
 * DNS_HOLD, then answered with dns_addr (an A query) or nothing (AAAA),
 * or SERVFAIL. */
enum { DNS_HOLD, DNS_ANSWER, DNS_SERVFAIL };
static atomic_int dns_mode, dns_queries;
static atomic_uint dns_addr;   /* network order */

static void *dns_main(void *arg)
{
	int fd = *(int *)arg;
	for (;;) {
		unsigned char q[512], a[600];
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
		size_t i = 12, len;
		uint32_t addr;
		if (n < 12)
			continue;
		atomic_fetch_add(&dns_queries, 1);
		while (atomic_load(&dns_mode) == DNS_HOLD)
			usleep(10000);
		while (i < (size_t)n && q[i])
			i += q[i] + 1u;
		if ((i += 5) > (size_t)n)
			continue;
		memcpy(a, q, i);
		a[2] = 0x81;   /* an answer, recursion desired */
		a[3] = atomic_load(&dns_mode) == DNS_SERVFAIL ? 0x82 : 0x80;
		memset(a + 6, 0, 6);
		len = i;
		if (a[3] == 0x80 && q[i - 4] == 0 && q[i - 3] == 1) {   /* an A record */
			static const unsigned char rr[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4};
			a[7] = 1;
			memcpy(a + len, rr, sizeof(rr));
			addr = atomic_load(&dns_addr);
			memcpy(a + len + sizeof(rr), &addr, 4);
			len += sizeof(rr) + 4;
		}
		sendto(fd, a, len, 0, (struct sockaddr *)&from, fl);
	}
	return NULL;
}

static bool dns_asked(void)
{
	for (int i = 0; i < 2000 && !atomic_load(&dns_queries); i++)
		usleep(10000);
	return atomic_load(&dns_queries) > 0;
}

/* The DELETE of url, tried until it answers 201 (a generous while). */
static bool answers_soon(const char *url)
{
	struct call c;
	for (int i = 0; i < 100; i++) {
		if (run2(&c, "DELETE", url, NULL, NULL, 20000) == 201)
			return true;
		usleep(100000);
	}
	return false;
}

#define CHILD_FAIL(...) do { fprintf(stderr, "slow_resolver: " __VA_ARGS__); _exit(1); } while (0)

/* In a mount namespace of its own, with /etc/resolv.conf naming the
 * test's DNS server. */
static void dns_child(void)
{
	char dir[] = "/tmp/check_vconn_dnsXXXXXX", conf[64], url[128], ipurl[128];
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct mfake m;
	struct call cn, ci;
	pthread_t t;
	FILE *fp;
	/* an address of 127/8 of this run's own: runs side by side do not meet */
	a.sin_addr.s_addr = htonl(0x7f000000u | (((unsigned)getpid() & 0xffffu) << 8) | 77u);
	if (!mkdtemp(dir) || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		CHILD_FAIL("no DNS server socket: %s\n", strerror(errno));
	snprintf(conf, sizeof(conf), "%s/resolv.conf", dir);
	if (!(fp = fopen(conf, "w")))
		CHILD_FAIL("%s: %s\n", conf, strerror(errno));
	fprintf(fp, "nameserver %s\noptions timeout:30 attempts:1\n", inet_ntoa(a.sin_addr));
	fclose(fp);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount(conf, "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0) {
		fprintf(stderr, "slow_resolver: skipped: no mount namespace (%s)\n", strerror(errno));
		_exit(77);
	}
	unlink(conf);
	rmdir(dir);
	pthread_create(&t, NULL, dns_main, &fd);
	L = loop_new();
	pthread_create(&lt, NULL, loop_main, NULL);
	mfake_start(&m, s_ok);
	snprintf(url, sizeof(url), "http://vol.mkv.test:%d/sv00/ab/cd/a2V5", m.port);
	snprintf(ipurl, sizeof(ipurl), "http://127.0.0.1:%d/sv00/ab/cd/a2V5", m.port);

	/* The name's first lookup is held: a request on the same loop to
	 * another volume is answered meanwhile (the loop never waits). */
	atomic_store(&dns_mode, DNS_HOLD);
	call_post(&cn, "DELETE", url, NULL, NULL, 120000);
	if (!dns_asked())
		CHILD_FAIL("the name was never looked up\n");
	call_post(&ci, "DELETE", ipurl, NULL, NULL, 120000);
	for (int i = 0; i < 2000 && !__atomic_load_n(&ci.done, __ATOMIC_SEQ_CST); i++)
		usleep(10000);
	if (!__atomic_load_n(&ci.done, __ATOMIC_SEQ_CST))
		CHILD_FAIL("a request to 127.0.0.1 waited for another's lookup\n");
	if (call_wait(&ci) != 201)
		CHILD_FAIL("127.0.0.1: %d %s\n", ci.req[0].status, ci.req[0].err);

	/* It resolves to an address where nothing listens; then the name
	 * moves: a failed connect has it looked up again. */
	atomic_store(&dns_addr, htonl(0x7f000002u));
	atomic_store(&dns_mode, DNS_ANSWER);
	if (call_wait(&cn) != -1)
		CHILD_FAIL("127.0.0.2 answered %d\n", cn.req[0].status);
	atomic_store(&dns_addr, htonl(INADDR_LOOPBACK));
	if (!answers_soon(url))
		CHILD_FAIL("the name's new address was not picked up\n");

	/* The lookups fail from now on: the last good address serves, also
	 * after a failed connect asked for a lookup. */
	atomic_store(&dns_mode, DNS_SERVFAIL);
	{
		int port = m.port, q = atomic_load(&dns_queries);
		mfake_stop(&m);
		if (run2(&cn, "DELETE", url, NULL, NULL, 20000) != -1)
			CHILD_FAIL("a stopped volume answered\n");
		for (int i = 0; i < 3000 && atomic_load(&dns_queries) == q; i++)
			usleep(10000);
		if (atomic_load(&dns_queries) == q)
			CHILD_FAIL("a failed connect did not have the name looked up\n");
		mfake_start_on(&m, s_ok, port);
	}
	if (!answers_soon(url))
		CHILD_FAIL("the last good address was dropped when a lookup failed\n");
	_exit(0);
}

START_TEST(slow_resolver)
{
	pid_t pid;
	int st;
	if (getuid() != 0) {
		fprintf(stderr, "check_vconn: slow_resolver skipped: not root (it needs a mount "
				"namespace and port 53)\n");
		return;
	}
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		dns_child();
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 77),
		      "the child failed (see above): status %d", st);
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
	tcase_set_timeout(tc, 120);   /* connect timeouts: 4 x 10 s, under ASan and load */
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
	tcase_add_test(tc, pool_bounded);
	tcase_add_test(tc, closed_idle_not_reused);
	tcase_add_test(tc, pipelined_resends_counted);
	tcase_add_test(tc, connect_timeout);
	tcase_add_test(tc, connect_timeout_pipelined);
	tcase_add_test(tc, close_any_case);
	tcase_add_test(tc, bad_heads_fail_at_once);
	tcase_add_test(tc, pipelined_over_once);
	tcase_add_test(tc, pipelined_resigned);
	tcase_add_test(tc, cleanup_closes_busy);
	tcase_add_test(tc, resigned_at_pool_cap);
	tcase_add_test(tc, port_prefix_names);
	tcase_add_loop_test(tc, fuzz_connection, 0, 64);
	suite_add_tcase(s, tc);
	/* No loop thread of the fixture's: it forks a child of its own, and a
	 * fork of a process with threads may copy a lock held (ASan's). */
	tc = tcase_create("resolver");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, slow_resolver);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
