/* check_volume.c -- mkv-volume against docs/protocol.md §5, side by side with stock
 * nginx (deploy/nginx): the same requests go to both and must get the same
 * status codes, headers that matter, bytes and listings.  Then what only
 * mkv-volume promises: md5 xattrs, durability, no temporary files, limits.
 * The crash test is in check_volume_crash.c. */
#include <check.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "../common/placement.h"
#include "../volume/fs.h"
#include "../volume/listing.h"
#include "../volume/path.h"
#include "../volume/server.h"
#include "../common/httpc.h"
#include "../common/range.h"

/* ---------- units: path, range, listing, fs ---------- */

static const struct {
	const char *raw, *out;
	int status;
	bool dir;
} paths[] = {
	{"/", "", 0, true},
	{"/a", "a", 0, false},
	{"/a/", "a", 0, true},
	{"//a//b///", "a/b", 0, true},
	{"/./a/./b", "a/b", 0, false},
	{"/a/.", "a", 0, true},
	{"/67/c0/L2E/Yg==", "67/c0/L2E/Yg==", 0, false},
	{"/67/c0/L2E/Yg%3d%3d", "67/c0/L2E/Yg==", 0, false},
	{"/a%2fb", "a/b", 0, false},
	{"/a%2F", "a", 0, true},
	{"/a%20b", "a b", 0, false},
	{"/.mkv", ".mkv", 0, false},
	{"/..", NULL, 400, false},
	{"/../x", NULL, 400, false},
	{"/a/../b", NULL, 400, false},
	{"/a/..", NULL, 400, false},
	{"/%2e%2e/x", NULL, 400, false},
	{"/%2E%2e", NULL, 400, false},
	{"/a/.%2e/b", NULL, 400, false},
	{"/a%2f..%2fb", NULL, 400, false},
	{"/%00", NULL, 400, false},
	{"/a%00b", NULL, 400, false},
	{"/%zz", NULL, 400, false},
	{"/%", NULL, 400, false},
	{"/%a", NULL, 400, false},
	{"a", NULL, 400, false},
	{"/...", "...", 0, false},
	{"/..a", "..a", 0, false},
};

START_TEST(test_path_clean)
{
	char out[64];
	const char *why = NULL;
	bool dir;
	int st = vol_path_clean(paths[_i].raw, out, sizeof(out), &dir, &why);
	ck_assert_msg(st == paths[_i].status, "%s: %d", paths[_i].raw, st);
	if (st == 0) {
		ck_assert_str_eq(out, paths[_i].out);
		ck_assert_msg(dir == paths[_i].dir, "%s: dir %d", paths[_i].raw, dir);
	} else {
		ck_assert_ptr_nonnull(why);
	}
}
END_TEST

START_TEST(test_path_too_long)
{
	char out[8], raw[64];
	const char *why;
	bool dir;
	ck_assert_int_eq(vol_path_clean("/abcdefg", out, sizeof(out), &dir, &why), 0);
	ck_assert_int_eq(vol_path_clean("/abcdefgh", out, sizeof(out), &dir, &why), 414);
	ck_assert_int_eq(vol_path_clean("/abc/def/", out, sizeof(out), &dir, &why), 0);
	ck_assert_str_eq(out, "abc/def");
	memset(raw, 'a', sizeof(raw) - 1);
	raw[0] = '/';
	raw[63] = '\0';
	ck_assert_int_eq(vol_path_clean(raw, out, sizeof(out), &dir, &why), 414);
}
END_TEST

/* What nginx 1.22 with max_ranges 1 answered for an 11-byte file. */
static const struct {
	const char *hdr;
	enum range r;
	uint64_t start, len;
} ranges[] = {
	{NULL, RANGE_ALL, 0, 0},
	{"bytes=0-3", RANGE_ONE, 0, 4},
	{"bytes=3-", RANGE_ONE, 3, 8},
	{"bytes=-4", RANGE_ONE, 7, 4},
	{"bytes=5-100", RANGE_ONE, 5, 6},
	{"bytes=-20", RANGE_ONE, 0, 11},
	{"bytes=0-0", RANGE_ONE, 0, 1},
	{"bytes=10-10", RANGE_ONE, 10, 1},
	{"bytes= 1 - 2 ", RANGE_ONE, 1, 2},
	{"Bytes=1-2", RANGE_ONE, 1, 2},
	{"bytes=0-1,20-30", RANGE_ONE, 0, 2},
	{"bytes=20-30,0-1", RANGE_ONE, 0, 2},
	{"bytes=11-", RANGE_BAD, 0, 0},
	{"bytes=20-30", RANGE_BAD, 0, 0},
	{"bytes=-0", RANGE_BAD, 0, 0},
	{"bytes=abc", RANGE_BAD, 0, 0},
	{"bytes=3-1", RANGE_BAD, 0, 0},
	{"bytes=1-2,", RANGE_BAD, 0, 0},
	{"bytes=,1-2", RANGE_BAD, 0, 0},
	{"bytes=1", RANGE_BAD, 0, 0},
	{"bytes=-", RANGE_BAD, 0, 0},
	{"bytes=1-2x", RANGE_BAD, 0, 0},
	{"bytes=99999999999999999999-", RANGE_BAD, 0, 0},
	{"bytes=0-1,3-4", RANGE_ALL, 0, 0},
	{"bytes=0-1,0-20", RANGE_ALL, 0, 0},
	{"bytes=0-0,-1", RANGE_ALL, 0, 0},
	{"items=0-3", RANGE_ALL, 0, 0},
	{"bytes=", RANGE_ALL, 0, 0},
};

START_TEST(test_range_parse)
{
	uint64_t start = 0, len = 0;
	enum range r = range_parse(ranges[_i].hdr, 11, &start, &len);
	ck_assert_msg(r == ranges[_i].r, "%s: %d", ranges[_i].hdr, r);
	if (r == RANGE_ONE) {
		ck_assert_uint_eq(start, ranges[_i].start);
		ck_assert_uint_eq(len, ranges[_i].len);
	}
}
END_TEST

START_TEST(test_range_empty_file)
{
	uint64_t s, l;
	ck_assert_int_eq(range_parse("bytes=0-0", 0, &s, &l), RANGE_ALL);
	ck_assert_int_eq(range_parse("bytes=0-", 0, &s, &l), RANGE_ALL);
	ck_assert_int_eq(range_parse("bytes=-1", 0, &s, &l), RANGE_ALL);
}
END_TEST

START_TEST(test_validators)
{
	const char *e = "\"5-b\"";
	ck_assert_int_eq(httpc_parse_date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
	ck_assert_int_eq(httpc_parse_date("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777);
	ck_assert_int_eq(httpc_parse_date("Sun Nov  6 08:49:37 1994"), 784111777);
	ck_assert_int_eq(httpc_parse_date("Sun, 06 Nov 1994 08:49:37 GMTx"), -1);
	ck_assert_int_eq(httpc_parse_date(""), -1);
	ck_assert(etag_listed("*", e, 0));
	ck_assert(etag_listed("\"5-b\"", e, 0));
	ck_assert(etag_listed("\"a\", \"5-b\" ", e, 0));
	ck_assert(etag_listed("\"a\",\t\"5-b\",\"c\"", e, 0));
	ck_assert(!etag_listed("W/\"5-b\"", e, 0));
	ck_assert(etag_listed("W/\"5-b\"", e, ETAG_WEAK));
	ck_assert(!etag_listed("\"5-b\"x", e, ETAG_WEAK));
	ck_assert(!etag_listed("\"5-", e, ETAG_WEAK));
	ck_assert(!etag_listed("", e, ETAG_WEAK));
	ck_assert(!etag_listed("**", e, ETAG_WEAK));
}
END_TEST

static char *read_listing(struct vol_root *root, const char *path, size_t chunk)
{
	int st;
	struct vol_list *l = vol_list_open(root, path, false, &st);
	struct buf b = {0};
	char *tmp = xmalloc(chunk);
	ssize_t n;
	ck_assert_ptr_nonnull(l);
	buf_puts(&b, "");
	while ((n = vol_list_read(l, 0, tmp, chunk)) > 0)
		buf_append(&b, tmp, (size_t)n);
	ck_assert_int_eq(n, FRONT_READER_END);
	vol_list_close(l);
	free(tmp);
	return b.data;
}

static void touch(const char *dir, const char *name)
{
	char *p = xasprintf("%s/%s", dir, name);
	int fd = open(p, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	free(p);
}

/* Batches of 1, 2, 3 and all must give the same bytes: directories
 * first, then byte order, dotfiles hidden. */
START_TEST(test_listing_batches)
{
	char *tmp = h_tmpdir(), *sub = xasprintf("%s/zdir", tmp), *ref = NULL;
	struct vol_root root;
	const char *names[] = {"b", "a", "\xc3\xa9", "B", ".hidden", "a b", "c\"d", "_"};
	ck_assert_int_eq(vol_root_open(&root, tmp), 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		touch(tmp, names[i]);
	mkdir(sub, 0755);
	free(sub);
	sub = xasprintf("%s/adir", tmp);
	mkdir(sub, 0755);
	for (size_t batch = 1; batch <= 9; batch++) {
		char *got;
		vol_list_batch = batch;
		got = read_listing(&root, "", batch == 1 ? 7 : 4096);
		if (!ref)
			ref = got;
		else {
			ck_assert_str_eq(got, ref);
			free(got);
		}
	}
	vol_list_batch = 8192;
	ck_assert_msg(strstr(ref, "\"adir\"") < strstr(ref, "\"zdir\"") &&
			      strstr(ref, "\"zdir\"") < strstr(ref, "\"B\"") &&
			      strstr(ref, "\"B\"") < strstr(ref, "\"_\"") &&
			      strstr(ref, "\"_\"") < strstr(ref, "\"a\"") &&
			      strstr(ref, "\"a\"") < strstr(ref, "\"a b\"") &&
			      strstr(ref, "\"c\\\"d\"") < strstr(ref, "\"\xc3\xa9\""),
		      "order: %s", ref);
	ck_assert_ptr_null(strstr(ref, "hidden"));
	ck_assert_int_eq(strncmp(ref, "[\r\n{ \"name\":\"adir\", \"type\":\"directory\", \"mtime\":\"", 49), 0);
	ck_assert_int_eq(strcmp(ref + strlen(ref) - 3, "\r\n]"), 0);
	free(ref);
	free(sub);
	close(root.fd);
	h_rmrf(tmp);
	free(tmp);
}
END_TEST

static int count_files(const char *dir)
{
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* Disk full in the middle of a PUT: 507, and nothing left behind, not
 * even the file it was replacing is touched. */
START_TEST(test_put_enospc)
{
	char *tmp = h_tmpdir(), *dir = xasprintf("%s/ab/cd", tmp), buf[4096] = "x";
	struct vol_root root;
	struct vol_put *p;
	int status;

	ck_assert_int_eq(vol_root_open(&root, tmp), 0);
	p = vol_put_begin(&root, "ab/cd/key", &status);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(vol_put_write(p, "old", 3), 0);
	ck_assert_int_eq(vol_put_commit(p), 201);

	vol_fs_fail_after = 10000;
	p = vol_put_begin(&root, "ab/cd/key", &status);
	ck_assert_ptr_nonnull(p);
	for (status = 0; status == 0;)
		status = vol_put_write(p, buf, sizeof(buf));
	ck_assert_int_eq(status, 507);
	vol_put_abort(p);
	vol_fs_fail_after = 0;
	ck_assert_int_eq(count_files(dir), 1);     /* only "key", no temporary */
	{
		char *k = xasprintf("%s/key", dir), got[8] = {0};
		int fd = open(k, O_RDONLY);
		ck_assert_int_eq(read(fd, got, sizeof(got)), 3);
		ck_assert_str_eq(got, "old");
		close(fd);
		free(k);
	}
	/* A target that is a directory, a parent that is a file: 409. */
	ck_assert_ptr_null(vol_put_begin(&root, "ab/cd", &status));
	ck_assert_int_eq(status, 409);
	ck_assert_ptr_null(vol_put_begin(&root, "ab/cd/key/x", &status));
	ck_assert_int_eq(status, 409);
	ck_assert_int_eq(vol_fs_delete(&root, "ab/cd/key"), 204);
	ck_assert_int_eq(vol_fs_delete(&root, "ab/cd/key"), 404);
	ck_assert_int_eq(vol_fs_delete(&root, "ab/cd"), 409);
	ck_assert_int_eq(count_files(dir), 0);
	close(root.fd);
	h_rmrf(tmp);
	free(tmp);
	free(dir);
}
END_TEST

/* HTTP dates: RFC 9110's example, the epoch, and before it. */
START_TEST(test_http_date)
{
	char got[HTTP_DATE_LEN];
	http_date(784111777, got);
	ck_assert_str_eq(got, "Sun, 06 Nov 1994 08:49:37 GMT");
	http_date(0, got);
	ck_assert_str_eq(got, "Thu, 01 Jan 1970 00:00:00 GMT");
	http_date(-86400 * 365, got);
	ck_assert_str_eq(got, "Wed, 01 Jan 1969 00:00:00 GMT");
}
END_TEST

START_TEST(test_errno_table)
{
	ck_assert_int_eq(vol_errno_status(ENOENT, 404), 404);
	ck_assert_int_eq(vol_errno_status(ENOTDIR, 409), 409);
	ck_assert_int_eq(vol_errno_status(EACCES, 404), 403);
	ck_assert_int_eq(vol_errno_status(ENOSPC, 404), 507);
	ck_assert_int_eq(vol_errno_status(EDQUOT, 404), 507);
	ck_assert_int_eq(vol_errno_status(EIO, 404), 500);
}
END_TEST

/* ---------- side by side: mkv-volume and nginx ---------- */

static struct vol mkv, ngx;

static char *url(const struct vol *v, const char *path)
{
	return xasprintf("http://%s%s", v->name, path);
}

/* One request to volume v; r (NULL: dropped) gets the answer. */
static long req(const struct vol *v, const char *method, const char *path, const char *body,
		size_t len, const char *hdr, struct resp *r)
{
	const char *hl[] = {hdr, NULL};
	char *u = url(v, path);
	struct resp own;
	long st = h_http(method, u, body, len, hdr ? hl : NULL, false, r ? r : &own);
	if (!r)
		h_resp_free(&own);
	free(u);
	return st;
}

static long put(const struct vol *v, const char *path, const char *body, size_t len)
{
	return req(v, "PUT", path, body ? body : "", len, NULL, NULL);
}

static char *blob(size_t n, unsigned seed)
{
	char *b = xmalloc(n ? n : 1);
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = (char)(seed >> 16);
	}
	return b;
}

#define BIG 300000
static char *big;

static void both_start(void)
{
	h_vol_start(&mkv, VOL_MKV);
	h_vol_start(&ngx, VOL_NGINX);
	big = blob(BIG, 7);
	for (int i = 0; i < 2; i++) {
		struct vol *v = i ? &ngx : &mkv;
		ck_assert_int_eq(put(v, "/67/c0/L2E/Yg==", "hello world", 11), 201);
		ck_assert_int_eq(put(v, "/3e/d1/L2hlbGxv", big, BIG), 201);
		ck_assert_int_eq(put(v, "/e1/e1/ZW1wdHk=", "", 0), 201);
		ck_assert_int_eq(put(v, "/.mkv", "mkv\n", 4), 201);
		ck_assert_int_eq(put(v, "/sv01/ab/cd/a2V5", "key", 3), 201);
	}
}

static void both_stop(void)
{
	h_vol_stop(&mkv);
	h_vol_stop(&ngx);
	free(big);
}

/* Requests that change nothing; both servers answer alike.  mkv_status
 * differs where docs/protocol.md §5 asks more than nginx does (any ".." refused). */
static const struct {
	const char *method, *path, *hdr;
	int status, mkv_status;
} reads[] = {
	{"GET", "/67/c0/L2E/Yg==", NULL, 200, 0},
	{"HEAD", "/67/c0/L2E/Yg==", NULL, 200, 0},
	{"GET", "/67/c0/L2E/Yg%3D%3D", NULL, 200, 0},
	{"GET", "//67//c0/./L2E/Yg==", NULL, 200, 0},
	{"GET", "/3e/d1/L2hlbGxv", NULL, 200, 0},
	{"GET", "/e1/e1/ZW1wdHk=", NULL, 200, 0},
	{"GET", "/.mkv", NULL, 200, 0},
	{"HEAD", "/.mkv", NULL, 200, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=0-3", 206, 0},
	{"HEAD", "/67/c0/L2E/Yg==", "Range: bytes=0-3", 206, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=3-", 206, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=-4", 206, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=5-100", 206, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=-20", 206, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=10-10", 206, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=11-", 416, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=20-30", 416, 0},
	{"HEAD", "/67/c0/L2E/Yg==", "Range: bytes=20-30", 416, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=-0", 416, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=abc", 416, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=3-1", 416, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=1-2,", 416, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=0-1,3-4", 200, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=0-1,20-30", 206, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: items=0-3", 200, 0},
	{"GET", "/67/c0/L2E/Yg==", "Range: bytes=", 200, 0},
	{"GET", "/3e/d1/L2hlbGxv", "Range: bytes=100000-199999", 206, 0},
	{"GET", "/3e/d1/L2hlbGxv", "Range: bytes=-100", 206, 0},
	{"GET", "/e1/e1/ZW1wdHk=", "Range: bytes=0-0", 200, 0},
	{"GET", "/e1/e1/ZW1wdHk=", "Range: bytes=-1", 200, 0},
	{"GET", "/nope", NULL, 404, 0},
	{"HEAD", "/nope", NULL, 404, 0},
	{"GET", "/67/c0/L2E/Yg==/", NULL, 404, 0},
	{"GET", "/nope/", NULL, 404, 0},
	{"GET", "/67", NULL, 301, 0},
	{"GET", "/67/c0/L2E", NULL, 301, 0},
	{"GET", "/67/c0/L2E/", NULL, 200, 0},
	{"GET", "/67/", NULL, 200, 0},
	{"GET", "/sv01/ab/", NULL, 200, 0},
	{"GET", "/", NULL, 200, 0},
	{"HEAD", "/67/", NULL, 200, 0},
	{"GET", "/../67/c0/L2E/Yg==", NULL, 400, 0},
	{"GET", "/%2e%2e/67/c0/L2E/Yg==", NULL, 400, 0},
	{"GET", "/..", NULL, 400, 0},
	{"GET", "/67/../../etc/passwd", NULL, 400, 0},
	{"GET", "/%00", NULL, 400, 0},
	{"GET", "/67/c0/L2E/Yg%00==", NULL, 400, 0},
	{"GET", "/%zz", NULL, 400, 0},
	{"GET", "/x/../67/c0/L2E/Yg==", NULL, 200, 400},
	{"GET", "/x/%2e%2e/67/c0/L2E/Yg==", NULL, 200, 400},
	{"GET", "/.nginx/nginx.conf", NULL, 404, 0},
	{"POST", "/67/c0/L2E/Yg==", NULL, 405, 0},
	{"OPTIONS", "/67/c0/L2E/Yg==", NULL, 405, 0},
};

static char *hdr(const struct resp *r, const char *name)
{
	return h_header(r, name);
}

static void same_header(const struct resp *a, const struct resp *b, const char *name)
{
	char *x = hdr(a, name), *y = hdr(b, name);
	ck_assert_msg((!x && !y) || (x && y && !strcmp(x, y)), "%s: mkv %s, nginx %s", name,
		      x ? x : "(none)", y ? y : "(none)");
	free(x);
	free(y);
}

/* `"<hex mtime>-<hex size>"` with the size right. */
static void check_etag(const struct resp *r, size_t size)
{
	char *e = hdr(r, "ETag"), want[32];
	ck_assert_ptr_nonnull(e);
	snprintf(want, sizeof(want), "-%zx\"", size);
	ck_assert_msg(e[0] == '"' && strlen(e) > strlen(want) &&
			      !strcmp(e + strlen(e) - strlen(want), want),
		      "etag %s", e);
	free(e);
}

START_TEST(test_side_by_side)
{
	struct resp a, b;
	const char *m = reads[_i].method, *p = reads[_i].path;
	long sa = req(&mkv, m, p, NULL, 0, reads[_i].hdr, &a);
	long sb = req(&ngx, m, p, NULL, 0, reads[_i].hdr, &b);
	int want = reads[_i].mkv_status ? reads[_i].mkv_status : reads[_i].status;

	ck_assert_msg(sb == reads[_i].status, "nginx %s %s (%s): %ld", m, p, reads[_i].hdr, sb);
	ck_assert_msg(sa == want, "mkv %s %s (%s): %ld", m, p, reads[_i].hdr, sa);
	if (sa != sb)
		goto out;
	same_header(&a, &b, "Content-Range");
	if (sa == 200 || sa == 206) {
		same_header(&a, &b, "Content-Type");
		same_header(&a, &b, "Accept-Ranges");
		if (p[strlen(p) - 1] != '/') {
			char *lm = hdr(&a, "Last-Modified");
			same_header(&a, &b, "Content-Length");
			ck_assert_ptr_nonnull(lm);
			ck_assert_msg(strlen(lm) == 29 && !strcmp(lm + 25, " GMT"), "%s", lm);
			free(lm);
			check_etag(&a, strstr(p, "L2hlbGxv") ? BIG : strstr(p, "ZW1w") ? 0 : strstr(p, ".mkv") ? 4 : 11);
			check_etag(&b, strstr(p, "L2hlbGxv") ? BIG : strstr(p, "ZW1w") ? 0 : strstr(p, ".mkv") ? 4 : 11);
			ck_assert_uint_eq(a.body.len, b.body.len);
			ck_assert(!memcmp(a.body.data, b.body.data, a.body.len));
		}
	}
	if (sa == 301) {
		char *la = hdr(&a, "Location"), *lb = hdr(&b, "Location");
		char *wa = xasprintf("http://%s%s/", mkv.name, p), *wb = xasprintf("http://%s%s/", ngx.name, p);
		ck_assert_str_eq(la, wa);
		ck_assert_str_eq(lb, wb);
		free(la), free(lb), free(wa), free(wb);
	}
	if (sa >= 400 && strcmp(m, "HEAD")) {
		char *ct = hdr(&a, "Content-Type");
		ck_assert_str_eq(ct, "text/plain");
		ck_assert_msg(a.body.len > 1 && a.body.data[a.body.len - 1] == '\n' &&
				      !memchr(a.body.data, '\n', a.body.len - 1),
			      "one-line reason");
		free(ct);
	}
	if (sa >= 400 && !strcmp(m, "HEAD")) {   /* as minikeyvalue: no body, and says so */
		char *cl = hdr(&a, "Content-Length");
		ck_assert_msg(cl && !strcmp(cl, "0"), "HEAD %s %ld: Content-Length %s", p, sa,
			      cl ? cl : "(none)");
		free(cl);
	}
	if (sa == 405) {
		char *al = hdr(&a, "Allow");
		ck_assert_ptr_nonnull(al);
		free(al);
	}
out:
	h_resp_free(&a);
	h_resp_free(&b);
}
END_TEST

/* Give every entry under dir the same mtime, so listings of the two
 * servers can be compared byte for byte. */
static int set_mtime(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
	(void)st, (void)flag, (void)f;
	if (!strstr(p, "/.nginx"))
		utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

/* mkv-volume's listing less its "md5" fields. */
static void strip_md5(struct buf *b)
{
	char *p;
	while ((p = strstr(b->data, ", \"md5\":\""))) {
		size_t n = strlen(", \"md5\":\"") + 32 + 1;
		memmove(p, p + n, b->len - (size_t)(p - b->data) - n + 1);
		b->len -= n;
	}
}

static void same_listing(const char *path)
{
	struct resp a, b;
	nftw(mkv.dir, set_mtime, 16, FTW_PHYS);
	nftw(ngx.dir, set_mtime, 16, FTW_PHYS);
	ck_assert_int_eq(req(&mkv, "GET", path, NULL, 0, NULL, &a), 200);
	ck_assert_int_eq(req(&ngx, "GET", path, NULL, 0, NULL, &b), 200);
	strip_md5(&a.body);
	ck_assert_msg(a.body.len == b.body.len && !memcmp(a.body.data, b.body.data, a.body.len),
		      "%s\nmkv:   %.300s\nnginx: %.300s", path, a.body.data, b.body.data);
	h_resp_free(&a);
	h_resp_free(&b);
}

START_TEST(test_listings_equal)
{
	const char *names[] = {"Z", "_", "a b", "a\"b", "c\\d", "e\x01" "f", "g\tn\nr", "\xc3\xa9",
			       "x%20y", ".hidden"};
	for (int i = 0; i < 2; i++) {
		struct vol *v = i ? &ngx : &mkv;
		char *w = xasprintf("%s/w", v->dir), *l;
		mkdir(w, 0755);
		for (size_t j = 0; j < sizeof(names) / sizeof(names[0]); j++)
			touch(w, names[j]);
		l = xasprintf("%s/dd", w);
		mkdir(l, 0755);
		free(l);
		l = xasprintf("%s/ldir", w);
		ck_assert_int_eq(symlink("dd", l), 0);
		free(l);
		l = xasprintf("%s/dangling", w);
		ck_assert_int_eq(symlink("nowhere", l), 0);
		free(l);
		free(w);
	}
	same_listing("/");
	same_listing("/w/");
	same_listing("/67/c0/");
	same_listing("/67/c0/L2E/");
	same_listing("/sv01/ab/cd/");
}
END_TEST

static int count_str(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p++)
		n++;
	return n;
}

/* `?recursive`: mkv-volume lists every file below the directory, by its
 * path from there, hidden names skipped, symlinks followed but never round
 * a loop; nginx ignores the argument (rebuild relies on both). */
START_TEST(test_recursive_listing)
{
	const char *dirs[] = {"r", "r/ab", "r/ab/cd", "r/ab/cd/L2E", "r/.hid", "r/ef"};
	const char *files[] = {"r/top", "r/ab/f2", "r/ab/cd/f1", "r/ab/cd/L2E/x\"q", "r/.hid/no",
			       "r/ab/.dot"};
	struct resp a, b;
	for (int i = 0; i < 2; i++) {
		struct vol *v = i ? &ngx : &mkv;
		char *l;
		for (size_t j = 0; j < sizeof(dirs) / sizeof(dirs[0]); j++) {
			char *d = xasprintf("%s/%s", v->dir, dirs[j]);
			mkdir(d, 0755);
			free(d);
		}
		for (size_t j = 0; j < sizeof(files) / sizeof(files[0]); j++)
			touch(v->dir, files[j]);
		l = xasprintf("%s/r/ab/cd/up", v->dir);
		ck_assert_int_eq(symlink("../..", l), 0);    /* a loop back to r/ */
		free(l);
		l = xasprintf("%s/r/ef/self", v->dir);
		ck_assert_int_eq(symlink(".", l), 0);
		free(l);
		l = xasprintf("%s/r/ef/lf", v->dir);
		ck_assert_int_eq(symlink("../top", l), 0);   /* a link to a file */
		free(l);
	}
	ck_assert_int_eq(put(&mkv, "/r/ab/cd/put", "hello", 5), 201);
	ck_assert_int_eq(req(&mkv, "GET", "/r/?recursive", NULL, 0, NULL, &a), 200);
	ck_assert_int_eq(count_str(a.body.data, "\"type\":\"file\""), 6);
	ck_assert_int_eq(count_str(a.body.data, "\"type\":"), 6);
	ck_assert_ptr_nonnull(strstr(a.body.data, "{ \"name\":\"top\", \"type\":\"file\""));
	ck_assert_ptr_nonnull(strstr(a.body.data, "{ \"name\":\"ab/f2\", \"type\":\"file\""));
	ck_assert_ptr_nonnull(strstr(a.body.data, "{ \"name\":\"ab/cd/f1\""));
	ck_assert_ptr_nonnull(strstr(a.body.data, "{ \"name\":\"ab/cd/L2E/x\\\"q\""));
	ck_assert_ptr_nonnull(strstr(a.body.data, "{ \"name\":\"ef/lf\", \"type\":\"file\""));
	/* what was PUT carries its md5 (of "hello") */
	ck_assert_ptr_nonnull(strstr(a.body.data, "{ \"name\":\"ab/cd/put\""));
	ck_assert_ptr_nonnull(strstr(a.body.data, "\"md5\":\"5d41402abc4b2a76b9719d911017c592\""));
	ck_assert_ptr_null(strstr(a.body.data, "hid"));
	ck_assert_ptr_null(strstr(a.body.data, "dot"));
	ck_assert_int_eq(strncmp(a.body.data, "[\r\n{ \"name\":\"", 13), 0);
	ck_assert_int_eq(strcmp(a.body.data + a.body.len - 3, "\r\n]"), 0);
	h_resp_free(&a);
	/* a file, a missing directory, traversal: as without the argument */
	ck_assert_int_eq(req(&mkv, "GET", "/r/top?recursive", NULL, 0, NULL, &a), 200);
	ck_assert_int_eq(a.body.len, 0);
	h_resp_free(&a);
	ck_assert_int_eq(req(&mkv, "GET", "/nope/?recursive", NULL, 0, NULL, NULL), 404);
	ck_assert_int_ge(req(&mkv, "GET", "/r/../../?recursive", NULL, 0, NULL, NULL), 400);
	/* nginx: the argument changes nothing */
	ck_assert_int_eq(req(&ngx, "GET", "/r/?recursive", NULL, 0, NULL, &a), 200);
	ck_assert_int_eq(req(&ngx, "GET", "/r/", NULL, 0, NULL, &b), 200);
	ck_assert_int_eq(a.body.len, b.body.len);
	ck_assert_int_eq(memcmp(a.body.data, b.body.data, a.body.len), 0);
	ck_assert_ptr_nonnull(strstr(a.body.data, "{ \"name\":\"ab\", \"type\":\"directory\""));
	h_resp_free(&a);
	h_resp_free(&b);
}
END_TEST

/* A directory of 30,000 entries (several listing batches), generated on
 * disk for both servers: the same bytes. */
START_TEST(test_big_listing)
{
	for (int i = 0; i < 2; i++) {
		struct vol *v = i ? &ngx : &mkv;
		char *d = xasprintf("%s/big", v->dir);
		mkdir(d, 0755);
		for (int j = 0; j < 30000; j++) {
			char name[32];
			snprintf(name, sizeof(name), j % 1000 ? "%08x" : "d%07x", j * 2654435761u);
			if (j % 1000)
				touch(d, name);
			else {
				char *s = xasprintf("%s/%s", d, name);
				mkdir(s, 0755);
				free(s);
			}
		}
		free(d);
	}
	same_listing("/big/");
}
END_TEST

/* Answers whose framing a client on a keep-alive connection relies on:
 * several ranges give the whole file from its first byte, and a HEAD of a
 * listing has no body (not even a chunked one's end), so the next answer
 * on the connection is read right (mkv-volume closes after that HEAD). */
START_TEST(test_keep_alive_framing)
{
	static const struct {
		const char *method, *path, *hdr;
		long status;
		const char *body;          /* NULL: not checked */
	} q[] = {
		{"GET", "/frame/f", "Range: bytes=1-2,4-5", 200, "hello world"},
		{"GET", "/frame/f", "Range: bytes=6-,0-0", 200, "hello world"},
		{"HEAD", "/frame/", NULL, 200, ""},
		{"GET", "/frame/f", "Range: bytes=6-", 206, "world"},
		{"HEAD", "/", NULL, 200, ""},
		{"GET", "/frame/f", NULL, 200, "hello world"},
	};
	const struct vol *vs[] = {&mkv, &ngx};
	for (int v = 0; v < 2; v++) {
		int fd;
		ck_assert_int_eq(put(vs[v], "/frame/f", "hello world", 11) / 100, 2);
		fd = h_connect(vs[v]->port);
		ck_assert_int_ge(fd, 0);
		for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
			char *rq = xasprintf("%s %s HTTP/1.1\r\nHost: h\r\n%s%s\r\n", q[i].method,
					     q[i].path, q[i].hdr ? q[i].hdr : "", q[i].hdr ? "\r\n" : "");
			struct buf out = {0};
			long st;
			char *body;
			ck_assert(h_send(fd, rq, strlen(rq)));
			st = h_recv_resp(fd, &out, 10000, q[i].method[0] == 'H');
			buf_append(&out, "", 1);
			ck_assert_msg(st == q[i].status, "%s: %s %s (%s): %ld, want %ld\n%.300s",
				      vs[v] == &mkv ? "mkv-volume" : "nginx", q[i].method, q[i].path,
				      q[i].hdr ? q[i].hdr : "", st, q[i].status, out.data);
			body = strstr(out.data, "\r\n\r\n");
			ck_assert_ptr_nonnull(body);
			if (q[i].body)
				ck_assert_msg(!strcmp(body + 4, q[i].body), "%s: %s %s (%s): body \"%s\"",
					      vs[v] == &mkv ? "mkv-volume" : "nginx", q[i].method,
					      q[i].path, q[i].hdr ? q[i].hdr : "", body + 4);
			if (strcasestr(out.data, "\r\nConnection: close\r\n")) {
				close(fd);           /* the server closes: a new connection */
				fd = h_connect(vs[v]->port);
			}
			buf_free(&out);
			free(rq);
		}
		close(fd);
	}
}
END_TEST

/* Writes, in order, on both. */
START_TEST(test_writes_side_by_side)
{
	static const struct {
		const char *method, *path, *body, *hdr;
		int status;
	} w[] = {
		{"PUT", "/67/c0/L2E/Yg==", "replaced", NULL, 204},
		{"GET", "/67/c0/L2E/Yg==", NULL, NULL, 200},
		{"PUT", "/a/b/c/d/e/f", "deep", NULL, 201},
		{"PUT", "/a/b/", "x", NULL, 409},
		{"PUT", "/a/b", "x", NULL, 409},
		{"PUT", "/cr", "x", "Content-Range: bytes 0-0/1", 501},
		{"DELETE", "/a/b/c/d/e/f", NULL, NULL, 204},
		{"DELETE", "/a/b/c/d/e/f", NULL, NULL, 404},
		{"GET", "/a/b/c/d/e/f", NULL, NULL, 404},
		{"DELETE", "/a/b", NULL, NULL, 409},
		{"DELETE", "/nope", NULL, NULL, 404},
		{"DELETE", "/67/c0/L2E/Yg==", "body", NULL, 415},
		{"DELETE", "/../x", NULL, NULL, 400},
		{"PUT", "/%2e%2e/x", "x", NULL, 400},
		{"PUT", "/x%00", "x", NULL, 400},
		{"PUT", "/sv02/.mkv", "m", NULL, 201},
		{"GET", "/sv02/.mkv", NULL, NULL, 200},
		{"PUT", "/chunked", "chunky", "Transfer-Encoding: chunked", 201},
		{"GET", "/chunked", NULL, NULL, 200},
		{"PUT", "/zero", "", NULL, 201},
		{"GET", "/zero", NULL, NULL, 200},
	};
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		struct resp a, b;
		size_t len = w[i].body ? strlen(w[i].body) : 0;
		long sa = req(&mkv, w[i].method, w[i].path, w[i].body, len, w[i].hdr, &a);
		long sb = req(&ngx, w[i].method, w[i].path, w[i].body, len, w[i].hdr, &b);
		ck_assert_msg(sa == w[i].status && sb == w[i].status, "%s %s: mkv %ld nginx %ld",
			      w[i].method, w[i].path, sa, sb);
		if (sa == 200)
			ck_assert(a.body.len == b.body.len &&
				  !memcmp(a.body.data, b.body.data, a.body.len));
		h_resp_free(&a);
		h_resp_free(&b);
	}
	same_listing("/a/b/c/d/e/");
	same_listing("/");
}
END_TEST

/* The 301 to a directory's URL with its slash: on the Host asked for (an
 * IPv6 literal whole), else the address reached, with the query kept. */
START_TEST(test_dir_redirect)
{
	static const struct {
		const char *req, *loc;      /* loc: %d is the server's port */
	} q[] = {
		{"GET /67?recursive&a=%20 HTTP/1.1\r\nHost: h\r\n", "http://h:%d/67/?recursive&a=%%20"},
		{"GET /67/c0 HTTP/1.1\r\nHost: [::1]:9\r\n", "http://[::1]:%d/67/c0/"},
		{"HEAD /67 HTTP/1.1\r\nHost: [::1]\r\n", "http://[::1]:%d/67/"},
		{"GET /67 HTTP/1.0\r\n", "http://127.0.0.1:%d/67/"},
		{"GET /\xc3\xa9 HTTP/1.1\r\nHost: h\r\n", "http://h:%d/%%C3%%A9/"},
	};
	const struct vol *vs[] = {&mkv, &ngx};
	for (int v = 0; v < 2; v++) {
		ck_assert_int_eq(put(vs[v], "/%C3%A9/f", "x", 1), 201);
		for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
			char *rq = xasprintf("%sConnection: close\r\n\r\n", q[i].req), *want, *got;
			struct buf out = {0};
			ck_assert_int_eq(h_raw(vs[v]->port, rq, strlen(rq), &out, 10000), 301);
			buf_append(&out, "", 1);
			want = xasprintf(q[i].loc, vs[v]->port);
			got = strstr(out.data, "\r\nLocation: ");
			ck_assert_ptr_nonnull(got);
			got += strlen("\r\nLocation: ");
			ck_assert_msg(!strncmp(got, want, strlen(want)) && got[strlen(want)] == '\r',
				      "%s: %s: %.60s, want %s", vs[v] == &mkv ? "mkv-volume" : "nginx",
				      q[i].req, got, want);
			buf_free(&out);
			free(rq);
			free(want);
		}
	}
}
END_TEST

/* A body in a coding other than chunked: 501 at once, as nginx (libmicrohttpd
 * alone waits for the client to close). */
START_TEST(test_unknown_coding)
{
	static const char *const q[] = {
		"GET /67/ HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n",
		"PUT /te/a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"PUT /te/b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\nContent-Length: 1\r\n\r\nx",
	};
	const struct vol *vs[] = {&mkv, &ngx};
	for (int v = 0; v < 2; v++) {
		for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
			long st = h_raw(vs[v]->port, q[i], strlen(q[i]), NULL, 10000);
			ck_assert_msg(st == 501, "%s: %.40s: %ld", vs[v] == &mkv ? "mkv-volume" : "nginx",
				      q[i], st);
		}
		ck_assert_int_eq(req(vs[v], "GET", "/te/a", NULL, 0, NULL, NULL), 404);
	}
}
END_TEST

/* Two Content-Lengths that differ: 400, as nginx, and nothing stored
 * (libmicrohttpd alone took the first and read the rest as a request). */
START_TEST(test_two_lengths)
{
	const char *q = "PUT /two/a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
			"Content-Length: 4\r\n\r\nabcd";
	const struct vol *vs[] = {&mkv, &ngx};
	for (int v = 0; v < 2; v++) {
		long st = h_raw(vs[v]->port, q, strlen(q), NULL, 10000);
		ck_assert_msg(st == 400, "%s: %ld", vs[v] == &mkv ? "mkv-volume" : "nginx", st);
		ck_assert_int_eq(req(vs[v], "GET", "/two/a", NULL, 0, NULL, NULL), 404);
	}
}
END_TEST

/* No DELETE removes a directory tree: nginx's dav module would, with the
 * data directory itself for "DELETE /"; its config refuses it. */
START_TEST(test_no_tree_delete)
{
	static const char *const paths[] = {"/tree/a/", "/tree/", "/", "//tree//", "/tree%2F"};
	const struct vol *vs[] = {&mkv, &ngx};
	for (int v = 0; v < 2; v++) {
		ck_assert_int_eq(put(vs[v], "/tree/a/f", "x", 1) / 100, 2);
		for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
			long st = req(vs[v], "DELETE", paths[i], NULL, 0, NULL, NULL);
			ck_assert_msg(st == 409, "%s: DELETE %s: %ld",
				      vs[v] == &mkv ? "mkv-volume" : "nginx", paths[i], st);
		}
		ck_assert_int_eq(req(vs[v], "GET", "/tree/a/f", NULL, 0, NULL, NULL), 200);
		ck_assert_int_eq(req(vs[v], "DELETE", "/tree/a/f", NULL, 0, NULL, NULL), 204);
	}
}
END_TEST

/* Bodies of several sendfile calls, whole and in ranges, one after another
 * on one keep-alive connection: mkv-volume widens libmicrohttpd's sendfile
 * calls and sends each header with its body (volume/wire.c), and must
 * never send a byte past a range's end, nor leave a response waiting for a
 * push (each would stall 200 ms).  HEAD, 304 and 404 answers come between. */
START_TEST(test_large_bodies)
{
	enum { N = 3 * 1024 * 1024 + 5 };
	static const struct {
		const char *method, *hdr;
		long status;
		size_t from, to;           /* the body: big[from, to) */
	} q[] = {
		{"GET", NULL, 200, 0, N},
		{"HEAD", NULL, 200, 0, 0},
		{"GET", "Range: bytes=100-2500000", 206, 100, 2500001},
		{"GET", "Range: bytes=-1500000", 206, N - 1500000, N},
		{"GET", "Range: bytes=131072-262143", 206, 131072, 262144},
		{"GET", "Range: bytes=131072-262144", 206, 131072, 262145},
		{"GET", "Range: bytes=131072-262145", 206, 131072, 262146},
		{"GET", "Range: bytes=1048576-", 206, 1048576, N},
		{"GET", "If-None-Match: *", 304, 0, 0},
		{"GET", "Range: bytes=0-0", 206, 0, 1},
		{"GET", NULL, 200, 0, N},
	};
	char *b = blob(N, 77);
	const struct vol *vs[] = {&mkv, &ngx};
	ck_assert_int_eq(put(&mkv, "/big/3m", b, N), 201);
	ck_assert_int_eq(put(&ngx, "/big/3m", b, N), 201);
	for (int v = 0; v < 2; v++) {
		int fd = h_connect(vs[v]->port);
		struct timespec t0, t1;
		ck_assert_int_ge(fd, 0);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int round = 0; round < 4; round++) {
			for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
				char *rq = xasprintf("%s /big/%s HTTP/1.1\r\nHost: h\r\n%s%s\r\n",
						     q[i].method, i == 8 && round ? "none" : "3m",
						     q[i].hdr ? q[i].hdr : "", q[i].hdr ? "\r\n" : "");
				struct buf out = {0};
				long want = i == 8 && round ? 404 : q[i].status;
				long st;
				char *body;
				ck_assert(h_send(fd, rq, strlen(rq)));
				st = h_recv_resp(fd, &out, 10000, q[i].method[0] == 'H');
				ck_assert_msg(st == want, "%s: %s %s: %ld, want %ld",
					      vs[v] == &mkv ? "mkv-volume" : "nginx", q[i].method,
					      q[i].hdr ? q[i].hdr : "", st, want);
				buf_append(&out, "", 1);
				body = strstr(out.data, "\r\n\r\n") + 4;
				if (want != 404) {
					size_t n = out.len - 1 - (size_t)(body - out.data);
					ck_assert_msg(n == q[i].to - q[i].from &&
						      !memcmp(body, b + q[i].from, n),
						      "%s %s: %zu bytes, want %zu", q[i].method,
						      q[i].hdr ? q[i].hdr : "", n, q[i].to - q[i].from);
				}
				buf_free(&out);
				free(rq);
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		close(fd);
		/* 44 answers; one stalled push alone would cost 200 ms, so a
		 * volume whose pushes all stall takes 9 s.  Under the sanitizer
		 * (and its load) the time says nothing: there it is only told. */
		if (getenv("MKV_CHILD_ASAN_OPTIONS"))
			fprintf(stderr, "large bodies: 44 answers in %ld s\n",
				(long)(t1.tv_sec - t0.tv_sec));
		else
			ck_assert_msg(t1.tv_sec - t0.tv_sec < 6, "44 answers took %ld s",
				      (long)(t1.tv_sec - t0.tv_sec));
	}
	free(b);
}
END_TEST

/* Conditional requests against each server's own validators. */
START_TEST(test_conditional)
{
	for (int i = 0; i < 2; i++) {
		struct vol *v = i ? &ngx : &mkv;
		struct resp r;
		char *etag, *lm, h[128];
		ck_assert_int_eq(req(v, "GET", "/3e/d1/L2hlbGxv", NULL, 0, NULL, &r), 200);
		etag = hdr(&r, "ETag");
		lm = hdr(&r, "Last-Modified");
		h_resp_free(&r);
		snprintf(h, sizeof(h), "If-None-Match: %s", etag);
		ck_assert_int_eq(req(v, "GET", "/3e/d1/L2hlbGxv", NULL, 0, h, NULL), 304);
		snprintf(h, sizeof(h), "If-Modified-Since: %s", lm);
		ck_assert_int_eq(req(v, "GET", "/3e/d1/L2hlbGxv", NULL, 0, h, NULL), 304);
		snprintf(h, sizeof(h), "If-None-Match: \"other\"");
		ck_assert_int_eq(req(v, "GET", "/3e/d1/L2hlbGxv", NULL, 0, h, NULL), 200);
		{
			/* nginx's not-modified filter: If-Match and If-Unmodified-Since
			 * fail with 412 (before any Range), ETag lists, weak
			 * If-None-Match, every HTTP date form. */
			char *asctime_lm = NULL;
			struct tm tm;
			const char *ok[][2] = {
				{"If-None-Match: \"x\", %s", "304"},
				{"If-None-Match: W/%s", "304"},
				{"If-Match: \"x\", %s", "200"},
				{"If-Match: %s", "200"},
				{"If-Match: *", "200"},
				{"If-Match: W/%s", "412"},
				{"If-Match: \"x\"", "412"},
				{"If-Unmodified-Since: %L", "200"},
				{"If-Unmodified-Since: %A", "200"},
				{"If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT", "412"},
				{"If-Unmodified-Since: garbage", "412"},
				{"If-Modified-Since: %A", "304"},
				{"If-Modified-Since: garbage", "200"},
			};
			memset(&tm, 0, sizeof(tm));
			ck_assert_ptr_nonnull(strptime(lm, "%a, %d %b %Y %H:%M:%S GMT", &tm));
			asctime_lm = xmalloc(64);
			strftime(asctime_lm, 64, "%a %b %e %H:%M:%S %Y", &tm);
			for (size_t j = 0; j < sizeof(ok) / sizeof(ok[0]); j++) {
				const char *f = ok[j][0], *pc = strchr(f, '%');
				char line[160];
				snprintf(line, sizeof(line), "%.*s%s%s", pc ? (int)(pc - f) : (int)strlen(f), f,
					 !pc ? "" : pc[1] == 's' ? etag : pc[1] == 'L' ? lm : asctime_lm,
					 pc ? pc + 2 : "");
				ck_assert_msg(req(v, "GET", "/3e/d1/L2hlbGxv", NULL, 0, line, NULL) ==
						      atol(ok[j][1]),
					      "%s: %s: want %s", i ? "nginx" : "mkv-volume", line, ok[j][1]);
			}
			{
				const char *two[] = {"If-Match: \"x\"", "Range: bytes=0-1", NULL};
				struct resp r2;
				char *u = url(v, "/3e/d1/L2hlbGxv");
				ck_assert_int_eq(h_http("GET", u, NULL, 0, two, false, &r2), 412);
				h_resp_free(&r2);
				free(u);
			}
			{
				/* If-Range: an ETag exactly, or the time in any date form */
				const char *ir[][2] = {{"%A", "206"}, {"%L", "206"}, {"W/%s", "200"},
						       {"%s", "206"}, {"garbage", "200"}};
				for (size_t j = 0; j < sizeof(ir) / sizeof(ir[0]); j++) {
					const char *f = ir[j][0], *pc = strchr(f, '%');
					char line[160];
					const char *two[] = {line, "Range: bytes=0-1", NULL};
					struct resp r2;
					char *u = url(v, "/3e/d1/L2hlbGxv");
					snprintf(line, sizeof(line), "If-Range: %.*s%s", pc ? (int)(pc - f) : (int)strlen(f), f,
						 !pc ? "" : pc[1] == 's' ? etag : pc[1] == 'L' ? lm : asctime_lm);
					ck_assert_msg(h_http("GET", u, NULL, 0, two, false, &r2) == atol(ir[j][1]),
						      "%s: %s: want %s", i ? "nginx" : "mkv-volume", line, ir[j][1]);
					h_resp_free(&r2);
					free(u);
				}
			}
			free(asctime_lm);
		}
		free(etag);
		free(lm);
	}
}
END_TEST

/* ---------- mkv-volume only ---------- */

static struct vol solo;
static void solo_start(void)
{
	h_vol_start(&solo, VOL_MKV);
}
static void solo_stop(void)
{
	h_vol_stop(&solo);
}

/* md5 as an xattr and in the listing, for plain, nested and chunked PUTs. */
START_TEST(test_md5)
{
	static const char *paths[] = {"/5d/41/aGVsbG8=", "/67/c0/L2E/Yg==", "/md5/chunked"};
	for (int i = 0; i < 3; i++) {
		size_t n = 100000 + (size_t)i * 77777;
		char *b = blob(n, (unsigned)i + 100), want[33], got[40] = {0}, *f, *dir, *needle;
		struct resp r;
		const char *hl[] = {"Transfer-Encoding: chunked", NULL};
		char *u = url(&solo, paths[i]);
		md5_hex(b, n, want);
		ck_assert_int_eq(h_http("PUT", u, b, n, i == 2 ? hl : NULL, false, &r), 201);
		h_resp_free(&r);
		f = xasprintf("%s%s", solo.dir, paths[i]);
		ck_assert_int_eq(getxattr(f, VOL_MD5_XATTR, got, sizeof(got)), 32);
		ck_assert_str_eq(got, want);
		dir = xstrndup(paths[i], (size_t)(strrchr(paths[i], '/') - paths[i] + 1));
		ck_assert_int_eq(req(&solo, "GET", dir, NULL, 0, NULL, &r), 200);
		needle = xasprintf("\"name\":\"%s\", \"type\":\"file\", \"mtime\":\"", strrchr(paths[i], '/') + 1);
		ck_assert_ptr_nonnull(strstr(r.body.data, needle));
		free(needle);
		needle = xasprintf(", \"size\":%zu, \"md5\":\"%s\" }", n, want);
		ck_assert_msg(strstr(r.body.data, needle) != NULL, "%s", r.body.data);
		h_resp_free(&r);
		/* A replacement gets the new md5. */
		ck_assert_int_eq(h_http("PUT", u, "x", 1, NULL, false, &r), 204);
		h_resp_free(&r);
		md5_hex("x", 1, want);
		ck_assert_int_eq(getxattr(f, VOL_MD5_XATTR, got, sizeof(got)), 32);
		ck_assert_str_eq(got, want);
		free(b), free(f), free(dir), free(needle), free(u);
	}
}
END_TEST

static int connect_to(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static void send_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static int hidden_files(const char *dir)
{
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, ".mkv-tmp", 8))
			n++;
	if (d)
		closedir(d);
	return n;
}

/* A PUT cut off mid-body leaves nothing; a slow client stalls nobody. */
START_TEST(test_cut_and_slow)
{
	const char *head = "PUT /cut/off/file HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n";
	int fd = connect_to(solo.port), slow;
	char *dir = xasprintf("%s/cut/off", solo.dir);
	uint64_t end;

	send_all(fd, head, strlen(head));
	send_all(fd, "partial body", 12);
	/* the PUT has begun: its directories are made */
	for (end = now_ms() + 20000; access(dir, F_OK) != 0 && now_ms() < end;)
		usleep(10000);
	ck_assert_int_eq(access(dir, F_OK), 0);
	close(fd);
	/* The server notices within a reaper round; the cleanup follows. */
	for (end = now_ms() + 20000; count_files(dir) != 0 && now_ms() < end;)
		usleep(20000);
	ck_assert_int_eq(count_files(dir), 0);
	{
		char *u = url(&solo, "/cut/off/file");
		ck_assert_int_eq(h_status("GET", u), 404);
		free(u);
	}

	/* One connection stalls mid-body; others are served meanwhile. */
	slow = connect_to(solo.port);
	send_all(slow, head, strlen(head));
	send_all(slow, "some", 4);
	for (int i = 0; i < 50; i++) {    /* each answered, none waits on it (20 s) */
		static const char get[] = "GET /.mkv-nothing HTTP/1.1\r\nHost: x\r\n\r\n";
		ck_assert_int_eq(h_raw(solo.port, get, sizeof(get) - 1, NULL, 20000), 404);
	}
	close(slow);
	ck_assert_int_eq(hidden_files(dir), 0);
	free(dir);
}
END_TEST

/* Malformed requests, each on a connection of its own, the client's side
 * shut after it: each gets nginx's answer from both servers (status; 0:
 * the connection closed unanswered); a refused PUT stores nothing.  None
 * hangs (20 s). */
static const struct {
	const char *req, *path;
	long status;
} hostile[] = {
	{"GARBAGE\r\n\r\n", NULL, 400},
	{"GET\r\n\r\n", NULL, 400},
	{"\x16\x03\x01\x02\x01\x01\x01\x01\xfc\x03\x03\r\n\r\n", NULL, 400},  /* TLS-like */
	{"GET / HTTP/1.1\r\n\r\n", NULL, 400},    /* no Host */
	{"GET /%00 HTTP/1.1\r\nHost: x\r\n\r\n", NULL, 400},
	{"GET http://x/../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", NULL, 400},
	{"GET /67/c0/L2E/Yg== HTTP/1.1\r\nHost: x\r\nRange: bytes=99999999999999999999999-\r\n"
	 "\r\n", NULL, 416},
	{"PUT /hostile/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	 "/hostile/x", 400},
	{"PUT /hostile/y HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", "/hostile/y", 400},
	{"PUT /hostile/z HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
	 "\r\nc\r\nhello world!\r\n0\r\n\r\n", "/hostile/z", 400},
	{"PUT /hostile/w HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
	 "Content-Length: 100000\r\n\r\nc\r\nhello world!\r\n0\r\n\r\n", "/hostile/w", 400},
};

START_TEST(test_hostile_side_by_side)
{
	const struct vol *vs[] = {&mkv, &ngx};
	for (int v = 0; v < 2; v++) {
		int fd = connect_to(vs[v]->port);
		long st;
		send_all(fd, hostile[_i].req, strlen(hostile[_i].req));
		shutdown(fd, SHUT_WR);
		st = h_recv_resp(fd, NULL, 20000, false);
		close(fd);
		ck_assert_msg(st == hostile[_i].status, "%s: %.50s: %ld, want %ld",
			      v ? "nginx" : "mkv-volume", hostile[_i].req, st, hostile[_i].status);
		if (hostile[_i].path)
			ck_assert_int_eq(req(vs[v], "GET", hostile[_i].path, NULL, 0, NULL, NULL), 404);
	}
}
END_TEST

/* Garbage and oversized requests are answered or closed; the server lives. */
START_TEST(test_hostile_input)
{
	char *huge = xmalloc(300000), *u;
	/* 300 KB of headers: refused (431 or a close), memory stays bounded. */
	{
		int fd = connect_to(solo.port), n;
		char reply[64] = {0};
		n = snprintf(huge, 300000, "GET / HTTP/1.1\r\nHost: x\r\nX: ");
		memset(huge + n, 'a', 299000 - (size_t)n);
		memcpy(huge + 299000, "\r\n\r\n", 5);
		send_all(fd, huge, strlen(huge));
		recv(fd, reply, sizeof(reply) - 1, 0);
		ck_assert_msg(!strncmp(reply, "HTTP/1.1 4", 10) || !reply[0], "%s", reply);
		close(fd);
	}
	free(huge);
	ck_assert_int_eq(kill(solo.pid, 0), 0);
	u = url(&solo, "/");
	ck_assert_int_eq(h_status("GET", u), 200);
	free(u);
	ck_assert_int_eq(hidden_files(solo.dir), 0);
}
END_TEST

/* A subvolume that is a symlink to another disk is followed. */
START_TEST(test_symlinked_subvolume)
{
	char *other = h_tmpdir(), *link = xasprintf("%s/sv07", solo.dir), *f;
	struct resp r;
	struct stat st;
	ck_assert_int_eq(symlink(other, link), 0);
	ck_assert_int_eq(put(&solo, "/sv07/.mkv", "m", 1), 201);
	ck_assert_int_eq(put(&solo, "/sv07/3e/d1/L2hlbGxv", "hi", 2), 201);
	f = xasprintf("%s/3e/d1/L2hlbGxv", other);
	ck_assert_int_eq(stat(f, &st), 0);
	ck_assert_int_eq(st.st_size, 2);
	ck_assert_int_eq(req(&solo, "GET", "/sv07/3e/d1/L2hlbGxv", NULL, 0, NULL, &r), 200);
	ck_assert_int_eq(r.body.len, 2);
	h_resp_free(&r);
	ck_assert_int_eq(req(&solo, "GET", "/", NULL, 0, NULL, &r), 200);
	ck_assert_ptr_nonnull(strstr(r.body.data, "{ \"name\":\"sv07\", \"type\":\"directory\""));
	h_resp_free(&r);
	ck_assert_int_eq(req(&solo, "DELETE", "/sv07/3e/d1/L2hlbGxv", NULL, 0, NULL, NULL), 204);
	ck_assert_int_ne(stat(f, &st), 0);
	unlink(link);
	h_rmrf(other);
	free(other), free(link), free(f);
}
END_TEST

/* ---------- in-process server, with faults injected ---------- */

static struct vol_server *inproc;
static char *inproc_dir;
static char inproc_base[64];
static int inproc_port;

static void inproc_start(void)
{
	char *tmp = h_tmpdir();
	inproc_dir = xasprintf("%s/data", tmp);
	free(tmp);
	inproc_port = h_free_port();
	snprintf(inproc_base, sizeof(inproc_base), "http://127.0.0.1:%d", inproc_port);
	inproc = vol_server_start(inproc_port, inproc_dir, 60000, NULL, NULL, NULL);
	ck_assert_ptr_nonnull(inproc);
}

static void inproc_stop(void)
{
	char *parent = xstrdup(inproc_dir);
	vol_server_stop(inproc);
	*strrchr(parent, '/') = '\0';
	h_rmrf(parent);
	free(parent);
	free(inproc_dir);
}

static int count_tree(const char *dir)
{
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char *p;
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		p = xasprintf("%s/%s", dir, de->d_name);
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			n += count_tree(p);
		else
			n++;
		free(p);
	}
	if (d)
		closedir(d);
	return n;
}

/* Disk full mid-body over HTTP: 507 at once, nothing on disk. */
START_TEST(test_enospc_http)
{
	size_t n = 2 << 20;
	char *b = blob(n, 3), *u = xasprintf("%s/ab/cd/full", inproc_base);
	struct resp r;
	vol_fs_fail_after = 300000;
	ck_assert_int_eq(h_http("PUT", u, b, n, NULL, false, &r), 507);
	ck_assert_ptr_nonnull(strstr(r.body.data, "insufficient storage"));
	h_resp_free(&r);
	ck_assert_int_eq(count_tree(inproc_dir), 0);
	vol_fs_fail_after = 0;
	ck_assert_int_eq(h_http("PUT", u, b, n, NULL, false, &r), 201);
	h_resp_free(&r);
	ck_assert_int_eq(count_tree(inproc_dir), 1);
	free(b), free(u);
}
END_TEST

static atomic_int slow_puts_done;

static void *slow_put(void *arg)
{
	char *u = xasprintf("%s/slow/%d", inproc_base, (int)(intptr_t)arg);
	struct resp r;
	long st = h_http("PUT", u, "data", 4, NULL, false, &r);
	atomic_fetch_add(&slow_puts_done, 1);
	h_resp_free(&r);
	free(u);
	return (void *)(intptr_t)st;
}

/* Files this process (the in-process server) holds open under dir: the
 * temporary files of the PUTs under way there. */
static int open_under(const char *dir)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	size_t l = strlen(dir);
	while (d && (de = readdir(d))) {
		char p[300], target[4096];
		ssize_t k;
		snprintf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
		k = readlink(p, target, sizeof(target) - 1);
		if (k > 0 && (size_t)k > l && !strncmp(target, dir, l) && target[l] == '/')
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* PUTs waiting on a slow disk (3 s per fsync) stall no other request:
 * more of them than the server has threads, and GETs are all answered
 * while every PUT still waits (an order of events, not a speed). */
START_TEST(test_slow_disk_stalls_nobody)
{
	pthread_t t[8];
	uint64_t t0, end;
	char *u = xasprintf("%s/", inproc_base), *dir = xasprintf("%s/slow", inproc_dir);
	atomic_store(&slow_puts_done, 0);
	vol_fs_slow_sync_ms = 3000;
	t0 = now_ms();
	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, slow_put, (void *)(intptr_t)i);
	/* every PUT has its file open (its 4 bytes come with its head) */
	for (end = now_ms() + 20000; open_under(dir) < 8 && now_ms() < end;)
		usleep(10000);
	ck_assert_int_eq(open_under(dir), 8);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(h_status("GET", u), 200);
	ck_assert_msg(atomic_load(&slow_puts_done) == 0, "the GETs waited for %d PUTs' fsyncs",
		      atomic_load(&slow_puts_done));
	for (int i = 0; i < 8; i++) {
		void *st;
		pthread_join(t[i], &st);
		ck_assert_int_eq((int)(intptr_t)st, 201);
	}
	ck_assert_uint_ge(now_ms() - t0, 3000);     /* the slow disk was slow */
	vol_fs_slow_sync_ms = 0;
	free(u), free(dir);
}
END_TEST

/* Several requests on one connection, refusals included, all answered
 * in order (keep-alive survives a 404, a 409 with a body, a 416). */
START_TEST(test_keep_alive)
{
	const char *reqs =
		"PUT /ka/x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
		"GET /ka/x HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody"
		"GET /ka/none HTTP/1.1\r\nHost: h\r\n\r\n"
		"PUT /ka/ HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
		"GET /ka/x HTTP/1.1\r\nHost: h\r\nRange: bytes=9-\r\n\r\n"
		"DELETE /ka/x HTTP/1.1\r\nHost: h\r\n\r\n"
		"GET /ka/x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
	const char *want[] = {"HTTP/1.1 201", "HTTP/1.1 200", "HTTP/1.1 404", "HTTP/1.1 409",
			      "HTTP/1.1 416", "HTTP/1.1 204", "HTTP/1.1 404"};
	struct buf got = {0};
	char tmp[4096];
	ssize_t n;
	const char *p;
	int fd = connect_to(inproc_port);
	send_all(fd, reqs, strlen(reqs));
	while ((n = recv(fd, tmp, sizeof(tmp), 0)) > 0)
		buf_append(&got, tmp, (size_t)n);
	buf_append(&got, "", 1);
	close(fd);
	p = got.data;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		p = strstr(p, "HTTP/1.1 ");
		ck_assert_msg(p && !strncmp(p, want[i], strlen(want[i])), "reply %zu: %.40s", i,
			      p ? p : "(none)");
		p++;
	}
	buf_free(&got);
}
END_TEST

/* mkv-volume with argv refuses to start: exit 2 (a signal is a crash, not
 * a refusal), saying says and its usage.  Its output goes to log. */
static void refused(const char *const argv[], const char *log, const char *says)
{
	int st;
	char *out;
	pid_t pid = h_spawn((char *const *)argv, log);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	out = h_read_file(log);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(out, says) &&
		      strstr(out, "usage: mkv-volume "), "mkv-volume %s: %s %d, want exit 2 "
		      "saying \"%s\"; it printed:\n%s", argv[1] ? argv[1] : "(no arguments)",
		      WIFEXITED(st) ? "exit" : "signal",
		      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), says, out);
	free(out);
	unlink(log);
}

/* Does directory dir hold an entry name? */
static bool dir_has(const char *dir, const char *name)
{
	char *p = xasprintf("%s/%s", dir, name);
	bool yes = access(p, F_OK) == 0;
	free(p);
	return yes;
}

START_TEST(test_flags_and_signals)
{
	char *bin = h_bin("mkv-volume"), *tmp = h_tmpdir(), *dir = xasprintf("%s/new/data", tmp);
	char *log = xasprintf("%s/out", tmp), port[16];
	int p = h_free_port(), st;
	pid_t pid;
	for (int i = 0; i < 2; i++) {           /* the usage, every flag, exit 0 */
		char *log = xasprintf("%s/help", tmp), *out;
		pid = h_spawn((char *[]){bin, i ? "--help" : "-h", dir, NULL}, log);
		waitpid(pid, &st, 0);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		out = h_read_file(log);
		ck_assert_msg(!strncmp(out, "usage: mkv-volume ", 18) && strstr(out, "\n  -port N ") &&
			      strstr(out, "\n  -idletimeout D ") && strstr(out, "\n  -metrics H:P ") &&
			      strstr(out, "\n  -accesslog FILE "), "mkv-volume -h printed:\n%s", out);
		free(out);
		unlink(log);
		free(log);
	}
	ck_assert_int_eq(access(dir, F_OK), -1);     /* -h serves nothing */
	refused((const char *[]){bin, "-bogus", dir, NULL}, log,
		"flag provided but not defined: -bogus");
	refused((const char *[]){bin, "-port", "x", dir, NULL}, log, "bad port x");
	refused((const char *[]){bin, NULL}, log, "give one directory");
	snprintf(port, sizeof(port), "%d", p);
	pid = h_spawn((char *[]){bin, "--port", port, dir, NULL}, log);
	ck_assert(h_wait_port(p, 20000));
	ck_assert_int_eq(access(dir, F_OK), 0);      /* created, parents too */
	{
		/* Some traffic first, so that a clean exit (and, under
		 * SANITIZE=1, no leak) means something. */
		struct vol v = {.port = p};
		int fd;
		const char *cut = "PUT /c/d HTTP/1.1\r\nHost: x\r\nContent-Length: 99\r\n\r\nabc";
		const char *open_put = "PUT /e/f HTTP/1.1\r\nHost: x\r\nContent-Length: 99\r\n\r\nabc";
		uint64_t end;
		v.name = xasprintf("127.0.0.1:%d", p);
		ck_assert_int_eq(put(&v, "/ab/cd/x", "data", 4), 201);
		ck_assert_int_eq(req(&v, "GET", "/ab/cd/x", NULL, 0, "Range: bytes=1-2", NULL), 206);
		ck_assert_int_eq(req(&v, "GET", "/ab/", NULL, 0, NULL, NULL), 200);
		ck_assert_int_eq(req(&v, "GET", "/%00", NULL, 0, NULL, NULL), 400);
		ck_assert_int_eq(req(&v, "DELETE", "/ab/cd/x", NULL, 0, NULL, NULL), 204);
		fd = connect_to(p);
		send_all(fd, cut, strlen(cut));
		close(fd);
		fd = connect_to(p);          /* and one left open, begun */
		send_all(fd, open_put, strlen(open_put));
		for (end = now_ms() + 20000; !dir_has(dir, "e") && now_ms() < end;)
			usleep(10000);
		ck_assert(dir_has(dir, "e"));
		free(v.name);
		st = h_stop(pid, SIGINT);
		close(fd);
	}
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "mkv-volume on SIGINT: %s %d (see %s)",
		      WIFEXITED(st) ? "exit" : "signal",
		      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), log);
	h_log_check(log);
	h_rmrf(tmp);
	free(bin), free(tmp), free(dir), free(log);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("volume");
	TCase *unit = tcase_create("units"), *side = tcase_create("side by side");
	TCase *solo_tc = tcase_create("mkv-volume");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(unit, test_path_clean, 0, sizeof(paths) / sizeof(paths[0]));
	tcase_add_test(unit, test_path_too_long);
	tcase_add_loop_test(unit, test_range_parse, 0, sizeof(ranges) / sizeof(ranges[0]));
	tcase_add_test(unit, test_range_empty_file);
	tcase_add_test(unit, test_validators);
	tcase_add_test(unit, test_listing_batches);
	tcase_add_test(unit, test_put_enospc);
	tcase_add_test(unit, test_errno_table);
	tcase_add_test(unit, test_http_date);
	suite_add_tcase(s, unit);

	tcase_add_unchecked_fixture(side, both_start, both_stop);
	tcase_set_timeout(side, 60);
	tcase_add_loop_test(side, test_side_by_side, 0, sizeof(reads) / sizeof(reads[0]));
	tcase_add_test(side, test_listings_equal);
	tcase_add_test(side, test_big_listing);
	tcase_add_test(side, test_recursive_listing);
	tcase_add_test(side, test_conditional);
	tcase_add_test(side, test_keep_alive_framing);
	tcase_add_test(side, test_dir_redirect);
	tcase_add_test(side, test_unknown_coding);
	tcase_add_test(side, test_two_lengths);
	tcase_add_test(side, test_writes_side_by_side);
	tcase_add_test(side, test_large_bodies);
	tcase_add_test(side, test_no_tree_delete);
	tcase_add_loop_test(side, test_hostile_side_by_side, 0, sizeof(hostile) / sizeof(hostile[0]));
	suite_add_tcase(s, side);

	tcase_add_unchecked_fixture(solo_tc, solo_start, solo_stop);
	tcase_set_timeout(solo_tc, 60);
	tcase_add_test(solo_tc, test_md5);
	tcase_add_test(solo_tc, test_cut_and_slow);
	tcase_add_test(solo_tc, test_hostile_input);
	tcase_add_test(solo_tc, test_symlinked_subvolume);
	tcase_add_test(solo_tc, test_flags_and_signals);
	suite_add_tcase(s, solo_tc);

	{
		TCase *inp = tcase_create("in-process");
		tcase_add_checked_fixture(inp, inproc_start, inproc_stop);
		tcase_set_timeout(inp, 30);
		tcase_add_test(inp, test_enospc_http);
		tcase_add_test(inp, test_slow_disk_stalls_nobody);
		tcase_add_test(inp, test_keep_alive);
		suite_add_tcase(s, inp);
	}

	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
