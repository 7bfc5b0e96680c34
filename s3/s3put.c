/* s3put.c -- PutObject and UploadPart (streamed through put.c, REPLACE
 * semantics, aws-chunked bodies decoded), DeleteObject and DeleteObjects.
 * See s3req.h. */
#include "s3req.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- PutObject / UploadPart ---- */

/* The body went wrong mid-way: stop the put (the old value stays). */
static void put_refuse(struct s3req *s, int why)
{
	if (!s->bad && s->put)
		put_abort(s->put);
	s->bad = why;
}

/* STREAMING-AWS4-HMAC-SHA256-PAYLOAD: a chunk's signature, from its size
 * line's ";chunk-signature=", is checked once its data is in, against the
 * chain (sigv4.h).  false (the write refused) when it does not match. */
static bool chunk_start(struct s3req *s, const char *ext)
{
	const char *sig = strstr(ext, ";chunk-signature=");
	if (!s->ring || s->sig.payload != PAYLOAD_CHUNKS)
		return true;
	s->chunk_sigl = sig ? strlen(sig + 17) : 0;
	if (!sig || s->chunk_sigl != 64) {
		put_refuse(s, BAD_CHUNK_SIG);
		return false;
	}
	memcpy(s->chunk_sig, sig + 17, 65);
	s->chunk_sha = sha256_new();
	return true;
}

static bool chunk_end(struct s3req *s)
{
	unsigned char d[32];
	if (!s->chunk_sha)
		return true;
	sha256_final(s->chunk_sha, d);
	s->chunk_sha = NULL;
	if (sig_chunk(&s->sig, d, s->chunk_sig, s->chunk_sigl))
		return true;
	put_refuse(s, BAD_CHUNK_SIG);
	return false;
}

/* Decode aws-chunked input into s->pending.  false on malformed framing
 * or a chunk signature that does not match (s->bad says which). */
static bool dec_feed(struct s3req *s, const char *p, size_t n)
{
	struct chunkdec *d = &s->dec;
	while (n && d->st != DEC_ERROR) {
		switch (d->st) {
		case DEC_DATA: {
			size_t k = n < d->left ? n : (size_t)d->left;
			buf_append(&s->pending, p, k);
			if (s->chunk_sha)
				sha256_update(s->chunk_sha, p, k);
			p += k;
			n -= k;
			d->left -= k;
			if (!d->left && !chunk_end(s))
				d->st = DEC_ERROR;
			else if (!d->left)
				d->st = DEC_DATA_END;
			break;
		}
		case DEC_DONE:
			return false; /* bytes after the end */
		default:
			if (d->llen == CHUNK_LINE_MAX) {
				d->st = DEC_ERROR;
				break;
			}
			d->line[d->llen++] = *p++;
			n--;
			if (d->llen < 2 || d->line[d->llen - 2] != '\r' || d->line[d->llen - 1] != '\n')
				break;
			d->line[d->llen - 2] = '\0';
			if (d->st == DEC_DATA_END) {
				d->st = d->llen == 2 ? DEC_SIZE : DEC_ERROR;
			} else if (d->st == DEC_SIZE) {
				char *e;
				uint64_t v;
				if (!d->line[0] || hex_value(d->line[0]) < 0) {
					d->st = DEC_ERROR;
					break;
				}
				v = strtoull(d->line, &e, 16);
				if ((*e && *e != ';') || !chunk_start(s, e) || (!v && !chunk_end(s)))
					d->st = DEC_ERROR;
				else if (v)
					d->st = DEC_DATA, d->left = v;
				else
					d->st = DEC_TRAILER;
			} else if (d->st == DEC_TRAILER) {
				if (d->llen == 2)
					d->st = DEC_DONE;
				else
					s3sum_trailer(s->sum, d->line);
			}
			d->llen = 0;
		}
	}
	return d->st != DEC_ERROR;
}

/* The body's bytes as stored (decoded), into its digests. */
static void body_hash(struct s3req *s, const char *p, size_t n)
{
	s3sum_update(s->sum, p, n);
	if (s->sha)
		sha256_update(s->sha, p, n);
}

/* Does the body's SHA-256 match its x-amz-content-sha256? */
static bool sha_ok(struct s3req *s)
{
	unsigned char d[32];
	char h[65];
	sha256_final(s->sha, d);
	s->sha = NULL;
	to_hex(d, 32, h);
	return !CRYPTO_memcmp(h, s->sig.sha256, 64);
}

/* Before the body: what can be refused, then the put.  true when answered. */
static bool put_prepare(struct s3req *s)
{
	const char *cl, *why;
	uint64_t clen = 0;
	bool known;

	cl = s3_req_header(s, s->aws_chunked ? "X-Amz-Decoded-Content-Length" : "Content-Length");
	known = cl && parse_u64(cl, 0, INT64_MAX, &clen);
	s->decoded = s->aws_chunked && known ? (int64_t)clen : -1;
	if (known && store_cfg()->maxsize && clen > store_cfg()->maxsize) {
		s3_error(s, 400, "EntityTooLarge", "value larger than -maxsize");
	} else if (s->op == S3_PUT) {
		memcpy(s->target, s->key, s->klen);
		s->tlen = s->klen;
	} else {
		s3_part_target(s, s->target, &s->tlen);
	}
	if (!s->status && !keylock_try(s->target, s->tlen))   /* a poll thread: no waiting here */
		s3_error(s, 503, "SlowDown", "another write of this key is in progress");
	else if (!s->status && s->op == S3_PUT && !s3_write_condition(s, s->target, s->tlen))
		keylock_release(s->target, s->tlen);
	if (s->status)
		return true;
	if (s->ring && s->sig.payload == PAYLOAD_SHA256)
		s->sha = sha256_new();
	/* An aws-chunked body, or one with a digest to check or a signed SHA-256, goes to the volumes
	 * unannounced (chunked), even with its length known: then no replica
	 * can finish before the framing and the digest have been checked to
	 * the end, and a bad one leaves the old value everywhere. */
	s->put = store_write(store_cfg(), store_index(), s->target, s->tlen, true,
			     known && !s->aws_chunked && !s->sum && !s->sha ? (int64_t)clen : -1,
			     front_wake, &s->sleep, S3_RING, &why);
	if (!s->put)
		s3_error(s, 503, "ServiceUnavailable", why);
	return !s->put;
}

/* Some of the body: decoded into s->pending (aws-chunked), else fed to
 * the put as far as it takes it. */
static int put_data(struct s3req *s, const char *data, size_t *size)
{
	size_t took = *size;
	if (s->aws_chunked) {
		if (!dec_feed(s, data, *size) && !s->bad)
			put_refuse(s, BAD_FRAMING);
		took = s->pending.len;
	}
	if (store_cfg()->maxsize && s->fed + took > store_cfg()->maxsize) {
		put_refuse(s, BAD_SIZE);
		s->pending.len = 0;
	}
	if (s->bad || s->aws_chunked) {
		if (!s->bad)
			body_hash(s, s->pending.data, s->pending.len);
		s->fed += s->bad ? 0 : took;
		*size = 0;
		return FRONT_YES;
	}
	took = put_feed(s->put, data, *size);
	body_hash(s, data, took);   /* as it passes, no copy */
	s->fed += took;
	*size -= took;
	if (*size)   /* woken by the put's wake: ring room, or its end (as the native PUT's) */
		front_wait(&s->sleep);
	return FRONT_YES;
}

/* The error of a refused body (s->bad). */
static void bad_error(struct s3req *s)
{
	if (s->bad == BAD_SIZE)
		s3_error(s, 400, "EntityTooLarge", "value larger than -maxsize");
	else if (s->bad == BAD_SHA256)
		s3_error(s, 400, "XAmzContentSHA256Mismatch",
			 "The provided 'x-amz-content-sha256' header does not match what was computed.");
	else if (s->bad == BAD_CHUNK_SIG)
		s3_error(s, 403, "SignatureDoesNotMatch",
			 "The chunk signature we calculated does not match the one you provided.");
	else if (s->bad == BAD_DIGEST) {
		char msg[96];
		snprintf(msg, sizeof(msg), "The %s you specified did not match the calculated "
			 "checksum.", s3sum_failed(s->sum));
		s3_error(s, 400, "BadDigest", msg);
	} else
		s3_error(s, 400, "IncompleteBody", "aws-chunked body malformed, truncated, or not its decoded length");
}

/* ---- a POST's XML body (DeleteObjects, CompleteMultipartUpload,
 * CreateBucket) ---- */

void s3_body_take(struct s3req *s, const char *data, size_t n)
{
	if (s->aws_chunked) {
		if (!dec_feed(s, data, n) && !s->bad)
			s->bad = BAD_FRAMING;
		data = s->pending.data;
		n = s->pending.len;
		s->pending.len = 0;
	}
	if (s->in.len + n > XML_BODY_MAX)
		s->in_too_big = true;
	else if (!s->bad)
		buf_append(&s->in, data, n);
}

bool s3_body_signed(struct s3req *s)
{
	bool xml = s->op == S3_DELETE_MANY || s->op == S3_MPU_COMPLETE || s->op == S3_BUCKET_CREATE;
	if (xml && s->aws_chunked && !s->bad && s->dec.st != DEC_DONE)
		s->bad = BAD_FRAMING;
	if (!s->bad && !s->in_too_big) {
		if (s->ring && s->sig.payload == PAYLOAD_SHA256)
			s->sha = sha256_new();
		body_hash(s, s->in.data, s->in.len);
		if (!s3sum_ok(s->sum))
			s->bad = BAD_DIGEST;
		else if (s->sha && !sha_ok(s))
			s->bad = BAD_SHA256;
	}
	if (s->bad)
		bad_error(s);
	return !s->bad;
}

/* The body is in: the answer, once the put has its result. */
static int put_end(struct s3req *s)
{
	int st;
	const char *why;
	if (s->aws_chunked && s->bad != BAD_CHUNK_SIG &&
	    (s->dec.st != DEC_DONE || (!s->bad && s->decoded >= 0 && s->fed != (uint64_t)s->decoded)))
		put_refuse(s, BAD_FRAMING);   /* or not the length it said */
	if (!s->bad && !s->put_finished && !s3sum_ok(s->sum))
		put_refuse(s, BAD_DIGEST);
	if (s->sha && !s->bad && !s->put_finished && !sha_ok(s))
		put_refuse(s, BAD_SHA256);
	if (!s->bad && !s->put_finished) {
		put_finish(s->put);
		s->put_finished = true;
	}
	if (!put_result(s->put, &st, &why)) {
		front_wait(&s->sleep);   /* woken by the put's end (put.c's finish) */
		return FRONT_YES;
	}
	if (s->bad)
		bad_error(s);
	else if (st != 201)
		s3_error(s, st >= 500 ? st : 500, "InternalError", why);
	else {
		const char *name;
		char b64[48];
		s->status = 200;
		s3_hdr(s, "ETag", "\"%s\"", put_md5(s->put));
		for (int i = 0; s3sum_echo(s->sum, &i, &name, b64);)
			s3_hdr(s, name, "%s", b64);
	}
	return s3_send(s);
}

int s3_put_run(struct s3req *s, const char *data, size_t *size)
{
	if (!s->put && put_prepare(s))
		return s3_swallow(s, size); /* answered once the body is in */
	/* what was decoded but not yet taken goes first */
	while (s->poff < s->pending.len) {
		s->poff += put_feed(s->put, s->pending.data + s->poff, s->pending.len - s->poff);
		if (s->poff < s->pending.len) {
			front_wait(&s->sleep);   /* woken by the put's wake, as in put_data */
			return FRONT_YES;
		}
	}
	s->pending.len = s->poff = 0;
	return *size ? put_data(s, data, size) : put_end(s);
}

/* ---- everything else, on a thread of its own ---- */

int s3_delete_key(const char *key, size_t klen, bool part, const char *if_match, const char **why)
{
	const struct config *cfg = store_cfg();
	int st;
	if (!s3_lock_key(key, klen)) {
		*why = "another write of this key is in progress";
		return 503;
	}
	if (if_match && !s3_etag_is(key, klen, if_match)) {
		st = 412;
		*why = "At least one of the preconditions you specified did not hold.";
	} else if (part && cfg->protect) {
		/* a part is the upload's, not the user's: -protect's UNLINK first */
		store_delete(cfg, store_index(), key, klen, DEL_UNLINK, why);
		st = store_delete(cfg, store_index(), key, klen, DEL_UNLINKED, why);
	} else {
		st = store_delete(cfg, store_index(), key, klen, DEL_DELETE, why);
	}
	keylock_release(key, klen);
	if (st == 404)
		st = 204;
	if (st == 204)
		*why = NULL;
	return st;
}

void s3_delete_object(struct s3req *s)
{
	const char *why;
	int st = s3_delete_key(s->key, s->klen, false, s3_req_header(s, "If-Match"), &why);
	if (st == 204)
		s->status = 204;
	else
		s3_fail(s, st, why);
}

/* A key from XML (raw bytes, not percent-encoded) under the bucket, checked
 * as key_decode checks a path.  0, or a status with *why. */
static int xml_key(struct s3req *s, const char *name, size_t n, char *out, size_t *outlen,
		   const char **why)
{
	struct buf enc = {0};
	int st;
	buf_puts(&enc, "/");
	buf_append(&enc, s->bucket, s->blen);
	buf_puts(&enc, "/");
	buf_url_escape(&enc, name, n, true);   /* key_decode takes it back to name */
	if (enc.len > KEY_MAX * 3) {
		buf_free(&enc);
		*why = "key longer than 189 bytes";
		return 414;
	}
	st = key_decode(enc.data, enc.len, out, outlen, why);
	buf_free(&enc);
	return st;
}

/* One <Object> of a DeleteObjects document: deleted, or an <Error>. */
static void delete_one(struct s3req *s, const char *k, size_t kl, const char *etag, bool quiet,
		       struct buf *out)
{
	char full[KEY_MAX * 3 + 8];
	size_t fl;
	const char *why;
	int st = xml_key(s, k, kl, full, &fl, &why);
	if (!st && !s3_may(s, PERM_DELETE, full, fl)) {
		st = 403;
		why = "Access Denied";
	}
	if (!st)
		st = s3_delete_key(full, fl, false, etag, &why);
	if (st == 204 && quiet)
		return;
	buf_puts(out, st == 204 ? "<Deleted>" : "<Error>");
	xml_tag(out, "Key", k, kl, false);
	if (st != 204) {
		buf_printf(out, "<Code>%s</Code>", s3_code(st));
		xml_tag(out, "Message", why, strlen(why), false);
	}
	buf_puts(out, st == 204 ? "</Deleted>" : "</Error>");
}

void s3_delete_many(struct s3req *s)
{
	const char *doc = s->in.data ? s->in.data : "", *end = doc + s->in.len, *p;
	size_t olen, kl;
	char *quiet = s3_xml_next(doc, end, "Quiet", NULL, NULL), *obj, *k;
	bool q = quiet && !strcmp(quiet, "true");
	int n = 0;

	free(quiet);
	if (s->in_too_big) {
		s3_error(s, 400, "MalformedXML", "request body too large");
		return;
	}
	s3_xml_start(s, "DeleteResult");   /* an error below replaces it */
	for (p = doc; (obj = s3_xml_next(p, end, "Object", &olen, &p)); free(k)) {
		char *et = s3_xml_next(obj, obj + olen, "ETag", NULL, NULL);
		k = s3_xml_next(obj, obj + olen, "Key", &kl, NULL);
		if (++n > 1000 || !k || memmem(obj, olen, "<Size>", 6) ||
		    memmem(obj, olen, "<LastModifiedTime>", 18) || memmem(obj, olen, "<VersionId>", 11)) {
			s3_error(s, n > 1000 || !k ? 400 : 501, n > 1000 || !k ? "MalformedXML"
				 : "NotImplemented", n > 1000 ? "more than 1000 keys" : !k ?
				 "an Object without a Key" : "a Size, LastModifiedTime or VersionId");
			free(k), free(et), free(obj);
			return;
		}
		free(obj);
		delete_one(s, k, kl, et, q, &s->body);
		free(et);
	}
	if (!n && !memmem(doc, s->in.len, "<Delete", 7))
		s3_error(s, 400, "MalformedXML", "no <Delete> document");
	else
		buf_puts(&s->body, "</DeleteResult>");
}
