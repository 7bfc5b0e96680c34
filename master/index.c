/* index.c -- see index.h. */
#include "index.h"
#include "../common/util.h"

#include <leveldb/c.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A write queued for the committer. */
struct pending {
	char *key, *val;         /* val NULL: a delete */
	size_t klen, vlen;
	bool sync;
	void (*done)(void *, int);
	void *arg;
	struct pending *next;
};

struct index {
	leveldb_t *db;
	/* the committer (index_write_async), started at its first write */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct pending *head, **tail;
	bool running, stopping;
	pthread_t committer;
	leveldb_options_t *opts;
	leveldb_readoptions_t *ropts;
	leveldb_readoptions_t *scan;  /* iterators: a scan does not fill the block cache */
	leveldb_writeoptions_t *wopts;
	leveldb_writeoptions_t *wopts_nosync;
	leveldb_cache_t *cache;
	_Atomic uint64_t writes;     /* index_writes */
};

/* mkdir -p the parents of path (LevelDB makes only the last directory;
 * goleveldb, and so minikeyvalue, makes them all).  Errors are left for
 * leveldb_open to report. */
static void make_parents(const char *path)
{
	char *p = xstrdup(path);
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	free(p);
}

struct index *index_open(const char *path, char **why)
{
	struct index *idx = xcalloc(1, sizeof(*idx));
	char *err = NULL;
	pthread_mutex_init(&idx->mu, NULL);
	pthread_cond_init(&idx->cv, NULL);
	idx->tail = &idx->head;
	idx->opts = leveldb_options_create();
	idx->cache = leveldb_cache_create_lru(64 << 20);
	idx->ropts = leveldb_readoptions_create();
	idx->scan = leveldb_readoptions_create();
	leveldb_readoptions_set_fill_cache(idx->scan, 0);
	idx->wopts = leveldb_writeoptions_create();
	idx->wopts_nosync = leveldb_writeoptions_create();
	leveldb_options_set_create_if_missing(idx->opts, 1);
	leveldb_options_set_cache(idx->opts, idx->cache);
	leveldb_writeoptions_set_sync(idx->wopts, 1);
	make_parents(path);
	idx->db = leveldb_open(idx->opts, path, &err);
	if (!err)
		return idx;
	/* another process's flock (EAGAIN), or this one's */
	if (strstr(err, "lock") && (strstr(err, "temporarily unavailable") ||
				    strstr(err, "already held")))
		*why = xasprintf("index %s is in use by another process (%s)", path, err);
	else
		*why = xasprintf("cannot open index %s: %s", path, err);
	leveldb_free(err);
	index_close(idx);
	return NULL;
}

void index_close(struct index *idx)
{
	if (!idx)
		return;
	if (idx->running) {   /* what is queued is written first */
		pthread_mutex_lock(&idx->mu);
		idx->stopping = true;
		pthread_cond_signal(&idx->cv);
		pthread_mutex_unlock(&idx->mu);
		pthread_join(idx->committer, NULL);
	}
	pthread_mutex_destroy(&idx->mu);
	pthread_cond_destroy(&idx->cv);
	/* Leave no write only in the log: goleveldb (the Go original, an
	 * operator swapping back) skips log batches numbered below what the
	 * MANIFEST records, which C++ LevelDB advances at each compaction
	 * while its log still holds newer writes.  A compaction of a range
	 * holding no key flushes the memtable into a table, and nothing else. */
	if (idx->db)
		leveldb_compact_range(idx->db, "", 0, "", 0);
	if (idx->db)
		leveldb_close(idx->db);
	leveldb_options_destroy(idx->opts);
	leveldb_cache_destroy(idx->cache);
	leveldb_readoptions_destroy(idx->ropts);
	leveldb_readoptions_destroy(idx->scan);
	leveldb_writeoptions_destroy(idx->wopts);
	leveldb_writeoptions_destroy(idx->wopts_nosync);
	free(idx);
}

/* LevelDB's error, if any, logged and freed: -1, else 0. */
static int failed(const char *call, char *err)
{
	if (!err)
		return 0;
	log_msg("%s failed: %s", call, err);
	leveldb_free(err);
	return -1;
}

char *index_get(struct index *idx, const char *key, size_t klen, size_t *vlen)
{
	char *err = NULL, *v, *out;
	v = leveldb_get(idx->db, idx->ropts, key, klen, vlen, &err);
	if (failed("leveldb_get", err) || !v)
		return NULL;
	out = xmalloc(*vlen + 1);
	memcpy(out, v, *vlen);
	out[*vlen] = '\0';
	leveldb_free(v);
	return out;
}

/* A put, or a delete when val is NULL. */
static int write1(struct index *idx, bool sync, const char *key, size_t klen, const char *val,
		  size_t vlen)
{
	leveldb_writeoptions_t *o = sync ? idx->wopts : idx->wopts_nosync;
	char *err = NULL;
	if (val)
		leveldb_put(idx->db, o, key, klen, val, vlen, &err);
	else
		leveldb_delete(idx->db, o, key, klen, &err);
	/* after: a walk that began before it, and may have missed it, is then
	 * seen to be stale */
	atomic_fetch_add(&idx->writes, 1);
	return failed(val ? "leveldb_put" : "leveldb_delete", err);
}

int index_put(struct index *idx, const char *key, size_t klen, const char *val, size_t vlen)
{
	return write1(idx, true, key, klen, val, vlen);
}

int index_put_nosync(struct index *idx, const char *key, size_t klen, const char *val,
		     size_t vlen)
{
	return write1(idx, false, key, klen, val, vlen);
}

int index_delete(struct index *idx, const char *key, size_t klen)
{
	return write1(idx, true, key, klen, NULL, 0);
}

int index_delete_nosync(struct index *idx, const char *key, size_t klen)
{
	return write1(idx, false, key, klen, NULL, 0);
}

uint64_t index_writes(struct index *idx)
{
	return atomic_load(&idx->writes);
}

int index_sync(struct index *idx)
{
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	char *err = NULL;
	leveldb_write(idx->db, idx->wopts, b, &err); /* an empty synced write syncs the log */
	leveldb_writebatch_destroy(b);
	return failed("leveldb_write (sync)", err);
}

/* Write the items of list p whose sync is sync, as one batch; then tell
 * each and free it.  Returns the others, in order. */
static struct pending *write_batch(struct index *idx, struct pending *p, bool sync)
{
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	struct pending *rest = NULL, **rt = &rest, *mine = NULL, **mt = &mine, *next;
	char *err = NULL;
	int rc = 0;
	for (; p; p = next) {
		next = p->next;
		p->next = NULL;
		if (p->sync != sync) {
			*rt = p;
			rt = &p->next;
			continue;
		}
		if (p->val)
			leveldb_writebatch_put(b, p->key, p->klen, p->val, p->vlen);
		else
			leveldb_writebatch_delete(b, p->key, p->klen);
		*mt = p;
		mt = &p->next;
	}
	if (mine) {
		leveldb_write(idx->db, sync ? idx->wopts : idx->wopts_nosync, b, &err);
		atomic_fetch_add(&idx->writes, 1);
		rc = failed("leveldb_write (batch)", err);
	}
	leveldb_writebatch_destroy(b);
	for (p = mine; p; p = next) {
		next = p->next;
		if (p->done)
			p->done(p->arg, rc);
		free(p->key);
		free(p->val);
		free(p);
	}
	return rest;
}

/* The committer: everything queued, in two batches: the writes that need
 * no sync first (a PUT's DELETED record, which its bytes wait for), then
 * one synced batch of the others.  Writes of one key never wait in the
 * queue together (each waits for the one before, under the key's lock),
 * so only writes of different keys change order. */
static void *committer(void *arg)
{
	struct index *idx = arg;
	for (;;) {
		struct pending *p;
		pthread_mutex_lock(&idx->mu);
		while (!idx->head && !idx->stopping)
			pthread_cond_wait(&idx->cv, &idx->mu);
		p = idx->head;
		idx->head = NULL;
		idx->tail = &idx->head;
		pthread_mutex_unlock(&idx->mu);
		if (!p)
			return NULL;   /* stopping, and nothing is left */
		write_batch(idx, write_batch(idx, p, false), true);
	}
}

void index_write_async(struct index *idx, const char *key, size_t klen, const char *val,
		       size_t vlen, bool sync, void (*done)(void *arg, int rc), void *arg)
{
	struct pending *p = xcalloc(1, sizeof(*p));
	p->key = xmalloc(klen ? klen : 1);
	memcpy(p->key, key, klen);
	p->klen = klen;
	if (val) {
		p->val = xmalloc(vlen ? vlen : 1);
		memcpy(p->val, val, vlen);
		p->vlen = vlen;
	}
	p->sync = sync;
	p->done = done;
	p->arg = arg;
	pthread_mutex_lock(&idx->mu);
	if (!idx->running) {
		if (pthread_create(&idx->committer, NULL, committer, idx))
			die("pthread_create failed: out of threads");
		idx->running = true;
	}
	*idx->tail = p;
	idx->tail = &p->next;
	pthread_cond_signal(&idx->cv);
	pthread_mutex_unlock(&idx->mu);
}

/* An index_iter is LevelDB's iterator. */
struct index_iter *index_iter_new(struct index *idx, const char *start, size_t slen)
{
	leveldb_iterator_t *it = leveldb_create_iterator(idx->db, idx->scan);
	leveldb_iter_seek(it, start, slen);
	return (struct index_iter *)it;
}

void index_iter_seek(struct index_iter *it, const char *key, size_t len)
{
	leveldb_iter_seek((leveldb_iterator_t *)it, key, len);
}

bool index_iter_valid(struct index_iter *it)
{
	return leveldb_iter_valid((leveldb_iterator_t *)it);
}

void index_iter_next(struct index_iter *it)
{
	leveldb_iter_next((leveldb_iterator_t *)it);
}

const char *index_iter_key(struct index_iter *it, size_t *len)
{
	return leveldb_iter_key((leveldb_iterator_t *)it, len);
}

const char *index_iter_value(struct index_iter *it, size_t *len)
{
	return leveldb_iter_value((leveldb_iterator_t *)it, len);
}

void index_iter_free(struct index_iter *it)
{
	if (it)
		leveldb_iter_destroy((leveldb_iterator_t *)it);
}
