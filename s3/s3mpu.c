/* s3mpu.c -- multipart uploads and their listing (parts are keys under
 * /.mkv-mpu/<upload id>/; CompleteMultipartUpload streams them into a
 * REPLACE of the final key), CopyObject and UploadPartCopy.  See s3req.h. */
#include "s3req.h"
#include "../common/httpc.h"
#include "../common/range.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

void s3_list_uploads(struct s3req *s)
{
	struct index_iter *it = meta_notes('u');
	char *pre = s3_req_param(s, "prefix");
	const char *px = pre ? pre : "";
	char *want = xasprintf("/%s/%s", s->bucket, px);   /* what the keys start with */
	size_t pl = strlen(px), wl = strlen(want), name = s->blen + 2;
	int n = 0;
	s3_xml_start(s, "ListMultipartUploadsResult");
	xml_tag(&s->body, "Bucket", s->bucket, s->blen, false);
	buf_puts(&s->body, "<KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>");
	xml_tag(&s->body, "Prefix", px, pl, false);
	buf_puts(&s->body, "<MaxUploads>1000</MaxUploads>");
	for (; it && index_iter_valid(it) && n < 1000; index_iter_next(it)) {
		size_t kl, vl;
		const char *k = index_iter_key(it, &kl), *v = index_iter_value(it, &vl), *sp;
		char iso[32];
		if (!kl || k[0] != 'u')
			break;
		sp = memchr(v, ' ', vl);   /* "<initiated> <key>" */
		if (!sp || kl != 33 || (size_t)(v + vl - sp - 1) <= name ||
		    (size_t)(v + vl - sp - 1) < wl || memcmp(sp + 1, want, wl))
			continue;
		s3_iso_time(strtoll(v, NULL, 10), iso);
		buf_puts(&s->body, "<Upload>");
		xml_tag(&s->body, "Key", sp + 1 + name, (size_t)(v + vl - sp - 1) - name, false);
		buf_printf(&s->body, "<UploadId>%.32s</UploadId><Initiated>%s</Initiated>"
				     "<StorageClass>STANDARD</StorageClass></Upload>", k + 1, iso);
		n++;
	}
	index_iter_free(it);
	free(pre);
	free(want);
	buf_puts(&s->body, "<IsTruncated>false</IsTruncated></ListMultipartUploadsResult>");
}

static void bucket_and_key(struct s3req *s)
{
	xml_tag(&s->body, "Bucket", s->bucket, s->blen, false);
	xml_tag(&s->body, "Key", s->key + s->blen + 2, s->klen - s->blen - 2, false);
}

void s3_mpu_create(struct s3req *s)
{
	unsigned char r[16];
	char id[33], *v;
	if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
		s3_error(s, 500, "InternalError", "no randomness for an upload id");
		return;
	}
	to_hex(r, 16, id);
	v = xasprintf("%lld %.*s", (long long)time(NULL), (int)s->klen, s->key);
	if (meta_raw_put('u', id, 32, v, true) < 0) {
		s3_error(s, 500, "InternalError", "index write failed");
	} else {
		s3_xml_start(s, "InitiateMultipartUploadResult");
		bucket_and_key(s);
		buf_printf(&s->body, "<UploadId>%s</UploadId></InitiateMultipartUploadResult>", id);
	}
	free(v);
}

/* Every part key of an upload, in order, by callback. */
static void each_part(const char *upload, void (*fn)(void *, const char *, size_t, int), void *ctx)
{
	char pfx[64];
	size_t plen = (size_t)snprintf(pfx, sizeof(pfx), "/" S3_MPU_BUCKET "/%s/", upload);
	struct index_iter *it = index_iter_new(store_index(), pfx, plen);
	for (; index_iter_valid(it); index_iter_next(it)) {
		size_t kl, vl;
		const char *k = index_iter_key(it, &kl), *v = index_iter_value(it, &vl);
		if (kl < plen || memcmp(k, pfx, plen))
			break;
		if (kl != plen + 5 || record_deleted(v, vl))
			continue;
		fn(ctx, k, kl, atoi(k + plen));
	}
	index_iter_free(it);
}

/* The iterator reads a snapshot: deleting as it goes is safe. */
static void drop_part(void *upload, const char *k, size_t kl, int num)
{
	const char *why;
	(void)num;
	if (s3_delete_key(k, kl, true, NULL, &why) != 204)
		log_msg("multipart %s: part %.*s not removed: %s", (const char *)upload, (int)kl, k,
			why);
}

void s3_mpu_abort(struct s3req *s)
{
	char *up = s3_upload(s);
	if (up && meta_raw_delete('u', up, 32) < 0) {
		s3_error(s, 503, "ServiceUnavailable", "the sidecar refused the write: try again");
	} else if (up) {
		each_part(up, drop_part, up);
		s->status = 204;
	}
	free(up);
}

struct partlist { struct buf b; int marker, max, n, last; bool more; };

static void list_part(void *ctx, const char *k, size_t kl, int num)
{
	struct partlist *pl = ctx;
	struct meta m;
	char iso[32];
	if (num <= pl->marker)
		return;
	if (pl->n == pl->max) {
		pl->more = true;
		return;
	}
	meta_get(k, kl, &m);
	s3_iso_time(m.mtime, iso);
	buf_printf(&pl->b, "<Part><PartNumber>%d</PartNumber><LastModified>%s</LastModified>"
			  "<ETag>&quot;%s&quot;</ETag><Size>%" PRIu64 "</Size></Part>",
		   num, iso, m.etag, m.size);
	pl->n++;
	pl->last = num;
}

void s3_mpu_list_parts(struct s3req *s)
{
	char *up = s3_upload(s);
	uint64_t max = 1000, marker = 0;
	struct partlist pl = {0};
	if (up && (s3_num_param(s, "max-parts", 0, 1000000, &max) < 0 ||
		   s3_num_param(s, "part-number-marker", 0, PARTS_MAX, &marker) < 0)) {
		s3_error(s, 400, "InvalidArgument", "max-parts and part-number-marker are integers");
	} else if (up) {
		pl.max = max > 1000 ? 1000 : (int)max;
		pl.marker = (int)marker;
		buf_puts(&pl.b, "");
		each_part(up, list_part, &pl);
		s3_xml_start(s, "ListPartsResult");
		bucket_and_key(s);
		buf_printf(&s->body, "<UploadId>%s</UploadId><PartNumberMarker>%d"
				     "</PartNumberMarker><NextPartNumberMarker>%d</NextPartNumberMarker>"
				     "<MaxParts>%d</MaxParts><IsTruncated>%s</IsTruncated>"
				     "<StorageClass>STANDARD</StorageClass>",
			   up, pl.marker, pl.last, pl.max, pl.more ? "true" : "false");
		buf_append(&s->body, pl.b.data, pl.b.len);
		buf_puts(&s->body, "</ListPartsResult>");
	}
	buf_free(&pl.b);
	free(up);
}

/* A key whose bytes write_from copies (size: UINT64_MAX = unknown). */
struct part {
	char key[KEY_MAX + 1];
	size_t klen;
	uint64_t size;
};

/* CompleteMultipartUpload's and the copies' bytes: parts stream from a
 * replica into a put. */
struct feeder {
	struct put *p;
	uint64_t got;
	const char *range;   /* a Range header's value (UploadPartCopy), or NULL */
};

static bool feed_body(void *ctx, const char *b, size_t len)
{
	struct feeder *f = ctx;
	f->got += len;
	return put_feed_all(f->p, b, len);
}

/* Refuse an error page: its body is not the part's bytes. */
static bool part_header(void *ctx, int status, const char *b, size_t len)
{
	struct feeder *f = ctx;
	(void)b;
	return len > 2 || status == (f->range ? 206 : 200);
}

/* Copy one part into the put from a live replica.  0 or -1. */
static int copy_part(struct feeder *f, const struct part *p)
{
	struct httpc_call g = {.connect_ms = (long)store_cfg()->voltimeout_ms, .bufsize = 256L * 1024,
			      .range = f->range, .header = part_header, .body = feed_body,
			      .ctx = f};
	struct store_urls u;
	char err[256];
	int rc = -1;
	if (store_urls(store_index(), p->key, p->klen, &u) < 0)
		return -1;
	for (int i = 0; i < u.n && rc < 0; i++) {
		if (f->got) /* bytes of this part already went in: no retry elsewhere */
			break;
		g.url = u.url[i];
		if (httpc_call(&g, err) == (f->range ? 206 : 200) &&
		    (p->size == UINT64_MAX || f->got == p->size))
			rc = 0;
	}
	store_urls_free(&u);
	return rc;
}

/* Write target (REPLACE) from the bytes of parts[0..n), in order, streamed
 * from their volumes, or of only range (a Range header's value; n is 1)
 * of parts[0].  etag: what the
 * metadata keeps (NULL: the md5).  The object itself (target is s->key)
 * is written only if its If-Match / If-None-Match hold.  false with the
 * error set. */
static bool write_from(struct s3req *s, const char *target, size_t tlen, const struct part *parts,
		       int n, const char *range, const char *etag)
{
	struct feeder f = {.range = range};
	uint64_t total = 0;
	const char *why = "another write of this key is in progress";
	int st;

	for (int i = 0; i < n && total != UINT64_MAX; i++)
		total = parts[i].size == UINT64_MAX ? UINT64_MAX : total + parts[i].size;
	if (!s3_lock_key(target, tlen))
		s3_fail(s, 503, why);
	else if (target == s->key && !s3_write_condition(s, target, tlen))
		keylock_release(target, tlen);
	else if (!(f.p = store_write(store_cfg(), store_index(), target, tlen, true,
				     total == UINT64_MAX ? -1 : (int64_t)total, NULL, NULL, 0, &why)))
		s3_fail(s, 503, why);
	if (s->status)
		return false;
	if (etag)
		put_set_etag(f.p, etag);
	for (int i = 0; i < n; i++) {
		f.got = 0;
		if (copy_part(&f, &parts[i]) < 0) {
			put_abort(f.p);   /* and not finished: that would end the body there */
			break;
		}
		if (i == n - 1)
			put_finish(f.p);
	}
	put_wait(f.p, &st, &why);
	if (st == 201)
		snprintf(s->meta.etag, sizeof(s->meta.etag), "%s", etag ? etag : put_md5(f.p));
	else
		s3_fail(s, st >= 500 ? st : 500, why);
	put_release(f.p);
	return st == 201;
}

/* CopyObject's and UploadPartCopy's source: its key, live; its metadata
 * (known: there is some) and etag. */
struct source {
	struct part p;
	struct meta m;
	bool known;
	char etag[META_ETAG_MAX];
};

/* The x-amz-copy-source into c, x-amz-copy-source-if-* checked.  false
 * with the error answered. */
static bool copy_source(struct s3req *s, struct source *c)
{
	const char *src = s3_req_header(s, "X-Amz-Copy-Source"), *why;
	bool slash = src[0] == '/';
	char *path = xasprintf("/%.*s", (int)(strcspn(src, "?") - slash), src + slash), *v;
	char key[KEY_MAX * 3 + 8];
	size_t plen = strlen(path), *klen = &c->p.klen;
	struct record r;
	int st = plen > KEY_MAX * 3 ? 414 : key_decode(path, plen, key, klen, &why);
	static const char *const conds[4] = {
		"X-Amz-Copy-Source-If-Match", "X-Amz-Copy-Source-If-None-Match",
		"X-Amz-Copy-Source-If-Unmodified-Since", "X-Amz-Copy-Source-If-Modified-Since"};

	free(path);
	if (strstr(src, "?versionId="))
		s3_error(s, 501, "NotImplemented", "x-amz-copy-source: mkv keeps no versions");
	else if (st)
		s3_error(s, 400, "InvalidArgument", "x-amz-copy-source is not a valid key");
	else if (!s3_may(s, PERM_READ, key, *klen))
		s3_error(s, 403, "AccessDenied", "Access Denied");
	else if (!store_live(store_index(), key, *klen, &v, &r))
		s3_no_such_key(s);
	if (s->status)
		return false;
	free(v);
	memcpy(c->p.key, key, *klen);
	c->known = meta_get(key, *klen, &c->m);
	c->p.size = c->known ? c->m.size : UINT64_MAX;
	snprintf(c->etag, META_ETAG_MAX, "%s", c->known && c->m.etag[0] ? c->m.etag : r.hash);
	if (s3_preconditions(s, conds, c->etag, c->known ? c->m.mtime : -1))
		s3_precondition_failed(s);
	return !s->status;
}

static void copy_result(struct s3req *s, const char *root)
{
	char iso[32];
	s3_iso_time((int64_t)time(NULL), iso);
	s3_xml_start(s, root);
	buf_printf(&s->body, "<LastModified>%s</LastModified><ETag>&quot;%s&quot;</ETag></%s>", iso,
		   s->meta.etag, root);
}

void s3_copy(struct s3req *s)
{
	const char *dir = s3_req_header(s, "X-Amz-Metadata-Directive");
	struct source c;

	bool self;

	if (s3_req_header(s, "X-Amz-Copy-Source-Range")) {   /* not the whole object, as asked */
		s3_error(s, 400, "InvalidArgument", "x-amz-copy-source-range is UploadPartCopy's");
		return;
	}
	if (!copy_source(s, &c))
		return;
	/* a copy onto itself changes metadata only, which mkv does not keep
	 * (rclone sets a time so); without REPLACE it changes nothing */
	self = c.p.klen == s->klen && !memcmp(c.p.key, s->key, s->klen);
	if (self && (!dir || strcasecmp(dir, "REPLACE")))
		s3_error(s, 400, "InvalidRequest", "This copy request is illegal because it is "
			 "trying to copy an object to itself without changing the object's "
			 "metadata, storage class, website redirect location or encryption "
			 "attributes.");
	else if (self)
		snprintf(s->meta.etag, sizeof(s->meta.etag), "%s", c.etag);
	if (!s->status && (self || write_from(s, s->key, s->klen, &c.p, 1, NULL,
					      c.known && strchr(c.m.etag, '-') ? c.m.etag : NULL)))
		copy_result(s, "CopyObjectResult");
}

/* UploadPartCopy: the source, or x-amz-copy-source-range of it
 * ("bytes=first-last"), streamed into the part's key. */
void s3_mpu_part_copy(struct s3req *s)
{
	const char *rg = s3_req_header(s, "X-Amz-Copy-Source-Range");
	char part[KEY_MAX + 1], range[64];
	size_t plen;
	struct source c;
	struct range_spec r;

	if (!s3_part_target(s, part, &plen) || !copy_source(s, &c))
		return;
	if (rg && (!range_s3(rg, &r) || r.open || r.suffix))
		s3_error(s, 400, "InvalidArgument", "x-amz-copy-source-range must be bytes=first-last");
	else if (rg && c.p.size != UINT64_MAX && r.last >= c.p.size)
		s3_error(s, 416, "InvalidRange", "x-amz-copy-source-range is past the source's end");
	else if (rg) {
		snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, r.first, r.last);
		c.p.size = r.last - r.first + 1;
	}
	if (!s->status && write_from(s, part, plen, &c.p, 1, rg ? range : NULL, NULL))
		copy_result(s, "CopyPartResult");
}

static void strip_quotes(char *e)
{
	size_t n = strlen(e);
	if (n >= 2 && e[0] == '"' && e[n - 1] == '"') {
		memmove(e, e + 1, n - 2);
		e[n - 2] = '\0';
	}
}

/* The parts CompleteMultipartUpload lists (into parts, their binary md5s
 * into md): how many, or -1 with an error answered.  up NULL (the upload
 * is gone): from the ETags listed, every one needed. */
static int complete_parts(struct s3req *s, const char *up, struct part *parts, struct md5 *md)
{
	const char *p = s->in.data ? s->in.data : "", *end = p + s->in.len, *hex;
	int n = 0, last = 0;
	bool etags = true;
	size_t pl;
	char *part, *num, *et;
	while (!s->status && (part = s3_xml_next(p, end, "Part", &pl, &p))) {
		uint64_t v = 0;
		struct meta m;
		num = s3_xml_next(part, part + pl, "PartNumber", NULL, NULL);
		et = s3_xml_next(part, part + pl, "ETag", NULL, NULL);
		if (!num || !parse_u64(num, 1, PARTS_MAX, &v) || (int)v <= last) {
			s3_error(s, 400, num && v ? "InvalidPartOrder" : "MalformedXML",
				 "parts must be listed in ascending order, each once");
		} else {
			if (up)
				s3_part_key(up, (int)v, parts[n].key, &parts[n].klen);
			if (et)
				strip_quotes(et);
			etags = etags && et;
			hex = up ? m.etag : et ? et : "";
			if ((up && !meta_get(parts[n].key, parts[n].klen, &m)) || strlen(hex) != 32 ||
			    strspn(hex, "0123456789abcdef") != 32 || (et && strcmp(et, hex))) {
				s3_error(s, 400, "InvalidPart", "One or more of the specified parts "
					 "could not be found or its ETag does not match.");
			} else {
				unsigned char bin[16];
				OPENSSL_hexstr2buf_ex(bin, 16, NULL, hex, '\0');
				md5_update(md, bin, 16);
				parts[n++].size = up ? m.size : 0;
				last = (int)v;
			}
		}
		free(num);
		free(et);
		free(part);
	}
	/* S3's 5 MiB floor for every part but the last, for S3's clients
	 * (they list ETags; minikeyvalue's form, part numbers alone, had none) */
	for (int i = 0; !s->status && up && etags && i < n - 1; i++)
		if (parts[i].size < (5u << 20))
			s3_error(s, 400, "EntityTooSmall",
				 "Your proposed upload is smaller than the minimum allowed object size.");
	return s->status ? -1 : n;
}

/* A CompleteMultipartUpload of an upload that is gone: when the object
 * holds what its parts' ETags make, the upload completed (a client's retry
 * after a lost answer), and S3 answers as it did the first time. */
static bool completed(struct s3req *s, const char *etag)
{
	struct meta m;
	return meta_get(s->key, s->klen, &m) && !strcmp(m.etag, etag);
}

void s3_mpu_complete(struct s3req *s)
{
	char *id = s3_req_param(s, "uploadId"), lk[KEY_MAX + 1], *up = NULL;
	size_t ll = 0;
	char etag[META_ETAG_MAX];
	struct part *parts = xmalloc(PARTS_MAX * sizeof(*parts));
	struct md5 *md = md5_new();
	int n = -1;

	/* One Complete of an upload at a time (a lock on its part 0, which no
	 * part is): a retry racing the first waits, then finds it completed() */
	if (id && strlen(id) == 32 && strspn(id, "0123456789abcdef") == 32)
		s3_part_key(id, 0, lk, &ll);
	if (ll && !s3_lock_key(lk, ll)) {
		ll = 0;
		s3_fail(s, 503, "another CompleteMultipartUpload of this upload is running");
		goto out;
	}
	up = s3_upload(s);
	s->status = 0;   /* a NoSuchUpload, unless it completed() */
	if (s->in_too_big || !memmem(s->in.data ? s->in.data : "", s->in.len,
				     "</CompleteMultipartUpload>", 26))
		s3_error(s, 400, "MalformedXML", "not a whole <CompleteMultipartUpload> document");
	else if (!(n = complete_parts(s, up, parts, md)))
		s3_error(s, 400, "MalformedXML", "no parts listed");
	if (n > 0) {
		md5_final_hex(md, etag);
		snprintf(etag + 32, sizeof(etag) - 32, "-%d", n);
	}
	if (!up && (n <= 0 || !completed(s, etag)))
		s3_error(s, 404, "NoSuchUpload", "The specified upload does not exist.");
	if (n <= 0 || s->status || (up && !write_from(s, s->key, s->klen, parts, n, NULL, etag)))
		goto out;
	if (up) {
		meta_raw_delete('u', up, 32);
		each_part(up, drop_part, up);
	}
	s3_xml_start(s, "CompleteMultipartUploadResult");
	xml_tag(&s->body, "Location", s->key, s->klen, false);
	bucket_and_key(s);
	buf_printf(&s->body, "<ETag>&quot;%s&quot;</ETag></CompleteMultipartUploadResult>", etag);
out:
	if (ll)
		keylock_release(lk, ll);
	free(id);
	md5_free(md);
	free(parts);
	free(up);
}
