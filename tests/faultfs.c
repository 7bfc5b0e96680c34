/* faultfs.c -- a disk that fails on request, for check_index_faults: an
 * LD_PRELOAD library (built as build/tests/faultfs.so) whose write,
 * fdatasync and fsync fail for files in one directory while a control
 * file says so, as SQLite's test VFS fails its writes.  Every process
 * given it checks one file per call and otherwise calls libc's.
 *
 *   MKV_FAULT_DIR   the directory whose files fail (not its subdirectories)
 *   MKV_FAULT_CTL   a file: "write" makes the next write to such a file
 *                   write half its bytes, and every later one fail with
 *                   EIO (a write cut short by the disk, as ENOSPC cuts it);
 *                   "sync" makes fdatasync and fsync fail with EIO;
 *                   "create" makes open(O_CREAT) of a new file there fail
 *                   with ENOSPC (no inode left, or EMFILE), writes pass;
 *                   "hang" makes fdatasync wait while the file says so
 *                   (a disk that stalls: a dying disk, iSCSI, NFS).
 *                   Absent or empty: no fault. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ssize_t (*libc_write)(int, const void *, size_t);
static int (*libc_fdatasync)(int);
static int (*libc_fsync)(int);
static int (*libc_open)(const char *, int, ...);
static bool cut;   /* the write that was cut short happened */

__attribute__((constructor)) static void find_libc(void)
{
	libc_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	libc_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	libc_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	libc_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
}

/* The fault armed now ('w', 's' or 0), if fd is a file of MKV_FAULT_DIR. */
static char armed(int fd)
{
	const char *dir = getenv("MKV_FAULT_DIR"), *ctl = getenv("MKV_FAULT_CTL");
	char buf[16] = "", link[64], path[PATH_MAX], *slash;
	ssize_t n;
	int c;
	if (!dir || !ctl || (c = libc_open(ctl, O_RDONLY | O_CLOEXEC)) < 0) {
		cut = false;
		return 0;
	}
	n = read(c, buf, sizeof(buf) - 1);
	close(c);
	if (n <= 0) {
		cut = false;
		return 0;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return 0;
	path[n] = '\0';
	slash = strrchr(path, '/');
	if (!slash || (size_t)(slash - path) != strlen(dir) || strncmp(path, dir, strlen(dir)))
		return 0;
	if (buf[0] == 'h' && !strcmp(slash, "/mkv-probe"))
		return 0;   /* "hang" stalls LevelDB's files: the master's probe of the disk passes */
	return buf[0] == 'w' ? 'w' : buf[0] == 's' ? 's' : buf[0] == 'h' ? 'h' : 0;
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;
	va_start(ap, flags);
	mode = (flags & O_CREAT) ? va_arg(ap, mode_t) : 0;
	va_end(ap);
	if (flags & O_CREAT) {   /* a new file of MKV_FAULT_DIR, when "create" is armed */
		const char *dir = getenv("MKV_FAULT_DIR"), *ctl = getenv("MKV_FAULT_CTL");
		const char *slash = strrchr(path, '/');
		char buf[16] = "";
		int c = ctl ? libc_open(ctl, O_RDONLY | O_CLOEXEC) : -1;
		if (c >= 0) {
			if (read(c, buf, sizeof(buf) - 1) < 0)
				buf[0] = '\0';
			close(c);
		}
		if (buf[0] == 'c' && dir && slash && (size_t)(slash - path) == strlen(dir) &&
		    !strncmp(path, dir, strlen(dir)) && access(path, F_OK) < 0) {
			errno = ENOSPC;
			return -1;
		}
	}
	return libc_open(path, flags, mode);
}

ssize_t write(int fd, const void *p, size_t n)
{
	if (armed(fd) == 'w') {
		if (!cut && n > 1) {
			cut = true;
			return libc_write(fd, p, n / 2);
		}
		errno = EIO;
		return -1;
	}
	return libc_write(fd, p, n);
}

int fdatasync(int fd)
{
	char a;
	while ((a = armed(fd)) == 'h')
		usleep(50000);
	if (a == 's') {
		errno = EIO;
		return -1;
	}
	return libc_fdatasync(fd);
}

int fsync(int fd)
{
	if (armed(fd) == 's') {
		errno = EIO;
		return -1;
	}
	return libc_fsync(fd);
}
