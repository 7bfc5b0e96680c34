/* targets_master.c -- fuzz targets for the master's and common/'s parsers
 * (see targets.h).  Every property is checked against a small reference
 * written here from docs/protocol.md §2/§3 rather than from the code under test. */
#include "targets.h"
#include "../common/placement.h"
#include "../common/record.h"
#include "../common/sigv4.h"
#include "../common/util.h"
#include "../common/vconn.h"
#include "../master/handlers.h"
#include "../ops/ops.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                                   \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz property broken: %s (%s:%d): ", #cond, \
				__FILE__, __LINE__);                            \
			fprintf(stderr, __VA_ARGS__);                           \
			fputc('\n', stderr);                                    \
			abort();                                                \
		}                                                               \
	} while (0)

/* ---- references ---- */

static int ref_hex(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decode; -1 on a bad %XX.  out needs n bytes. */
static long ref_decode(const uint8_t *s, size_t n, bool plus, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%') {
			if (n - i < 3 || ref_hex(s[i + 1]) < 0 || ref_hex(s[i + 2]) < 0)
				return -1;
			out[o++] = (char)(ref_hex(s[i + 1]) * 16 + ref_hex(s[i + 2]));
			i += 2;
		} else {
			out[o++] = plus && s[i] == '+' ? ' ' : (char)s[i];
		}
	}
	return (long)o;
}

static void ref_md5(const void *a, size_t an, const void *b, size_t bn, unsigned char out[16])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c, EVP_md5(), NULL);
	EVP_DigestUpdate(c, a, an);
	EVP_DigestUpdate(c, b, bn);
	EVP_DigestFinal_ex(c, out, NULL);
	EVP_MD_CTX_free(c);
}

static void ref_b64(const unsigned char *in, size_t n, char *out)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);
		out[o++] = t[v >> 18 & 63];
		out[o++] = t[v >> 12 & 63];
		out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? t[v & 63] : '=';
	}
	out[o] = '\0';
}

/* Length of the well-formed UTF-8 sequence at p, or 0 (Go's DecodeRune). */
static size_t ref_utf8(const unsigned char *p, size_t left)
{
	unsigned c = p[0], cp;
	size_t need;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c < 0xe0)
		need = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c < 0xf0)
		need = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c < 0xf5)
		need = 4, cp = c & 0x07;
	else
		return 0;
	if (left < need)
		return 0;
	for (size_t i = 1; i < need; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if (need == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
		return 0;
	if (need == 4 && (cp < 0x10000 || cp > 0x10ffff))
		return 0;
	return need;
}

/* Decode one JSON string literal (RFC 8259) spanning all of j[0..n) into
 * out; false when it is not exactly that.  Raw bytes must be well-formed
 * UTF-8 and not control characters; \u escapes may pair surrogates. */
static bool ref_json_string(const char *js, size_t n, struct buf *out)
{
	const unsigned char *j = (const unsigned char *)js;
	size_t i = 1;
	if (n < 2 || j[0] != '"' || j[n - 1] != '"')
		return false;
	while (i < n - 1) {
		unsigned c = j[i];
		if (c == '"' || c < 0x20)
			return false;
		if (c != '\\') {
			size_t l = ref_utf8(j + i, n - 1 - i);
			if (!l)
				return false;
			buf_append(out, j + i, l);
			i += l;
			continue;
		}
		if (i + 1 >= n - 1)
			return false;
		c = j[i + 1];
		i += 2;
		if (c == 'u') {
			unsigned cp = 0;
			char u[4];
			size_t ul;
			for (int k = 0; k < 4; k++, i++) {
				if (i >= n - 1 || ref_hex(j[i]) < 0)
					return false;
				cp = cp << 4 | (unsigned)ref_hex(j[i]);
			}
			if (cp >= 0xd800 && cp < 0xdc00) {
				unsigned lo = 0;
				if (i + 6 > n - 1 || j[i] != '\\' || j[i + 1] != 'u')
					return false;
				for (int k = 2; k < 6; k++) {
					if (ref_hex(j[i + k]) < 0)
						return false;
					lo = lo << 4 | (unsigned)ref_hex(j[i + k]);
				}
				if (lo < 0xdc00 || lo > 0xdfff)
					return false;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				i += 6;
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				return false;
			}
			if (cp < 0x80)
				u[0] = (char)cp, ul = 1;
			else if (cp < 0x800)
				u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f)), ul = 2;
			else if (cp < 0x10000)
				u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 0x3f)),
				u[2] = (char)(0x80 | (cp & 0x3f)), ul = 3;
			else
				u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 0x3f)),
				u[2] = (char)(0x80 | (cp >> 6 & 0x3f)), u[3] = (char)(0x80 | (cp & 0x3f)),
				ul = 4;
			buf_append(out, u, ul);
			continue;
		}
		switch (c) {
		case '"': case '\\': case '/': buf_append(out, &j[i - 1], 1); break;
		case 'b': buf_append(out, "\b", 1); break;
		case 'f': buf_append(out, "\f", 1); break;
		case 'n': buf_append(out, "\n", 1); break;
		case 'r': buf_append(out, "\r", 1); break;
		case 't': buf_append(out, "\t", 1); break;
		default: return false;
		}
	}
	return i == n - 1;
}

/* ---- key decoding and placement ---- */

static const char *const default_vols[] = {"larry", "moe", "curly"};

void fuzz_key(const uint8_t *data, size_t n)
{
	/* data: replicas byte, subvolumes byte, raw path, then '\n'-separated
	 * volume names (none: larry,moe,curly). */
	int replicas = n > 0 ? data[0] % 10 + 1 : 1;
	int subvolumes = n > 1 ? data[1] + 1 : 1;
	const uint8_t *p = data + (n > 2 ? 2 : n), *end = data + n, *nl;
	size_t rawlen, klen = 0, dlen = 0;
	char *raw, *key, *dec, *ref, path[PATH_MAX_LEN], want_path[PATH_MAX_LEN + 8], hex[33];
	char *vols[16], (*locs)[LOC_MAX], (*want)[LOC_MAX];
	int nvol = 0, st, pd, expect, got;
	long rl;
	const char *why = NULL;

	nl = memchr(p, '\n', (size_t)(end - p));
	rawlen = (size_t)((nl ? nl : end) - p);
	raw = xmalloc(rawlen ? rawlen : 1);   /* exactly the bytes: ASan sees overreads */
	memcpy(raw, p, rawlen);
	key = xmalloc(rawlen + 1);
	dec = xmalloc(rawlen + 1);
	ref = xmalloc(rawlen + 1);

	/* What docs/protocol.md §2 says the status is, in key_decode's order. */
	rl = ref_decode((const uint8_t *)raw, rawlen, false, ref);
	if (rl < 0 || memchr(ref, '\0', (size_t)rl))
		expect = 400;
	else if (rl > KEY_MAX)
		expect = 414;
	else if (rl < 2)
		expect = 400;
	else {
		char b[PATH_MAX_LEN];
		size_t bl;
		ref_b64((const unsigned char *)ref, (size_t)rl, b);
		bl = strlen(b);
		expect = b[bl - 1] == '/' || strstr(b, "//") ? 400 : 0;
	}

	st = key_decode(raw, rawlen, key, &klen, &why);
	FUZZ_CHECK(st == expect, "key_decode gave %d, want %d", st, expect);
	if (st) {
		FUZZ_CHECK(why && *why && !strchr(why, '\n'), "status %d without a one-line reason", st);
	} else {
		FUZZ_CHECK(klen == (size_t)rl && !memcmp(key, ref, klen), "key_decode bytes differ");
		FUZZ_CHECK(key[klen] == '\0', "key not NUL-terminated");
	}

	pd = path_decode(raw, rawlen, dec, &dlen);
	FUZZ_CHECK((pd == 0) == (rl >= 0 && !memchr(ref, '\0', (size_t)rl)),
		   "path_decode gave %d", pd);
	if (pd == 0)
		FUZZ_CHECK(dlen == (size_t)rl && !memcmp(dec, ref, dlen) && dec[dlen] == '\0',
			   "path_decode bytes differ");

	/* placement_path of any key up to KEY_MAX bytes (keys are bytes). */
	if (rl >= 0) {
		size_t kl = (size_t)rl > KEY_MAX ? KEY_MAX : (size_t)rl;
		unsigned char d[16];
		placement_path(ref, kl, path);
		ref_md5(ref, kl, "", 0, d);
		snprintf(want_path, sizeof(want_path), "/%02x/%02x/", d[0], d[1]);
		ref_b64((const unsigned char *)ref, kl, want_path + 7);
		FUZZ_CHECK(!strcmp(path, want_path), "placement_path %s, want %s", path, want_path);
		FUZZ_CHECK(strlen(path) < PATH_MAX_LEN, "placement_path too long");
		md5_hex(ref, kl, hex);
		FUZZ_CHECK(!strncmp(hex, path + 1, 2) && !strncmp(hex + 2, path + 4, 2),
			   "md5_hex disagrees with placement_path");
	}

	/* placement_volumes against a plain stable sort by md5(key || volume). */
	while (nl && nvol < 16) {
		const uint8_t *s = nl + 1, *e;
		size_t vl;
		nl = memchr(s, '\n', (size_t)(end - s));
		e = nl ? nl : end;
		vl = (size_t)(e - s);
		if (!vl || vl > 200 || memchr(s, '\0', vl))
			continue;
		vols[nvol] = xstrndup((const char *)s, vl);
		for (int i = 0; i < nvol; i++)
			if (!strcmp(vols[i], vols[nvol])) {   /* the CLI refuses repeats */
				free(vols[nvol]);
				nvol--;
				break;
			}
		nvol++;
	}
	if (!nvol)
		for (; nvol < 3; nvol++)
			vols[nvol] = xstrdup(default_vols[nvol]);
	if (rl >= 0) {
		unsigned char score[16][16];
		int order[16];
		locs = xcalloc(16, LOC_MAX);
		want = xcalloc(16, LOC_MAX);
		got = placement_volumes(ref, (size_t)rl, vols, nvol, replicas, subvolumes, locs);
		for (int i = 0; i < nvol; i++) {
			int j = i;
			ref_md5(ref, (size_t)rl, vols[i], strlen(vols[i]), score[i]);
			while (j > 0 && memcmp(score[order[j - 1]], score[i], 16) < 0) {
				order[j] = order[j - 1];
				j--;
			}
			order[j] = i;
		}
		FUZZ_CHECK(got == (replicas < nvol ? replicas : nvol), "placement_volumes gave %d",
			   got);
		for (int i = 0; i < got; i++) {
			const unsigned char *s = score[order[i]];
			unsigned h = (unsigned)s[12] << 24 | (unsigned)s[13] << 16 |
				     (unsigned)s[14] << 8 | s[15];
			if (subvolumes == 1)
				snprintf(want[i], LOC_MAX, "%s", vols[order[i]]);
			else
				snprintf(want[i], LOC_MAX, "%s/sv%02X", vols[order[i]],
					 h % (unsigned)subvolumes);
			FUZZ_CHECK(!strcmp(locs[i], want[i]), "location %d is %s, want %s", i,
				   locs[i], want[i]);
		}
		free(locs);
		free(want);
	}
	for (int i = 0; i < nvol; i++)
		free(vols[i]);
	free(raw);
	free(key);
	free(dec);
	free(ref);
}

/* ---- index records ---- */

static bool record_same(const struct record *a, const struct record *b)
{
	if (a->deleted != b->deleted || strcmp(a->hash, b->hash) || a->nlocs != b->nlocs)
		return false;
	for (int i = 0; i < a->nlocs; i++)
		if (strcmp(a->locs[i], b->locs[i]))
			return false;
	return true;
}

static char *reparse(const char *enc, size_t len, struct record *r)
{
	char *b = xmalloc(len + 1);
	memcpy(b, enc, len);
	FUZZ_CHECK(record_parse(b, len, r) == 0, "an encoded record does not parse: %.*s",
		   (int)len, enc);
	return b;
}

void fuzz_record(const uint8_t *data, size_t n)
{
	struct record r, r2, mine;
	char *buf = xmalloc(n + 1), *enc, *enc2, *b2, *b3, *pool;
	size_t len, len2;
	int st;

	/* 1. Any bytes: parse; if it parses, encoding is a fixed point. */
	memcpy(buf, data, n);
	st = record_parse(buf, n, &r);
	if (st < 0) {
		size_t commas = 0;
		for (size_t i = 0; i < n; i++)
			commas += data[i] == ',';
		FUZZ_CHECK(commas >= RECORD_MAX_LOCS, "refused with %zu commas", commas);
	} else {
		FUZZ_CHECK(st == 0 && r.nlocs >= 0 && r.nlocs <= RECORD_MAX_LOCS, "nlocs %d",
			   r.nlocs);
		FUZZ_CHECK(r.deleted == (n >= 7 && !memcmp(data, "DELETED", 7)), "deleted flag");
		for (int i = 0; i < r.nlocs; i++)
			FUZZ_CHECK(r.locs[i] >= buf && r.locs[i] <= buf + n, "loc outside the buffer");
		enc = record_encode(&r, &len);
		FUZZ_CHECK(strlen(enc) == len, "record_encode length");
		FUZZ_CHECK(len <= n, "encoding grew: %zu > %zu", len, n);
		b2 = reparse(enc, len, &r2);
		enc2 = record_encode(&r2, &len2);
		FUZZ_CHECK(len == len2 && !memcmp(enc, enc2, len), "encode(parse(encode(x))) differs");
		free(enc2);
		free(b2);
		free(enc);
	}

	/* 2. A well-formed record built from the bytes survives encode+parse
	 * exactly: flags byte, then locations over [a-z0-9:./-]. */
	memset(&mine, 0, sizeof(mine));
	pool = xmalloc(n + 1);
	if (n) {
		size_t o = 0;
		static const char cs[] = "abcdefghijklmnopqrstuvwxyz0123456789:./-";
		mine.deleted = data[0] & 1;
		if (data[0] & 2)
			md5_hex(data, n, mine.hash);
		mine.locs[mine.nlocs++] = pool;
		for (size_t i = 1; i < n; i++) {
			if (data[i] % 8 == 0 && mine.nlocs < RECORD_MAX_LOCS) {
				pool[o++] = '\0';
				mine.locs[mine.nlocs++] = pool + o;
			} else {
				pool[o++] = cs[data[i] % (sizeof(cs) - 1)];
			}
		}
		pool[o] = '\0';
		/* "" alone is zero locations, not one empty one (record.h) */
		if (mine.nlocs == 1 && !*mine.locs[0])
			mine.nlocs = 0;
		enc = record_encode(&mine, &len);
		b3 = reparse(enc, len, &r2);
		FUZZ_CHECK(record_same(&mine, &r2), "record round trip differs: %s", enc);
		free(b3);
		free(enc);
	}
	free(pool);
	free(buf);
}

/* ---- query strings and JSON ---- */

void fuzz_query(const uint8_t *data, size_t n)
{
	char *in = xmalloc(n ? n : 1), *out = xmalloc(n + 1), *ref = xmalloc(n + 1), *esc, *back;
	size_t olen = 0, blen = 0;
	long rl;
	int st;
	struct buf j = {0}, want = {0}, got = {0};
	bool ok;

	memcpy(in, data, n);
	rl = ref_decode(data, n, true, ref);
	st = query_decode(in, n, out, &olen);
	FUZZ_CHECK((st == 0) == (rl >= 0), "query_decode gave %d", st);
	if (st == 0)
		FUZZ_CHECK(olen == (size_t)rl && !memcmp(out, ref, olen) && out[olen] == '\0',
			   "query_decode bytes differ");

	/* url_escape is the inverse of both decoders. */
	esc = url_escape(in, n, false);
	back = xmalloc(strlen(esc) + 1);
	FUZZ_CHECK(query_decode(esc, strlen(esc), back, &blen) == 0 && blen == n &&
			   !memcmp(back, in, n),
		   "query_decode(url_escape(x)) != x");
	free(back);
	free(esc);
	esc = url_escape(in, n, true);
	back = xmalloc(strlen(esc) + 1);
	st = path_decode(esc, strlen(esc), back, &blen);
	if (memchr(in, '\0', n))
		FUZZ_CHECK(st < 0, "path_decode let a NUL through");
	else
		FUZZ_CHECK(st == 0 && blen == n && !memcmp(back, in, n),
			   "path_decode(url_escape(x, keep_slash)) != x");
	free(back);
	free(esc);

	/* json_append_string: valid JSON whose value is the input with each byte
	 * that is not part of well-formed UTF-8 replaced by U+FFFD. */
	json_append_string(&j, in, n);
	for (size_t i = 0; i < n;) {
		size_t l = ref_utf8(data + i, n - i);
		if (l) {
			buf_append(&want, data + i, l);
			i += l;
		} else {
			buf_append(&want, "\xef\xbf\xbd", 3);
			i++;
		}
	}
	ok = ref_json_string(j.data, j.len, &got);
	FUZZ_CHECK(ok, "json_string gave invalid JSON: %.*s", (int)(j.len > 200 ? 200 : j.len),
		   j.data);
	FUZZ_CHECK(got.len == want.len && (!want.len || !memcmp(got.data, want.data, want.len)),
		   "json_string value differs from the input");
	buf_free(&got);
	buf_free(&j);
	buf_free(&want);
	free(in);
	free(out);
	free(ref);
}

/* ---- fuzz_sig ---- */

/* The input's lines: method, path, query ("-": none), then "name: value"
 * headers.  Every answer is one of sig_check's, with a reason when it
 * refuses; signed means a key of the ring said so; an unsigned request
 * gets the anonymous line. */
struct fuzz_hdrs {
	char *name[32], *value[32];
	int n;
};

static const char *fuzz_header(void *cls, const char *name)
{
	struct fuzz_hdrs *h = cls;
	for (int i = 0; i < h->n; i++)
		if (!strcasecmp(h->name[i], name))
			return h->value[i];
	return NULL;
}

static void fuzz_each(void *cls, void (*fn)(void *, const char *, const char *), void *arg)
{
	struct fuzz_hdrs *h = cls;
	for (int i = 0; i < h->n; i++)
		fn(arg, h->name[i], h->value[i]);
}

void fuzz_sig(const uint8_t *data, size_t n)
{
	static struct keyring *ring;
	char *text = xstrndup((const char *)data, n), *line[35], *save = NULL;
	struct fuzz_hdrs h = {0};
	struct sig_result out;
	struct sig_req r;
	int nl = 0;
	if (!ring) {
		char *why;
		ring = keyring_parse("AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY "
				     "read,list,write /\nanonymous read /public/\n", "fuzz", &why);
		FUZZ_CHECK(ring != NULL, "the fuzz keys parse");
	}
	for (char *l = strtok_r(text, "\n", &save); l && nl < 35; l = strtok_r(NULL, "\n", &save))
		line[nl++] = l;
	if (nl < 3) {
		free(text);
		return;
	}
	for (int i = 3; i < nl && h.n < 32; i++) {
		char *c = strchr(line[i], ':');
		if (!c)
			continue;
		*c++ = '\0';
		h.name[h.n] = line[i];
		h.value[h.n++] = c + strspn(c, " ");
	}
	r = (struct sig_req){line[0], line[1], strcmp(line[2], "-") ? line[2] : NULL, fuzz_header,
			     fuzz_each, &h, 1369353600};
	sig_check(ring, &r, &out);
	FUZZ_CHECK(out.st >= SIG_OK && out.st <= SIG_EXPIRED, "status %d", (int)out.st);
	FUZZ_CHECK(out.st == SIG_OK || out.why, "a refusal says why");
	FUZZ_CHECK(!out.is_signed || (out.st == SIG_OK && out.key && out.key->secret),
		   "signed by a key of the ring");
	FUZZ_CHECK(out.st != SIG_OK || out.is_signed || out.key == ring->anonymous,
		   "unsigned is anonymous");
	FUZZ_CHECK(out.payload <= PAYLOAD_CHUNKS, "payload %d", (int)out.payload);
	free(text);
}

/* ---- a volume's answer (common/vconn.c) ---- */

/* Run a through the parser in pieces of at most step bytes (as recvs may
 * cut it), then the connection's end. */
static void vresp_run(const uint8_t *a, size_t n, size_t step, bool head, struct vresp *r,
		      struct buf *body, size_t *used)
{
	size_t have = 0;
	*used = 0;
	vresp_init(r, head, body, 4096);
	while (r->state != VR_DONE && r->state != VR_ERR && have < n) {
		size_t k;
		have = have + step < n ? have + step : n;
		k = vresp_feed(r, (const char *)a + *used, have - *used);
		FUZZ_CHECK(k <= have - *used, "vresp_feed consumed %zu of %zu", k, have - *used);
		*used += k;
	}
	if (r->state != VR_DONE && r->state != VR_ERR)
		vresp_eof(r);
}

/* The parser ends every answer DONE or ERR (with a reason), whatever the
 * bytes, however they are cut: the same outcome, status and body fed whole,
 * a byte at a time, or in pieces of 7; a body within its cap and no longer
 * than the bytes that came. */
void fuzz_vresp(const uint8_t *data, size_t n)
{
	bool head = n && (data[0] & 1);   /* the first byte picks the method */
	const uint8_t *a = n ? data + 1 : data;
	size_t an = n ? n - 1 : 0, used[3];
	struct vresp r[3];
	struct buf b[3] = {{0}, {0}, {0}};
	const size_t steps[3] = {an ? an : 1, 1, 7};
	for (int i = 0; i < 3; i++) {
		vresp_run(a, an, steps[i], head, &r[i], &b[i], &used[i]);
		FUZZ_CHECK(r[i].state == VR_DONE || r[i].state == VR_ERR, "vresp ended in state %d",
			   r[i].state);
		FUZZ_CHECK(r[i].state != VR_ERR || (r[i].why[0] && !strchr(r[i].why, '\n')),
			   "a failed answer without a one-line reason");
		FUZZ_CHECK(b[i].len <= 4096 && b[i].len <= an, "a body of %zu bytes", b[i].len);
		FUZZ_CHECK(r[i].state != VR_DONE || (r[i].status >= 200 && r[i].status <= 999),
			   "done with status %d", r[i].status);
	}
	for (int i = 1; i < 3; i++) {
		FUZZ_CHECK(r[i].state == r[0].state, "state %d cut, %d whole", r[i].state, r[0].state);
		if (r[0].state == VR_DONE)
			FUZZ_CHECK(r[i].status == r[0].status && used[i] == used[0] &&
					   b[i].len == b[0].len &&
					   (!b[0].len || !memcmp(b[i].data, b[0].data, b[0].len)),
				   "an answer read differently when cut");
	}
	for (int i = 0; i < 3; i++)
		buf_free(&b[i]);
}
