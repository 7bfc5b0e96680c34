/* listing.h -- `GET /dir/`: the JSON listing of nginx's autoindex_format
 * json, byte for byte (directories first, then byte order of names;
 * dotfiles hidden; symlinks followed), plus "md5" on files that carry the
 * xattr.  Streamed: memory stays bounded however large the directory.
 * Recursive (deep): every file below the directory, named by its path from
 * it, and no directory entries (see listing.c). */
#ifndef VOL_LISTING_H
#define VOL_LISTING_H

#include <stddef.h>
#include <sys/types.h>
#include "../common/front.h"
#include "fs.h"

struct vol_list;

/* Open the directory path ("" for the root), for a plain listing (0) or a
 * recursive one (VOL_LIST_DEEP), which may show hidden temporary files
 * (VOL_TMP_PREFIX) too (| VOL_LIST_TMP).  Returns NULL with *status set
 * (404 when missing or not a directory).  root must outlive the list. */
#define VOL_LIST_DEEP 1
#define VOL_LIST_TMP 2
struct vol_list *vol_list_open(const struct vol_root *root, const char *path, int mode,
			       int *status);
/* The front's reader and done (front_stream_ex) of a listing l: up to
 * max bytes of it into buf, the count, or FRONT_READER_END after the
 * last, FRONT_READER_ERROR on a read error (logged).  Close frees l. */
ssize_t vol_list_read(void *l, uint64_t pos, char *buf, size_t max);
void vol_list_close(void *l);

/* Entries held in memory at once; a larger directory is read again for
 * each further batch.  A variable so tests can make it small. */
extern size_t vol_list_batch;

#endif
