/* volsign.h -- volume link signatures (-volumesecret): nginx's
 * secure_link, md5 form, so that stock nginx volumes check them too.
 *
 * A signed volume URL carries ?md5=H&expires=T: T in unix seconds, H the
 * md5, base64url without "=", of T, the decoded and normalised path
 * (nginx's $uri), the method and " SECRET", one after the other.  The
 * secret file holds one or two secrets, one a line: the first signs,
 * either verifies (rotation, docs/security.md).
 *
 * The secrets are the process's: volsign_load once before threads start,
 * volsign_reload (SIGHUP) from any thread; the others may be called from
 * any thread at any time.  No secret ever goes to a log line or an error. */
#ifndef MKV_VOLSIGN_H
#define MKV_VOLSIGN_H

#include <stdbool.h>
#include <stddef.h>

#define VOLSIGN_HASH_LEN 22
/* What volsign_url adds at most: "?md5=" 22 "&expires=" 20 digits. */
#define VOLSIGN_EXTRA 64
/* How long a signature the master or a command makes for its own request
 * holds: the request goes out at once, so this is the clocks' leeway. */
#define VOLSIGN_SELF_TTL 30

/* Load the secrets of file.  0, or -1 with a reason (never a secret) in
 * err (n bytes). */
int volsign_load(const char *file, char *err, size_t n);
/* Read the same file again: its secrets take over; when it is unreadable
 * or malformed the old ones stay and the reason is logged.  A no-op when
 * volsign_load never ran. */
void volsign_reload(void);
/* Is a secret set? */
bool volsign_on(void);

/* url (absolute "http://host/path[?query]", or a bare "/path[?query]")
 * signed for method, valid ttl seconds from now, into out (n bytes): its
 * length.  Unchanged when no secret is set; 0 when it does not fit. */
size_t volsign_url(const char *url, const char *method, long ttl, char *out, size_t n);

/* Many URLs signed at once (a listing's): the signing secret and the
 * expiry taken once, the hash per URL.  volsign_batch: false when no
 * secret is set.  volsign_uri: path[0..n) (a URL's path, no query) as
 * nginx's $uri into out (n + 1 bytes), its length.  volsign_batch_hash:
 * the md5= of a URL whose $uri is uri[0..n), for method; its expires= is
 * b->expires. */
struct volsign_batch {
	const void *secrets;
	char expires[24];
	size_t elen;
};
bool volsign_batch(struct volsign_batch *b, long ttl);
size_t volsign_uri(const char *path, size_t n, char *out);
void volsign_batch_hash(const struct volsign_batch *b, const char *uri, size_t n,
			const char *method, char out[VOLSIGN_HASH_LEN + 1]);

/* Check a request: uri its decoded path, md5 and expires the values of
 * those arguments (NULL when absent).  0 when signed with either secret
 * and unexpired, 410 when signed but expired, else 403 (*why: a reason
 * without the secret).  0 when no secret is set. */
int volsign_check(const char *uri, const char *method, const char *md5, const char *expires,
		  const char **why);

/* The hash itself, for a given secret (tests, tools): expires + uri +
 * method + " " + secret.  uri as nginx's $uri. */
void volsign_hash(const char *secret, const char *expires, const char *uri, size_t ulen,
		  const char *method, char out[VOLSIGN_HASH_LEN + 1]);

#endif
