/* metrics.c -- see metrics.h.  The format: https://prometheus.io/docs/
 * instrumenting/exposition_formats/ (text, 0.0.4): one "# HELP" and one
 * "# TYPE" line per family, then its samples, one per line. */
#include "metrics.h"
#include "flags.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const double le[METRICS_NLE] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
				       0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
				       1,      2.5,     5,      10};

static void (*collectors[8])(struct buf *);
static int ncollectors;

void metrics_register(void (*collect)(struct buf *b))
{
	if (ncollectors < (int)(sizeof(collectors) / sizeof(collectors[0])))
		collectors[ncollectors++] = collect;
}

void metrics_family(struct buf *b, const char *name, const char *type, const char *help)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Go's strconv.FormatFloat(v, 'g', -1, 64) is what Prometheus writes:
 * integers as integers, others as few digits as read back exactly. */
static void value(struct buf *b, double v)
{
	if (isnan(v))
		buf_puts(b, "NaN");
	else if (isinf(v))
		buf_puts(b, v > 0 ? "+Inf" : "-Inf");
	else if (v == (double)(int64_t)v && fabs(v) < 1e15)
		buf_printf(b, "%lld", (long long)v);
	else {   /* the shortest of these that reads back as v */
		char s[32];
		snprintf(s, sizeof(s), "%.15g", v);
		if (strtod(s, NULL) != v)
			snprintf(s, sizeof(s), "%.17g", v);
		buf_puts(b, s);
	}
}

static void name_labels(struct buf *b, const char *name, const char *labels)
{
	buf_puts(b, name);
	if (labels && *labels)
		buf_printf(b, "{%s}", labels);
	buf_puts(b, " ");
}

void metrics_sample(struct buf *b, const char *name, const char *labels, double v)
{
	name_labels(b, name, labels);
	value(b, v);
	buf_puts(b, "\n");
}

void metrics_sample_u64(struct buf *b, const char *name, const char *labels, uint64_t v)
{
	name_labels(b, name, labels);
	buf_printf(b, "%llu\n", (unsigned long long)v);
}

void metrics_label(struct buf *b, const char *name, const char *v)
{
	buf_printf(b, "%s%s=\"", b->len ? "," : "", name);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			buf_printf(b, "\\%c", *v);
		else if (*v == '\n')
			buf_puts(b, "\\n");
		else
			buf_append(b, v, 1);
	}
	buf_puts(b, "\"");
}

int metrics_bucket(uint64_t ns)
{
	double s = (double)ns / 1e9;
	int i = 0;
	while (i < METRICS_NLE && s > le[i])
		i++;
	return i;
}

void metrics_histogram(struct buf *b, const char *name, const char *labels,
		       const uint64_t *counts, double sum)
{
	struct buf l = {0};
	uint64_t cum = 0;
	char *bucket = xasprintf("%s_bucket", name), *sums = xasprintf("%s_sum", name),
	     *count = xasprintf("%s_count", name);
	for (int i = 0; i <= METRICS_NLE; i++) {
		char bound[32];
		cum += counts[i];
		if (i < METRICS_NLE)
			snprintf(bound, sizeof(bound), "%g", le[i]);
		l.len = 0;
		if (labels && *labels)
			buf_puts(&l, labels);
		metrics_label(&l, "le", i < METRICS_NLE ? bound : "+Inf");
		metrics_sample_u64(b, bucket, l.data, cum);
	}
	metrics_sample(b, sums, labels, sum);
	metrics_sample_u64(b, count, labels, cum);
	buf_free(&l);
	free(bucket);
	free(sums);
	free(count);
}

double metrics_quantile(const uint64_t *counts, double q)
{
	uint64_t total = 0, cum = 0;
	for (int i = 0; i <= METRICS_NLE; i++)
		total += counts[i];
	if (!total)
		return 0;
	for (int i = 0; i < METRICS_NLE; i++) {
		double rank = q * (double)total, lo = i ? le[i - 1] : 0;
		if ((double)(cum + counts[i]) >= rank && counts[i])
			return lo + (le[i] - lo) * (rank - (double)cum) / (double)counts[i];
		cum += counts[i];
	}
	return le[METRICS_NLE - 1];
}

/* ---- process_* ---- */

/* The process's start, taken before main (more exact than /proc's, whose
 * boot time is in whole seconds). */
static double started;

__attribute__((constructor)) static void start_time(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	started = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;   /* the directory's own descriptor */
}

static void process(struct buf *b)
{
	long vm_pages = 0, rss_pages = 0;
	double page = (double)sysconf(_SC_PAGESIZE);
	struct rusage ru;
	struct rlimit rl;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &vm_pages, &rss_pages) != 2)
			vm_pages = rss_pages = 0;
		fclose(f);
	}
	getrusage(RUSAGE_SELF, &ru);
	metrics_family(b, "process_cpu_seconds_total", "counter",
		       "Total user and system CPU time spent in seconds.");
	metrics_sample(b, "process_cpu_seconds_total", NULL,
		       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	metrics_family(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
	metrics_sample(b, "process_resident_memory_bytes", NULL, (double)rss_pages * page);
	metrics_family(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
	metrics_sample(b, "process_virtual_memory_bytes", NULL, (double)vm_pages * page);
	metrics_family(b, "process_open_fds", "gauge", "Number of open file descriptors.");
	metrics_sample(b, "process_open_fds", NULL, open_fds());
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		metrics_family(b, "process_max_fds", "gauge",
			       "Maximum number of open file descriptors.");
		metrics_sample(b, "process_max_fds", NULL, (double)rl.rlim_cur);
	}
	{
		struct buf l = {0};
		metrics_label(&l, "version", mkv_version);
		metrics_label(&l, "commit", mkv_commit);
		metrics_family(b, "mkv_build_info", "gauge",
			       "Always 1; the version and the commit the binary was built from.");
		metrics_sample(b, "mkv_build_info", l.data, 1);
		buf_free(&l);
	}
	metrics_family(b, "process_start_time_seconds", "gauge",
		       "Start time of the process since unix epoch in seconds.");
	metrics_sample(b, "process_start_time_seconds", NULL, started);
}

void metrics_render(struct buf *b)
{
	process(b);
	for (int i = 0; i < ncollectors; i++)
		collectors[i](b);
}
