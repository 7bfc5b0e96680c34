/* check_faults.c -- the store on its worst day:
 *   crash:     kill -9 a volume during 200 concurrent PUTs through the
 *              master, then kill -9 the master (after the load, then in a
 *              second round during it); restart both: every 201 reads back
 *              byte-identical, every 5xx or unanswered PUT is absent or
 *              whole, no acknowledged key is left unlinked.  Every PUT
 *              answered before the kill, and every answered one that did
 *              not write to the dead volume, was a 201.
 *   replace:   kill -9 the master mid-REPLACE with the copies differing:
 *              restarted, it serves one value, the old one, not a 404,
 *              and deletes the copy that differs (also where the record
 *              does not look: a key whose copies were not home).
 *   disk full: a volume on a 16 MiB tmpfs; PUTs until it fills answer 5xx
 *              naming the cause, earlier keys stay intact, a failed key is
 *              not visible.
 *   read-only: a volume whose filesystem turns read-only refuses writes,
 *              still answers 404 for a missing file, and serves reads.
 *   failed DELETE: a replica refuses (read-only, or a directory in the
 *              way): 500, the key unlinked (GET 404, in ?unlinked), and
 *              RELINK serves it again from the replica still there.
 *   hung:      a SIGSTOPped volume (mkv-volume, then nginx): once the
 *              checker marked it down, GETs and PUTs go around it.
 *   put timeout: a PUT to a SIGSTOPped volume the checker has not marked
 *              down answers 504 after -puttimeout, and is not visible.
 *   avail:     5 volumes, one down: 200 PUTs (replicas 3) succeed,
 *              unbalanced; `mkv rebalance` after it returns balances all.
 * Mounting needs root: without it the disk-full test says so and skips. */
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/placement.h"
#include "harness.h"

#define MAXVOL 5

/* ---- helpers ---- */

static char *body_of(int i, size_t n)
{
	unsigned seed = (unsigned)i * 2654435761u + 7;
	char *b = xmalloc(n);
	for (size_t j = 0; j < n; j++) {
		seed = seed * 1103515245u + 12345u;
		b[j] = (char)(seed >> 16);
	}
	return b;
}

static char *murl(const struct master *m, const char *key)
{
	return xasprintf("%s%s", m->base, key);
}

/* Wait until the master's checker has seen every volume (a PUT stops
 * answering 503), bounded. */
static void wait_cluster(const struct master *m)
{
	char *u = murl(m, "/probe-ready");
	long st = 0;
	for (int i = 0; i < 200; i++) {
		struct resp r;
		st = h_http("PUT", u, "x", 1, NULL, false, &r);
		h_resp_free(&r);
		if (st == 201 || st == 403)
			break;
		usleep(50000);
	}
	ck_assert_msg(st == 201 || st == 403, "cluster not ready: PUT gave %ld", st);
	free(u);
}

/* GET key through the master; 404 -> *found false.  Otherwise the value
 * must be exactly want[0..n) (when want is given), and each of its
 * replicas must hold it whole.  Retries while volumes come back (503). */
static void expect_value(const struct master *m, const char *key, const char *want, size_t n,
			 bool *found, char **balance)
{
	char *u = murl(m, key), *vols;
	struct resp r;
	long st = 0;
	for (int i = 0; i < 100; i++) {
		st = h_http("GET", u, NULL, 0, NULL, false, &r);
		if (st != 503)
			break;
		h_resp_free(&r);
		usleep(100000);
	}
	ck_assert_msg(st == 302 || st == 404, "GET %s: %ld", key, st);
	*found = st == 302;
	if (balance)
		*balance = h_header(&r, "Key-Balance");
	vols = h_header(&r, "Key-Volumes");
	h_resp_free(&r);
	if (*found) {
		char *path = xmalloc(PATH_MAX_LEN), *save = NULL;
		placement_path(key, strlen(key), path);
		ck_assert_ptr_nonnull(vols);
		for (char *v = strtok_r(vols, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
			char *bu = xasprintf("http://%s%s", v, path);
			struct resp b;
			long bs = h_http("GET", bu, NULL, 0, NULL, false, &b);
			ck_assert_msg(bs == 200, "%s: replica %s answers %ld", key, v, bs);
			if (want)
				ck_assert_msg(b.body.len == n && !memcmp(b.body.data, want, n),
					      "%s: replica %s holds %zu bytes that are not the %zu "
					      "acknowledged", key, v, b.body.len, n);
			else
				ck_assert_msg(b.body.len == n, "%s: replica %s holds %zu of %zu bytes "
					      "(partial)", key, v, b.body.len, n);
			h_resp_free(&b);
			free(bu);
		}
		free(path);
	}
	free(vols);
	free(u);
}

/* Is one of key's first `replicas` places on vols[which]? */
static bool places_on(const char *key, const struct vol *vols, int nvol, int replicas, int which)
{
	char *names[MAXVOL], locs[MAXVOL][LOC_MAX];
	size_t l = strlen(vols[which].name);
	int n;
	for (int i = 0; i < nvol; i++)
		names[i] = vols[i].name;
	n = placement_volumes(key, strlen(key), names, nvol, replicas, 10, locs);
	for (int i = 0; i < n; i++)
		if (!strncmp(locs[i], vols[which].name, l) && (locs[i][l] == '/' || !locs[i][l]))
			return true;
	return false;
}

/* ---- crash: kill -9 a volume during PUTs, then the master ---- */

#define NPUT 200
#define PUT_SIZE (64 * 1024)

struct job {
	char key[64];
	char *data;
	size_t off;
	long status;
	char err[CURL_ERROR_SIZE];
	char why[256];         /* the answer's body (a reason, for a 5xx) */
	size_t whylen;
	bool early;            /* answered before any fault */
};

static size_t job_read(char *p, size_t s, size_t n, void *ud)
{
	struct job *j = ud;
	size_t len = s * n < PUT_SIZE - j->off ? s * n : PUT_SIZE - j->off;
	memcpy(p, j->data + j->off, len);
	j->off += len;
	return len;
}

static size_t big_read(char *p, size_t s, size_t n, void *ud)
{
	struct job *j = ud;
	size_t left = (64u << 20) - j->off, len = s * n < left ? s * n : left;
	memcpy(p, j->data + j->off, len);
	j->off += len;
	return len;
}

static size_t job_discard(char *p, size_t s, size_t n, void *ud)
{
	struct job *j = ud;
	size_t room = sizeof(j->why) - 1 - j->whylen, len = s * n < room ? s * n : room;
	memcpy(j->why + j->whylen, p, len);
	j->whylen += len;
	return s * n;
}

/* SIGSTOP pid's group, and wait until pid is stopped: kill returns before
 * the signal takes effect, and a volume busy on the other core could
 * still answer a request sent at once (seen under load: a PUT to a
 * "hung" volume answered 201 in 4 ms). */
static void stop_group(pid_t pid)
{
	char path[64], st[512];
	ck_assert_int_eq(kill(-pid, SIGSTOP), 0);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (uint64_t end = now_ms() + 10000; now_ms() < end; usleep(2000)) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(st, 1, sizeof(st) - 1, f) : 0;
		char *c;
		if (f)
			fclose(f);
		st[n] = '\0';
		if ((c = strrchr(st, ')')) && (c[2] == 'T' || c[2] == 't'))
			return;
	}
	ck_abort_msg("volume %d did not stop", (int)pid);
}

START_TEST(test_crash_during_puts)
{
	static const char *const flags[] = {"-replicas", "2", "-voltimeout", "500ms",
					    "-puttimeout", "5s", NULL};
	struct vol vols[4];
	struct master m = {0};
	struct job *jobs = xcalloc(NPUT, sizeof(*jobs));
	CURLM *multi = curl_multi_init();
	int running = 1, done = 0, ok = 0, failed = 0, lost = 0, visible_lost = 0, early = 0;
	bool killed = false;

	for (int i = 0; i < 4; i++)
		h_vol_start(&vols[i], VOL_MKV);
	h_master_start(&m, vols, 4, flags);
	wait_cluster(&m);

	curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 32L);
	for (int i = 0; i < NPUT; i++) {
		struct job *j = &jobs[i];
		CURL *c = curl_easy_init();
		char *u;
		snprintf(j->key, sizeof(j->key), "/crash/%d-%d-%d", (int)getpid(), _i, i);
		j->data = body_of(i, PUT_SIZE);
		u = murl(&m, j->key);
		curl_easy_setopt(c, CURLOPT_URL, u);
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, job_read);
		curl_easy_setopt(c, CURLOPT_READDATA, j);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)PUT_SIZE);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, job_discard);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, j);
		curl_easy_setopt(c, CURLOPT_PRIVATE, j);
		curl_easy_setopt(c, CURLOPT_ERRORBUFFER, j->err);
		curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_multi_add_handle(multi, c);
		free(u);
	}
	while (running) {
		CURLMsg *msg;
		int q;
		curl_multi_perform(multi, &running);
		while ((msg = curl_multi_info_read(multi, &q))) {
			struct job *j;
			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&j);
			j->status = -1;
			if (msg->data.result == CURLE_OK)
				curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &j->status);
			j->early = !killed;
			curl_multi_remove_handle(multi, msg->easy_handle);
			curl_easy_cleanup(msg->easy_handle);
			done++;
		}
		if (!killed && done >= NPUT / 4) {
			h_stop(vols[1].pid, SIGKILL);   /* mid-load */
			vols[1].pid = 0;
			killed = true;
		}
		if (_i == 1 && m.pid && done >= NPUT * 3 / 5) {
			h_stop(m.pid, SIGKILL);         /* the master too, mid-load */
			m.pid = 0;
		}
		curl_multi_poll(multi, NULL, 0, 100, NULL);
	}
	curl_multi_cleanup(multi);
	h_stop(m.pid, SIGKILL);                 /* (round 0: after the load) */
	m.pid = 0;

	/* Enough were acknowledged: every PUT answered before the volume died,
	 * and every answered PUT that did not write to it (about half: the
	 * master was up until it answered). */
	for (int i = 0; i < NPUT; i++) {
		struct job *j = &jobs[i];
		if (j->early)
			early++;
		if (j->early || (j->status != -1 && !places_on(j->key, vols, 4, 2, 1)))
			ck_assert_msg(j->status == 201, "%s: PUT answered %ld (%s) with its volumes "
				      "up", j->key, j->status, j->status == -1 ? j->err : j->why);
	}
	ck_assert_msg(early >= NPUT / 4, "only %d PUTs answered before the kill", early);

	h_vol_respawn(&vols[1]);
	h_master_restart(&m, vols, 4, flags);
	wait_cluster(&m);
	for (int i = 0; i < NPUT; i++) {
		bool found;
		if (jobs[i].status == 201) {
			expect_value(&m, jobs[i].key, jobs[i].data, PUT_SIZE, &found, NULL);
			ck_assert_msg(found, "%s was acknowledged (201) and is gone", jobs[i].key);
			ok++;
		} else {
			ck_assert_msg(jobs[i].status >= 500 || jobs[i].status == -1,
				      "%s: PUT answered %ld", jobs[i].key, jobs[i].status);
			/* docs/protocol.md §4: a 5xx leaves the key invisible.  -1 (no answer:
			 * the master was killed, or hung up after answering early):
			 * absent, or complete on every replica it names. */
			expect_value(&m, jobs[i].key, jobs[i].data, PUT_SIZE, &found, NULL);
			if (jobs[i].status >= 500)
				ck_assert_msg(!found, "%s answered %ld (%s) but is visible", jobs[i].key,
					      jobs[i].status, jobs[i].why);
			failed += jobs[i].status >= 500;
			lost += jobs[i].status == -1;
			visible_lost += found;
		}
	}
	/* An acknowledged key is never left unlinked (a crash mid-PUT may
	 * leave DELETED records, findable here, of keys not acknowledged). */
	{
		char *u = xasprintf("%s/crash/%d-?unlinked", m.base, (int)getpid());
		struct resp r;
		int unl = 0;
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
		for (int i = 0; i < NPUT; i++) {
			char *q = xasprintf("\"%s\"", jobs[i].key);
			if (strstr(r.body.data, q)) {
				ck_assert_msg(jobs[i].status != 201, "%s acknowledged but unlinked",
					      jobs[i].key);
				unl++;
			}
			free(q);
		}
		fprintf(stderr, "crash round %d: %d left unlinked (findable orphans)\n", _i, unl);
		h_resp_free(&r);
		free(u);
	}
	fprintf(stderr, "crash round %d (%s): %d PUTs: %d acknowledged and intact (%d before "
		"the kill), %d 5xx and absent, %d without an answer (%d of them whole and "
		"visible)\n", _i, _i ? "master killed mid-load" : "master killed after the load",
		NPUT, ok, early, failed, lost, visible_lost);
	if (lost && _i == 0) {     /* why did the master hang up? show its log */
		char *cmd = xasprintf("grep -v '^    #[1-9]' %s | grep -iE 'error|sanitizer|signal' "
				      "| head -20 >&2", m.log);
		if (system(cmd) != 0)
			fprintf(stderr, "crash: nothing in %s\n", m.log);
		free(cmd);
	}
	for (int i = 0; i < NPUT; i++)
		free(jobs[i].data);
	free(jobs);
	h_master_stop(&m);
	for (int i = 0; i < 4; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* ---- a REPLACE cut short by a crash ---- */

/* docs/protocol.md §4: an acknowledged value reads back while a replica
 * holds it; a REPLACE that was never answered leaves the old value or the
 * new, not a missing key.  One replica takes the new bytes, the other
 * hangs; the master and that volume are killed.  Restarted, the master
 * serves the old value from the copy that still holds it (it unlinked
 * the key: GET 404). */
START_TEST(test_crash_during_replace)
{
	static const char *const flags[] = {"-replicas", "2", "-voltimeout", "500ms",
					    "-puttimeout", "30s", NULL};
	struct vol vols[2];
	struct master m = {0};
	char *u, *old = body_of(1, 1000), *nu = body_of(2, 1000), path[PATH_MAX_LEN];
	bool found, took = false;
	struct resp r;
	pid_t child;
	char *bu = NULL;        /* the copy on vols[0] */

	for (int i = 0; i < 2; i++)
		h_vol_start(&vols[i], VOL_MKV);
	h_master_start(&m, vols, 2, flags);
	wait_cluster(&m);
	u = murl(&m, "/replace-cut");
	placement_path("/replace-cut", 12, path);
	ck_assert_int_eq(h_http("PUT", u, old, 1000, NULL, false, &r), 201);
	h_resp_free(&r);
	stop_group(vols[1].pid);
	child = fork();
	if (child == 0) {
		h_http("REPLACE", u, nu, 1000, NULL, false, &r);
		_exit(0);
	}
	{       /* wait until the new bytes are on vols[0] */
		char *names[2] = {vols[0].name, vols[1].name}, locs[2][LOC_MAX];
		placement_volumes("/replace-cut", 12, names, 2, 2, 10, locs);
		for (int i = 0; i < 2; i++)
			if (!strncmp(locs[i], names[0], strlen(names[0])))
				bu = xasprintf("http://%s%s", locs[i], path);
		ck_assert_ptr_nonnull(bu);
		for (int i = 0; i < 200 && !took; i++) {
			took = h_http("GET", bu, NULL, 0, NULL, false, &r) == 200 &&
			       r.body.len == 1000 && !memcmp(r.body.data, nu, 1000);
			h_resp_free(&r);
			usleep(20000);
		}
	}
	ck_assert_msg(took, "the REPLACE never reached the running volume");
	h_stop(m.pid, SIGKILL);
	m.pid = 0;
	waitpid(child, NULL, 0);
	h_stop(vols[1].pid, SIGKILL);   /* the hung one never took the new bytes */
	vols[1].pid = 0;
	h_vol_respawn(&vols[1]);
	h_master_restart(&m, vols, 2, flags);
	wait_cluster(&m);
	expect_value(&m, "/replace-cut", old, 1000, &found, NULL);
	ck_assert_msg(found, "a REPLACE cut short by a crash lost the acknowledged value "
		      "(GET 404; master log %s)", m.log);
	/* and the copy that differs is gone: a rebuild cannot bring it back */
	ck_assert_int_eq(h_http("GET", bu, NULL, 0, NULL, false, &r), 404);
	h_resp_free(&r);
	free(u), free(old), free(nu), free(bu);
	h_master_stop(&m);
	for (int i = 0; i < 2; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* The same on a key whose copies were not home (a volume was down at its
 * PUT): the REPLACE writes home, so its new bytes land where the record
 * does not look.  Restarted, the master serves the old value and deletes
 * the new copy there too, which a rebuild would otherwise take back. */
static bool on_vol(const char *loc, const char *name);
static char *key_placed(const char *stem, char **names, int nvol, int replicas, const char *name,
			bool want_on, int *counter);

START_TEST(test_crash_during_replace_away)
{
	static const char *const flags[] = {"-replicas", "2", "-voltimeout", "300ms",
					    "-puttimeout", "30s", NULL};
	struct vol vols[3];
	struct master m = {0};
	char *names[3], locs[2][LOC_MAX], *key, *u, *home1 = NULL, path[PATH_MAX_LEN];
	char *old = body_of(3, 1000), *nu = body_of(4, 1000), *vl;
	int counter = 0;
	bool found, took = false;
	struct resp r;
	pid_t child;

	for (int i = 0; i < 3; i++) {
		h_vol_start(&vols[i], VOL_MKV);
		names[i] = vols[i].name;
	}
	h_master_start(&m, vols, 3, flags);
	wait_cluster(&m);
	key = key_placed("away", names, 3, 2, names[2], false, &counter); /* home: 0 and 1 */
	placement_volumes(key, strlen(key), names, 3, 2, 10, locs);
	placement_path(key, strlen(key), path);
	for (int i = 0; i < 2; i++)
		if (on_vol(locs[i], names[1]))
			home1 = xasprintf("http://%s%s", locs[i], path);
	ck_assert_ptr_nonnull(home1);
	u = murl(&m, key);
	h_vol_down(&vols[1]);   /* down at the PUT: its copy goes to vols[2] */
	{
		char *k = key_placed("away-probe", names, 3, 2, names[1], true, &counter);
		char *pu = murl(&m, k);
		long st = 0;
		for (int i = 0; i < 100 && st != 201; i++) {
			st = h_http("PUT", pu, "x", 1, NULL, false, &r);
			h_resp_free(&r);
			usleep(100000);
		}
		ck_assert_int_eq(st, 201);
		free(pu), free(k);
	}
	ck_assert_int_eq(h_http("PUT", u, old, 1000, NULL, false, &r), 201);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("HEAD", u, NULL, 0, NULL, false, &r), 302);
	vl = h_header(&r, "Key-Volumes");
	h_resp_free(&r);
	ck_assert_ptr_null(strstr(vl, names[1]));
	free(vl);
	h_vol_respawn(&vols[1]);
	{       /* until the master sees it up: a new key homed there is balanced */
		char *bal = NULL;
		for (int i = 0; i < 100 && !(bal && !strcmp(bal, "balanced")); i++) {
			char *k = key_placed("away-up", names, 3, 2, names[1], true, &counter);
			char *pu = murl(&m, k);
			free(bal);
			bal = NULL;
			if (h_http("PUT", pu, "x", 1, NULL, false, &r) == 201) {
				h_resp_free(&r);
				h_http("HEAD", pu, NULL, 0, NULL, false, &r);
				bal = h_header(&r, "Key-Balance");
			}
			h_resp_free(&r);
			free(pu), free(k);
			usleep(100000);
		}
		ck_assert_msg(bal && !strcmp(bal, "balanced"), "vols[1] never came back up");
		free(bal);
	}
	/* REPLACE: vols[0] hangs, vols[1] takes the new bytes */
	stop_group(vols[0].pid);
	child = fork();
	if (child == 0) {
		h_http("REPLACE", u, nu, 1000, NULL, false, &r);
		_exit(0);
	}
	for (int i = 0; i < 200 && !took; i++) {
		took = h_http("GET", home1, NULL, 0, NULL, false, &r) == 200 && r.body.len == 1000 &&
		       !memcmp(r.body.data, nu, 1000);
		h_resp_free(&r);
		usleep(20000);
	}
	ck_assert_msg(took, "the REPLACE never reached vols[1]");
	h_stop(m.pid, SIGKILL);
	m.pid = 0;
	waitpid(child, NULL, 0);
	h_stop(vols[0].pid, SIGKILL);
	vols[0].pid = 0;
	h_vol_respawn(&vols[0]);
	h_master_restart(&m, vols, 3, flags);
	wait_cluster(&m);
	expect_value(&m, key, old, 1000, &found, NULL);
	ck_assert_msg(found, "%s: a REPLACE cut short lost the acknowledged value", key);
	ck_assert_int_eq(h_http("GET", home1, NULL, 0, NULL, false, &r), 404);
	h_resp_free(&r);
	free(u), free(old), free(nu), free(home1), free(key);
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* ---- a failed PUT is answered ---- */

/* A volume dies in the middle of a large PUT: the client gets the 5xx and
 * its reason (docs/protocol.md §4), not a reset connection.  (The master answers
 * before the body is all in; closing the socket then with unread bytes
 * makes the kernel send RST, which can destroy the answer before the
 * client reads it -- nginx drains for this, its lingering_close.) */
START_TEST(test_failed_put_answered)
{
	enum { SZ = 64 << 20 };
	static const char *const flags[] = {"-replicas", "3", "-voltimeout", "500ms",
					    "-puttimeout", "5s", NULL};
	struct vol vols[3];
	struct master m = {0};
	struct job j = {0};
	CURL *c = curl_easy_init();
	CURLM *multi = curl_multi_init();
	int running = 1;
	bool killed = false;
	CURLcode res = CURLE_OK;
	char *u;
	uint64_t t0;

	for (int i = 0; i < 3; i++)
		h_vol_start(&vols[i], VOL_MKV);
	h_master_start(&m, vols, 3, flags);
	wait_cluster(&m);
	j.data = body_of(1, SZ);
	snprintf(j.key, sizeof(j.key), "/answered/%d", (int)getpid());
	u = murl(&m, j.key);
	curl_easy_setopt(c, CURLOPT_URL, u);
	curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, big_read);
	curl_easy_setopt(c, CURLOPT_READDATA, &j);
	curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)SZ);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, job_discard);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &j);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, j.err);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_MAX_SEND_SPEED_LARGE, (curl_off_t)(32 << 20));
	curl_multi_add_handle(multi, c);
	t0 = now_ms();
	while (running) {
		CURLMsg *msg;
		int q;
		curl_off_t up = 0;
		curl_multi_perform(multi, &running);
		while ((msg = curl_multi_info_read(multi, &q)))
			if (msg->msg == CURLMSG_DONE)
				res = msg->data.result;
		curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &up);
		if (!killed && up > 8 << 20) {
			h_stop(vols[0].pid, SIGKILL);
			vols[0].pid = 0;
			killed = true;
		}
		curl_multi_poll(multi, NULL, 0, 50, NULL);
	}
	if (res == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &j.status);
	fprintf(stderr, "answered: a PUT cut by a dead volume: %s %ld after %llu ms: %s\n",
		res == CURLE_OK ? "status" : "transport error", j.status,
		(unsigned long long)(now_ms() - t0), res == CURLE_OK ? j.why : j.err);
	ck_assert_msg(killed, "the PUT finished before the volume could be killed");
	ck_assert_msg(res == CURLE_OK, "the client got no answer (%s), want a 5xx with the reason",
		      j.err);
	ck_assert_msg(j.status >= 500 && j.whylen > 0, "PUT with a replica dead: %ld %s",
		      j.status, j.why);
	curl_multi_remove_handle(multi, c);
	curl_easy_cleanup(c);
	curl_multi_cleanup(multi);
	free(u);
	free(j.data);
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* ---- disk full ---- */

static char *mnt;          /* the tmpfs mount point, or NULL */
static char mount_err[256];

static void mount_small(void)
{
	char *tmp = h_tmpdir();
	mnt = xasprintf("%s/small", tmp);
	free(tmp);
	mkdir(mnt, 0755);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=16m") < 0) {
		snprintf(mount_err, sizeof(mount_err), "mount -t tmpfs -o size=16m tmpfs %s: %s",
			 mnt, strerror(errno));
		rmdir(mnt);
		free(mnt);
		mnt = NULL;
	}
}

static void umount_small(void)
{
	char *parent;
	if (!mnt)
		return;
	if (umount(mnt) < 0)
		umount2(mnt, MNT_DETACH);   /* a server still dying holds it */
	rmdir(mnt);
	parent = xstrdup(mnt);
	*strrchr(parent, '/') = '\0';
	rmdir(parent);
	free(parent);
	free(mnt);
	mnt = NULL;
}

/* Is the answer a 5xx that says the disk is full? */
static bool says_full(long st, const struct resp *r)
{
	return st >= 500 && (st == 507 || strcasestr(r->body.data, "space") ||
			     strcasestr(r->body.data, "storage") || strstr(r->body.data, "507"));
}

START_TEST(test_disk_full)
{
	enum { MAXPUT = 40, SZ = 1 << 20 };
	struct vol v;
	struct master m = {0};
	const char *old = getenv("TMPDIR");
	char *saved = old ? xstrdup(old) : NULL, *keys[MAXPUT], *bodies[MAXPUT];
	static const char *const flags[] = {"-replicas", "1", "-voltimeout", "500ms", NULL};
	int n = 0, first_fail = -1;
	long st = 0;
	struct resp r;

	if (!mnt) {
		fprintf(stderr, "disk full: SKIPPED: %s\n", mount_err);
		ck_assert_msg(geteuid() != 0, "cannot mount a small tmpfs as root: %s", mount_err);
		return;
	}
	/* The volume's data directory on the small filesystem. */
	setenv("TMPDIR", mnt, 1);
	h_vol_start(&v, VOL_MKV);
	if (saved)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	h_master_start(&m, &v, 1, flags);
	wait_cluster(&m);

	/* Straight to the volume first: 507, nothing left behind. */
	for (int i = 0; i < MAXPUT; i++) {
		char *u = xasprintf("http://%s/direct/%d", v.name, i), *b = body_of(i, SZ);
		st = h_http("PUT", u, b, SZ, NULL, false, &r);
		if (st != 201) {
			ck_assert_msg(says_full(st, &r), "volume PUT on a full disk: %ld %s", st,
				      r.body.data);
			h_resp_free(&r);
			ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 404);
			h_resp_free(&r);
			free(u), free(b);
			break;
		}
		h_resp_free(&r);
		free(u), free(b);
	}
	ck_assert_msg(st != 201, "16 MiB took %d MiB: the filesystem never filled", MAXPUT);
	for (int i = 0; i < MAXPUT; i++) {      /* room again for the master's turn */
		char *u = xasprintf("http://%s/direct/%d", v.name, i);
		h_http("DELETE", u, NULL, 0, NULL, false, &r);
		h_resp_free(&r);
		free(u);
	}

	/* Through the master. */
	for (; n < MAXPUT; n++) {
		char *u;
		keys[n] = xasprintf("/full/%d-%d", (int)getpid(), n);
		bodies[n] = body_of(n + 1000, SZ);
		u = murl(&m, keys[n]);
		st = h_http("PUT", u, bodies[n], SZ, NULL, false, &r);
		free(u);
		if (st != 201) {
			ck_assert_msg(says_full(st, &r), "PUT on a full disk: %ld, reason \"%s\" "
				      "does not name the cause", st, r.body.data);
			fprintf(stderr, "disk full: PUT %d answered %ld: %s", n, st, r.body.data);
			first_fail = n++;
			h_resp_free(&r);
			break;
		}
		h_resp_free(&r);
	}
	ck_assert_msg(first_fail >= 0, "the filesystem never filled");
	for (int i = 0; i < n; i++) {
		bool found;
		expect_value(&m, keys[i], bodies[i], SZ, &found, NULL);
		if (i == first_fail)
			ck_assert_msg(!found, "%s failed (disk full) but is visible", keys[i]);
		else
			ck_assert_msg(found, "%s (stored before the disk filled) is gone", keys[i]);
	}
	/* Once space is freed, writes work again: nothing leaked it. */
	{
		char *u = murl(&m, keys[0]), *k = xasprintf("/full/after-%d", (int)getpid());
		ck_assert_int_eq(h_http("DELETE", u, NULL, 0, NULL, false, &r), 204);
		h_resp_free(&r);
		free(u);
		u = murl(&m, k);
		st = h_http("PUT", u, bodies[0], SZ, NULL, false, &r);
		ck_assert_msg(st == 201, "PUT after freeing 1 MiB: %ld %s", st, r.body.data);
		h_resp_free(&r);
		free(u);
		free(k);
	}
	for (int i = 0; i < n; i++)
		free(keys[i]), free(bodies[i]);
	h_master_stop(&m);
	h_vol_stop(&v);
	free(saved);
}
END_TEST

/* ---- a read-only volume ---- */

/* The volume's filesystem turns read-only: a PUT or a DELETE of a file
 * there fails with 5xx, a DELETE of a file that is not there is still 404
 * (docs/protocol.md §5, as nginx answers: the master's cleanup of a
 * failed PUT counts on it), and reads go on. */
START_TEST(test_read_only)
{
	struct vol v;
	char *u, *gone;
	struct resp r;
	long st;

	h_vol_start(&v, VOL_MKV);
	h_vol_down(&v);
	/* The data directory becomes a mount of its own (its log stays
	 * outside), so that it alone can turn read-only. */
	if (mount(v.dir, v.dir, NULL, MS_BIND, NULL) < 0) {
		fprintf(stderr, "read-only: SKIPPED: bind mount: %s\n", strerror(errno));
		ck_assert_msg(geteuid() != 0, "cannot bind mount as root: %s", strerror(errno));
		h_vol_stop(&v);
		return;
	}
	h_vol_respawn(&v);
	u = xasprintf("http://%s/ab/cd/kept", v.name);
	gone = xasprintf("http://%s/ab/cd/never", v.name);
	ck_assert_int_eq(h_http("PUT", u, "value", 5, NULL, false, &r), 201);
	h_resp_free(&r);
	ck_assert_msg(mount(NULL, v.dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) == 0,
		      "remount %s read-only: %s", v.dir, strerror(errno));
	st = h_http("DELETE", gone, NULL, 0, NULL, false, &r);
	ck_assert_msg(st == 404, "DELETE of a missing file on a read-only volume: %ld", st);
	h_resp_free(&r);
	ck_assert_int_ge(h_http("DELETE", u, NULL, 0, NULL, false, &r), 500);
	h_resp_free(&r);
	ck_assert_int_ge(h_http("PUT", gone, "x", 1, NULL, false, &r), 500);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	ck_assert(r.body.len == 5 && !memcmp(r.body.data, "value", 5));
	h_resp_free(&r);
	h_vol_down(&v);
	umount2(v.dir, MNT_DETACH);
	h_vol_stop(&v);
	free(u), free(gone);
}
END_TEST

/* A volume whose marker has no id yet (an older master's) and cannot get
 * one (its filesystem read-only) still serves: only the deletes that need
 * its id wait for it, and the master says why (it was marked down, and
 * every read of its keys got 503). */
START_TEST(test_read_only_old_marker)
{
	static const char *const flags[] = {"-replicas", "1", "-subvolumes", "1", NULL};
	struct vol v;
	struct master m = {0};
	struct resp r;
	char *u, *marker, *log;
	long st = 0;
	FILE *f;
	h_vol_start(&v, VOL_MKV);
	h_vol_down(&v);
	if (mount(v.dir, v.dir, NULL, MS_BIND, NULL) < 0) {
		fprintf(stderr, "read-only, old marker: SKIPPED: bind mount: %s\n", strerror(errno));
		ck_assert_msg(geteuid() != 0, "cannot bind mount as root: %s", strerror(errno));
		h_vol_stop(&v);
		return;
	}
	h_vol_respawn(&v);
	h_master_start(&m, &v, 1, flags);
	wait_cluster(&m);
	u = murl(&m, "/ro-old-marker");
	ck_assert_int_eq(h_http("PUT", u, "kept", 4, NULL, false, &r), 201);
	h_resp_free(&r);
	h_master_down(&m);
	marker = xasprintf("%s/.mkv", v.dir);   /* as masters before the id wrote it */
	ck_assert((f = fopen(marker, "w")) != NULL);
	fputs("mkv volume marker\n", f);
	fclose(f);
	ck_assert_msg(mount(NULL, v.dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) == 0,
		      "remount %s read-only: %s", v.dir, strerror(errno));
	h_master_restart(&m, &v, 1, flags);
	for (uint64_t end = now_ms() + 20000; now_ms() < end; usleep(50000)) {
		st = h_http("GET", u, NULL, 0, NULL, true, &r);
		if (st == 200)
			break;
		h_resp_free(&r);
	}
	ck_assert_msg(st == 200, "GET of a key on a volume whose marker cannot get an id: %ld", st);
	ck_assert(r.body.len == 4 && !memcmp(r.body.data, "kept", 4));
	h_resp_free(&r);
	log = h_read_file(m.log);
	ck_assert_msg(log && strstr(log, "its id cannot be read"), "the master did not say why");
	free(log);
	h_master_stop(&m);
	h_vol_down(&v);
	umount2(v.dir, MNT_DETACH);
	h_vol_stop(&v);
	free(u), free(marker);
}
END_TEST

/* ---- a DELETE that a volume refuses ---- */

/* README: DELETE answers "500 if a volume refused (the key stays
 * unlinked, so nothing is served)"; docs/operations.md: RELINK brings
 * such a key back naming only the replicas still there.  One of two
 * replicas refuses: its filesystem read-only (_i 0: it answers 500; needs
 * root), or a directory in the blob's place (_i 1: 409), put back before
 * the RELINK.  (A hung volume is no refusal: the DELETE the master gave
 * up on still lands when it wakes.) */
START_TEST(test_failed_delete)
{
	static const char *const flags[] = {"-replicas", "2", "-voltimeout", "500ms", NULL};
	struct vol vols[2];
	struct master m = {0};
	char *key = xasprintf("/refused-%d-%d", (int)getpid(), _i), *u, *lu, *vl, *bal;
	char *copy[2] = {NULL, NULL}, path[PATH_MAX_LEN], *val = body_of(9, 3000);
	char *file = NULL, *aside = NULL, *sub = NULL;
	bool found, mounted = false;
	struct resp r;
	long st;

	for (int i = 0; i < 2; i++)
		h_vol_start(&vols[i], VOL_MKV);
	if (_i == 0) {   /* vols[1]'s data directory, a mount of its own */
		h_vol_down(&vols[1]);
		if (mount(vols[1].dir, vols[1].dir, NULL, MS_BIND, NULL) < 0) {
			fprintf(stderr, "failed DELETE (read-only): SKIPPED: bind mount: %s\n",
				strerror(errno));
			ck_assert_msg(geteuid() != 0, "cannot bind mount as root: %s",
				      strerror(errno));
			for (int i = 0; i < 2; i++)
				h_vol_stop(&vols[i]);
			free(key), free(val);
			return;
		}
		mounted = true;
		h_vol_respawn(&vols[1]);
	}
	h_master_start(&m, vols, 2, flags);
	wait_cluster(&m);
	u = murl(&m, key);
	placement_path(key, strlen(key), path);
	/* 503 while a check slowed by a loaded machine has a volume down */
	for (int i = 0; (st = h_http("PUT", u, val, 3000, NULL, false, &r)) == 503 && i < 100; i++) {
		h_resp_free(&r);
		usleep(100000);
	}
	ck_assert_int_eq(st, 201);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("HEAD", u, NULL, 0, NULL, false, &r), 302);
	vl = h_header(&r, "Key-Volumes");
	h_resp_free(&r);
	{
		char *save = NULL;
		for (char *v = strtok_r(vl, ",", &save); v; v = strtok_r(NULL, ",", &save))
			copy[on_vol(v, vols[1].name)] = xasprintf("http://%s%s", v, path);
	}
	free(vl);
	ck_assert_msg(copy[0] && copy[1], "the key is not on both volumes");

	if (_i == 0) {
		ck_assert_msg(mount(NULL, vols[1].dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY,
				    NULL) == 0, "remount %s read-only: %s", vols[1].dir,
			      strerror(errno));
	} else {         /* the blob's place, "host:port/svNN/..." on disk */
		file = xasprintf("%s%s", vols[1].dir, strchr(copy[1] + strlen("http://"), '/'));
		aside = xasprintf("%s.aside", file);
		sub = xasprintf("%s/x", file);
		ck_assert_msg(rename(file, aside) == 0 && mkdir(file, 0755) == 0 &&
			      mkdir(sub, 0755) == 0, "%s: %s", file, strerror(errno));
	}
	st = h_http("DELETE", u, NULL, 0, NULL, false, &r);
	fprintf(stderr, "failed DELETE (%s): %ld %s", _i ? "a directory in the way" : "read-only",
		st, r.body.data);
	ck_assert_msg(st == 500, "DELETE with a replica that refuses: %ld %s", st, r.body.data);
	h_resp_free(&r);
	if (_i == 1)
		ck_assert_msg(rmdir(sub) == 0 && rmdir(file) == 0 && rename(aside, file) == 0,
			      "%s: %s", file, strerror(errno));
	/* unlinked: not served, not listed, listed as unlinked */
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 404);
	h_resp_free(&r);
	lu = xasprintf("%s/refused-?list", m.base);
	ck_assert_int_eq(h_http("GET", lu, NULL, 0, NULL, false, &r), 200);
	ck_assert_msg(!strstr(r.body.data, key), "an unlinked key is listed: %s", r.body.data);
	h_resp_free(&r);
	free(lu);
	lu = xasprintf("%s/refused-?unlinked", m.base);
	ck_assert_int_eq(h_http("GET", lu, NULL, 0, NULL, false, &r), 200);
	ck_assert_msg(strstr(r.body.data, key), "the key is not listed ?unlinked: %s",
		      r.body.data);
	h_resp_free(&r);
	free(lu);
	/* the replica that took the DELETE is gone, the other is whole */
	ck_assert_int_eq(h_http("GET", copy[0], NULL, 0, NULL, false, &r), 404);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", copy[1], NULL, 0, NULL, false, &r), 200);
	ck_assert(r.body.len == 3000 && !memcmp(r.body.data, val, 3000));
	h_resp_free(&r);

	/* RELINK: served again, from the replica still there */
	st = h_http("RELINK", u, NULL, 0, NULL, false, &r);
	ck_assert_msg(st == 204, "RELINK after a refused DELETE: %ld %s", st, r.body.data);
	h_resp_free(&r);
	expect_value(&m, key, val, 3000, &found, &bal);
	ck_assert_msg(found, "RELINK did not bring the key back");
	ck_assert_msg(bal && !strcmp(bal, "unbalanced"), "Key-Balance %s after RELINK of one "
		      "replica of two", bal ? bal : "(none)");
	ck_assert_int_eq(h_http("HEAD", u, NULL, 0, NULL, false, &r), 302);
	vl = h_header(&r, "Key-Volumes");
	ck_assert_msg(vl && on_vol(vl, vols[1].name) && !strchr(vl, ','),
		      "RELINK names %s, want only the replica still there (%s)", vl, vols[1].name);
	h_resp_free(&r);
	free(vl), free(bal), free(u), free(key), free(val), free(copy[0]), free(copy[1]);
	free(file), free(aside), free(sub);
	h_master_stop(&m);
	if (mounted) {
		h_vol_down(&vols[1]);
		umount2(vols[1].dir, MNT_DETACH);
	}
	for (int i = 0; i < 2; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* ---- a hung volume ---- */

/* Is location loc ("host:port/svNN" or "host:port") on volume name? */
static bool on_vol(const char *loc, const char *name)
{
	size_t l = strlen(name);
	return !strncmp(loc, name, l) && (loc[l] == '/' || loc[l] == '\0');
}

/* A key whose first `replicas` places include (want_on true) or exclude
 * volume `name`. */
static char *key_placed(const char *stem, char **names, int nvol, int replicas, const char *name,
			bool want_on, int *counter)
{
	char (*locs)[LOC_MAX] = xmalloc((size_t)nvol * LOC_MAX);
	for (;;) {
		char *k = xasprintf("/%s-%d-%d", stem, (int)getpid(), (*counter)++);
		bool on = false;
		int n = placement_volumes(k, strlen(k), names, nvol, replicas, 10, locs);
		for (int i = 0; i < n; i++)
			on |= on_vol(locs[i], name);
		if (on == want_on) {
			free(locs);
			return k;
		}
		free(k);
	}
}

/* Lines of log holding both a and b. */
static int log_count(const char *log, const char *a, const char *b)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen(log, "r");
	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, a) && strstr(line, b);
	if (f)
		fclose(f);
	return n;
}

/* Wait until log holds more than n0 lines with a and b: at most 30 s,
 * far more than the -voltimeout plus a check interval it stands for. */
static void wait_log(const char *log, int n0, const char *a, const char *b)
{
	uint64_t end = now_ms() + 30000;
	while (log_count(log, a, b) <= n0 && now_ms() < end)
		usleep(20000);
	ck_assert_msg(log_count(log, a, b) > n0, "no line with \"%s\" and \"%s\" in %s", a, b,
		      log);
}

/* The checker's line for a volume it marks down names "volume NAME:". */
static char *down_tag(const struct vol *v)
{
	return xasprintf("volume %s:", v->name);
}

/* GETs never wait on a hung volume once the checker marked it down, and
 * PUTs go around it.  -puttimeout is 5 s, so anything that waited on it
 * would take that long: each request has a liveness bound of half that
 * (normal runs take a few ms, a few hundred under the sanitizer on a
 * loaded machine), and the answers must not name the hung volume. */
START_TEST(test_hung_volume)
{
	static const char *const flags[] = {"-replicas", "2", "-puttimeout", "5s",
					    "-voltimeout", "500ms", NULL};
	enum { BOUND_MS = 2500 };
	struct vol vols[3];
	struct master m = {0};
	char *names[3], *on0[10], *tag;
	int counter = 0, n0;
	struct resp r;
	uint64_t t0, worst = 0, worst_put = 0;
	long st;

	h_vol_start(&vols[0], _i ? VOL_NGINX : VOL_MKV);   /* the one that hangs */
	h_vol_start(&vols[1], VOL_MKV);
	h_vol_start(&vols[2], VOL_MKV);
	for (int i = 0; i < 3; i++)
		names[i] = vols[i].name;
	h_master_start(&m, vols, 3, flags);
	wait_cluster(&m);
	for (int i = 0; i < 10; i++) {
		char *u;
		on0[i] = key_placed("hung", names, 3, 2, names[0], true, &counter);
		u = murl(&m, on0[i]);
		ck_assert_int_eq(h_http("PUT", u, "value", 5, NULL, false, &r), 201);
		h_resp_free(&r);
		free(u);
	}

	tag = down_tag(&vols[0]);
	n0 = log_count(m.log, tag, "marked down");
	stop_group(vols[0].pid);
	wait_log(m.log, n0, tag, "marked down");
	for (int round = 0; round < 5; round++)
		for (int i = 0; i < 10; i++) {
			char *u = murl(&m, on0[i]);
			t0 = now_ms();
			st = h_http("GET", u, NULL, 0, NULL, false, &r);
			if (now_ms() - t0 > worst)
				worst = now_ms() - t0;
			ck_assert_msg(st == 302, "GET with one replica hung: %ld", st);
			ck_assert_msg(r.location && !strstr(r.location, names[0]),
				      "GET redirected to the hung volume: %s", r.location);
			h_resp_free(&r);
			free(u);
		}
	ck_assert_msg(worst < BOUND_MS, "a GET took %llu ms with a hung volume marked down",
		      (unsigned long long)worst);
	/* And PUTs of keys homed there go around it. */
	for (int i = 0; i < 5; i++) {
		char *k = key_placed("hung-after", names, 3, 2, names[0], true, &counter);
		char *u = murl(&m, k), *vl;
		t0 = now_ms();
		st = h_http("PUT", u, "value", 5, NULL, false, &r);
		if (now_ms() - t0 > worst_put)
			worst_put = now_ms() - t0;
		ck_assert_msg(st == 201, "PUT with a volume marked down: %ld %s", st, r.body.data);
		h_resp_free(&r);
		ck_assert_int_eq(h_http("HEAD", u, NULL, 0, NULL, false, &r), 302);
		vl = h_header(&r, "Key-Volumes");
		ck_assert_msg(vl && !strstr(vl, names[0]), "PUT wrote to the hung volume: %s", vl);
		free(vl);
		h_resp_free(&r);
		free(u), free(k);
	}
	ck_assert_msg(worst_put < BOUND_MS, "a PUT took %llu ms with a volume marked down",
		      (unsigned long long)worst_put);
	/* A DELETE of a key with a copy there does not wait -puttimeout on
	 * it: 500 at once, the key unlinked (its copy stays named) ... */
	{
		char *u = murl(&m, on0[0]), *ul = murl(&m, "/hung?unlinked");
		t0 = now_ms();
		st = h_http("DELETE", u, NULL, 0, NULL, false, &r);
		h_resp_free(&r);
		ck_assert_msg(st == 500 && now_ms() - t0 < BOUND_MS,
			      "DELETE with a copy on a volume marked down: %ld after %llu ms", st,
			      (unsigned long long)(now_ms() - t0));
		ck_assert_int_eq(h_status("GET", u), 404);
		ck_assert_int_eq(h_http("GET", ul, NULL, 0, NULL, false, &r), 200);
		ck_assert_msg(r.body.data && strstr(r.body.data, on0[0]), "not in ?unlinked: %s",
			      r.body.data ? r.body.data : "");
		h_resp_free(&r);
		kill(-vols[0].pid, SIGCONT);
		/* ... and once the volume is back, a DELETE finishes the job */
		for (uint64_t end = now_ms() + 20000; (st = h_status("DELETE", u)) != 204 &&
						      now_ms() < end;)
			usleep(100000);
		ck_assert_msg(st == 204, "DELETE once the volume is back: %ld", st);
		free(u), free(ul);
	}
	fprintf(stderr, "hung (%s): slowest GET once marked down: %llu ms, PUT %llu ms\n",
		_i ? "nginx" : "mkv-volume", (unsigned long long)worst,
		(unsigned long long)worst_put);
	kill(-vols[0].pid, SIGCONT);
	for (int i = 0; i < 10; i++)
		free(on0[i]);
	free(tag);
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* docs/operations.md: "-puttimeout D: a replica write with no progress
 * for D fails the PUT with 504".  A SIGSTOPped volume accepts the
 * connection (the kernel does) and never answers.  -voltimeout is 30 s,
 * so the checker cannot mark it down first: the PUT must write to it.
 * Small bodies (sent whole) and large ones (streamed) alike; neither is
 * visible after, nor has a byte on a live volume's disk. */
START_TEST(test_put_timeout)
{
	static const char *const flags[] = {"-replicas", "2", "-puttimeout", "1s",
					    "-voltimeout", "30s", NULL};
	enum { BIG = 16 << 20, BOUND_MS = 10000 };
	struct vol vols[3];
	struct master m = {0};
	char *names[3], *big = body_of(7, BIG);
	const char *left;
	int counter = 0;
	struct resp r;

	h_vol_start(&vols[0], _i ? VOL_NGINX : VOL_MKV);   /* the one that hangs */
	h_vol_start(&vols[1], VOL_MKV);
	h_vol_start(&vols[2], VOL_MKV);
	for (int i = 0; i < 3; i++)
		names[i] = vols[i].name;
	h_master_start(&m, vols, 3, flags);
	wait_cluster(&m);
	stop_group(vols[0].pid);
	for (int big_body = 0; big_body < 2; big_body++) {
		char *k = key_placed("timeout", names, 3, 2, names[0], true, &counter);
		char *u = murl(&m, k), *lu;
		size_t len = big_body ? BIG : 5;
		uint64_t t0 = now_ms(), took;
		long st = h_http("PUT", u, big_body ? big : "value", len, NULL, false, &r);
		took = now_ms() - t0;
		fprintf(stderr, "put timeout (%s, %zu bytes): %ld after %llu ms: %s",
			_i ? "nginx" : "mkv-volume", len, st, (unsigned long long)took, r.body.data);
		ck_assert_msg(st == 504, "PUT of %zu bytes to a hung volume: %ld %s", len, st,
			      r.body.data);
		ck_assert_msg(strstr(r.body.data, "puttimeout") && strstr(r.body.data, names[0]),
			      "the 504 does not name -puttimeout and the volume: %s", r.body.data);
		/* not before -puttimeout (1 s, less the clock's granularity), and
		 * answered, not hung */
		ck_assert_msg(took >= 950 && took < BOUND_MS, "the 504 came after %llu ms "
			      "(-puttimeout 1s)", (unsigned long long)took);
		h_resp_free(&r);
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 404);
		h_resp_free(&r);
		lu = xasprintf("%s/timeout-?list", m.base);
		ck_assert_int_eq(h_http("GET", lu, NULL, 0, NULL, false, &r), 200);
		ck_assert_msg(!strstr(r.body.data, k), "a PUT that failed is listed: %s",
			      r.body.data);
		h_resp_free(&r);
		/* What the live volumes took is deleted at once (the DELETE to
		 * the hung one waits on it) */
		ck_assert_msg(h_wait_no_blob(&vols[1], 2, k, 20000, &left), "a PUT that timed "
			      "out (%zu bytes) left %s", len, left);
		free(lu), free(u), free(k);
	}
	kill(-vols[0].pid, SIGCONT);   /* before the master's stop: its checker waits on it */
	/* ... and the hung one, woken, leaves no write half done.  A body it
	 * was sent whole (the small one) it may yet store, after it answered
	 * the master's DELETE: an orphan no record names, gc's (scenario 3). */
	ck_assert_msg(h_wait_no_blob(vols, 1, NULL, 20000, &left), "the hung volume, woken, "
		      "left %s", left);
	free(big);
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* A small PUT waiting on a hung volume holds only itself: it runs on one
 * of the master's event loops (docs/architecture.md), and every loop
 * serves other requests meanwhile.  Sixteen connections (spread over the
 * loops) each GET a key while the PUT waits out -puttimeout. */
struct hung_put {
	const char *url;
	long status;
	atomic_bool done;
};

static void *hung_put_main(void *arg)
{
	struct hung_put *h = arg;
	struct resp r;
	h->status = h_http("PUT", h->url, "value", 5, NULL, false, &r);
	h_resp_free(&r);
	atomic_store(&h->done, true);
	return NULL;
}

START_TEST(test_hung_put_holds_no_loop)
{
	static const char *const flags[] = {"-replicas", "2", "-puttimeout", "5s",
					    "-voltimeout", "30s", NULL};
	static const char get[] = "GET /free HTTP/1.1\r\nHost: x\r\n\r\n";
	enum { CONNS = 16 };
	struct vol vols[3];
	struct master m = {0};
	struct hung_put h = {0};
	struct resp r;
	char *names[3], *k, *free_url;
	int counter = 0, fd[CONNS];
	pthread_t th;

	for (int i = 0; i < 3; i++) {
		h_vol_start(&vols[i], VOL_MKV);
		names[i] = vols[i].name;
	}
	h_master_start(&m, vols, 3, flags);
	wait_cluster(&m);
	free_url = murl(&m, "/free");
	ck_assert_int_eq(h_http("PUT", free_url, "v", 1, NULL, false, &r), 201);
	h_resp_free(&r);
	for (int i = 0; i < CONNS; i++) {   /* connected before: accepted by every loop */
		fd[i] = h_connect(m.port);
		ck_assert(fd[i] >= 0);
	}
	stop_group(vols[0].pid);
	k = key_placed("holds", names, 3, 2, names[0], true, &counter);
	h.url = murl(&m, k);
	ck_assert_int_eq(pthread_create(&th, NULL, hung_put_main, &h), 0);
	h_wait_put_taken(m.base, k);   /* the PUT is in, waiting on the hung volume */
	for (int i = 0; i < CONNS; i++) {
		ck_assert(h_send(fd[i], get, sizeof(get) - 1));
		ck_assert_int_eq(h_recv_resp(fd[i], NULL, 20000, false), 302);
		close(fd[i]);
	}
	ck_assert_msg(!atomic_load(&h.done), "the PUT to the hung volume ended (%ld) before "
		      "the other requests were served", h.status);
	pthread_join(th, NULL);
	ck_assert_int_eq(h.status, 504);
	kill(-vols[0].pid, SIGCONT);
	free((char *)h.url), free(k), free(free_url);
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* REBALANCE of a key one of whose copies is on a hung volume that the
 * master already sees down copies from the other copy at once: it tried
 * the hung one first, which took the connection and stalled the copy (and
 * the key's lock) for a minute. */
START_TEST(test_rebalance_hung_source)
{
	static const char *const flags[] = {"-replicas", "2", "-voltimeout", "500ms", NULL};
	struct vol vols[3];
	struct master m = {0};
	char *names[3], *k = NULL, *u, locs[3][LOC_MAX], *tag;
	struct resp r;
	uint64_t t0;
	long st = 0;
	int n0;
	bool found;

	for (int i = 0; i < 3; i++) {
		h_vol_start(&vols[i], VOL_MKV);
		names[i] = vols[i].name;
	}
	h_master_start(&m, vols, 3, flags);
	wait_cluster(&m);
	/* a key whose rendezvous order is vols 0, 1, 2 */
	for (int i = 0; !k; i++) {
		k = xasprintf("/hung-src-%d-%d", (int)getpid(), i);
		placement_volumes(k, strlen(k), names, 3, 3, 10, locs);
		if (!on_vol(locs[0], names[0]) || !on_vol(locs[1], names[1]))
			free(k), k = NULL;
	}
	u = murl(&m, k);
	/* written while vols[1] is down: its copies are on vols 0 and 2 */
	h_vol_down(&vols[1]);
	for (int i = 0; i < 100 && st != 201; i++) {
		st = h_http("PUT", u, "value", 5, NULL, false, &r);
		h_resp_free(&r);
		if (st != 201)
			usleep(100000);
	}
	ck_assert_int_eq(st, 201);
	h_vol_respawn(&vols[1]);
	tag = down_tag(&vols[0]);
	n0 = log_count(m.log, tag, "marked down");
	stop_group(vols[0].pid);
	wait_log(m.log, n0, tag, "marked down");
	t0 = now_ms();
	st = h_http("REBALANCE", u, NULL, 0, NULL, false, &r);
	h_resp_free(&r);
	fprintf(stderr, "rebalance, a copy on a hung volume: %ld after %llu ms\n", st,
		(unsigned long long)(now_ms() - t0));
	ck_assert_int_eq(st, 204);
	/* liveness: the copy from the hung source stalled for a minute */
	ck_assert_msg(now_ms() - t0 < 20000, "REBALANCE waited %llu ms on a volume marked down",
		      (unsigned long long)(now_ms() - t0));
	/* A REPLACE moves the key off the hung volume; the old copy's delete
	 * waits for the volume, without holding the key: writes go on.  The
	 * delete comes due after a grace period (GRACE_MS, 2 s, in
	 * ops/rebalance.c) and, its volume down, is put off without a word:
	 * no event to wait for, so REPLACEs go on through twice that, and
	 * every one must succeed (held, the key would refuse them 409 for
	 * the delete's 30 s).  The first waits (503) until the checker has
	 * seen vols[1] back, respawned above: else only vols[2] takes writes. */
	for (uint64_t end = now_ms() + 20000;; usleep(100000)) {
		st = h_http("REPLACE", u, "other", 5, NULL, false, &r);
		h_resp_free(&r);
		if (st != 503 || now_ms() > end)
			break;
	}
	ck_assert_msg(st == 201, "REPLACE off a hung volume: %ld", st);
	for (uint64_t end = now_ms() + 4000; now_ms() < end;) {
		st = h_http("REPLACE", u, "value", 5, NULL, false, &r);
		ck_assert_msg(st == 201, "REPLACE after a move off a hung volume: %ld %s", st,
			      r.body.data);
		h_resp_free(&r);
		usleep(100000);
	}
	kill(-vols[0].pid, SIGCONT);
	expect_value(&m, k, "value", 5, &found, NULL);
	ck_assert(found);
	free(u), free(k), free(tag);
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* ---- write availability, then rebalance ---- */

START_TEST(test_write_availability)
{
	enum { N = 200 };
	static const char *const flags[] = {"-replicas", "3", "-voltimeout", "500ms", NULL};
	struct vol vols[5];
	struct master m = {0};
	char *keys[N], *names[5], *volarg, *bin;
	int unbalanced = 0, counter = 0;
	struct resp r;

	for (int i = 0; i < 5; i++) {
		h_vol_start(&vols[i], VOL_MKV);
		names[i] = vols[i].name;
	}
	h_master_start(&m, vols, 5, flags);
	wait_cluster(&m);
	h_vol_down(&vols[2]);       /* down, its data kept */
	/* Wait until the master knows: a PUT homed on the dead volume succeeds. */
	{
		char *k = key_placed("avail-probe", names, 5, 3, names[2], true, &counter);
		char *u = murl(&m, k);
		long st = 0;
		for (int i = 0; i < 100; i++) {
			st = h_http("PUT", u, "x", 1, NULL, false, &r);
			h_resp_free(&r);
			if (st == 201)
				break;
			usleep(100000);
		}
		ck_assert_msg(st == 201, "PUT with one of 5 volumes down: %ld", st);
		free(u), free(k);
	}
	for (int i = 0; i < N; i++) {
		char *u, *b = body_of(i, 1000 + (size_t)i);
		long st;
		keys[i] = xasprintf("/avail/%d-%d", (int)getpid(), i);
		u = murl(&m, keys[i]);
		st = h_http("PUT", u, b, 1000 + (size_t)i, NULL, false, &r);
		ck_assert_msg(st == 201, "PUT %s with one of 5 volumes down: %ld %s", keys[i], st,
			      r.body.data);
		h_resp_free(&r);
		free(u), free(b);
	}
	for (int i = 0; i < N; i++) {
		char *b = body_of(i, 1000 + (size_t)i), *bal = NULL;
		bool found, homed = false;
		char (*locs)[LOC_MAX] = xmalloc(3 * LOC_MAX);
		int n = placement_volumes(keys[i], strlen(keys[i]), names, 5, 3, 10, locs);
		for (int j = 0; j < n; j++)
			homed |= on_vol(locs[j], names[2]);
		expect_value(&m, keys[i], b, 1000 + (size_t)i, &found, &bal);
		ck_assert_msg(found, "%s not readable", keys[i]);
		ck_assert_msg(bal && !strcmp(bal, homed ? "unbalanced" : "balanced"),
			      "%s: Key-Balance %s, want %s", keys[i], bal ? bal : "(none)",
			      homed ? "unbalanced" : "balanced");
		unbalanced += homed;
		free(bal), free(b), free(locs);
	}
	ck_assert_msg(unbalanced > 0, "no key was homed on the stopped volume");

	/* The volume returns; rebalance offline (the master stopped). */
	h_vol_respawn(&vols[2]);
	h_master_down(&m);
	volarg = h_volumes_arg(vols, 5);
	bin = h_bin("mkv");
	{
		char *argv[] = {bin, "-volumes", volarg, "-db", m.db, "-replicas", "3", "rebalance",
				NULL};
		int wst = 0;
		pid_t pid = h_spawn(argv, m.log);
		uint64_t end = now_ms() + 60000;
		while (waitpid(pid, &wst, WNOHANG) == 0 && now_ms() < end)
			usleep(20000);
		if (now_ms() >= end) {
			kill(pid, SIGKILL);
			waitpid(pid, &wst, 0);
			ck_abort_msg("mkv rebalance did not finish in 60 s (see %s)", m.log);
		}
		ck_assert_msg(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
			      "mkv rebalance failed (status %d, see %s)", wst, m.log);
	}
	h_master_restart(&m, vols, 5, flags);
	wait_cluster(&m);
	for (int i = 0; i < N; i++) {
		char *b = body_of(i, 1000 + (size_t)i), *bal = NULL;
		bool found;
		expect_value(&m, keys[i], b, 1000 + (size_t)i, &found, &bal);
		ck_assert_msg(found, "%s not readable after rebalance", keys[i]);
		ck_assert_msg(bal && !strcmp(bal, "balanced"), "%s: Key-Balance %s after rebalance",
			      keys[i], bal ? bal : "(none)");
		free(bal), free(b), free(keys[i]);
	}
	fprintf(stderr, "avail: %d PUTs with a volume down, %d unbalanced, all balanced after "
		"rebalance\n", N, unbalanced);
	free(volarg), free(bin);
	h_master_stop(&m);
	for (int i = 0; i < 5; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* ---- writes that go on, and a write whose volume is marked down ---- */

/* Wait until the master has taken a PUT of key whose body is still
 * arriving: it holds the key's lock, so a DELETE of it gets 409 (404
 * before, changing nothing). */
static void wait_taken(const struct master *m, const char *key)
{
	char *u = murl(m, key);
	uint64_t end = now_ms() + 20000;
	long st;
	while ((st = h_status("DELETE", u)) == 404 && now_ms() < end)
		usleep(20000);
	ck_assert_msg(st == 409, "the master never took the PUT of %s (DELETE: %ld)", key, st);
	free(u);
}

/* Send one chunk of a chunked body. */
static void send_chunk(int fd, const char *p, size_t n)
{
	char head[32];
	snprintf(head, sizeof(head), "%zx\r\n", n);
	ck_assert(h_send(fd, head, strlen(head)));
	ck_assert(h_send(fd, p, n));
	ck_assert(h_send(fd, "\r\n", 2));
}

/* docs/operations.md: "-puttimeout D: a replica write with no progress
 * for D fails the PUT".  A write that keeps making progress, however
 * slowly, is not cut: a client trickles its body, a piece every 400 ms
 * for 6 s (three -puttimeouts), chunked and then with a Content-Length
 * past the small-PUT size (both streamed); each gets 201 and reads back
 * whole from every replica.  The pauses are the client's pace, not a
 * wait for the server. */
START_TEST(test_slow_put_progresses)
{
	static const char *const flags[] = {"-replicas", "2", "-puttimeout", "2s", NULL};
	enum { PIECES = 15, PIECE = 8192 };
	struct vol vols[3];
	struct master m = {0};
	char *body = body_of(11, PIECES * PIECE);

	for (int i = 0; i < 3; i++)
		h_vol_start(&vols[i], VOL_MKV);
	h_master_start(&m, vols, 3, flags);
	wait_cluster(&m);
	for (int chunked = 1; chunked >= 0; chunked--) {
		char *key = xasprintf("/slow-%d-%d", (int)getpid(), chunked), head[256];
		struct buf out = {0};
		uint64_t t0 = now_ms();
		bool found;
		long st;
		int fd = h_connect(m.port);
		ck_assert(fd >= 0);
		if (chunked)
			snprintf(head, sizeof(head), "PUT %s HTTP/1.1\r\nHost: x\r\n"
				 "Transfer-Encoding: chunked\r\n\r\n", key);
		else
			snprintf(head, sizeof(head), "PUT %s HTTP/1.1\r\nHost: x\r\n"
				 "Content-Length: %d\r\n\r\n", key, PIECES * PIECE);
		ck_assert(h_send(fd, head, strlen(head)));
		for (int i = 0; i < PIECES; i++) {
			if (chunked)
				send_chunk(fd, body + i * PIECE, PIECE);
			else
				ck_assert(h_send(fd, body + i * PIECE, PIECE));
			usleep(400 * 1000);
		}
		if (chunked)
			ck_assert(h_send(fd, "0\r\n\r\n", 5));
		st = h_recv_resp(fd, &out, 20000, false);
		close(fd);
		fprintf(stderr, "slow put (%s): %ld after %llu ms\n", chunked ? "chunked" : "length",
			st, (unsigned long long)(now_ms() - t0));
		ck_assert_msg(st == 201, "a PUT trickled over %d ms (-puttimeout 2s) answered %ld: "
			      "%.*s", PIECES * 400, st, (int)out.len, out.data ? out.data : "");
		buf_free(&out);
		expect_value(&m, key, body, PIECES * PIECE, &found, NULL);
		ck_assert_msg(found, "%s: 201, then 404", key);
		free(key);
	}
	free(body);
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* A DELETE sent to a volume that then stops (it accepts, never answers)
 * before the checker marks it down ends once it is marked down, 500 with
 * its copy still named, not at -puttimeout (600 s: h_http gives up after
 * 60 s) with the key locked; once the volume is back a DELETE finishes. */
START_TEST(test_delete_marked_down)
{
	static const char *const flags[] = {"-replicas", "2", "-puttimeout", "600s",
					    "-voltimeout", "500ms", NULL};
	struct vol vols[2];
	struct master m = {0};
	struct resp r;
	char *u;
	long st;

	h_vol_start(&vols[0], VOL_MKV);
	h_vol_start(&vols[1], VOL_MKV);
	h_master_start(&m, vols, 2, flags);
	wait_cluster(&m);
	u = murl(&m, "/delete-marked-down");
	ck_assert_int_eq(h_http("PUT", u, "value", 5, NULL, false, &r), 201);
	h_resp_free(&r);
	stop_group(vols[0].pid);
	st = h_http("DELETE", u, NULL, 0, NULL, false, &r);
	ck_assert_msg(st == 500, "DELETE with a copy on a stopped volume: %ld (-1: no answer in "
		      "60 s) %s", st, r.body.data ? r.body.data : "");
	h_resp_free(&r);
	ck_assert_int_eq(h_status("GET", u), 404);
	kill(-vols[0].pid, SIGCONT);
	for (uint64_t end = now_ms() + 30000; (st = h_status("DELETE", u)) != 204 &&
					      now_ms() < end;)
		usleep(100000);
	ck_assert_msg(st == 204, "DELETE once the volume is back: %ld", st);
	free(u);
	h_master_stop(&m);
	for (int i = 0; i < 2; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

/* docs/testing.md, scenario 2: "a write in flight to a volume the checker
 * marks down fails at once with a 503 naming it".  A chunked PUT homed
 * on volume 0 is taken, its first chunk sent; the volume is SIGSTOPped
 * and, once the master logs it marked down, the client sends the rest:
 * the answer is 503 naming the volume, well before -puttimeout (60 s,
 * which a write that waited on the volume would take), and the key is
 * not visible. */
START_TEST(test_put_marked_down)
{
	static const char *const flags[] = {"-replicas", "2", "-puttimeout", "60s",
					    "-voltimeout", "500ms", NULL};
	enum { BOUND_MS = 20000, PIECE = 16384 };
	struct vol vols[3];
	struct master m = {0};
	char *names[3], *key, *tag, *u, head[256], *body = body_of(12, 2 * PIECE);
	struct buf out = {0};
	int counter = 0, n0, fd;
	uint64_t t0;
	long st;

	h_vol_start(&vols[0], _i ? VOL_NGINX : VOL_MKV);   /* the one that hangs */
	h_vol_start(&vols[1], VOL_MKV);
	h_vol_start(&vols[2], VOL_MKV);
	for (int i = 0; i < 3; i++)
		names[i] = vols[i].name;
	h_master_start(&m, vols, 3, flags);
	wait_cluster(&m);
	key = key_placed("downput", names, 3, 2, names[0], true, &counter);
	fd = h_connect(m.port);
	ck_assert(fd >= 0);
	snprintf(head, sizeof(head), "PUT %s HTTP/1.1\r\nHost: x\r\n"
		 "Transfer-Encoding: chunked\r\n\r\n", key);
	ck_assert(h_send(fd, head, strlen(head)));
	send_chunk(fd, body, PIECE);
	wait_taken(&m, key);
	tag = down_tag(&vols[0]);
	n0 = log_count(m.log, tag, "marked down");
	stop_group(vols[0].pid);
	wait_log(m.log, n0, tag, "marked down");
	t0 = now_ms();
	send_chunk(fd, body + PIECE, PIECE);
	ck_assert(h_send(fd, "0\r\n\r\n", 5));
	st = h_recv_resp(fd, &out, BOUND_MS, false);
	close(fd);
	fprintf(stderr, "put marked down (%s): %ld %llu ms after the line: %.*s",
		_i ? "nginx" : "mkv-volume", st, (unsigned long long)(now_ms() - t0),
		(int)out.len, out.data ? out.data : "");
	ck_assert_msg(st == 503, "a write in flight to a volume marked down: %ld (-1: no answer "
		      "in %d ms)", st, BOUND_MS);
	ck_assert_msg(out.data && strstr(out.data, names[0]), "the 503 does not name %s: %.*s",
		      names[0], (int)out.len, out.data ? out.data : "");
	buf_free(&out);
	u = murl(&m, key);
	ck_assert_int_eq(h_status("GET", u), 404);
	kill(-vols[0].pid, SIGCONT);   /* before the master's stop: its checker waits on it */
	free(u), free(key), free(tag), free(body);
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&vols[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("faults");
	SRunner *sr;
	TCase *tc;
	int failed;

	curl_global_init(CURL_GLOBAL_ALL);
	signal(SIGPIPE, SIG_IGN);
	tc = tcase_create("crash");
	tcase_set_timeout(tc, 90);
	tcase_add_loop_test(tc, test_crash_during_puts, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("crash during REPLACE");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_crash_during_replace);
	tcase_add_test(tc, test_crash_during_replace_away);
	suite_add_tcase(s, tc);
	tc = tcase_create("failed PUT answered");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_failed_put_answered);
	suite_add_tcase(s, tc);
	tc = tcase_create("disk full");
	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, mount_small, umount_small);
	tcase_add_test(tc, test_disk_full);
	suite_add_tcase(s, tc);
	tc = tcase_create("read-only");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_read_only);
	tcase_add_test(tc, test_read_only_old_marker);
	suite_add_tcase(s, tc);
	tc = tcase_create("failed DELETE");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_failed_delete, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("hung volume");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_hung_volume, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("put timeout");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_put_timeout, 0, 2);
	tcase_add_test(tc, test_hung_put_holds_no_loop);
	suite_add_tcase(s, tc);
	tc = tcase_create("slow put");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_slow_put_progresses);
	suite_add_tcase(s, tc);
	tc = tcase_create("put marked down");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_put_marked_down, 0, 2);
	tcase_add_test(tc, test_delete_marked_down);
	suite_add_tcase(s, tc);
	tc = tcase_create("rebalance hung source");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rebalance_hung_source);
	suite_add_tcase(s, tc);
	tc = tcase_create("write availability");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_write_availability);
	suite_add_tcase(s, tc);
	atexit(umount_small);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	umount_small();
	return failed ? 1 : 0;
}
