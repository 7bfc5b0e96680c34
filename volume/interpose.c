/* interpose.c -- bin/mkv-volume's own send, setsockopt and sendfile64,
 * which libmicrohttpd's calls reach before libc's.  Each asks wire.c what
 * to change (usually nothing) and calls libc's.  Linked into the binary
 * only: the test suites that run a volume in-process keep libc's. */
#include <dlfcn.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "../common/util.h"
#include "wire.h"

static ssize_t (*libc_send)(int, const void *, size_t, int);
static int (*libc_setsockopt)(int, int, int, const void *, socklen_t);
static ssize_t (*libc_sendfile64)(int, int, off_t *, size_t);

__attribute__((constructor)) static void find_libc(void)
{
	libc_send = (ssize_t(*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
	libc_setsockopt = (int (*)(int, int, int, const void *, socklen_t))dlsym(RTLD_NEXT,
										   "setsockopt");
	libc_sendfile64 = (ssize_t(*)(int, int, off_t *, size_t))dlsym(RTLD_NEXT, "sendfile64");
	if (!libc_send || !libc_setsockopt || !libc_sendfile64)
		die("cannot find send, setsockopt or sendfile64 in libc");
}

/* Each is libc's symbol under a name of its own (the asm label): the
 * linker sees send, setsockopt and sendfile64; mkv's code calling libc's
 * setsockopt does not call this file. */
ssize_t volume_send(int fd, const void *buf, size_t len, int flags) __asm__("send");
int volume_setsockopt(int fd, int level, int opt, const void *val, socklen_t len)
	__asm__("setsockopt");
ssize_t volume_sendfile64(int out_fd, int in_fd, off_t *off, size_t count) __asm__("sendfile64");

ssize_t volume_send(int fd, const void *buf, size_t len, int flags)
{
	return libc_send(fd, buf, len, wire_send_flags(fd, flags));
}

int volume_setsockopt(int fd, int level, int opt, const void *val, socklen_t len)
{
	int off = 0;
	switch (wire_setsockopt(fd, level, opt, val, len)) {
	case WIRE_SKIP:
		return 0;
	case WIRE_UNCORK_TOO:
		libc_setsockopt(fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
		break;
	case WIRE_PASS:
		break;
	}
	return libc_setsockopt(fd, level, opt, val, len);
}

ssize_t volume_sendfile64(int out_fd, int in_fd, off_t *off, size_t count)
{
	return libc_sendfile64(out_fd, in_fd, off, wire_sendfile_count(out_fd, in_fd, off, count));
}
