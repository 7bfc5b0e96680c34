/* store.h -- the master's store as the layers above it use it: the native
 * HTTP API (server.c, handlers.c), S3 (s3/) and the commands (ops/).  The
 * only header of master/ they include (besides mkv.h, the flags).
 *
 * A key maps to a record in the index (index.h, docs/protocol.md §3) and
 * to attributes and notes in a sidecar (meta.c); its bytes go to the
 * replicas as they arrive (put.c); one write of a key runs at a time (its
 * lock, keylock.c); volumes are up or down as the checkers last saw
 * (health.c).  Results are HTTP statuses with a one-line reason. */
#ifndef MKV_STORE_H
#define MKV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "index.h"
#include "mkv.h"
#include "../common/placement.h"
#include "../common/record.h"

/* The configuration and index the server runs on (set once at start), for
 * the layers that do not carry them. */
void store_init(const struct config *cfg, struct index *idx);
const struct config *store_cfg(void);
struct index *store_index(void);

/* Can the index and the sidecar take writes (index_writable)?  false,
 * with the reason, after one failed until it is sound again. */
bool store_writable(char *why, size_t n);

/* ---- locks and volumes ---- */

/* Take key's lock (one write of a key at a time); false if someone holds it. */
bool keylock_try(const char *key, size_t klen);
bool keylock_held(const char *key, size_t klen);
void keylock_release(const char *key, size_t klen);
/* Is location ("host:port" or "host:port/svNN") up?  Locations of volumes
 * not in -volumes are assumed up (nothing is known of them). */
bool health_up(const char *loc, size_t len);

/* ---- which disk a location is (volid.c) ----
 * "localhost:3001" and "127.0.0.1:3001" are one disk: each volume
 * directory (root or subvolume) holds an id in its marker ".mkv" (written
 * when it has none).  A copy is deleted for another only when their ids
 * differ; an id that cannot be read keeps the copy (said).  These block
 * on the volume (once a directory: cached): never on an event loop. */
#define VOL_ID_LEN 32
/* loc's id into id[VOL_ID_LEN + 1]: 0, or -1 (logged).  fresh: ask the
 * volume even when known (or failed a moment ago). */
int vol_id(const char *loc, bool fresh, char *id);
/* Are locations a and b one directory (said once when spelled apart)?
 * 1 yes, 0 no, -1 cannot tell. */
int vol_same(const char *a, const char *b);
/* Is loc one of locs[0..n) (1), one of a -volumes volume's directories
 * (vol_in: 1), however spelled?  Else -1 when one cannot tell, else 0. */
int vol_among(char *const *locs, int n, const char *loc);
int vol_in(const struct config *cfg, const char *loc);
/* Does key's record in idx name loc, however spelled (vol_among)?  0 too
 * when there is no record; -1 when malformed or one cannot tell. */
int vol_named(struct index *idx, const char *key, size_t klen, const char *loc);
/* -1 (logged, naming both) when two -volumes names are one volume, by
 * the ids read now (ask) or known (the master's: its first health round). */
int vol_check_names(const struct config *cfg, bool ask);

/* ---- reading ---- */

/* key's live record into r (*v holds its storage; caller frees it); false
 * when the key is absent, unlinked, malformed or names no volume. */
bool store_live(struct index *idx, const char *key, size_t klen, char **v, struct record *r);
/* The URLs of key's replicas on volumes that are up, in the record's order
 * (heap strings: store_urls_free), and its HASH.  Returns how many (0:
 * none is up), or -1 when the key is not live. */
struct store_urls {
	int n;
	char *url[RECORD_MAX_LOCS];
	char hash[33];
};
int store_urls(struct index *idx, const char *key, size_t klen, struct store_urls *u);
void store_urls_free(struct store_urls *u);

/* At a start (the master's, an offline rebalance's, a rebuild's): delete
 * the copies a killed move or REPLACE left behind that the index no
 * longer names (noted in the sidecar, move.c).  How many could not be
 * deleted (kept noted, for the next start). */
int move_sweep_notes(struct index *idx);
/* At a start (the master's, an offline rebalance's): settle (or unlink)
 * every key a crash cut short mid-REPLACE (put.c). */
void put_sweep_replaces(const struct config *cfg, struct index *idx);

/* ---- attributes and notes: what S3 keeps besides the record ----
 *
 * A second LevelDB beside the index (<db>/mkv-meta/; the format is in
 * docs/s3.md), so that minikeyvalue and the tools see only records: 'm'
 * attributes of a key, 'u' uploads, 'b' buckets, 'r' REPLACEs in flight.
 * Without meta_open every call is a no-op (get: not found).  Thread-safe. */

#define META_ETAG_MAX 48

struct meta {
	uint64_t size;
	int64_t mtime;                 /* unix seconds */
	char etag[META_ETAG_MAX];      /* unquoted; "" = unknown */
};

/* Open <db>/mkv-meta (created if missing).  0, or -1 with a logged reason. */
int meta_open(const char *db);
void meta_close(void);
/* Make every sidecar write so far durable.  0 or -1 (logged). */
int meta_sync(void);
/* put: not synced (a lost entry only shows size 0 until a rebuild). */
int meta_put(const char *key, size_t klen, const struct meta *m);   /* 0, or -1 */
bool meta_writable(char *why, size_t n);
uint64_t meta_write_errors(void);
/* meta_put's entries gathered in b (index_batch_new, a key at most once)
 * and written together by meta_write, which frees b. */
void meta_batch_put(struct index_batch *b, const char *key, size_t klen, const struct meta *m);
int meta_write(struct index_batch *b);    /* 0, or -1 (logged) */

/* A key's attributes; false (and m zeroed but for what is known) when none. */
bool meta_get(const char *key, size_t klen, struct meta *m);
/* meta_get for keys asked in ascending order (a listing): one sidecar
 * iterator walked along instead of a lookup per key.  new: NULL without a
 * sidecar (then get finds nothing). */
struct meta_cursor;
struct meta_cursor *meta_cursor_new(void);
bool meta_cursor_get(struct meta_cursor *c, const char *key, size_t klen, struct meta *m);
void meta_cursor_free(struct meta_cursor *c);

/* Any entry under one type byte (names as raw bytes).  val may be "";
 * NULL deletes the entry. */
int meta_raw_put(char type, const char *name, size_t nlen, const char *val, bool sync);
/* Heap string (caller frees) or NULL. */
char *meta_raw_get(char type, const char *name, size_t nlen);
int meta_raw_delete(char type, const char *name, size_t nlen);   /* 0, -1; 'm' unsynced */

/* The notes of one type, in name order: an index iterator whose keys are
 * the type byte and the name (NULL without a sidecar). */
struct index_iter *meta_notes(char type);

/* ---- writing ---- */

/* The locations a new PUT of key should write: the first -replicas volumes
 * in the key's rendezvous order that are up (write availability).  Returns
 * the count, or -1 with *why when fewer than -replicas are up. */
int store_locations(const struct config *cfg, const char *key, size_t klen, char (*out)[LOC_MAX],
		    const char **why);
/* Start writing key: to the first -replicas volumes of its order that are
 * up, as a REPLACE when replace (a live value stays served until the new
 * one is in) else as a PUT.  The caller holds key's lock and hands it
 * over.  NULL with *why (and the lock released) when too few volumes are
 * up.  clen: the body's length, -1 when unknown; ring: the most body
 * bytes held in memory (0: the default).  wake(arg) is called (from
 * another thread) when ring space freed after put_feed took less than
 * offered, and when the put is over; NULL for a writer that blocks
 * instead (put_feed_all, put_wait). */
struct put;
struct put *store_write(const struct config *cfg, struct index *idx, const char *key,
			size_t klen, bool replace, int64_t clen, void (*wake)(void *), void *arg,
			size_t ring, const char **why);
/* The S3 ETag the metadata keeps instead of the md5 (multipart's
 * "<md5>-N").  Call before put_finish. */
void put_set_etag(struct put *p, const char *etag);
/* md5 of the body in hex; valid once put_result is true. */
const char *put_md5(struct put *p);
/* Offer body bytes; returns how many were taken (fewer when the ring is
 * full: wait for wake, then offer the rest). */
size_t put_feed(struct put *p, const char *data, size_t n);
/* Feed all n bytes, waiting while the ring is full: false when the put
 * ended first (failed or aborted). */
bool put_feed_all(struct put *p, const char *data, size_t n);
/* The body is complete. */
void put_finish(struct put *p);
/* True once the put is over; then *status is 201 or a 5xx with *why. */
bool put_result(struct put *p, int *status, const char **why);
/* put_result, waiting until the put is over. */
void put_wait(struct put *p, int *status, const char **why);
/* The client went away: stop and clean up. */
void put_abort(struct put *p);
/* The front is done with p (the worker may still be cleaning up; the last
 * of the two frees it).  No wake() is called after this returns. */
void put_release(struct put *p);
/* The request is over: put_abort if the client went away mid-body, then
 * put_release. */
void put_done(struct put *p);

/* ---- deleting ---- */

/* DELETE (the bytes and the record), UNLINK (the record only, kept for
 * RELINK), or DELETE ?unlinked (only a key already unlinked).  The caller
 * holds key's lock.  204, or a status with *why (static).  On a thread
 * of no loop: store_delete_start's steps on the volume client's loop of
 * the thread's own (common/vconn.h), waited for. */
enum del_mode { DEL_DELETE, DEL_UNLINK, DEL_UNLINKED };
int store_delete(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		 enum del_mode mode, const char **why);

/* store_delete without blocking the thread's event loop (common/loop.h):
 * 0 when it was started, and done(arg, status, why) is called on the loop
 * once it is over; else the status (with *why) at once, as store_delete's.
 * On a thread without a loop, store_delete. */
int store_delete_start(const struct config *cfg, struct index *idx, const char *key,
		       size_t klen, enum del_mode mode, const char **why,
		       void (*done)(void *arg, int status, const char *why), void *arg);

/* ---- moving (move.c) ----
 * A key moves in the order that survives a crash at any point:
 *   1. copy the blob to every wanted location that the record lacks
 *      (pulled by the new location's mkv-volume from an old one, else
 *      through here: up to 64 KiB read whole and PUT to them all at once,
 *      a larger one streamed volume -> volume; verified against HASH when
 *      known);
 *   2. write the record with the wanted locations (HASH and DELETED kept);
 *   3. delete the copies that are no longer wanted.
 * Killed before 2, the old record still names complete copies; killed
 * after 2, the new one does.  Only an unreferenced old copy can be left. */
/* Move key onto key2volume(cfg) locations (docs/protocol.md §4
 * REBALANCE, and `mkv rebalance`).  Returns 204 (moved, or already in
 * place), 404 (absent, or unlinked without MOVE_UNLINKED), or 500/503
 * with *why a static one-line reason (details are logged); *moved tells
 * whether any blob or record changed.  Thread-safe; the caller
 * serialises writers of the same key (the server holds the key's lock).
 * It blocks: never on an event loop's thread (its small copies and
 * deletes run on a loop of the calling thread's own, common/vconn.h).
 * Old copies are deleted a grace period after the new record is written,
 * in the background, so that a GET redirected to an old copy just before
 * the switch still finds it (MOVE_NOW: at once). */
#define MOVE_UNLINKED 1   /* move unlinked keys' blobs too (not 404) */
#define MOVE_NOW      2   /* delete old copies at once: nobody reads (offline) */
int move_key(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		  int flags, bool *moved, const char **why);

/* Wait (bounded by timeout_ms) until the background deletes queued by
 * move_key and move_delete_later are done; returns how many are still pending.  A server
 * calls it at shutdown (an old copy left behind is only wasted space). */
int move_drain(uint64_t timeout_ms);

/* The copies move_key made in this process: pulled by their volume, and
 * passed through this process (whole, or streamed); and the old copies it
 * kept: on the disk of a new place (another name for it), or on one whose
 * id could not be read (vol_among). */
void move_copies(unsigned long *pulled, unsigned long *streamed, unsigned long *kept);

/* move_key's *why when the record moved but an old copy stayed. */
extern const char move_left_behind[];

#endif
