/* meta.c -- see meta.h. */
#include "meta.h"
#include "index.h"
#include "../common/record.h"
#include "../common/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static struct index *db;

int meta_open(const char *dir)
{
	char *path = xasprintf("%s/mkv-meta", dir), *why = NULL;
	mkdir(dir, 0755); /* the index may not exist yet either */
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

struct index *meta_index(void)
{
	return db;
}

static char *name_of(char type, const char *name, size_t nlen)
{
	char *k = xmalloc(nlen + 2);
	k[0] = type;
	memcpy(k + 1, name, nlen);
	k[nlen + 1] = '\0';
	return k;
}

int meta_raw_put(char type, const char *name, size_t nlen, const char *val, bool sync)
{
	char *k;
	int rc;
	if (!db)
		return 0;
	k = name_of(type, name, nlen);
	rc = sync ? index_put(db, k, nlen + 1, val, strlen(val))
		  : index_put_nosync(db, k, nlen + 1, val, strlen(val));
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

void meta_raw_delete(char type, const char *name, size_t nlen)
{
	char *k;
	if (!db)
		return;
	k = name_of(type, name, nlen);
	index_delete(db, k, nlen + 1);
	free(k);
}

void meta_put(const char *key, size_t klen, const struct meta *m)
{
	char v[128];
	snprintf(v, sizeof(v), "%" PRIu64 " %" PRId64 " %s", m->size, m->mtime, m->etag);
	meta_raw_put('m', key, klen, v, false);
}

bool meta_get(const char *key, size_t klen, struct meta *m)
{
	char *v = meta_raw_get('m', key, klen);
	int n = 0;
	memset(m, 0, sizeof(*m));
	if (!v)
		return false;
	if (sscanf(v, "%" SCNu64 " %" SCNd64 " %n", &m->size, &m->mtime, &n) < 2 || !n) {
		free(v);
		return false;
	}
	snprintf(m->etag, sizeof(m->etag), "%s", v + n);
	free(v);
	return true;
}

void meta_delete(const char *key, size_t klen)
{
	char *k;
	if (!db)
		return;
	k = name_of('m', key, klen);
	index_delete_nosync(db, k, klen + 1); /* lost alone, it leaves a stale entry no listing reads */
	free(k);
}

void meta_sweep_replaces(struct index *idx)
{
	struct index_iter *it;
	if (!db)
		return;
	it = index_iter_new(db, "r", 1);
	for (; index_iter_valid(it); index_iter_next(it)) {
		size_t klen, vlen;
		const char *k = index_iter_key(it, &klen);
		char *v;
		struct record r;
		if (!klen || k[0] != 'r')
			break;
		v = index_get(idx, k + 1, klen - 1, &vlen);
		if (v && record_parse(v, vlen, &r) == 0 && !r.deleted) {
			size_t elen;
			char *enc;
			r.deleted = true;
			enc = record_encode(&r, &elen);
			if (index_put(idx, k + 1, klen - 1, enc, elen) == 0)
				log_msg("REPLACE of %.*s was cut short by a restart: its copies may "
					"differ, so it is unlinked (RELINK after verify, or DELETE)",
					(int)klen - 1, k + 1);
			free(enc);
		}
		free(v);
		index_delete(db, k, klen);
	}
	index_iter_free(it);
}
