/* s3sum.c -- the digests a body's headers ask the server to check
 * (Content-MD5, x-amz-checksum-{crc32,crc32c,sha1,sha256}, in a header or
 * an aws-chunked trailer), fed the decoded bytes as they pass.  See s3req.h. */
#include "s3req.h"   /* its declarations; s3sum.c calls only front.h */

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { SUM_MD5, SUM_CRC32, SUM_CRC32C, SUM_SHA1, SUM_SHA256, SUM_N };

static const struct {
	const char *header, *name;
	int len;   /* the digest's bytes */
	const EVP_MD *(*md)(void);   /* NULL: a CRC */
} algs[SUM_N] = {
	{"Content-MD5", "Content-MD5", 16, EVP_md5},
	{"x-amz-checksum-crc32", "CRC32", 4, NULL},
	{"x-amz-checksum-crc32c", "CRC32C", 4, NULL},
	{"x-amz-checksum-sha1", "SHA1", 20, EVP_sha1},
	{"x-amz-checksum-sha256", "SHA256", 32, EVP_sha256},
};

struct s3sum {
	unsigned asked, pending;   /* bits of SUM_*: to check; its value still to come (trailer) */
	unsigned char want[SUM_N][32], got[SUM_N][32];
	EVP_MD_CTX *md[SUM_N];
	uint32_t crc[SUM_N];
	int failed;                /* which did not match, or -1 */
};

/* CRC-32 (zlib's) and CRC-32C (Castagnoli): reflected, a table each. */
static uint32_t crc_tab[2][256];

__attribute__((constructor)) static void crc_init(void)   /* before any thread */
{
	static const uint32_t poly[2] = {0xedb88320u, 0x82f63b78u};
	for (int t = 0; t < 2; t++)
		for (uint32_t i = 0, c = 0, k; i < 256; crc_tab[t][i++] = c)
			for (c = i, k = 0; k < 8; k++)
				c = c & 1 ? poly[t] ^ (c >> 1) : c >> 1;
}

/* A digest's base64 value into want: false when it is not one. */
static bool sum_value(struct s3sum *c, int a, const char *v)
{
	unsigned char out[48];
	int n = (int)strlen(v), pad = n >= 2 ? (v[n - 1] == '=') + (v[n - 2] == '=') : 0;
	if (n != (algs[a].len + 2) / 3 * 4 ||
	    EVP_DecodeBlock(out, (const unsigned char *)v, n) - pad != algs[a].len)
		return false;
	memcpy(c->want[a], out, (size_t)algs[a].len);
	c->pending &= ~(1u << a);
	return true;
}

bool s3sum_new(struct MHD_Connection *conn, bool md5_only, struct s3sum **out, const char **code,
	       const char **msg)
{
	struct s3sum *c = xcalloc(1, sizeof(*c));
	const char *tr = front_header(conn, "x-amz-trailer"), *v;
	bool named = !tr;   /* the trailer, if any, names a digest here */
	c->failed = -1;
	*code = NULL;
	for (int a = 0; !*code && a < SUM_N; a++) {
		bool trailer = tr && a && !strcasecmp(tr, algs[a].header);   /* its value comes last */
		if (!trailer && !(v = front_header(conn, algs[a].header)))
			continue;
		named |= trailer;
		c->asked |= 1u << a;
		c->pending |= 1u << a;
		if (algs[a].md && (!(c->md[a] = EVP_MD_CTX_new()) ||
				   !EVP_DigestInit_ex(c->md[a], algs[a].md(), NULL)))
			die("EVP_DigestInit_ex failed");
		if (a && md5_only) {
			*code = "NotImplemented";
			*msg = "x-amz-checksum-* here is a whole object's: mkv keeps none (docs/s3.md)";
		} else if (!trailer && !sum_value(c, a, v)) {
			*code = a ? "InvalidRequest" : "InvalidDigest";
			*msg = a ? "Value for x-amz-checksum header is invalid."
				 : "The Content-MD5 you specified was invalid.";
		}
	}
	if (!*code && !named) {
		*code = "InvalidRequest";
		*msg = "x-amz-trailer names no checksum mkv checks (CRC32, CRC32C, SHA1, SHA256)";
	}
	*out = c->asked && !*code ? c : NULL;
	if (!*out)
		s3sum_free(c);
	return !*code;
}

void s3sum_update(struct s3sum *c, const void *p, size_t n)
{
	for (int a = 0; c && a < SUM_N; a++) {
		const unsigned char *b = p, *e = b + n;
		uint32_t crc = ~c->crc[a];
		if (c->md[a])
			EVP_DigestUpdate(c->md[a], p, n);
		else if (c->asked & 1u << a) {
			while (b < e)
				crc = crc_tab[a == SUM_CRC32C][(crc ^ *b++) & 0xff] ^ (crc >> 8);
			c->crc[a] = ~crc;
		}
	}
}

void s3sum_trailer(struct s3sum *c, const char *line)
{
	const char *colon = strchr(line, ':');
	for (int a = 1; c && colon && a < SUM_N; a++)
		if (c->pending & 1u << a && (size_t)(colon - line) == strlen(algs[a].header) &&
		    !strncasecmp(line, algs[a].header, (size_t)(colon - line)))
			sum_value(c, a, colon + 1 + strspn(colon + 1, " \t"));
}

bool s3sum_ok(struct s3sum *c)
{
	for (int a = 0; c && a < SUM_N; a++) {
		if (c->md[a]) {
			EVP_DigestFinal_ex(c->md[a], c->got[a], NULL);
			EVP_MD_CTX_free(c->md[a]);
			c->md[a] = NULL;
		}
		for (int i = 0; i < 4 && !algs[a].md; i++)   /* big-endian, as S3 writes it */
			c->got[a][i] = (unsigned char)(c->crc[a] >> (24 - 8 * i));
		if (c->failed < 0 && c->asked & 1u << a &&
		    (c->pending & 1u << a || memcmp(c->got[a], c->want[a], (size_t)algs[a].len)))
			c->failed = a;
	}
	return !c || c->failed < 0;
}

const char *s3sum_failed(const struct s3sum *c)
{
	return algs[c->failed].name;
}

bool s3sum_echo(const struct s3sum *c, int *i, const char **name, char b64[48])
{
	while (c && ++*i < SUM_N && !(c->asked & 1u << *i))
		;
	if (!c || *i >= SUM_N)
		return false;
	EVP_EncodeBlock((unsigned char *)b64, c->got[*i], algs[*i].len);
	*name = algs[*i].header;
	return true;
}

void s3sum_free(struct s3sum *c)
{
	for (int a = 0; c && a < SUM_N; a++)
		EVP_MD_CTX_free(c->md[a]);
	free(c);
}
