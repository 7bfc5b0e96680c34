/* listlimit.c -- what ?list&locations' per-key work costs done straight,
 * with no index and no socket: the bound its speed is measured against
 * (bench row 15f, docs/protocol.md §4).
 *
 *   listlimit -n N -volumes A,B,.. [-replicas 3] [-subvolumes 10]
 *             [-secret FILE]
 *
 * Key i is "/scale/%010u" with the record tools/mkindex writes, all made
 * before the clock starts.  Then, for each key: its record's locations
 * (after HASH), the md5 of the key for its path ("/xx/yy/" + base64), and
 * for each location the URL "http://" + loc + path, signed as nginx's
 * secure_link (md5 of expires, $uri, "GET ", the secret's first line)
 * with -secret, written as a JSON string (each byte looked at for an
 * escape) into a 256 KiB buffer that starts over when full.  Prints one
 * line: keys=N seconds=S keys_per_s=R ns_per_key=T. */
#include "../common/md5.h"
#include "../common/placement.h"
#include "../common/util.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(void)
{
	fprintf(stderr, "usage: listlimit -n N -volumes A,B,.. [-replicas 3] [-subvolumes 10] "
			"[-secret FILE]\n");
	exit(2);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

#define OUT_MAX (256 * 1024)

/* s[0..n) as a JSON string at out: its length (bytes needing an escape
 * are never made here: a URL of base64, hex and a host name). */
static size_t json(const char *s, size_t n, char *out)
{
	size_t o = 0;
	out[o++] = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '&') {
			memcpy(out + o, "\\u0026", 6);
			o += 6;
		} else if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>') {
			out[o++] = '?';
		} else {
			out[o++] = (char)c;
		}
	}
	out[o++] = '"';
	return o;
}

int main(int argc, char **argv)
{
	unsigned long long n = 0;
	int replicas = 3, subvolumes = 10, nvol = 0;
	char *vols[64], secret[256] = "", (*locs)[LOC_MAX];
	char **keys, **vals, *out = xmalloc(OUT_MAX + 64 * 1024);
	size_t *vlens, o = 0, slen, sum = 0;
	double t0, t;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (*a != '-' || i + 1 >= argc)
			usage();
		if (!strcmp(a, "-n")) {
			n = strtoull(argv[++i], NULL, 10);
		} else if (!strcmp(a, "-replicas")) {
			replicas = atoi(argv[++i]);
		} else if (!strcmp(a, "-subvolumes")) {
			subvolumes = atoi(argv[++i]);
		} else if (!strcmp(a, "-volumes")) {
			for (char *s = strtok(xstrdup(argv[++i]), ","); s && nvol < 64;
			     s = strtok(NULL, ","))
				vols[nvol++] = s;
		} else if (!strcmp(a, "-secret")) {
			FILE *f = fopen(argv[++i], "r");
			if (!f || !fgets(secret, sizeof(secret), f))
				die("listlimit: cannot read %s", argv[i]);
			fclose(f);
			secret[strcspn(secret, "\r\n")] = '\0';
		} else {
			usage();
		}
	}
	if (!n || !nvol || n > 100000000ULL || replicas < 1 || replicas > 64)
		usage();
	slen = strlen(secret);
	locs = xcalloc((size_t)replicas, LOC_MAX);
	keys = xmalloc(n * sizeof(*keys));
	vals = xmalloc(n * sizeof(*vals));
	vlens = xmalloc(n * sizeof(*vlens));
	for (unsigned long long i = 0; i < n; i++) {
		char key[32], hash[33];
		struct buf v = {0};
		int kl = snprintf(key, sizeof(key), "/scale/%010llu", i);
		int nl = placement_volumes(key, (size_t)kl, vols, nvol, replicas, subvolumes, locs);
		md5_hex(key, (size_t)kl, hash);
		buf_printf(&v, "HASH%s", hash);
		for (int j = 0; j < nl; j++)
			buf_printf(&v, "%s%s", j ? "," : "", locs[j]);
		keys[i] = xstrdup(key);
		vals[i] = v.data;
		vlens[i] = v.len;
	}

	t0 = now();
	for (unsigned long long i = 0; i < n; i++) {
		char path[PATH_MAX_LEN], url[8 + LOC_MAX + PATH_MAX_LEN + 64], expires[24];
		char in[LOC_MAX + PATH_MAX_LEN + 300];
		unsigned char d[16], b[32];
		size_t kl = strlen(keys[i]), pl, el;
		const char *v = vals[i], *end = v + vlens[i], *p = v + 36, *c;
		if (o > OUT_MAX) {
			sum += (unsigned char)out[o / 2];
			o = 0;
		}
		md5_pair(keys[i], kl, NULL, 0, d);
		to_hex(d, 1, path + 1);
		to_hex(d + 1, 1, path + 4);
		path[0] = path[3] = path[6] = '/';
		pl = 7 + (size_t)EVP_EncodeBlock((unsigned char *)path + 7,
						 (const unsigned char *)keys[i], (int)kl);
		el = slen ? (size_t)snprintf(expires, sizeof(expires), "%lld",
					     (long long)time(NULL) + 60) : 0;
		out[o++] = '[';
		for (int j = 0; p < end; j++, p = c + 1) {
			size_t ll, ul;
			const char *uri;
			if (!(c = memchr(p, ',', (size_t)(end - p))))
				c = end;
			ll = (size_t)(c - p);
			memcpy(url, "http://", 7);
			memcpy(url + 7, p, ll);
			memcpy(url + 7 + ll, path, pl);
			ul = 7 + ll + pl;
			if (slen) {
				uri = memchr(url + 7, '/', ul - 7);
				memcpy(in, expires, el);
				memcpy(in + el, uri, (size_t)(url + ul - uri));
				memcpy(in + el + (url + ul - uri), "GET ", 4);
				memcpy(in + el + (url + ul - uri) + 4, secret, slen);
				md5_pair(in, el + (size_t)(url + ul - uri) + 4 + slen, NULL, 0, d);
				EVP_EncodeBlock(b, d, 16);
				for (int k = 0; k < 22; k++)
					b[k] = b[k] == '+' ? '-' : b[k] == '/' ? '_' : b[k];
				ul += (size_t)snprintf(url + ul, sizeof(url) - ul, "?md5=%.22s&expires=%s",
						       (char *)b, expires);
			}
			if (j)
				out[o++] = ',';
			o += json(url, ul, out + o);
			if (c == end)
				break;
		}
		out[o++] = ']';
		out[o++] = ',';
	}
	t = now() - t0;
	printf("keys=%llu seconds=%.3f keys_per_s=%.0f ns_per_key=%.0f%s\n", n, t, (double)n / t,
	       t * 1e9 / (double)n, sum == 1 ? " " : "");
	return 0;
}
