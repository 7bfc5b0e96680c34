/* accesslog.c -- see accesslog.h. */
#include "accesslog.h"
#include "metrics.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define CAP (1u << 20)

struct side {
	char *data;
	size_t len;
	uint64_t lines;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct side fill, spare;     /* lines go into fill; the writer writes spare */
	bool stop;
	pthread_t thread;
	const char *path;            /* NULL: stderr */
	int fd;
} lg = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
static atomic_bool on, reopen;
static _Atomic uint64_t dropped;

bool accesslog_on(void)
{
	return atomic_load_explicit(&on, memory_order_relaxed);
}

/* 0640: the lines name who asked for what (docs/security.md). */
static int open_path(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		log_msg("cannot open access log %s: %s", path, strerror(errno));
	return fd;
}

/* Write s whole; false when the file takes no more (the rest is dropped). */
static bool write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static void *writer(void *arg)
{
	static bool warned;
	(void)arg;
	pthread_mutex_lock(&lg.mu);
	for (;;) {
		struct side t;
		bool stop = lg.stop;
		if (!lg.fill.len && !stop && !atomic_load(&reopen)) {
			cond_wait_ms(&lg.cv, &lg.mu, 100);
			continue;
		}
		t = lg.spare;
		lg.spare = lg.fill;
		lg.fill = t;
		lg.fill.len = 0;
		lg.fill.lines = 0;
		pthread_mutex_unlock(&lg.mu);
		if (atomic_exchange(&reopen, false) && lg.path) {
			int fd = open_path(lg.path);   /* keeps the old file when it fails */
			if (fd >= 0) {
				close(lg.fd);
				lg.fd = fd;
			}
		}
		if (lg.spare.len && !write_all(lg.fd, lg.spare.data, lg.spare.len)) {
			atomic_fetch_add(&dropped, lg.spare.lines);
			if (!warned)
				log_msg("access log: write failed (%s): lines dropped and counted",
					strerror(errno));
			warned = true;
		}
		pthread_mutex_lock(&lg.mu);
		if (stop && !lg.fill.len)
			break;
	}
	pthread_mutex_unlock(&lg.mu);
	return NULL;
}

static void collect(struct buf *b)
{
	metrics_family(b, "mkv_accesslog_dropped_lines_total", "counter",
		       "Access log lines dropped: the buffer was full or the write failed.");
	metrics_sample_u64(b, "mkv_accesslog_dropped_lines_total", NULL, atomic_load(&dropped));
}

int accesslog_open(const char *path)
{
	lg.path = strcmp(path, "-") ? path : NULL;
	lg.fd = lg.path ? open_path(path) : STDERR_FILENO;
	if (lg.fd < 0)
		return -1;
	lg.fill.data = xmalloc(CAP);
	lg.spare.data = xmalloc(CAP);
	lg.stop = false;
	if (pthread_create(&lg.thread, NULL, writer, NULL)) {
		log_msg("access log: pthread_create failed");
		return -1;
	}
	metrics_register(collect);
	atomic_store(&on, true);
	return 0;
}

void accesslog_reopen(void)
{
	if (!accesslog_on())
		return;
	atomic_store(&reopen, true);
	pthread_cond_signal(&lg.cv);
}

void accesslog_close(void)
{
	if (!atomic_exchange(&on, false))
		return;
	pthread_mutex_lock(&lg.mu);
	lg.stop = true;
	pthread_cond_signal(&lg.cv);
	pthread_mutex_unlock(&lg.mu);
	pthread_join(lg.thread, NULL);
	if (lg.path)
		close(lg.fd);
	free(lg.fill.data);
	free(lg.spare.data);
}

/* s[0..len) as nginx logs a variable: '"', '\\' and bytes outside
 * printable ASCII as \xHH, into out[0..cap); its length. */
static size_t esc_n(char *out, size_t cap, const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len && n + 4 < cap; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			n += (size_t)snprintf(out + n, cap - n, "\\x%02X", c);
		else
			out[n++] = (char)c;
	}
	out[n] = '\0';
	return n;
}

/* The values of the signatures in a query -- SigV4's X-Amz-Signature,
 * SigV2's Signature, a volume link's md5 -- are written as "…" (which no
 * escaped byte makes): a presigned link in a log must not be a credential. */
void accesslog_redact(char *out, size_t cap, const char *s, bool url)
{
	static const char *const secret[] = {"X-Amz-Signature", "Signature", "md5", NULL};
	const char *q;
	size_t n;
	if (!s || !*s)
		s = "-";
	q = url ? strchr(s, '?') : s;
	q = !q ? s + strlen(s) : url ? q + 1 : q;
	n = esc_n(out, cap, s, (size_t)(q - s));
	while (*q && n + 8 < cap) {
		size_t len = strcspn(q, "&"), nl = strcspn(q, "="), keep = len;
		for (int i = 0; nl < len && secret[i]; i++)
			if (strlen(secret[i]) == nl && !strncasecmp(q, secret[i], nl))
				keep = nl + 1;
		n += esc_n(out + n, cap - n, q, keep);
		if (keep < len)
			n += (size_t)snprintf(out + n, cap - n, "\u2026");
		q += len;
		if (*q == '&')
			n += esc_n(out + n, cap - n, q++, 1);
	}
}

void accesslog_add(const struct accesslog_entry *e)
{
	char line[4096], target[2048], query[1024], ref[512], agent[512], when[64];
	struct tm tm;
	time_t now = time(NULL);
	int n;
	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%d/%b/%Y:%H:%M:%S %z", &tm);
	accesslog_redact(target, sizeof(target), e->target, true);   /* a path: no '?' */
	accesslog_redact(query, sizeof(query), e->query, false);
	accesslog_redact(ref, sizeof(ref), e->referer, true);
	accesslog_redact(agent, sizeof(agent), e->agent, true);
	/* $remote_addr - $remote_user [$time_local] "$request" $status
	 * $body_bytes_sent "$http_referer" "$http_user_agent" $request_time */
	n = snprintf(line, sizeof(line), "%s - - [%s] \"%s %s%s%s %s\" %d %llu \"%s\" \"%s\" %.3f\n",
		     e->addr, when, e->method, target, e->query ? "?" : "",
		     e->query ? query : "", e->version, e->status,
		     (unsigned long long)e->bytes, ref, agent, e->seconds);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		n = sizeof(line);
		line[n - 1] = '\n';
	}
	pthread_mutex_lock(&lg.mu);
	if (lg.fill.len + (size_t)n > CAP) {
		atomic_fetch_add(&dropped, 1);
	} else {
		memcpy(lg.fill.data + lg.fill.len, line, (size_t)n);
		lg.fill.len += (size_t)n;
		lg.fill.lines++;
		if (lg.fill.len > CAP / 2)
			pthread_cond_signal(&lg.cv);
	}
	pthread_mutex_unlock(&lg.mu);
}
