/* health.c -- see health.h. */
#include "health.h"
#include "../common/httpc.h"
#include "../common/spawn.h"
#include "../common/util.h"

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
};

static struct spawn_queue *checkers;   /* a worker per volume, until health_stop */
static struct vol *vols;
static int nvols;
static int subvols;
static uint64_t timeout_ms;
static atomic_bool stopping;

static const char *marker_body = "mkv volume marker\n";

/* One subvolume: 1 up, 0 down. */
static int check_one(struct vol *v, int sv)
{
	char url[600], err[256];
	int st;
	if (subvols > 1)
		snprintf(url, sizeof(url), "http://%s/sv%02X/.mkv", v->name, sv);
	else
		snprintf(url, sizeof(url), "http://%s/.mkv", v->name);
	st = httpc_do("HEAD", url, NULL, 0, (long)timeout_ms, NULL, 0, err);
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
	/* Marked down before the line that says so: a reader of the log
	 * may count on it. */
	if (st == 404) {
		if (atomic_exchange(&v->up[sv], false))
			log_msg("volume %s: marker %s is gone (disk replaced?); subvolume marked down",
				v->name, url);
		return 0;
	}
	/* Unreachable: the whole volume likely is; all of it down now rather
	 * than time out per subvolume. */
	bool was = atomic_load(&v->up[sv]);
	for (int j = 0; j < v->nsv; j++)
		atomic_store(&v->up[j], false);
	if (was)
		log_msg("volume %s: %s answered %d%s%s; marked down", v->name, url, st,
			st < 0 ? ": " : "", st < 0 ? err : "");
	return -1;
}

static void checker(void *ctx, void *item)
{
	struct vol *v = item;
	uint64_t interval = timeout_ms < 1000 ? 1000 : timeout_ms;
	(void)ctx;
	while (!atomic_load(&stopping)) {
		uint64_t start = now_ms();
		for (int sv = 0; sv < v->nsv; sv++) {
			int r = check_one(v, sv);
			if (r < 0)
				break;
			if (!atomic_exchange(&v->up[sv], r == 1) && r && atomic_load(&v->rounds))
				log_msg("volume %s subvolume %d is up", v->name, sv);
		}
		atomic_fetch_add(&v->rounds, 1);
		while (!atomic_load(&stopping) && now_ms() - start < interval)
			usleep(20000);
	}
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
	deadline = now_ms() + (timeout_ms + 100) * 2;
	for (int i = 0; i < nvols; i++)
		while (!atomic_load(&vols[i].rounds) && now_ms() < deadline)
			usleep(5000);
}

void health_stop(void)
{
	atomic_store(&stopping, true);
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
