/* metrics.h -- Prometheus's text exposition format (version 0.0.4), the
 * one file that writes it, and the collectors a scrape runs.
 *
 * A collector is a function that appends its families to a buffer; each
 * layer registers its own (the front its request counters, the master its
 * volumes), so that common/ names no daemon.  Counting is the collectors'
 * business: hot paths keep per-thread counters and a collector sums them. */
#ifndef MKV_METRICS_H
#define MKV_METRICS_H

#include <stdint.h>
#include "util.h"

/* The Content-Type of a scrape's answer. */
#define METRICS_CTYPE "text/plain; version=0.0.4; charset=utf-8"

/* "# HELP" and "# TYPE" lines of family name (type: counter, gauge,
 * histogram). */
void metrics_family(struct buf *b, const char *name, const char *type, const char *help);
/* One sample: name{labels} value.  labels: `a="x",b="y"` already escaped
 * (metrics_label), or NULL. */
void metrics_sample(struct buf *b, const char *name, const char *labels, double v);
void metrics_sample_u64(struct buf *b, const char *name, const char *labels, uint64_t v);
/* Append name="value" to b (a comma first when b is not empty), value
 * escaped as the format wants (\\, \", \n). */
void metrics_label(struct buf *b, const char *name, const char *value);

/* The latency buckets every _seconds histogram uses: METRICS_NLE upper
 * bounds, 100 µs to 10 s.  A histogram's counts has METRICS_NLE + 1
 * entries, each the observations in its bucket alone (the last: above
 * every bound), not cumulative; sum in seconds. */
#define METRICS_NLE 16
/* name_bucket{labels,le=...} (cumulative, +Inf last), name_sum, name_count. */
void metrics_histogram(struct buf *b, const char *name, const char *labels,
		       const uint64_t *counts, double sum);
/* The bucket of an observation of ns nanoseconds (METRICS_NLE: above all). */
int metrics_bucket(uint64_t ns);
/* The q-quantile (0..1) as Prometheus's histogram_quantile estimates it:
 * linear within the bucket that holds it; 0 without observations, the
 * largest bound when it falls above it. */
double metrics_quantile(const uint64_t *counts, double q);

/* Collectors run on each scrape in the order registered; register before
 * the metrics listener starts (not thread-safe). */
void metrics_register(void (*collect)(struct buf *b));
/* The process_* families (cpu, resident and virtual memory, open and
 * maximum descriptors, start time), then every collector's. */
void metrics_render(struct buf *b);

#endif
