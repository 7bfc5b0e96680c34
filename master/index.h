/* index.h -- the key -> record index, on LevelDB.  Only index.c includes
 * leveldb/c.h.  Reads and writes are thread-safe (LevelDB's own locking). */
#ifndef MKV_INDEX_H
#define MKV_INDEX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct index;
struct index_iter;

/* The block cache all indexes of the process share (-blockcache), set
 * before the first index_open: bytes of uncompressed blocks kept.  64 MiB
 * unless set. */
void index_cache_size(size_t bytes);

/* Open (creating if missing) the index at path.  NULL on failure, with a
 * one-line reason in *why (heap string, caller frees) -- e.g. another
 * process holds the LOCK. */
struct index *index_open(const char *path, char **why);
void index_close(struct index *idx);

/* The value for key as a heap string with one spare byte past *vlen (so
 * record_parse can NUL-terminate in place); caller frees.  NULL when
 * absent (or on a read error, which is logged). */
char *index_get(struct index *idx, const char *key, size_t klen, size_t *vlen);
/* A put of val, or a delete of key when val is NULL: 0 or -1 (logged).
 * sync: durable before it returns.  Else not waiting for the disk: for a
 * write that a later synced write will cover (LevelDB's log is
 * sequential, so syncing a later write makes every earlier one durable
 * too) and that is harmless to lose alone. */
int index_write(struct index *idx, const char *key, size_t klen, const char *val, size_t vlen,
		bool sync);

/* Puts written together as one LevelDB write, not synced (as
 * index_write unsynced), their count kept as a put's: a key at most once in
 * a batch.  index_batch_write writes and frees b: 0 or -1 (logged, none
 * of it written). */
struct index_batch;
struct index_batch *index_batch_new(void);
void index_batch_put(struct index_batch *b, const char *key, size_t klen, const char *val,
		     size_t vlen);
int index_batch_write(struct index *idx, struct index_batch *b);
void index_batch_free(struct index_batch *b);   /* unwritten; NULL is fine */

/* The keys in the index (live and unlinked) into *n: exact when true.
 * Kept as writes go (each reads the key first: a put of a new key adds
 * one, a delete of a key there takes one) and, when mkv closes the
 * index, in DIR/mkv-keys, valid only as long as no other program opened
 * it since.  Unknown (false) until index_count walked it, after a
 * crash, or after the Go original or another tool wrote the index. */
bool index_keys(struct index *idx, uint64_t *n);
/* When the count is unknown, walk the index once to learn it (writes may
 * go on meanwhile: they are counted on top).  0, or -1 when *stop turned
 * true first.  At 100M keys the walk takes about a minute and a core. */
int index_count(struct index *idx, const atomic_bool *stop);

/* After a write failed (ENOSPC, EIO, a failed sync) the index takes no
 * write until LevelDB starts a fresh log (tried at most once a second,
 * when the disk has room): false, with the one-line reason in why.
 * Reads go on. */
bool index_writable(struct index *idx, char *why, size_t n);
/* Writes that failed since the open (the metric). */
uint64_t index_write_errors(struct index *idx);

/* Make every write so far durable (one fsync for any number of
 * unsynced index_write).  0 or -1 (logged). */
int index_sync(struct index *idx);

/* The writes of the event loops, which must not wait on the disk: queued
 * to one committer thread that writes everything waiting as one batch,
 * synced when any of it asks (group commit).  A put of val (NULL: a
 * delete of key), in the order queued, after every write queued before.
 * done (may be NULL) is called on the committer thread once the batch
 * holding it is written (and durable, with sync): rc 0, or -1 (logged). */
void index_write_async(struct index *idx, const char *key, size_t klen, const char *val,
		       size_t vlen, bool sync, void (*done)(void *arg, int rc), void *arg);

/* Iterate keys >= start in byte order.  The key/value pointers stay valid
 * until the next index_iter_next/free. */
struct index_iter *index_iter_new(struct index *idx, const char *start, size_t slen);
/* Move it to the first key >= key, in the view it had when made. */
void index_iter_seek(struct index_iter *it, const char *key, size_t len);
bool index_iter_valid(struct index_iter *it);
void index_iter_next(struct index_iter *it);
const char *index_iter_key(struct index_iter *it, size_t *len);
const char *index_iter_value(struct index_iter *it, size_t *len);
void index_iter_free(struct index_iter *it);    /* NULL is fine */

#endif
