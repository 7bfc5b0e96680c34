/* check_volume_crash.c -- kill -9 mkv-volume during 100 concurrent PUTs,
 * restart it: every PUT answered 201/204 reads back whole and right, every
 * visible file is some PUT's complete body, and no temporary file shows up
 * in a listing.  Two rounds: new files, then replacements. */
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "harness.h"
#include "../common/placement.h"
#include "../volume/fs.h"

#define NPUT 100
#define KILL_AFTER 30

static size_t body_len(int i, int round)
{
	return 1000 + ((size_t)i * 37813u + (size_t)round * 500009u) % (3u << 20);
}

static char *body(int i, int round)
{
	size_t n = body_len(i, round);
	unsigned seed = (unsigned)(i * 7919 + round * 104729 + 1);
	char *b = xmalloc(n);
	for (size_t j = 0; j < n; j++) {
		seed = seed * 1103515245u + 12345u;
		b[j] = (char)(seed >> 16);
	}
	return b;
}

static void key_path(int i, char *out, size_t n)
{
	snprintf(out, n, "/%02x/%02x/k%d", i % 7, i % 5, i);
}

struct put {
	struct curl_slist *hl;
	char *data;
	size_t len, off;
	long status;
};

static size_t on_read(char *p, size_t s, size_t n, void *ud)
{
	struct put *pt = ud;
	size_t len = s * n < pt->len - pt->off ? s * n : pt->len - pt->off;
	memcpy(p, pt->data + pt->off, len);
	pt->off += len;
	return len;
}

static size_t on_write(char *p, size_t s, size_t n, void *ud)
{
	(void)p, (void)ud;
	return s * n;
}

/* Start NPUT PUTs at once; kill the volume once KILL_AFTER succeeded.
 * acked[i] is set for each PUT that got 201/204. */
static void put_and_kill(struct vol *v, int round, bool acked[NPUT])
{
	CURLM *m = curl_multi_init();
	CURL *e[NPUT];
	struct put p[NPUT];
	int running, ok = 0;
	bool killed = false;

	for (int i = 0; i < NPUT; i++) {
		char path[64], *u;
		key_path(i, path, sizeof(path));
		u = xasprintf("http://%s%s", v->name, path);
		memset(&p[i], 0, sizeof(p[i]));
		p[i].len = body_len(i, round);
		p[i].data = body(i, round);
		p[i].hl = curl_slist_append(NULL, "Expect:");
		e[i] = curl_easy_init();
		curl_easy_setopt(e[i], CURLOPT_URL, u);
		curl_easy_setopt(e[i], CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e[i], CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e[i], CURLOPT_READDATA, &p[i]);
		curl_easy_setopt(e[i], CURLOPT_INFILESIZE_LARGE, (curl_off_t)p[i].len);
		curl_easy_setopt(e[i], CURLOPT_WRITEFUNCTION, on_write);
		curl_easy_setopt(e[i], CURLOPT_HTTPHEADER, p[i].hl);
		curl_easy_setopt(e[i], CURLOPT_PRIVATE, &p[i]);
		curl_easy_setopt(e[i], CURLOPT_TIMEOUT, 30L);
		curl_easy_setopt(e[i], CURLOPT_NOSIGNAL, 1L);
		curl_multi_add_handle(m, e[i]);
		free(u);
		acked[i] = false;
	}
	curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)NPUT);
	do {
		CURLMsg *msg;
		int left;
		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left))) {
			struct put *pt;
			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&pt);
			if (msg->data.result == CURLE_OK)
				curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &pt->status);
			if (!killed && (pt->status == 201 || pt->status == 204) && ++ok >= KILL_AFTER) {
				h_stop(v->pid, SIGKILL);
				v->pid = 0;
				killed = true;
			}
		}
		if (running)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	} while (running);
	ck_assert_msg(killed, "only %d PUTs succeeded", ok);
	for (int i = 0; i < NPUT; i++) {
		acked[i] = p[i].status == 201 || p[i].status == 204;
		curl_multi_remove_handle(m, e[i]);
		curl_easy_cleanup(e[i]);
		curl_slist_free_all(p[i].hl);
		free(p[i].data);
	}
	curl_multi_cleanup(m);
}

/* Every regular file under dir: hidden ones counted in *tmp, visible ones
 * must be round's or an earlier round's complete body for their key. */
static void check_files(const char *dir, int round, int *files, int *tmp)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		char *p;
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		p = xasprintf("%s/%s", dir, de->d_name);
		ck_assert_int_eq(lstat(p, &st), 0);
		if (S_ISDIR(st.st_mode)) {
			check_files(p, round, files, tmp);
		} else if (de->d_name[0] == '.') {
			(*tmp)++;
		} else {
			int i = atoi(de->d_name + 1);
			bool match = false;
			FILE *f = fopen(p, "rb");
			char *got = xmalloc((size_t)st.st_size + 1);
			ck_assert_ptr_nonnull(f);
			ck_assert_int_eq(fread(got, 1, (size_t)st.st_size, f), st.st_size);
			fclose(f);
			for (int r = 0; r <= round && !match; r++) {
				char *want = body(i, r);
				match = (size_t)st.st_size == body_len(i, r) && !memcmp(got, want, body_len(i, r));
				free(want);
			}
			ck_assert_msg(match, "%s is no complete body", p);
			free(got);
			(*files)++;
		}
		free(p);
	}
	closedir(d);
}

static void check_round(struct vol *v, int round, const bool acked[NPUT])
{
	int nacked = 0, files = 0, tmp = 0;
	for (int i = 0; i < NPUT; i++) {
		char path[64], *u, want_md5[33], got_md5[33] = {0}, *f;
		struct resp r;
		char *want;
		if (!acked[i])
			continue;
		nacked++;
		key_path(i, path, sizeof(path));
		u = xasprintf("http://%s%s", v->name, path);
		ck_assert_int_eq(h_http("GET", u, NULL, 0, NULL, false, &r), 200);
		want = body(i, round);
		ck_assert_msg(r.body.len == body_len(i, round) && !memcmp(r.body.data, want, r.body.len),
			      "%s: acknowledged, read back wrong", path);
		md5_hex(want, body_len(i, round), want_md5);
		f = xasprintf("%s%s", v->dir, path);
		ck_assert_int_eq(getxattr(f, VOL_MD5_XATTR, got_md5, 32), 32);
		ck_assert_str_eq(got_md5, want_md5);
		h_resp_free(&r);
		free(want), free(u), free(f);
	}
	check_files(v->dir, round, &files, &tmp);
	ck_assert_int_ge(files, nacked);
	/* No listing shows a hidden name (the temporaries all are). */
	for (int a = 0; a < 7; a++)
		for (int b = 0; b < 5; b++) {
			char *u = xasprintf("http://%s/%02x/%02x/", v->name, a, b);
			struct resp r;
			long st = h_http("GET", u, NULL, 0, NULL, false, &r);
			ck_assert(st == 200 || st == 404);
			ck_assert_ptr_null(strstr(r.body.data, "\"name\":\"."));
			h_resp_free(&r);
			free(u);
		}
	fprintf(stderr, "crash round %d: %d acknowledged, %d files, %d temporary left on disk\n",
		round, nacked, files, tmp);
}

START_TEST(test_kill_during_puts)
{
	struct vol v;
	bool acked[NPUT];
	h_vol_start(&v, VOL_MKV);
	for (int round = 0; round < 2; round++) {
		put_and_kill(&v, round, acked);
		h_vol_restart(&v);
		check_round(&v, round, acked);
		if (round == 0)    /* the second round replaces every key */
			for (int i = 0; i < NPUT; i++) {
				char path[64], *u, *b = body(i, 0);
				struct resp r;
				long st;
				key_path(i, path, sizeof(path));
				u = xasprintf("http://%s%s", v.name, path);
				st = h_http("PUT", u, b, body_len(i, 0), NULL, false, &r);
				ck_assert(st == 201 || st == 204);
				h_resp_free(&r);
				free(u), free(b);
			}
	}
	h_vol_stop(&v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("volume crash");
	TCase *tc = tcase_create("kill -9");
	SRunner *sr;
	int failed;
	curl_global_init(CURL_GLOBAL_ALL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_kill_during_puts);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
