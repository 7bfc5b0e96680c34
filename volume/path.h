/* path.h -- the one place where a request path becomes a file path.
 *
 * Request paths arrive raw (libmicrohttpd's own unescaping is switched
 * off), so percent-decoding, NUL checks and normalisation all happen here,
 * before anything touches the disk. */
#ifndef VOL_PATH_H
#define VOL_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* Decode raw (a NUL-terminated request path, query already cut off) into
 * out (outsz bytes) as a path relative to the data directory: no leading
 * '/', repeated '/' merged, "." segments dropped, "" for the root.
 * *dir is set when raw ends in '/'.  Returns 0; or 400 with *why set (bad
 * %XX, a NUL byte, a ".." segment, not starting with '/') or 414 (longer
 * than outsz - 1). */
int vol_path_clean(const char *raw, char *out, size_t outsz, bool *dir, const char **why);

#endif
