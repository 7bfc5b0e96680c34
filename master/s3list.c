/* s3list.c -- see s3list.h. */
#include "s3list.h"
#include "meta.h"
#include "../common/placement.h"
#include "../common/record.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIST_MAX_KEYS 1000
#define BUCKETS_MAX 10000
#define XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"

/* ---- helpers ---- */

bool s3_has_param(const char *query, const char *name)
{
	size_t n;
	return query_param(query, name, &n) != NULL;
}

char *s3_param(const char *query, const char *name, bool *bad)
{
	size_t n, out;
	const char *v = query_param(query, name, &n);
	char *s;
	if (!v)
		return NULL;
	s = xmalloc(n + 1);
	if (query_decode(v, n, s, &out) < 0) {
		*bad = true;
		free(s);
		return NULL;
	}
	s[out] = '\0';
	return s;
}

void xml_escape(struct buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (c) {
		case '&': buf_puts(b, "&amp;"); break;
		case '<': buf_puts(b, "&lt;"); break;
		case '>': buf_puts(b, "&gt;"); break;
		case '"': buf_puts(b, "&quot;"); break;
		case '\'': buf_puts(b, "&apos;"); break;
		default:
			if (c < 0x20 && c != '\t' && c != '\n')
				buf_printf(b, "&#x%x;", c);
			else
				buf_append(b, &s[i], 1);
		}
	}
}

void s3_iso_time(int64_t t, char out[32])
{
	struct tm tm;
	time_t tt = (time_t)t;
	gmtime_r(&tt, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

void s3_http_time(int64_t t, char out[40])
{
	struct tm tm;
	time_t tt = (time_t)t;
	gmtime_r(&tt, &tm);
	strftime(out, 40, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static int bcmp_(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

/* A tag whose text is escaped (or URL-encoded when url). */
static void tag(struct buf *b, const char *name, const char *s, size_t n, bool url)
{
	buf_printf(b, "<%s>", name);
	if (url)
		buf_url_escape(b, s, n, true);
	else
		xml_escape(b, s, n);
	buf_printf(b, "</%s>", name);
}

/* A new iterator at the first key after every key starting with x[0..n)
 * (NULL when there is none). */
static struct index_iter *seek_past(struct index *idx, struct index_iter *old, const char *x,
				    size_t n)
{
	char k[KEY_MAX + 8];
	if (n > sizeof(k))
		n = sizeof(k);
	memcpy(k, x, n); /* x may point into old */
	index_iter_free(old);
	while (n && (unsigned char)k[n - 1] == 0xff)
		n--;
	if (!n)
		return NULL;
	k[n - 1]++;
	return index_iter_new(idx, k, n);
}

static void hex_encode(struct buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		char e[2] = {hex[(unsigned char)s[i] >> 4], hex[(unsigned char)s[i] & 15]};
		buf_append(b, e, 2);
	}
}

static char *hex_decode(const char *s, size_t *outlen)
{
	size_t n = strlen(s);
	char *o;
	if (n % 2)
		return NULL;
	o = xmalloc(n / 2 + 1);
	for (size_t i = 0; i < n; i += 2) {
		int h = hex_value(s[i]), l = hex_value(s[i + 1]);
		if (h < 0 || l < 0) {
			free(o);
			return NULL;
		}
		o[i / 2] = (char)(h << 4 | l);
	}
	*outlen = n / 2;
	o[n / 2] = '\0';
	return o;
}

/* ---- ListObjects ---- */

static void contents(struct buf *b, struct meta_cursor *mc, const char *key, size_t klen,
		     const char *rel, size_t rlen, const char *val, size_t vlen, bool url, bool owner)
{
	struct meta m;
	char when[32], hash[33];
	bool known = meta_cursor_get(mc, key, klen, &m);
	record_hash(val, vlen, hash);
	s3_iso_time(known ? m.mtime : 0, when);
	buf_puts(b, "<Contents>");
	tag(b, "Key", rel, rlen, url);
	buf_printf(b, "<LastModified>%s</LastModified>", when);
	if (known && m.etag[0])
		buf_printf(b, "<ETag>&quot;%s&quot;</ETag>", m.etag);
	else if (hash[0])
		buf_printf(b, "<ETag>&quot;%s&quot;</ETag>", hash);
	buf_printf(b, "<Size>%" PRIu64 "</Size>", known ? m.size : 0);
	if (owner)
		buf_puts(b, "<Owner><ID>mkv</ID><DisplayName>mkv</DisplayName></Owner>");
	buf_puts(b, "<StorageClass>STANDARD</StorageClass></Contents>");
}

int s3_list_objects(struct index *idx, const struct s3_list_args *a, struct buf *out,
		    const char **why)
{
	uint64_t max = LIST_MAX_KEYS, count = 0;
	const char *pfx = a->prefix ? a->prefix : "", *dl = a->delimiter ? a->delimiter : "";
	size_t plen = strlen(pfx), dlen = strlen(dl), blen, alen = 0, flen;
	char *after = NULL, *full;
	struct buf items = {0}, prefixes = {0}, last = {0};
	struct index_iter *it;
	bool truncated = false, have_last = false;
	struct meta_cursor *mc;

	if (a->max_keys && !parse_u64(a->max_keys, 0, INT32_MAX, &max)) {
		*why = "max-keys must be a non-negative integer";
		return 400;
	}
	if (max > LIST_MAX_KEYS)
		max = LIST_MAX_KEYS;
	if (a->v2 && a->token) {
		after = hex_decode(a->token, &alen);
		if (!after) {
			*why = "the continuation token is not one this server gave";
			return 400;
		}
	} else if (a->after) {
		after = xstrdup(a->after);
		alen = strlen(after);
	}
	full = xasprintf("/%s/%s", a->bucket, pfx);
	flen = strlen(full);
	mc = meta_cursor_new();
	blen = flen - plen;
	buf_puts(&items, "");
	buf_puts(&prefixes, "");

	if (after && bcmp_(after, alen, pfx, plen) > 0) {
		char *s = xasprintf("/%s/", a->bucket);
		struct buf k = {0};
		buf_puts(&k, s);
		buf_append(&k, after, alen);
		it = index_iter_new(idx, k.data, k.len);
		buf_free(&k);
		free(s);
	} else {
		it = index_iter_new(idx, full, flen);
	}
	while (max && it && index_iter_valid(it)) {
		size_t klen, vlen, rlen;
		const char *k = index_iter_key(it, &klen), *v = index_iter_value(it, &vlen), *rel,
			   *d;
		if (klen < flen || memcmp(k, full, flen))
			break;
		rel = k + blen;
		rlen = klen - blen;
		if ((after && bcmp_(rel, rlen, after, alen) <= 0) ||
		    record_deleted(v, vlen)) {
			index_iter_next(it);
			continue;
		}
		d = dlen && rlen > plen ? memmem(rel + plen, rlen - plen, dl, dlen) : NULL;
		if (d) {
			size_t cplen = (size_t)(d - rel) + dlen;
			char *cp = xstrndup(k, blen + cplen);
			if (!(after && bcmp_(cp + blen, cplen, after, alen) <= 0)) {
				if (count == max) {
					truncated = true;
					free(cp);
					break;
				}
				buf_puts(&prefixes, "<CommonPrefixes>");
				tag(&prefixes, "Prefix", cp + blen, cplen, a->url);
				buf_puts(&prefixes, "</CommonPrefixes>");
				last.len = 0;
				buf_append(&last, cp + blen, cplen);
				have_last = true;
				count++;
			}
			it = seek_past(idx, it, cp, blen + cplen);
			free(cp);
			continue;
		}
		if (count == max) {
			truncated = true;
			break;
		}
		contents(&items, mc, k, klen, rel, rlen, v, vlen, a->url, a->fetch_owner || !a->v2);
		last.len = 0;
		buf_append(&last, rel, rlen);
		have_last = true;
		count++;
		index_iter_next(it);
	}
	if (it)
		index_iter_free(it);
	meta_cursor_free(mc);

	buf_puts(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"" XMLNS
		      "\">");
	tag(out, "Name", a->bucket, strlen(a->bucket), false);
	tag(out, "Prefix", pfx, plen, a->url);
	if (a->v2) {
		buf_printf(out, "<KeyCount>%" PRIu64 "</KeyCount>", count);
		if (a->token)
			tag(out, "ContinuationToken", a->token, strlen(a->token), false);
		if (a->after)
			tag(out, "StartAfter", a->after, strlen(a->after), a->url);
		if (truncated && have_last) {
			buf_puts(out, "<NextContinuationToken>");
			hex_encode(out, last.data, last.len);
			buf_puts(out, "</NextContinuationToken>");
		}
	} else {
		tag(out, "Marker", a->after ? a->after : "", a->after ? strlen(a->after) : 0, a->url);
		if (truncated && have_last)
			tag(out, "NextMarker", last.data, last.len, a->url);
	}
	buf_printf(out, "<MaxKeys>%" PRIu64 "</MaxKeys>", max);
	if (dlen)
		tag(out, "Delimiter", dl, dlen, a->url);
	if (a->url)
		buf_puts(out, "<EncodingType>url</EncodingType>");
	buf_printf(out, "<IsTruncated>%s</IsTruncated>", truncated ? "true" : "false");
	buf_append(out, items.data, items.len);
	buf_append(out, prefixes.data, prefixes.len);
	buf_puts(out, "</ListBucketResult>");
	buf_free(&items);
	buf_free(&prefixes);
	buf_free(&last);
	free(after);
	free(full);
	return 200;
}

/* ---- buckets ---- */

bool s3_bucket_exists(struct index *idx, const char *bucket)
{
	char *v = meta_raw_get('b', bucket, strlen(bucket)), *p;
	struct index_iter *it;
	bool yes = v != NULL;
	size_t plen, klen;
	free(v);
	if (yes)
		return true;
	p = xasprintf("/%s/", bucket);
	plen = strlen(p);
	it = index_iter_new(idx, p, plen);
	if (index_iter_valid(it)) {
		const char *k = index_iter_key(it, &klen);
		yes = klen >= plen && !memcmp(k, p, plen);
	}
	index_iter_free(it);
	free(p);
	return yes;
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void s3_list_buckets(struct index *idx, struct buf *out)
{
	char **names = xmalloc(BUCKETS_MAX * sizeof(*names));
	int64_t *when = xmalloc(BUCKETS_MAX * sizeof(*when));
	int n = 0;
	struct index_iter *it = index_iter_new(idx, "/", 1);
	struct index *side = meta_index();

	while (it && index_iter_valid(it) && n < BUCKETS_MAX) {
		size_t klen;
		const char *k = index_iter_key(it, &klen), *slash;
		if (!klen || k[0] != '/')
			break;
		slash = memchr(k + 1, '/', klen - 1);
		if (!slash || slash == k + 1) {
			index_iter_next(it);
			continue;
		}
		if (k[1] != '.') {  /* not a valid bucket name: .mkv-mpu holds parts */
			names[n] = xstrndup(k + 1, (size_t)(slash - k - 1));
			when[n++] = 0;
		}
		it = seek_past(idx, it, k, (size_t)(slash - k));
	}
	if (it)
		index_iter_free(it);
	if (side) {
		it = index_iter_new(side, "b", 1);
		for (; index_iter_valid(it) && n < BUCKETS_MAX; index_iter_next(it)) {
			size_t klen, vlen;
			const char *k = index_iter_key(it, &klen), *v = index_iter_value(it, &vlen);
			char num[24];
			uint64_t t = 0;
			if (!klen || k[0] != 'b')
				break;
			snprintf(num, sizeof(num), "%.*s", (int)(vlen < 23 ? vlen : 23), v);
			parse_u64(num, 0, INT64_MAX, &t);
			names[n] = xstrndup(k + 1, klen - 1);
			when[n++] = (int64_t)t;
		}
		index_iter_free(it);
	}
	/* sort names; keep the earliest known creation date of duplicates */
	{
		char **order = xmalloc((size_t)(n ? n : 1) * sizeof(*order));
		for (int i = 0; i < n; i++) {
			order[i] = xmalloc(strlen(names[i]) + 2 + 24);
			sprintf(order[i], "%s%c%020lld", names[i], 0, (long long)when[i]);
		}
		qsort(order, (size_t)n, sizeof(*order), by_str);
		buf_puts(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListAllMyBucketsResult "
			      "xmlns=\"" XMLNS "\"><Owner><ID>mkv</ID><DisplayName>mkv</DisplayName>"
			      "</Owner><Buckets>");
		for (int i = 0; i < n; i++) {
			char iso[32];
			int64_t t = 0;
			size_t l = strlen(order[i]);
			if (i && !strcmp(order[i], order[i - 1]))
				continue;
			for (int j = 0; j < n; j++)
				if (!strcmp(names[j], order[i]) && when[j] > t)
					t = when[j];
			s3_iso_time(t, iso);
			buf_puts(out, "<Bucket>");
			tag(out, "Name", order[i], l, false);
			buf_printf(out, "<CreationDate>%s</CreationDate></Bucket>", iso);
		}
		buf_puts(out, "</Buckets></ListAllMyBucketsResult>");
		for (int i = 0; i < n; i++)
			free(order[i]);
		free(order);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(when);
}
