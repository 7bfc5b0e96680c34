/* check_handlers.c -- the master's handlers without sockets: list paging
 * over a real LevelDB index, JSON escaping, DELETE/UNLINK record states,
 * a PUT body that is not its Content-Length. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/front.h"
#include "../master/handlers.h"
#include "../master/index.h"
#include "../master/put.h"
#include "harness.h"

static struct index *idx;
static char *dir;
static struct config cfg = {.replicas = 1, .subvolumes = 1, .puttimeout_ms = 1000,
			     .linkttl_ms = 60000, .maxlinkttl_ms = 24 * 3600 * 1000};

static void setup(void)
{
	char *why = NULL, *db;
	static const char *const recs[][2] = {
		{"/a", "HASH5d41402abc4b2a76b9719d911017c592v:1"},
		{"/b/1", "v:1"},
		{"/b/2", "DELETEDv:1"},
		{"/b/3", "v:1"},
		{"/b/4", "v:1"},
		{"/c", "DELETEDHASH5d41402abc4b2a76b9719d911017c592v:1"},
	};
	dir = h_tmpdir();
	db = xasprintf("%s/db", dir);
	idx = index_open(db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++)
		ck_assert_int_eq(index_write(idx, recs[i][0], strlen(recs[i][0]), recs[i][1],
					   strlen(recs[i][1]), true), 0);
	free(db);
}

static void teardown(void)
{
	index_close(idx);
	h_rmrf(dir);
	free(dir);
}

struct listcase {
	const char *prefix, *query;
	int status;
	const char *body;
};

static const struct listcase lists[] = {
	{"/", "list", 200, "{\"next\":\"\",\"keys\":[\"/a\",\"/b/1\",\"/b/3\",\"/b/4\"]}"},
	{"/", "unlinked", 200, "{\"next\":\"\",\"keys\":[\"/b/2\",\"/c\"]}"},
	{"/b/", "list", 200, "{\"next\":\"\",\"keys\":[\"/b/1\",\"/b/3\",\"/b/4\"]}"},
	{"/b/", "list&limit=1", 200, "{\"next\":\"/b/3\",\"keys\":[\"/b/1\"]}"},
	{"/b/", "list&limit=2", 200, "{\"next\":\"/b/4\",\"keys\":[\"/b/1\",\"/b/3\"]}"},
	/* limit is percent-decoded like every parameter */
	{"/b/", "list&limit=%32", 200, "{\"next\":\"/b/4\",\"keys\":[\"/b/1\",\"/b/3\"]}"},
	{"/", "list&limit=1%30", 200, "{\"next\":\"\",\"keys\":[\"/a\",\"/b/1\",\"/b/3\",\"/b/4\"]}"},
	{"/b/", "list&limit=1&start=/b/3", 200, "{\"next\":\"/b/4\",\"keys\":[\"/b/3\"]}"},
	{"/b/", "list&limit=1&start=%2Fb%2F4", 200, "{\"next\":\"\",\"keys\":[\"/b/4\"]}"},
	{"/b/", "list&start=/a", 200, "{\"next\":\"\",\"keys\":[\"/b/1\",\"/b/3\",\"/b/4\"]}"},
	{"/b/", "list&start=/z", 200, "{\"next\":\"\",\"keys\":[]}"},
	{"/zz", "list", 200, "{\"next\":\"\",\"keys\":[]}"},
	{"/", "list&limit=0", 400, NULL},
	{"/", "list&limit=-3", 400, NULL},
	{"/", "list&limit=", 400, NULL},
	{"/", "list&limit=99999999999999999999999", 400, NULL},
	{"/", "list&start=%zz", 400, NULL},
	{"/", "list&limit=%zz", 400, NULL},
	{"/", "list&limit=%30", 400, NULL},
	{"/", "list&limit=1%002", 400, NULL},
	/* ?list&locations: arrays parallel to keys, each after its own pass */
	{"/b/", "list&locations&limit=2", 200,
	 "{\"next\":\"/b/4\",\"keys\":[\"/b/1\",\"/b/3\"],\"locations\":"
	 "[[\"http://v:1/49/f0/L2IvMQ==\"],[\"http://v:1/45/97/L2IvMw==\"]]}"},
	{"/", "list&locations&md5s&limit=1", 200,
	 "{\"next\":\"/b/1\",\"keys\":[\"/a\"],\"locations\":[[\"http://v:1/06/39/L2E=\"]],"
	 "\"md5s\":[\"5d41402abc4b2a76b9719d911017c592\"]}"},
	{"/b/", "md5s&list&locations&start=/b/4", 200,
	 "{\"next\":\"\",\"keys\":[\"/b/4\"],\"locations\":[[\"http://v:1/5b/27/L2IvNA==\"]],"
	 "\"md5s\":[\"\"]}"},
	{"/zz", "list&locations&ttl=2h", 200, "{\"next\":\"\",\"keys\":[],\"locations\":[]}"},
	{"/", "list&locations&ttl=24h", 200, NULL},
	{"/", "list&locations&ttl=24h1s", 400, NULL},   /* past -maxlinkttl */
	{"/", "list&locations&ttl=0s", 400, NULL},
	{"/", "list&locations&ttl=soon", 400, NULL},
	{"/", "list&ttl=1h", 400, NULL},                /* ttl without locations */
	{"/", "list&md5s", 400, NULL},
	{"/", "unlinked&locations", 400, NULL},
};

START_TEST(test_list)
{
	const struct listcase *c = &lists[_i];
	struct answer a = {0};
	handle_list(&cfg, idx, c->prefix, strlen(c->prefix), c->query, false, &a);
	ck_assert_int_eq(a.status, c->status);
	ck_assert_ptr_null(a.stream);
	if (c->body)
		ck_assert_str_eq(a.body.data, c->body);
	else if (c->status == 200)
		ck_assert_msg(a.body.len > 2 && a.body.data[0] == '{', "no listing");
	else
		ck_assert_msg(a.body.len > 1 && a.body.data[a.body.len - 1] == '\n', "no reason");
	answer_free(&a);
}
END_TEST

START_TEST(test_json_string)
{
	static const struct {
		const char *in;
		size_t n;
		const char *out;
	} cases[] = {
		{"plain", 5, "\"plain\""},
		{"q\"b\\", 4, "\"q\\\"b\\\\\""},
		/* what Go 1.19's json.Marshal writes for each */
		{"\n\x01\r\t\b\f\x1f\x7f", 8, "\"\\n\\u0001\\r\\t\\u0008\\u000c\\u001f\x7f\""},
		{"<a>&b", 5, "\"\\u003ca\\u003e\\u0026b\""},
		{"\xe2\x80\xa8x\xe2\x80\xa9", 7, "\"\\u2028x\\u2029\""},
		{"\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
		{"\xc0\xaf", 2, "\"\\ufffd\\ufffd\""},
		{"\xe0\x9f\xbf", 3, "\"\\ufffd\\ufffd\\ufffd\""},
		{"caf\xc3\xa9", 5, "\"caf\xc3\xa9\""},
		{"bad\xff", 4, "\"bad\\ufffd\""},
		{"\xc3", 1, "\"\\ufffd\""},
		{"\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\""}, /* a surrogate */
		{"a\0b", 3, "\"a\\u0000b\""},
		{"\xf8\x80\x80", 3, "\"\\ufffd\\ufffd\\ufffd\""}, /* 0xf5..0xff lead nothing */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct buf b = {0};
		buf_puts(&b, "");
		json_append_string(&b, cases[i].in, cases[i].n);
		ck_assert_str_eq(b.data, cases[i].out);
		buf_free(&b);
	}
}
END_TEST

START_TEST(test_unlink_states)
{
	const char *why;
	size_t n;
	char *v;
	/* every location survives an UNLINK */
	ck_assert_int_eq(index_write(idx, "/m", 2, "HASH5d41402abc4b2a76b9719d911017c592a:1,b:2,c:3", 47, true), 0);
	ck_assert_int_eq(store_delete(&cfg, idx, "/m", 2, DEL_UNLINK, &why), 204);
	v = index_get(idx, "/m", 2, &n);
	ck_assert_str_eq(v, "DELETEDHASH5d41402abc4b2a76b9719d911017c592a:1,b:2,c:3");
	free(v);
	ck_assert_int_eq(store_delete(&cfg, idx, "/a", 2, DEL_UNLINK, &why), 204);
	v = index_get(idx, "/a", 2, &n);
	ck_assert_str_eq(v, "DELETEDHASH5d41402abc4b2a76b9719d911017c592v:1");
	free(v);
	ck_assert_int_eq(store_delete(&cfg, idx, "/a", 2, DEL_UNLINK, &why), 404);
	ck_assert_int_eq(store_delete(&cfg, idx, "/nope", 5, DEL_DELETE, &why), 404);
}
END_TEST

START_TEST(test_get_deleted_is_404)
{
	struct answer a = {0};
	handle_get(&cfg, idx, "/c", 2, "/c", false, &a);
	ck_assert_int_eq(a.status, 404);
	answer_free(&a);
	memset(&a, 0, sizeof(a));
	handle_get(&cfg, idx, "/a", 2, "/a", false, &a);
	ck_assert_int_eq(a.status, 302);
	ck_assert_str_eq(a.location, "http://v:1/06/39/L2E=");
	ck_assert_str_eq(a.md5, "5d41402abc4b2a76b9719d911017c592");
	ck_assert_str_eq(a.volumes, "v:1");
	answer_free(&a);
}
END_TEST

/* A listing's body as the front would send it: answer_read in pieces of
 * piece bytes when it streams.  Caller frees. */
static char *list_body(struct answer *a, size_t piece)
{
	struct buf b = {0};
	char *out = xmalloc(piece);
	ssize_t n;
	buf_puts(&b, "");
	if (!a->stream)
		buf_append(&b, a->body.data, a->body.len);
	else
		while ((n = answer_read(a, b.len, out, piece)) != FRONT_READER_END) {
			ck_assert_int_gt(n, 0);
			ck_assert_uint_le((size_t)n, piece);
			buf_append(&b, out, (size_t)n);
		}
	free(out);
	return b.data;
}

/* The /many/ keys: 0..MANY-1, those from 950,000 to 999,999 ending in 5
 * unlinked (5,000); 1,000,001 live ones. */
#define MANY 1005001
static bool many_unlinked(int i)
{
	return i >= 950000 && i < 1000000 && i % 10 == 5;
}

/* The key number of the count-th key of the kind from key from on (0: from
 * itself, if of the kind); "" when there is none: next, as the listing says it. */
static void many_next(int from, int count, bool unlinked, char *out, size_t n)
{
	for (int i = from; i < MANY; i++)
		if (many_unlinked(i) == unlinked && count-- == 0) {
			snprintf(out, n, "/many/%07d", i);
			return;
		}
	*out = '\0';
}

/* {"next":"<next>","keys":[the keys of the kind from key from up to next]} */
static char *many_json(int from, bool unlinked, const char *next)
{
	struct buf b = {0};
	const char *sep = "";
	char key[32];
	buf_printf(&b, "{\"next\":\"%s\",\"keys\":[", next);
	for (int i = from; i < MANY; i++) {
		snprintf(key, sizeof(key), "/many/%07d", i);
		if (*next && strcmp(key, next) >= 0)
			break;
		if (many_unlinked(i) != unlinked)
			continue;
		buf_printf(&b, "%s\"%s\"", sep, key);
		sep = ",";
	}
	buf_puts(&b, "]}");
	return b.data;
}

/* One listing of /many/ from key from on, limit keys (0: all): its body
 * (streamed or not as stream says, read in pieces that cut keys anywhere)
 * against many_json, and the length HEAD gets. */
static void many_list(bool unlinked, int from, int limit, bool stream)
{
	struct answer a = {0}, h = {0};
	char next[32] = "", query[96], *want, *got;
	if (limit)
		many_next(from, limit, unlinked, next, sizeof(next));
	if (limit)
		snprintf(query, sizeof(query), "%s&start=/many/%07d&limit=%d",
			 unlinked ? "unlinked" : "list", from, limit);
	else
		snprintf(query, sizeof(query), "%s&start=/many/%07d", unlinked ? "unlinked" : "list",
			 from);
	want = many_json(from, unlinked, next);
	handle_list(&cfg, idx, "/many/", 6, query, false, &a);
	ck_assert_int_eq(a.status, 200);
	ck_assert_msg((a.stream != NULL) == stream, "%s: streamed %d", query, a.stream != NULL);
	got = list_body(&a, 997 + (size_t)limit % 13);
	ck_assert_uint_eq(strlen(got), strlen(want));
	ck_assert_msg(!strcmp(got, want), "%s: not the keys asked", query);
	handle_list(&cfg, idx, "/many/", 6, query, true, &h);
	ck_assert_int_eq(h.status, 200);
	ck_assert_int_eq(h.stream ? h.stream_len : (int64_t)h.body.len, (int64_t)strlen(want));
	free(got);
	free(want);
	answer_free(&a);
	answer_free(&h);
}

/* A small PUT's body that does not match its Content-Length, whatever the
 * HTTP library framed: the put fails (400) and frees its key at once,
 * with nothing sent anywhere.  More bytes than announced once filled its
 * ring (Content-Length + 1 bytes), which no worker drains before the end:
 * put_feed took less, and the connection slept for good, the key locked. */
static void nowake(void *arg)
{
	(void)arg;
}

START_TEST(test_put_body_not_its_length)
{
	static const struct {
		int64_t clen;
		const char *why;
	} cases[] = {{5, "body longer than its Content-Length"},
		     {100, "body shorter than its Content-Length"}};
	static const char body[] = "hello world!";
	char locs[1][LOC_MAX] = {"127.0.0.1:9"};
	int st;
	const char *why;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct put *p;
		ck_assert(keylock_try("/k", 2));
		p = put_start(&cfg, idx, "/k", 2, locs, 1, cases[i].clen, nowake, NULL, false, 0);
		ck_assert_int_eq(put_feed(p, body, sizeof(body) - 1), sizeof(body) - 1);
		put_finish(p);
		ck_assert(put_result(p, &st, &why));
		ck_assert_int_eq(st, 400);
		ck_assert_str_eq(why, cases[i].why);
		put_release(p);
		ck_assert_msg(keylock_try("/k", 2), "case %zu: the key stayed locked", i);
		keylock_release("/k", 2);
		ck_assert_ptr_null(index_get(idx, "/k", 2, &(size_t){0}));
	}
}
END_TEST


/* More than 1,000,000 keys: every one without a limit (no 413: the listing
 * streams from the index in bounded memory), and limits page them, the
 * same bytes whether held whole or streamed. */
/* ?list&locations against each URL made whole (volsign_url, json_append_string):
 * locations of every shape -- a subvolume, a trailing /, a %XX, a ? (made
 * whole), a " to escape, an empty one (no URL), more distinct ones than
 * the listing's slots, two of one key in one slot -- and a key whose path
 * holds "//"; _i: signed. */
START_TEST(test_locations_shapes)
{
	static const char *const shapes[] = {
		"HASH5d41402abc4b2a76b9719d911017c592v:1,w:2/sv03,x:3/", "a:1/p%2Fq/sv01",
		"q:1/x?y,v:1", "v:1,,w:2", "e\"v:1/sv0A",
		"c:1/sv01,d:106/sv02,c:1/sv01",   /* c and d share a slot: d takes it */
	};
	struct buf want = {0}, keys = {0};
	char key[32], path[PATH_MAX_LEN], url[1024], signd[1200], *got;
	int n = 0;
	if (_i) {
		char *f = xasprintf("%s/secret", dir), err[300];
		FILE *fp = fopen(f, "w");
		ck_assert_ptr_nonnull(fp);
		fputs("0123456789abcdefSECRET\n", fp);
		fclose(fp);
		ck_assert_int_eq(volsign_load(f, err, sizeof(err)), 0);
		free(f);
	}
	for (int i = 0; i < 300 + 6 + 1; i++) {
		struct buf v = {0};
		int kl;
		if (i < 300) {
			kl = snprintf(key, sizeof(key), "/l/%03d", i);
			buf_printf(&v, "h%d:80/sv%02X,v:1", i, i % 16);
		} else if (i < 306) {
			kl = snprintf(key, sizeof(key), "/l/s%d", i);
			buf_puts(&v, shapes[i - 300]);
		} else {
			kl = snprintf(key, sizeof(key), "/l/\xff\xff\xff\xff");   /* base64 "//" */
			buf_puts(&v, "v:1/sv01");
		}
		ck_assert_int_eq(index_write(idx, key, (size_t)kl, v.data, v.len, true), 0);
		buf_free(&v);
	}
	for (int tries = 0; tries < 5; tries++) {
		time_t t0 = time(NULL);
		struct index_iter *it = index_iter_new(idx, "/l/", 3);
		struct answer a = {0};
		want.len = keys.len = 0;
		n = 0;
		for (; index_iter_valid(it); index_iter_next(it), n++) {
			size_t kl, vl;
			const char *k = index_iter_key(it, &kl), *v = index_iter_value(it, &vl), *p;
			char *rec = xmalloc(vl + 1);
			if (kl < 3 || memcmp(k, "/l/", 3))
				break;
			buf_append(&keys, n ? "," : "", n ? 1 : 0);
			json_append_string(&keys, k, kl);
			buf_append(&want, n ? ",[" : "[", n ? 2 : 1);
			placement_path(k, kl, path);
			memcpy(rec, v, vl);
			rec[vl] = '\0';
			p = strncmp(rec, "HASH", 4) ? rec : rec + 36;
			for (int j = 0; p[0] && j < 8; j++, p = strchr(p, ',') ? strchr(p, ',') + 1 : "") {
				size_t ll = strcspn(p, ",");
				if (!ll)
					continue;
				if (want.data[want.len - 1] != '[')
					buf_append(&want, ",", 1);
				snprintf(url, sizeof(url), "http://%.*s%s", (int)ll, p, path);
				ll = volsign_url(url, "GET", 60, signd, sizeof(signd));
				json_append_string(&want, signd, ll);
			}
			buf_append(&want, "]", 1);
			free(rec);
		}
		index_iter_free(it);
		handle_list(&cfg, idx, "/l/", 3, "list&locations", false, &a);
		ck_assert_int_eq(a.status, 200);
		got = list_body(&a, 1000);
		answer_free(&a);
		if (time(NULL) == t0) {   /* else a second went by: the expiry may differ */
			char *w = xasprintf("{\"next\":\"\",\"keys\":[%s],\"locations\":[%s]}", keys.data,
					    want.data);
			ck_assert_str_eq(got, w);
			free(w);
			free(got);
			break;
		}
		free(got);
	}
	ck_assert_int_eq(n, 307);
	buf_free(&want);
	buf_free(&keys);
}
END_TEST

START_TEST(test_list_many)
{
	char key[32];
	/* keys just outside the prefix, on both sides */
	ck_assert_int_eq(index_write(idx, "/many", 5, "v:1", 3, false), 0);
	ck_assert_int_eq(index_write(idx, "/many0", 6, "v:1", 3, false), 0);
	for (int i = 0; i < MANY; i++) {
		int n = snprintf(key, sizeof(key), "/many/%07d", i);
		const char *v = many_unlinked(i) ? "DELETEDv:1" : "v:1";
		ck_assert_int_eq(index_write(idx, key, (size_t)n, v, strlen(v), false), 0);
	}
	many_list(false, 0, 0, true);             /* 1,000,001 keys */
	many_list(false, 0, 3, false);
	many_list(false, 1004999, 3, false);      /* the last two */
	many_list(false, 900000, 95000, true);    /* next past the unlinked ones */
	many_list(false, 940000, 20000, true);    /* next among them */
	many_list(false, 1004000, 0, false);      /* 1,001 keys to the end */
	many_list(false, 995000, 0, true);        /* 9,501 */
	many_list(true, 940000, 0, true);         /* the 5,000 unlinked */
	many_list(true, 940000, 4000, false);     /* 64,000 bytes: held */
	many_list(true, 940000, 4500, true);
	many_list(true, 999990, 5, false);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("handlers");
	TCase *tc = tcase_create("index");
	SRunner *sr;
	int failed;
	static char *vols[] = {"v:1"};
	cfg.volumes = vols;
	cfg.nvol = 1;
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_list, 0, sizeof(lists) / sizeof(lists[0]));
	tcase_add_test(tc, test_json_string);
	tcase_add_test(tc, test_unlink_states);
	tcase_add_test(tc, test_get_deleted_is_404);
	tcase_add_test(tc, test_put_body_not_its_length);
	tcase_add_loop_test(tc, test_locations_shapes, 0, 2);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	/* 1,005,001 keys: tagged so that the valgrind run (CK_EXCLUDE_TAGS=big)
	 * leaves it to the plain and sanitizer runs; it takes minutes there. */
	tc = tcase_create("many");
	tcase_set_tags(tc, "big");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_list_many);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
