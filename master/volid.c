/* volid.c -- which disk a location is, whatever its spelling (store.h).
 *
 * A volume directory's marker ".mkv" (health.h) holds a line "id <32
 * hex>".  A marker without one (an older master's, or none yet) gets one
 * here: PUT, then read back -- one writer at a time in this process.
 * Another process (a command, a second master) may write its own id over
 * it a moment later (a volume has no create-only PUT, and a stalled one
 * takes a PUT long after it was sent): an id known here can be stale.  So
 * two ids that differ are read again before they count (vol_same): a
 * copy is deleted only for one on another disk, never on a stale id. */
#include "store.h"
#include "../common/httpc.h"
#include "../common/md5.h"
#include "../common/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define TIMEOUT_MS 5000L
#define RETRY_MS 10000      /* an id that could not be read is asked again after this */

static struct {
	pthread_mutex_t mu, write_mu;
	struct known {
		char *loc, id[VOL_ID_LEN + 1];   /* id "" when not known */
		uint64_t failed_at;               /* the last read that failed */
		bool told;                        /* said to be another name's disk */
	} *v;
	size_t n, cap;
	struct { size_t a, b; } *two;   /* entries read apart as two disks (vol_same) */
	size_t ntwo, captwo;
} ids = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, NULL, 0, 0};
static bool refused_told;   /* a 4xx (no secret, a skewed clock) is every directory's: said once */

/* GET url (a marker): 1 with its id, 0 when it has none (or is missing),
 * -1 with err when the volume did not say. */
static int read_marker(const char *url, char *id, char *err)
{
	struct buf b = {0};
	int st = httpc_do("GET", url, NULL, 0, TIMEOUT_MS, &b, 4096, err);
	const char *p = b.len > 3 && !memcmp(b.data, "id ", 3) ? b.data   /* at a line's start */
			: b.data ? memmem(b.data, b.len, "\nid ", 4) : NULL;
	int rc;
	p += p && *p == '\n';
	rc = st == 200 && p && b.data + b.len - p >= 3 + VOL_ID_LEN &&
		 strspn(p + 3, "0123456789abcdef") >= VOL_ID_LEN;
	if (rc)
		snprintf(id, VOL_ID_LEN + 1, "%s", p + 3);
	else if (st != 200 && st != 404)
		rc = -1;
	if (rc < 0 && st > 0)
		snprintf(err, 256, "its marker %s answered %d", url, st);
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
		pthread_mutex_lock(&ids.write_mu);
		if ((rc = read_marker(url, id, err)) == 0) {
			if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
				die("getrandom failed");
			md5_hex(r, sizeof(r), id);
			snprintf(body, sizeof(body), "mkv volume marker\nid %s\n", id);
			st = httpc_do("PUT", url, body, strlen(body), TIMEOUT_MS, NULL, 0, err);
			rc = st / 100 == 2 ? read_marker(url, id, err) : -1;
			if (st > 0 && rc <= 0)
				snprintf(err, 256, "its marker %s could not be written (%d)", url, st);
		}
		pthread_mutex_unlock(&ids.write_mu);
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
	if (ids.n == ids.cap)
		ids.v = xrealloc(ids.v, (ids.cap = ids.cap ? 2 * ids.cap : 64) * sizeof(*ids.v));
	ids.v[ids.n] = (struct known){.loc = xstrdup(loc)};
	return &ids.v[ids.n++];
}

/* loc's id as known (or ""); *failed: its last read failed a moment ago. */
static void id_known(const char *loc, char *id, bool *failed)
{
	pthread_mutex_lock(&ids.mu);
	snprintf(id, VOL_ID_LEN + 1, "%s", entry(loc)->id);
	if (failed)
		*failed = entry(loc)->failed_at && now_ms() - entry(loc)->failed_at < RETRY_MS;
	pthread_mutex_unlock(&ids.mu);
}

int vol_id(const char *loc, bool fresh, char *id)
{
	char err[256] = "no answer", was[VOL_ID_LEN + 1] = "";
	bool failed;
	int rc;
	id_known(loc, id, &failed);
	if (!fresh && (id[0] || failed))
		return id[0] ? 0 : -1;
	rc = fetch(loc, id, err);
	pthread_mutex_lock(&ids.mu);
	if (rc == 0) {
		struct known *e = entry(loc);
		if (e->id[0] && strcmp(e->id, id)) {
			snprintf(was, sizeof(was), "%s", e->id);
			ids.ntwo = 0;   /* which names are two disks: read again */
		}
		snprintf(e->id, VOL_ID_LEN + 1, "%s", id);
	} else {
		entry(loc)->failed_at = now_ms();
		id[0] = '\0';
	}
	pthread_mutex_unlock(&ids.mu);
	if (was[0])
		log_msg("volume %s: its marker's id is now %s, was %s (its disk swapped, or "
			"another process wrote the marker when it had none)", loc, id, was);
	if (rc < 0 && !failed && !(strstr(err, " answered 4") &&
				   __atomic_exchange_n(&refused_told, true, __ATOMIC_RELAXED)))
		log_msg("volume %s: its id cannot be read (%s): no copy there is deleted for "
			"another until it can", loc, err);
	return rc;
}

/* Were a and b read apart as two disks (with mark: they are now)? */
static bool two_disks(const char *a, const char *b, bool mark)
{
	size_t x, y, i;
	bool yes;
	pthread_mutex_lock(&ids.mu);
	x = (size_t)(entry(a) - ids.v), y = (size_t)(entry(b) - ids.v);
	for (i = 0; i < ids.ntwo; i++)
		if ((ids.two[i].a == x && ids.two[i].b == y) || (ids.two[i].a == y && ids.two[i].b == x))
			break;
	if ((yes = i < ids.ntwo || mark) && i == ids.ntwo) {
		if (ids.ntwo == ids.captwo)
			ids.two = xrealloc(ids.two, (ids.captwo = ids.captwo ? 2 * ids.captwo : 64) *
							    sizeof(*ids.two));
		ids.two[ids.ntwo].a = x;
		ids.two[ids.ntwo++].b = y;
	}
	pthread_mutex_unlock(&ids.mu);
	return yes;
}

static int one_disk(const char *a, const char *b, const char *id)
{
	bool told;
	pthread_mutex_lock(&ids.mu);   /* said once per directory */
	told = entry(strcmp(a, b) < 0 ? a : b)->told;
	entry(strcmp(a, b) < 0 ? a : b)->told = true;
	pthread_mutex_unlock(&ids.mu);
	if (!told)
		log_msg("volume %s is %s: one disk (its marker's id %s), so a copy on one is the "
			"copy on the other", a, b, id);
	return 1;
}

int vol_same(const char *a, const char *b)
{
	char ia[VOL_ID_LEN + 1], ib[VOL_ID_LEN + 1], again[VOL_ID_LEN + 1];
	if (!strcmp(a, b))
		return 1;
	if (vol_id(a, false, ia) < 0 || vol_id(b, false, ib) < 0)
		return -1;
	if (!strcmp(ia, ib))
		return one_disk(a, b, ia);
	if (two_disks(a, b, false))
		return 0;
	/* Either id may be stale: a, b and a again, read now.  A file holds
	 * one id at a time, and an id is replaced only by a new random one:
	 * a's unchanged around b's read, and not b's, is two files. */
	if (vol_id(a, true, ia) < 0 || vol_id(b, true, ib) < 0 || vol_id(a, true, again) < 0)
		return -1;
	if (!strcmp(ia, ib) || !strcmp(again, ib))
		return one_disk(a, b, ib);
	/* -1: its marker is being written now; else two disks from now on (0) */
	return strcmp(ia, again) ? -1 : !two_disks(a, b, true);
}

int vol_among(char *const *locs, int n, const char *loc)
{
	int rc = record_has_loc(locs, n, loc);   /* by name first: no request */
	for (int i = 0; i < n && rc < 1; i++) {
		int s = vol_same(locs[i], loc);
		rc = s ? s : rc;
	}
	return rc;
}

int vol_named(struct index *idx, const char *key, size_t klen, const char *loc)
{
	struct record r;
	size_t vlen;
	char *v = index_get(idx, key, klen, &vlen);
	int rc = !v ? 0 : record_parse(v, vlen, &r) < 0 ? -1 : vol_among(r.locs, r.nlocs, loc);
	free(v);
	return rc;
}

int vol_in(const struct config *cfg, const char *loc)
{
	size_t n = strcspn(loc, "/");
	int rc = 0;
	for (int i = 0; i < cfg->nvol && rc < 1; i++) {   /* the same name: no request */
		char name[LOC_MAX];
		int s;
		snprintf(name, sizeof(name), "%s%s", cfg->volumes[i], loc + n);
		rc = (s = vol_same(name, loc)) ? s : rc;
	}
	return rc;
}

int vol_check_names(const struct config *cfg, bool ask)
{
	char (*id)[VOL_ID_LEN + 1] = xcalloc((size_t)cfg->nvol, sizeof(*id)), dir[LOC_MAX];
	int rc = 0;
	for (int i = 0; i < cfg->nvol; i++) {   /* the directory a marker is sure to be in */
		snprintf(dir, sizeof(dir), "%s%s", cfg->volumes[i], cfg->subvolumes > 1 ? "/sv00" : "");
		if (ask)
			vol_id(dir, false, id[i]);
		else   /* what the health checks learned */
			id_known(dir, id[i], NULL);
		for (int j = 0; j < i && id[i][0] && !rc; j++)
			if (!strcmp(id[i], id[j])) {
				log_msg("-volumes names one volume twice: %s and %s (one disk: the "
					"same id %s in their markers); give each volume once",
					cfg->volumes[j], cfg->volumes[i], id[i]);
				rc = -1;
			}
	}
	free(id);
	return rc;
}
