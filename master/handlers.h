/* handlers.h -- the master's answers, as plain functions of a decoded
 * request: no sockets, no libmicrohttpd, so they can be tested alone.
 * Each fills a struct answer; the HTTP front sends it. */
#ifndef MKV_HANDLERS_H
#define MKV_HANDLERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "../common/placement.h"
#include "../common/util.h"
#include "../common/volsign.h"
#include "store.h"

struct answer {
	int status;
	const char *ctype;        /* body's Content-Type; NULL = text/plain */
	struct buf body;
	char location[LOC_MAX + PATH_MAX_LEN + 16 + VOLSIGN_EXTRA];
	char md5[33];             /* Content-Md5, "" = none */
	char *volumes;            /* Key-Volumes (heap), or NULL */
	const char *balance;      /* Key-Balance, or NULL */
	/* A body too long to hold (a listing's): answer_read gives its
	 * stream_len bytes (-1: not known ahead) piece by piece. */
	struct list_stream *stream;
	int64_t stream_len;
};

/* Status plus, for an error (300 or more), a one-line text/plain reason. */
void answer_error(struct answer *a, int status, const char *why);
void answer_free(struct answer *a);

/* GET/HEAD (head) of a live key: 302 to a live replica (random), 404,
 * 503; with -volumesecret the Location is signed for that method, valid
 * -linkttl.  raw_path is the request path as sent (for -fallback). */
void handle_get(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		const char *raw_path, bool head, struct answer *a);
/* RELINK: an unlinked key live again (204; 204 when already live; 404
 * when absent; 409 when the record has no HASH -- an interrupted PUT's --
 * and a replica is missing). */
void handle_relink(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		   struct answer *a);
/* ?list / ?unlinked on prefix; query is the raw query string.  A short
 * listing goes in body; a longer one is streamed from the index in
 * bounded memory, except to head (HEAD), which only gets its length.
 * ?list&locations adds "locations" (each key's replica URLs on volumes
 * that are up, signed for GET with -volumesecret for -linkttl or &ttl=D
 * up to -maxlinkttl) and with &md5s "md5s" (each key's HASH, "" when
 * none): arrays parallel to keys (docs/protocol.md §4). */
void handle_list(const struct config *cfg, struct index *idx, const char *prefix, size_t plen,
		 const char *query, bool head, struct answer *a);
/* front_stream's reader of an answer with a stream (cls: the answer). */
ssize_t answer_read(void *cls, uint64_t pos, char *out, size_t max);
/* Append s[0..n) to b as a JSON string (quotes included), byte for byte
 * as Go's encoding/json writes it: \n \r \t short, other controls and
 * < > & as \u00XX, U+2028/U+2029 escaped, each byte of invalid UTF-8 as
 * \ufffd. */
void json_append_string(struct buf *b, const char *s, size_t n);

#endif
