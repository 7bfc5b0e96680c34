/* fs.c -- see fs.h.
 *
 * Write order of a PUT, which makes a crash at any point safe: the bytes go
 * to a file with no name (O_TMPFILE) in the target's directory, its md5
 * is stored as an xattr, fsync; only then does it get a name -- linked in
 * directly when the target is new, else linked to a hidden temporary name
 * and renamed over the target -- and the directory is fsynced before the
 * 201/204.  A crash before the link leaves nothing; a crash between link
 * and rename leaves one hidden ".mkv-tmp.*" file that listings never show;
 * readers only ever see the old or the new whole file. */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../common/metrics.h"
#include "../common/placement.h"
#include "../common/util.h"

#define PUT_BUF (128 * 1024)

long long vol_fs_fail_after;
unsigned vol_fs_slow_sync_ms;
static _Atomic long long fault_written;
static _Atomic unsigned long tmp_seq;
/* For the metrics (vol_fs_stats). */
static _Atomic uint64_t fsync_hist[METRICS_NLE + 1], fsync_ns;
static _Atomic long tmp_open;

static int timed_fsync(int fd)
{
	uint64_t t0 = now_ns(), ns;
	int rc = fsync(fd);
	ns = now_ns() - t0;
	atomic_fetch_add(&fsync_hist[metrics_bucket(ns)], 1);
	atomic_fetch_add(&fsync_ns, ns);
	return rc;
}

void vol_fs_stats(struct vol_fs_stats *s)
{
	for (int i = 0; i <= METRICS_NLE; i++)
		s->fsync_hist[i] = atomic_load(&fsync_hist[i]);
	s->fsync_ns = atomic_load(&fsync_ns);
	s->tmp_files = atomic_load(&tmp_open);
}

/* mkdir -p dir, relative to at: 0, or the errno of the mkdir that failed,
 * with dir cut after the one it tried.  *made gets the length of the first
 * created directory's parent (0: at itself), if it is still -1. */
static int mkdirs(int at, char *dir, ssize_t *made)
{
	for (char *s = dir + (*dir != '\0');; s++) {
		char c = *s;
		if (c != '/' && c != '\0')
			continue;
		*s = '\0';
		if (mkdirat(at, dir, 0755) == 0) {
			const char *sl = strrchr(dir, '/');
			if (*made < 0)
				*made = sl ? sl - dir : 0;
		} else if (errno != EEXIST) {
			return errno;
		}
		if (!(*s = c))
			return 0;
	}
}

int vol_root_open(struct vol_root *r, const char *path)
{
	char *p = xstrdup(path);
	ssize_t made = -1;
	int err = mkdirs(AT_FDCWD, p, &made);
	if (err)
		log_msg("mkdir() \"%s\" failed (%d: %s)", p, err, strerror(err));
	free(p);
	if (err)
		return -1;
	r->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->fd < 0) {
		log_msg("open() \"%s\" failed (%d: %s)", path, errno, strerror(errno));
		return -1;
	}
	r->path = path;
	return 0;
}

int vol_errno_status(int err, int notfound)
{
	switch (err) {
	case ENOENT: case ENOTDIR: case ENAMETOOLONG: return notfound;
	case EACCES: case EPERM: case ELOOP:          return 403;
	case EISDIR: case ENOTEMPTY: case EEXIST:     return 409;
	case ENOSPC: case EDQUOT:                     return 507;
	default:                                      return 500;
	}
}

int vol_fs_fail(const struct vol_root *r, const char *call, const char *path, int err,
		int notfound)
{
	if (notfound != 404 || (err != ENOENT && err != ENOTDIR))
		log_msg("%s() \"%s/%s\" failed (%d: %s)", call, r->path, path, err, strerror(err));
	return vol_errno_status(err, notfound);
}

int vol_fs_open(const struct vol_root *r, const char *path, int *fd, struct stat *st)
{
	/* O_NONBLOCK: a FIFO someone left in the directory must not hang us. */
	*fd = openat(r->fd, *path ? path : ".", O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (*fd < 0)
		return vol_fs_fail(r, "open", path, errno, 404);
	if (fstat(*fd, st) < 0) {
		int status = vol_fs_fail(r, "fstat", path, errno, 404);
		close(*fd);
		return status;
	}
	if (S_ISREG(st->st_mode))
		return 200;
	close(*fd);
	*fd = -1;
	return S_ISDIR(st->st_mode) ? 301 : 404;
}

int vol_fs_md5(const struct vol_root *r, const char *path, int *fd, struct stat *st,
	       char hex[33])
{
	const char *failed;
	int status = vol_fs_open(r, path, fd, st);
	if (status != 200)   /* a directory, with its slash or not, is no blob */
		return status == 301 ? 404 : status;
	failed = !md5_fd(*fd, hex) ? "read" : lseek(*fd, 0, SEEK_SET) < 0 ? "lseek" : NULL;
	if (failed) {
		status = vol_fs_fail(r, failed, path, errno, 404);
		close(*fd);
		*fd = -1;
	}
	return status;
}

struct vol_put {
	const struct vol_root *root;
	char *path;          /* target, relative to the root */
	const char *base;    /* its last segment, inside path */
	int dfd;             /* the target's directory */
	int fd;              /* the temporary file */
	bool named;          /* the temporary file has tmpname (no O_TMPFILE) */
	bool existed;        /* the target existed when the PUT began */
	ssize_t made_parent; /* parents were created, the first in the directory of
				this length (0: the root): fsync at commit; -1: none */
	char tmpname[64];
	struct md5 *md5;
	size_t buffered;     /* bytes waiting in buf */
	char buf[PUT_BUF];   /* the body arrives in small pieces: write big ones */
};

static void make_tmpname(struct vol_put *p)
{
	snprintf(p->tmpname, sizeof(p->tmpname), VOL_TMP_PREFIX "%ld.%lu", (long)getpid(),
		 atomic_fetch_add(&tmp_seq, 1));
}

/* Open the directory part of p->path, creating it (mkdir -p) if missing. */
static int open_parent(struct vol_put *p)
{
	const char *slash = strrchr(p->path, '/');
	char *dir = slash ? xstrndup(p->path, (size_t)(slash - p->path)) : xstrdup(".");
	int err, status = 0;

	p->dfd = openat(p->root->fd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->dfd < 0 && errno == ENOENT) {
		if ((err = mkdirs(p->root->fd, dir, &p->made_parent)))
			status = vol_fs_fail(p->root, "mkdir", dir, err, 409);
		else
			p->dfd = openat(p->root->fd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (!status && p->dfd < 0)
		status = vol_fs_fail(p->root, "open", dir, errno, 409);
	free(dir);
	return status;
}

struct vol_put *vol_put_begin(const struct vol_root *r, const char *path, int *status)
{
	struct vol_put *p = xmalloc(sizeof(*p));
	const char *slash;
	struct stat st;

	memset(p, 0, offsetof(struct vol_put, buf));
	p->root = r;
	p->path = xstrdup(path);
	slash = strrchr(p->path, '/');
	p->base = slash ? slash + 1 : p->path;
	p->dfd = p->fd = -1;
	p->made_parent = -1;
	*status = open_parent(p);
	if (*status)
		goto fail;
	if (fstatat(p->dfd, p->base, &st, 0) == 0) {
		if (S_ISDIR(st.st_mode)) {
			*status = 409;
			goto fail;
		}
		p->existed = true;
	}
	p->fd = openat(p->dfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
	if (p->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		make_tmpname(p);
		p->named = true;
		p->fd = openat(p->dfd, p->tmpname, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	}
	if (p->fd < 0) {
		*status = vol_fs_fail(r, "open", path, errno, 409);
		goto fail;
	}
	atomic_fetch_add(&tmp_open, 1);
	p->md5 = md5_new();
	return p;
fail:
	vol_put_abort(p);
	return NULL;
}

static int write_all(struct vol_put *p, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w;
		if (vol_fs_fail_after > 0 &&
		    atomic_fetch_add(&fault_written, (long long)n) + (long long)n > vol_fs_fail_after) {
			errno = ENOSPC;
			w = -1;
		} else {
			w = write(p->fd, s, n);
		}
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return vol_fs_fail(p->root, "write", p->path, errno, 500);
		}
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

int vol_put_write(struct vol_put *p, const void *data, size_t n)
{
	md5_update(p->md5, data, n);
	if (p->buffered + n > sizeof(p->buf)) {
		int status = write_all(p, p->buf, p->buffered);
		p->buffered = 0;
		if (status)
			return status;
		if (n >= sizeof(p->buf))
			return write_all(p, data, n);
	}
	memcpy(p->buf + p->buffered, data, n);
	p->buffered += n;
	return 0;
}

/* fsync directory dir of the root: 0, or an error status (logged). */
static int sync_dir(const struct vol_root *r, const char *dir)
{
	int fd = openat(r->fd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), status = 0;
	if (fd < 0 || timed_fsync(fd) < 0)
		status = vol_fs_fail(r, fd < 0 ? "open" : "fsync", dir, errno, 500);
	if (fd >= 0)
		close(fd);
	return status;
}

/* The directories this PUT created must reach the disk before the entry
 * naming the file does: fsync the parent of the first one made and every
 * one made below it, but the target's own directory (fsynced after the
 * link anyway). */
static int sync_parents(struct vol_put *p)
{
	const char *last = strrchr(p->path, '/');
	char *dir = xstrdup(p->path);
	int status = 0;
	if (p->made_parent == 0 && timed_fsync(p->root->fd) < 0)
		status = vol_fs_fail(p->root, "fsync", "", errno, 500);
	for (char *s = strchr(dir, '/'); s && !status; s = strchr(s + 1, '/')) {
		ssize_t q = s - dir;
		if (q == last - p->path)
			break;                    /* the target's own directory */
		if (q < p->made_parent)
			continue;                 /* above the first made dir's parent */
		*s = '\0';
		status = sync_dir(p->root, dir);
		*s = '/';
	}
	free(dir);
	return status;
}

static int link_tmpfile(struct vol_put *p, const char *name)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", p->fd);
	return linkat(AT_FDCWD, proc, p->dfd, name, AT_SYMLINK_FOLLOW);
}

int vol_put_commit(struct vol_put *p)
{
	char hex[33];
	int status = 0;

	if ((status = write_all(p, p->buf, p->buffered)))
		goto out;
	md5_final_hex(p->md5, hex);
	/* A filesystem without user xattrs just has no md5 to offer. */
	if (fsetxattr(p->fd, VOL_MD5_XATTR, hex, 32, 0) < 0 && errno != ENOTSUP &&
	    errno != EPERM && errno != EACCES)
		vol_fs_fail(p->root, "fsetxattr", p->path, errno, 500);
	if (vol_fs_slow_sync_ms)
		usleep(vol_fs_slow_sync_ms * 1000u);
	if (timed_fsync(p->fd) < 0) {
		status = vol_fs_fail(p->root, "fsync", p->path, errno, 500);
		goto out;
	}
	if (!p->named) {
		if (!p->existed) {
			if (link_tmpfile(p, p->base) == 0)
				goto linked;
			if (errno != EEXIST) {
				status = vol_fs_fail(p->root, "linkat", p->path, errno, 409);
				goto out;
			}
			p->existed = true;      /* someone else created it meanwhile */
		}
		make_tmpname(p);
		if (link_tmpfile(p, p->tmpname) < 0) {
			status = vol_fs_fail(p->root, "linkat", p->path, errno, 409);
			goto out;
		}
		p->named = true;
	}
	if (renameat(p->dfd, p->tmpname, p->dfd, p->base) < 0) {
		int err = errno;
		log_msg("rename() \"%s/%s\" to \"%s\" failed (%d: %s)", p->root->path, p->tmpname,
			p->path, err, strerror(err));
		status = vol_errno_status(err, 409);
		goto out;
	}
	p->named = false;
linked:
	if (p->made_parent >= 0 && (status = sync_parents(p)))
		goto out;
	if (timed_fsync(p->dfd) < 0) {
		status = vol_fs_fail(p->root, "fsync", p->path, errno, 500);
		goto out;
	}
	status = p->existed ? 204 : 201;
out:
	vol_put_abort(p);
	return status;
}

void vol_put_abort(struct vol_put *p)
{
	if (!p)
		return;
	if (p->fd >= 0) {
		close(p->fd);
		atomic_fetch_sub(&tmp_open, 1);
	}
	if (p->named)
		unlinkat(p->dfd, p->tmpname, 0);
	if (p->dfd >= 0)
		close(p->dfd);
	md5_free(p->md5);
	free(p->path);
	free(p);
}

int vol_fs_delete(const struct vol_root *r, const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int status;

	if (unlinkat(r->fd, path, 0) < 0) {
		int err = errno;
		struct stat st;
		/* A read-only filesystem refuses even a name that is not there
		 * (EROFS before ENOENT): missing is 404, as nginx answers. */
		if (err != ENOENT && fstatat(r->fd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
		    errno == ENOENT)
			err = ENOENT;
		return vol_fs_fail(r, "unlink", path, err, 404);
	}
	/* Make the removal durable too: a blob must not come back after a crash. */
	dir = slash ? xstrndup(path, (size_t)(slash - path)) : xstrdup(".");
	status = sync_dir(r, dir);
	free(dir);
	return status ? status : 204;
}
