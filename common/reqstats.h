/* reqstats.h -- the front's request counters: by method and status, a
 * latency histogram by method, bytes in and out.  Each thread that ends
 * requests counts into its own block (no lock, no shared cache line); a
 * scrape sums the blocks.  The front calls reqstats_add; reqstats_collect
 * is the metrics collector (common/metrics.h). */
#ifndef MKV_REQSTATS_H
#define MKV_REQSTATS_H

#include <stdatomic.h>
#include <stdint.h>
#include "metrics.h"

enum reqstats_method {
	RM_GET, RM_HEAD, RM_PUT, RM_DELETE, RM_POST, RM_UNLINK, RM_REBALANCE, RM_RELINK,
	RM_REPLACE, RM_OTHER, RM_N
};
enum reqstats_method reqstats_method(const char *method);

/* One request ended: its status (0: none was answered), how long it took,
 * body bytes read and answered.  From the thread that ends it. */
void reqstats_add(enum reqstats_method m, int status, uint64_t ns, uint64_t in, uint64_t out);

/* Sums over every thread, for the status pages: requests, those answered
 * 5xx (or not at all), the latency histogram of all methods, and the
 * requests in flight. */
struct reqstats_sum {
	uint64_t requests, errors;
	int in_flight;
	uint64_t hist[METRICS_NLE + 1];
};
void reqstats_sum(struct reqstats_sum *s);

/* A gauge read on each scrape: requests in flight (the front's count). */
void reqstats_init(atomic_int *inflight);
void reqstats_collect(struct buf *b);

#endif
