/* keys.h -- the master's keys (-keys FILE, docs/security.md): who may
 * read, list, write, delete and administer which key prefixes.  The
 * signatures that say who a request comes from are sigv4.h's.
 *
 * The file: one key a line, fields split by blanks; a field starting with
 * '#' starts a comment to the line's end ("/data/#tmp/" is a prefix):
 *     ID SECRET PERMS PREFIX...      (PERMS: read,list,write,delete,admin)
 *     anonymous PERMS PREFIX...      (what unsigned requests may do)
 * Off (no -keys) nothing here runs: keys_current() is NULL. */
#ifndef MKV_KEYS_H
#define MKV_KEYS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

enum {
	PERM_READ = 1,    /* GET, HEAD, the 302 */
	PERM_LIST = 2,    /* ?list, ?unlinked, ListObjects, ListBuckets */
	PERM_WRITE = 4,   /* PUT, REPLACE, multipart, copy */
	PERM_DELETE = 8,  /* DELETE, UNLINK, RELINK, DeleteObjects */
	PERM_ADMIN = 16,  /* REBALANCE, DELETE ?unlinked, the online ops */
};

#define KEY_SECRET_MIN 16

struct key {
	char *id, *secret;       /* secret NULL: the anonymous line */
	unsigned perms;          /* PERM_* */
	char **prefixes;         /* each starts with '/' */
	int nprefix;
};

/* A parsed file; shared by the requests that hold it (refs). */
struct keyring {
	atomic_int refs;
	struct key *keys;
	int n;
	const struct key *anonymous;   /* or NULL: unsigned requests may do nothing */
};

/* Parse text (the file named name, for the messages): a ring with one
 * ref, or NULL with *why ("FILE:LINE: reason", heap) when any line is
 * bad -- an unknown permission, a secret shorter than KEY_SECRET_MIN
 * bytes, a prefix not starting with '/', an id given twice -- or the
 * last line has no newline (a file read while being written). */
struct keyring *keyring_parse(const char *text, const char *name, char **why);
/* Drop one ref; the last frees the ring.  NULL is fine. */
void keyring_put(struct keyring *k);
/* The key with that id (not the anonymous line), or NULL. */
const struct key *keyring_find(const struct keyring *k, const char *id, size_t n);

/* May k do perm on key (or listing prefix) path[0..n): path starts with
 * one of its prefixes?  k NULL: no. */
bool key_allows(const struct key *k, unsigned perm, const char *path, size_t n);
/* Does k have perm somewhere at or under path[0..n), or over it (one of
 * its prefixes starts with path, or path with it)?  For a bucket's own
 * requests (HeadBucket) and ListBuckets' filter. */
bool key_touches(const struct key *k, unsigned perm, const char *path, size_t n);

/* ---- the running keys (the master's) ---- */
/* Load path as the keys in force: 0, or -1 with the reason logged. */
int keys_start(const char *path);
/* SIGHUP: load the file again; a bad file is logged and the old keys stay. */
void keys_reload(void);
/* The keys in force, one ref taken (keyring_put it), or NULL when -keys
 * is off: then nothing is checked. */
struct keyring *keys_current(void);
/* At exit. */
void keys_stop(void);

#endif
