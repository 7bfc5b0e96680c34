/* listing.c -- see listing.h.
 *
 * nginx reads a whole directory into memory and sorts it.  We want the
 * same order without holding 100,000 names, so the listing is produced in
 * batches: each pass over the directory keeps only the vol_list_batch
 * smallest entries above the last one sent, sorts and sends those.  A
 * directory of up to vol_list_batch entries takes one pass, as in nginx;
 * N entries take N / vol_list_batch passes of readdir, which is cheap
 * next to the stat and xattr calls made per entry sent.
 *
 * `?recursive` (mkv-volume only; nginx ignores the argument and answers
 * the plain listing) lists every file below the directory instead, named
 * by its path from there ("5d/aGVsbG8="), in directory order, without
 * directory entries: one request instead of one per directory, which is
 * what lets `mkv rebuild` walk a sparse volume quickly.  Symlinks are
 * followed as in the plain listing, but never into a directory already
 * being walked, so a link loop ends. */
#include "listing.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../common/util.h"

size_t vol_list_batch = 8192;

#define DEEP_MAX 64            /* directory levels a recursive listing descends */
#define REL_MAX 4096           /* longest relative name it reports */

struct level {
	DIR *d;
	size_t plen;           /* the length of this level's prefix in rel */
	dev_t dev;
	ino_t ino;
};

struct ent {
	bool dir;
	char name[];
};

struct vol_list {
	char *path;            /* root->path "/" path "/", for getxattr */
	DIR *d;
	struct ent **v;        /* the current batch, sorted; up to 2 * batch while reading */
	size_t n, i;           /* entries in v, next to send */
	struct ent *last;      /* the last entry of the previous batch */
	bool more;             /* entries beyond the current batch remain */
	bool started, ended;
	bool tmp;              /* recursive: show VOL_TMP_PREFIX files */
	struct buf out;        /* formatted, not yet copied out */
	size_t off;
	/* recursive listings */
	int depth;             /* levels open, level[0].d being d (0: a plain listing) */
	struct level level[DEEP_MAX];
	char rel[REL_MAX];     /* the current name, relative to the listed dir */
};

/* Directories first, then names in byte order (strcmp's unsigned bytes). */
static int ent_cmp(const struct ent *a, const struct ent *b)
{
	if (a->dir != b->dir)
		return a->dir ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int ent_qcmp(const void *a, const void *b)
{
	return ent_cmp(*(struct ent *const *)a, *(struct ent *const *)b);
}

static void keep_smallest(struct vol_list *l, size_t keep)
{
	qsort(l->v, l->n, sizeof(*l->v), ent_qcmp);
	while (l->n > keep) {
		free(l->v[--l->n]);
		l->more = true;
	}
}

/* Is entry de of d a directory?  Symlinks are followed (so are entries of
 * a filesystem without d_type); -1 when that fails. */
static int is_dir(DIR *d, const struct dirent *de)
{
	struct stat st;
	if (de->d_type == DT_DIR || de->d_type == DT_REG)
		return de->d_type == DT_DIR;
	return fstatat(dirfd(d), de->d_name, &st, 0) == 0 ? S_ISDIR(st.st_mode) : -1;
}

static struct ent *ent_dup(const struct ent *e)
{
	size_t n = sizeof(*e) + strlen(e->name) + 1;
	return memcpy(xmalloc(n), e, n);
}

/* One pass over the directory: the next batch into l->v. */
static int next_batch(struct vol_list *l)
{
	size_t batch = vol_list_batch ? vol_list_batch : 1, cap = 2 * batch;
	struct dirent *de;
	bool bounded = false;   /* v[batch - 1] bounds what this batch can hold */

	for (size_t i = l->i; i < l->n; i++)
		free(l->v[i]);
	l->n = l->i = 0;
	l->more = false;
	if (!l->v)
		l->v = xmalloc(cap * sizeof(*l->v));
	rewinddir(l->d);
	for (;;) {
		union {
			struct ent e;
			char room[sizeof(struct ent) + sizeof(de->d_name)];
		} key;

		errno = 0;
		de = readdir(l->d);
		if (!de)
			break;
		if (de->d_name[0] == '.')
			continue;
		key.e.dir = is_dir(l->d, de) == 1;
		strcpy(key.e.name, de->d_name);
		if (l->last && ent_cmp(&key.e, l->last) <= 0)
			continue;               /* sent in an earlier batch */
		if (bounded && ent_cmp(&key.e, l->v[batch - 1]) > 0) {
			l->more = true;         /* for a later batch */
			continue;
		}
		l->v[l->n++] = ent_dup(&key.e);
		if (l->n == cap) {
			keep_smallest(l, batch);
			bounded = true;
		}
	}
	if (errno) {
		log_msg("readdir() \"%s\" failed (%d: %s)", l->path, errno, strerror(errno));
		return -1;
	}
	keep_smallest(l, batch);
	free(l->last);
	l->last = l->n > 0 ? ent_dup(l->v[l->n - 1]) : NULL;
	return 0;
}

/* A JSON string body as nginx's ngx_escape_json writes it: \" \\ \n \r \t
 * \b \f, other control bytes as \u00XX, every other byte as it is.  The
 * master's JSON (json_append_string, master/handlers.c) follows Go's
 * encoding/json instead -- \u003c for <, >, &, U+FFFD for bad UTF-8 -- as
 * minikeyvalue does: two writers, because the two programs they copy differ. */
static void put_json(struct buf *b, const char *s)
{
	static const char two[] = "\"\"\\\\\nn\rr\tt\bb\ff";   /* byte, its letter */
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		const char *e;
		char u[7];
		if (*p > 0x1f && *p != '"' && *p != '\\') {
			buf_append(b, p, 1);
		} else if ((e = memchr(two, *p, sizeof(two) - 1))) {
			buf_append(b, "\\", 1);
			buf_append(b, e + 1, 1);
		} else {
			snprintf(u, sizeof(u), "\\u%04X", *p);
			buf_append(b, u, 6);
		}
	}
}

/* Format one entry, name in directory dfd, shown as `shown` (the path
 * from the listed directory); false when it vanished since it was read. */
static bool put_entry(struct vol_list *l, int dfd, const char *name, const char *shown)
{
	struct stat st;
	char date[HTTP_DATE_LEN], md5[33];
	const char *type;

	/* As nginx: follow symlinks, or describe a dangling one itself. */
	if (fstatat(dfd, name, &st, 0) < 0 &&
	    ((errno != ENOENT && errno != ELOOP) || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0))
		return false;
	type = S_ISDIR(st.st_mode) ? "directory" : S_ISREG(st.st_mode) ? "file" : "other";
	http_date(st.st_mtime, date);
	buf_puts(&l->out, l->started ? ",\r\n{ \"name\":\"" : "\r\n{ \"name\":\"");
	l->started = true;
	put_json(&l->out, shown);
	buf_printf(&l->out, "\", \"type\":\"%s\", \"mtime\":\"%s\"", type, date);
	if (S_ISREG(st.st_mode)) {
		char *full = xasprintf("%s%s", l->path, shown);
		buf_printf(&l->out, ", \"size\":%lld", (long long)st.st_size);
		if (getxattr(full, VOL_MD5_XATTR, md5, 32) == 32) {
			md5[32] = '\0';
			if (strspn(md5, "0123456789abcdef") == 32)
				buf_printf(&l->out, ", \"md5\":\"%s\"", md5);
		}
		free(full);
	}
	buf_puts(&l->out, " }");
	return true;
}

/* The next entry of a plain listing into l->out: 1, or 0 at the end, -1
 * on a read error. */
static int plain_next(struct vol_list *l)
{
	while (l->i == l->n) {
		if (!l->more)
			return 0;
		if (next_batch(l) < 0)
			return -1;
	}
	put_entry(l, dirfd(l->d), l->v[l->i]->name, l->v[l->i]->name);
	free(l->v[l->i++]);
	return 1;
}

/* Enter directory `name` of the current level, unless it is already being
 * walked (a symlink loop) or too deep. */
static void deep_enter(struct vol_list *l, const char *name, size_t len)
{
	struct level *up = &l->level[l->depth - 1], *lv;
	struct stat st;
	bool skip;
	int fd;
	if (l->depth == DEEP_MAX || up->plen + len + 2 > sizeof(l->rel))
		return;
	if ((fd = openat(dirfd(up->d), name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	skip = fstat(fd, &st) < 0;
	for (int i = 0; i < l->depth && !skip; i++)
		skip = l->level[i].dev == st.st_dev && l->level[i].ino == st.st_ino;
	if (skip) {
		close(fd);
		return;
	}
	lv = &l->level[l->depth++];
	lv->d = fdopendir(fd);
	if (!lv->d)
		die("fdopendir: %s", strerror(errno));
	lv->dev = st.st_dev;
	lv->ino = st.st_ino;
	memcpy(l->rel + up->plen, name, len);
	l->rel[up->plen + len] = '/';
	lv->plen = up->plen + len + 1;
}

/* The next file of a recursive listing into l->out: 1, or 0 at the end,
 * -1 on a read error. */
static int deep_next(struct vol_list *l)
{
	for (;;) {
		struct level *lv = &l->level[l->depth - 1];
		struct dirent *de;
		size_t len;
		int dir;

		errno = 0;
		de = readdir(lv->d);
		if (!de) {
			if (errno) {
				log_msg("readdir() \"%s%.*s\" failed (%d: %s)", l->path, (int)lv->plen,
					l->rel, errno, strerror(errno));
				return -1;
			}
			if (l->depth == 1)
				return 0;
			closedir(lv->d);
			l->depth--;
			continue;
		}
		if (de->d_name[0] == '.' &&
		    !(l->tmp && !strncmp(de->d_name, VOL_TMP_PREFIX, strlen(VOL_TMP_PREFIX))))
			continue;
		len = strlen(de->d_name);
		if ((dir = is_dir(lv->d, de)) < 0)
			continue;
		if (dir) {
			deep_enter(l, de->d_name, len);
			continue;
		}
		if (lv->plen + len + 1 > sizeof(l->rel))
			continue;
		memcpy(l->rel + lv->plen, de->d_name, len + 1);
		if (put_entry(l, dirfd(lv->d), de->d_name, l->rel))
			return 1;
	}
}

struct vol_list *vol_list_open(const struct vol_root *root, const char *path, int mode,
			       int *status)
{
	struct vol_list *l;
	int fd = openat(root->fd, *path ? path : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		*status = vol_fs_fail(root, "opendir", path, errno, 404);
		return NULL;
	}
	l = xcalloc(1, sizeof(*l));
	l->d = fdopendir(fd);
	if (!l->d)
		die("fdopendir: %s", strerror(errno));
	l->path = *path ? xasprintf("%s/%s/", root->path, path) : xasprintf("%s/", root->path);
	l->more = true;         /* nothing read yet */
	l->tmp = mode & VOL_LIST_TMP;
	if (mode & VOL_LIST_DEEP) {
		struct stat st;
		l->depth = 1;
		l->level[0].d = l->d;
		if (fstat(fd, &st) == 0) {
			l->level[0].dev = st.st_dev;
			l->level[0].ino = st.st_ino;
		}
	}
	buf_puts(&l->out, "[");
	return l;
}

ssize_t vol_list_read(void *list, uint64_t pos, char *buf, size_t max)
{
	struct vol_list *l = list;
	(void)pos;
	while (l->out.len - l->off < max && !l->ended) {
		int r = l->depth ? deep_next(l) : plain_next(l);
		if (r < 0)
			return FRONT_READER_ERROR;
		if (r == 0) {
			buf_puts(&l->out, "\r\n]");
			l->ended = true;
		}
	}
	size_t n = l->out.len - l->off;
	if (n > max)
		n = max;
	memcpy(buf, l->out.data + l->off, n);
	l->off += n;
	if (l->off == l->out.len)
		l->off = l->out.len = 0;
	return n ? (ssize_t)n : FRONT_READER_END;
}

void vol_list_close(void *list)
{
	struct vol_list *l = list;
	for (size_t i = l->i; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	free(l->last);
	while (l->depth > 1)
		closedir(l->level[--l->depth].d);
	closedir(l->d);
	free(l->path);
	buf_free(&l->out);
	free(l);
}
