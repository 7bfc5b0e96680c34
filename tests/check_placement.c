/* check_placement.c -- placement and record codec, pinned by every vector
 * in docs/protocol.md §2-3 (changing these strands existing data). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/placement.h"
#include "../common/record.h"

struct vec {
	const char *key, *path, *vols;
};

static const struct vec small[] = {
	{"hello", "/5d/41/aGVsbG8=", "larry/sv00"},
	{"helloworld", "/fc/5e/aGVsbG93b3JsZA==", "curly/sv01"},
	{"world", "/7d/79/d29ybGQ=", "moe/sv02"},
	{"blah", "/6f/1e/YmxhaA==", "curly/sv01"},
};

static const struct vec five[] = {
	{"/hello", "/3e/d1/L2hlbGxv",
	 "localhost:3004/sv07,localhost:3003/sv04,localhost:3005/sv07"},
	{"/wehave", "/60/08/L3dlaGF2ZQ==",
	 "localhost:3001/sv07,localhost:3002/sv04,localhost:3005/sv01"},
	{"/a/b/c.jpg", "/ff/13/L2EvYi9jLmpwZw==",
	 "localhost:3002/sv04,localhost:3003/sv07,localhost:3005/sv00"},
	{"/a?b", "/67/c0/L2E/Yg==", "localhost:3001/sv01,localhost:3003/sv08,localhost:3004/sv03"},
};

static char *joined(const char *key, char *const *vols, int nvol, int rep, int sv)
{
	char locs[8][LOC_MAX];
	char *p[8];
	int n = placement_volumes(key, strlen(key), vols, nvol, rep, sv, locs);
	for (int i = 0; i < n; i++)
		p[i] = locs[i];
	return record_join_locs(p, n);
}

START_TEST(test_small_vectors)
{
	char *vols[] = {"larry", "moe", "curly"};
	char path[PATH_MAX_LEN], *got;
	placement_path(small[_i].key, strlen(small[_i].key), path);
	ck_assert_str_eq(path, small[_i].path);
	got = joined(small[_i].key, vols, 3, 1, 3);
	ck_assert_str_eq(got, small[_i].vols);
	free(got);
}
END_TEST

START_TEST(test_five_vectors)
{
	char *vols[] = {"localhost:3001", "localhost:3002", "localhost:3003", "localhost:3004",
			"localhost:3005"};
	char path[PATH_MAX_LEN], *got;
	placement_path(five[_i].key, strlen(five[_i].key), path);
	ck_assert_str_eq(path, five[_i].path);
	got = joined(five[_i].key, vols, 5, 3, 10);
	ck_assert_str_eq(got, five[_i].vols);
	free(got);
}
END_TEST

START_TEST(test_subvolumes_one)
{
	char *vols[] = {"localhost:3001", "localhost:3002", "localhost:3003", "localhost:3004",
			"localhost:3005"};
	char *got = joined("/wehave", vols, 5, 3, 1);
	ck_assert_str_eq(got, "localhost:3001,localhost:3002,localhost:3005");
	free(got);
	/* more replicas than volumes: all volumes, still in score order
	 * (the row above puts 3001 before 3002), whatever the command
	 * line's order */
	got = joined("/wehave", vols, 2, 3, 1);
	ck_assert_str_eq(got, "localhost:3001,localhost:3002");
	free(got);
	{
		char *rev[] = {"localhost:3002", "localhost:3001"};
		got = joined("/wehave", rev, 2, 3, 1);
		ck_assert_str_eq(got, "localhost:3001,localhost:3002");
		free(got);
	}
}
END_TEST

/* The order against an independent computation (SPEC §2): score =
 * md5(key || volume), highest first as unsigned bytes -- the same order
 * as the lowercase hex -- ties in command-line order; replicas past the
 * number of volumes give every volume. */
START_TEST(test_score_order)
{
	static const char *const keys[] = {"/hello", "/wehave", "/a/b/c.jpg", "x", "/a?b", ""};
	char *vols[] = {"localhost:3001", "localhost:3002", "localhost:3003", "localhost:3004",
			"localhost:3005", "moe", "larry", "curly"};
	enum { NV = sizeof(vols) / sizeof(vols[0]) };
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		char score[NV][33], want[NV * 20] = "", *got;
		int order[NV];
		for (int i = 0; i < NV; i++) {
			char kv[64];
			int n = snprintf(kv, sizeof(kv), "%s%s", keys[k], vols[i]);
			md5_hex(kv, (size_t)n, score[i]);
			order[i] = i;
		}
		for (int i = 1; i < NV; i++)         /* insertion sort: stable */
			for (int j = i; j > 0 && strcmp(score[order[j]], score[order[j - 1]]) > 0; j--) {
				int t = order[j];
				order[j] = order[j - 1];
				order[j - 1] = t;
			}
		for (int i = 0; i < NV; i++) {
			strcat(want, vols[order[i]]);
			if (i < NV - 1)
				strcat(want, ",");
		}
		got = joined(keys[k], vols, NV, NV + 3, 1);
		ck_assert_msg(!strcmp(got, want), "key \"%s\": %s, want %s", keys[k], got, want);
		free(got);
	}
}
END_TEST

struct keycase {
	const char *raw;
	int status;
	const char *decoded;
};

static const struct keycase keys[] = {
	{"/a%20b", 0, "/a b"},
	{"/a%3Fb", 0, "/a?b"},
	{"/plain", 0, "/plain"},
	{"/a+b", 0, "/a+b"},
	{"/", 400, NULL},
	{"/%zz", 400, NULL},
	{"/abc%", 400, NULL},
	{"/abc%4", 400, NULL},
	{"/a%00b", 400, NULL},
	{"/1234567%3F", 400, NULL}, /* 9 bytes ending in '?': base64 ends in '/' */
	{"/%FF%FFab", 400, NULL},   /* base64 L///YWI=: "//" inside */
	{"/x", 0, "/x"},
};

START_TEST(test_key_decode)
{
	char out[256];
	size_t n;
	const char *why = NULL;
	int st = key_decode(keys[_i].raw, strlen(keys[_i].raw), out, &n, &why);
	ck_assert_int_eq(st, keys[_i].status);
	if (!st)
		ck_assert_str_eq(out, keys[_i].decoded);
	else
		ck_assert_ptr_nonnull(why);
}
END_TEST

START_TEST(test_key_length)
{
	char raw[300], out[300];
	size_t n;
	const char *why;
	raw[0] = '/';
	memset(raw + 1, 'k', 188);
	ck_assert_int_eq(key_decode(raw, 189, out, &n, &why), 0);
	memset(raw + 1, 'k', 189);
	ck_assert_int_eq(key_decode(raw, 190, out, &n, &why), 414);
}
END_TEST

/* A blob's file name back to its key (rebuild). */
START_TEST(test_name_key)
{
	static const char *const keys[] = {"hello", "helloworld", "/a?b", "/a/b/c.jpg", "xy"};
	static const char *const bad[] = {"", "aGVsbG8", "aGV$bG8=", "a===", "====", "aGVsbG8=x"};
	char path[PATH_MAX_LEN], key[PATH_MAX_LEN], longkey[KEY_MAX + 1];
	long n;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		placement_path(keys[i], strlen(keys[i]), path);
		n = placement_name_key(path + 7, strlen(path + 7), key);
		ck_assert_int_eq(n, (long)strlen(keys[i]));
		ck_assert(!memcmp(key, keys[i], (size_t)n));
	}
	memset(longkey, 'k', sizeof(longkey));
	placement_path(longkey, KEY_MAX, path);
	ck_assert_int_eq(placement_name_key(path + 7, strlen(path + 7), key), KEY_MAX);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(placement_name_key(bad[i], strlen(bad[i]), key) < 0, "%s", bad[i]);
}
END_TEST

/* Record state read without a parse. */
START_TEST(test_record_peek)
{
	static const char *const vals[] = {"a:1,b:2", "HASH5d41402abc4b2a76b9719d911017c592a:1",
					   "DELETEDHASH5d41402abc4b2a76b9719d911017c592a:1",
					   "DELETEDa:1", "DELET", "", "HASHshort"};
	static const bool del[] = {false, false, true, true, false, false, false};
	static const char *const hash[] = {"", "5d41402abc4b2a76b9719d911017c592",
					   "5d41402abc4b2a76b9719d911017c592", "", "", "", ""};
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		char h[33];
		ck_assert_int_eq(record_deleted(vals[i], strlen(vals[i])), del[i]);
		record_hash(vals[i], strlen(vals[i]), h);
		ck_assert_str_eq(h, hash[i]);
	}
}
END_TEST

START_TEST(test_record_roundtrip)
{
	static const char *const recs[] = {
		"localhost:3001/sv07,localhost:3002/sv04",
		"HASH5d41402abc4b2a76b9719d911017c592hello",
		"DELETEDHASH5d41402abc4b2a76b9719d911017c592hello",
		"DELETEDa,b,c",
	};
	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
		struct record r;
		size_t len = strlen(recs[i]), elen;
		char *v = malloc(len + 1), *enc;
		memcpy(v, recs[i], len);
		ck_assert_int_eq(record_parse(v, len, &r), 0);
		enc = record_encode(&r, &elen);
		ck_assert_str_eq(enc, recs[i]);
		free(enc);
		free(v);
	}
}
END_TEST

START_TEST(test_record_fields)
{
	char v[] = "DELETEDHASH5d41402abc4b2a76b9719d911017c592a:1/sv00,b:2/sv03";
	struct record r;
	ck_assert_int_eq(record_parse(v, strlen(v), &r), 0);
	ck_assert(r.deleted);
	ck_assert_str_eq(r.hash, "5d41402abc4b2a76b9719d911017c592");
	ck_assert_int_eq(r.nlocs, 2);
	ck_assert_str_eq(r.locs[0], "a:1/sv00");
	ck_assert_str_eq(r.locs[1], "b:2/sv03");
}
END_TEST

START_TEST(test_md5_hex)
{
	char h[33];
	md5_hex("hello", 5, h);
	ck_assert_str_eq(h, "5d41402abc4b2a76b9719d911017c592");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("placement");
	TCase *tc = tcase_create("vectors");
	SRunner *sr;
	int failed;
	tcase_add_loop_test(tc, test_small_vectors, 0, sizeof(small) / sizeof(small[0]));
	tcase_add_loop_test(tc, test_five_vectors, 0, sizeof(five) / sizeof(five[0]));
	tcase_add_test(tc, test_subvolumes_one);
	tcase_add_test(tc, test_score_order);
	tcase_add_loop_test(tc, test_key_decode, 0, sizeof(keys) / sizeof(keys[0]));
	tcase_add_test(tc, test_key_length);
	tcase_add_test(tc, test_name_key);
	tcase_add_test(tc, test_record_peek);
	tcase_add_test(tc, test_record_roundtrip);
	tcase_add_test(tc, test_record_fields);
	tcase_add_test(tc, test_md5_hex);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
