/* meta.c -- the sidecar: attributes and notes (store.h). */
#include "store.h"
#include "../common/record.h"
#include "../common/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct index *db;

int meta_open(const char *dir)
{
	char *path = xasprintf("%s/mkv-meta", dir), *why = NULL;
	db = index_open(path, &why);
	if (!db) {
		log_msg("sidecar index: %s", why);
		free(why);
	}
	free(path);
	return db ? 0 : -1;
}

void meta_close(void)
{
	index_close(db);
	db = NULL;
}

int meta_sync(void)
{
	return db ? index_sync(db) : 0;
}

struct index_iter *meta_notes(char type)
{
	return db ? index_iter_new(db, &type, 1) : NULL;
}

/* The sidecar's key for name under type: a heap string of nlen + 1 bytes. */
static char *name_of(char type, const char *name, size_t nlen)
{
	char *k = xmalloc(nlen + 2);
	k[0] = type;
	memcpy(k + 1, name, nlen);
	k[nlen + 1] = '\0';
	return k;
}

/* val NULL: a delete. */
int meta_raw_put(char type, const char *name, size_t nlen, const char *val, bool sync)
{
	char *k;
	int rc;
	if (!db)
		return 0;
	k = name_of(type, name, nlen);
	rc = index_write(db, k, nlen + 1, val, val ? strlen(val) : 0, sync);
	free(k);
	return rc;
}

char *meta_raw_get(char type, const char *name, size_t nlen)
{
	char *k, *v;
	size_t vlen;
	if (!db)
		return NULL;
	k = name_of(type, name, nlen);
	v = index_get(db, k, nlen + 1, &vlen);
	free(k);
	return v;
}

int meta_raw_delete(char type, const char *name, size_t nlen)
{
	return meta_raw_put(type, name, nlen, NULL, true);
}

void meta_batch_put(struct index_batch *b, const char *key, size_t klen, const struct meta *m)
{
	char v[128], *k = name_of('m', key, klen);
	int n = snprintf(v, sizeof(v), "%" PRIu64 " %" PRId64 " %s", m->size, m->mtime, m->etag);
	index_batch_put(b, k, klen + 1, v, (size_t)n);
	free(k);
}

int meta_write(struct index_batch *b)
{
	if (db)
		return index_batch_write(db, b);
	index_batch_free(b);
	return 0;
}

bool meta_writable(char *why, size_t n)
{
	return !db || index_writable(db, why, n);
}

uint64_t meta_write_errors(void)
{
	return db ? index_write_errors(db) : 0;
}

int meta_put(const char *key, size_t klen, const struct meta *m)
{
	struct index_batch *b = index_batch_new();
	meta_batch_put(b, key, klen, m);
	return meta_write(b);
}

static bool parse(const char *v, size_t vlen, struct meta *m)
{
	char tmp[128];
	int n = 0;
	memset(m, 0, sizeof(*m));
	if (vlen >= sizeof(tmp))
		return false;
	memcpy(tmp, v, vlen);
	tmp[vlen] = '\0';
	if (sscanf(tmp, "%" SCNu64 " %" SCNd64 " %n", &m->size, &m->mtime, &n) < 2 || !n)
		return false;
	snprintf(m->etag, sizeof(m->etag), "%s", tmp + n);
	return true;
}

bool meta_get(const char *key, size_t klen, struct meta *m)
{
	char *v = meta_raw_get('m', key, klen);
	bool ok = v && parse(v, strlen(v), m);
	if (!ok)
		memset(m, 0, sizeof(*m));
	free(v);
	return ok;
}

struct meta_cursor {
	struct index_iter *it;
	char *want;
	size_t cap;
};

struct meta_cursor *meta_cursor_new(void)
{
	return db ? xcalloc(1, sizeof(struct meta_cursor)) : NULL;
}

bool meta_cursor_get(struct meta_cursor *c, const char *key, size_t klen, struct meta *m)
{
	size_t cl = 0, vl;
	const char *ck = NULL, *v;
	memset(m, 0, sizeof(*m));
	if (!c)
		return false;
	if (c->cap < klen + 1) {
		c->cap = klen + 64;
		c->want = xrealloc(c->want, c->cap);
	}
	c->want[0] = 'm';
	memcpy(c->want + 1, key, klen);
	/* Asked in ascending order: a step or two forward usually lands on
	 * the entry; otherwise one seek. */
	for (int step = 0; c->it && index_iter_valid(c->it); step++) {
		const char *k = index_iter_key(c->it, &cl);
		if (bytes_cmp(k, cl, c->want, klen + 1) >= 0) {
			ck = k;
			break;
		}
		if (step == 4)
			break;
		index_iter_next(c->it);
	}
	if (!ck) {
		index_iter_free(c->it);
		c->it = index_iter_new(db, c->want, klen + 1);
		if (!index_iter_valid(c->it))
			return false;
		ck = index_iter_key(c->it, &cl);
	}
	if (bytes_cmp(ck, cl, c->want, klen + 1))
		return false;
	v = index_iter_value(c->it, &vl);
	return parse(v, vl, m);
}

void meta_cursor_free(struct meta_cursor *c)
{
	if (!c)
		return;
	index_iter_free(c->it);
	free(c->want);
	free(c);
}
