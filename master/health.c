/* health.c -- see health.h. */
#include "health.h"
#include "../common/flags.h"
#include "../common/httpc.h"
#include "../common/spawn.h"
#include "../common/util.h"
#include "../common/volsign.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A marker HEAD's answer: mkv-volume says "Mkv-Disk: TOTAL FREE". */
struct disk {
	uint64_t total, free;
};
/* What on_header takes from a marker HEAD's answer. */
struct answer {
	struct disk *disk;
	char server[64];   /* its Server header, "" without one */
};

struct vol {
	const char *name;
	size_t len;
	int nsv;
	atomic_bool *up;   /* per subvolume (one entry when subvolumes == 1) */
	bool *seen;        /* marker seen present once, per subvolume */
	struct disk *disk; /* per subvolume, as its last check found it */
	atomic_int rounds; /* completed check rounds */
	/* For the metrics: the last round's time, the fullest subvolume's disk
	 * (mkv-volume's Mkv-Disk header; 0 from nginx), requests sent to it and
	 * those that failed (no answer, or 5xx). */
	_Atomic uint64_t check_ns, disk_total, disk_free, sent, errors;
	/* -volumesecret set and the volume disagrees (enum misconfig). */
	atomic_int misconfig;
	bool takes_unsigned;   /* the last unsigned probe was answered (checker only) */
	char server[64];       /* its Server header at the last answer; under server_lock */
	bool answered;         /* it has answered once (checker only) */
};
static pthread_mutex_t server_lock = PTHREAD_MUTEX_INITIALIZER;

/* What a volume that disagrees about -volumesecret does. */
static const char *const misconfig_why[] = {
	[MISCONFIG_REFUSED] = "it refuses the master's signature (403): is its -volumesecret "
			      "the master's?",
	[MISCONFIG_EXPIRED] = "it takes the master's links for expired (410): its clock is "
			      "ahead of the master's",
	[MISCONFIG_UNSIGNED] = "it answers requests with no signature: start it with "
			       "-volumesecret",
};
const char *const health_misconfig_name[] = {
	[MISCONFIG_NONE] = "", [MISCONFIG_REFUSED] = "signature_refused",
	[MISCONFIG_EXPIRED] = "signature_expired", [MISCONFIG_UNSIGNED] = "unsigned_accepted",
};

static struct spawn_queue *checkers;   /* a worker per volume, until health_stop */
static struct vol *vols;
static int nvols;
static int subvols;
static uint64_t timeout_ms;
static atomic_bool stopping;
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv = PTHREAD_COND_INITIALIZER;

/* Subvolume sv's marker into url[600]. */
static void marker_url(const struct vol *v, int sv, char *url)
{
	snprintf(url, 600, subvols > 1 ? "%s%s/sv%02X/.mkv" : "%s%s/.mkv",
		 VOL_PREFIX(v->name, v->len), v->name, sv);
}

static bool on_header(void *ctx, int status, const char *line, size_t len)
{
	struct answer *a = ctx;
	char v[64];
	unsigned long long t, f;
	if (status == 200 && httpc_header(line, len, "Mkv-Disk", v, sizeof(v)) &&
	    sscanf(v, "%llu %llu", &t, &f) == 2 && t)
		*a->disk = (struct disk){t, f};
	httpc_header(line, len, "Server", a->server, sizeof(a->server));
	return true;
}

/* Which server a volume runs: logged at its first answer and whenever it
 * changes, and said when it is an mkv of another version than ours (a
 * rolling upgrade, or a host left behind). */
static void note_server(struct vol *v, const char *server)
{
	bool changed;
	pthread_mutex_lock(&server_lock);
	changed = !v->answered || strcmp(v->server, server);
	snprintf(v->server, sizeof(v->server), "%s", server);
	pthread_mutex_unlock(&server_lock);
	v->answered = true;
	if (!changed)
		return;
	if (!strncmp(server, "mkv/", 4) && strcmp(server, mkv_server))
		log_msg("volume %s runs %s, the master %s: versions differ (expected only during "
			"a rolling upgrade)", v->name, server, mkv_server);
	else
		log_msg("volume %s runs %s", v->name, server[0] ? server : "(no Server header)");
}

/* One subvolume: 1 up, 0 down, -1 the volume unreachable; why (512
 * bytes) says why when it is not up (logged by the caller once the flags
 * say so, so that the log line can be waited for). */
static int check_one(struct vol *v, int sv, char *why, struct disk *disk, int *mis)
{
	char url[600], err[256], id[VOL_ID_LEN + 1], loc[600];
	struct answer a = {.disk = disk};
	struct httpc_call head = {.url = url, .head = true, .connect_ms = (long)timeout_ms,
				  .timeout_ms = (long)timeout_ms, .header = on_header, .ctx = &a};
	int st;
	marker_url(v, sv, url);
	st = httpc_call(&head, err);
	if (st > 0)
		note_server(v, a.server);
	/* its id, each round (volid.c): written with the marker when it has none */
	if (st == 200 || (st == 404 && !v->seen[sv])) {
		snprintf(loc, sizeof(loc), subvols > 1 ? "%s/sv%02X" : "%s", v->name, sv);
		if (vol_id(loc, true, id) < 0 && st == 404)
			return 0;   /* a new disk that cannot be marked (a marker
				     * with no id that cannot get one still serves) */
		st = 200;
	}
	if (st == 200) {
		v->seen[sv] = true;
		return 1;
	}
	if ((st == 403 || st == 410) && volsign_on()) {
		*mis = st == 403 ? MISCONFIG_REFUSED : MISCONFIG_EXPIRED;
		snprintf(why, 512, "configuration error: %s; volume", misconfig_why[*mis]);
		return -1;     /* no request of the master's would pass */
	}
	if (st == 404) {
		snprintf(why, 512, "marker %.200s is gone (disk replaced?); subvolume", url);
		return 0;
	}
	snprintf(why, 512, "%.200s answered %d%s%s;", url, st, st < 0 ? ": " : "",
		 st < 0 ? err : "");
	return -1; /* unreachable: the whole volume likely is */
}

/* With -volumesecret, a volume must refuse what the master did not sign:
 * does it answer the marker's HEAD sent with no signature? */
static bool unsigned_accepted(struct vol *v)
{
	char url[600];
	struct httpc_call head = {.url = url, .head = true, .connect_ms = (long)timeout_ms,
				  .timeout_ms = (long)timeout_ms, .nosign = true};
	int st;
	marker_url(v, 0, url);
	st = httpc_call(&head, NULL);
	return st > 0 && st != 403 && st != 410;
}

/* One HEAD per volume every interval, whatever -subvolumes says: a volume
 * is one server, and whether it answers is all its subvolumes' state.
 * What is a subvolume's own -- its marker (a disk swapped under it) and
 * its disk's space -- is checked in turn, one subvolume a round, so it is
 * at most -subvolumes rounds old.  The first round, and the first after
 * the volume did not answer, check every subvolume: they come back
 * together, each with its marker seen. */
static void checker(void *ctx, void *item)
{
	struct vol *v = item;
	uint64_t interval = timeout_ms < 1000 ? 1000 : timeout_ms;
	bool all = true;
	int next = 0;
	(void)ctx;
	while (!atomic_load(&stopping)) {
		uint64_t start = now_ms(), t0 = now_ns();
		struct disk fullest = {0, 0};
		int mis = MISCONFIG_NONE, r = 0;
		bool every = all;
		all = false;
		for (int i = 0; i < (every ? v->nsv : 1); i++) {
			char why[512] = "";
			int sv = every ? i : next;
			bool was = atomic_load(&v->up[sv]);
			v->disk[sv] = (struct disk){0, 0};
			r = check_one(v, sv, why, &v->disk[sv], &mis);
			if (r < 0) {
				/* Unreachable: mark all down now rather than time out per subvolume. */
				for (int j = 0; j < v->nsv; j++)
					atomic_store(&v->up[j], false);
				all = true;
			} else {
				atomic_store(&v->up[sv], r == 1);
			}
			if (r == 1 && !was && atomic_load(&v->rounds))
				log_msg("volume %s subvolume %d is up", v->name, sv);
			else if (r != 1 && (was || !atomic_load(&v->rounds)) && why[0])
				/* after the flags: a signal; at start, why it is not up
				 * (a certificate refused) */
				log_msg("volume %s: %s marked down", v->name, why);
			if (r < 0)
				break;
		}
		next = (next + 1) % v->nsv;
		for (int sv = 0; sv < v->nsv; sv++) {   /* the fullest subvolume's disk */
			struct disk *d = &v->disk[sv];
			if (d->total && (!fullest.total || (double)d->free / (double)d->total <
							     (double)fullest.free / (double)fullest.total))
				fullest = *d;
		}
		/* The unsigned probe is a second HEAD: on the rounds that check
		 * every subvolume (the first, and after the volume came back: a
		 * restarted volume may have lost its secret) and every 60th. */
		if (r >= 0 && volsign_on() && (every || atomic_load(&v->rounds) % 60 == 0))
			v->takes_unsigned = unsigned_accepted(v);
		if (r >= 0 && volsign_on() && v->takes_unsigned && !mis)
			mis = MISCONFIG_UNSIGNED;
		if (atomic_exchange(&v->misconfig, mis) != mis && mis)
			log_msg("volume %s: configuration error: %s", v->name, misconfig_why[mis]);
		atomic_store(&v->check_ns, now_ns() - t0);
		atomic_store(&v->disk_total, fullest.total);
		atomic_store(&v->disk_free, fullest.free);
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
	const char *host = strstr(url, "://") ? strstr(url, "://") + 3 : url;
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
	pthread_mutex_lock(&server_lock);
	snprintf(h->server, sizeof(h->server), "%s", v->server);
	pthread_mutex_unlock(&server_lock);
	h->version_differs = !strncmp(h->server, "mkv/", 4) && strcmp(h->server, mkv_server);
	h->misconfig = atomic_load(&v->misconfig);
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
		v->disk = xcalloc((size_t)v->nsv, sizeof(*v->disk));
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
