/* page.h -- the status page both daemons serve at / of their metrics
 * listener: static HTML whose script reads /status (JSON) every 2 s and
 * draws it.  No framework, no outside resources. */
#ifndef MKV_PAGE_H
#define MKV_PAGE_H

#include "metrics.h"
#include "util.h"

void page_html(struct buf *b);
#define PAGE_CTYPE "text/html; charset=utf-8"
#define PAGE_JSON_CTYPE "application/json"

/* A rate from a counter: per second since the previous call at least 1 s
 * before (the page's views); the last rate in between. */
struct page_rate {
	uint64_t last, at_ms;
	double per_s;
};
double page_rate(struct page_rate *r, uint64_t total);

/* The p99 (ms) of the requests in a latency histogram (metrics_le's
 * buckets) since the previous call at least 1 s before; the last one in
 * between. */
struct page_p99 {
	uint64_t prev[METRICS_NLE + 1], at_ms;
	double ms;
};
double page_p99(struct page_p99 *p, const uint64_t hist[METRICS_NLE + 1]);

#endif
