/* record.h -- the index value format, bit-exact with minikeyvalue (docs/protocol.md §3):
 *   ["DELETED"] ["HASH" <32 hex>] loc1,loc2,...
 */
#ifndef MKV_RECORD_H
#define MKV_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#define RECORD_MAX_LOCS 64

struct record {
	bool deleted;
	char hash[33];                  /* "" when unknown */
	int nlocs;
	char *locs[RECORD_MAX_LOCS];    /* point into the parsed buffer */
};

/* Parse val[0..n) in place: val must be writable and have room for a NUL at
 * val[n] (commas become NULs; r->locs point into val).  Returns 0, or -1 if
 * the record is malformed (too many locations). */
int record_parse(char *val, size_t n, struct record *r);

/* Without parsing or copying the encoded record val[0..n): is it marked
 * DELETED (unlinked, or a write in progress)?  Its HASH into hash (false
 * and "" when it has none). */
bool record_deleted(const char *val, size_t n);
bool record_hash(const char *val, size_t n, char hash[33]);

/* Encode into a fresh heap string (caller frees); *len gets its length. */
char *record_encode(const struct record *r, size_t *len);

/* locs joined by ',' into a fresh heap string; caller frees. */
char *record_join_locs(char *const *locs, int n);

/* Is loc one of locs[0..n)?  Do a and b name the same, in the same order? */
bool record_has_loc(char *const *locs, int n, const char *loc);
bool record_same_locs(char *const *a, int na, char *const *b, int nb);

#endif
