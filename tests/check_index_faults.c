/* check_index_faults.c -- "acknowledged means kept" when the index's disk
 * fails (issue 40).  A failed append to LevelDB's log still moves its
 * writer on, and recovery cuts the log where the failed bytes are: every
 * write after them, acknowledged or not, is gone after a crash.  So the
 * master takes no write after one failed until LevelDB has begun a fresh
 * log (index.c's recover), and answers them 503 with the reason.
 *
 * Each test writes keys, makes the index's (or the sidecar's) disk fail,
 * writes more, heals it, writes more, then kills the master with SIGKILL
 * and restarts it: every key answered 201 must read back.  The faults:
 *  - an injected EIO on write (cut short after half its bytes, as a full
 *    disk cuts it) or on fdatasync: build/tests/faultfs.so (tests/faultfs.c)
 *    preloaded into the master, for files of one directory;
 *  - a real full disk: the index on a 2 MiB tmpfs filled and emptied (as
 *    root, in a mount namespace of the test's own; skipped otherwise). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define MAXKEYS 200


struct run {
	struct vol vol;
	struct master m;
	char *tmp, *ctl;
	char *acked[MAXKEYS];   /* keys answered 201 (their value is the key) */
	int nacked;
	int refused;            /* answers other than 201 */
	char last_why[512];
	bool buckets;           /* S3 CreateBucket (the sidecar's synced writes), not PUT */
	char maddr[32];          /* -metrics */
	const char *flags[5];
};

static void set_flags(struct run *r)
{
	snprintf(r->maddr, sizeof(r->maddr), "127.0.0.1:%d", h_free_port());
	r->flags[0] = "-replicas", r->flags[1] = "1";
	r->flags[2] = "-metrics", r->flags[3] = r->maddr, r->flags[4] = NULL;
}

static const char *const s3hdr[] = {"X-Amz-Content-Sha256: UNSIGNED-PAYLOAD", NULL};

static long put(struct run *r, const char *key)
{
	char *url = xasprintf("%s/%s", r->m.base, key);
	struct resp rs;
	long st = r->buckets ? h_http("PUT", url, NULL, 0, s3hdr, false, &rs)
			     : h_http("PUT", url, key, strlen(key), NULL, false, &rs);
	if (st == (r->buckets ? 200 : 201)) {
		ck_assert_int_lt(r->nacked, MAXKEYS);
		r->acked[r->nacked++] = xstrdup(key);
	} else {
		r->refused++;
		snprintf(r->last_why, sizeof(r->last_why), "%ld %.*s", st, (int)rs.body.len,
			 rs.body.data ? rs.body.data : "");
	}
	h_resp_free(&rs);
	free(url);
	return st;
}

/* PUT key until it is answered 201, for up to 30 s: false if it never was. */
static bool put_until(struct run *r, const char *key)
{
	uint64_t end = now_ms() + 30000;
	while (put(r, key) != (r->buckets ? 200 : 201)) {
		if (now_ms() > end)
			return false;
		usleep(100000);
	}
	return true;
}

static char *metric(struct run *r, const char *name)
{
	char *url = xasprintf("http://%s/metrics", r->maddr), *line = NULL, *p;
	struct resp rs;
	long st = h_http("GET", url, NULL, 0, NULL, false, &rs);
	free(url);
	if (st != 200) {
		h_resp_free(&rs);
		return NULL;
	}
	buf_append(&rs.body, "", 1);
	for (p = rs.body.data; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, name, strlen(name)) && p[strlen(name)] == ' ') {
			line = xstrndup(p + strlen(name) + 1, strcspn(p + strlen(name) + 1, "\n"));
			break;
		}
	h_resp_free(&rs);
	return line;
}

static void expect_metric(struct run *r, const char *name, const char *want)
{
	char *v = metric(r, name);
	ck_assert_msg(v && !strcmp(v, want), "%s is %s, not %s", name, v ? v : "absent", want);
	free(v);
}

/* Kill the master (SIGKILL: no close, no flush), restart it without the
 * faults, and read every acknowledged key back. */
static void crash_and_check(struct run *r)
{
	h_stop(r->m.pid, SIGKILL);
	r->m.pid = 0;
	unsetenv("LD_PRELOAD");
	h_master_restart(&r->m, &r->vol, 1, r->flags);
	if (r->buckets) {   /* ListBuckets names each */
		char *url = xasprintf("%s/", r->m.base);
		struct resp rs;
		ck_assert_int_eq(h_http("GET", url, NULL, 0, s3hdr, false, &rs), 200);
		buf_append(&rs.body, "", 1);
		for (int i = 0; i < r->nacked; i++) {
			char *want = xasprintf("<Name>%s</Name>", r->acked[i]);
			ck_assert_msg(strstr(rs.body.data, want), "bucket %s was answered 200 (%d of "
				      "%d) and is not listed after a crash", r->acked[i], i + 1, r->nacked);
			free(want);
		}
		h_resp_free(&rs);
		free(url);
		return;
	}
	for (int i = 0; i < r->nacked; i++) {
		char *url = xasprintf("%s/%s", r->m.base, r->acked[i]);
		struct resp rs;
		long st = h_http("GET", url, NULL, 0, NULL, true, &rs);
		ck_assert_msg(st == 200 && rs.body.len == strlen(r->acked[i]) &&
				      !memcmp(rs.body.data, r->acked[i], rs.body.len),
			      "%s was answered 201 (key %d of %d acknowledged) and reads %ld after "
			      "a crash", r->acked[i], i + 1, r->nacked, st);
		h_resp_free(&rs);
		free(url);
	}
}

static void start(struct run *r, const char *fault_dir_sub)
{
	memset(r, 0, sizeof(*r));
	r->tmp = h_tmpdir();
	r->ctl = xasprintf("%s/fault", r->tmp);
	set_flags(r);
	h_vol_start(&r->vol, VOL_MKV);
	r->m.db = xasprintf("%s/db", r->tmp);
	r->m.log = xasprintf("%s/master.log", r->tmp);
	if (fault_dir_sub) {
		char exe[4096] = "", *so, *dir = xasprintf("%s%s", r->m.db,
									     fault_dir_sub);
		const char *asan = getenv("MKV_CHILD_ASAN_OPTIONS");
		/* beside this suite's binary: build/tests or build-san/tests */
		ck_assert_int_gt(readlink("/proc/self/exe", exe, sizeof(exe) - 1), 0);
		*strrchr(exe, '/') = '\0';
		so = xasprintf("%s/faultfs.so", exe);
		ck_assert_msg(access(so, R_OK) == 0, "%s is missing: make test builds it", so);
		setenv("LD_PRELOAD", so, 1);
		setenv("MKV_FAULT_DIR", dir, 1);
		setenv("MKV_FAULT_CTL", r->ctl, 1);
		if (asan) {   /* libasan is not first in the list with a preload */
			char *a = xasprintf("%s:verify_asan_link_order=0", asan);
			setenv("MKV_CHILD_ASAN_OPTIONS", a, 1);
			free(a);
		}
		free(so);
		free(dir);
	}
	h_master_start(&r->m, &r->vol, 1, r->flags);
	unsetenv("LD_PRELOAD");   /* the restarts run without it */
}

static void finish(struct run *r)
{
	h_master_stop(&r->m);
	h_vol_stop(&r->vol);
	for (int i = 0; i < r->nacked; i++)
		free(r->acked[i]);
	free(r->ctl);
	free(r->tmp);   /* removed with the index (h_master_stop) */
}

static void arm(struct run *r, const char *what)
{
	char *s = xasprintf("echo %s > %s", what, r->ctl);
	ck_assert_int_eq(system(s), 0);
	free(s);
}

/* The scenario for one injected fault: 20 keys, the fault, 10 more (the
 * first write to the failing files fails), healed, 30 more.  healed: the
 * master must take writes again by itself (a write fault); else (a failed
 * sync, which LevelDB keeps) it refuses them, saying to restart. */
static void fault_scenario(const char *sub, const char *what, bool heals)
{
	struct run r;
	char key[64];
	start(&r, sub);
	r.buckets = !strcmp(sub, "/mkv-meta");
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "bkt-a%02d", i);
		ck_assert_int_eq(put(&r, key), r.buckets ? 200 : 201);
	}
	expect_metric(&r, "mkv_index_writable", "1");
	arm(&r, what);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "bkt-b%02d", i);
		put(&r, key);
	}
	ck_assert_msg(r.refused > 0, "no write failed with the %s fault on", what);
	expect_metric(&r, "mkv_index_writable", "0");
	ck_assert_msg(strstr(r.last_why, "503") && strstr(r.last_why, "refuses writes after"),
		      "a write after the failed one was answered %s", r.last_why);
	unlink(r.ctl);
	for (int i = 0; i < 30; i++) {
		snprintf(key, sizeof(key), "bkt-c%02d", i);
		if (heals)
			ck_assert_msg(put_until(&r, key), "%s: never taken after the disk healed (%s)",
				      key, r.last_why);
		else   /* refused, at first for the disk, then (LevelDB keeps the error) for good */
			for (uint64_t end = now_ms() + 30000; now_ms() < end &&
							       !strstr(r.last_why, "restart");)
			{
				ck_assert_int_ne(put(&r, key), 201);
				usleep(100000);
			}
	}
	if (heals)
		expect_metric(&r, "mkv_index_writable", "1");
	else
		ck_assert_msg(strstr(r.last_why, "restart"), "after a failed sync: %s", r.last_why);
	ck_assert_msg(strcmp(metric(&r, "mkv_index_write_errors_total") ?: "0", "0"),
		      "no write error counted");
	crash_and_check(&r);
	if (!heals) {   /* after the restart, writes are taken again */
		ck_assert_int_eq(put(&r, "bkt-d00"), 201);
		crash_and_check(&r);
	}
	finish(&r);
}

START_TEST(test_index_write_eio)
{
	fault_scenario("", "write", true);
}
END_TEST

START_TEST(test_sidecar_write_eio)
{
	fault_scenario("/mkv-meta", "write", true);
}
END_TEST

START_TEST(test_index_sync_eio)
{
	fault_scenario("", "sync", false);
}
END_TEST

/* The reproduction: the index (and its sidecar) on a 2 MiB tmpfs,
 * filled by another file until writes fail, then emptied. */
START_TEST(test_index_disk_full)
{
	struct run r;
	char key[64], *fill;
	int fd, n;
	static char junk[65536];
	if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		fprintf(stderr, "SKIPPED test_index_disk_full: needs root (a tmpfs in a mount "
				"namespace)\n");
		return;
	}
	memset(&r, 0, sizeof(r));
	set_flags(&r);
	r.tmp = h_tmpdir();
	r.m.db = xasprintf("%s/db", r.tmp);
	r.m.log = xasprintf("%s/master.log", r.tmp);
	ck_assert_int_eq(mkdir(r.m.db, 0700), 0);
	ck_assert_msg(mount("tmpfs", r.m.db, "tmpfs", 0, "size=2m") == 0, "mount: %s",
		      strerror(errno));
	h_vol_start(&r.vol, VOL_MKV);
	h_master_start(&r.m, &r.vol, 1, r.flags);
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "a%02d", i);
		ck_assert_int_eq(put(&r, key), 201);
	}
	fill = xasprintf("%s/filler", r.m.db);
	fd = open(fill, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	while (write(fd, junk, sizeof(junk)) > 0)
		;
	while (write(fd, junk, 1) > 0)
		;
	close(fd);
	for (n = 0; n < 200 && !r.refused; n++) {   /* until the log's last page is full */
		snprintf(key, sizeof(key), "b%03d", n);
		put(&r, key);
	}
	ck_assert_msg(r.refused > 0, "the index took %d writes on a full disk", n);
	expect_metric(&r, "mkv_index_writable", "0");
	unlink(fill);
	for (int i = 0; i < 30; i++) {
		snprintf(key, sizeof(key), "c%02d", i);
		ck_assert_msg(put_until(&r, key), "%s: never taken after the disk had room (%s)",
			      key, r.last_why);
	}
	crash_and_check(&r);
	h_master_down(&r.m);
	umount2(r.m.db, MNT_DETACH);
	free(fill);
	finish(&r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("index_faults");
	TCase *tc = tcase_create("faults");
	SRunner *sr;
	int failed;
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_index_write_eio);
	tcase_add_test(tc, test_sidecar_write_eio);
	tcase_add_test(tc, test_index_sync_eio);
	tcase_add_test(tc, test_index_disk_full);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
