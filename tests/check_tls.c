/* check_tls.c -- TLS on every hop (docs/security.md): certificates made
 * by openssl at test time (tests/tls_certs.sh), a master with -tls over
 * volumes with -tls of either kind, named https:// in -volumes.
 *  - clients: curl, mkvread, mkv put/get, boto3, aws, rclone, s3cmd, each
 *    with its own CA option, and failing without it (tests/tls_clients.py);
 *  - plain HTTP sent to a TLS port: 400, never a hang; stalled handshakes
 *    hold no loop;
 *  - SIGHUP under load: a renewed certificate, then a bad file, and no
 *    failed request;
 *  - the master refuses a volume it cannot verify (another CA, another
 *    name): the volume is down, the log names it, nothing is written. */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/util.h"
#include "harness.h"

static char *certs, *srv_tls, *ca;

static void certs_make(void)
{
	char *dir = h_tmpdir(), *script = h_root("tests/tls_certs.sh");
	char *argv[] = {"/bin/sh", script, dir, NULL};
	int st;
	waitpid(h_spawn(argv, NULL), &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		die("tests/tls_certs.sh failed");
	certs = dir;
	srv_tls = xasprintf("%s/srv.pem,%s/srv.key", dir, dir);
	ca = xasprintf("%s/ca.pem", dir);
	free(script);
}

static void certs_remove(void)
{
	h_rmrf(certs);
	free(certs), free(srv_tls), free(ca);
}

/* script (tests/tls_clients.py) with args; fails the test with its log's end. */
static void python(char *const *args)
{
	char *script = h_root("tests/tls_clients.py"), *log = xasprintf("%s/py.log", certs);
	char *argv[16] = {"/usr/bin/python3", script};
	int st, n = 2;
	while (*args && n < 15)
		argv[n++] = *args++;
	waitpid(h_spawn(argv, log), &st, 0);
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		char *out = h_read_file(log);
		size_t len = strlen(out);
		ck_abort_msg("tls_clients.py failed:\n%s", out + (len > 3000 ? len - 3000 : 0));
	}
	unlink(log);
	free(script), free(log);
}

static void master_tls(struct master *m, struct vol *v, int n, const char *tls, const char *cacert)
{
	char replicas[8];
	const char *flags[] = {"-tls", tls, "-cacert", cacert, "-replicas", replicas, NULL};
	snprintf(replicas, sizeof(replicas), "%d", n < 3 ? n : 3);
	h_master_start(m, v, n, flags);
	snprintf(m->base, sizeof(m->base), "https://127.0.0.1:%d", m->port);
}

START_TEST(test_clients)
{
	enum vol_kind kind = _i ? VOL_NGINX : VOL_MKV;
	struct vol v[3] = {0};
	struct master m = {0};
	char *work = xasprintf("%s/work", certs), *bin = h_bin(""), *root = h_root(""), *volumes;
	for (int i = 0; i < 3; i++)
		h_vol_start_tls(&v[i], kind, srv_tls);
	master_tls(&m, v, 3, srv_tls, ca);
	volumes = h_volumes_arg(v, 3);
	python((char *[]){m.base, ca, work, bin, root, volumes, NULL});
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&v[i]);
	h_rmrf(work);
	free(work), free(bin), free(root), free(volumes);
}
END_TEST

/* A plain request to a TLS port: nginx's 400, at once.  On mkv's ports
 * (ours), bytes no TLS client sends first (0x80 and up: an SSLv2 hello's
 * length, which gnutls, and nginx, would wait for): a 400 or a close,
 * never a wait for -idletimeout. */
static void plain_to(int port, bool ours)
{
	static const char req[] = "GET /k HTTP/1.1\r\nHost: x\r\n\r\n", bin[] = "\x80\x40\x01";
	struct buf out = {0};
	long st = ours ? h_raw(port, bin, sizeof(bin) - 1, NULL, 10000) : 0;
	ck_assert_msg(st == 400 || st == 0, "bytes 0x80 0x40 0x01 to TLS port %d: %ld", port, st);
	st = h_raw(port, req, sizeof(req) - 1, &out, 10000);
	ck_assert_msg(st == 400, "plain HTTP to TLS port %d: %ld", port, st);
	ck_assert(out.data && strstr(out.data, "The plain HTTP request was sent to HTTPS port"));
	buf_free(&out);
}

START_TEST(test_plain_http)
{
	struct vol v[2] = {0};
	struct master m = {0};
	h_vol_start_tls(&v[0], VOL_MKV, srv_tls);
	h_vol_start_tls(&v[1], VOL_NGINX, srv_tls);
	master_tls(&m, v, 2, srv_tls, ca);
	plain_to(m.port, true);
	plain_to(v[0].port, true);
	plain_to(v[1].port, false);
	h_master_stop(&m);
	h_vol_stop(&v[0]);
	h_vol_stop(&v[1]);
}
END_TEST

START_TEST(test_reload)
{
	struct vol v[1] = {0};
	struct master m = {0};
	char *live = xasprintf("%s/live.pem,%s/live.key", certs, certs), pid[16];
	char *cp = xasprintf("cp %s/srv.pem %s/live.pem && cp %s/srv.key %s/live.key", certs, certs,
			     certs, certs);
	ck_assert_int_eq(system(cp), 0);
	h_vol_start_tls(&v[0], VOL_MKV, srv_tls);
	master_tls(&m, v, 1, live, ca);
	snprintf(pid, sizeof(pid), "%d", (int)m.pid);
	python((char *[]){"reload", m.base, ca, certs, pid, m.log, NULL});
	h_master_stop(&m);
	h_vol_stop(&v[0]);
	free(live), free(cp);
}
END_TEST

/* A master with -tls over one mkv-volume with -tls, and its end. */
static void pair_start(struct master *m, struct vol *v)
{
	h_vol_start_tls(&v[0], VOL_MKV, srv_tls);
	master_tls(m, v, 1, srv_tls, ca);
}

static void pair_stop(struct master *m, struct vol *v)
{
	h_master_stop(m);
	h_vol_stop(&v[0]);
}

/* Handshakes that stall halfway (a ClientHello's first bytes, then
 * nothing) hold no loop: a whole request over TLS is answered meanwhile
 * (within curl's --max-time: a liveness bound, not a speed). */
START_TEST(test_stalled_handshakes)
{
	static const char half[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
	enum { N = 200 };
	struct vol v[1] = {0};
	struct master m = {0};
	int fds[2 * N];
	char *cmd;
	pair_start(&m, v);
	for (int i = 0; i < 2 * N; i++) {   /* on the master's port and the volume's */
		ck_assert((fds[i] = h_connect(i < N ? m.port : v[0].port)) >= 0);
		ck_assert(h_send(fds[i], half, sizeof(half) - 1));
	}
	cmd = xasprintf("curl -s -o /dev/null -w '%%{http_code}' --max-time 10 --cacert %s -X PUT "
			"-d x %s/stalled | grep -qx 201", ca, m.base);
	ck_assert_msg(system(cmd) == 0, "a PUT over TLS beside %d stalled handshakes", 2 * N);
	for (int i = 0; i < 2 * N; i++)
		close(fds[i]);
	pair_stop(&m, v);
	free(cmd);
}
END_TEST

/* Handshakes that wait for the client (a whole ClientHello, answered,
 * then nothing) cost no CPU while they wait, on the master's loops and
 * mkv-volume's threads alike: libmicrohttpd alone would run them again and
 * again (tls_clients.py waiting). */
START_TEST(test_waiting_handshakes)
{
	struct vol v[1] = {0};
	struct master m = {0};
	char mp[32], vp[32];
	pair_start(&m, v);
	snprintf(mp, sizeof(mp), "%d:%d", (int)m.pid, m.port);
	snprintf(vp, sizeof(vp), "%d:%d", (int)v[0].pid, v[0].port);
	python((char *[]){"waiting", m.base, ca, mp, vp, NULL});
	pair_stop(&m, v);
}
END_TEST

/* A burst of ClientHellos (a signature each) does not hold the requests
 * of connections already open: a loop begins a few handshakes a turn
 * (tls_clients.py burst). */
START_TEST(test_handshake_burst)
{
	struct vol v[1] = {0};
	struct master m = {0};
	pair_start(&m, v);
	python((char *[]){"burst", m.base, ca, NULL});
	pair_stop(&m, v);
}
END_TEST

/* SIGTERM while handshakes are parked and queued (tls_clients.py stop):
 * the master and mkv-volume exit 0, as libmicrohttpd, which aborts when a
 * daemon stops with a connection suspended, never sees one. */
START_TEST(test_stop_handshakes)
{
	struct vol v[1] = {0};
	struct master m = {0};
	char mp[32], vp[32];
	pair_start(&m, v);
	snprintf(mp, sizeof(mp), "%d:%d", (int)m.pid, m.port);
	snprintf(vp, sizeof(vp), "%d:%d", (int)v[0].pid, v[0].port);
	python((char *[]){"stop", mp, vp, NULL});
	pair_stop(&m, v);   /* the master exited by now: its status is checked */
}
END_TEST

/* Clients that refuse the certificate (curl without the CA: an alert,
 * then a close) while their handshake is parked: the connection, resumed,
 * fails and is freed at once, on mkv-volume by a thread of libmicrohttpd's
 * while the resuming thread still held it (a use after free under
 * SANITIZE=1); then a request is answered and both stop cleanly. */
START_TEST(test_refused_handshakes)
{
	struct vol v[1] = {0};
	struct master m = {0};
	char *cmd;
	pair_start(&m, v);
	cmd = xasprintf("for i in $(seq 100); do for p in %d %d; do curl -s -o /dev/null --max-time 10 "
			"https://127.0.0.1:$p/x; [ $? = 60 ] || exit 1; done; done", v[0].port, m.port);
	ck_assert_msg(system(cmd) == 0, "curl without the CA: not a verification failure");
	free(cmd);
	cmd = xasprintf("curl -s -o /dev/null -w '%%{http_code}' --max-time 30 --cacert %s "
			"%s/refused/key | grep -qx 404", ca, m.base);
	ck_assert_msg(system(cmd) == 0, "a GET after 200 refused handshakes");
	free(cmd);
	pair_stop(&m, v);
}
END_TEST

/* Mixed schemes (a migration): one https volume, one http; the master
 * (plain here) writes both, redirects to each by its scheme, and the
 * metrics and the status page show each volume's. */
START_TEST(test_mixed)
{
	struct vol v[2] = {0};
	struct master m = {0};
	struct resp r = {0};
	int mp = h_free_port();
	char maddr[32], *want[4], *url, *page;
	bool seen[2] = {false, false};
	const char *flags[] = {"-replicas", "2", "-cacert", ca, "-metrics", maddr, NULL};
	uint64_t end = now_ms() + 30000;
	snprintf(maddr, sizeof(maddr), "127.0.0.1:%d", mp);
	h_vol_start_tls(&v[0], VOL_MKV, srv_tls);
	h_vol_start(&v[1], VOL_NGINX);
	h_master_start(&m, v, 2, flags);
	url = xasprintf("%s/mixed", m.base);
	while (h_http("PUT", url, "both", 4, NULL, false, &r) != 201 && now_ms() < end) {
		h_resp_free(&r);
		usleep(100000);
	}
	ck_assert_int_eq(r.status, 201);
	h_resp_free(&r);
	for (int i = 0; i < 40; i++) {   /* a random replica each: both show up */
		bool tls;
		ck_assert_int_eq(h_http("GET", url, NULL, 0, NULL, false, &r), 302);
		tls = strstr(r.location, v[0].name) != NULL;
		seen[tls] = true;
		ck_assert_msg(!strncmp(r.location, tls ? "https://" : "http://", tls ? 8 : 7), "%s",
			      r.location);
		h_resp_free(&r);
	}
	ck_assert(seen[0] && seen[1]);
	want[0] = xasprintf("mkv_volume_up{volume=\"%s\",scheme=\"https\"} 1", v[0].name);
	want[1] = xasprintf("mkv_volume_up{volume=\"%s\",scheme=\"http\"} 1", v[1].name);
	want[2] = xasprintf("\"name\":\"https://%s\"", v[0].name);   /* the status page's JSON */
	want[3] = xasprintf("\"name\":\"%s\"", v[1].name);
	free(url);
	url = xasprintf("http://%s/metrics", maddr);
	ck_assert_int_eq(h_http("GET", url, NULL, 0, NULL, false, &r), 200);
	page = xstrndup(r.body.data, r.body.len);
	h_resp_free(&r);
	ck_assert_msg(strstr(page, want[0]) && strstr(page, want[1]), "%s", page);
	free(page), free(url);
	url = xasprintf("http://%s/status", maddr);
	ck_assert_int_eq(h_http("GET", url, NULL, 0, NULL, false, &r), 200);
	page = xstrndup(r.body.data, r.body.len);
	h_resp_free(&r);
	ck_assert_msg(strstr(page, want[2]) && strstr(page, want[3]), "%s", page);
	free(page), free(url);
	for (int i = 0; i < 4; i++)
		free(want[i]);
	h_master_stop(&m);
	h_vol_stop(&v[0]);
	h_vol_stop(&v[1]);
}
END_TEST

/* -fallback https://host:port: a missing key's 302 keeps its scheme. */
START_TEST(test_fallback)
{
	const char *flags[] = {"-fallback", "https://other.example:8443", "-replicas", "1", NULL};
	struct vol v[1] = {0};
	struct master m = {0};
	struct resp r = {0};
	char *url;
	h_vol_start_tls(&v[0], VOL_MKV, srv_tls);
	h_master_start(&m, v, 1, flags);
	url = xasprintf("%s/missing", m.base);
	ck_assert_int_eq(h_http("GET", url, NULL, 0, NULL, false, &r), 302);
	ck_assert_str_eq(r.location, "https://other.example:8443/missing");
	h_resp_free(&r);
	h_master_stop(&m);
	h_vol_stop(&v[0]);
	free(url);
}
END_TEST

/* Does dir hold a file (blobs are files; the volume's own are dotfiles)? */
static bool holds_blob(const char *dir)
{
	char *cmd = xasprintf("find '%s' -type f ! -name '.*' | grep -q .", dir);
	bool yes = system(cmd) == 0;
	free(cmd);
	return yes;
}

/* The master cannot verify the volume: another CA (_i 0), or a
 * certificate for another name (_i 1), or one that expired (_i 2). */
START_TEST(test_refused)
{
	char *other = xasprintf("%s/other.pem,%s/other.key", certs, certs),
	     *expired = xasprintf("%s/expired.pem,%s/expired.key", certs, certs);
	char *wrong = xasprintf("%s/wrongca.pem", certs), *put, *log;
	const char *why = _i == 2 ? "certificate has expired"   /* _i 1: the health check's line, whole */
			  : _i ? "subject name matches target host name '127.0.0.1'; marked down"
			       : "certificate";
	struct vol v[1] = {0};
	struct master m = {0};
	uint64_t end = now_ms() + 30000;
	h_vol_start_tls(&v[0], VOL_MKV, _i == 2 ? expired : _i ? other : srv_tls);
	master_tls(&m, v, 1, srv_tls, _i ? ca : wrong);
	/* the log names the volume and why */
	for (log = h_read_file(m.log); !(strstr(log, v[0].name) && strstr(log, why)) &&
					now_ms() < end;
	     log = h_read_file(m.log)) {
		free(log);
		usleep(50000);
	}
	ck_assert_msg(strstr(log, v[0].name) && strstr(log, why), "master log:\n%s", log);
	free(log);
	/* nothing is written (curl: h_http has no CA of ours) */
	put = xasprintf("curl -s -o /dev/null -w '%%{http_code}' --cacert %s -X PUT -d x "
			"%s/refused | grep -qx 503", ca, m.base);
	ck_assert_int_eq(system(put), 0);
	ck_assert(!holds_blob(v[0].dir));
	free(put);
	/* the loops' client (rebuild's pipelined listings) refuses it too,
	 * and says why */
	{
		char *mkv = h_bin("mkv"), *tmp = h_tmpdir();
		put = xasprintf("%s -volumes https://%s -replicas 1 -cacert %s -db %s/db rebuild "
				"2>&1 | tee /dev/stderr | grep -q 'failed: .*certificate: '", mkv,
				v[0].name, _i ? ca : wrong, tmp);
		ck_assert_int_eq(system(put), 0);
		free(mkv), free(tmp);
	}
	h_master_stop(&m);
	h_vol_stop(&v[0]);
	free(other), free(expired), free(wrong), free(put);
}
END_TEST

/* SIGHUP with the same files (logrotate's, for -accesslog) keeps what it
 * loaded: the memory of 1000 reloads stays bounded (each reload kept a
 * copy, ~8 KiB, until the master stopped). */
START_TEST(test_reload_same)
{
	struct vol v[1] = {0};
	struct master m = {0};
	struct stat st;
	long before = 0;
	pair_start(&m, v);
	for (int i = 0; i < 1100; i++) {
		uint64_t end = now_ms() + 30000;
		off_t was = stat(m.log, &st) ? 0 : st.st_size;
		if (i == 100)
			before = h_rss_kib(m.pid);   /* the allocator's arenas made */
		kill(m.pid, SIGHUP);
		while (!stat(m.log, &st) && st.st_size == was && now_ms() < end)
			usleep(1000);   /* each reload logs a line */
		ck_assert_msg(st.st_size > was, "SIGHUP %d: no reload logged", i);
	}
	/* under the sanitizer the quarantine keeps what is freed (64 MiB) */
	ck_assert_msg(getenv("MKV_CHILD_ASAN_OPTIONS") || h_rss_kib(m.pid) - before < 4096,
		      "RSS %ld KiB, then %ld after 1000 SIGHUPs", before, h_rss_kib(m.pid));
	pair_stop(&m, v);
}
END_TEST

/* curl --cacert over https to the master: method on path, its status. */
static int tls_status(const struct master *m, const char *method, const char *path)
{
	char *cmd = xasprintf("curl -s -o /dev/null -w '%%{http_code}' --cacert %s -X %s%s '%s%s'",
			      ca, method, strcmp(method, "PUT") ? "" : " -d x", m->base, path);
	FILE *f = popen(cmd, "r");
	int st = 0;
	ck_assert(f && fscanf(f, "%d", &st) == 1);
	pclose(f);
	free(cmd);
	return st;
}

/* The master's small requests to https volumes (the loops' client's, or
 * libcurl's while that speaks plain HTTP only): a DELETE's fan-out, an
 * UNLINKed key's DELETE, a rebalance's moves, all answered as with plain
 * volumes. */
START_TEST(test_small_requests)
{
	struct vol v[2] = {0};
	struct master m = {0};
	const char *flags[] = {"-tls", srv_tls, "-cacert", ca, "-replicas", "1", NULL};
	char path[32], *volumes, *cmd;
	h_vol_start_tls(&v[0], VOL_MKV, srv_tls);
	h_vol_start_tls(&v[1], VOL_MKV, srv_tls);
	master_tls(&m, v, 1, srv_tls, ca);
	for (int i = 0; i < 8; i++) {
		snprintf(path, sizeof(path), "/small%d", i);
		ck_assert_int_eq(tls_status(&m, "PUT", path), 201);
	}
	ck_assert_int_eq(tls_status(&m, "DELETE", "/small0"), 204);
	ck_assert_int_eq(tls_status(&m, "UNLINK", "/small1"), 204);
	ck_assert_int_eq(tls_status(&m, "DELETE", "/small1?unlinked"), 204);
	ck_assert_int_eq(tls_status(&m, "GET", "/small0"), 404);
	/* a second volume: rebalance moves about half the keys to it */
	h_master_restart(&m, v, 2, flags);
	snprintf(m.base, sizeof(m.base), "https://127.0.0.1:%d", m.port);
	volumes = h_volumes_arg(v, 2);
	cmd = xasprintf("%s -volumes %s -master %s -replicas 1 -cacert %s rebalance >%s/reb.log 2>&1",
			h_bin("mkv"), volumes, m.base, ca, certs);
	ck_assert_msg(system(cmd) == 0, "%s", cmd);
	for (int i = 2; i < 8; i++) {
		snprintf(path, sizeof(path), "/small%d", i);
		free(cmd);
		cmd = xasprintf("curl -sf -L --cacert %s %s%s | grep -qx x", ca, m.base, path);
		ck_assert_msg(system(cmd) == 0, "%s after rebalance", path);
	}
	ck_assert(holds_blob(v[1].dir));
	h_master_stop(&m);
	h_vol_stop(&v[0]);
	h_vol_stop(&v[1]);
	free(volumes), free(cmd);
}
END_TEST

/* Flags that cannot work are usage errors at start (exit 2, naming the
 * flag's value), not a master that runs with every volume down, nor a
 * command that fails each request; the server, then a command (verify
 * -master).  _i 0-2: -cacert naming no CA (a missing file, an empty one, a
 * key), as curl --cacert's and nginx's; 3-: a -volumes entry that is not
 * [http://|https://]host:port (another scheme, a path). */
static const char *const bad_vols[] = {"ftp://127.0.0.1:1", "https://127.0.0.1:1/",
				       "127.0.0.1:1/sv00"};

START_TEST(test_bad_flags)
{
	char *dir = h_tmpdir(), *db = xasprintf("%s/db", dir), *bin = h_bin("mkv");
	char *files[] = {xasprintf("%s/missing.pem", dir), xasprintf("%s/empty.pem", dir),
			 xasprintf("%s/srv.key", certs)};
	char *log = xasprintf("%s/log", dir), *out;
	const char *vols = _i < 3 ? "https://127.0.0.1:1" : bad_vols[_i - 3];
	const char *cafile = _i < 3 ? files[_i] : ca, *says = _i < 3 ? files[_i] : vols;
	fclose(fopen(files[1], "w"));
	for (int cmd = 0; cmd < 2; cmd++) {
		char port[8];
		snprintf(port, sizeof(port), "%d", h_free_port());
		char *argv[] = {bin, "-volumes", (char *)vols, cmd ? "-master" : "-db",
				cmd ? "https://127.0.0.1:1" : db, "-cacert", (char *)cafile,
				"-replicas", "1", "-port", port, cmd ? "verify" : "server", NULL};
		pid_t pid = h_spawn(argv, log);
		int st;
		if (!h_wait_gone(pid, 30000)) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			ck_abort_msg("mkv -volumes %s -cacert %s %s: still running", vols, cafile,
				     argv[11]);
		}
		waitpid(pid, &st, 0);
		out = h_read_file(log);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(out, says),
			      "mkv -volumes %s -cacert %s %s: status %d, said:\n%s", vols, cafile,
			      argv[11], st, out);
		free(out);
	}
	h_rmrf(dir);
	for (int i = 0; i < 3; i++)
		free(files[i]);
	free(dir), free(db), free(bin), free(log);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tls");
	TCase *tc = tcase_create("clients"), *hup = tcase_create("reload"),
	      *plain = tcase_create("plain"), *bad = tcase_create("refused");
	SRunner *sr;
	int failed;
	certs_make();
	tcase_add_loop_test(tc, test_clients, 0, 2);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(s, tc);
	tcase_add_test(plain, test_plain_http);
	tcase_add_test(plain, test_fallback);
	tcase_add_test(plain, test_mixed);
	tcase_add_test(plain, test_stalled_handshakes);
	tcase_add_test(plain, test_waiting_handshakes);
	tcase_add_test(plain, test_handshake_burst);
	tcase_add_test(plain, test_stop_handshakes);
	tcase_add_test(plain, test_refused_handshakes);
	tcase_set_timeout(plain, 120);
	suite_add_tcase(s, plain);
	tcase_add_test(hup, test_reload);
	tcase_add_test(hup, test_reload_same);
	tcase_set_timeout(hup, 300);
	suite_add_tcase(s, hup);
	tcase_add_loop_test(bad, test_refused, 0, 3);
	tcase_add_test(bad, test_small_requests);
	tcase_add_loop_test(bad, test_bad_flags, 0, 6);
	tcase_set_timeout(bad, 120);
	suite_add_tcase(s, bad);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	certs_remove();
	return failed ? 1 : 0;
}
