/* volid.c -- which disk a location is, whatever its spelling (store.h).
 *
 * Every volume directory (a volume's root, or one subvolume's) holds the
 * marker ".mkv" (health.h).  Its first line is what every version wrote;
 * the line "id <32 hex>" names the directory.  A marker without one (an
 * older master's, or none yet on a new disk) gets one here: written with
 * a PUT and read back, one writer at a time in this process, so that two
 * of its names asked at once agree on what the disk says. */
#include "store.h"
#include "../common/httpc.h"
#include "../common/md5.h"
#include "../common/spawn.h"
#include "../common/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define TIMEOUT_MS 5000L
#define RETRY_MS 10000      /* an id that could not be read is asked again after this */
#define TOLD_MAX 64

struct known {
	char *loc;
	char id[VOL_ID_LEN + 1];   /* "" when not known */
	uint64_t failed_at;        /* the last read that failed */
};

static struct {
	pthread_mutex_t mu;
	struct known *v;
	size_t n, cap;
	char *told[TOLD_MAX];      /* "a b" pairs of volumes said to be one */
	int ntold;
} ids = {.mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_mutex_t write_mu = PTHREAD_MUTEX_INITIALIZER;

/* GET url (a marker): 1 with its id in id, 0 when it has none (or is
 * missing), -1 with err when the volume did not say. */
static int read_marker(const char *url, char *id, char *err)
{
	struct buf b = {0};
	int st = httpc_do("GET", url, NULL, 0, TIMEOUT_MS, &b, 4096, err), rc = -1;
	const char *p = b.data ? memmem(b.data, b.len, "\nid ", 4) : NULL;
	if (st == 200 && p && b.data + b.len - p >= 4 + VOL_ID_LEN &&
	    strspn(p + 4, "0123456789abcdef") >= VOL_ID_LEN) {
		snprintf(id, VOL_ID_LEN + 1, "%s", p + 4);
		rc = 1;
	} else if (st == 200 || st == 404) {
		rc = 0;
	} else if (st > 0) {
		snprintf(err, 256, "its marker %s answered %d", url, st);
	}
	buf_free(&b);
	return rc;
}

/* loc's id, its marker written first when it holds none: 0, or -1 with err. */
static int fetch(const char *loc, char *id, char *err)
{
	char *url = httpc_url(loc, "/.mkv"), body[64 + VOL_ID_LEN];
	unsigned char r[16];
	int rc = read_marker(url, id, err), st;
	if (rc == 0) {
		pthread_mutex_lock(&write_mu);
		if ((rc = read_marker(url, id, err)) == 0) {
			if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
				die("getrandom failed");
			md5_hex(r, sizeof(r), id);
			snprintf(body, sizeof(body), "mkv volume marker\nid %s\n", id);
			st = httpc_do("PUT", url, body, strlen(body), TIMEOUT_MS, NULL, 0, err);
			rc = st >= 200 && st < 300 ? read_marker(url, id, err) : -1;
			if (st > 0 && rc <= 0)
				snprintf(err, 256, "its marker %s could not be written (PUT: %d)", url,
					 st);
		}
		pthread_mutex_unlock(&write_mu);
	}
	free(url);
	return rc > 0 ? 0 : -1;
}

/* loc's entry (added when new); under ids.mu. */
static struct known *entry(const char *loc)
{
	for (size_t i = 0; i < ids.n; i++)
		if (!strcmp(ids.v[i].loc, loc))
			return &ids.v[i];
	if (ids.n == ids.cap) {
		ids.cap = ids.cap ? 2 * ids.cap : 64;
		ids.v = xrealloc(ids.v, ids.cap * sizeof(*ids.v));
	}
	ids.v[ids.n] = (struct known){.loc = xstrdup(loc)};
	return &ids.v[ids.n++];
}

int vol_id(const char *loc, bool fresh, char *id)
{
	char err[256] = "no answer";
	struct known *k;
	bool failed;
	int rc;
	pthread_mutex_lock(&ids.mu);
	k = entry(loc);
	snprintf(id, VOL_ID_LEN + 1, "%s", k->id);
	failed = k->failed_at && now_ms() - k->failed_at < RETRY_MS;
	pthread_mutex_unlock(&ids.mu);
	if (!fresh && (id[0] || failed))
		return id[0] ? 0 : -1;
	rc = fetch(loc, id, err);
	pthread_mutex_lock(&ids.mu);
	k = entry(loc);
	if (rc == 0)
		snprintf(k->id, sizeof(k->id), "%s", id);
	else
		k->failed_at = now_ms();
	pthread_mutex_unlock(&ids.mu);
	if (rc < 0 && !failed)
		log_msg("volume %s: its id cannot be read (%s): no copy there is deleted for "
			"another until it can", loc, err);
	return rc;
}

/* Say once per pair of volumes that two names are one. */
static void tell(const char *a, const char *b, const char *id)
{
	const char *x = strcmp(a, b) < 0 ? a : b, *y = x == a ? b : a;   /* either order */
	char *pair = xasprintf("%.*s %.*s", (int)strcspn(x, "/"), x, (int)strcspn(y, "/"), y);
	bool new = true;
	pthread_mutex_lock(&ids.mu);
	for (int i = 0; i < ids.ntold && new; i++)
		new = strcmp(ids.told[i], pair) != 0;
	if (new && ids.ntold < TOLD_MAX)
		ids.told[ids.ntold++] = pair;
	else
		new = false;
	pthread_mutex_unlock(&ids.mu);
	if (new)
		log_msg("volume %s is %s: one disk (its marker's id %s), so a copy on one is "
			"the copy on the other", a, b, id);
	else
		free(pair);
}

int vol_same(const char *a, const char *b)
{
	char ia[VOL_ID_LEN + 1], ib[VOL_ID_LEN + 1];
	if (!strcmp(a, b))
		return 1;
	if (vol_id(a, false, ia) < 0 || vol_id(b, false, ib) < 0)
		return -1;
	if (strcmp(ia, ib))
		return 0;
	tell(a, b, ia);
	return 1;
}

int vol_among(char *const *locs, int n, const char *loc)
{
	int rc = 0;
	if (record_has_loc(locs, n, loc))
		return 1;
	for (int i = 0; i < n && rc < 1; i++) {
		int s = vol_same(locs[i], loc);
		rc = s ? s : rc;
	}
	return rc;
}

int vol_in(const struct config *cfg, const char *loc)
{
	size_t n = strcspn(loc, "/");
	char **names = xcalloc((size_t)cfg->nvol, sizeof(*names));
	int rc = 0;
	for (int i = 0; i < cfg->nvol && !rc; i++)
		rc = strlen(cfg->volumes[i]) == n && !memcmp(cfg->volumes[i], loc, n);
	for (int i = 0; i < cfg->nvol && !rc; i++)
		names[i] = xasprintf("%s%s", cfg->volumes[i], loc + n);
	if (!rc)
		rc = vol_among(names, cfg->nvol, loc);
	for (int i = 0; i < cfg->nvol; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* ---- -volumes: two names for one volume? ---- */

static void read_one(void *ctx, void *item)
{
	char **dir = item, id[VOL_ID_LEN + 1];
	(void)ctx;
	vol_id(*dir, true, id);
}

int vol_check_names(const struct config *cfg)
{
	char **dir = xcalloc((size_t)cfg->nvol, sizeof(*dir)), a[VOL_ID_LEN + 1],
	     b[VOL_ID_LEN + 1];
	struct spawn_queue *q = spawn_queue(cfg->nvol < 32 ? cfg->nvol : 32, read_one, NULL);
	int rc = 0;
	for (int i = 0; i < cfg->nvol; i++) {   /* the directory a marker is sure to be in */
		dir[i] = xasprintf("%s%s", cfg->volumes[i], cfg->subvolumes > 1 ? "/sv00" : "");
		spawn_queue_push(q, &dir[i]);
	}
	spawn_queue_end(q);
	for (int i = 0; i < cfg->nvol && !rc; i++)
		for (int j = i + 1; j < cfg->nvol && !rc; j++)
			if (vol_id(dir[i], false, a) == 0 && vol_id(dir[j], false, b) == 0 &&
			    !strcmp(a, b)) {
				log_msg("-volumes names one volume twice: %s and %s (one disk: "
					"the same id %s in their markers); give each volume once",
					cfg->volumes[i], cfg->volumes[j], a);
				rc = -1;
			}
	for (int i = 0; i < cfg->nvol; i++)
		free(dir[i]);
	free(dir);
	return rc;
}
