/* s3list.c -- ListObjects V1/V2 and ListBuckets.  See s3req.h. */
#include "s3req.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_MAX_KEYS 1000
#define BUCKETS_MAX 10000
#define OWNER "<Owner><ID>mkv</ID><DisplayName>mkv</DisplayName></Owner>"

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

/* A continuation token is the last name listed, in hex. */
static void token_put(struct buf *b, const char *name, const struct buf *last)
{
	buf_printf(b, "<%s>", name);
	to_hex(last->data, last->len, buf_room(b, 2 * last->len));
	b->len += 2 * last->len;
	buf_printf(b, "</%s>", name);
}

static char *token_decode(const char *s, size_t *outlen)
{
	char *o = xmalloc(strlen(s) / 2 + 1);
	if (!OPENSSL_hexstr2buf_ex((unsigned char *)o, strlen(s) / 2, outlen, s, '\0')) {
		ERR_clear_error();   /* the thread's queue: the loops' TLS reads it */
		free(o);
		return NULL;
	}
	o[*outlen] = '\0';
	return o;
}

/* ---- ListObjects ---- */

/* One ListObjects walk over the index: what it found. */
struct walk {
	const char *bucket;
	const char *token, *start;   /* continuation-token; start-after or marker */
	bool v2, url, owner;
	const char *pfx, *dl;
	size_t plen, dlen;
	char *after;              /* list only names after this one (NULL: all) */
	size_t alen;
	uint64_t max, count;
	bool truncated;
	struct buf items, prefixes, last;
};

static void contents(struct walk *w, struct meta_cursor *mc, const char *key, size_t klen,
		     const char *rel, size_t rlen, const char *val, size_t vlen)
{
	struct buf *b = &w->items;
	struct meta m;
	char when[32], hash[33];
	bool known = meta_cursor_get(mc, key, klen, &m);
	record_hash(val, vlen, hash);
	s3_iso_time(known ? m.mtime : 0, when);
	buf_puts(b, "<Contents>");
	xml_tag(b, "Key", rel, rlen, w->url);
	buf_printf(b, "<LastModified>%s</LastModified>", when);
	if ((known && m.etag[0]) || hash[0])
		buf_printf(b, "<ETag>&quot;%s&quot;</ETag>", known && m.etag[0] ? m.etag : hash);
	buf_printf(b, "<Size>%" PRIu64 "</Size>", known ? m.size : 0);
	if (w->owner || !w->v2)
		buf_puts(b, OWNER);
	buf_puts(b, "<StorageClass>STANDARD</StorageClass></Contents>");
}

/* One more name listed: false when max are listed already (truncated). */
static bool take(struct walk *w, const char *rel, size_t rlen)
{
	if (w->count == w->max) {
		w->truncated = true;
		return false;
	}
	w->last.len = 0;
	buf_append(&w->last, rel, rlen);
	w->count++;
	return true;
}

static void walk(struct index *idx, struct walk *w)
{
	char *full = xasprintf("/%s/%s", w->bucket, w->pfx);
	size_t flen = strlen(full), blen = flen - w->plen;
	struct meta_cursor *mc = meta_cursor_new();
	struct index_iter *it;
	struct buf from = {0};   /* the bucket, then the prefix or, past it, after */

	buf_append(&from, full, blen);
	if (w->after && bytes_cmp(w->after, w->alen, w->pfx, w->plen) > 0)
		buf_append(&from, w->after, w->alen);
	else
		buf_append(&from, w->pfx, w->plen);
	it = index_iter_new(idx, from.data, from.len);
	buf_free(&from);
	while (w->max && it && index_iter_valid(it)) {
		size_t klen, vlen, rlen;
		const char *k = index_iter_key(it, &klen), *v = index_iter_value(it, &vlen), *rel, *d;
		if (klen < flen || memcmp(k, full, flen))
			break;
		rel = k + blen;
		rlen = klen - blen;
		if ((w->after && bytes_cmp(rel, rlen, w->after, w->alen) <= 0) ||
		    record_deleted(v, vlen)) {
			index_iter_next(it);
			continue;
		}
		d = w->dlen && rlen > w->plen ? memmem(rel + w->plen, rlen - w->plen, w->dl, w->dlen)
					       : NULL;
		if (d) {   /* a common prefix: listed once, then skipped past */
			size_t cplen = (size_t)(d - rel) + w->dlen;
			/* the page before ended on it; a marker inside it (k is past
			 * the marker) still lists it, as S3 does */
			bool seen = w->after && bytes_cmp(rel, cplen, w->after, w->alen) == 0;
			if (!seen && !take(w, rel, cplen))
				break;
			if (!seen) {
				buf_puts(&w->prefixes, "<CommonPrefixes>");
				xml_tag(&w->prefixes, "Prefix", rel, cplen, w->url);
				buf_puts(&w->prefixes, "</CommonPrefixes>");
			}
			it = seek_past(idx, it, k, blen + cplen);
			continue;
		}
		if (!take(w, rel, rlen))
			break;
		contents(w, mc, k, klen, rel, rlen, v, vlen);
		index_iter_next(it);
	}
	index_iter_free(it);
	meta_cursor_free(mc);
	free(full);
}

static void list_xml(const struct walk *w, struct buf *out)
{
	bool next = w->truncated && w->count;
	xml_tag(out, "Name", w->bucket, strlen(w->bucket), false);
	xml_tag(out, "Prefix", w->pfx, w->plen, w->url && w->v2);   /* botocore decodes V2's only */
	if (w->v2) {
		buf_printf(out, "<KeyCount>%" PRIu64 "</KeyCount>", w->count);
		if (w->token)
			xml_tag(out, "ContinuationToken", w->token, strlen(w->token), false);
		if (w->start)
			xml_tag(out, "StartAfter", w->start, strlen(w->start), w->url);
		if (next)
			token_put(out, "NextContinuationToken", &w->last);
	} else {
		xml_tag(out, "Marker", w->start ? w->start : "", w->start ? strlen(w->start) : 0, w->url);
		if (next)
			xml_tag(out, "NextMarker", w->last.data, w->last.len, w->url);
	}
	buf_printf(out, "<MaxKeys>%" PRIu64 "</MaxKeys>", w->max);
	if (w->dlen)
		xml_tag(out, "Delimiter", w->dl, w->dlen, w->url);
	if (w->url)
		buf_puts(out, "<EncodingType>url</EncodingType>");
	buf_printf(out, "<IsTruncated>%s</IsTruncated>", w->truncated ? "true" : "false");
	buf_append(out, w->items.data, w->items.len);
	buf_append(out, w->prefixes.data, w->prefixes.len);
	buf_puts(out, "</ListBucketResult>");
}

void s3_list(struct s3req *s)
{
	char *lt = s3_req_param(s, "list-type"), *et = s3_req_param(s, "encoding-type");
	char *fo = s3_req_param(s, "fetch-owner");
	char *pre = s3_req_param(s, "prefix"), *dl = s3_req_param(s, "delimiter");
	char *tok = s3_req_param(s, "continuation-token"), *sa = s3_req_param(s, "start-after");
	char *mr = s3_req_param(s, "marker");
	struct walk w = {.bucket = s->bucket, .pfx = pre ? pre : "", .dl = dl ? dl : "",
			 .max = LIST_MAX_KEYS, .v2 = lt && !strcmp(lt, "2"),
			 .url = et && !strcmp(et, "url"), .owner = fo && !strcmp(fo, "true")};

	w.token = w.v2 ? tok : NULL;   /* empty: echoed, and start-after holds */
	w.start = w.v2 ? sa : mr;
	if (et && !w.url)
		s3_error(s, 400, "InvalidArgument", "Invalid Encoding Method specified in Request");
	else if (s3_num_param(s, "max-keys", 0, INT32_MAX, &w.max) < 0)
		s3_error(s, 400, "InvalidArgument", "max-keys must be a non-negative integer");
	else if (w.token && w.token[0] && !(w.after = token_decode(w.token, &w.alen)))
		s3_error(s, 400, "InvalidArgument", "the continuation token is not one this server gave");
	else {
		if (w.max > LIST_MAX_KEYS)
			w.max = LIST_MAX_KEYS;
		if (!w.after && w.start) {
			w.after = xstrdup(w.start);
			w.alen = strlen(w.after);
		}
		w.plen = strlen(w.pfx);
		w.dlen = strlen(w.dl);
		buf_puts(&w.items, "");
		buf_puts(&w.prefixes, "");
		walk(store_index(), &w);
		s3_xml_start(s, "ListBucketResult");
		list_xml(&w, &s->body);
	}
	buf_free(&w.items);
	buf_free(&w.prefixes);
	buf_free(&w.last);
	free(w.after);
	free(lt), free(et), free(fo), free(pre), free(dl), free(tok), free(sa), free(mr);
}

/* ---- ListBuckets ---- */

/* The first path component, from *it on, that names a bucket (not
 * .mkv-mpu, which holds parts): its length (*name points at it), or 0. */
static size_t key_bucket(struct index_iter **it, const char **name)
{
	while (*it && index_iter_valid(*it)) {
		size_t klen;
		const char *k = index_iter_key(*it, &klen), *slash;
		if (!klen || k[0] != '/')
			break;
		slash = memchr(k + 1, '/', klen - 1);
		if (!slash || slash == k + 1) {
			index_iter_next(*it);
		} else if (k[1] == '.') {
			*it = seek_past(store_index(), *it, k, (size_t)(slash - k));
		} else {
			*name = k + 1;
			return (size_t)(slash - k - 1);
		}
	}
	return 0;
}

/* The buckets the keys name and the ones CreateBucket made (with their
 * creation dates), merged: both come in name order. */
/* With -keys, ListBuckets shows the buckets the key may list in. */
static bool shown(const struct s3req *s, const char *name, size_t n)
{
	char p[KEY_MAX + 3];
	if (!s->ring)
		return true;
	if (n > KEY_MAX)
		return false;
	p[0] = '/';
	memcpy(p + 1, name, n);
	p[n + 1] = '/';
	return key_touches(s->sig.key, PERM_LIST, p, n + 2);
}

void s3_list_buckets(struct s3req *s)
{
	struct index_iter *ki, *bi;
	struct buf *out = &s->body, last = {0};
	char *tok = s3_req_param(s, "continuation-token"), *pre = s3_req_param(s, "prefix");
	size_t alen = 0;
	char *after = tok ? token_decode(tok, &alen) : NULL;
	uint64_t max = BUCKETS_MAX, listed = 0;

	if (s3_num_param(s, "max-buckets", 1, BUCKETS_MAX, &max) < 0 || (tok && !after)) {
		s3_error(s, 400, "InvalidArgument", "max-buckets is 1 to 10000, and a "
			 "continuation-token one this server gave");
		free(tok), free(pre);
		return;
	}
	ki = index_iter_new(store_index(), "/", 1);
	bi = meta_notes('b');
	s3_xml_start(s, "ListAllMyBucketsResult");
	buf_puts(out, OWNER "<Buckets>");
	for (int n = 0; n < BUCKETS_MAX; n++) {
		size_t kl, bl = 0, vl;
		const char *kn = NULL, *bn = NULL, *v;
		char num[24], iso[32];
		uint64_t t = 0;
		int c;
		if (bi && index_iter_valid(bi))
			bn = index_iter_key(bi, &bl);
		if (!bn || !bl || bn[0] != 'b')
			bn = NULL;   /* past the sidecar's 'b' entries */
		else
			bn++, bl--;
		kl = key_bucket(&ki, &kn);
		if (!kl && !bn)
			break;
		c = !kl ? 1 : !bn ? -1 : bytes_cmp(kn, kl, bn, bl);
		if (c >= 0) {
			v = index_iter_value(bi, &vl);
			snprintf(num, sizeof(num), "%.*s", (int)(vl < 23 ? vl : 23), v);
			t = strtoull(num, NULL, 10);   /* "<time> <location>" */
		}
		s3_iso_time((int64_t)t, iso);
		if (c > 0)
			kn = bn, kl = bl;   /* the name listed */
		if ((!after || bytes_cmp(kn, kl, after, alen) > 0) &&
		    (!pre || (kl >= strlen(pre) && !memcmp(kn, pre, strlen(pre)))) &&
		    shown(s, kn, kl)) {
			if (listed++ == max)
				break;
			buf_puts(out, "<Bucket>");
			xml_tag(out, "Name", kn, kl, false);
			buf_printf(out, "<CreationDate>%s</CreationDate></Bucket>", iso);
			last.len = 0;
			buf_append(&last, kn, kl);
		}
		if (c <= 0)
			ki = seek_past(store_index(), ki, kn - 1, kl + 1);
		if (c >= 0)
			index_iter_next(bi);
	}
	buf_puts(out, "</Buckets>");
	if (listed > max)   /* the next page starts after the last name listed */
		token_put(out, "ContinuationToken", &last);
	buf_puts(out, "</ListAllMyBucketsResult>");
	index_iter_free(ki);
	index_iter_free(bi);
	buf_free(&last);
	free(tok), free(pre), free(after);
}
