/* check_service.c -- running mkv as a service: /metrics read by the
 * reference parser and scraped by a real Prometheus, the status page in
 * headless chromium (tests/service_checks.py, Debian's packages: a missing
 * one fails), READY=1 and STOPPING=1 on a NOTIFY_SOCKET (the units are
 * tests/check_install.sh's), the access log (format, SIGHUP reopen,
 * drops counted), and clear errors at start for a -metrics address or an
 * access log that cannot be had. */
#include "harness.h"

#include <check.h>
#include <jansson.h>
#include <errno.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/select.h>
#include <pthread.h>
#include <unistd.h>

/* ---- helpers ---- */

/* Run argv to its end (killed after limit_ms), output into a fresh
 * string (*out, caller frees); the wait status. */
static int run(char *const argv[], char **out, uint64_t limit_ms)
{
	char *dir = h_tmpdir(), *log = xasprintf("%s/out", dir);
	pid_t pid = h_spawn(argv, log);
	int st = -1;
	uint64_t end = now_ms() + limit_ms;
	while (waitpid(pid, &st, WNOHANG) != pid) {
		if (now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			break;
		}
		usleep(10000);
	}
	*out = h_read_file(log);
	h_rmrf(dir);
	free(dir), free(log);
	return st;
}

/* tests/service_checks.py MODE args...: passes when it exits 0. */
static void py(const char *mode, const char *const *args)
{
	char *script = h_root("tests/service_checks.py"), *out, *argv[16];
	int n = 0, st;
	argv[n++] = "/usr/bin/python3";
	argv[n++] = script;
	argv[n++] = (char *)mode;
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	st = run(argv, &out, 100000);
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		size_t len = strlen(out);
		ck_abort_msg("service_checks.py %s failed:\n%s", mode, out + (len > 3000 ? len - 3000 : 0));
	}
	fprintf(stderr, "%s", out);
	free(out);
	free(script);
}

/* A file's contents holds s, within 20 s (the access log's writer flushes
 * every 100 ms). */
static bool file_has(const char *path, const char *s)
{
	for (uint64_t end = now_ms() + 20000; now_ms() < end; usleep(20000)) {
		char *t = h_read_file(path);
		bool yes = strstr(t, s) != NULL;
		free(t);
		if (yes)
			return true;
	}
	return false;
}

/* mkv-volume with flags, on a fresh port and directory, waited for. */
struct svol {
	int port, mport;
	pid_t pid;
	char *tmp, *dir, *log, name[32], base[64], metrics[64];
};

static void svol_start(struct svol *v, const char *const *flags)
{
	char *bin = h_bin("mkv-volume"), port[16], maddr[32], *argv[16];
	int n = 0;
	v->tmp = h_tmpdir();
	v->dir = xasprintf("%s/data", v->tmp);
	v->log = xasprintf("%s/volume.log", v->tmp);
	v->port = h_free_port();
	v->mport = h_free_port();
	snprintf(port, sizeof(port), "%d", v->port);
	snprintf(maddr, sizeof(maddr), "127.0.0.1:%d", v->mport);
	snprintf(v->name, sizeof(v->name), "127.0.0.1:%d", v->port);
	snprintf(v->base, sizeof(v->base), "http://127.0.0.1:%d", v->port);
	snprintf(v->metrics, sizeof(v->metrics), "http://127.0.0.1:%d", v->mport);
	argv[n++] = bin;
	argv[n++] = "-port";
	argv[n++] = port;
	argv[n++] = "-metrics";
	argv[n++] = maddr;
	for (int i = 0; flags && flags[i] && n < 14; i++)
		argv[n++] = (char *)flags[i];
	argv[n++] = v->dir;
	argv[n] = NULL;
	v->pid = h_spawn(argv, v->log);
	if (!h_wait_port(v->port, 10000) || !h_wait_port(v->mport, 10000))
		die("mkv-volume on port %d did not start (see %s)", v->port, v->log);
	free(bin);
}

/* Stop it: exit 0 on SIGTERM (killed: a SIGKILL the test sent is fine). */
static void svol_stop(struct svol *v, bool killed)
{
	int st;
	if (!v->tmp)
		return;
	st = h_stop(v->pid, SIGTERM);
	h_log_check(v->log);
	if (!(killed && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) &&
	    !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		die("mkv-volume on port %d: status %d on SIGTERM (see %s)", v->port, st, v->log);
	h_rmrf(v->tmp);
	free(v->tmp), free(v->dir), free(v->log);
	v->tmp = NULL;
}

/* ---- the cluster: 3 volumes and a master, each with -metrics ---- */

static struct svol sv[3];
static struct vol hv[3];      /* the same volumes, as the harness's master takes them */
static struct master m;
static char mmetrics[64];
static int mmport;

static void cluster_up(void)
{
	char maddr[32];
	const char *flags[] = {"-metrics", maddr, "-voltimeout", "500ms", NULL};
	for (int i = 0; i < 3; i++) {
		svol_start(&sv[i], NULL);
		hv[i] = (struct vol){.kind = VOL_MKV, .port = sv[i].port, .dir = sv[i].dir,
				     .name = sv[i].name};
	}
	mmport = h_free_port();
	snprintf(maddr, sizeof(maddr), "127.0.0.1:%d", mmport);
	snprintf(mmetrics, sizeof(mmetrics), "http://127.0.0.1:%d", mmport);
	h_master_start(&m, hv, 3, flags);
	if (!h_wait_port(mmport, 10000))
		die("the master's metrics listener did not start (see %s)", m.log);
}

static void cluster_down(void)
{
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		svol_stop(&sv[i], i == 2);   /* test_browser kills it (in its own process) */
}

START_TEST(test_metrics)
{
	const char *args[] = {m.base, mmetrics, sv[0].base, sv[0].metrics, NULL};
	py("metrics", args);
}
END_TEST

START_TEST(test_prometheus)
{
	char *tmp = h_tmpdir(), port[16], t[4][32];
	const char *args[] = {tmp, m.base, t[0], t[1], t[2], t[3], NULL};
	snprintf(port, sizeof(port), "%d", h_free_port());
	setenv("PROM_PORT", port, 1);
	snprintf(t[0], sizeof(t[0]), "127.0.0.1:%d", mmport);
	for (int i = 0; i < 3; i++)
		snprintf(t[i + 1], sizeof(t[i + 1]), "127.0.0.1:%d", sv[i].mport);
	py("prometheus", args);
	h_rmrf(tmp);
	free(tmp);
}
END_TEST

/* The status page as curl reads it, no script run: every volume's row
 * with its name, its state and a chart (<svg>), the master named by its
 * host and port, and the keys counted: after 50 PUTs the page and
 * /status say so, exactly (docs/protocol.md §6). */
START_TEST(test_page)
{
	char host[256], *want, *u, *page;
	struct resp r;
	json_t *st = NULL, *keys;
	uint64_t end;
	size_t before = 0;
	long code;

	ck_assert_int_eq(gethostname(host, sizeof(host)), 0);
	host[sizeof(host) - 1] = '\0';
	/* the keys the index holds now (live and unlinked), then 50 more */
	for (int unl = 0; unl < 2; unl++) {
		json_t *j;
		u = xasprintf("%s/?%s", m.base, unl ? "unlinked" : "list");
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
		j = json_loadb(r.body.data, r.body.len, 0, NULL);
		ck_assert_ptr_nonnull(j);
		before += json_array_size(json_object_get(j, "keys"));
		json_decref(j);
		h_resp_free(&r);
		free(u);
	}
	for (int i = 0; i < 50; i++) {
		u = xasprintf("%s/page-%d-%d", m.base, (int)getpid(), i);
		ck_assert_int_eq(h_http("PUT", u, "v", 1, NULL, false, &r), 201);
		h_resp_free(&r);
		free(u);
	}
	/* /status counts them within a liveness bound (a walk follows writes
	 * within a second here) */
	u = xasprintf("%s/status", mmetrics);
	for (end = now_ms() + 20000; now_ms() < end; usleep(50000)) {
		json_decref(st);
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
		st = json_loadb(r.body.data, r.body.len, 0, NULL);
		h_resp_free(&r);
		ck_assert_ptr_nonnull(st);
		if (json_is_string(json_object_get(st, "keys_kind")) &&
		    !strcmp(json_string_value(json_object_get(st, "keys_kind")), "exact"))
			break;
	}
	free(u);
	keys = json_object_get(st, "keys");
	ck_assert_msg(json_is_integer(keys) && (size_t)json_integer_value(keys) == before + 50,
		      "/status: keys %lld (%s), the index holds %zu",
		      (long long)json_integer_value(keys),
		      json_string_value(json_object_get(st, "keys_kind")), before + 50);
	want = xasprintf("%s:%d", host, m.port);
	ck_assert_msg(!strcmp(json_string_value(json_object_get(st, "name")), want),
		      "/status names the master %s, want %s",
		      json_string_value(json_object_get(st, "name")), want);
	json_decref(st);

	u = xasprintf("%s/", mmetrics);
	code = h_http("GET", u, NULL, 0, NULL, false, &r);
	free(u);
	ck_assert_int_eq(code, 200);
	page = xstrdup(r.body.data ? r.body.data : "");
	h_resp_free(&r);
	{
		char *title = xasprintf("<h1 id=\"title\">mkv master %s</h1>", want), *k;
		ck_assert_msg(strstr(page, title), "no %s in the page", title);
		k = xasprintf("<span id=\"keys\">keys: %zu</span>", before + 50);
		ck_assert_msg(strstr(page, k), "no %s in the page", k);
		free(title), free(k);
	}
	ck_assert_msg(strstr(page, "<div id=\"own\"><svg class=\"chart\""),
		      "no chart of the master's own requests");
	for (int i = 0; i < 3; i++) {
		char *row = xasprintf("<tr class=\"up\" data-volume=\"%s\" data-state=\"up\">"
				      "<td class=\"name\">%s</td><td class=\"state\">up (10/10)</td>",
				      sv[i].name, sv[i].name);
		char *at = strstr(page, row), *endrow = at ? strstr(at, "</tr>") : NULL, *svg;
		ck_assert_msg(at && endrow, "no row \"%s\" in the page:\n%s", row, page);
		svg = strstr(at, "<svg class=\"chart\"");
		ck_assert_msg(svg && svg < endrow, "%s: no chart in its row", sv[i].name);
		ck_assert_msg(strstr(at, " of ") < endrow, "%s: no disk in its row", sv[i].name);
		free(row);
	}
	free(page), free(want);

	/* the volume's page: its directories, each with its disk, and its chart */
	u = xasprintf("%s/", sv[0].metrics);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	free(u);
	want = xasprintf("<h1 id=\"title\">mkv volume %s:%d %s</h1>", host, sv[0].port, sv[0].dir);
	ck_assert_msg(strstr(r.body.data, want), "no %s in the volume's page", want);
	ck_assert(strstr(r.body.data, "<tr class=\"up\" data-volume=\"sv00\" data-state=\"up\">"));
	ck_assert(strstr(r.body.data, "<div id=\"own\"><svg class=\"chart\""));
	free(want);
	h_resp_free(&r);
}
END_TEST

/* Last of the case: it kills sv[2]. */
START_TEST(test_browser)
{
	char *tmp = h_tmpdir(), pid[16];
	const char *args[] = {tmp, mmetrics, sv[0].metrics, pid, sv[2].name, NULL};
	snprintf(pid, sizeof(pid), "%d", (int)sv[2].pid);
	py("browser", args);
	h_rmrf(tmp);
	free(tmp);
}
END_TEST

/* ---- systemd ---- */

/* A datagram from the daemon on sock within 20 s, into msg. */
static bool notified(int sock, char *msg, size_t n)
{
	struct timeval tv = {20, 0};
	ssize_t got;
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	got = recv(sock, msg, n - 1, 0);
	if (got < 0)
		return false;
	msg[got] = '\0';
	return true;
}

/* READY=1 once the daemon listens; STOPPING=1 on SIGTERM; then exit 0. */
static void notify_case(bool master)
{
	char *tmp = h_tmpdir(), *path = xasprintf("%s/notify", tmp), msg[256];
	char *log = xasprintf("%s/log", tmp);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), port = h_free_port(), st;
	char ports[16], *bin = h_bin(master ? "mkv" : "mkv-volume"), *db = xasprintf("%s/db", tmp);
	char *vols = xasprintf("127.0.0.1:%d", h_free_port());
	char *vargv[] = {bin, "-port", ports, db, NULL};
	char *margv[] = {bin, "-volumes", vols, "-replicas", "1", "-db", db, "-port", ports,
			 "server", NULL};
	pid_t pid;
	snprintf(ports, sizeof(ports), "%d", port);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(bind(sock, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setenv("NOTIFY_SOCKET", path, 1);
	pid = h_spawn(master ? margv : vargv, log);
	unsetenv("NOTIFY_SOCKET");
	ck_assert_msg(notified(sock, msg, sizeof(msg)), "no notification within 20 s");
	ck_assert_msg(strstr(msg, "READY=1"), "notified %s", msg);
	/* READY means listening: a connection is taken at once. */
	ck_assert_msg(h_wait_port(port, 0), "READY=1 before the port listens");
	kill(pid, SIGTERM);
	ck_assert_msg(notified(sock, msg, sizeof(msg)), "no STOPPING=1 within 20 s");
	ck_assert_msg(strstr(msg, "STOPPING=1"), "notified %s", msg);
	st = h_stop(pid, SIGTERM);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	close(sock);
	h_log_check(log);
	h_rmrf(tmp);
	free(tmp), free(path), free(bin), free(db), free(vols), free(log);
}

START_TEST(test_notify_volume)
{
	notify_case(false);
}
END_TEST

START_TEST(test_notify_master)
{
	notify_case(true);
}
END_TEST

/* ---- the access log ---- */

/* nginx's combined format and the request time. */
static const char combined[] =
	"^127\\.0\\.0\\.1 - - \\[[0-9]{2}/[A-Z][a-z]{2}/[0-9]{4}:[0-9]{2}:[0-9]{2}:[0-9]{2} "
	"[-+][0-9]{4}\\] \"PUT /first HTTP/1\\.1\" 201 0 \"-\" \"[^\"]*\" [0-9]+\\.[0-9]{3}$";

/* A line, its format, then logrotate: rename, SIGHUP, and the next
 * request's line goes to a new file by the old name. */
START_TEST(test_accesslog_reopen)
{
	char *tmp = h_tmpdir(), *logf = xasprintf("%s/access.log", tmp),
	     *old = xasprintf("%s/access.log.1", tmp), *u, *text, *nl;
	const char *flags[] = {"-accesslog", logf, NULL};
	struct master am = {0};
	struct vol v;
	regex_t re;
	struct stat st;
	h_vol_start(&v, VOL_MKV);
	h_master_start(&am, &v, 1, (const char *const[]){"-replicas", "1", "-accesslog", logf, NULL});
	(void)flags;
	u = xasprintf("%s/first", am.base);
	ck_assert_int_eq(h_http("PUT", u, "x", 1, NULL, false, &(struct resp){0}), 201);
	ck_assert_msg(file_has(logf, "\"PUT /first HTTP/1.1\" 201"), "no line for the PUT in %s", logf);
	text = h_read_file(logf);
	if ((nl = strchr(text, '\n')))
		*nl = '\0';
	ck_assert_int_eq(regcomp(&re, combined, REG_EXTENDED | REG_NOSUB), 0);
	ck_assert_msg(regexec(&re, text, 0, NULL, 0) == 0, "not nginx's combined format: %s", text);
	regfree(&re);
	free(text);
	/* issue 41, finding 5: the file is not for everyone, and a logged
	 * link is no credential (the signatures' values are left out) */
	{
		mode_t mask = umask(0);
		umask(mask);
		ck_assert_int_eq(stat(logf, &st), 0);
		ck_assert_msg((st.st_mode & 0777) == (0640 & ~mask), "mode %o", st.st_mode & 0777);
	}
	free(u);
	u = xasprintf("%s/s?X-Amz-Signature=sig4secret&Signature=sig2secret&md5=volsecret"
		      "&expires=1&x=1", am.base);
	h_http("GET", u, NULL, 0, (const char *[]){"Referer: http://h/p?a&Signature=refsecret",
						   NULL}, false, &(struct resp){0});
	ck_assert_msg(file_has(logf, "GET /s?X-Amz-Signature=\u2026&Signature=\u2026&md5=\u2026"
				     "&expires=1&x=1 HTTP/1.1"), "no redacted line in %s", logf);
	ck_assert_msg(file_has(logf, "\"http://h/p?a&Signature=\u2026\""), "the referer");
	text = h_read_file(logf);
	ck_assert_msg(!strstr(text, "secret"), "a signature in the log: %s", text);
	free(text);
	ck_assert_int_eq(rename(logf, old), 0);
	kill(am.pid, SIGHUP);
	/* The reopen creates the file: then the next line goes there. */
	for (uint64_t end = now_ms() + 20000; stat(logf, &st) && now_ms() < end;)
		usleep(10000);
	ck_assert_msg(stat(logf, &st) == 0, "SIGHUP made no new %s", logf);
	free(u);
	u = xasprintf("%s/second", am.base);
	ck_assert_int_eq(h_status("GET", u), 404);
	ck_assert_msg(file_has(logf, "\"GET /second HTTP/1.1\" 404"), "no line in the new file");
	text = h_read_file(old);
	ck_assert_msg(strstr(text, "/first") && !strstr(text, "/second"), "the old file: %s", text);
	free(text);
	h_master_stop(&am);
	h_vol_stop(&v);
	h_rmrf(tmp);
	free(tmp), free(logf), free(old), free(u);
}
END_TEST

/* The index's count in /status, or -1 while it is not known. */
static long long status_keys(const char *mbase)
{
	char *u = xasprintf("%s/status", mbase);
	struct resp r;
	json_t *st, *k;
	long long n = -1;
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	st = json_loadb(r.body.data, r.body.len, 0, NULL);
	ck_assert_ptr_nonnull(st);
	k = json_object_get(st, "keys");
	if (json_is_integer(k))
		n = json_integer_value(k);
	json_decref(st);
	h_resp_free(&r);
	free(u);
	return n;
}

/* The key count is kept as the index is written and with it across a
 * stop (DIR/mkv-keys), and walked again when the index changed behind
 * its back (docs/scale.md): a kept count that no longer matches the
 * files is not believed. */
START_TEST(test_keys_kept)
{
	char maddr[32], mbase[64], *u, *kf, *saved;
	const char *flags[] = {"-replicas", "1", "-metrics", maddr, NULL};
	struct master km = {0};
	struct vol v;
	int mp = h_free_port();
	long long n = -1;
	FILE *f;
	snprintf(maddr, sizeof(maddr), "127.0.0.1:%d", mp);
	snprintf(mbase, sizeof(mbase), "http://%s", maddr);
	h_vol_start(&v, VOL_MKV);
	h_master_start(&km, &v, 1, flags);
	ck_assert(h_wait_port(mp, 10000));
	/* a new index counts from 0 as it is written: 30 PUTs (one of them
	 * twice, refused), 5 DELETEs, 3 UNLINKs (still keys) */
	for (int i = 0; i < 30; i++) {
		u = xasprintf("%s/kept-%d", km.base, i);
		ck_assert_int_eq(h_http("PUT", u, "v", 1, NULL, false, &(struct resp){0}), 201);
		if (i < 5)
			ck_assert_int_eq(h_status("DELETE", u), 204);
		else if (i < 8)
			ck_assert_int_eq(h_status("UNLINK", u), 204);
		free(u);
	}
	u = xasprintf("%s/kept-29", km.base);
	ck_assert_int_eq(h_http("PUT", u, "v", 1, NULL, false, &(struct resp){0}), 403);
	free(u);
	ck_assert_int_eq(status_keys(mbase), 25);

	/* kept across a stop: the file is read, not the index walked (a
	 * count written into it shows) */
	h_master_down(&km);
	kf = xasprintf("%s/mkv-keys", km.db);
	saved = h_read_file(kf);
	ck_assert_msg(saved && !strncmp(saved, "mkv-keys 1 25 ", 14), "%s: %s", kf, saved);
	ck_assert_ptr_nonnull(f = fopen(kf, "w"));
	fprintf(f, "mkv-keys 1 999 %s", saved + 14);
	fclose(f);
	h_master_restart(&km, &v, 1, flags);
	ck_assert(h_wait_port(mp, 10000));
	ck_assert_int_eq(status_keys(mbase), 999);
	ck_assert_msg(access(kf, F_OK) < 0, "%s outlived the open", kf);

	/* a crash after a write, and the old file put back: its files no
	 * longer match, so the index is walked (26 keys) */
	u = xasprintf("%s/kept-new", km.base);
	ck_assert_int_eq(h_http("PUT", u, "v", 1, NULL, false, &(struct resp){0}), 201);
	free(u);
	kill(km.pid, SIGKILL);
	waitpid(km.pid, NULL, 0);
	km.pid = 0;
	ck_assert_ptr_nonnull(f = fopen(kf, "w"));
	fprintf(f, "mkv-keys 1 999 %s", saved + 14);
	fclose(f);
	h_master_restart(&km, &v, 1, flags);
	ck_assert(h_wait_port(mp, 10000));
	for (uint64_t end = now_ms() + 20000; (n = status_keys(mbase)) < 0 && now_ms() < end;)
		usleep(20000);
	ck_assert_int_eq(n, 26);
	h_master_stop(&km);
	h_vol_stop(&v);
	free(kf), free(saved);
}
END_TEST

/* A log that takes nothing (/dev/full: ENOSPC): requests are answered,
 * and every line is counted as dropped. */
START_TEST(test_accesslog_dropped)
{
	const char *flags[] = {"-accesslog", "/dev/full", NULL};
	struct svol v = {0};
	struct resp r = {0};
	char *u;
	bool seen = false;
	svol_start(&v, flags);
	u = xasprintf("%s/absent", v.base);
	for (int i = 0; i < 7; i++)
		ck_assert_int_eq(h_status("GET", u), 404);
	free(u);
	u = xasprintf("%s/metrics", v.metrics);
	for (uint64_t end = now_ms() + 20000; !seen && now_ms() < end; usleep(20000)) {
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
		seen = strstr(r.body.data, "\nmkv_accesslog_dropped_lines_total 7\n") != NULL;
		h_resp_free(&r);
	}
	ck_assert_msg(seen, "7 lines not counted as dropped");
	free(u);
	svol_stop(&v, false);
}
END_TEST

/* ---- bad input at start ---- */

/* argv must exit non-zero within 20 s, saying why. */
static void refused(char *const argv[], const char *why)
{
	char *out;
	int st = run(argv, &out, 20000);   /* a liveness bound: it exits at once */
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "%s %s: status %d, not an error exit",
		      argv[0], argv[2], st);
	ck_assert_msg(strstr(out, why), "%s %s %s: said \"%s\", not \"%s\"", argv[0], argv[1],
		      argv[2], out, why);
	free(out);
}

START_TEST(test_bad_start)
{
	char *tmp = h_tmpdir(), *vb = h_bin("mkv-volume"), *mb = h_bin("mkv"), port[16], busy[32];
	char *db = xasprintf("%s/db", tmp), *vols = xasprintf("127.0.0.1:%d", h_free_port());
	int hold = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	/* a port someone listens on */
	setsockopt(hold, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(hold, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(hold, 1), 0);
	getsockname(hold, (struct sockaddr *)&sa, &sl);
	snprintf(busy, sizeof(busy), "127.0.0.1:%d", ntohs(sa.sin_port));
	snprintf(port, sizeof(port), "%d", h_free_port());
	{
		char *a1[] = {vb, "-metrics", busy, "-port", port, tmp, NULL};
		char *a2[] = {vb, "-metrics", "nohost", "-port", port, tmp, NULL};
		char *a3[] = {vb, "-metrics", "127.0.0.1:70000", "-port", port, tmp, NULL};
		char *a4[] = {vb, "-accesslog", "/nonexistent/dir/access.log", "-port", port, tmp, NULL};
		char *a5[] = {mb, "-metrics", busy, "-volumes", vols, "-replicas", "1", "-db", db,
			      "-port", port, "server", NULL};
		char *a6[] = {mb, "-accesslog", "/nonexistent/dir/access.log", "-volumes", vols,
			      "-replicas", "1", "-db", db, "-port", port, "server", NULL};
		refused(a1, "Address already in use");
		refused(a2, "give HOST:PORT");
		refused(a3, "give HOST:PORT");
		refused(a4, "cannot open access log /nonexistent/dir/access.log: No such file");
		refused(a5, "Address already in use");
		refused(a6, "cannot open access log /nonexistent/dir/access.log: No such file");
	}
	close(hold);
	h_rmrf(tmp);
	free(tmp), free(vb), free(mb), free(db), free(vols);
}
END_TEST

/* ---- versions ---- */

/* A volume that says it is another mkv: every request on a connection of
 * its own gets a 200 with "Server: mkv/0.0~old" (the checker's HEADs). */
static int old_fd = -1;
static volatile int old_stop;
static void *old_volume(void *arg)
{
	(void)arg;
	while (!old_stop) {
		struct timeval tv = {0, 200000};
		fd_set fs;
		char req[4096];
		int c;
		size_t n = 0;
		FD_ZERO(&fs);
		FD_SET(old_fd, &fs);
		if (select(old_fd + 1, &fs, NULL, NULL, &tv) <= 0)
			continue;
		if ((c = accept(old_fd, NULL, NULL)) < 0)
			continue;
		while (n < sizeof(req) - 1) {
			ssize_t k = recv(c, req + n, sizeof(req) - 1 - n, 0);
			if (k <= 0)
				break;
			n += (size_t)k;
			req[n] = '\0';
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		static const char ans[] = "HTTP/1.1 200 OK\r\nServer: mkv/0.0~old\r\n"
					  "Content-Length: 0\r\nConnection: close\r\n\r\n";
		if (send(c, ans, sizeof(ans) - 1, MSG_NOSIGNAL) < 0)
			(void)0;
		close(c);
	}
	return NULL;
}

/* -version's "mkv VERSION (commit C)": both daemons send "Server:
 * mkv/VERSION", /metrics has mkv_build_info, /status and the page say
 * the version; the master logs each volume's at its first answer, and
 * says so, in the log and on the page, when a volume runs another. */
START_TEST(test_versions)
{
	char *mb = h_bin("mkv"), *out = NULL, ver[128] = "", commit[64] = "", *server, *u, *want;
	char *argv[] = {mb, "-version", NULL};
	char mport[32], mflag[48];
	struct vol v[2] = {{0}};
	struct master mm = {0};
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	struct resp r;
	pthread_t th;
	uint64_t end;
	int one = 1;
	ck_assert_int_eq(run(argv, &out, 10000), 0);
	ck_assert_msg(sscanf(out, "mkv %127s (commit %63[0-9a-f])", ver, commit) == 2, "%s", out);
	free(out);
	server = xasprintf("mkv/%s", ver);

	h_vol_start(&v[0], VOL_MKV);
	old_fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(old_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(old_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(old_fd, 16), 0);
	getsockname(old_fd, (struct sockaddr *)&sa, &sl);
	v[1].port = ntohs(sa.sin_port);
	v[1].name = xasprintf("127.0.0.1:%d", v[1].port);
	old_stop = 0;
	ck_assert_int_eq(pthread_create(&th, NULL, old_volume, NULL), 0);
	snprintf(mport, sizeof(mport), "%d", h_free_port());
	snprintf(mflag, sizeof(mflag), "127.0.0.1:%s", mport);
	{
		const char *flags[] = {"-replicas", "1", "-metrics", mflag, NULL};
		h_master_start(&mm, v, 2, flags);
	}

	/* the Server header, on both daemons and the metrics listener */
	u = xasprintf("%s/nosuchkey", mm.base);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 404);
	ck_assert_str_eq(h_header(&r, "Server"), server);
	h_resp_free(&r), free(u);
	u = xasprintf("http://%s/nosuchfile", v[0].name);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 404);
	ck_assert_str_eq(h_header(&r, "Server"), server);
	h_resp_free(&r), free(u);

	/* the log: each volume's server at its first answer, the old one named */
	want = xasprintf("volume %s runs %s", v[0].name, server);
	for (end = now_ms() + 20000; now_ms() < end; usleep(50000)) {
		char *log = h_read_file(mm.log);
		bool both = log && strstr(log, want) && strstr(log, "runs mkv/0.0~old, the master");
		free(log);
		if (both)
			break;
	}
	{
		char *log = h_read_file(mm.log);
		ck_assert_msg(log && strstr(log, want), "no \"%s\" in %s", want, mm.log);
		ck_assert_msg(strstr(log, "runs mkv/0.0~old, the master mkv/") &&
			      strstr(log, "versions differ"), "the old volume not named in %s", mm.log);
		free(log);
	}
	free(want);

	/* /metrics, /status, the page */
	u = xasprintf("http://%s/metrics", mflag);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	want = xasprintf("mkv_build_info{version=\"%s\",commit=\"%s\"} 1\n", ver, commit);
	ck_assert_msg(memmem(r.body.data, r.body.len, want, strlen(want)), "no %s", want);
	ck_assert_str_eq(h_header(&r, "Server"), server);
	h_resp_free(&r), free(u), free(want);
	u = xasprintf("http://%s/status", mflag);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	{
		json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL), *vs;
		ck_assert_ptr_nonnull(j);
		ck_assert_str_eq(json_string_value(json_object_get(j, "version")), ver);
		vs = json_object_get(j, "volumes");
		ck_assert_int_eq(json_array_size(vs), 2);
		for (size_t i = 0; i < 2; i++) {
			json_t *e = json_array_get(vs, i);
			bool old = !strcmp(json_string_value(json_object_get(e, "name")), v[1].name);
			ck_assert_str_eq(json_string_value(json_object_get(e, "server")),
					 old ? "mkv/0.0~old" : server);
			ck_assert(json_is_true(json_object_get(e, "version_differs")) == old);
		}
		json_decref(j);
	}
	h_resp_free(&r), free(u);
	u = xasprintf("http://%s/", mflag);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	want = xasprintf("runs mkv/0.0~old, not %s", server);
	ck_assert_msg(memmem(r.body.data, r.body.len, want, strlen(want)), "page: no %s", want);
	free(want);
	want = xasprintf("%s (commit %.12s)", server, commit);
	ck_assert_msg(memmem(r.body.data, r.body.len, want, strlen(want)), "page: no %s", want);
	h_resp_free(&r), free(u), free(want);

	h_master_stop(&mm);
	old_stop = 1;
	pthread_join(th, NULL);
	close(old_fd);
	free(v[1].name);
	h_vol_stop(&v[0]);
	free(server), free(mb);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("service");
	TCase *tc = tcase_create("cluster");
	TCase *one = tcase_create("one");
	SRunner *sr;
	int failed;
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, cluster_up, cluster_down);
	tcase_add_test(tc, test_metrics);
	tcase_add_test(tc, test_prometheus);
	tcase_add_test(tc, test_page);
	tcase_add_test(tc, test_browser);   /* last: it kills a volume */
	suite_add_tcase(s, tc);
	tcase_set_timeout(one, 60);
	tcase_add_test(one, test_notify_volume);
	tcase_add_test(one, test_notify_master);
	tcase_add_test(one, test_accesslog_reopen);
	tcase_add_test(one, test_accesslog_dropped);
	tcase_add_test(one, test_keys_kept);
	tcase_add_test(one, test_bad_start);
	tcase_add_test(one, test_versions);
	suite_add_tcase(s, one);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
