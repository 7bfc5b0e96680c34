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
	if (status < 300)
		return;
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
	static __thread unsigned s;
	if (!s)
		s = (unsigned)(now_ms() ^ (uintptr_t)&s);
	return (unsigned)rand_r(&s) % n;
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

void handle_get(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		const char *raw_path, bool head, struct answer *a)
{
	struct record r;
	char *v, path[PATH_MAX_LEN];
	int live[RECORD_MAX_LOCS], nlive = 0, pick = -1;
	size_t vlen;

	v = index_get(idx, key, klen, &vlen);
	if (v && record_parse(v, vlen, &r) < 0) {
		answer_error(a, 500, "index record is malformed");
		goto out;
	}
	if (!v || r.deleted || !r.nlocs) {
		if (!cfg->fallback) {
			answer_error(a, 404, "key not found");
			goto out;
		}
		a->status = 302;   /* -fallback: the other master's */
		a->body.len = 0;
		snprintf(a->location, sizeof(a->location), "%s%s%s",   /* https://h:p as given */
			 strstr(cfg->fallback, "://") ? "" : "http://", cfg->fallback, raw_path);
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
		const char *pre = VOL_PREFIX(r.locs[pick], ll);
		size_t sl = strlen(pre);
		if (sl + ll + pl >= sizeof(a->location)) {
			answer_error(a, 500, "index record is malformed");
			goto out;
		}
		memcpy(a->location, pre, sl);
		memcpy(a->location + sl, r.locs[pick], ll);
		memcpy(a->location + sl + ll, path, pl + 1);
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

void handle_relink(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		   struct answer *a)
{
	struct record r;
	size_t elen, vlen;
	char *v, *enc = NULL, path[PATH_MAX_LEN];
	int kept = 0;

	v = index_get(idx, key, klen, &vlen);
	if (!v || record_parse(v, vlen, &r) < 0) {
		answer_error(a, v ? 500 : 404, v ? "index record is malformed" : "key not found");
		goto out;
	}
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
		int st = 0;   /* down: its copy stays named, as any down replica's */
		if (health_up(r.locs[i], strlen(r.locs[i]))) {
			char *url = httpc_url(r.locs[i], path);
			st = httpc_do("HEAD", url, NULL, 0, (long)cfg->puttimeout_ms, NULL, 0, NULL);
			free(url);
		} else if (!r.hash[0]) {
			answer_error(a, 503, "a replica's volume is down: whether the PUT "
					     "finished cannot be told");
			goto out;
		}
		if (!r.hash[0] && st != 200) {
			answer_error(a, 409, "a replica is missing: the record is an "
					     "interrupted PUT's, not an UNLINK's");
			goto out;
		}
		if (st != 404)
			r.locs[kept++] = r.locs[i];
	}
	r.nlocs = kept;
	if (!kept) {
		answer_error(a, 409, "no replica holds the value any more: DELETE the key");
		goto out;
	}
	r.deleted = false;
	enc = record_encode(&r, &elen);
	if (index_write(idx, key, klen, enc, elen, true) < 0) {
		answer_error(a, 500, "index write failed");
		goto out;
	}
	a->status = 204;
out:
	free(enc);
	free(v);
}

/* The bytes json_append_string copies as they are: printable ASCII but
 * " \ < > &. */
static bool plain[256];

static void __attribute__((constructor)) plain_init(void)
{
	for (int c = 0x20; c < 0x80; c++)
		plain[c] = !strchr("\"\\<>&", c);
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
		} else if (c < 0x80) {   /* the run of bytes that need no escape, at once */
			const unsigned char *q = p + 1;
			while (q < end && plain[*q])
				q++;
			buf_append(b, p, (size_t)(q - p));
			p = q;
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

/* A listing: what was asked, and, once it streams, where it is. */
struct list_stream {
	struct index_iter *it;       /* at the next key to look at */
	char *prefix, *first, *next; /* first: where the listing starts; next:
				      * the key to stop at, or NULL */
	size_t plen, flen, nextlen;
	bool unlinked, ended;
	int parts;                   /* LIST_LOCATIONS | LIST_MD5S: arrays asked */
	int part;                    /* the array being written */
	uint64_t n;                  /* its entries so far */
	long ttl;                    /* seconds a location's signature holds */
	struct buf out;              /* made, not yet given: out.data[off..len) */
	size_t off;
	uint64_t piece;              /* list_more's calls so far */
	struct list_loc *locs;       /* LIST_LOCS of them, for locations */
	struct volsign_batch sign;   /* the piece's expiry, with -volumesecret */
	bool signing;
};

/* What a listing's URLs on one record location share, made once: the
 * location's slot is its hash's, the last location hashed there keeps it. */
struct list_loc {
	char *loc;                   /* as the record names it; NULL: unused */
	size_t len;
	char *json;                  /* "\"http://" + loc, escaped for JSON */
	size_t jlen;
	char *uri;                   /* loc's path ("/sv03"), as nginx's $uri */
	size_t ulen;
	bool plain;                  /* no ? # in loc: URL = json + path */
	bool up;                     /* its volume is up, at piece: */
	uint64_t piece;
};
#define LIST_LOCS 256
/* A key's replica URLs made so far: each location's path part, as the
 * record holds it (the slots of struct list_loc may be taken by another
 * location of the same key); len SIZE_MAX: a URL signed whole. */
struct list_signer {
	const char *path;
	size_t len;
};

/* A listing's JSON held whole: a longer one is streamed. */
#define LIST_HOLD (64 * 1024)

enum { LIST_KEYS = 0, LIST_LOCATIONS = 1, LIST_MD5S = 2, LIST_END = 4 };

/* A query flag or value percent-decoded into a fresh heap string (*n its
 * length), NULL when absent; false with a 400 answered when malformed. */
static bool list_param(const char *query, const char *name, char **out, size_t *n,
		       struct answer *a)
{
	size_t vl;
	const char *v = query_param(query, name, &vl);
	*out = NULL;
	if (!v)
		return true;
	*out = xmalloc(vl + 1);
	if (query_decode(v, vl, *out, n) < 0 || memchr(*out, '\0', *n)) {
		answer_error(a, 400, "invalid percent-encoding in the query");
		return false;
	}
	return true;
}

/* ?list's arguments into s: &limit=, &start= (percent-decoded), and
 * &locations, &md5s, &ttl=D (docs/protocol.md §4).  false with a 400
 * answered when one is malformed or does not go with the others. */
static bool list_args(const struct config *cfg, const char *query, struct list_stream *s,
		      uint64_t *limit, struct answer *a)
{
	size_t n;
	char *lim = NULL, *ttl = NULL;
	uint64_t ms = 0;
	bool ok = false;
	/* the first of list and unlinked says which, as in minikeyvalue */
	const char *ul = query_param(query, "unlinked", &n), *li = query_param(query, "list", &n);
	s->unlinked = ul && (!li || ul < li);
	s->parts = (query_param(query, "locations", &n) ? LIST_LOCATIONS : 0) |
		   (query_param(query, "md5s", &n) ? LIST_MD5S : 0);
	if (!list_param(query, "limit", &lim, &n, a) || !list_param(query, "ttl", &ttl, &n, a) ||
	    !list_param(query, "start", &s->first, &s->flen, a))
		goto out;
	if (lim && !parse_u64(lim, 1, UINT64_MAX, limit))
		answer_error(a, 400, "limit must be a positive integer");
	else if (s->parts && s->unlinked)
		answer_error(a, 400, "locations and md5s are for live keys: ?list&locations");
	else if (s->parts == LIST_MD5S || (ttl && !(s->parts & LIST_LOCATIONS)))
		answer_error(a, 400, "md5s and ttl go with ?list&locations");
	else if (ttl && (!parse_duration_ms(ttl, &ms) || ms < 1000))
		answer_error(a, 400, "ttl must be a duration of 1s or more, as 90s, 2h");
	else if (ttl && ms > cfg->maxlinkttl_ms)
		answer_error(a, 400, "ttl is longer than this master's -maxlinkttl");
	else
		ok = true;
	s->ttl = (long)((ttl ? ms : cfg->linkttl_ms) / 1000);
out:
	free(lim);
	free(ttl);
	return ok;
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

/* The slot of loc[0..len) (len < LOC_MAX), made when it is another's. */
static struct list_loc *list_loc(struct list_stream *s, const char *loc, size_t len)
{
	uint32_t h = 2166136261u;   /* FNV-1a */
	struct list_loc *l;
	struct buf u = {0}, j = {0};
	const char *p;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)loc[i]) * 16777619u;
	l = &s->locs[h % LIST_LOCS];
	if (l->loc && l->len == len && !memcmp(l->loc, loc, len))
		goto out;
	free(l->loc);
	free(l->json);
	free(l->uri);
	l->loc = xstrndup(loc, len);
	l->len = len;
	buf_puts(&u, VOL_PREFIX(loc, len));
	buf_append(&u, loc, len);
	json_append_string(&j, u.data, u.len);
	l->jlen = j.len - 1;   /* without the closing quote */
	l->json = xstrndup(j.data, l->jlen);
	buf_free(&u);
	buf_free(&j);
	p = memchr(loc, '/', len);
	l->uri = xmalloc(len + 1);
	l->ulen = p ? volsign_uri(p, len - (size_t)(p - loc), l->uri) : 0;
	l->plain = !memchr(loc, '?', len) && !memchr(loc, '#', len);
	l->piece = 0;
out:
	if (l->piece != s->piece) {
		l->up = health_up(loc, len);
		l->piece = s->piece;
	}
	return l;
}

/* One URL of list_locations': the location's, its path (placement_path's,
 * pl bytes: no escape, no "//") after it, signed when s->signing. */
static void list_url(struct list_stream *s, const struct list_loc *l, const char *path,
		     size_t pl, char (*sig)[VOLSIGN_HASH_LEN + 1], const struct list_signer *signer,
		     int n)
{
	char uri[LOC_MAX + PATH_MAX_LEN], *o;
	size_t ul = l->ulen;
	const char *h = NULL;
	o = buf_room(&s->out, l->jlen + pl + 2 + 19 + VOLSIGN_HASH_LEN + 24);
	memcpy(o, l->json, l->jlen);
	o += l->jlen;
	memcpy(o, path, pl);
	o += pl;
	if (s->signing) {
		/* The replicas of a key on the same subvolume of other volumes
		 * have the same $uri: one hash for them */
		for (int j = 0; j < n && !h; j++)
			if (signer[j].len == signer[n].len &&
			    !memcmp(signer[j].path, signer[n].path, signer[n].len))
				h = sig[j];
		if (!h) {
			memcpy(uri, l->uri, ul);
			if (ul && uri[ul - 1] == '/')
				ul--;   /* nginx merges the / */
			memcpy(uri + ul, path, pl);
			volsign_batch_hash(&s->sign, uri, ul + pl, "GET", sig[n]);
			h = sig[n];
		} else {
			memcpy(sig[n], h, VOLSIGN_HASH_LEN + 1);
		}
		memcpy(o, "?md5=", 5);
		memcpy(o + 5, h, VOLSIGN_HASH_LEN);
		o += 5 + VOLSIGN_HASH_LEN;
		memcpy(o, "\\u0026expires=", 14);
		memcpy(o + 14, s->sign.expires, s->sign.elen);
		o += 14 + s->sign.elen;
	}
	*o++ = '"';
	*o = '\0';
	s->out.len = (size_t)(o - s->out.data);
}

/* One key's entry of locations: the URLs of its replicas on volumes that
 * are up, each signed for GET when -volumesecret is set.  The record is
 * read where the index holds it: ["HASH" 32 hex] loc,loc,.. (a live key). */
static void list_locations(struct list_stream *s, const char *k, size_t klen)
{
	char hash[33], path[PATH_MAX_LEN], url[8 + LOC_MAX + PATH_MAX_LEN];
	char signd[sizeof(url) + VOLSIGN_EXTRA], sig[RECORD_MAX_LOCS][VOLSIGN_HASH_LEN + 1];
	struct list_signer signer[RECORD_MAX_LOCS];
	size_t vlen, pl;
	const char *v = index_iter_value(s->it, &vlen), *end = v + vlen, *p = v, *c;
	int n = 0, nloc = 0;
	bool plain;
	if (record_hash(v, vlen, hash))
		p += 36;
	for (c = p; c && c < end; c = memchr(c + 1, ',', (size_t)(end - c - 1)))
		nloc++;   /* more than RECORD_MAX_LOCS: malformed, no URL to give */
	buf_append(&s->out, "[", 1);
	if (p == end || nloc > RECORD_MAX_LOCS)
		goto out;
	pl = placement_path(k, klen, path);
	plain = !memmem(path, pl, "//", 2);
	for (;; p = c + 1) {
		const struct list_loc *l;
		size_t ll;
		if (!(c = memchr(p, ',', (size_t)(end - p))))
			c = end;
		ll = (size_t)(c - p);
		if (ll && ll < LOC_MAX && (l = list_loc(s, p, ll))->up) {
			const char *q = memchr(p, '/', ll);
			signer[n].path = q ? q : c;
			signer[n].len = (size_t)(c - signer[n].path);
			if (n)
				buf_append(&s->out, ",", 1);
			if (plain && l->plain) {
				list_url(s, l, path, pl, sig, signer, n);
			} else {   /* a ? in the location, // in the path: the URL whole */
				snprintf(url, sizeof(url), "%s%.*s%s", VOL_PREFIX(p, ll), (int)ll, p,
					 path);
				ll = volsign_url(url, "GET", s->ttl, signd, sizeof(signd));
				json_append_string(&s->out, ll ? signd : url, ll ? ll : strlen(url));
				signer[n].len = SIZE_MAX;   /* its signature is for no other */
			}
			n++;
		}
		if (c == end)
			break;
	}
out:
	buf_append(&s->out, "]", 1);
}

/* Start the array after s->part: back to the listing's first key (the
 * same iterator, so the same view of the index: the arrays stay parallel). */
static void list_next_part(struct list_stream *s)
{
	do
		s->part = s->part ? s->part << 1 : 1;
	while (s->part < LIST_END && !(s->parts & s->part));
	if (s->part == LIST_END) {
		buf_append(&s->out, "]}", 2);
		s->ended = true;
		return;
	}
	buf_puts(&s->out, s->part == LIST_LOCATIONS ? "],\"locations\":[" : "],\"md5s\":[");
	index_iter_seek(s->it, s->first, s->flen);
	s->n = 0;
}

/* Append entries to s->out until it holds want bytes, or the listing's end. */
static void list_more(struct list_stream *s, size_t want)
{
	size_t klen, vlen;
	const char *k;
	char hash[33];
	s->piece++;
	s->signing = s->locs && volsign_batch(&s->sign, s->ttl);
	while (s->out.len < want && !s->ended) {
		k = list_key(s->it, s->prefix, s->plen, s->unlinked, &klen);
		if (!k || (s->next && bytes_cmp(k, klen, s->next, s->nextlen) >= 0)) {
			list_next_part(s);
			continue;
		}
		if (s->n++)
			buf_append(&s->out, ",", 1);
		if (s->part == LIST_KEYS) {
			json_append_string(&s->out, k, klen);
		} else if (s->part == LIST_LOCATIONS) {
			list_locations(s, k, klen);
		} else {
			const char *v = index_iter_value(s->it, &vlen);
			record_hash(v, vlen, hash);
			json_append_string(&s->out, hash, strlen(hash));
		}
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
	free(s->first);
	free(s->next);
	buf_free(&s->out);
	for (int i = 0; s->locs && i < LIST_LOCS; i++) {
		free(s->locs[i].loc);
		free(s->locs[i].json);
		free(s->locs[i].uri);
	}
	free(s->locs);
	free(s);
}

/* With a limit, one pass finds next (the first key past it); then the
 * listing is made from its first key: the first LIST_HOLD bytes held.  A
 * listing that ends there is answered whole; a longer one streams, the
 * same iterator (so the same view of the index) going on as answer_read
 * asks -- to HEAD, to the end at once, counting bytes.  Each array after
 * keys (locations, md5s) is one more pass over the same keys. */
void handle_list(const struct config *cfg, struct index *idx, const char *prefix, size_t plen,
		 const char *query, bool head, struct answer *a)
{
	uint64_t limit = 0, count = 0;
	size_t klen;
	int64_t sent = 0;
	const char *k;
	struct list_stream *s = xcalloc(1, sizeof(*s));

	if (!list_args(cfg, query, s, &limit, a))
		goto fail;
	s->prefix = xstrndup(prefix, plen);
	s->plen = plen;
	if (s->parts & LIST_LOCATIONS)
		s->locs = xcalloc(LIST_LOCS, sizeof(*s->locs));
	/* Start at start when it lies past the prefix's first key. */
	if (!s->first || bytes_cmp(s->first, s->flen, prefix, plen) <= 0) {
		free(s->first);
		s->first = xstrndup(prefix, plen);
		s->flen = plen;
	}
	s->it = index_iter_new(idx, s->first, s->flen);
	for (; limit && (k = list_key(s->it, prefix, plen, s->unlinked, &klen));
	     index_iter_next(s->it))
		if (count++ == limit) {
			s->next = xstrndup(k, klen);
			s->nextlen = klen;
			break;
		}
	if (limit)
		index_iter_seek(s->it, s->first, s->flen);
	buf_puts(&s->out, "{\"next\":");
	json_append_string(&s->out, s->next ? s->next : "", s->nextlen);
	buf_puts(&s->out, ",\"keys\":[");
	list_more(s, LIST_HOLD);
	a->status = 200;
	a->ctype = "application/json";
	a->body.len = 0;
	if (s->ended) {
		buf_append(&a->body, s->out.data, s->out.len);
		goto fail;
	}
	a->stream = s;
	a->stream_len = -1;
	if (head) {   /* no body is sent: only its length */
		while (!s->ended) {
			sent += (int64_t)s->out.len;
			s->out.len = 0;
			list_more(s, LIST_HOLD);
		}
		a->stream_len = sent + (int64_t)s->out.len;
		s->out.len = 0;
	}
	return;
fail:
	list_stream_free(s);
}
