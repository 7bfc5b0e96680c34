/* reqstats.c -- see reqstats.h.  A thread's block is written by that
 * thread alone, with relaxed atomic loads and stores (plain moves on
 * x86), and read by a scrape on another. */
#include "reqstats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define NCODE 600   /* statuses 100..599; 0 (none answered) and others in slot 0 */

typedef _Atomic uint64_t counter;

struct block {
	struct block *next;
	counter req[RM_N][NCODE];
	counter hist[RM_N][METRICS_NLE + 1];
	counter ns[RM_N];
	counter in, out;
};

static const char *const names[RM_N] = {"GET",    "HEAD",      "PUT",    "DELETE",  "POST",
					"UNLINK", "REBALANCE", "RELINK", "REPLACE", "other"};
static _Thread_local struct block *mine;
static struct block *_Atomic blocks;   /* pushed once per thread, never removed */
static atomic_int *_Atomic inflight;   /* set by front_start; the pages' sampler may run before */

static inline void bump(counter *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static inline uint64_t get(counter *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

enum reqstats_method reqstats_method(const char *m)
{
	for (int i = 0; i < RM_OTHER; i++)
		if (!strcmp(m, names[i]))
			return (enum reqstats_method)i;
	return RM_OTHER;
}

void reqstats_add(enum reqstats_method m, int status, uint64_t ns, uint64_t in, uint64_t out)
{
	struct block *b = mine;
	if (!b) {
		b = mine = xcalloc(1, sizeof(*b));
		b->next = atomic_load(&blocks);
		while (!atomic_compare_exchange_weak(&blocks, &b->next, b))
			;
	}
	bump(&b->req[m][status >= 100 && status < NCODE ? status : 0], 1);
	bump(&b->hist[m][metrics_bucket(ns)], 1);
	bump(&b->ns[m], ns);
	bump(&b->in, in);
	bump(&b->out, out);
}

void reqstats_sum(struct reqstats_sum *s)
{
	atomic_int *f = inflight;
	memset(s, 0, sizeof(*s));
	s->in_flight = f ? atomic_load(f) : 0;
	for (struct block *b = atomic_load(&blocks); b; b = b->next)
		for (int m = 0; m < RM_N; m++) {
			for (int c = 0; c < NCODE; c++) {
				uint64_t n = get(&b->req[m][c]);
				s->requests += n;
				if (c == 0 || c >= 500)
					s->errors += n;
			}
			for (int i = 0; i <= METRICS_NLE; i++)
				s->hist[i] += get(&b->hist[m][i]);
		}
}

void reqstats_init(atomic_int *count)
{
	inflight = count;
}

static void requests(struct buf *b)
{
	static uint64_t sum[RM_N][NCODE];   /* a scrape at a time (the listener's one thread) */
	struct buf l = {0};
	memset(sum, 0, sizeof(sum));
	for (struct block *k = atomic_load(&blocks); k; k = k->next)
		for (int m = 0; m < RM_N; m++)
			for (int c = 0; c < NCODE; c++)
				sum[m][c] += get(&k->req[m][c]);
	metrics_family(b, "mkv_http_requests_total", "counter",
		       "HTTP requests answered, by method and status (code 0: none was).");
	for (int m = 0; m < RM_N; m++)
		for (int c = 0; c < NCODE; c++) {
			char code[8];
			if (!sum[m][c])
				continue;
			snprintf(code, sizeof(code), "%d", c);
			l.len = 0;
			metrics_label(&l, "method", names[m]);
			metrics_label(&l, "code", code);
			metrics_sample_u64(b, "mkv_http_requests_total", l.data, sum[m][c]);
		}
	buf_free(&l);
}

static void latency(struct buf *b)
{
	struct buf l = {0};
	metrics_family(b, "mkv_http_request_duration_seconds", "histogram",
		       "Time from a request's head to the end of its answer, by method.");
	for (int m = 0; m < RM_N; m++) {
		uint64_t counts[METRICS_NLE + 1] = {0}, ns = 0, total = 0;
		for (struct block *k = atomic_load(&blocks); k; k = k->next) {
			for (int i = 0; i <= METRICS_NLE; i++)
				counts[i] += get(&k->hist[m][i]);
			ns += get(&k->ns[m]);
		}
		for (int i = 0; i <= METRICS_NLE; i++)
			total += counts[i];
		if (!total)
			continue;
		l.len = 0;
		metrics_label(&l, "method", names[m]);
		metrics_histogram(b, "mkv_http_request_duration_seconds", l.data, counts,
				  (double)ns / 1e9);
	}
	buf_free(&l);
}

void reqstats_collect(struct buf *b)
{
	uint64_t in = 0, out = 0;
	for (struct block *k = atomic_load(&blocks); k; k = k->next) {
		in += get(&k->in);
		out += get(&k->out);
	}
	requests(b);
	latency(b);
	metrics_family(b, "mkv_http_request_bytes_total", "counter",
		       "Request body bytes read.");
	metrics_sample_u64(b, "mkv_http_request_bytes_total", NULL, in);
	metrics_family(b, "mkv_http_response_bytes_total", "counter",
		       "Answer body bytes queued (a streamed answer of unknown length counts 0).");
	metrics_sample_u64(b, "mkv_http_response_bytes_total", NULL, out);
	if (inflight) {
		metrics_family(b, "mkv_http_requests_in_flight", "gauge",
			       "Requests begun and not yet ended.");
		metrics_sample(b, "mkv_http_requests_in_flight", NULL, atomic_load(inflight));
	}
}
