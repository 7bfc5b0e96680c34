/* page.c -- see page.h. */
#include "page.h"
#include "flags.h"
#include "reqstats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the series and their sampler ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t sampler;
static void (*sample_fn)(void), (*render_fn)(struct buf *, bool);
static struct page_series own;   /* the daemon's own requests */
static uint64_t started_ms;
static atomic_bool sampling, stopping;
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv = PTHREAD_COND_INITIALIZER;

void page_sample(struct page_series *s, uint64_t requests, uint64_t errors)
{
	uint64_t now = now_ms() / 1000, cur[2] = {requests, errors};
	pthread_mutex_lock(&mu);
	if (!s->at) {
		s->since = now;   /* the baseline: nothing before it is known */
	} else {
		/* seconds no sample reached (the thread held up) count nothing */
		for (uint64_t t = s->at + 1; t <= now && t <= s->at + PAGE_SECONDS; t++)
			s->n[0][t % PAGE_SECONDS] = s->n[1][t % PAGE_SECONDS] = 0;
		for (int k = 0; k < 2; k++) {
			uint64_t d = cur[k] - s->total[k];
			s->n[k][now % PAGE_SECONDS] += d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
		}
	}
	memcpy(s->total, cur, sizeof(cur));
	s->at = now;
	pthread_mutex_unlock(&mu);
}

static void *sampler_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&stopping)) {
		uint64_t next = (now_ms() / 1000 + 1) * 1000;
		struct reqstats_sum sum;
		reqstats_sum(&sum);
		page_sample(&own, sum.requests, sum.errors);
		if (sample_fn)
			sample_fn();
		/* asleep until the next second (page_stop wakes it): on a VM a
		 * wakeup of a process with a big index mapped is dear */
		pthread_mutex_lock(&stop_mu);
		for (uint64_t t; (t = now_ms()) < next && !atomic_load(&stopping);)
			cond_wait_ms(&stop_cv, &stop_mu, next - t);
		pthread_mutex_unlock(&stop_mu);
	}
	return NULL;
}

void page_start(void (*render)(struct buf *b, bool html), void (*sample)(void))
{
	render_fn = render;
	sample_fn = sample;
	started_ms = now_ms();
	atomic_store(&stopping, false);
	if (pthread_create(&sampler, NULL, sampler_main, NULL))
		die("pthread_create failed");
	atomic_store(&sampling, true);
}

void page_stop(void)
{
	if (!atomic_exchange(&sampling, false))
		return;
	pthread_mutex_lock(&stop_mu);
	atomic_store(&stopping, true);
	pthread_cond_broadcast(&stop_cv);
	pthread_mutex_unlock(&stop_mu);
	pthread_join(sampler, NULL);
}

/* Requests and errors per second over seconds [from, to) of s, counting
 * only the seconds it holds; false when it holds none.  Under mu. */
static bool rates(const struct page_series *s, uint64_t from, uint64_t to, double out[2])
{
	uint64_t sum[2] = {0, 0}, secs = 0;
	for (uint64_t t = from; t < to; t++) {
		if (!s->at || t <= s->since || t > s->at || t + PAGE_SECONDS <= s->at)
			continue;
		sum[0] += s->n[0][t % PAGE_SECONDS];
		sum[1] += s->n[1][t % PAGE_SECONDS];
		secs++;
	}
	out[0] = secs ? (double)sum[0] / (double)secs : 0;
	out[1] = secs ? (double)sum[1] / (double)secs : 0;
	return secs > 0;
}

/* The rates of the last ten whole seconds. */
static void recent(const struct page_series *s, double out[2])
{
	uint64_t now = now_ms() / 1000;
	pthread_mutex_lock(&mu);
	rates(s, now - 10, now, out);
	pthread_mutex_unlock(&mu);
}

/* The p99 (ms) of the requests since the previous call at least 1 s
 * before; the last one in between. */
static double p99(const uint64_t hist[METRICS_NLE + 1])
{
	static uint64_t prev[METRICS_NLE + 1], at_ms;
	static double ms;
	if (now_ms() - at_ms >= 1000) {
		uint64_t d[METRICS_NLE + 1];
		for (int i = 0; i <= METRICS_NLE; i++)
			d[i] = hist[i] - prev[i];
		ms = metrics_quantile(d, 0.99) * 1000;
		memcpy(prev, hist, sizeof(prev));
		at_ms = now_ms();
	}
	return ms;
}

void page_name(char *out, size_t n, int port)
{
	char host[256];
	if (gethostname(host, sizeof(host)))
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	snprintf(out, n, "%s:%d", host, port);
}

/* ---- writing ---- */

static void html_str(struct buf *b, const char *s)
{
	for (; *s; s++) {
		const char *e = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;"
			      : *s == '"' ? "&quot;" : NULL;
		if (e)
			buf_puts(b, e);
		else
			buf_append(b, s, 1);
	}
}

static void json_str(struct buf *b, const char *s)
{
	buf_puts(b, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_printf(b, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			buf_printf(b, "\\u%04x", *s);
		else
			buf_append(b, s, 1);
	}
	buf_puts(b, "\"");
}

static void bytes(struct buf *b, uint64_t n)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)n;
	int i = 0;
	while (v >= 1024 && i < 5)
		v /= 1024, i++;
	buf_printf(b, i ? "%.1f %s" : "%.0f %s", v, unit[i]);
}

/* The smallest of 1, 2, 5 times a power of ten at least v (and 1). */
static double round_up(double v)
{
	double p = 1;
	while (p * 10 <= v)
		p *= 10;
	return v <= p ? p : v <= 2 * p ? 2 * p : v <= 5 * p ? 5 * p : 10 * p;
}

/* One bar per bin with a rate above 0, as one path. */
static void bars(struct buf *b, const char *color, const double *y, int n, int w, int h,
		 double top)
{
	double bw = (double)w / n;
	bool any = false;
	for (int i = 0; i < n; i++) {
		if (y[i] <= 0)
			continue;
		if (!any)
			buf_printf(b, "<path fill=\"%s\" d=\"", color);
		any = true;
		buf_printf(b, "M%.1f %dV%.1fh%.1fV%dZ", i * bw, h, h - y[i] / top * (h - 12),
			   bw - 0.5, h);
	}
	if (any)
		buf_puts(b, "\"/>");
}

/* Ten minutes of s as sixty ten-second bars: requests/s (blue) and
 * errors/s (red, over them) on the same scale, its top written in a
 * corner. */
#define BINS 60
static void chart(struct buf *b, const struct page_series *s, int w, int h)
{
	uint64_t now = now_ms() / 1000;
	double y[2][BINS], top = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < BINS; i++) {
		uint64_t from = now - PAGE_SECONDS + (uint64_t)i * (PAGE_SECONDS / BINS);
		double r[2];
		rates(s, from, from + PAGE_SECONDS / BINS, r);
		y[0][i] = r[0], y[1][i] = r[1];
		top = r[0] > top ? r[0] : r[1] > top ? r[1] : top;
	}
	pthread_mutex_unlock(&mu);
	top = round_up(top);
	buf_printf(b, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		      "role=\"img\" xmlns=\"http://www.w3.org/2000/svg\"><title>requests/s (blue) "
		      "and errors/s (red), the last 10 minutes, up to %g/s</title>"
		      "<rect width=\"%d\" height=\"%d\" fill=\"#f4f6f8\"/>",
		   w, h, w, h, top, w, h);
	bars(b, "#48c", y[0], BINS, w, h, top);
	bars(b, "#c00", y[1], BINS, w, h, top);
	buf_printf(b, "<text x=\"3\" y=\"10\" font-size=\"9\" fill=\"#666\">%g/s</text></svg>", top);
}

static const char head[] =
"<!doctype html>\n<html><head><meta charset=\"utf-8\">"
"<meta name=\"viewport\" content=\"width=device-width\">\n"
"<style>\n"
"body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\n"
"h1{font-size:20px;margin:0 0 .5em}\n"
"table{border-collapse:collapse;margin-top:1em}\n"
"th,td{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left;vertical-align:middle}\n"
"td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
"tr.up .state{color:#070}tr.down .state{color:#c00;font-weight:bold}\n"
"tr.down{background:#fee}\n"
".bar{display:inline-block;width:140px;height:10px;background:#eee;vertical-align:middle;margin-right:6px}\n"
".bar i{display:block;height:100%;background:#48c}\n"
"#summary span{margin-right:1.5em}\n"
"svg.chart{display:block}\n"
".legend{color:#666;font-size:12px}\n"
"#updated{color:#888;font-size:12px}\n"
"</style>\n";

/* Fetch the page again every 2 s and swap its content in: the page is
 * whole without it. */
static const char script[] =
"<script>\n'use strict';\n"
"async function tick(){try{const r=await fetch(location.pathname,{cache:'no-store'});"
"const d=new DOMParser().parseFromString(await r.text(),'text/html');"
"document.getElementById('main').replaceWith(d.getElementById('main'))}"
"catch(e){document.getElementById('updated').textContent='status unavailable: '+e}}\n"
"setInterval(tick,2000);\n</script>\n";

static void item(struct buf *b, const char *id, const char *label)
{
	buf_printf(b, "<span id=\"%s\">", id);
	html_str(b, label);
	buf_puts(b, ": ");
}

static void row_html(struct buf *b, const struct page_row *r)
{
	bool up = r->subvolumes_up == r->subvolumes;
	double rt[2];
	buf_printf(b, "<tr class=\"%s\" data-volume=\"", up && !r->misconfigured ? "up" : "down");
	html_str(b, r->name);
	buf_printf(b, "\" data-state=\"%s\"><td class=\"name\">",
		   r->misconfigured ? "misconfigured" : up ? "up" : "down");
	html_str(b, r->name);
	buf_puts(b, "</td><td class=\"state\">");
	if (r->misconfigured) {
		buf_puts(b, "misconfigured: ");
		html_str(b, r->misconfigured);
		buf_puts(b, ", ");
	}
	buf_puts(b, up ? "up" : "down");
	if (r->version_differs) {
		buf_puts(b, "; <span class=\"version\">runs ");
		html_str(b, r->server);
		buf_printf(b, ", not %s</span>", mkv_server);
	}
	if (r->subvolumes > 1)
		buf_printf(b, " (%d/%d)", r->subvolumes_up, r->subvolumes);
	buf_puts(b, "</td><td class=\"disk\">");
	if (r->disk_total) {
		buf_printf(b, "<span class=\"bar\"><i style=\"width:%.1f%%\"></i></span>",
			   100.0 * (double)r->disk_used / (double)r->disk_total);
		bytes(b, r->disk_used);
		buf_puts(b, " of ");
		bytes(b, r->disk_total);
	} else {
		buf_puts(b, "\u2014");
	}
	buf_puts(b, "</td>");
	if (r->series) {
		recent(r->series, rt);
		buf_printf(b, "<td class=\"n\">%.1f</td><td class=\"n\">%.1f</td><td class=\"n\">%llu</td>",
			   rt[0], rt[1], (unsigned long long)r->errors);
		if (r->check_ms >= 0)
			buf_printf(b, "<td class=\"n\">%.2f ms</td>", r->check_ms);
		else
			buf_puts(b, "<td class=\"n\">\u2014</td>");
		buf_puts(b, "<td class=\"chart\">");
		chart(b, r->series, 180, 30);
		buf_puts(b, "</td>");
	}
	buf_puts(b, "</tr>\n");
}

static void page_html(struct buf *b, const struct page_view *v)
{
	double rt[2];
	bool rates_cols = v->nrows && v->rows[0].series;
	time_t t = time(NULL);
	struct tm tm;
	char when[32];
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%H:%M:%S UTC", &tm);
	recent(v->series, rt);
	buf_puts(b, head);
	buf_printf(b, "<title>mkv %s ", v->role);
	html_str(b, v->name);
	buf_printf(b, "</title></head><body>\n<div id=\"main\">\n<h1 id=\"title\">mkv %s ", v->role);
	html_str(b, v->name);
	buf_puts(b, "</h1>\n<div id=\"summary\">");
	item(b, "rps", "requests/s");
	buf_printf(b, "%.1f</span>", rt[0]);
	item(b, "eps", "errors/s");
	buf_printf(b, "%.1f</span>", rt[1]);
	item(b, "p99", "p99");
	buf_printf(b, "%.2f ms</span>", v->p99_ms);
	item(b, "inflight", "in flight");
	buf_printf(b, "%d</span>", v->in_flight);
	for (int i = 0; i < v->nfacts; i++) {
		const struct page_fact *f = &v->facts[i];
		if (!f->label)
			continue;
		item(b, f->key ? f->key : f->label, f->label);
		if (f->text)
			html_str(b, f->text);
		else
			buf_printf(b, "%llu", (unsigned long long)f->num);
		if (f->note) {
			buf_puts(b, " (");
			html_str(b, f->note);
			buf_puts(b, ")");
		}
		buf_puts(b, "</span>");
	}
	buf_puts(b, "</div>\n<div id=\"own\">");
	chart(b, v->series, 540, 80);
	buf_puts(b, "<span class=\"legend\">requests/s (blue) and errors/s (red), the last 10 "
		    "minutes</span></div>\n");
	buf_printf(b, "<table id=\"volumes\"><thead><tr><th>%s</th><th>state</th><th>disk</th>",
		   v->rows_are);
	if (rates_cols)
		buf_puts(b, "<th>req/s</th><th>errors/s</th><th>errors</th><th>check</th>"
			    "<th>last 10 min</th>");
	buf_puts(b, "</tr></thead>\n<tbody>\n");
	for (int i = 0; i < v->nrows; i++)
		row_html(b, &v->rows[i]);
	buf_printf(b, "</tbody></table>\n<p id=\"updated\">at %s, up %llu s; rates: the last 10 s; "
		      "<span id=\"version\">%s (commit %.12s)</span></p>\n</div>\n",
		   when, (unsigned long long)v->uptime_s, mkv_server, mkv_commit);
	buf_puts(b, script);
	buf_puts(b, "</body></html>\n");
}

static void page_json(struct buf *b, const struct page_view *v)
{
	double rt[2];
	recent(v->series, rt);
	buf_puts(b, "{\"role\":");
	json_str(b, v->role);
	buf_puts(b, ",\"name\":");
	json_str(b, v->name);
	buf_printf(b, ",\"version\":\"%s\",\"commit\":\"%s\"", mkv_version, mkv_commit);
	buf_printf(b, ",\"uptime_s\":%llu,\"requests\":%llu,\"requests_per_s\":%.2f,"
		      "\"errors_per_s\":%.2f,\"p99_ms\":%.3f,\"in_flight\":%d",
		   (unsigned long long)v->uptime_s, (unsigned long long)v->requests, rt[0], rt[1],
		   v->p99_ms, v->in_flight);
	for (int i = 0; i < v->nfacts; i++) {
		const struct page_fact *f = &v->facts[i];
		if (!f->key)
			continue;
		buf_puts(b, ",");
		json_str(b, f->key);
		buf_puts(b, ":");
		if (f->text)
			json_str(b, f->text);
		else
			buf_printf(b, "%llu", (unsigned long long)f->num);
	}
	buf_puts(b, ",\"volumes\":[");
	for (int i = 0; i < v->nrows; i++) {
		const struct page_row *r = &v->rows[i];
		buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
		json_str(b, r->name);
		buf_printf(b, ",\"up\":%s", r->subvolumes_up == r->subvolumes ? "true" : "false");
		if (r->subvolumes)
			buf_printf(b, ",\"subvolumes\":%d,\"subvolumes_up\":%d", r->subvolumes,
				   r->subvolumes_up);
		if (r->check_ms >= 0)
			buf_printf(b, ",\"check_ms\":%.3f", r->check_ms);
		if (r->misconfigured) {
			buf_puts(b, ",\"misconfigured\":");
			json_str(b, r->misconfigured);
		}
		if (r->server && r->server[0]) {
			buf_puts(b, ",\"server\":");
			json_str(b, r->server);
			buf_printf(b, ",\"version_differs\":%s", r->version_differs ? "true" : "false");
		}
		if (r->series) {
			recent(r->series, rt);
			buf_printf(b, ",\"requests\":%llu,\"errors\":%llu,\"requests_per_s\":%.2f,"
				      "\"errors_per_s\":%.2f",
				   (unsigned long long)r->requests, (unsigned long long)r->errors,
				   rt[0], rt[1]);
		}
		if (r->disk_total)
			buf_printf(b, ",\"disk_total\":%llu,\"disk_used\":%llu",
				   (unsigned long long)r->disk_total, (unsigned long long)r->disk_used);
		buf_puts(b, "}");
	}
	buf_puts(b, "]}\n");
}

void page_write(struct buf *b, bool html, struct page_view *v)
{
	struct reqstats_sum sum;
	reqstats_sum(&sum);
	v->uptime_s = (now_ms() - started_ms) / 1000;
	v->requests = sum.requests;
	v->series = &own;
	v->p99_ms = p99(sum.hist);
	v->in_flight = sum.in_flight;
	(html ? page_html : page_json)(b, v);
}

static void html(struct buf *b) { render_fn(b, true); }
static void json(struct buf *b) { render_fn(b, false); }

const struct front_page page_pages[] = {
	{"/status", "application/json", json},
	{"/", "text/html; charset=utf-8", html},
	{NULL, NULL, NULL},
};
