/* check_listing.c -- ?list and ?unlinked through a real master over an
 * index written straight into LevelDB before it starts: paging with limit
 * and start gives exactly the keys, in Go's JSON, whether the answer is
 * held whole or streamed; limit is percent-decoded; more than 1,000,000
 * keys answer 200 with every key, and ?list&locations too, in the same
 * memory; 16 listings at once leave the master's peak memory where it was. */
#include <check.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../master/handlers.h"
#include "../master/index.h"
#include "harness.h"

static struct master m;
static struct vol vol;     /* named only: listings ask no volume */
static char volname[32];

/* The index's keys, in byte order, as the test wrote them. */
struct model {
	char **key;
	size_t *klen;
	bool *unlinked;
	int n;
};
static struct model md;

static void model_free(void)
{
	for (int i = 0; i < md.n; i++)
		free(md.key[i]);
	free(md.key);
	free(md.klen);
	free(md.unlinked);
	memset(&md, 0, sizeof(md));
}

/* Write the model's keys into a fresh index, then start a master on it. */
static void start(void)
{
	char *tmp = h_tmpdir(), *why = NULL;
	static const char *const flags[] = {"-replicas", "1", NULL};
	struct index *idx;
	m.db = xasprintf("%s/db", tmp);
	m.log = xasprintf("%s/master.log", tmp);
	free(tmp);
	idx = index_open(m.db, &why);
	ck_assert_msg(idx != NULL, "%s", why);
	for (int i = 0; i < md.n; i++) {
		const char *v = md.unlinked[i] ? "DELETEDv:1" : "v:1";
		ck_assert_int_eq(index_write(idx, md.key[i], md.klen[i], v, strlen(v), false), 0);
	}
	ck_assert_int_eq(index_sync(idx), 0);
	index_close(idx);
	snprintf(volname, sizeof(volname), "127.0.0.1:%d", h_free_port());
	vol.name = volname;
	h_master_start(&m, &vol, 1, flags);
}

/* The master stops cleanly: under the sanitizer, a leaked listing (a
 * client gone mid-stream) would make it exit 23. */
static void stop(void)
{
	int st = h_stop(m.pid, SIGTERM);
	m.pid = 0;
	h_master_stop(&m);
	model_free();
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the master's exit: %d", st);
}

static void model_alloc(int n)
{
	md.key = xcalloc((size_t)n, sizeof(*md.key));
	md.klen = xcalloc((size_t)n, sizeof(*md.klen));
	md.unlinked = xcalloc((size_t)n, sizeof(*md.unlinked));
	md.n = n;
}

static void model_set(int i, const char *k, size_t klen, bool unlinked)
{
	md.key[i] = xmalloc(klen + 1);
	memcpy(md.key[i], k, klen);
	md.key[i][klen] = '\0';
	md.klen[i] = klen;
	md.unlinked[i] = unlinked;
}

/* The listing of the model's keys of the kind under prefix from start
 * (NULL: the prefix's first) on, limit keys (0: all), as mkv and
 * minikeyvalue write it; *next_i: the model index of next, -1 for none. */
static char *model_json(const char *prefix, const char *start, size_t stlen, bool unlinked,
			int limit, int *next_i)
{
	struct buf keys = {0}, out = {0};
	size_t plen = strlen(prefix);
	int count = 0, next = -1;
	buf_puts(&keys, "");
	for (int i = 0; i < md.n; i++) {
		if (md.klen[i] < plen || memcmp(md.key[i], prefix, plen) ||
		    md.unlinked[i] != unlinked ||
		    (start && bytes_cmp(md.key[i], md.klen[i], start, stlen) < 0))
			continue;
		if (limit && count == limit) {
			next = i;
			break;
		}
		if (count++)
			buf_append(&keys, ",", 1);
		json_append_string(&keys, md.key[i], md.klen[i]);
	}
	buf_puts(&out, "{\"next\":");
	json_append_string(&out, next < 0 ? "" : md.key[next], next < 0 ? 0 : md.klen[next]);
	buf_puts(&out, ",\"keys\":[");
	buf_append(&out, keys.data, keys.len);
	buf_puts(&out, "]}");
	buf_free(&keys);
	if (next_i)
		*next_i = next;
	return out.data;
}

/* ---- a client that compares the body as it comes, holding none of it ---- */

struct sink {
	const char *want;
	size_t wlen, got;
	bool differs, chunked;
};

static size_t on_header(char *p, size_t s, size_t n, void *ud)
{
	struct sink *k = ud;
	static const char te[] = "transfer-encoding: chunked";
	if (s * n >= sizeof(te) - 1 && !strncasecmp(p, te, sizeof(te) - 1))
		k->chunked = true;
	return s * n;
}

static size_t on_data(char *p, size_t s, size_t n, void *ud)
{
	struct sink *k = ud;
	n *= s;
	if (k->got + n > k->wlen || memcmp(k->want + k->got, p, n))
		k->differs = true;
	k->got += n;
	return n;
}

/* GET url: its status; *same: the body is want exactly; *chunked (may be
 * NULL): it came chunked. */
static long get_framed(const char *url, const char *want, bool *same, bool *chunked)
{
	CURL *c = curl_easy_init();
	struct sink k = {want, strlen(want), 0, false, false};
	long status = -1;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);   /* liveness only */
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &k);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &k);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	*same = !k.differs && k.got == k.wlen;
	if (chunked)
		*chunked = k.chunked;
	return status;
}

static long get_same(const char *url, const char *want, bool *same)
{
	return get_framed(url, want, same, NULL);
}

/* ---- paging: keys that need escaping, unlinked ones among them ---- */

#define NPAGED 20000

static void paged_setup(void)
{
	char k[64];
	model_alloc(NPAGED);
	for (int i = 0; i < NPAGED; i++) {
		/* 33 bytes of JSON a key; every 50th holds bytes Go escapes;
		 * every 7th is unlinked */
		int n = snprintf(k, sizeof(k), "/p/%05d/%s", i,
				 i % 50 == 1 ? "<&>\xe2\x80\xa8\"\\\xff" : i % 50 == 2 ? "caf\xc3\xa9" :
				 "abcdefghijklmnopqrstu");
		model_set(i, k, (size_t)n, i % 7 == 3);
	}
	start();
}

/* Page through prefix's keys with limit: each page's bytes are the
 * model's, and the pages end where the model does; a page of more than
 * 80 KB comes chunked (streamed), one under 50 KB not.  limit_q: limit
 * as sent (percent-encoded or not).  Returns how many pages. */
static int page_through(const char *prefix, bool unlinked, int limit, const char *limit_q)
{
	int pages = 0, next = -1;
	const char *start = NULL;
	size_t stlen = 0;
	do {
		char *want = model_json(prefix, start, stlen, unlinked, limit, &next);
		char *st = start ? url_escape(start, stlen, false) : xstrdup("");
		char *pre = url_escape(prefix, strlen(prefix), true);
		char *url = xasprintf("%s%s?%s&limit=%s%s%s", m.base, pre,
				      unlinked ? "unlinked" : "list", limit_q, start ? "&start=" : "", st);
		bool same, chunked;
		ck_assert_int_eq(get_framed(url, want, &same, &chunked), 200);
		ck_assert_msg(same, "page %d of %s (limit %s) is not the model's", pages, url, limit_q);
		if (strlen(want) > 80000 || strlen(want) < 50000)
			ck_assert_msg(chunked == (strlen(want) > 80000), "page %d of %s: %zu bytes, %s",
				      pages, url, strlen(want), chunked ? "chunked" : "not chunked");
		free(url);
		free(pre);
		free(st);
		free(want);
		if (next >= 0) {
			start = md.key[next];
			stlen = md.klen[next];
		}
		pages++;
	} while (next >= 0);
	return pages;
}

START_TEST(test_paging)
{
	/* 17,143 live keys: pages held whole (997 keys, about 33 KB) and
	 * streamed (4,999, about 165 KB; 100,000: all of them) */
	ck_assert_int_eq(page_through("/", false, 997, "997"), 18);
	ck_assert_int_eq(page_through("/", false, 4999, "4999"), 4);
	ck_assert_int_eq(page_through("/", false, 100000, "100000"), 1);
	ck_assert_int_eq(page_through("/p/1", false, 3000, "3000"), 3);   /* 8,572 keys */
	ck_assert_int_eq(page_through("/", true, 1000, "1000"), 3);      /* 2,857 unlinked */
	ck_assert_int_eq(page_through("/", true, 2500, "2%35%300"), 2);
}
END_TEST

/* limit= is percent-decoded like every parameter. */
START_TEST(test_limit_decoded)
{
	char *url = xasprintf("%s/?list&limit=%%34%%39%%39%%39", m.base);   /* 4999 */
	char *want = model_json("/", NULL, 0, false, 4999, NULL);
	bool same;
	ck_assert_int_eq(get_same(url, want, &same), 200);
	ck_assert_msg(same, "limit=%%34%%39%%39%%39 is not limit=4999");
	free(url);
	free(want);
	url = xasprintf("%s/?list&limit=%%zz", m.base);
	ck_assert_int_eq(h_status("GET", url), 400);
	free(url);
	url = xasprintf("%s/?list&limit=%%30", m.base);   /* 0 */
	ck_assert_int_eq(h_status("GET", url), 400);
	free(url);
}
END_TEST

/* A streamed listing: HEAD gets its length and no body, as before; an
 * HTTP/1.0 client gets it to the connection's close. */
START_TEST(test_head_and_http10)
{
	char *url = xasprintf("%s/?list", m.base), *want = model_json("/", NULL, 0, false, 0, NULL);
	char *cl, len[32], req[] = "GET /?list HTTP/1.0\r\n\r\n";
	struct resp r = {0};
	struct buf raw = {0};
	const char *body;
	ck_assert_int_eq(h_http("HEAD", url, NULL, 0, NULL, false, &r), 200);
	cl = h_header(&r, "Content-Length");
	snprintf(len, sizeof(len), "%zu", strlen(want));
	ck_assert_ptr_nonnull(cl);
	ck_assert_str_eq(cl, len);
	ck_assert_uint_eq(r.body.len, 0);
	free(cl);
	h_resp_free(&r);
	ck_assert_int_eq(h_raw(m.port, req, strlen(req), &raw, 60000), 200);
	buf_append(&raw, "", 1);
	body = strstr(raw.data, "\r\n\r\n");
	ck_assert_ptr_nonnull(body);
	ck_assert_msg(!strcmp(body + 4, want), "HTTP/1.0: not the listing");
	buf_free(&raw);
	free(url);
	free(want);
}
END_TEST

/* ---- more than 1,000,000 keys: no 413 ---- */

#define NMANY 1000001

static void many_setup(void)
{
	char k[32];
	model_alloc(NMANY);
	for (int i = 0; i < NMANY; i++)
		model_set(i, k, (size_t)snprintf(k, sizeof(k), "/m/%07d", i), false);
	start();
}

START_TEST(test_over_a_million)
{
	char *url = xasprintf("%s/m/?list", m.base), *want = model_json("/m/", NULL, 0, false, 0, NULL);
	bool same;
	ck_assert_int_eq(get_same(url, want, &same), 200);
	ck_assert_msg(same, "not every key of 1,000,001");
	free(url);
	free(want);
}
END_TEST

/* The same listing with locations: the keys, then each key's one URL
 * (its record names volume "v:1", not in -volumes, so taken as up). */
static char *model_locations(const char *prefix)
{
	char *keys = model_json(prefix, NULL, 0, false, 0, NULL), path[PATH_MAX_LEN];
	struct buf out = {0};
	size_t plen = strlen(prefix);
	int n = 0;
	buf_append(&out, keys, strlen(keys) - 1);   /* without its "}" */
	buf_puts(&out, ",\"locations\":[");
	for (int i = 0; i < md.n; i++) {
		if (md.klen[i] < plen || memcmp(md.key[i], prefix, plen) || md.unlinked[i])
			continue;
		placement_path(md.key[i], md.klen[i], path);
		buf_printf(&out, "%s[\"http://v:1%s\"]", n++ ? "," : "", path);
	}
	buf_puts(&out, "]}");
	free(keys);
	return out.data;
}

static long peak_kib(pid_t pid);
static void reset_peak(pid_t pid);

/* ?list&locations of 1,000,001 keys: every key and URL, parallel, in the
 * memory ?list takes (a pass over the keys, then one over the URLs, from
 * the same iterator): the master's peak grows by far less than the
 * listing's ~45 MB. */
START_TEST(test_locations_over_a_million)
{
	char *url = xasprintf("%s/m/?list&locations", m.base), *want = model_locations("/m/");
	long before, peak;
	bool same;
	reset_peak(m.pid);
	before = h_rss_kib(m.pid);
	ck_assert_int_eq(get_same(url, want, &same), 200);
	ck_assert_msg(same, "not every key and location of 1,000,001");
	peak = peak_kib(m.pid);
	/* Under the sanitizer the quarantine keeps what is freed (64 MiB),
	 * so the peak says nothing there. */
	if (!getenv("MKV_CHILD_ASAN_OPTIONS"))
		ck_assert_msg(peak - before < 16 * 1024,
			      "a listing of %zu bytes: peak %ld KiB, %ld before", strlen(want),
			      peak, before);
	free(url);
	free(want);
}
END_TEST

/* ---- 16 listings at once: the master's memory ---- */

/* Keys of 150 bytes: a listing is about 15 MiB of JSON, so that holding
 * each whole (3 copies, 16 at once) would take hundreds of MiB. */
#define NBIG 100000
#define NCONC 16

static void big_setup(void)
{
	char k[192];
	model_alloc(NBIG);
	for (int i = 0; i < NBIG; i++)
		model_set(i, k, (size_t)snprintf(k, sizeof(k), "/big/%06d/%0140d", i, i), false);
	start();
}

struct lister {
	pthread_t t;
	const char *url, *want;
	long status;
	bool same;
};

static void *lister_main(void *arg)
{
	struct lister *l = arg;
	l->status = get_same(l->url, l->want, &l->same);
	return NULL;
}

/* VmHWM of pid in KiB (the peak since the last reset_peak). */
static long peak_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kib = strtol(line + 6, NULL, 10);
	fclose(f);
	return kib;
}

static void reset_peak(pid_t pid)
{
	char path[64];
	FILE *f;
	snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)pid);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs("5", f) >= 0, 1);   /* 5: VmHWM back to VmRSS */
	ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_concurrent_memory)
{
	char *url = xasprintf("%s/big/?list", m.base), *want = model_json("/big/", NULL, 0, false, 0, NULL);
	struct lister l[NCONC];
	long before, peak;
	bool same;
	/* one listing first: the index's blocks are read into its cache */
	ck_assert_int_eq(get_same(url, want, &same), 200);
	ck_assert(same);
	reset_peak(m.pid);
	before = h_rss_kib(m.pid);
	for (int i = 0; i < NCONC; i++) {
		l[i] = (struct lister){.url = url, .want = want};
		ck_assert_int_eq(pthread_create(&l[i].t, NULL, lister_main, &l[i]), 0);
	}
	for (int i = 0; i < NCONC; i++) {
		pthread_join(l[i].t, NULL);
		ck_assert_int_eq(l[i].status, 200);
		ck_assert_msg(l[i].same, "listing %d is not the keys", i);
	}
	peak = peak_kib(m.pid);
	/* 16 listings of 15 MiB each held whole would add over 200 MiB */
	ck_assert_msg(peak - before < 100 * 1024,
		      "16 listings of %zu bytes: peak %ld KiB, %ld KiB before", strlen(want), peak,
		      before);
	free(url);
	free(want);
}
END_TEST

/* Clients that leave mid-listing: the master goes on answering, and frees
 * what each listing held (the teardown's exit status, under ASan). */
START_TEST(test_clients_leave)
{
	static const char req[] = "GET /big/?list HTTP/1.1\r\nHost: x\r\n\r\n";
	char *url = xasprintf("%s/big/?list&limit=3", m.base), *want = model_json("/big/", NULL, 0, false, 3, NULL);
	int fd[NCONC];
	bool same;
	for (int i = 0; i < NCONC; i++) {
		char b[16384];
		size_t got = 0;
		fd[i] = h_connect(m.port);
		ck_assert_int_ge(fd[i], 0);
		ck_assert(h_send(fd[i], req, sizeof(req) - 1));
		while (got < 200000) {   /* part of the listing's 15 MB */
			ssize_t n = read(fd[i], b, sizeof(b));
			ck_assert_int_gt(n, 0);
			got += (size_t)n;
		}
	}
	for (int i = 0; i < NCONC; i++)
		close(fd[i]);
	ck_assert_int_eq(get_same(url, want, &same), 200);
	ck_assert(same);
	free(url);
	free(want);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("listing");
	TCase *paged = tcase_create("paged"), *many = tcase_create("many"),
	      *big = tcase_create("memory");
	SRunner *sr;
	int failed;
	curl_global_init(CURL_GLOBAL_ALL);
	tcase_add_checked_fixture(paged, paged_setup, stop);
	tcase_add_test(paged, test_paging);
	tcase_add_test(paged, test_limit_decoded);
	tcase_add_test(paged, test_head_and_http10);
	tcase_set_timeout(paged, 120);
	suite_add_tcase(s, paged);
	tcase_add_checked_fixture(many, many_setup, stop);
	tcase_add_test(many, test_over_a_million);
	tcase_add_test(many, test_locations_over_a_million);
	tcase_set_timeout(many, 300);
	suite_add_tcase(s, many);
	tcase_add_checked_fixture(big, big_setup, stop);
	tcase_add_test(big, test_concurrent_memory);
	tcase_add_test(big, test_clients_leave);
	tcase_set_timeout(big, 300);
	suite_add_tcase(s, big);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed ? 1 : 0;
}
