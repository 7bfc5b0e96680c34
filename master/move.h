/* move.h -- moving one key onto key2volume's locations (docs/protocol.md
 * §4 REBALANCE, and `mkv rebalance`), in the order that survives a crash
 * at any point:
 *   1. copy the blob to every wanted location that the record lacks
 *      (streamed volume -> volume; verified against HASH when known);
 *   2. write the record with the wanted locations (HASH and DELETED kept);
 *   3. delete the copies that are no longer wanted.
 * Killed before 2, the old record still names complete copies; killed
 * after 2, the new one does.  Only an unreferenced old copy can be left. */
#ifndef MKV_MOVE_H
#define MKV_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct index;

/* Move key onto key2volume(cfg) locations (docs/protocol.md §4
 * REBALANCE, and `mkv rebalance`).  Returns 204 (moved, or already in
 * place), 404 (absent, or unlinked without MOVE_UNLINKED), or 500/503
 * with *why a static one-line reason (details are logged); *moved (may be
 * NULL) tells whether any blob or record changed.  Thread-safe; the caller
 * serialises writers of the same key (the server holds the key's lock).
 * Old copies are deleted a grace period after the new record is written,
 * in the background, so that a GET redirected to an old copy just before
 * the switch still finds it (MOVE_NOW: at once). */
#define MOVE_UNLINKED 1   /* move unlinked keys' blobs too (not 404) */
#define MOVE_NOW      2   /* delete old copies at once: nobody reads (offline) */
int move_key(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		  int flags, bool *moved, const char **why);

/* Delete the copy of key at loc (its path on a volume: placement_path) a
 * grace period from now, in the background, unless key's record names loc
 * again by then (asked under the key's lock): what REBALANCE and REPLACE
 * do with the copies they move away from, so that a GET redirected there
 * just before the switch still finds the bytes. */
void move_delete_later(struct index *idx, const char *key, size_t klen, const char *loc,
		      const char *path);

/* Wait (bounded by timeout_ms) until the background deletes queued by
 * move_key and move_delete_later are done; returns how many are still pending.  A server
 * calls it at shutdown (an old copy left behind is only wasted space). */
int move_drain(uint64_t timeout_ms);

/* move_key's *why when the record moved but an old copy stayed. */
extern const char move_left_behind[];

#endif
