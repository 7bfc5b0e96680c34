/* move.h -- the background deletes of copies a move or a REPLACE leaves
 * behind (move.c; moving itself is in store.h). */
#ifndef MKV_MOVE_H
#define MKV_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Delete the copy of key at loc (its path on a volume: placement_path) a
 * grace period from now, in the background, unless key's record names loc
 * again by then (asked under the key's lock): what REBALANCE and REPLACE
 * do with the copies they move away from, so that a GET redirected there
 * just before the switch still finds the bytes. */
void move_delete_later(struct index *idx, const char *key, size_t klen, const char *loc,
		      const char *path);
/* Before a record stops naming the copies at locs[0..n): they are noted
 * in the sidecar until deleted, under the key's lock (move.c). */
void move_note(const char *key, size_t klen, char *const *locs, int n);


#endif
