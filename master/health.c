/* health.c -- see health.h. */
#include "health.h"
#include "../common/httpc.h"
#include "../common/spawn.h"
#include "../common/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct vol {
	const char *name;
	size_t len;
	int nsv;
	atomic_bool *up;   /* per subvolume (one entry when subvolumes == 1) */
	bool *seen;        /* marker seen present once, per subvolume */
	atomic_int rounds; /* completed check rounds */
	/* For the metrics: the last round's time, the fullest subvolume's disk
	 * (mkv-volume's Mkv-Disk header; 0 from nginx), requests sent to it and
	 * those that failed (no answer, or 5xx). */
	_Atomic uint64_t check_ns, disk_total, disk_free, sent, errors;
};

static struct spawn_queue *checkers;   /* a worker per volume, until health_stop */
static struct vol *vols;
static int nvols;
static int subvols;
static uint64_t timeout_ms;
static atomic_bool stopping;
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv = PTHREAD_COND_INITIALIZER;

static const char *marker_body = "mkv volume marker\n";

/* A marker HEAD's answer: mkv-volume says "Mkv-Disk: TOTAL FREE". */
struct disk {
	uint64_t total, free;
};

static bool on_header(void *ctx, int status, const char *line, size_t len)
{
	struct disk *d = ctx;
	char v[64];
	unsigned long long t, f;
	if (status == 200 && httpc_header(line, len, "Mkv-Disk", v, sizeof(v)) &&
	    sscanf(v, "%llu %llu", &t, &f) == 2 && t &&
	    (!d->total || (double)f / (double)t < (double)d->free / (double)d->total))
		*d = (struct disk){t, f};   /* the fullest subvolume's */
	return true;
}

/* One subvolume: 1 up, 0 down, -1 the volume unreachable; why (300
 * bytes) says why when it is not up (logged by the caller once the flags
 * say so, so that the log line can be waited for). */
static int check_one(struct vol *v, int sv, char *why, struct disk *disk)
{
	char url[600], err[256];
	struct httpc_call head = {.url = url, .head = true, .connect_ms = (long)timeout_ms,
				  .timeout_ms = (long)timeout_ms, .header = on_header, .ctx = disk};
	int st;
	if (subvols > 1)
		snprintf(url, sizeof(url), "http://%s/sv%02X/.mkv", v->name, sv);
	else
		snprintf(url, sizeof(url), "http://%s/.mkv", v->name);
	st = httpc_call(&head, err);
	if (st == 404 && !v->seen[sv]) {     /* a new disk: mark it */
		st = httpc_do("PUT", url, marker_body, strlen(marker_body), (long)timeout_ms, NULL,
			      0, err);
		if (st < 200 || st >= 300) {
			log_msg("volume %s: cannot write marker %s (status %d)", v->name, url, st);
			return 0;
		}
		st = 200;
	}
	if (st == 200) {
		v->seen[sv] = true;
		return 1;
	}
	if (st == 404) {
		snprintf(why, 300, "marker %.200s is gone (disk replaced?); subvolume", url);
		return 0;
	}
	snprintf(why, 300, "%.200s answered %d%s%.80s;", url, st, st < 0 ? ": " : "",
		 st < 0 ? err : "");
	return -1; /* unreachable: the whole volume likely is */
}

static void checker(void *ctx, void *item)
{
	struct vol *v = item;
	uint64_t interval = timeout_ms < 1000 ? 1000 : timeout_ms;
	(void)ctx;
	while (!atomic_load(&stopping)) {
		uint64_t start = now_ms(), t0 = now_ns();
		struct disk disk = {0, 0};
		for (int sv = 0; sv < v->nsv; sv++) {
			char why[300] = "";
			int r = check_one(v, sv, why, &disk);
			bool was = atomic_load(&v->up[sv]);
			if (r < 0) {
				/* Unreachable: mark all down now rather than time out per subvolume. */
				for (int j = 0; j < v->nsv; j++)
					atomic_store(&v->up[j], false);
			} else {
				atomic_store(&v->up[sv], r == 1);
			}
			if (r == 1 && !was && atomic_load(&v->rounds))
				log_msg("volume %s subvolume %d is up", v->name, sv);
			else if (r != 1 && was && why[0])   /* after the flags: a signal */
				log_msg("volume %s: %s marked down", v->name, why);
			if (r < 0)
				break;
		}
		atomic_store(&v->check_ns, now_ns() - t0);
		atomic_store(&v->disk_total, disk.total);
		atomic_store(&v->disk_free, disk.free);
		atomic_fetch_add(&v->rounds, 1);
		/* asleep until the next round (health_stop wakes it) */
		pthread_mutex_lock(&stop_mu);
		while (!atomic_load(&stopping) && now_ms() - start < interval)
			cond_wait_ms(&stop_cv, &stop_mu, interval - (now_ms() - start));
		pthread_mutex_unlock(&stop_mu);
	}
}

/* Every request the master sends a volume ends here (httpc's observer). */
static void observe(const char *url, int status)
{
	const char *host = strncmp(url, "http://", 7) ? url : url + 7;
	size_t len = strcspn(host, "/?");
	for (int i = 0; i < nvols; i++)
		if (vols[i].len == len && !memcmp(vols[i].name, host, len)) {
			atomic_fetch_add(&vols[i].sent, 1);
			if (status < 0 || status >= 500)
				atomic_fetch_add(&vols[i].errors, 1);
			return;
		}
}

int health_volumes(void)
{
	return nvols;
}

void health_info(int i, struct health_info *h)
{
	struct vol *v = &vols[i];
	h->name = v->name;
	h->subvolumes = v->nsv;
	h->up = 0;
	for (int j = 0; j < v->nsv; j++)
		h->up += atomic_load(&v->up[j]);
	h->check_ns = atomic_load(&v->check_ns);
	h->disk_total = atomic_load(&v->disk_total);
	h->disk_free = atomic_load(&v->disk_free);
	h->sent = atomic_load(&v->sent);
	h->errors = atomic_load(&v->errors);
}

void health_start(const struct config *cfg)
{
	uint64_t deadline;
	nvols = cfg->nvol;
	subvols = cfg->subvolumes;
	timeout_ms = cfg->voltimeout_ms;
	vols = xcalloc((size_t)nvols, sizeof(*vols));
	checkers = spawn_queue(nvols, checker, NULL);
	for (int i = 0; i < nvols; i++) {
		struct vol *v = &vols[i];
		v->name = cfg->volumes[i];
		v->len = strlen(v->name);
		v->nsv = subvols > 1 ? subvols : 1;
		v->up = xcalloc((size_t)v->nsv, sizeof(*v->up));
		v->seen = xcalloc((size_t)v->nsv, sizeof(*v->seen));
		spawn_queue_push(checkers, v);
	}
	httpc_observe(observe);
	deadline = now_ms() + (timeout_ms + 100) * 2;
	for (int i = 0; i < nvols; i++)
		while (!atomic_load(&vols[i].rounds) && now_ms() < deadline)
			usleep(5000);
}

void health_stop(void)
{
	pthread_mutex_lock(&stop_mu);
	atomic_store(&stopping, true);
	pthread_cond_broadcast(&stop_cv);
	pthread_mutex_unlock(&stop_mu);
	spawn_queue_end(checkers);
}

bool health_up(const char *loc, size_t len)
{
	for (int i = 0; i < nvols; i++) {
		struct vol *v = &vols[i];
		if (len < v->len || memcmp(loc, v->name, v->len))
			continue;
		if (len == v->len)
			return atomic_load(&v->up[0]);
		/* "/svNN": hex, as key2volume writes it */
		if (len > v->len + 3 && !memcmp(loc + v->len, "/sv", 3)) {
			long sv = 0;
			for (size_t i = v->len + 3; i < len; i++) {
				int h = hex_value(loc[i]);
				if (h < 0 || (sv = sv * 16 + h) >= v->nsv)
					return true;
			}
			return atomic_load(&v->up[sv]);
		}
	}
	return true;
}
