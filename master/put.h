/* put.h -- a write: the body goes to every replica at once as it arrives
 * (common/httpc.h's stream), in the crash-safe order of docs/protocol.md
 * §4 (DELETED record, bytes, live record with HASH, then the sidecar's
 * metadata).  The front calls put_feed...put_release (store.h) on one
 * connection's thread; the transfers run on a worker of the put's own,
 * which calls wake(arg), with the put's lock held, when the front should
 * try again (ring space, or the end); never after put_release. */
#ifndef MKV_PUT_H
#define MKV_PUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "store.h"

struct put;

/* Write key to locs[0..nlocs) (copied): a PUT, or with replace a REPLACE
 * (docs/s3.md): a live record stays served until the new bytes are on
 * every replica; a sidecar marker lets a crash be settled at the next
 * start (without a live record, a PUT).  The caller's keylock is handed
 * over and released once all is written or cleaned up.  clen: the body's
 * length, -1 unknown; ring: the most body bytes held in memory (0: 4 MiB).
 * Errors surface in put_result. */
struct put *put_start(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		      char (*locs)[LOC_MAX], int nlocs, int64_t clen, void (*wake)(void *), void *arg,
		      bool replace, size_t ring);

#endif
