/* placement.c -- see placement.h.  The rules come from minikeyvalue's
 * lib.go: key2path and key2volume. */
#include "placement.h"
#include "util.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pct_decode(const char *src, size_t n, char *out, size_t *outlen, int plus_space)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (src[i] == '%') {
			int c = pct_value(src + i, n - i);
			if (c < 0)
				return -1;
			out[o++] = (char)c;
			i += 2;
		} else {
			out[o++] = plus_space && src[i] == '+' ? ' ' : src[i];
		}
	}
	out[o] = '\0';
	*outlen = o;
	return 0;
}

int path_decode(const char *src, size_t n, char *out, size_t *outlen)
{
	if (pct_decode(src, n, out, outlen, 0) < 0 || memchr(out, '\0', *outlen))
		return -1;
	return 0;
}

int query_decode(const char *src, size_t n, char *out, size_t *outlen)
{
	return pct_decode(src, n, out, outlen, 1);
}

static size_t b64(const unsigned char *in, size_t n, char *out)
{
	return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

long placement_name_key(const char *name, size_t n, char *out)
{
	int len;
	if (n == 0 || n % 4 || n / 4 * 3 > KEY_MAX + 2)
		return -1;
	len = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)name, (int)n);
	if (len < 0)
		return -1;
	/* EVP_DecodeBlock counts the padding as bytes */
	len -= (name[n - 1] == '=') + (name[n - 2] == '=');
	return len >= 2 && len <= KEY_MAX ? len : -1;   /* keys are 2..KEY_MAX bytes */
}

int key_decode(const char *src, size_t n, char *out, size_t *outlen, const char **why)
{
	char b[PATH_MAX_LEN];
	size_t bl;
	if (pct_decode(src, n, out, outlen, 0) < 0) {
		*why = "invalid percent-encoding in key";
		return 400;
	}
	if (memchr(out, '\0', *outlen)) {
		*why = "key contains a NUL byte";
		return 400;
	}
	if (*outlen > KEY_MAX) {
		*why = "key longer than 189 bytes";
		return 414;
	}
	if (*outlen < 2) {
		*why = "key must be at least 2 bytes (\"/\" alone is not a key)";
		return 400;
	}
	bl = b64((const unsigned char *)out, *outlen, b);
	if (b[bl - 1] == '/' || memmem(b, bl, "//", 2)) {
		*why = "key's base64 name ends in '/' or holds '//': no volume can store it";
		return 400;
	}
	return 0;
}

size_t placement_path(const char *key, size_t keylen, char *out)
{
	unsigned char d[16];
	if (keylen > KEY_MAX)
		keylen = KEY_MAX;
	md5_pair(key, keylen, NULL, 0, d);
	to_hex(d, 1, out + 1);
	to_hex(d + 1, 1, out + 4);
	out[0] = out[3] = out[6] = '/';
	return 7 + b64((const unsigned char *)key, keylen, out + 7);
}

struct scored {
	unsigned char score[16];
	int idx;
};

static int by_score(const void *a, const void *b)
{
	const struct scored *x = a, *y = b;
	int c = memcmp(y->score, x->score, 16); /* highest first */
	return c ? c : x->idx - y->idx;         /* stable */
}

int placement_volumes(const char *key, size_t keylen, char *const *volumes, int nvol,
		      int replicas, int subvolumes, char (*out)[LOC_MAX])
{
	struct scored sv[nvol > 0 ? nvol : 1];
	int n = replicas < nvol ? replicas : nvol;
	for (int i = 0; i < nvol; i++) {
		md5_pair(key, keylen, volumes[i], strlen(volumes[i]), sv[i].score);
		sv[i].idx = i;
	}
	qsort(sv, (size_t)nvol, sizeof(sv[0]), by_score);
	for (int i = 0; i < n; i++) {
		const unsigned char *s = sv[i].score;
		const char *v = volumes[sv[i].idx];
		size_t vl = strlen(v);
		uint32_t h = (uint32_t)s[12] << 24 | (uint32_t)s[13] << 16 | (uint32_t)s[14] << 8 | s[15];
		uint32_t k = h % (uint32_t)(subvolumes > 1 ? subvolumes : 1);
		if (vl > LOC_MAX - 8)
			vl = LOC_MAX - 8;
		memcpy(out[i], v, vl);
		out[i][vl] = '\0';
		if (subvolumes > 1)
			snprintf(out[i] + vl, 8, "/sv%02X", k & 0xfff);
	}
	return n;
}
