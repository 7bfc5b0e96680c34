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
 *                   "sync" makes fdatasync and fsync fail with EIO.
 *                   Absent or empty: no fault. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ssize_t (*libc_write)(int, const void *, size_t);
static int (*libc_fdatasync)(int);
static int (*libc_fsync)(int);
static bool cut;   /* the write that was cut short happened */

__attribute__((constructor)) static void find_libc(void)
{
	libc_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	libc_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	libc_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
}

/* The fault armed now ('w', 's' or 0), if fd is a file of MKV_FAULT_DIR. */
static char armed(int fd)
{
	const char *dir = getenv("MKV_FAULT_DIR"), *ctl = getenv("MKV_FAULT_CTL");
	char buf[16] = "", link[64], path[PATH_MAX], *slash;
	ssize_t n;
	int c;
	if (!dir || !ctl || (c = open(ctl, O_RDONLY | O_CLOEXEC)) < 0) {
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
	return buf[0] == 'w' ? 'w' : buf[0] == 's' ? 's' : 0;
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
	if (armed(fd) == 's') {
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
