/* page.h -- the status page both daemons serve at / of their metrics
 * listener, and its JSON at /status: one view (struct page_view) written
 * either way.  The HTML is whole as served -- every row, its state, its
 * disk, its rates and a chart of the last ten minutes as inline SVG --
 * so curl or a browser without scripts reads it all; a short script then
 * fetches the page again every 2 s and swaps it in.  No framework, no
 * outside resources. */
#ifndef MKV_PAGE_H
#define MKV_PAGE_H

#include <stdbool.h>
#include "front.h"
#include "metrics.h"
#include "util.h"

/* ---- ten minutes of a counter pair ----
 *
 * Requests and errors per second for the last 600 s: a ring of one count
 * a second each (4.8 KB a series, whatever the load).  The sampler thread
 * (page_start) books the counters' growth every second; the page reads
 * the rates.  Reads and writes hold one lock of page.c's. */
#define PAGE_SECONDS 600
struct page_series {
	uint64_t total[2];        /* the counters at the last sample */
	uint64_t at;              /* that sample's second (0: none yet) */
	uint64_t since;           /* the first sample's: rates start after it */
	uint32_t n[2][PAGE_SECONDS];   /* requests, errors booked in second t % 600 */
};
/* Book the counters' totals now (the sampler's callback calls it). */
void page_sample(struct page_series *s, uint64_t requests, uint64_t errors);

/* ---- the view ---- */

/* One fact of the summary beyond the common ones.  On the page, when it
 * has a label: "label: text" (or the number), then " (note)" when there is
 * one; in the JSON, when it has a key: key: "text" (or the number). */
struct page_fact {
	const char *key, *label;
	uint64_t num;
	const char *text, *note;
};

struct page_row {
	const char *name;
	int subvolumes, subvolumes_up;   /* up when all are; 0 subvolumes: not shown */
	uint64_t disk_total, disk_used;  /* disk_total 0: not known */
	const struct page_series *series;   /* NULL: no rates (a volume's directory) */
	uint64_t requests, errors;       /* with series */
	double check_ms;                 /* < 0: none */
	const char *misconfigured;       /* NULL, or why the volume disagrees with us */
	const char *server;              /* its Server header (NULL: not known) */
	bool version_differs;            /* an mkv of another version than ours */
};

struct page_view {
	const char *role, *name, *rows_are;  /* "master", "host:3000", "volume" */
	/* the daemon's own, page_write's */
	uint64_t uptime_s, requests;
	const struct page_series *series;
	double p99_ms;
	int in_flight;
	const struct page_fact *facts;
	int nfacts;
	const struct page_row *rows;
	int nrows;
};

/* The pages / (HTML) and /status (JSON) of the metrics listener: each
 * calls render, which makes the daemon's view of now and hands it to
 * page_write; the daemon's own requests (reqstats.h), their rates, p99
 * and its uptime are page.c's.  page_start also starts the sampler, which
 * books those requests every second, then calls sample (may be NULL; it
 * calls page_sample for the rows' series), until page_stop. */
extern const struct front_page page_pages[];
void page_start(void (*render)(struct buf *b, bool html), void (*sample)(void));
void page_stop(void);
void page_write(struct buf *b, bool html, struct page_view *v);

/* "host:port": the machine's name and port. */
void page_name(char *out, size_t n, int port);

#endif
