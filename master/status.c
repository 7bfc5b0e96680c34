/* status.c -- see status.h. */
#include "status.h"
#include "handlers.h"
#include "health.h"
#include "../common/metrics.h"
#include "../common/page.h"
#include "../common/reqstats.h"
#include "../common/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct config *cfg;
static struct index *idx;
static _Atomic uint64_t handoffs, conflicts;
/* The keys of the index's last walk (live and unlinked), and when it
 * ended: an estimate as old as that walk.  A walk runs every 30 s, or ten
 * times as long as the last one took, whichever is longer. */
static _Atomic uint64_t keys, keys_at_ms;
static atomic_bool keys_known, stopping;
static pthread_t counter;
static uint64_t started_ms;

void status_count_handoff(void)
{
	atomic_fetch_add(&handoffs, 1);
}

void status_count_conflict(void)
{
	atomic_fetch_add(&conflicts, 1);
}

/* ---- the keys in the index ---- */

static void *count_keys(void *arg)
{
	(void)arg;
	while (!atomic_load(&stopping)) {
		uint64_t t0 = now_ms(), n = 0, wait;
		struct index_iter *it = index_iter_new(idx, "", 0);
		for (; index_iter_valid(it) && !atomic_load(&stopping); index_iter_next(it))
			n++;
		index_iter_free(it);
		if (atomic_load(&stopping))
			break;
		atomic_store(&keys, n);
		atomic_store(&keys_at_ms, now_ms());
		atomic_store(&keys_known, true);
		wait = (now_ms() - t0) * 10;
		for (uint64_t end = now_ms() + (wait > 30000 ? wait : 30000);
		     now_ms() < end && !atomic_load(&stopping);)
			usleep(50000);
	}
	return NULL;
}

/* ---- /metrics ---- */

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
		metrics_sample(b, name, l.data, get(&h));
	}
	buf_free(&l);
}

static double v_up(const struct health_info *h) { return h->up == h->subvolumes; }
static double v_svup(const struct health_info *h) { return h->up; }
static double v_check(const struct health_info *h) { return (double)h->check_ns / 1e9; }
static double v_sent(const struct health_info *h) { return (double)h->sent; }
static double v_errors(const struct health_info *h) { return (double)h->errors; }

static void collect(struct buf *b)
{
	volume_family(b, "mkv_volume_up", "gauge",
		      "1 when the last health check found every subvolume of the volume up.", v_up);
	volume_family(b, "mkv_volume_subvolumes_up", "gauge",
		      "Subvolumes the last health check found up.", v_svup);
	metrics_family(b, "mkv_volume_misconfigured", "gauge",
		       "1 when the volume disagrees with the master's -volumesecret; reason: "
		       "signature_refused, signature_expired or unsigned_accepted.");
	for (int i = 0; i < health_volumes(); i++) {
		struct health_info h;
		struct buf l = {0};
		health_info(i, &h);
		metrics_label(&l, "volume", h.name);
		metrics_label(&l, "reason", health_misconfig_name[h.misconfig]);
		metrics_sample(b, "mkv_volume_misconfigured", l.data, h.misconfig != MISCONFIG_NONE);
		buf_free(&l);
	}
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
	if (atomic_load(&keys_known)) {
		metrics_family(b, "mkv_index_keys", "gauge",
			       "Keys in the index (live and unlinked), estimated: counted by a "
			       "walk of the index every 30 s or more (mkv_index_keys_age_seconds).");
		metrics_sample_u64(b, "mkv_index_keys", NULL, atomic_load(&keys));
		metrics_family(b, "mkv_index_keys_age_seconds", "gauge",
			       "Seconds since the walk that counted mkv_index_keys ended.");
		metrics_sample(b, "mkv_index_keys_age_seconds", NULL,
			       (double)(now_ms() - atomic_load(&keys_at_ms)) / 1000.0);
	}
}

/* ---- /status and / ---- */

static void json_str(struct buf *b, const char *s)
{
	json_append_string(b, s, strlen(s));
}

/* The rates since the previous view: one per volume and two of the
 * master's, kept by the listener's one thread. */
static struct page_rate *vol_sent, *vol_err;
static struct page_rate req_rate, err_rate;
static struct page_p99 p99;

static void status_json(struct buf *b)
{
	struct reqstats_sum sum;
	int nv = health_volumes();
	reqstats_sum(&sum);
	buf_puts(b, "{\"role\":\"master\",\"name\":");
	{
		char name[32];
		snprintf(name, sizeof(name), ":%d", cfg->port);
		json_str(b, name);
	}
	buf_printf(b, ",\"uptime_s\":%llu,\"requests\":%llu,\"requests_per_s\":%.2f,"
		      "\"errors_per_s\":%.2f,\"p99_ms\":%.3f,\"in_flight\":",
		   (unsigned long long)((now_ms() - started_ms) / 1000),
		   (unsigned long long)sum.requests, page_rate(&req_rate, sum.requests),
		   page_rate(&err_rate, sum.errors), page_p99(&p99, sum.hist));
	buf_printf(b, "%d", sum.in_flight);
	if (atomic_load(&keys_known))
		buf_printf(b, ",\"keys\":%llu,\"keys_kind\":\"estimated, %llu s old\"",
			   (unsigned long long)atomic_load(&keys),
			   (unsigned long long)((now_ms() - atomic_load(&keys_at_ms)) / 1000));
	buf_printf(b, ",\"handoffs\":%llu,\"conflicts\":%llu,\"volumes\":[",
		   (unsigned long long)atomic_load(&handoffs),
		   (unsigned long long)atomic_load(&conflicts));
	for (int i = 0; i < nv; i++) {
		struct health_info h;
		health_info(i, &h);
		buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
		json_str(b, h.name);
		buf_printf(b, ",\"up\":%s,\"subvolumes\":%d,\"subvolumes_up\":%d,\"check_ms\":%.3f,"
			      "\"requests\":%llu,\"errors\":%llu,\"requests_per_s\":%.2f,"
			      "\"errors_per_s\":%.2f",
			   h.up == h.subvolumes ? "true" : "false", h.subvolumes, h.up,
			   (double)h.check_ns / 1e6, (unsigned long long)h.sent,
			   (unsigned long long)h.errors, page_rate(&vol_sent[i], h.sent),
			   page_rate(&vol_err[i], h.errors));
		if (h.misconfig) {
			buf_puts(b, ",\"misconfigured\":");
			json_str(b, health_misconfig_name[h.misconfig]);
		}
		if (h.disk_total)
			buf_printf(b, ",\"disk_total\":%llu,\"disk_used\":%llu",
				   (unsigned long long)h.disk_total,
				   (unsigned long long)(h.disk_total - h.disk_free));
		buf_puts(b, "}");
	}
	buf_puts(b, "]}\n");
}

const struct front_page status_pages[] = {
	{"/status", PAGE_JSON_CTYPE, status_json},
	{"/", PAGE_CTYPE, page_html},
	{NULL, NULL, NULL},
};

void status_start(const struct config *c, struct index *i)
{
	cfg = c;
	idx = i;
	started_ms = now_ms();
	vol_sent = xcalloc((size_t)c->nvol, sizeof(*vol_sent));
	vol_err = xcalloc((size_t)c->nvol, sizeof(*vol_err));
	metrics_register(collect);
	if (pthread_create(&counter, NULL, count_keys, NULL))
		die("pthread_create failed");
}

void status_stop(void)
{
	atomic_store(&stopping, true);
	pthread_join(counter, NULL);
	free(vol_sent);
	free(vol_err);
	vol_sent = vol_err = NULL;
}
