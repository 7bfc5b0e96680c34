/* placement.h -- keys, and where their bytes live.  Bit-exact with
 * minikeyvalue (docs/protocol.md §2): changing any of this strands existing data.
 *
 * A key is arbitrary bytes (usually starting with '/').  Nothing here
 * allocates except where noted. */
#ifndef MKV_PLACEMENT_H
#define MKV_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include "md5.h"

#define KEY_MAX 189          /* longest key whose base64 fits one file name */
#define PATH_MAX_LEN 280     /* "/xx/yy/" + base64(KEY_MAX) + NUL, rounded up */
#define LOC_MAX 512          /* longest "host:port/svNN" we accept */

/* Percent-decode the raw request path src[0..n) into out (room for n+1
 * bytes, NUL-terminated; *outlen excludes the NUL) and check it is a
 * storable key.  Returns 0, or an HTTP status (400 or 414) with *why set to
 * a static one-line reason. */
int key_decode(const char *src, size_t n, char *out, size_t *outlen, const char **why);

/* Percent-decode src[0..n) into out (n+1 bytes, NUL-terminated; *outlen
 * excludes the NUL; NUL bytes decoded are kept), '+' as a space when
 * plus_space.  -1 on bad %XX. */
int pct_decode(const char *src, size_t n, char *out, size_t *outlen, int plus_space);
/* Percent-decode a path without checking it is a storable key (list
 * prefixes); -1 on bad %XX or a NUL.  out needs n+1 bytes. */
int path_decode(const char *src, size_t n, char *out, size_t *outlen);

/* Percent-decode a query value (no validation beyond %XX; '+' means space
 * as in forms).  out needs n+1 bytes.  Returns -1 on bad %XX. */
int query_decode(const char *src, size_t n, char *out, size_t *outlen);

/* "/%02x/%02x/<base64 std, padded>" of the key, NUL-terminated into out
 * (PATH_MAX_LEN bytes; keys longer than KEY_MAX are truncated -- callers
 * validate first); its length. */
size_t placement_path(const char *key, size_t keylen, char *out);
/* The key a blob's file name (the base64 after "/xx/yy/", n bytes) stands
 * for, into out (PATH_MAX_LEN bytes): its length, or -1 when the name is
 * not padded standard base64 of 2 to KEY_MAX bytes.  Whether the name
 * sits where placement_path puts that key is the caller's check. */
long placement_name_key(const char *name, size_t n, char *out);

/* The first `replicas` locations for key among volumes[0..nvol) in
 * rendezvous order (md5(key||volume), highest first, stable), each as
 * "volume" or "volume/svNN".  out[i] gets LOC_MAX bytes each.  Returns the
 * number written: min(replicas, nvol).  With replicas == nvol this is the
 * key's whole preference order. */
int placement_volumes(const char *key, size_t keylen, char *const *volumes, int nvol,
		      int replicas, int subvolumes, char (*out)[LOC_MAX]);

#endif
