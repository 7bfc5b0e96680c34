/* volsign.c -- see volsign.h. */
#include "volsign.h"
#include "md5.h"
#include "util.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SECRET_MIN 16
#define SECRET_MAX 128
/* The hashed string of a URL this long or shorter is built on the stack. */
#define STACK_MAX 2048

/* One file's secrets.  Never freed once published: a reader may hold the
 * old ones while a reload swaps them (a reload keeps ~300 bytes). */
struct secrets {
	int n;
	size_t len[2];
	char s[2][SECRET_MAX + 1];
	struct secrets *old;
};

static struct secrets *cur;   /* NULL: off */
static char *path;            /* the file, for volsign_reload */

/* file's secrets into *s: 0, or -1 with err.  Blank lines and lines that
 * start with # are skipped. */
static int read_file(const char *file, struct secrets *s, char *err, size_t n)
{
	char line[512];
	int no = 0;
	FILE *f = fopen(file, "r");
	memset(s, 0, sizeof(*s));
	if (!f) {
		snprintf(err, n, "cannot read %s: %m", file);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t len = strcspn(line, "\r\n \t");
		no++;
		if (!len || line[0] == '#')
			continue;
		if (line[len + strspn(line + len, "\r\n \t")]) {
			snprintf(err, n, "%s line %d: one secret a line, no blanks inside", file, no);
			break;
		}
		if (strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
				 "._~+/=-") < len)
			len = 0;
		if (len < SECRET_MIN || len > SECRET_MAX) {
			snprintf(err, n, "%s line %d: a secret is %d to %d of A-Z a-z 0-9 . _ ~ + / = -",
				 file, no, SECRET_MIN, SECRET_MAX);
			break;
		}
		if (s->n == 2) {
			snprintf(err, n, "%s: more than two secrets", file);
			break;
		}
		memcpy(s->s[s->n], line, len);
		s->len[s->n++] = len;
	}
	if (!feof(f) && !err[0])
		snprintf(err, n, "cannot read %s: %m", file);
	fclose(f);
	if (!err[0] && !s->n)
		snprintf(err, n, "%s holds no secret", file);
	explicit_bzero(line, sizeof(line));
	return err[0] ? -1 : 0;
}

int volsign_load(const char *file, char *err, size_t n)
{
	struct secrets *s = xcalloc(1, sizeof(*s));
	err[0] = '\0';
	if (read_file(file, s, err, n) < 0) {
		free(s);
		return -1;
	}
	if (file != path) {      /* volsign_reload passes path itself */
		free(path);
		path = xstrdup(file);
	}
	s->old = cur;
	__atomic_store_n(&cur, s, __ATOMIC_RELEASE);
	return 0;
}

void volsign_reload(void)
{
	char err[300];
	if (!path)
		return;
	if (volsign_load(path, err, sizeof(err)) < 0)
		log_msg("-volumesecret: %s: the secrets in use stay", err);
	else
		log_msg("-volumesecret: %s read again (%d secret%s)", path, cur->n,
			cur->n > 1 ? "s" : "");
}

bool volsign_on(void)
{
	return __atomic_load_n(&cur, __ATOMIC_ACQUIRE) != NULL;
}

/* p[0..n) as nginx's $uri into out (n + 1 bytes): %XX decoded (when
 * decode), runs of / merged.  Returns its length. */
static size_t normalise(const char *p, size_t n, bool decode, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		int v;
		if (decode && c == '%' && (v = pct_value(p + i, n - i)) >= 0) {
			c = (char)v;
			i += 2;
		}
		if (c == '/' && o && out[o - 1] == '/')
			continue;
		out[o++] = c;
	}
	out[o] = '\0';
	return o;
}

/* The hash of expires + uri[0..ulen) as nginx's $uri (%XX decoded when
 * decode) + method + " " + secret. */
static void hash(const char *secret, size_t slen, const char *expires, const char *uri,
		 size_t ulen, bool decode, const char *method, char out[VOLSIGN_HASH_LEN + 1])
{
	size_t el = strlen(expires), ml = strlen(method), n = el + ulen + ml + 1 + slen;
	char stack[STACK_MAX + 256], *b = n < sizeof(stack) ? stack : xmalloc(n + 1);
	memcpy(b, expires, el);
	ulen = normalise(uri, ulen, decode, b + el);   /* never longer */
	n = el + ulen + ml + 1 + slen;
	memcpy(b + el + ulen, method, ml);
	b[el + ulen + ml] = ' ';
	memcpy(b + el + ulen + ml + 1, secret, slen);
	md5_b64url(b, n, out);
	explicit_bzero(b, n);
	if (b != stack)
		free(b);
}

void volsign_hash(const char *secret, const char *expires, const char *uri, size_t ulen,
		  const char *method, char out[VOLSIGN_HASH_LEN + 1])
{
	hash(secret, strlen(secret), expires, uri, ulen, false, method, out);
}

size_t volsign_url(const char *url, const char *method, long ttl, char *out, size_t n)
{
	const struct secrets *s = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	size_t len = strlen(url);
	const char *p = url;
	char expires[24], h[VOLSIGN_HASH_LEN + 1];
	int w;

	if (!s || len + VOLSIGN_EXTRA > n) {
		if (len >= n)
			return 0;
		memcpy(out, url, len + 1);
		return s ? 0 : len;
	}
	if (strstr(url, "://"))
		p = strchr(strstr(url, "://") + 3, '/');
	if (!p)
		p = "/";
	snprintf(expires, sizeof(expires), "%lld", (long long)time(NULL) + ttl);
	hash(s->s[0], s->len[0], expires, p, strcspn(p, "?#"), true, method, h);
	memcpy(out, url, len);
	w = snprintf(out + len, n - len, "%cmd5=%s&expires=%s", strchr(url, '?') ? '&' : '?', h,
		     expires);
	return len + (size_t)w;
}

bool volsign_batch(struct volsign_batch *b, long ttl)
{
	b->secrets = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	b->elen = (size_t)snprintf(b->expires, sizeof(b->expires), "%lld",
				   (long long)time(NULL) + ttl);
	return b->secrets != NULL;
}

size_t volsign_uri(const char *path, size_t n, char *out)
{
	return normalise(path, n, true, out);
}

void volsign_batch_hash(const struct volsign_batch *b, const char *uri, size_t n,
			const char *method, char out[VOLSIGN_HASH_LEN + 1])
{
	const struct secrets *s = b->secrets;
	hash(s->s[0], s->len[0], b->expires, uri, n, false, method, out);
}

int volsign_check(const char *uri, const char *method, const char *md5, const char *expires,
		  const char **why)
{
	const struct secrets *s = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	size_t el = expires ? strlen(expires) : 0;
	char h[VOLSIGN_HASH_LEN + 1];
	bool good = false;

	if (!s)
		return 0;
	if (!md5 || !expires) {
		*why = "the link is not signed (md5, expires)";
		return 403;
	}
	/* nginx's ngx_atotm: digits only, more than 0 */
	if (!el || el > 19 || strspn(expires, "0123456789") != el ||
	    strspn(expires, "0") == el || strlen(md5) != VOLSIGN_HASH_LEN) {
		*why = "the link's signature is malformed";
		return 403;
	}
	for (int i = 0; i < s->n; i++) {
		hash(s->s[i], s->len[i], expires, uri, strlen(uri), false, method, h);
		good |= !CRYPTO_memcmp(h, md5, VOLSIGN_HASH_LEN);   /* in constant time */
	}
	if (!good) {
		*why = "the link's signature does not match (secret, path or method)";
		return 403;
	}
	if (strtoll(expires, NULL, 10) < (long long)time(NULL)) {
		*why = "the link has expired";
		return 410;
	}
	return 0;
}
