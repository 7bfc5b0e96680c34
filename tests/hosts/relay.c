/* relay.c -- a TCP relay that delays every byte by a fixed time each way:
 * the slow link of the multi-host bed (tests/hosts/bed.sh), since this
 * kernel has no netem.
 *
 *   relay LISTEN_ADDR:PORT TARGET_ADDR:PORT DELAY_MS
 *   relay LISTEN_ADDR:PORT TARGET_ADDR:PORT /PATH   (the delay in a file,
 *                                                  read again on SIGHUP)
 *
 * Each accepted connection gets its own connection to the target.  Bytes
 * read on one side reach the other DELAY_MS later, in order; an end of
 * stream (shutdown) travels the same way.  A new connection's first bytes
 * wait three one-way delays, as a real link's handshake would make them:
 * a fresh connection costs a round trip more than a kept-alive one.  One
 * thread, epoll; a side whose peer has 4 MiB queued is not read until the
 * queue drains (back-pressure instead of unbounded memory).  An error on
 * either side closes both at once.  SIGTERM ends it; SIGUSR1 prints one
 * line on stderr: connections accepted, bytes towards the target, bytes
 * back (what a test counts to know whether a host was asked at all). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_MAX (4u << 20)
#define CHUNK (64u << 10)

struct chunk {
	uint64_t due;        /* ms, monotonic */
	size_t len, off;     /* len 0: the end of the stream */
	struct chunk *next;
	char data[];
};

struct side {
	int fd;
	struct chunk *head, *tail;   /* bytes to write to fd */
	size_t queued;
	uint64_t last_due;           /* dues never go back: order is kept */
	bool in_eof;                 /* fd said end of stream */
	bool out_eof;                /* shut fd's writing side */
	bool gone;                   /* both ways shut: off epoll */
	uint32_t events;             /* what epoll watches now */
	struct side *peer;
	struct conn *conn;
};

struct conn {
	struct side a, b;            /* a: accepted, b: to the target */
	struct conn *prev, *next;
};

static struct conn *conns;
static unsigned long long n_accepted, n_to, n_from;
static int ep;
static uint64_t delay_ms;

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void die(const char *what)
{
	fprintf(stderr, "relay: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void parse_addr(const char *s, struct sockaddr_in *a)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof(host)) {
		fprintf(stderr, "relay: bad address %s\n", s);
		exit(2);
	}
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
		fprintf(stderr, "relay: bad address %s\n", s);
		exit(2);
	}
}

/* Watch s for reading while its peer's queue has room and it has not
 * ended, and for writing while its own due bytes wait on a full socket. */
static void watch(struct side *s, bool want_out)
{
	uint32_t ev = 0;
	struct epoll_event e = {0};
	if (s->gone)
		return;
	if (!s->in_eof && s->peer->queued < QUEUE_MAX)
		ev |= EPOLLIN;
	if (want_out)
		ev |= EPOLLOUT;
	if (ev == s->events)
		return;
	e.events = ev;
	e.data.ptr = s;
	if (epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &e) < 0)
		die("epoll_ctl");
	s->events = ev;
}

static void side_free(struct side *s)
{
	while (s->head) {
		struct chunk *c = s->head;
		s->head = c->next;
		free(c);
	}
	close(s->fd);
}

static void conn_close(struct conn *c)
{
	side_free(&c->a);
	side_free(&c->b);
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

/* Queue n bytes (n 0: the end) for writing to s. */
static void enqueue(struct side *s, const char *p, size_t n)
{
	struct chunk *c = malloc(sizeof(*c) + n);
	uint64_t due = now_ms() + delay_ms;
	if (!c)
		die("malloc");
	if (due < s->last_due)
		due = s->last_due;
	s->last_due = due;
	c->due = due;
	c->len = n;
	c->off = 0;
	c->next = NULL;
	memcpy(c->data, p, n);
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
	s->queued += n;
}

/* Write what is due to s.  false: the connection failed. */
static bool flush(struct side *s)
{
	uint64_t now = now_ms();
	while (s->head && s->head->due <= now) {
		struct chunk *c = s->head;
		if (!c->len) {
			shutdown(s->fd, SHUT_WR);
			s->out_eof = true;
		} else {
			ssize_t w = send(s->fd, c->data + c->off, c->len - c->off, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && errno == EAGAIN) {
				watch(s, true);
				return true;
			}
			if (w < 0)
				return false;
			c->off += (size_t)w;
			s->queued -= (size_t)w;
			if (c->off < c->len)
				continue;
		}
		s->head = c->next;
		if (!s->head)
			s->tail = NULL;
		free(c);
	}
	watch(s, false);
	watch(s->peer, s->peer->events & EPOLLOUT);
	return true;
}

/* Read from s into its peer's queue.  false: the connection failed. */
static bool pull(struct side *s)
{
	char buf[CHUNK];
	ssize_t r = recv(s->fd, buf, sizeof(buf), 0);
	if (r < 0)
		return errno == EINTR || errno == EAGAIN;
	if (r == 0)
		s->in_eof = true;
	if (s == &s->conn->a)
		n_to += (unsigned long long)r;
	else
		n_from += (unsigned long long)r;
	enqueue(s->peer, buf, (size_t)r);
	watch(s, s->events & EPOLLOUT);
	return true;
}

static void add_fd(struct side *s)
{
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = s};
	int one = 1;
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->events = EPOLLIN;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &e) < 0)
		die("epoll_ctl");
}

static void accept_one(int lfd, const struct sockaddr_in *target)
{
	struct conn *c;
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK), up;
	if (fd < 0)
		return;
	up = socket(AF_INET, SOCK_STREAM, 0);
	if (up < 0 || connect(up, (const struct sockaddr *)target, sizeof(*target)) < 0) {
		perror("relay: connect to target");
		close(fd);
		if (up >= 0)
			close(up);
		return;
	}
	if (!(c = calloc(1, sizeof(*c))))
		die("calloc");
	n_accepted++;
	c->a.fd = fd;
	c->b.fd = up;
	c->a.peer = &c->b;
	c->b.peer = &c->a;
	c->a.conn = c->b.conn = c;
	/* The handshake's round trip, then the request's way there. */
	c->b.last_due = now_ms() + 3 * delay_ms;
	if (fcntl(up, F_SETFL, O_NONBLOCK) < 0)
		die("fcntl");
	add_fd(&c->a);
	add_fd(&c->b);
	c->next = conns;
	if (conns)
		conns->prev = c;
	conns = c;
}

/* Events of a round whose connection an earlier event closed. */
static struct side dead;

static volatile sig_atomic_t stop, report, reread;

/* DELAY_MS, or the number in the file it names. */
static uint64_t read_delay(const char *arg)
{
	char buf[32] = "";
	FILE *f;
	if (arg[0] != '/')
		return strtoull(arg, NULL, 10);
	if (!(f = fopen(arg, "r")) || !fgets(buf, sizeof(buf), f)) {
		fprintf(stderr, "relay: cannot read the delay from %s\n", arg);
		exit(2);
	}
	fclose(f);
	return strtoull(buf, NULL, 10);
}

static void on_hup(int sig)
{
	(void)sig;
	reread = 1;
}
static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void on_usr1(int sig)
{
	(void)sig;
	report = 1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in la, ta;
	struct epoll_event e = {.events = EPOLLIN};
	int lfd, one = 1;
	if (argc != 4) {
		fprintf(stderr, "usage: relay LISTEN_ADDR:PORT TARGET_ADDR:PORT DELAY_MS\n");
		return 2;
	}
	parse_addr(argv[1], &la);
	parse_addr(argv[2], &ta);
	delay_ms = read_delay(argv[3]);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	signal(SIGUSR1, on_usr1);
	signal(SIGHUP, on_hup);
	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&la, sizeof(la)) < 0)
		die("bind");
	if (listen(lfd, 1024) < 0)
		die("listen");
	if ((ep = epoll_create1(0)) < 0)
		die("epoll_create1");
	e.data.ptr = NULL;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e) < 0)
		die("epoll_ctl");
	while (!stop) {
		struct epoll_event evs[64];
		uint64_t now = now_ms(), next = UINT64_MAX;
		int n, tmo;
		if (reread) {
			reread = 0;
			delay_ms = read_delay(argv[3]);
			fprintf(stderr, "relay: delay %llu ms\n", (unsigned long long)delay_ms);
		}
		if (report) {
			report = 0;
			fprintf(stderr, "relay: accepted=%llu to=%llu from=%llu\n", n_accepted, n_to,
				n_from);
		}
		/* Due bytes first; the earliest not yet due sets the wait. */
		for (struct conn *c = conns, *nx; c; c = nx) {
			nx = c->next;
			if (!flush(&c->a) || !flush(&c->b) ||
			    (c->a.in_eof && c->b.in_eof && c->a.out_eof && c->b.out_eof)) {
				conn_close(c);
				continue;
			}
			if (c->a.head && !(c->a.events & EPOLLOUT) && c->a.head->due < next)
				next = c->a.head->due;
			if (c->b.head && !(c->b.events & EPOLLOUT) && c->b.head->due < next)
				next = c->b.head->due;
		}
		now = now_ms();
		tmo = next == UINT64_MAX ? 1000 : next <= now ? 0 : (int)(next - now);
		n = epoll_wait(ep, evs, 64, tmo);
		for (int i = 0; i < n; i++) {
			struct side *s = evs[i].data.ptr;
			if (!s) {
				accept_one(lfd, &ta);
				continue;
			}
			if (!s->conn)
				continue;
			if (s->in_eof && (evs[i].events & (EPOLLHUP | EPOLLERR)) && s->out_eof) {
				epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
				s->gone = true;
				continue;
			}
			if ((evs[i].events & (EPOLLHUP | EPOLLERR) && s->in_eof) ||
			    ((evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && !s->in_eof &&
			     !pull(s))) {
				struct conn *c = s->conn;
				for (int j = i + 1; j < n; j++)
					if (evs[j].data.ptr == &c->a || evs[j].data.ptr == &c->b)
						evs[j].data.ptr = &dead;
				conn_close(c);
			}
		}
	}
	return 0;
}
