/* meta.h -- what S3 needs to know of a key besides its record: size,
 * modification time and S3 ETag, plus multipart uploads, buckets made by
 * CreateBucket, and REPLACEs in flight.
 *
 * It lives in a second LevelDB, a sidecar in the index directory
 * (<db>/mkv-meta/), never in the index itself: minikeyvalue (and every
 * mkv tool that walks the index) sees exactly the records of
 * docs/protocol.md §3, nothing else.  LevelDB and goleveldb both ignore a directory entry whose name is
 * not one of their own files.  Sidecar keys are one type byte + a name:
 *   'm' key       "<size> <mtime unix s> <etag>"   (etag: md5 hex, or
 *                  "<md5 of part md5s>-N" after a multipart upload)
 *   'u' upload id "<initiated unix s> <key>"
 *   'b' bucket    ""                               (CreateBucket)
 *   'r' key       locs a REPLACE of key is running, writing to locs (put.h)
 * The index stays the truth for which keys exist: a 'm' entry is only
 * read for a key the index calls live; a missing one shows as size 0 and
 * is restored by `mkv rebuild` (volume listings carry size and mtime).
 *
 * Until meta_open succeeds every function is a no-op (get: not found), so
 * code paths that run without a sidecar (unit tests, offline tools) need
 * no checks.  Thread-safe. */
#ifndef MKV_META_H
#define MKV_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define META_ETAG_MAX 48

struct meta {
	uint64_t size;
	int64_t mtime;                 /* unix seconds */
	char etag[META_ETAG_MAX];      /* unquoted; "" = unknown */
};

struct index;

/* Open <db>/mkv-meta (created if missing).  0, or -1 with a logged reason. */
int meta_open(const char *db);
void meta_close(void);
/* The sidecar's own index handle (for iterating 'u' and 'b'), or NULL. */
struct index *meta_index(void);

/* Object metadata.  put: not synced (a lost entry only shows size 0 until
 * a rebuild; a process crash loses nothing, LevelDB has written it). */
void meta_put(const char *key, size_t klen, const struct meta *m);
bool meta_get(const char *key, size_t klen, struct meta *m);
void meta_delete(const char *key, size_t klen);

/* meta_get for keys asked in ascending order (a listing): one sidecar
 * iterator walked along instead of a lookup per key.  new: NULL without a
 * sidecar (then get finds nothing). */
struct meta_cursor;
struct meta_cursor *meta_cursor_new(void);
bool meta_cursor_get(struct meta_cursor *c, const char *key, size_t klen, struct meta *m);
void meta_cursor_free(struct meta_cursor *c);

/* Any entry under one type byte (names as raw bytes).  val may be "". */
int meta_raw_put(char type, const char *name, size_t nlen, const char *val, bool sync);
/* Heap string (caller frees) or NULL. */
char *meta_raw_get(char type, const char *name, size_t nlen);
void meta_raw_delete(char type, const char *name, size_t nlen);

#endif
