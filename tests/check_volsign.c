/* check_volsign.c -- -volumesecret (docs/security.md): volume
 * links signed in nginx's secure_link form.
 *
 *   - units: the hash against values computed by hand (Python's hashlib,
 *     as nginx documents the form), url signing and checking, two secrets.
 *   - refusals, on mkv-volume and on nginx: 403 (410 expired) and nothing
 *     on disk changes for unsigned writes, reads and listings, a wrong
 *     secret, another path, a GET's signature replayed as PUT or DELETE, a
 *     pull whose source is unsigned.
 *   - cluster, on both: the master's redirect followed by curl, Python and
 *     `mkv get`; boto3 through the S3 API; a link after -linkttl is 410;
 *     rebuild, rebalance (offline and online; pulled on mkv-volumes,
 *     streamed on nginx), verify and gc all work signed.
 *   - misconfigured: a volume with another secret, and one with none, are
 *     configuration errors in the log, the metrics and the status page.
 *   - rotation, on both: volumes [new,old], master [new,old], -linkttl,
 *     volumes [new], master [new] under continuous load: no request
 *     fails.
 *   - The secrets never appear in a log, a metric or the status page. */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "../common/volsign.h"

#define S_OLD "oldsecret-0123456789abcdef"
#define S_NEW "newsecret-fedcba9876543210"
#define S_BAD "badsecret-0000000000000000"

static char *tmp;

static char *secret_file(const char *name, const char *text)
{
	char *p = xasprintf("%s/%s", tmp, name);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return p;
}

static void setup(void)
{
	tmp = h_tmpdir();
}

static void teardown(void)
{
	h_rmrf(tmp);
	free(tmp);
}

/* base + path, signed for method with secret, expiring ttl s from now. */
static char *signed_url(const char *base, const char *path, const char *method,
			const char *secret, long ttl)
{
	char t[24], h[VOLSIGN_HASH_LEN + 1];
	snprintf(t, sizeof(t), "%lld", (long long)time(NULL) + ttl);
	volsign_hash(secret, t, path, strlen(path), method, h);
	return xasprintf("%s%s?md5=%s&expires=%s", base, path, h, t);
}

static bool exists(const struct vol *v, const char *rel)
{
	struct stat st;
	char *p = xasprintf("%s%s", v->dir, rel);
	bool ok = stat(p, &st) == 0;
	free(p);
	return ok;
}

static char *file_text(const struct vol *v, const char *rel)
{
	char *p = xasprintf("%s%s", v->dir, rel), *t = h_read_file(p);
	free(p);
	return t;
}

/* Does any of the files hold s? */
static bool leaks(const char *s, const char *const *files)
{
	for (int i = 0; files[i]; i++) {
		char *t = h_read_file(files[i]);
		bool in = strstr(t, s) != NULL;
		free(t);
		if (in) {
			fprintf(stderr, "%s holds a secret\n", files[i]);
			return true;
		}
	}
	return false;
}

/* ---- units ---- */

START_TEST(units)
{
	char h[VOLSIGN_HASH_LEN + 1], u[512], *f1 = secret_file("s1", "# old\n\n" S_OLD "\n");
	char *f2 = secret_file("s2", S_NEW "\n" S_OLD "\n"), *bad = secret_file("bad", "short\n");
	char *three = secret_file("three", S_OLD "\n" S_NEW "\n" S_BAD "\n"), err[300];
	const char *why;
	char *q, *md5, *exp;

	/* hashlib.md5(b"2000000000/ab/cd/xGET oldsecret-...") in base64url */
	volsign_hash(S_OLD, "2000000000", "/ab/cd/x", 8, "GET", h);
	ck_assert_str_eq(h, "KVK_1590gzw9VAJUQHbivA");
	volsign_hash(S_OLD, "2000000000", "/ab//cd/x", 9, "PUT", h);   /* $uri merges slashes */
	ck_assert_str_eq(h, "GSyKTU351uD3uvGgQJWusg");

	ck_assert_int_eq(volsign_check("/x", "GET", NULL, NULL, &why), 0);   /* off */
	ck_assert_uint_eq(volsign_url("http://h:1/a/b", "GET", 60, u, sizeof(u)), 14);
	ck_assert_int_eq(volsign_load(bad, err, sizeof(err)), -1);
	ck_assert(!strstr(err, "short"));                  /* no secret in a reason */
	ck_assert_int_eq(volsign_load(three, err, sizeof(err)), -1);
	ck_assert(strstr(err, "more than two") && !strstr(err, S_OLD));
	ck_assert(!volsign_on());
	ck_assert_int_eq(volsign_load(f1, err, sizeof(err)), 0);
	ck_assert(volsign_on());

	ck_assert_uint_gt(volsign_url("http://h:1/a%2Fb/c?recursive", "GET", 60, u, sizeof(u)), 0);
	q = strstr(u, "?recursive&md5=");
	ck_assert_ptr_nonnull(q);
	md5 = xstrndup(q + 15, VOLSIGN_HASH_LEN);
	exp = strstr(u, "&expires=") + 9;
	ck_assert_int_eq(volsign_check("/a/b/c", "GET", md5, exp, &why), 0);
	ck_assert_int_eq(volsign_check("/a/b/c", "PUT", md5, exp, &why), 403);
	ck_assert_int_eq(volsign_check("/a/b/d", "GET", md5, exp, &why), 403);
	ck_assert_int_eq(volsign_check("/a/b/c", "GET", md5, NULL, &why), 403);
	ck_assert_int_eq(volsign_check("/a/b/c", "GET", NULL, exp, &why), 403);
	ck_assert_int_eq(volsign_check("/a/b/c", "GET", md5, "12x", &why), 403);
	volsign_hash(S_OLD, "1000", "/a/b/c", 6, "GET", h);             /* signed, expired */
	ck_assert_int_eq(volsign_check("/a/b/c", "GET", h, "1000", &why), 410);
	volsign_hash(S_BAD, "1000", "/a/b/c", 6, "GET", h);             /* the hash comes first */
	ck_assert_int_eq(volsign_check("/a/b/c", "GET", h, "1000", &why), 403);
	ck_assert(!strstr(why, S_OLD));

	/* two secrets: the first signs, both verify */
	ck_assert_int_eq(volsign_load(f2, err, sizeof(err)), 0);
	ck_assert_int_eq(volsign_check("/a/b/c", "GET", md5, exp, &why), 0);   /* old */
	volsign_url("/a/b/c", "GET", 60, u, sizeof(u));
	volsign_hash(S_NEW, strstr(u, "&expires=") + 9, "/a/b/c", 6, "GET", h);
	ck_assert(!strncmp(strstr(u, "md5=") + 4, h, VOLSIGN_HASH_LEN));
	free(md5), free(f1), free(f2), free(bad), free(three);
}
END_TEST

/* ---- refusals ---- */

/* A GET or HEAD with the signature sig of the blob: its status. */
START_TEST(refusals)
{
	enum vol_kind kind = _i ? VOL_NGINX : VOL_MKV;
	char *sec = secret_file("s", S_OLD "\n"), base[64], *u;
	struct vol v;
	struct resp r = {0};
	h_vol_start_secret(&v, kind, sec);
	snprintf(base, sizeof(base), "http://%s", v.name);

	/* a signed PUT stores; the same unsigned stores nothing */
	u = signed_url(base, "/ab/cd/blob", "PUT", S_OLD, 60);
	ck_assert_int_eq(h_http("PUT", u, "hello", 5, NULL, false, &r), 201);
	h_resp_free(&r);
	free(u);
	u = xasprintf("%s/ab/cd/new", base);
	ck_assert_int_eq(h_http("PUT", u, "x", 1, NULL, false, &r), 403);
	h_resp_free(&r);
	free(u);
	ck_assert(!exists(&v, "/ab/cd/new"));

	/* unsigned DELETE, GET, HEAD, listing */
	u = xasprintf("%s/ab/cd/blob", base);
	ck_assert_int_eq(h_status("DELETE", u), 403);
	ck_assert_int_eq(h_status("GET", u), 403);
	ck_assert_int_eq(h_status("HEAD", u), 403);
	free(u);
	u = xasprintf("%s/ab/cd/", base);
	ck_assert_int_eq(h_status("GET", u), 403);
	free(u);
	u = xasprintf("%s/ab/cd/?recursive", base);
	ck_assert_int_eq(h_status("GET", u), 403);
	free(u);

	/* the wrong secret; another path's signature */
	u = signed_url(base, "/ab/cd/blob", "GET", S_BAD, 60);
	ck_assert_int_eq(h_status("GET", u), 403);
	free(u);
	for (int i = 0; i < 2; i++) {
		const char *m = i ? "DELETE" : "GET";
		char *blob;
		u = signed_url(base, "/ab/cd/other", m, S_OLD, 60);
		blob = xasprintf("%s/ab/cd/blob%s", base, strchr(u, '?'));
		ck_assert_int_eq(h_status(m, blob), 403);
		free(blob);
		free(u);
	}

	/* a GET's signature replayed as PUT and as DELETE */
	u = signed_url(base, "/ab/cd/blob", "GET", S_OLD, 60);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	ck_assert(r.body.len == 5 && !memcmp(r.body.data, "hello", 5));
	h_resp_free(&r);
	ck_assert_int_eq(h_http("PUT", u, "bye!!", 5, NULL, false, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(h_status("DELETE", u), 403);
	ck_assert_int_eq(h_status("HEAD", u), 403);
	free(u);
	{
		char *t = file_text(&v, "/ab/cd/blob");
		ck_assert_str_eq(t, "hello");     /* nothing changed */
		free(t);
	}

	/* expired: signed, but expires is past (410), and the listing */
	u = signed_url(base, "/ab/cd/blob", "GET", S_OLD, -10);
	ck_assert_int_eq(h_status("GET", u), 410);
	free(u);
	u = signed_url(base, "/ab/cd/blob", "DELETE", S_OLD, -10);
	ck_assert_int_eq(h_status("DELETE", u), 410);
	free(u);
	ck_assert(exists(&v, "/ab/cd/blob"));
	u = signed_url(base, "/ab/cd/", "GET", S_OLD, 60);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
	ck_assert(strstr(r.body.data, "\"blob\""));
	h_resp_free(&r);
	free(u);

	/* a pull (mkv-volume: nginx does no pulls) whose source is unsigned */
	if (kind == VOL_MKV) {
		struct vol src;
		char sbase[64], hdr[256];
		h_vol_start_secret(&src, VOL_MKV, sec);
		snprintf(sbase, sizeof(sbase), "http://%s", src.name);
		u = signed_url(sbase, "/ef/gh/pulled", "PUT", S_OLD, 60);
		ck_assert_int_eq(h_http("PUT", u, "pulled", 6, NULL, false, &r), 201);
		h_resp_free(&r);
		free(u);
		v.peers = src.name;
		h_vol_restart(&v);
		snprintf(hdr, sizeof(hdr), "Mkv-Pull: %s/ef/gh/pulled", sbase);
		{
			const char *hs[] = {hdr, NULL};
			u = signed_url(base, "/ef/gh/pulled", "PUT", S_OLD, 60);
			ck_assert_int_eq(h_http("PUT", u, NULL, 0, hs, false, &r), 403);
			h_resp_free(&r);
			ck_assert(!exists(&v, "/ef/gh/pulled"));
			/* signed, it is pulled */
			free(u);
			u = signed_url(sbase, "/ef/gh/pulled", "GET", S_OLD, 60);
			snprintf(hdr, sizeof(hdr), "Mkv-Pull: %s", u);
			free(u);
			u = signed_url(base, "/ef/gh/pulled", "PUT", S_OLD, 60);
			ck_assert_int_eq(h_http("PUT", u, NULL, 0, hs, false, &r), 201);
			h_resp_free(&r);
			free(u);
			ck_assert(exists(&v, "/ef/gh/pulled"));
		}
		h_vol_stop(&src);
	}
	{
		char *log = xasprintf("%s.log", v.dir), *errlog = xasprintf("%s/.nginx/error.log", v.dir);
		const char *files[] = {log, errlog, NULL};
		ck_assert(!leaks(S_OLD, files));
		free(log), free(errlog);
	}
	h_vol_stop(&v);
	free(sec);
}
END_TEST

/* ---- a cluster ---- */

static int run(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(cluster)
{
	enum vol_kind kind = _i ? VOL_NGINX : VOL_MKV;
	char *sec = secret_file("s", S_OLD "\n"), *bin = h_bin("mkv"), *cmd, *va, *oplog;
	char *metrics_port = xasprintf("127.0.0.1:%d", h_free_port()), *u, *loc;
	const char *flags[] = {"-volumesecret", sec, "-linkttl", "1s", "-replicas", "2",
			       "-metrics", metrics_port, NULL};
	struct vol v[4];
	struct master m = {0};
	struct resp r = {0};
	uint64_t end;
	int k;

	for (int i = 0; i < 4; i++)
		h_vol_start_secret(&v[i], kind, sec);
	if (kind == VOL_MKV) {   /* pulled: every mkv-volume may read the others */
		va = h_volumes_arg(v, 4);
		for (int i = 0; i < 4; i++) {
			v[i].peers = va;
			h_vol_restart(&v[i]);
		}
	}
	h_master_start(&m, v, 3, flags);
	for (k = 0; k < 40; k++) {
		char key[128], val[64];
		snprintf(key, sizeof(key), "%s/k%02d", m.base, k);
		snprintf(val, sizeof(val), "value %d", k);
		ck_assert_int_eq(h_http("PUT", key, val, strlen(val), NULL, false, &r), 201);
		h_resp_free(&r);
	}

	/* the redirect: signed, followed */
	u = xasprintf("%s/k07", m.base);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 302);
	loc = xstrdup(r.location);
	ck_assert(strstr(loc, "?md5=") && strstr(loc, "&expires="));
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, true, &r), 200);
	ck_assert(r.body.len == 7 && !memcmp(r.body.data, "value 7", 7));
	h_resp_free(&r);
	ck_assert_int_eq(h_http("HEAD", u, NULL, 0, NULL, true, &r), 200);   /* signed for HEAD */
	h_resp_free(&r);
	/* curl, Python (requests, else urllib), boto3 (the master streams) */
	cmd = xasprintf("test \"$(curl -sfL '%s')\" = 'value 7'", u);
	ck_assert_int_eq(run(cmd), 0);
	free(cmd);
	cmd = xasprintf("python3 -c '\n"
			"import sys\n"
			"try:\n"
			"    import requests\n"
			"    b = requests.get(sys.argv[1]).content\n"
			"except ImportError:\n"
			"    import urllib.request\n"
			"    b = urllib.request.urlopen(sys.argv[1]).read()\n"
			"sys.exit(b != b\"value 7\")' %s", u);
	ck_assert_int_eq(run(cmd), 0);
	free(cmd);
	{
		char *o = xasprintf("%s/bkt/obj", m.base);
		ck_assert_int_eq(h_http("PUT", o, "s3 body", 7, NULL, false, &r), 201);
		h_resp_free(&r);
		free(o);
	}
	cmd = xasprintf("AWS_CA_BUNDLE= python3 -c '\n"
			"import boto3, sys\n"
			"from botocore.config import Config\n"
			"s3 = boto3.client(\"s3\", endpoint_url=sys.argv[1], aws_access_key_id=\"mkv\",\n"
			"    aws_secret_access_key=\"mkv\", region_name=\"us-east-1\",\n"
			"    config=Config(s3={\"addressing_style\": \"path\"}))\n"
			"sys.exit(s3.get_object(Bucket=\"bkt\", Key=\"obj\")[\"Body\"].read() != b\"s3 body\")'"
			" %s", m.base);
	ck_assert_int_eq(run(cmd), 0);
	free(cmd);

	/* after -linkttl (1 s) the link is 410: polled, not slept */
	end = now_ms() + 20000;
	while (h_status("GET", loc) == 200 && now_ms() < end)
		usleep(100000);
	ck_assert_int_eq(h_status("GET", loc), 410);
	free(loc);
	free(u);

	/* the commands, each with the secret; their output goes to oplog */
	oplog = xasprintf("%s/ops.log", tmp);
	va = h_volumes_arg(v, 3);
	cmd = xasprintf("'%s' -master %s get / '%s/got' >>'%s' 2>&1 && test \"$(cat '%s/got/k07')\" = 'value 7'",
			bin, m.base + 7, tmp, oplog, tmp);
	ck_assert_int_eq(run(cmd), 0);
	free(cmd);
	/* without the secret, verify and rebuild say each refusal's reason (the
	 * volume's, mkv-volume's one line; nginx's page is HTML) and, once,
	 * what to pass, and once that the volumes' ids cannot be read (not
	 * for each subvolume); they exit 1, rebuild saying to fix that first */
	cmd = xasprintf("cd '%s' && { '%s' -volumes %s -master %s verify; test $? = 1; } >nosec.log 2>&1 &&"
			" { '%s' -volumes %s -db nosec.db rebuild; test $? = 1; } >>nosec.log 2>&1 &&"
			" test \"$(grep -cx 'mkv: a volume refused: the volumes take what is signed with their secret: give this command -volumesecret FILE' nosec.log)\" = 2 &&"
			" test \"$(grep -c 'its id cannot be read' nosec.log)\" = 2 &&"
			" grep -q 'FAILED: the index is incomplete; fix what the lines above say, then rebuild again' nosec.log &&"
			" grep -q 'verify: .*: 403%s' nosec.log && grep -q 'rebuild: GET .* failed: 403%s' nosec.log",
			tmp, bin, va, m.base + 7, bin, va, kind == VOL_MKV ? " the link is not signed" : "",
			kind == VOL_MKV ? " the link is not signed" : "");
	if (run(cmd) != 0) {
		char *p = xasprintf("%s/nosec.log", tmp), *out = h_read_file(p);
		ck_abort_msg("without -volumesecret:\n%s", out);
	}
	free(cmd);
	cmd = xasprintf("'%s' -volumes %s -master %s -volumesecret '%s' verify >>'%s' 2>&1", bin, va,
			m.base + 7, sec, oplog);
	ck_assert_int_eq(run(cmd), 0);
	free(cmd);
	cmd = xasprintf("'%s' -volumes %s -master %s -volumesecret '%s' gc >>'%s' 2>&1", bin, va,
			m.base + 7, sec, oplog);
	ck_assert_int_eq(run(cmd), 0);
	free(cmd);
	free(va);
	/* online rebalance onto 4 volumes: pulled (mkv-volume) or streamed */
	h_master_restart(&m, v, 4, flags);
	va = h_volumes_arg(v, 4);
	cmd = xasprintf("'%s' -volumes %s -master %s -volumesecret '%s' -replicas 2 rebalance >>'%s' 2>&1",
			bin, va, m.base + 7, sec, oplog);
	ck_assert_int_eq(run(cmd), 0);
	free(cmd);
	{
		char *page = NULL, *mu = xasprintf("http://%s/metrics", metrics_port);
		char *su = xasprintf("http://%s/status", metrics_port);
		char *ml = xasprintf("%s/metrics.txt", tmp), *sl = xasprintf("%s/status.txt", tmp);
		ck_assert_int_eq(h_http("GET", mu, NULL, 0, NULL, false, &r), 200);
		page = xstrndup(r.body.data, r.body.len);
		h_resp_free(&r);
		ck_assert(strstr(page, "mkv_volume_misconfigured{volume=\"") &&
			  !strstr(page, "reason=\"signature") && !strstr(page, "reason=\"unsigned"));
		{
			FILE *f = fopen(ml, "w");
			fputs(page, f);
			fclose(f);
		}
		free(page);
		ck_assert_int_eq(h_http("GET", su, NULL, 0, NULL, false, &r), 200);
		page = xstrndup(r.body.data, r.body.len);
		h_resp_free(&r);
		ck_assert(!strstr(page, "misconfigured"));
		{
			FILE *f = fopen(sl, "w");
			fputs(page, f);
			fclose(f);
		}
		free(page), free(mu), free(su), free(ml), free(sl);
	}
	/* offline: rebalance back onto 3, then rebuild the index from scratch */
	h_master_down(&m);
	free(va);
	va = h_volumes_arg(v, 3);
	cmd = xasprintf("'%s' -volumes %s -db '%s' -volumesecret '%s' -replicas 2 rebalance >>'%s' 2>&1",
			bin, va, m.db, sec, oplog);
	ck_assert_int_eq(run(cmd), 0);
	free(cmd);
	cmd = xasprintf("rm -rf '%s' && '%s' -volumes %s -db '%s' -volumesecret '%s' -replicas 2 rebuild >>'%s' 2>&1",
			m.db, bin, va, m.db, sec, oplog);
	ck_assert_int_eq(run(cmd), 0);
	free(cmd);
	h_master_restart(&m, v, 3, flags);
	for (k = 0; k < 40; k++) {
		char key[128], val[64];
		snprintf(key, sizeof(key), "%s/k%02d", m.base, k);
		snprintf(val, sizeof(val), "value %d", k);
		ck_assert_int_eq(h_http("GET", key, NULL, 0, NULL, true, &r), 200);
		ck_assert(r.body.len == strlen(val) && !memcmp(r.body.data, val, r.body.len));
		h_resp_free(&r);
	}
	cmd = xasprintf("'%s' -volumes %s -master %s -volumesecret '%s' verify >>'%s' 2>&1", bin, va,
			m.base + 7, sec, oplog);
	ck_assert_int_eq(run(cmd), 0);
	free(cmd);
	{
		char *ml = xasprintf("%s/metrics.txt", tmp), *sl = xasprintf("%s/status.txt", tmp);
		char *vl[4];
		const char *files[9] = {m.log, oplog, ml, sl};
		for (int i = 0; i < 4; i++)
			files[4 + i] = vl[i] = xasprintf("%s.log", v[i].dir);
		ck_assert(!leaks(S_OLD, files));
		for (int i = 0; i < 4; i++)
			free(vl[i]);
		free(ml), free(sl);
	}
	h_master_stop(&m);
	for (int i = 0; i < 4; i++)
		h_vol_stop(&v[i]);
	free(va), free(oplog), free(bin), free(sec), free(metrics_port);
}
END_TEST

/* ---- misconfigured volumes ---- */

START_TEST(misconfigured)
{
	char *sec = secret_file("s", S_OLD "\n"), *other = secret_file("o", S_BAD "\n");
	char *metrics_port = xasprintf("127.0.0.1:%d", h_free_port());
	const char *flags[] = {"-volumesecret", sec, "-replicas", "1", "-metrics", metrics_port,
			       NULL};
	struct vol v[3];
	struct master m = {0};
	struct resp r = {0};
	char *mu = xasprintf("http://%s/metrics", metrics_port), *su, *log, *want;
	uint64_t end;

	h_vol_start_secret(&v[0], VOL_MKV, sec);
	h_vol_start_secret(&v[1], VOL_NGINX, other);   /* another secret */
	h_vol_start(&v[2], VOL_MKV);                   /* none */
	h_master_start(&m, v, 3, flags);
	/* the log: waited for, then read */
	end = now_ms() + 20000;
	for (;;) {
		log = h_read_file(m.log);
		if ((strstr(log, "refuses the master's signature") &&
		     strstr(log, "answers requests with no signature")) || now_ms() > end)
			break;
		free(log);
		usleep(50000);
	}
	want = xasprintf("volume %s: configuration error: it refuses the master's signature", v[1].name);
	ck_assert_msg(strstr(log, want), "%s", log);
	free(want);
	want = xasprintf("volume %s: configuration error: it answers requests with no signature",
			 v[2].name);
	ck_assert_msg(strstr(log, want), "%s", log);
	free(want);
	ck_assert(!strstr(log, S_OLD));
	free(log);
	ck_assert_int_eq(h_http("GET", mu, NULL, 0, NULL, false, &r), 200);
	want = xasprintf("mkv_volume_misconfigured{volume=\"%s\",scheme=\"http\",reason=\"signature_refused\"} 1",
			 v[1].name);
	ck_assert_msg(strstr(r.body.data, want), "%s", r.body.data);
	free(want);
	want = xasprintf("mkv_volume_misconfigured{volume=\"%s\",scheme=\"http\",reason=\"unsigned_accepted\"} 1",
			 v[2].name);
	ck_assert(strstr(r.body.data, want));
	free(want);
	want = xasprintf("mkv_volume_misconfigured{volume=\"%s\",scheme=\"http\",reason=\"\"} 0",
			 v[0].name);
	ck_assert(strstr(r.body.data, want));
	free(want);
	ck_assert(!strstr(r.body.data, S_OLD) && !strstr(r.body.data, S_BAD));
	h_resp_free(&r);
	su = xasprintf("http://%s/status", metrics_port);
	ck_assert_int_eq(h_http("GET", su, NULL, 0, NULL, false, &r), 200);
	ck_assert(strstr(r.body.data, "\"misconfigured\":\"signature_refused\"") &&
		  strstr(r.body.data, "\"misconfigured\":\"unsigned_accepted\""));
	ck_assert(!strstr(r.body.data, S_OLD) && !strstr(r.body.data, S_BAD));
	h_resp_free(&r);
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&v[i]);
	free(mu), free(su), free(sec), free(other), free(metrics_port);
}
END_TEST

/* ---- rotation under load ---- */

struct load {
	const char *base;
	volatile bool stop;
	unsigned long cycles, failed;
	char last[512];
};

/* PUT, GET through the redirect, DELETE, again and again; nothing retried. */
static void *load_main(void *arg)
{
	struct load *l = arg;
	struct resp r = {0};
	for (unsigned long i = 0; !l->stop; i++) {
		char key[96];
		long st[3];
		char why[200] = "";
		snprintf(key, sizeof(key), "%s/rot%lu", l->base, i % 50);
		st[0] = h_http("PUT", key, "payload", 7, NULL, false, &r);
		if (st[0] != 201 && r.body.data)
			snprintf(why, sizeof(why), " (%.*s)", (int)strcspn(r.body.data, "\n"),
				 r.body.data);
		h_resp_free(&r);
		st[1] = h_http("GET", key, NULL, 0, NULL, true, &r);
		if (st[1] == 200 && (r.body.len != 7 || memcmp(r.body.data, "payload", 7)))
			st[1] = -2;
		h_resp_free(&r);
		st[2] = h_status("DELETE", key);
		if (st[0] != 201 || st[1] != 200 || st[2] != 204) {
			__atomic_fetch_add(&l->failed, 1, __ATOMIC_SEQ_CST);
			snprintf(l->last, sizeof(l->last), "%s: PUT %ld%s GET %ld DELETE %ld", key,
				 st[0], why, st[1], st[2]);
		}
		__atomic_fetch_add(&l->cycles, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

/* Wait until the load made two more whole cycles. */
static void two_cycles(struct load *l)
{
	unsigned long c = __atomic_load_n(&l->cycles, __ATOMIC_SEQ_CST);
	uint64_t end = now_ms() + 20000;
	while (__atomic_load_n(&l->cycles, __ATOMIC_SEQ_CST) < c + 2 && now_ms() < end)
		usleep(10000);
	ck_assert_uint_ge(__atomic_load_n(&l->cycles, __ATOMIC_SEQ_CST), c + 2);
}

/* Wait until every volume answers a request signed with secret with want
 * (a HEAD of the health marker: 200; or 403). */
static void volumes_answer(struct vol *v, int n, const char *secret, long want)
{
	for (int i = 0; i < n; i++) {
		char base[64], *u;
		uint64_t end = now_ms() + 20000;
		long st;
		snprintf(base, sizeof(base), "http://%s", v[i].name);
		u = signed_url(base, "/sv00/.mkv", "HEAD", secret, 60);
		while ((st = h_status("HEAD", u)) != want && now_ms() < end)
			usleep(20000);
		ck_assert_int_eq(st, want);
		free(u);
	}
}

static void master_reloaded(struct master *m, int times)
{
	uint64_t end = now_ms() + 20000;
	for (;;) {
		char *log = h_read_file(m->log), *p = log;
		int n = 0;
		while ((p = strstr(p, "read again")))
			n++, p++;
		free(log);
		if (n >= times || now_ms() > end) {
			ck_assert_int_ge(n, times);
			return;
		}
		usleep(20000);
	}
}

START_TEST(rotation)
{
	enum vol_kind kind = _i ? VOL_NGINX : VOL_MKV;
	char *vsec = secret_file("vol", S_OLD "\n"), *msec = secret_file("master", S_OLD "\n");
	const char *flags[] = {"-volumesecret", msec, "-linkttl", "1s", NULL};
	struct vol v[3];
	struct master m = {0};
	struct load l = {0};
	pthread_t t;

	for (int i = 0; i < 3; i++)
		h_vol_start_secret(&v[i], kind, vsec);
	h_master_start(&m, v, 3, flags);
	l.base = m.base;
	ck_assert_int_eq(pthread_create(&t, NULL, load_main, &l), 0);
	two_cycles(&l);

	/* 1. the volumes take both, the new one first: what nginx checks
	 * second goes through a socket (mkv-nginx-volume) that a reload
	 * removes, so the secret that stays must be the first */
	free(secret_file("vol", S_NEW "\n" S_OLD "\n"));
	for (int i = 0; i < 3; i++)
		h_vol_reload(&v[i]);
	volumes_answer(v, 3, S_NEW, 200);
	two_cycles(&l);
	/* 2. the master signs with the new one */
	free(secret_file("master", S_NEW "\n" S_OLD "\n"));
	kill(m.pid, SIGHUP);
	master_reloaded(&m, 1);
	two_cycles(&l);
	/* links signed before it live -linkttl (1 s): past that, none is left
	 * (3 s: a request signed just before the switch may reach its volume
	 * late on a loaded machine; seen once at 1.1 s) */
	{
		uint64_t end = now_ms() + 3000;
		while (now_ms() < end)
			two_cycles(&l);
	}
	/* 3. the volumes drop the old one */
	free(secret_file("vol", S_NEW "\n"));
	for (int i = 0; i < 3; i++)
		h_vol_reload(&v[i]);
	volumes_answer(v, 3, S_OLD, 403);
	two_cycles(&l);
	/* 4. so does the master */
	free(secret_file("master", S_NEW "\n"));
	kill(m.pid, SIGHUP);
	master_reloaded(&m, 2);
	two_cycles(&l);

	l.stop = true;
	pthread_join(t, NULL);
	ck_assert_msg(l.failed == 0, "%lu of %lu cycles failed; the last: %s", l.failed, l.cycles,
		      l.last);
	{
		char *vl[3];
		const char *files[5] = {m.log};
		for (int i = 0; i < 3; i++)
			files[1 + i] = vl[i] = xasprintf("%s.log", v[i].dir);
		ck_assert(!leaks(S_OLD, files) && !leaks(S_NEW, files));
		for (int i = 0; i < 3; i++)
			free(vl[i]);
	}
	h_master_stop(&m);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&v[i]);
	free(vsec), free(msec);
}
END_TEST

/* ---- refusals: each byte of the link's hash counts; -peers by name ---- */

START_TEST(link_bytes)
{
	char u[512], *f = secret_file("s1", S_OLD "\n"), err[300], md5[VOLSIGN_HASH_LEN + 1];
	const char *why, *exp;
	ck_assert_int_eq(volsign_load(f, err, sizeof(err)), 0);
	ck_assert_uint_gt(volsign_url("http://h:1/a/b/c", "GET", 60, u, sizeof(u)), 0);
	snprintf(md5, sizeof(md5), "%s", strstr(u, "?md5=") + 5);
	exp = strstr(u, "&expires=") + 9;
	ck_assert_int_eq(volsign_check("/a/b/c", "GET", md5, exp, &why), 0);
	for (int i = 0; i < VOLSIGN_HASH_LEN; i += VOLSIGN_HASH_LEN - 1) {   /* first, last */
		char bad[VOLSIGN_HASH_LEN + 1];
		memcpy(bad, md5, sizeof(bad));
		bad[i] = bad[i] == 'A' ? 'B' : 'A';
		ck_assert_int_eq(volsign_check("/a/b/c", "GET", bad, exp, &why), 403);
	}
	md5[VOLSIGN_HASH_LEN - 1] = '\0';   /* cut short */
	ck_assert_int_eq(volsign_check("/a/b/c", "GET", md5, exp, &why), 403);
	free(f);
}
END_TEST

/* A pull from a host:port that a peer's name only begins with (or that
 * begins with a peer's) is no peer's: 403, nothing fetched. */
START_TEST(pull_peer_whole)
{
	struct vol v = {0};
	struct resp r;
	char peer[64], hdr[160], *u;
	h_vol_start(&v, VOL_MKV);
	snprintf(peer, sizeof(peer), "127.0.0.1:%d", v.port);   /* itself, a port of 5 digits */
	v.peers = peer;
	h_vol_restart(&v);
	u = xasprintf("http://%s/ab/cd/pulled", v.name);
	for (int i = 0; i < 2; i++) {
		const char *const hd[] = {hdr, NULL};
		snprintf(hdr, sizeof(hdr), "Mkv-Pull: http://127.0.0.1:%d%s/ef/gh/src",
			 i ? v.port / 10 : v.port, i ? "" : "0");
		ck_assert_int_eq(h_http("PUT", u, NULL, 0, hd, false, &r), 403);
		h_resp_free(&r);
	}
	ck_assert(!exists(&v, "/ab/cd/pulled"));
	free(u);
	h_vol_stop(&v);
}
END_TEST

/* `mkv get -volumesecret` signs only for hosts of -volumes, and only
 * each key's own blob, whatever the (plain HTTP) listing names:
 * tests/get_listing.py, with a fake master and volume. */
START_TEST(listing)
{
	char *sec = secret_file("s", S_OLD "\n"), *bin = h_bin("mkv"), *py = h_root("tests/get_listing.py");
	char *work = xasprintf("%s/work", tmp), *log = xasprintf("%s/listing.log", tmp);
	char *argv[] = {"/usr/bin/python3", py, bin, sec, work, NULL};
	int st;
	waitpid(h_spawn(argv, log), &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		char *out = h_read_file(log);
		ck_abort_msg("tests/get_listing.py failed:\n%s", out);
	}
	free(sec), free(bin), free(py), free(work), free(log);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("volsign");
	TCase *t = tcase_create("units");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, units);
	suite_add_tcase(s, t);
	t = tcase_create("refusals");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 120);
	tcase_add_loop_test(t, refusals, 0, 2);
	suite_add_tcase(s, t);
	t = tcase_create("cluster");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 300);
	tcase_add_loop_test(t, cluster, 0, 2);
	suite_add_tcase(s, t);
	t = tcase_create("misconfigured");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 120);
	tcase_add_test(t, misconfigured);
	suite_add_tcase(s, t);
	t = tcase_create("rotation");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 300);
	tcase_add_loop_test(t, rotation, 0, 2);
	suite_add_tcase(s, t);
	t = tcase_create("link refusals");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, link_bytes);
	tcase_add_test(t, pull_peer_whole);
	suite_add_tcase(s, t);
	t = tcase_create("listing");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 300);
	tcase_add_test(t, listing);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	int failed;
	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
