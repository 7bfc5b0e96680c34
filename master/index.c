/* index.c -- see index.h. */
#include "index.h"
#include "../common/util.h"

#include <leveldb/c.h>
#include <stdlib.h>
#include <string.h>

struct index {
	leveldb_t *db;
	leveldb_options_t *opts;
	leveldb_readoptions_t *ropts;
	leveldb_writeoptions_t *wopts;
	leveldb_writeoptions_t *wopts_nosync;
	leveldb_cache_t *cache;
};

struct index_iter {
	leveldb_iterator_t *it;
};

struct index *index_open(const char *path, char **why)
{
	struct index *idx = xcalloc(1, sizeof(*idx));
	char *err = NULL;
	idx->opts = leveldb_options_create();
	idx->cache = leveldb_cache_create_lru(64 << 20);
	leveldb_options_set_create_if_missing(idx->opts, 1);
	leveldb_options_set_cache(idx->opts, idx->cache);
	idx->db = leveldb_open(idx->opts, path, &err);
	if (err) {
		if (strstr(err, "lock") || strstr(err, "LOCK"))
			*why = xasprintf("index %s is in use by another process (%s)", path, err);
		else
			*why = xasprintf("cannot open index %s: %s", path, err);
		leveldb_free(err);
		leveldb_options_destroy(idx->opts);
		leveldb_cache_destroy(idx->cache);
		free(idx);
		return NULL;
	}
	idx->ropts = leveldb_readoptions_create();
	idx->wopts = leveldb_writeoptions_create();
	leveldb_writeoptions_set_sync(idx->wopts, 1);
	idx->wopts_nosync = leveldb_writeoptions_create();
	return idx;
}

void index_close(struct index *idx)
{
	if (!idx)
		return;
	leveldb_close(idx->db);
	leveldb_options_destroy(idx->opts);
	leveldb_cache_destroy(idx->cache);
	leveldb_readoptions_destroy(idx->ropts);
	leveldb_writeoptions_destroy(idx->wopts);
	leveldb_writeoptions_destroy(idx->wopts_nosync);
	free(idx);
}

char *index_get(struct index *idx, const char *key, size_t klen, size_t *vlen)
{
	char *err = NULL, *v, *out;
	v = leveldb_get(idx->db, idx->ropts, key, klen, vlen, &err);
	if (err) {
		log_msg("leveldb_get failed: %s", err);
		leveldb_free(err);
		return NULL;
	}
	if (!v)
		return NULL;
	out = xmalloc(*vlen + 1);
	memcpy(out, v, *vlen);
	out[*vlen] = '\0';
	leveldb_free(v);
	return out;
}

static int put(struct index *idx, const leveldb_writeoptions_t *o, const char *key, size_t klen,
	       const char *val, size_t vlen)
{
	char *err = NULL;
	leveldb_put(idx->db, o, key, klen, val, vlen, &err);
	if (err) {
		log_msg("leveldb_put failed: %s", err);
		leveldb_free(err);
		return -1;
	}
	return 0;
}

int index_put(struct index *idx, const char *key, size_t klen, const char *val, size_t vlen)
{
	return put(idx, idx->wopts, key, klen, val, vlen);
}

int index_put_nosync(struct index *idx, const char *key, size_t klen, const char *val,
		     size_t vlen)
{
	return put(idx, idx->wopts_nosync, key, klen, val, vlen);
}

int index_sync(struct index *idx)
{
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	char *err = NULL;
	leveldb_write(idx->db, idx->wopts, b, &err); /* an empty synced write syncs the log */
	leveldb_writebatch_destroy(b);
	if (err) {
		log_msg("leveldb_write (sync) failed: %s", err);
		leveldb_free(err);
		return -1;
	}
	return 0;
}

static int del(struct index *idx, const leveldb_writeoptions_t *o, const char *key, size_t klen)
{
	char *err = NULL;
	leveldb_delete(idx->db, o, key, klen, &err);
	if (err) {
		log_msg("leveldb_delete failed: %s", err);
		leveldb_free(err);
		return -1;
	}
	return 0;
}

int index_delete(struct index *idx, const char *key, size_t klen)
{
	return del(idx, idx->wopts, key, klen);
}

int index_delete_nosync(struct index *idx, const char *key, size_t klen)
{
	return del(idx, idx->wopts_nosync, key, klen);
}

struct index_iter *index_iter_new(struct index *idx, const char *start, size_t slen)
{
	struct index_iter *it = xmalloc(sizeof(*it));
	it->it = leveldb_create_iterator(idx->db, idx->ropts);
	leveldb_iter_seek(it->it, start, slen);
	return it;
}

bool index_iter_valid(struct index_iter *it)
{
	return leveldb_iter_valid(it->it);
}

void index_iter_next(struct index_iter *it)
{
	leveldb_iter_next(it->it);
}

const char *index_iter_key(struct index_iter *it, size_t *len)
{
	return leveldb_iter_key(it->it, len);
}

const char *index_iter_value(struct index_iter *it, size_t *len)
{
	return leveldb_iter_value(it->it, len);
}

void index_iter_free(struct index_iter *it)
{
	leveldb_iter_destroy(it->it);
	free(it);
}
