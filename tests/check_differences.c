/* check_differences.c -- every row of docs/differences.md (where mkv
 * answers differently from minikeyvalue on purpose), replayed against a
 * real master on three mkv-volumes (-replicas 2), and the page checked to
 * name each row with the status mkv gives. */
#include "harness.h"

#include <check.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NVOL 3

static struct vol vols[NVOL];
static struct master m;
static char *doc;

static char *url(const char *path)
{
	return xasprintf("%s%s", m.base, path);
}

static long req(const char *method, const char *path, const void *body, size_t n,
		const char *const *hdrs, struct resp *out)
{
	struct resp r;
	char *u = url(path);
	long st = h_http(method, u, body, n, hdrs, false, &r);
	free(u);
	if (out)
		*out = r;
	else
		h_resp_free(&r);
	return st;
}

/* The page has a row "| id | ..." whose mkv column names `status`. */
static void documented(const char *id, long status)
{
	char head[16], code[16];
	const char *row, *end;
	snprintf(head, sizeof(head), "\n| %s |", id);
	snprintf(code, sizeof(code), "`%ld`", status);
	row = strstr(doc, head);
	ck_assert_msg(row != NULL, "docs/differences.md has no row %s", id);
	end = strchr(row + 1, '\n');
	ck_assert_msg(end && memmem(row, (size_t)(end - row), code, strlen(code)),
		      "docs/differences.md row %s does not name %s", id, code);
}

static void is(const char *id, long got, long want)
{
	ck_assert_msg(got == want, "%s: got %ld, want %ld", id, got, want);
	documented(id, want);
}

static void setup(void)
{
	static const char *const flags[] = {"-replicas", "2", "-voltimeout", "200ms", NULL};
	char *p = h_root("docs/differences.md");
	doc = h_read_file(p);
	free(p);
	for (int i = 0; i < NVOL; i++)
		h_vol_start(&vols[i], VOL_MKV);
	memset(&m, 0, sizeof(m));
	h_master_start(&m, vols, NVOL, flags);
}

static void teardown(void)
{
	h_master_stop(&m);
	for (int i = 0; i < NVOL; i++)
		h_vol_stop(&vols[i]);
	free(doc);
}

/* Every row the page has is one this suite checks. */
START_TEST(test_page_lists_only_tested_rows)
{
	int rows = 0;
	for (const char *p = doc; (p = strstr(p, "\n| D")); p++)
		rows++;
	ck_assert_int_eq(rows, 15);
}
END_TEST

START_TEST(test_requests)
{
	static const char *const chunked[] = {"Transfer-Encoding: chunked", NULL};
	char longkey[200] = "/";
	struct resp r;
	long st;

	memset(longkey + 1, 'k', 189);
	longkey[190] = '\0';
	is("D1", req("PUT", longkey, "x", 1, NULL, NULL), 414);
	is("D2", req("PUT", "/a%zz", "x", 1, NULL, NULL), 400);
	is("D2", req("PUT", "/a%00b", "x", 1, NULL, NULL), 400);
	is("D2", req("PUT", "/", "x", 1, NULL, NULL), 400);
	is("D3", req("PUT", "/1234567%3F", "x", 1, NULL, NULL), 400);
	is("D4", req("PUT", "/d4", "", 0, chunked, NULL), 411);
	is("D5", req("PUT", "/d5?x=1", "x", 1, NULL, NULL), 400);
	is("D5", req("DELETE", "/d5?x=1", NULL, 0, NULL, NULL), 400);
	is("D5", req("UNLINK", "/d5?x=1", NULL, 0, NULL, NULL), 400);
	ck_assert_int_eq(req("GET", "/d5", NULL, 0, NULL, NULL), 404);
	st = req("PATCH", "/d6", "x", 1, NULL, &r);
	is("D6", st, 405);
	ck_assert_ptr_nonnull(h_header(&r, "Allow"));
	h_resp_free(&r);
	is("D7", req("GET", "/?list&limit=0", NULL, 0, NULL, NULL), 400);
	is("D7", req("GET", "/?list&limit=-1", NULL, 0, NULL, NULL), 400);
	is("D8", req("HEAD", "/?list", NULL, 0, NULL, NULL), 200);
	/* D15: DELETE ?unlinked deletes only an unlinked key */
	ck_assert_int_eq(req("PUT", "/d15", "x", 1, NULL, NULL), 201);
	is("D15", req("DELETE", "/d15?unlinked", NULL, 0, NULL, NULL), 403);
	ck_assert_int_eq(req("GET", "/d15", NULL, 0, NULL, NULL), 302);
	ck_assert_int_eq(req("UNLINK", "/d15", NULL, 0, NULL, NULL), 204);
	is("D15", req("DELETE", "/d15?unlinked", NULL, 0, NULL, NULL), 204);
	ck_assert_int_eq(req("GET", "/d15?unlinked", NULL, 0, NULL, &r), 200);
	ck_assert_str_eq(r.body.data, "{\"next\":\"\",\"keys\":[]}");   /* record gone */
	h_resp_free(&r);
	/* D14: a reason on every error, none to HEAD */
	st = req("GET", "/d14", NULL, 0, NULL, &r);
	ck_assert_msg(r.body.len > 1 && r.body.data[r.body.len - 1] == '\n', "no reason");
	is("D14", st, 404);
	h_resp_free(&r);
}
END_TEST

/* D12, D13: a blob lost by its volume. */
START_TEST(test_lost_blob)
{
	struct resp r;
	char *loc;
	ck_assert_int_eq(req("PUT", "/lost", "bytes", 5, NULL, NULL), 201);
	ck_assert_int_eq(req("GET", "/lost", NULL, 0, NULL, &r), 302);
	loc = xstrdup(r.location);
	h_resp_free(&r);
	ck_assert_int_eq(h_status("DELETE", loc), 204);   /* straight at the volume */
	for (int i = 0; i < 10; i++)                       /* whichever replica is picked */
		is("D12", req("GET", "/lost", NULL, 0, NULL, NULL), 302);
	is("D13", req("DELETE", "/lost", NULL, 0, NULL, NULL), 204);
	ck_assert_int_eq(req("GET", "/lost", NULL, 0, NULL, NULL), 404);
	free(loc);
}
END_TEST

/* Wait until the master answers with want: its checks of the volumes run
 * each second (-voltimeout is 200 ms), so it takes a second or two; 20 s
 * is a liveness bound, not the expected time. */
#define SEE_MS 20000
static long eventually(const char *method, const char *path, long want)
{
	uint64_t end = now_ms() + SEE_MS;
	long st = req(method, path, "v", method[0] == 'P', NULL, NULL);
	while (st != want && now_ms() < end) {
		usleep(50000);
		st = req(method, path, "v", method[0] == 'P', NULL, NULL);
	}
	return st;
}

/* D9, D10, D11: volumes down. */
START_TEST(test_volumes_down)
{
	char key[64], *down0 = vols[0].name, *down1 = vols[1].name;
	int ndown01 = 0, unbalanced = 0;
	char keys[40][32];
	bool on01[40];
	/* Forty keys, and which of them live on volumes 0 and 1 only. */
	for (int i = 0; i < 40; i++) {
		struct resp r;
		char *kv;
		snprintf(keys[i], sizeof(keys[i]), "/down-%d", i);
		ck_assert_int_eq(req("PUT", keys[i], "v", 1, NULL, NULL), 201);
		ck_assert_int_eq(req("HEAD", keys[i], NULL, 0, NULL, &r), 302);
		kv = h_header(&r, "Key-Volumes");
		on01[i] = kv && strstr(kv, down0) && strstr(kv, down1);
		ndown01 += on01[i];
		free(kv);
		h_resp_free(&r);
	}
	ck_assert_msg(ndown01 > 0, "no key of forty on volumes 0 and 1");

	h_vol_down(&vols[0]);   /* the teardown removes its directory */
	/* D11: keys whose home includes volume 0 go to the next live one. */
	for (int i = 0; i < 40 && !unbalanced; i++) {
		struct resp r;
		char *bal;
		snprintf(key, sizeof(key), "/avail-%d", i);
		long st;
		/* until the master's checks see volume 0 down, a write to it fails */
		st = eventually("PUT", key, 201);
		is("D11", st, 201);
		ck_assert_int_eq(req("HEAD", key, NULL, 0, NULL, &r), 302);
		bal = h_header(&r, "Key-Balance");
		unbalanced += bal && !strcmp(bal, "unbalanced");
		free(bal);
		h_resp_free(&r);
	}
	ck_assert_msg(unbalanced, "no PUT went to a volume other than its home");

	h_vol_down(&vols[1]);
	is("D10", eventually("PUT", "/d10", 503), 503);
	for (int i = 0; i < 40; i++)
		if (on01[i])
			is("D9", eventually("GET", keys[i], 503), 503);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("differences");
	TCase *tc = tcase_create("differences");
	SRunner *sr;
	int failed;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	signal(SIGPIPE, SIG_IGN);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_page_lists_only_tested_rows);
	tcase_add_test(tc, test_requests);
	tcase_add_test(tc, test_lost_blob);
	tcase_add_test(tc, test_volumes_down);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
