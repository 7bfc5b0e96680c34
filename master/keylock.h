/* keylock.h -- at most one PUT/DELETE/UNLINK/REBALANCE per key at a time
 * (the loser gets 409).  Thread-safe. */
#ifndef MKV_KEYLOCK_H
#define MKV_KEYLOCK_H

#include <stdbool.h>
#include <stddef.h>

/* Take key's lock; false if someone holds it. */
bool keylock_try(const char *key, size_t klen);
void keylock_release(const char *key, size_t klen);

#endif
