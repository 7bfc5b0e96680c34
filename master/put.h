/* put.h -- a streaming PUT: the body goes to every replica in parallel as
 * it arrives, through the volume client's stream (common/httpc.h), so the
 * master's memory does not depend on the value's size.  A body of up to
 * 64 KiB with a known length is taken whole first; its worker starts at
 * put_finish.
 *
 * Write order (what makes a crash safe):
 *   1. the record, marked DELETED, with the chosen locations -- a crash
 *      from here on leaves a findable record (?unlinked), never a visible
 *      half-written key;
 *   2. the bytes, to all replicas at once;
 *   3. the live record, with HASH;
 *   4. the S3 metadata (size, mtime, ETag: meta.h), not synced.
 * If any replica fails, what was written is deleted (best effort) and the
 * DELETED record with it -- unless a removal failed, then it stays so the
 * orphan can be found.
 *
 * Threads: put_feed/put_finish/put_abort/put_release are called from the
 * HTTP front (one connection, one thread at a time); the transfers run on
 * a worker thread of the put's own.  wake(arg) is called from the worker
 * when the front should try again: ring space freed after put_feed took
 * less than offered, or the put is done.  wake runs with a lock of the
 * put held, so it must not call back into put_*; it is never called once
 * put_release has returned. */
#ifndef MKV_PUT_H
#define MKV_PUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "store.h"

struct put;

/* Start writing key to locs[0..nlocs) (copied).  The caller holds key's
 * keylock and hands it over: the put releases it once all is written or
 * cleaned up, before the result is known to the front.  clen is the body's length,
 * or -1 when unknown (chunked).  Never fails: errors surface in put_result. */
struct put *put_start(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		      char *const *locs, int nlocs, int64_t clen, void (*wake)(void *), void *arg);
/* REPLACE: like put_start, but a live record stays live (and served)
 * while the new bytes go to every replica; then the record names the new
 * locations and HASH, and old copies elsewhere are removed.  A reader gets
 * the old bytes or the new (each volume renames the new file into place).
 * A failure leaves:
 *   - no replica took the new bytes: the old record, unchanged;
 *   - some did: the record names only those (new HASH, fewer replicas,
 *     Key-Balance unbalanced; the other copies are deleted), and the 5xx
 *     says so: the new value is visible, never a mix of copies;
 * a crash mid-REPLACE: a marker in the sidecar (meta.h) makes the next
 * master start settle the key (put_settle_replace, logged), so differing
 * copies are never served: the record names the copies that hold the old
 * value, or when none does the new one; only when no copy can be read is
 * the key unlinked, its bytes kept for RELINK or DELETE.  Without a live record
 * it is a plain put_start.  ring: the most body bytes held in memory (0:
 * put_start's 4 MiB; S3 clients send many parts at once, each gets less). */
struct put *put_start_replace(const struct config *cfg, struct index *idx, const char *key,
			      size_t klen, char *const *locs, int nlocs, int64_t clen,
			      void (*wake)(void *), void *arg, size_t ring);
/* At start, for a key whose REPLACE a crash cut short, r its live record
 * and to the locations the REPLACE wrote to (its marker's value, joined
 * by ','; "" when unknown): read every copy r names; the record (synced)
 * then names those holding the old value (HASH), or when none does, those
 * holding the value most of them hold, with its HASH (and S3 metadata).
 * The copies that differ, at those places and at the REPLACE's others,
 * are deleted (gc's when that fails).  Returns 0, or -1 when no copy r
 * names could be read or the index write failed (the caller unlinks). */
struct record;
int put_settle_replace(const struct config *cfg, struct index *idx, const char *key,
		       size_t klen, const struct record *r, const char *to);

/* At start: every key whose REPLACE a crash cut short is settled in idx
 * (put_settle_replace: its copies may differ), or unlinked when none of
 * its copies can be read, logged, and its marker removed. */
void put_sweep_replaces(const struct config *cfg, struct index *idx);

#endif
