/* util.c -- what the commands share: the worker pool, the progress line,
 * the offline walk over the index and the small HTTP calls.  See ops.h. */
#include "ops.h"
#include "../master/store.h"
#include "../common/spawn.h"
#include "../common/httpc.h"
#include "../common/placement.h"
#include "../common/util.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BATCH 4096             /* records handed to the workers at a time */
#define MAX_LOGS 20

struct range {
	void (*fn)(void *ctx, size_t i);
	void *ctx;
};

static void range_job(void *ctx, void *item)
{
	struct range *r = ctx;
	r->fn(r->ctx, (size_t)(uintptr_t)item);
}

void ops_pool_run(int workers, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
	struct range r = {fn, ctx};
	struct spawn_queue *q;
	if (n == 0)
		return;
	if ((size_t)workers > n)
		workers = (int)n;
	q = spawn_queue(workers > 0 ? workers : 1, range_job, &r);
	for (size_t i = 0; i < n; i++)
		spawn_queue_push(q, (void *)(uintptr_t)i);
	spawn_queue_end(q);
}

/* ---- progress line, and the signals ---- */

/* The progress line (NULL: none), held while it is drawn, and by a signal
 * to the end: the line stays still. */
static pthread_mutex_t current_mu = PTHREAD_MUTEX_INITIALIZER;
static void (*current)(void *ctx, char *out, size_t n);
static void *current_ctx;

void ops_progress_start(void (*line)(void *ctx, char *out, size_t n), void *ctx)
{
	pthread_mutex_lock(&current_mu);
	current = line;
	current_ctx = ctx;
	pthread_mutex_unlock(&current_mu);
}

void ops_progress_stop(void)
{
	pthread_mutex_lock(&current_mu);
	current = NULL;
	if (isatty(2)) {
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
	}
	pthread_mutex_unlock(&current_mu);
}

/* Every 250 ms the progress line (on a terminal); at a signal, the end. */
static void *signal_main(void *arg)
{
	sigset_t *set = arg;
	struct timespec tick = {0, 250 * 1000 * 1000};
	bool tty = isatty(2);
	char text[256];
	int sig;
	for (;;) {
		sig = sigtimedwait(set, NULL, &tick);
		pthread_mutex_lock(&current_mu);
		if (sig > 0)
			break;
		if (current && tty) {
			current(current_ctx, text, sizeof(text));
			fprintf(stderr, "\r\033[K%s", text);
			fflush(stderr);
		}
		pthread_mutex_unlock(&current_mu);
	}
	text[0] = '\0';
	if (current)
		current(current_ctx, text, sizeof(text));
	if (tty)
		fprintf(stderr, "\r\033[K");
	log_msg("%s%sinterrupted (%s): run it again to finish (that is safe)", text,
		*text ? "; " : "", sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
	_exit(128 + sig);
}

void ops_signals_init(void)
{
	static sigset_t set;
	pthread_t t;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0 ||
	    pthread_create(&t, NULL, signal_main, &set) != 0) {
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);   /* the default then */
		return;
	}
	pthread_detach(t);
}

static void fmt_duration(uint64_t ms, char *out, size_t n)
{
	if (ms < 60000)
		snprintf(out, n, "%.1f s", (double)ms / 1000);
	else if (ms < 3600000)
		snprintf(out, n, "%u min %u s", (unsigned)(ms / 60000), (unsigned)(ms / 1000 % 60));
	else
		snprintf(out, n, "%u h %u min", (unsigned)(ms / 3600000),
			 (unsigned)(ms / 60000 % 60));
}

double ops_per_s(double n, uint64_t ms)
{
	return ms ? n * 1000 / (double)ms : 0.0;
}

uint64_t ops_elapsed(uint64_t t0, char dur[32])
{
	uint64_t ms = now_ms() - t0;
	fmt_duration(ms, dur, 32);
	return ms;
}

void ops_eta(char *out, size_t n, uint64_t done, uint64_t total, uint64_t ms)
{
	size_t k = strlen(out);
	char eta[32];
	if (done && done < total) {
		fmt_duration(ms * (total - done) / done, eta, sizeof(eta));
		snprintf(out + k, n - k, ", ETA %s", eta);
	}
}

/* ---- the index, offline ---- */

struct index *ops_index_open(const char *db, bool create, const char *who, const char *hint)
{
	char *why = NULL, *current = xasprintf("%s/CURRENT", db);
	struct index *idx = NULL;
	struct stat st;
	int err = stat(current, &st) == 0 ? 0 : errno;
	free(current);
	if (err && !create) {
		log_msg("%s: no index at %s (%s)", who, db, strerror(err));
		return NULL;
	}
	idx = index_open(db, &why);
	if (idx)
		return idx;
	log_msg("%s: %s", who, why);
	if (hint && strstr(why, "in use"))
		log_msg("%s: a master is serving this index: %s", who, hint);
	free(why);
	return NULL;
}

void ops_index_each(struct index *idx, int workers, struct ops_keys *b,
		    void (*fn)(void *ctx, size_t i), void *ctx)
{
	struct index_iter *it = index_iter_new(idx, "", 0);
	b->keys = xcalloc(BATCH, sizeof(*b->keys));
	b->vals = xcalloc(BATCH, sizeof(*b->vals));
	b->klens = xcalloc(BATCH, sizeof(*b->klens));
	b->vlens = xcalloc(BATCH, sizeof(*b->vlens));
	while (index_iter_valid(it)) {
		size_t n = 0;
		for (; n < BATCH && index_iter_valid(it); index_iter_next(it), n++) {
			const char *k = index_iter_key(it, &b->klens[n]);
			const char *v = index_iter_value(it, &b->vlens[n]);
			b->keys[n] = xstrndup(k, b->klens[n]);
			b->vals[n] = xstrndup(v, b->vlens[n]);
		}
		ops_pool_run(workers, b->n = n, fn, ctx);
		for (size_t i = 0; i < n; i++) {
			free(b->keys[i]);
			free(b->vals[i]);
		}
	}
	index_iter_free(it);
	free(b->keys);
	free(b->vals);
	free(b->klens);
	free(b->vlens);
	memset(b, 0, sizeof(*b));
}

long ops_path_key(const char *path, char *key)
{
	char want[PATH_MAX_LEN];
	long len = strlen(path) > 7 ? placement_name_key(path + 7, strlen(path + 7), key) : -1;
	if (len <= 0 || len > KEY_MAX)
		return -1;
	placement_path(key, (size_t)len, want);
	return strcmp(want, path) ? -1 : len;
}

int ops_hash_dir(const char *s)
{
	return strlen(s) == 2 && strspn(s, "0123456789abcdef") == 2 ? (int)strtol(s, NULL, 16) : -1;
}

bool ops_subvolume_dir(const char *s)
{
	size_t n = strlen(s);
	return n >= 4 && n <= 6 && !strncmp(s, "sv", 2) &&
	       strspn(s + 2, "0123456789abcdefABCDEF") == n - 2;
}

/* ---- HTTP ---- */

char *ops_url(const char *host, const char *path, size_t n, const char *query)
{
	char *enc = url_escape(path, n, true);
	char *url = xasprintf("%s%s%s%s", strstr(host, "://") ? "" : VOL_PREFIX(host, strlen(host)),
			      host, enc, query);
	free(enc);
	return url;
}

void ops_note(unsigned long *logged, const char *who, const char *fmt, ...)
{
	char line[4 * OPS_ERR];
	va_list ap;
	unsigned long n = __atomic_fetch_add(logged, 1, __ATOMIC_RELAXED);
	if (n > MAX_LOGS)
		return;
	if (n == MAX_LOGS) {
		log_msg("%s: more problems: counted, not logged", who);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_msg("%s: %s", who, line);
}

const char *ops_entry(json_t *e, char *type)
{
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *t = json_string_value(json_object_get(e, "type"));
	*type = !t ? 0 : !strcmp(t, "directory") ? 'd' : !strcmp(t, "file") ? 'f' : 0;
	return name && *name ? name : NULL;
}

bool ops_unreachable(const char *who, const char *key, size_t klen)
{
	if (!memmem(key, klen, "\xef\xbf\xbd", 3))
		return false;
	log_msg("%s: %.*s: listed, then not found: a name that is not UTF-8 comes out of "
		"?list with U+FFFD in place of its bytes, and cannot be reached through the "
		"master (offline, with -db, rebalance, verify and gc do reach it)", who, (int)klen, key);
	return true;
}
