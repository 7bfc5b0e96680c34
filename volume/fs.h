/* fs.h -- everything mkv-volume does to its data directory.
 *
 * Paths are relative to the root (as vol_path_clean makes them) and are
 * resolved with the *at() calls against root->fd, so nothing here can
 * name a file outside it except through a symlink someone placed inside
 * (subvolumes on other disks).  Functions return an HTTP status and log
 * one line naming the failing call and file. */
#ifndef VOL_FS_H
#define VOL_FS_H

#include <stddef.h>
#include <sys/stat.h>
#include "../common/metrics.h"

#define VOL_MD5_XATTR "user.mkv.md5"
/* Hidden temporary files (a crash between link and rename leaves one)
 * start with this; `mkv gc` finds them with `?recursive&tmp`. */
#define VOL_TMP_PREFIX ".mkv-tmp."

struct vol_root {
	int fd;             /* O_DIRECTORY fd of the data directory */
	const char *path;   /* its name, for log lines and getxattr */
};

/* Open root->path (creating it if missing); 0 or -1 (logged). */
int vol_root_open(struct vol_root *r, const char *path);

/* The one errno -> status table.  notfound is what ENOENT/ENOTDIR mean for
 * this request (404 for reads, 409 for a PUT whose parent is a file).
 * vol_fs_fail logs `call() "root/path" failed (errno: text)` too, but not
 * for a missing file where that means 404: no news. */
int vol_errno_status(int err, int notfound);
int vol_fs_fail(const struct vol_root *r, const char *call, const char *path, int err,
		int notfound);

/* Open a file for reading: 200 with *fd (the caller's) and *st, 301 for a
 * directory, or an error status.  vol_fs_md5 also reads it whole for the
 * md5 of its bytes (never the xattr: what `mkv verify` asks) and rewinds
 * it: call it off the event loop. */
int vol_fs_open(const struct vol_root *r, const char *path, int *fd, struct stat *st);
int vol_fs_md5(const struct vol_root *r, const char *path, int *fd, struct stat *st,
	       char hex[33]);

/* A PUT in progress: an unnamed temporary file in the target's directory
 * (a hidden named one where O_TMPFILE is not supported) and the md5 of
 * what was written so far.
 *   begin:  create missing parents and the temporary file; NULL with
 *           *status set (409: the target is a directory or a parent a file)
 *   write:  append; 0, or an error status (507 when the disk is full)
 *   commit: make it durable and visible (md5 xattr, fsync, rename over the
 *           target, fsync the directory): 201 (new) or 204 (replaced), or
 *           an error status with nothing changed.  Blocks: call it off the
 *           event loop.
 *   abort:  forget it, leaving no trace on disk (p may be NULL).
 * commit and abort free p. */
struct vol_put;
struct vol_put *vol_put_begin(const struct vol_root *r, const char *path, int *status);
int vol_put_write(struct vol_put *p, const void *data, size_t n);
int vol_put_commit(struct vol_put *p);
void vol_put_abort(struct vol_put *p);

/* Remove a file and fsync its directory: 204, 404, 409 for a directory. */
int vol_fs_delete(const struct vol_root *r, const char *path);

/* For the metrics: fsyncs by latency (metrics.h's buckets) and their
 * total time, and PUTs' temporary files open now. */
struct vol_fs_stats {
	uint64_t fsync_hist[METRICS_NLE + 1], fsync_ns;
	long tmp_files;
};
void vol_fs_stats(struct vol_fs_stats *s);

/* Fault injection for tests (process-wide): when > 0, a PUT fails with
 * ENOSPC once this many bytes were written in total; every commit first
 * sleeps vol_fs_slow_sync_ms, as on a slow disk. */
extern long long vol_fs_fail_after;
extern unsigned vol_fs_slow_sync_ms;

#endif
