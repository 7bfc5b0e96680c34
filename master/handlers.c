/* handlers.c -- see handlers.h.  The semantics follow minikeyvalue's
 * server.go, with docs/protocol.md §4's additions. */
#include "handlers.h"
#include "../common/httpc.h"
#include "../common/volsign.h"
#include "../common/record.h"
#include "../common/front.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct list_stream;
static void list_stream_free(struct list_stream *s);

void answer_error(struct answer *a, int status, const char *why)
{
	a->status = status;
	a->ctype = NULL;
	a->body.len = 0;
	buf_puts(&a->body, why);
	buf_puts(&a->body, "\n");
}

void answer_free(struct answer *a)
{
	buf_free(&a->body);
	free(a->volumes);
	a->volumes = NULL;
	list_stream_free(a->stream);
	a->stream = NULL;
}

static unsigned rand_below(unsigned n)
{
	static __thread uint64_t s;
	if (!s)
		s = now_ms() ^ (uint64_t)(uintptr_t)&s;
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return (unsigned)(s % n);
}

/* Does the record sit exactly where key2volume puts it now? */
static bool balanced(const struct config *cfg, const char *key, size_t klen,
		     const struct record *r)
{
	char want[RECORD_MAX_LOCS][LOC_MAX];
	int n;
	if (r->nlocs != (cfg->replicas < cfg->nvol ? cfg->replicas : cfg->nvol))
		return false;
	n = placement_volumes(key, klen, cfg->volumes, cfg->nvol,
			      cfg->replicas > RECORD_MAX_LOCS ? RECORD_MAX_LOCS : cfg->replicas,
			      cfg->subvolumes, want);
	for (int i = 0; i < n; i++)
		if (strcmp(want[i], r->locs[i]))
			return false;
	return true;
}

static void not_found(const struct config *cfg, const char *raw_path, struct answer *a)
{
	if (cfg->fallback) {
		a->status = 302;
		a->body.len = 0;
		snprintf(a->location, sizeof(a->location), "http://%s%s", cfg->fallback, raw_path);
		return;
	}
	answer_error(a, 404, "key not found");
}

/* key's record into r (*v holds its storage; caller frees it), else false
 * with 404 (*v NULL: there is none) or 500 (it is malformed) answered. */
static bool load(struct index *idx, const char *key, size_t klen, char **v, struct record *r,
		 struct answer *a)
{
	size_t vlen;
	*v = index_get(idx, key, klen, &vlen);
	if (!*v)
		answer_error(a, 404, "key not found");
	else if (record_parse(*v, vlen, r) < 0)
		answer_error(a, 500, "index record is malformed");
	else
		return true;
	return false;
}

void handle_get(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		const char *raw_path, bool head, struct answer *a)
{
	struct record r;
	char *v, path[PATH_MAX_LEN];
	int live[RECORD_MAX_LOCS], nlive = 0, pick = -1;
	size_t vlen;

	/* Not load(): an absent key's answer is not_found's (-fallback). */
	v = index_get(idx, key, klen, &vlen);
	if (v && record_parse(v, vlen, &r) < 0) {
		answer_error(a, 500, "index record is malformed");
		goto out;
	}
	if (!v || r.deleted || !r.nlocs) {
		not_found(cfg, raw_path, a);
		goto out;
	}
	placement_path(key, klen, path);
	for (int i = 0; i < r.nlocs; i++)
		if (health_up(r.locs[i], strlen(r.locs[i])))
			live[nlive++] = i;
	if (cfg->headcheck && nlive) {
		/* minikeyvalue's way: ask a replica before redirecting to it;
		 * none has the blob: 404, the key's, not -fallback's redirect. */
		while (nlive) {
			unsigned k = rand_below((unsigned)nlive);
			char *url = httpc_url(r.locs[live[k]], path);
			int st = httpc_do("HEAD", url, NULL, 0, (long)cfg->voltimeout_ms, NULL, 0, NULL);
			free(url);
			if (st == 200) {
				pick = live[k];
				break;
			}
			live[k] = live[--nlive];
		}
		if (pick < 0) {
			answer_error(a, 404, "no replica holds the blob");
			goto out;
		}
	} else if (nlive) {
		pick = live[rand_below((unsigned)nlive)];
	} else {
		answer_error(a, 503, "no replica of this key is on a volume that is up");
		goto out;
	}
	a->status = 302;
	{
		size_t ll = strlen(r.locs[pick]), pl = strlen(path);
		if (7 + ll + pl >= sizeof(a->location)) {
			answer_error(a, 500, "index record is malformed");
			goto out;
		}
		memcpy(a->location, "http://", 7);
		memcpy(a->location + 7, r.locs[pick], ll);
		memcpy(a->location + 7 + ll, path, pl + 1);
	}
	if (volsign_on()) {   /* one md5 of ~100 bytes, on the stack */
		char plain[sizeof(a->location)];
		memcpy(plain, a->location, strlen(a->location) + 1);
		if (!volsign_url(plain, head ? "HEAD" : "GET", (long)(cfg->linkttl_ms / 1000),
				 a->location, sizeof(a->location))) {
			answer_error(a, 500, "the signed location is too long");
			goto out;
		}
	}
	memcpy(a->md5, r.hash, sizeof(a->md5));
	a->balance = balanced(cfg, key, klen, &r) ? "balanced" : "unbalanced";
	a->volumes = record_join_locs(r.locs, r.nlocs);
out:
	free(v);
}

void handle_delete(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		   enum del_mode mode, struct answer *a)
{
	const char *why;
	int st = store_delete(cfg, idx, key, klen, mode, &why);
	if (st == 204)
		a->status = 204;
	else
		answer_error(a, st, why);
}

void handle_relink(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		   struct answer *a)
{
	struct record r;
	size_t elen;
	char *v, *enc = NULL, path[PATH_MAX_LEN];
	int kept = 0;

	if (!load(idx, key, klen, &v, &r, a))
		goto out;
	if (!r.deleted) {
		a->status = 204;
		goto out;
	}
	/* An UNLINK keeps HASH; a PUT that never finished has none.  Without
	 * one, relink only when every replica is there.  With one, the
	 * replicas that are gone (a DELETE that a volume refused, or a crash,
	 * cut short) are no longer named: a GET must not be sent to them. */
	placement_path(key, klen, path);
	for (int i = 0; i < r.nlocs; i++) {
		char *url;
		int st;
		if (!health_up(r.locs[i], strlen(r.locs[i]))) {
			if (r.hash[0])
				continue;   /* down: its copy stays named, as any down replica's */
			answer_error(a, 503, "a replica's volume is down: whether the PUT "
					     "finished cannot be told");
			goto out;
		}
		url = httpc_url(r.locs[i], path);
		st = httpc_do("HEAD", url, NULL, 0, (long)cfg->puttimeout_ms, NULL, 0, NULL);
		free(url);
		if (!r.hash[0] && st != 200) {
			answer_error(a, 409, "a replica is missing: the record is an "
					     "interrupted PUT's, not an UNLINK's");
			goto out;
		}
		if (st == 404)
			r.locs[i] = NULL;
	}
	for (int i = 0; i < r.nlocs; i++)
		if (r.locs[i])
			r.locs[kept++] = r.locs[i];
	r.nlocs = kept;
	if (!kept) {
		answer_error(a, 409, "no replica holds the value any more: DELETE the key");
		goto out;
	}
	r.deleted = false;
	enc = record_encode(&r, &elen);
	if (index_put(idx, key, klen, enc, elen) < 0) {
		answer_error(a, 500, "index write failed");
		goto out;
	}
	a->status = 204;
out:
	free(enc);
	free(v);
}

void json_append_string(struct buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	buf_append(b, "\"", 1);
	while (p < end) {
		unsigned c = *p;
		if (c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t') {
			char e[2] = {'\\', c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : (char)c};
			buf_append(b, e, 2);
			p++;
		} else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			buf_append(b, e, 6);
			p++;
		} else if (c < 0x80) {
			buf_append(b, p, 1);
			p++;
		} else {
			/* Copy a well-formed UTF-8 sequence, else U+FFFD for one byte. */
			int len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
			bool ok = len && end - p >= len;
			for (int i = 1; ok && i < len; i++)
				ok = (p[i] & 0xc0) == 0x80;
			if (ok && len == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f)))
				ok = false;
			if (ok && len == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] > 0x8f)))
				ok = false;
			if (ok && len == 3 && c == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
				buf_puts(b, p[2] == 0xa8 ? "\\u2028" : "\\u2029");
				p += 3;
			} else if (ok) {
				buf_append(b, p, (size_t)len);
				p += len;
			} else {
				buf_puts(b, "\\ufffd");
				p++;
			}
		}
	}
	buf_append(b, "\"", 1);
}

/* ?list's &limit= and &start=, percent-decoded (*start a fresh heap
 * string): false with a 400 answered when either is malformed. */
static bool list_args(const char *query, uint64_t *limit, char **start, size_t *stlen,
		      struct answer *a)
{
	size_t limlen = 0, n = 0;
	const char *lim = query_param(query, "limit", &limlen), *st = query_param(query, "start", &n);
	char num[24];
	if (lim && (limlen >= sizeof(num) || query_decode(lim, limlen, num, &limlen) < 0 ||
		    memchr(num, '\0', limlen) ||
		    (num[limlen] = '\0', !parse_u64(num, 1, UINT64_MAX, limit)))) {
		answer_error(a, 400, "limit must be a positive integer");
		return false;
	}
	if (!st || !n)
		return true;
	*start = xmalloc(n + 1);
	if (query_decode(st, n, *start, stlen) < 0) {
		answer_error(a, 400, "invalid percent-encoding in start");
		return false;
	}
	return true;
}

/* A listing's JSON held whole: a longer one is streamed. */
#define LIST_HOLD (64 * 1024)

/* A listing being streamed: its head and first keys were made by
 * handle_list; the rest comes from the iterator as answer_read asks. */
struct list_stream {
	struct index_iter *it;       /* at the next key to look at */
	char *prefix, *next;         /* next: the key to stop at, or NULL */
	size_t plen, nextlen;
	bool unlinked, ended;
	struct buf out;              /* made, not yet given: out.data[off..len) */
	size_t off;
};

static char *memdup(const char *p, size_t n)
{
	char *d = xmalloc(n + 1);
	memcpy(d, p, n);
	d[n] = '\0';
	return d;
}

/* The iterator's key if it is one the listing shows (under prefix, of the
 * kind asked), moving past keys of the other kind; NULL past the prefix. */
static const char *list_key(struct index_iter *it, const char *prefix, size_t plen,
			    bool unlinked, size_t *klen)
{
	for (; index_iter_valid(it); index_iter_next(it)) {
		size_t vlen;
		const char *k = index_iter_key(it, klen), *v = index_iter_value(it, &vlen);
		if (*klen < plen || memcmp(k, prefix, plen))
			return NULL;
		if (record_deleted(v, vlen) == unlinked)
			return k;
	}
	return NULL;
}

/* Append keys to s->out until it holds want bytes, or the listing's end. */
static void list_more(struct list_stream *s, size_t want)
{
	size_t klen;
	const char *k;
	while (s->out.len < want) {
		k = list_key(s->it, s->prefix, s->plen, s->unlinked, &klen);
		if (!k || (s->next && bytes_cmp(k, klen, s->next, s->nextlen) >= 0)) {
			buf_append(&s->out, "]}", 2);
			s->ended = true;
			return;
		}
		buf_append(&s->out, ",", 1);   /* a stream follows at least one key */
		json_append_string(&s->out, k, klen);
		index_iter_next(s->it);
	}
}

ssize_t answer_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct list_stream *s = ((struct answer *)cls)->stream;
	size_t n = 0, k;
	(void)pos;
	while (n < max) {
		if (s->off == s->out.len) {
			if (s->ended)
				break;
			s->out.len = s->off = 0;
			list_more(s, max - n);
		}
		k = s->out.len - s->off < max - n ? s->out.len - s->off : max - n;
		memcpy(out + n, s->out.data + s->off, k);
		s->off += k;
		n += k;
	}
	return n ? (ssize_t)n : FRONT_READER_END;
}

static void list_stream_free(struct list_stream *s)
{
	if (!s)
		return;
	index_iter_free(s->it);
	free(s->prefix);
	free(s->next);
	buf_free(&s->out);
	free(s);
}

/* The answer's head ({"next":...,"keys":[) and the keys held, into b. */
static void list_head(struct buf *b, const char *next, size_t nextlen, const struct buf *keys)
{
	buf_puts(b, "{\"next\":");
	json_append_string(b, next ? next : "", next ? nextlen : 0);
	buf_puts(b, ",\"keys\":[");
	buf_append(b, keys->data, keys->len);
}

/* One pass over the listing finds next (the first key past limit) and
 * holds the first LIST_HOLD bytes of keys.  A listing that fits is
 * answered whole; a longer one streams: the same iterator (so the same
 * view of the index) goes back to the last key held and answer_read
 * goes on from there to next.  Unlimited, the pass stops at the hold,
 * as next is "" anyway; to HEAD, it goes to the end, counting bytes. */
void handle_list(struct index *idx, const char *prefix, size_t plen, const char *query,
		 bool head, struct answer *a)
{
	uint64_t limit = 0, count = 0;
	size_t n, klen, stlen = 0, nextlen = 0, lastlen = 0;
	int64_t rest = 0;   /* to HEAD: bytes of the keys not held */
	char *start = NULL, *next = NULL, *last = NULL;
	const char *k;
	struct index_iter *it = NULL;
	struct buf keys = {0}, scratch = {0};
	struct list_stream *s;
	/* the first of list and unlinked says which, as in minikeyvalue */
	const char *ul = query_param(query, "unlinked", &n), *li = query_param(query, "list", &n);
	bool unlinked = ul && (!li || ul < li);

	if (!list_args(query, &limit, &start, &stlen, a))
		goto out;
	/* Resume at start when it lies past the prefix's first key. */
	if (start && bytes_cmp(start, stlen, prefix, plen) > 0)
		it = index_iter_new(idx, start, stlen);
	else
		it = index_iter_new(idx, prefix, plen);
	buf_puts(&keys, "");
	for (; (k = list_key(it, prefix, plen, unlinked, &klen)); index_iter_next(it)) {
		if (limit && count == limit) {
			next = memdup(k, klen);
			nextlen = klen;
			break;
		}
		if (!last) {
			if (count)
				buf_append(&keys, ",", 1);
			json_append_string(&keys, k, klen);
			if (keys.len >= LIST_HOLD) {
				last = memdup(k, klen);
				lastlen = klen;
				if (!limit && !head)
					break;
			}
		} else if (head) {
			scratch.len = 0;
			json_append_string(&scratch, k, klen);
			rest += 1 + (int64_t)scratch.len;
		}
		count++;
	}
	a->status = 200;
	a->ctype = "application/json";
	a->body.len = 0;
	if (!last) {
		list_head(&a->body, next, nextlen, &keys);
		buf_puts(&a->body, "]}");
		goto out;
	}
	s = xcalloc(1, sizeof(*s));
	list_head(&s->out, next, nextlen, &keys);
	a->stream = s;
	if (head) {   /* no body is sent: only its length */
		a->stream_len = (int64_t)s->out.len + rest + 2;
		s->ended = true;
		goto out;
	}
	a->stream_len = -1;
	index_iter_seek(it, last, lastlen);
	index_iter_next(it);
	s->it = it;
	it = NULL;
	s->prefix = memdup(prefix, plen);
	s->plen = plen;
	s->next = next;
	s->nextlen = nextlen;
	next = NULL;
	s->unlinked = unlinked;
out:
	buf_free(&keys);
	buf_free(&scratch);
	index_iter_free(it);
	free(start);
	free(next);
	free(last);
}
