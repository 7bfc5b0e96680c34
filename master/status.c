/* status.c -- see status.h. */
#include "status.h"
#include "health.h"
#include "../common/httpc.h"
#include "../common/metrics.h"
#include "../common/page.h"
#include "../common/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct index *idx;
static _Atomic uint64_t handoffs, conflicts;
static atomic_bool stopping;
static pthread_t counter;

void status_count_handoff(void)
{
	atomic_fetch_add(&handoffs, 1);
}

void status_count_conflict(void)
{
	atomic_fetch_add(&conflicts, 1);
}

/* ---- the keys in the index ---- */

/* The index keeps its count as it is written, and with itself when
 * closed; only when that was lost (a crash, the Go original) is it walked
 * once, here, off the way of everything else. */
static void *count_keys(void *arg)
{
	(void)arg;
	index_count(idx, &stopping);
	return NULL;
}

/* ---- /metrics ---- */

/* A sample a volume (labels volume, scheme; and reason, for
 * mkv_volume_misconfigured). */
static void volume_family(struct buf *b, const char *name, const char *type, const char *help,
			  double (*get)(const struct health_info *))
{
	struct buf l = {0};
	metrics_family(b, name, type, help);
	for (int i = 0; i < health_volumes(); i++) {
		struct health_info h;
		health_info(i, &h);
		l.len = 0;
		metrics_label(&l, "volume", h.name);
		metrics_label(&l, "scheme", vol_tls(h.name, strlen(h.name)) ? "https" : "http");
		if (!strcmp(name, "mkv_volume_misconfigured"))
			metrics_label(&l, "reason", health_misconfig_name[h.misconfig]);
		metrics_sample(b, name, l.data, get(&h));
	}
	buf_free(&l);
}

static double v_up(const struct health_info *h) { return h->up == h->subvolumes; }
static double v_svup(const struct health_info *h) { return h->up; }
static double v_check(const struct health_info *h) { return (double)h->check_ns / 1e9; }
static double v_sent(const struct health_info *h) { return (double)h->sent; }
static double v_errors(const struct health_info *h) { return (double)h->errors; }
static double v_mis(const struct health_info *h) { return h->misconfig != MISCONFIG_NONE; }

static void collect(struct buf *b)
{
	volume_family(b, "mkv_volume_up", "gauge",
		      "1 when the last health check found every subvolume of the volume up.", v_up);
	volume_family(b, "mkv_volume_subvolumes_up", "gauge",
		      "Subvolumes the last health check found up.", v_svup);
	volume_family(b, "mkv_volume_misconfigured", "gauge",
		      "1 when the volume disagrees with the master's -volumesecret; reason: "
		      "signature_refused, signature_expired or unsigned_accepted.", v_mis);
	volume_family(b, "mkv_volume_check_seconds", "gauge",
		      "How long the last round of health checks of the volume took.", v_check);
	volume_family(b, "mkv_volume_requests_total", "counter",
		      "Requests the master sent the volume (health checks included).", v_sent);
	volume_family(b, "mkv_volume_errors_total", "counter",
		      "Requests the master sent the volume that got no answer or a 5xx.", v_errors);
	metrics_family(b, "mkv_handoffs_total", "counter",
		       "Writes placed on a volume that is not among the key's home volumes "
		       "(one was down): a rebalance moves them home.");
	metrics_sample_u64(b, "mkv_handoffs_total", NULL, atomic_load(&handoffs));
	metrics_family(b, "mkv_keylock_conflicts_total", "counter",
		       "Writes refused with 409: another write of the key was running.");
	metrics_sample_u64(b, "mkv_keylock_conflicts_total", NULL, atomic_load(&conflicts));
	char why[256];
	metrics_family(b, "mkv_index_writable", "gauge",
		       "1 while the index and its sidecar take writes; 0 after a write failed "
		       "(the log says why), until it is sound again.");
	metrics_sample_u64(b, "mkv_index_writable", NULL,
			   index_writable(idx, why, sizeof(why)) && meta_writable(why, sizeof(why)));
	metrics_family(b, "mkv_index_write_errors_total", "counter",
		       "Writes of the index and its sidecar that failed (ENOSPC, EIO, a failed sync).");
	metrics_sample_u64(b, "mkv_index_write_errors_total", NULL,
			   index_write_errors(idx) + meta_write_errors());
	uint64_t n;
	if (index_keys(idx, &n)) {
		metrics_family(b, "mkv_index_keys", "gauge",
			       "Keys in the index (live and unlinked), exact: kept as the index "
			       "is written.");
		metrics_sample_u64(b, "mkv_index_keys", NULL, n);
	}
}

/* ---- /status and / ---- */

/* Ten minutes of the requests the master sent each volume, kept by
 * page.c's sampler. */
static struct page_series *vol_series;
static char name[300];

static void sample(void)
{
	for (int i = 0; i < health_volumes(); i++) {
		struct health_info h;
		health_info(i, &h);
		page_sample(&vol_series[i], h.sent, h.errors);
	}
}

/* The view of now, written one way or the other. */
static void render(struct buf *b, bool html)
{
	int nv = health_volumes(), nf = 0;
	struct page_row *rows = xcalloc((size_t)nv + 1, sizeof(*rows));
	struct health_info *hs = xcalloc((size_t)nv + 1, sizeof(*hs));   /* the rows point into it */
	char (*shown)[300] = xcalloc((size_t)nv + 1, sizeof(*shown));   /* the rows' names */
	struct page_fact facts[5];
	uint64_t n;
	if (!index_keys(idx, &n)) {
		facts[nf++] = (struct page_fact){NULL, "keys", 0, "counting\u2026", NULL};
	} else {
		facts[nf++] = (struct page_fact){"keys", "keys", n, NULL, NULL};
		facts[nf++] = (struct page_fact){"keys_kind", NULL, 0, "exact", NULL};
	}
	facts[nf++] = (struct page_fact){"handoffs", "writes handed off since start",
					 atomic_load(&handoffs), NULL, NULL};
	facts[nf++] = (struct page_fact){"conflicts", NULL, atomic_load(&conflicts), NULL, NULL};
	for (int i = 0; i < nv; i++) {
		struct health_info *h = &hs[i];
		health_info(i, h);
		/* an https volume shown as such; http is the default */
		snprintf(shown[i], sizeof(shown[i]), "%s%s",
			 vol_tls(h->name, strlen(h->name)) ? "https://" : "", h->name);
		rows[i] = (struct page_row){.name = shown[i], .subvolumes = h->subvolumes,
					    .subvolumes_up = h->up, .series = &vol_series[i],
					    .requests = h->sent, .errors = h->errors,
					    .check_ms = (double)h->check_ns / 1e6,
					    .misconfigured = h->misconfig ? health_misconfig_name[h->misconfig] : NULL,
					    .server = h->server, .version_differs = h->version_differs,
					    .disk_total = h->disk_total,
					    .disk_used = h->disk_total ? h->disk_total - h->disk_free : 0};
	}
	page_write(b, html, &(struct page_view){.role = "master", .name = name, .rows_are = "volume",
						.facts = facts, .nfacts = nf, .rows = rows, .nrows = nv});
	free(shown);
	free(rows);
	free(hs);
}

void status_start(const struct config *c, struct index *i)
{
	idx = i;
	page_name(name, sizeof(name), c->port);
	metrics_register(collect);
	if (!c->metrics)
		return;   /* nothing shows what these keep */
	if (pthread_create(&counter, NULL, count_keys, NULL))
		die("pthread_create failed");
	vol_series = xcalloc((size_t)c->nvol, sizeof(*vol_series));
	page_start(render, sample);
}

void status_stop(void)
{
	if (!vol_series)
		return;
	page_stop();
	atomic_store(&stopping, true);
	pthread_join(counter, NULL);
	free(vol_series);
	vol_series = NULL;
}
