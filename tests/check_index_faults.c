/* check_index_faults.c -- "acknowledged means kept" when the index's disk
 * fails.  A failed append to LevelDB's log still moves its
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
#include "../common/md5.h"

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


/* recover() takes "the empty synced write succeeded" for
 * "a fresh log began".  leveldb_compact_range returns nothing: when the
 * new log cannot be created (no inode left on the disk, EMFILE), LevelDB
 * keeps the old log -- the one cut where the failed write is -- and the
 * empty write is appended to it.  The master then says "writable again"
 * and acknowledges writes that a crash drops (recovery stops reading
 * that log block at the cut).  The index on a tmpfs with few inodes:
 * blocks filled (a log append fails), then blocks freed while every
 * inode stays taken. */
START_TEST(test_index_no_inode_for_new_log)
{
	struct run r;
	char key[64], *fill, *p;
	int fd, n, nino = 0, late = 0;
	static char junk[65536];
	if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		fprintf(stderr, "SKIPPED test_index_no_inode_for_new_log: needs root\n");
		return;
	}
	memset(&r, 0, sizeof(r));
	set_flags(&r);
	r.tmp = h_tmpdir();
	r.m.db = xasprintf("%s/db", r.tmp);
	r.m.log = xasprintf("%s/master.log", r.tmp);
	ck_assert_int_eq(mkdir(r.m.db, 0700), 0);
	ck_assert_msg(mount("tmpfs", r.m.db, "tmpfs", 0, "size=2m,nr_inodes=64") == 0,
		      "mount: %s", strerror(errno));
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
	for (;; nino++) {   /* every inode taken */
		p = xasprintf("%s/ino%03d", r.m.db, nino);
		fd = open(p, O_WRONLY | O_CREAT, 0600);
		free(p);
		if (fd < 0)
			break;
		close(fd);
	}
	for (n = 0; n < 200 && !r.refused; n++) {
		snprintf(key, sizeof(key), "b%03d", n);
		put(&r, key);
	}
	ck_assert_msg(r.refused > 0, "the index took %d writes on a full disk", n);
	/* blocks back, inodes not: the filler's inode is taken again */
	unlink(fill);
	p = xasprintf("%s/ino%03d", r.m.db, nino++);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	free(p);
	ck_assert_int_ge(fd, 0);
	close(fd);
	sleep(2);   /* past recover's once a second */
	for (int i = 0; i < 30; i++) {
		snprintf(key, sizeof(key), "c%02d", i);
		if (put(&r, key) == 201)
			late++;
		usleep(100000);
	}
	fprintf(stderr, "test_index_no_inode_for_new_log: %d writes acknowledged with no inode "
			"for a fresh log (last refusal: %s)\n", late, r.last_why);
	for (int i = 0; i < nino; i++) {   /* room for LevelDB's recovery */
		p = xasprintf("%s/ino%03d", r.m.db, i);
		unlink(p);
		free(p);
	}
	crash_and_check(&r);
	h_master_down(&r.m);
	umount2(r.m.db, MNT_DETACH);
	free(fill);
	finish(&r);
}
END_TEST

/* a write fault that lasts longer than a second.  recover
 * tries once a second while statvfs shows room (an EIO, a quota, a disk
 * that refills between statvfs and the flush): the memtable's flush then
 * fails, LevelDB keeps that error for as long as it is open, and the
 * index refuses every write until a restart, though the disk is sound
 * again.  (test_index_write_eio passes only because its fault is healed
 * within the second.) */
START_TEST(test_index_write_fault_outlasts_recover)
{
	struct run r;
	char key[64];
	start(&r, "");
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "a%02d", i);
		ck_assert_int_eq(put(&r, key), 201);
	}
	arm(&r, "write");
	put(&r, "b00");
	ck_assert_int_gt(r.refused, 0);
	sleep(2);
	put(&r, "b01");   /* recover runs now, the fault still on */
	unlink(r.ctl);
	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "c%02d", i);
		ck_assert_msg(put_until(&r, key), "%s: never taken after the disk healed (%s)",
			      key, r.last_why);
	}
	crash_and_check(&r);
	finish(&r);
}
END_TEST

/* The same as test_index_no_inode_for_new_log without root: after a
 * write cut short, recover() runs while a new file cannot be created in
 * the index's directory (faultfs "create": ENOSPC, as with no inode left;
 * EMFILE does the same), so LevelDB keeps the cut log, the empty synced
 * write lands in it, and the index says it is writable again. */
START_TEST(test_index_recover_without_new_log)
{
	struct run r;
	char key[64];
	int late = 0;
	start(&r, "");
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "a%02d", i);
		ck_assert_int_eq(put(&r, key), 201);
	}
	arm(&r, "write");
	put(&r, "b00");
	ck_assert_int_gt(r.refused, 0);
	arm(&r, "create");
	sleep(2);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "c%02d", i);
		late += put(&r, key) == 201;
		usleep(100000);
	}
	fprintf(stderr, "test_index_recover_without_new_log: %d writes acknowledged while no "
			"new log could be made\n", late);
	unlink(r.ctl);
	crash_and_check(&r);
	finish(&r);
}
END_TEST

/* A write under way when another one fails: it passed the front's check
 * while the index was sound, and reaches the committer after the failed
 * write.  It must be refused, as every write after the failed one is
 * until a fresh log begins (none can here: faultfs "create" fails the
 * probe of the disk), else it is acknowledged and a crash drops it with
 * the rest of the cut log block. */
START_TEST(test_index_write_under_way_at_failure)
{
	struct run r;
	struct resp rs;
	struct buf out = {0};
	const char *head = "PUT /big HTTP/1.1\r\nHost: x\r\nContent-Length: 131072\r\n\r\n";
	static char half[65536];
	char *url, *list;
	uint64_t end = now_ms() + 20000;
	bool taken = false;
	long st;
	int fd;
	start(&r, "");
	ck_assert_int_eq(put(&r, "a00"), 201);
	memset(half, 'z', sizeof(half));
	fd = h_connect(r.m.port);   /* a streamed PUT: its first record written, then held */
	ck_assert_int_ge(fd, 0);
	ck_assert(h_send(fd, head, strlen(head)) && h_send(fd, half, sizeof(half)));
	list = xasprintf("%s/?unlinked", r.m.base);
	while (!taken && now_ms() < end) {
		ck_assert_int_eq(h_http("GET", list, NULL, 0, NULL, false, &rs), 200);
		taken = rs.body.data && memmem(rs.body.data, rs.body.len, "/big", 4);
		h_resp_free(&rs);
		if (!taken)
			usleep(50000);
	}
	ck_assert_msg(taken, "the PUT of /big never wrote its first record");
	arm(&r, "write");
	ck_assert_int_ne(put(&r, "b00"), 201);
	arm(&r, "create");
	ck_assert(h_send(fd, half, sizeof(half)));
	st = h_recv_resp(fd, &out, 30000, false);
	buf_free(&out);
	close(fd);
	unlink(r.ctl);
	crash_and_check(&r);
	url = xasprintf("%s/big", r.m.base);
	if (st == 201) {
		long got = h_http("GET", url, NULL, 0, NULL, true, &rs);
		ck_assert_msg(got == 200 && rs.body.len == 2 * sizeof(half), "/big was answered 201 "
			      "after another write failed, and reads %ld after a crash", got);
		h_resp_free(&rs);
	}
	free(url), free(list);
	finish(&r);
}
END_TEST

/* A REPLACE cut short by a crash leaves its note ('r'), and the next
 * start settles the key from its copies.  When it can neither settle
 * (its volume hangs) nor unlink the key (the index fails that write),
 * the note must stay for the start after: else the key is served as it
 * is, its copies unchecked. */
START_TEST(test_replace_note_kept_when_unsettled)
{
	struct run r;
	static char half[65536];
	const char *head = "REPLACE /rkey HTTP/1.1\r\nHost: x\r\nContent-Length: 131072\r\n\r\n";
	char exe[4096] = "", *so, *cmd, *log, *vols;
	char port[16], *argv[] = {h_bin("mkv"), "-volumes", NULL, "-db", NULL, "-port", port,
				  "-replicas", "1", "server", NULL};
	uint64_t end;
	int fd;
	start(&r, "");
	argv[2] = vols = h_volumes_arg(&r.vol, 1);
	argv[4] = r.m.db;
	snprintf(port, sizeof(port), "%d", r.m.port);
	ck_assert_int_eq(put(&r, "rkey"), 201);
	memset(half, 'n', sizeof(half));
	fd = h_connect(r.m.port);
	ck_assert(fd >= 0 && h_send(fd, head, strlen(head)) && h_send(fd, half, sizeof(half)));
	/* past its note: the volume writes the new bytes (to an O_TMPFILE) */
	cmd = xasprintf("ls -l /proc/%d/fd | grep -q '(deleted)'", (int)r.vol.pid);
	for (end = now_ms() + 20000; system(cmd) != 0 && now_ms() < end;)
		usleep(50000);
	ck_assert_msg(now_ms() < end, "the REPLACE sent no bytes to its volume");
	h_stop(r.m.pid, SIGKILL);   /* cut short */
	r.m.pid = 0;
	close(fd);
	kill(r.vol.pid, SIGSTOP);   /* its copy cannot be read */
	ck_assert_int_gt(readlink("/proc/self/exe", exe, sizeof(exe) - 1), 0);
	*strrchr(exe, '/') = '\0';
	so = xasprintf("%s/faultfs.so", exe);
	setenv("LD_PRELOAD", so, 1);
	r.m.pid = h_spawn(argv, r.m.log);
	unsetenv("LD_PRELOAD");
	/* the index open (LevelDB holds its LOCK file); the copy's read then
	 * waits 10 s on the stopped volume */
	free(cmd);
	cmd = xasprintf("ls -l /proc/%d/fd 2>/dev/null | grep -q '/LOCK$'", (int)r.m.pid);
	for (end = now_ms() + 60000; system(cmd) != 0 && now_ms() < end;)
		usleep(20000);
	ck_assert_msg(now_ms() < end, "the master did not open its index");
	/* and settles the note: its read of the copy is connected to the
	 * stopped volume (armed sooner, a write of the index's own opening
	 * could fail, and the master exit) */
	free(cmd);
	cmd = xasprintf("grep -qi '^ *[0-9]*: [0-9A-F]*:[0-9A-F]* [0-9A-F]*:%04X 01 ' /proc/net/tcp",
			r.vol.port);
	for (end = now_ms() + 30000; system(cmd) != 0 && now_ms() < end;)
		usleep(20000);
	arm(&r, "write");     /* and the unlink's write fails */
	ck_assert_msg(h_wait_port(r.m.port, 60000), "the master did not start");
	unlink(r.ctl);
	kill(r.vol.pid, SIGCONT);
	crash_and_check(&r);   /* the next start: the note is still there */
	log = h_read_file(r.m.log);
	ck_assert_msg(log && strstr(log, "was cut short by a restart: 1 of its 1 copies"),
		      "the REPLACE's note was dropped unsettled: the next start did not settle /rkey");
	free(log), free(so), free(cmd), free(vols), free(argv[0]);
	finish(&r);
}
END_TEST

/* "reads go on" while the index's disk stalls.  claim()
 * asks store_writable on the poll thread, and index_writable takes wmu,
 * which the committer holds through leveldb_write's fdatasync (and
 * recover through a whole memtable flush).  A disk whose fdatasync
 * stalls (faultfs "hang") then parks every poll thread that gets a write
 * request, and GETs on those threads wait with them. */
START_TEST(test_index_stalled_sync_blocks_reads)
{
	struct run r;
	int fds[16];
	struct buf out = {0};
	long st;
	const char get[] = "GET /a00 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	start(&r, "");
	ck_assert_int_eq(put(&r, "a00"), 201);
	arm(&r, "hang");
	for (int i = 0; i < 16; i++) {   /* writes: the first stalls in fdatasync */
		char *req = xasprintf("PUT /h%d HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx", i);
		fds[i] = h_connect(r.m.port);
		ck_assert_int_ge(fds[i], 0);
		ck_assert_int_eq(write(fds[i], req, strlen(req)), (ssize_t)strlen(req));
		free(req);
		if (!i)
			sleep(2);
	}
	sleep(2);
	st = h_raw(r.m.port, get, strlen(get), &out, 20000);
	buf_free(&out);
	unlink(r.ctl);   /* the disk answers again */
	for (int i = 0; i < 16; i++)
		close(fds[i]);
	ck_assert_msg(st == 302 || st == 200, "a GET while the index's fdatasync stalls: %ld "
		      "(-1: no answer in 20 s)", st);
	finish(&r);
}
END_TEST

/* the sidecar fails while a write is under way (after
 * claim() found it writable).  The value's record is in the index, so the
 * write is acknowledged, but write_meta (meta_put) drops the sidecar's
 * error: an UploadPart answered 200 with its ETag has no metadata, and
 * CompleteMultipartUpload naming that very ETag is refused InvalidPart
 * once the sidecar is healthy again.  (ListObjects shows such a PutObject
 * as size 0, 1970.) */
START_TEST(test_sidecar_fails_mid_upload_part)
{
	struct run r;
	struct resp rs;
	struct buf out = {0};
	char *url, *id, *req, etag[33], *body;
	struct md5 *m;
	int fd;
	long st;
	start(&r, "/mkv-meta");
	r.buckets = true;
	ck_assert_int_eq(put(&r, "bkt"), 200);
	url = xasprintf("%s/bkt/obj?uploads", r.m.base);
	ck_assert_int_eq(h_http("POST", url, NULL, 0, s3hdr, false, &rs), 200);
	id = xstrndup(strstr(rs.body.data, "<UploadId>") + 10, 32);
	h_resp_free(&rs);
	free(url);
	req = xasprintf("PUT /bkt/obj?partNumber=1&uploadId=%s HTTP/1.1\r\nHost: x\r\n"
			"X-Amz-Content-Sha256: UNSIGNED-PAYLOAD\r\nContent-Length: 8\r\n\r\nabcd", id);
	fd = h_connect(r.m.port);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	sleep(1);             /* claimed: the sidecar was writable */
	arm(&r, "write");     /* and fails now */
	ck_assert_int_eq(write(fd, "efgh", 4), 4);
	st = h_recv_resp(fd, &out, 30000, false);
	close(fd);
	buf_free(&out);
	unlink(r.ctl);
	ck_assert_msg(st != 200 || put_until(&r, "bkt2"), "the sidecar never healed");
	if (st == 200) {   /* acknowledged: the part must be usable */
		m = md5_new();
		md5_update(m, "abcdefgh", 8);
		md5_final_hex(m, etag);
		md5_free(m);
		url = xasprintf("%s/bkt/obj?uploadId=%s", r.m.base, id);
		body = xasprintf("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
				 "<ETag>\"%s\"</ETag></Part></CompleteMultipartUpload>", etag);
		st = h_http("POST", url, body, strlen(body), s3hdr, false, &rs);
		ck_assert_msg(st == 200, "UploadPart was answered 200 (ETag %s), then "
			      "CompleteMultipartUpload: %ld %.*s", etag, st, (int)rs.body.len,
			      rs.body.data ? rs.body.data : "");
		h_resp_free(&rs);
		free(body);
		free(url);
	} else {
		fprintf(stderr, "test_sidecar_fails_mid_upload_part: the part was answered %ld\n", st);
	}
	free(req);
	free(id);
	finish(&r);
}
END_TEST

/* Held: kill -9 inside recover(), while the memtable's
 * flush waits on its table's fdatasync (a new log begun, the old one cut,
 * the MANIFEST not yet changed).  The restart recovers both logs. */
START_TEST(test_index_crash_inside_recover)
{
	struct run r;
	char key[64];
	const char *req = "PUT /late HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx";
	int fd;
	start(&r, "");
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "a%02d", i);
		ck_assert_int_eq(put(&r, key), 201);
	}
	arm(&r, "write");
	put(&r, "b00");
	ck_assert_int_gt(r.refused, 0);
	arm(&r, "hang");
	sleep(2);
	fd = h_connect(r.m.port);   /* its claim runs recover, which stalls */
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	sleep(2);
	{   /* inside it: a fresh log begun, the cut one still there */
		char *cmd = xasprintf("test $(ls %s | grep -c '\\.log$') -ge 2", r.m.db);
		ck_assert_msg(system(cmd) == 0, "recover is not under way");
		free(cmd);
	}
	crash_and_check(&r);
	close(fd);
	unlink(r.ctl);
	ck_assert_int_eq(put(&r, "c00"), 201);
	crash_and_check(&r);
	finish(&r);
}
END_TEST

/* a write answered 500 because its fdatasync failed is in
 * the log all the same (LevelDB appended it, only the sync failed), and a
 * restart replays it.  A PUT so refused has had its blobs removed
 * (cleanup_failed), and its DELETED record could not be written: after
 * the restart the key is live, listed, and names a blob that is gone. */
START_TEST(test_index_failed_sync_put_comes_back)
{
	struct run r;
	struct resp rs;
	char *url;
	long st;
	start(&r, "");
	ck_assert_int_eq(put(&r, "a00"), 201);
	arm(&r, "sync");
	st = put(&r, "ghost");
	ck_assert_msg(st != 201, "PUT ghost was taken with fdatasync failing");
	sleep(2);   /* its cleanup */
	unlink(r.ctl);
	crash_and_check(&r);
	url = xasprintf("%s/ghost", r.m.base);
	st = h_http("GET", url, NULL, 0, NULL, false, &rs);   /* 302: the master says live */
	h_resp_free(&rs);
	if (st == 302) {
		long got = h_http("GET", url, NULL, 0, NULL, true, &rs), again;
		char first[64];
		snprintf(first, sizeof(first), "%.*s", (int)strcspn(r.last_why, "\n"), r.last_why);
		if (!(got == 200 && rs.body.len == 5 && !memcmp(rs.body.data, "ghost", 5))) {
			again = put(&r, "ghost");   /* the client's retry */
			ck_assert_msg(0, "PUT ghost was answered %s; after a restart the master "
				      "serves it live (302) and its blob reads %ld: a live key whose "
				      "blob the PUT's cleanup removed (a retried PUT: %ld)", first,
				      got, again);
		}
	} else {
		ck_assert_int_eq(st, 404);
		memset(&rs, 0, sizeof(rs));
	}
	h_resp_free(&rs);
	free(url);
	finish(&r);
}
END_TEST

/* The same drop with an S3 PutObject over an object (a REPLACE): answered
 * 200, the new bytes served, and HEAD still gives the old ETag and size
 * for good, after the sidecar is healthy again. */
START_TEST(test_sidecar_fails_mid_s3_overwrite)
{
	struct run r;
	struct resp rs;
	struct buf out = {0};
	char *url, etag[33];
	const char *req = "PUT /bkt/obj HTTP/1.1\r\nHost: x\r\nX-Amz-Content-Sha256: "
			  "UNSIGNED-PAYLOAD\r\nContent-Length: 1048576\r\n\r\n";
	static char body[1 << 20];
	struct md5 *m;
	int fd;
	long st;
	size_t got;
	start(&r, "/mkv-meta");
	r.buckets = true;
	ck_assert_int_eq(put(&r, "bkt"), 200);
	url = xasprintf("%s/bkt/obj", r.m.base);
	ck_assert_int_eq(h_http("PUT", url, "abc", 3, s3hdr, false, &rs), 200);
	h_resp_free(&rs);
	fd = h_connect(r.m.port);
	ck_assert_int_ge(fd, 0);
	memset(body, 'z', sizeof(body));
	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	ck_assert_int_eq(write(fd, body, sizeof(body) / 2), (ssize_t)sizeof(body) / 2);
	sleep(1);   /* its 'r' note written, the bytes on their way */
	arm(&r, "write");
	ck_assert_int_eq(write(fd, body + sizeof(body) / 2, sizeof(body) / 2),
			 (ssize_t)sizeof(body) / 2);
	st = h_recv_resp(fd, &out, 30000, false);
	close(fd);
	buf_free(&out);
	unlink(r.ctl);
	if (st == 200) {
		ck_assert_msg(put_until(&r, "bkt2"), "the sidecar never healed");
		m = md5_new();
		md5_update(m, body, sizeof(body));
		md5_final_hex(m, etag);
		md5_free(m);
		ck_assert_int_eq(h_http("GET", url, NULL, 0, s3hdr, true, &rs), 200);
		got = rs.body.len;
		h_resp_free(&rs);
		ck_assert_int_eq(h_http("HEAD", url, NULL, 0, s3hdr, false, &rs), 200);
		buf_append(&rs.headers, "", 1);
		ck_assert_msg(got == sizeof(body) && strstr(rs.headers.data, etag) && strcasestr(rs.headers.data,
								      "Content-Length: 1048576"),
			      "PutObject of 1 MiB was answered 200; GET then gives %zu bytes, "
			      "and HEAD says:\n%s", got, rs.headers.data);
		h_resp_free(&rs);
	} else {
		fprintf(stderr, "test_sidecar_fails_mid_s3_overwrite: answered %ld\n", st);
		ck_assert_int_eq(h_http("GET", url, NULL, 0, s3hdr, false, &rs), 200);
		fprintf(stderr, "then GET: %ld, %zu bytes: %.40s\n", rs.status, rs.body.len, rs.body.data ? rs.body.data : "");
		h_resp_free(&rs);
	}
	free(url);
	finish(&r);
}
END_TEST

/* the first failed write is the request's own, so claim()
 * let it in.  DeleteBucket drops meta_raw_delete's error and answers 204;
 * once the sidecar heals, ListBuckets names the bucket again.  (Abort and
 * Complete of a multipart upload drop the same error for their 'u'
 * record.) */
START_TEST(test_sidecar_delete_bucket_comes_back)
{
	struct run r;
	struct resp rs;
	char *url;
	long st;
	start(&r, "/mkv-meta");
	r.buckets = true;
	ck_assert_int_eq(put(&r, "gone"), 200);
	arm(&r, "write");
	url = xasprintf("%s/gone", r.m.base);
	st = h_http("DELETE", url, NULL, 0, s3hdr, false, &rs);
	h_resp_free(&rs);
	free(url);
	unlink(r.ctl);
	ck_assert_msg(put_until(&r, "other"), "the sidecar never healed");
	url = xasprintf("%s/", r.m.base);
	ck_assert_int_eq(h_http("GET", url, NULL, 0, s3hdr, false, &rs), 200);
	buf_append(&rs.body, "", 1);
	ck_assert_msg(st != 204 || !strstr(rs.body.data, "<Name>gone</Name>"),
		      "DeleteBucket was answered 204; ListBuckets names it again");
	h_resp_free(&rs);
	free(url);
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
	tcase_add_test(tc, test_index_no_inode_for_new_log);
	tcase_add_test(tc, test_index_write_fault_outlasts_recover);
	tcase_add_test(tc, test_index_recover_without_new_log);
	tcase_add_test(tc, test_index_stalled_sync_blocks_reads);
	tcase_add_test(tc, test_index_write_under_way_at_failure);
	tcase_add_test(tc, test_replace_note_kept_when_unsettled);
	tcase_add_test(tc, test_sidecar_fails_mid_upload_part);
	tcase_add_test(tc, test_index_crash_inside_recover);
	tcase_add_test(tc, test_index_failed_sync_put_comes_back);
	tcase_add_test(tc, test_sidecar_fails_mid_s3_overwrite);
	tcase_add_test(tc, test_sidecar_delete_bucket_comes_back);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
