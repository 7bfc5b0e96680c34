/* recv_eof.c -- bin/mkv's and bin/mkv-volume's own recv, which
 * libmicrohttpd's calls reach before libc's.
 *
 * libmicrohttpd's epoll loop (edge-triggered) takes a recv that returns
 * less than it asked for as "drained" and waits for the next event.  When
 * the client's FIN came in with its last bytes, there is no next event:
 * the end is never read, and a client that cut off an upload kept its
 * connection, the PUT's temporary file and (on the master) the key's lock
 * until the idle timeout, a minute later.  So after a short read, look
 * whether only the end is left; if so, shut the reading side, which wakes
 * the loop to read it (nothing is lost: no byte is pending, none can come).
 * Linked into the two binaries only: the test suites keep libc's. */
#include <dlfcn.h>
#include <sys/socket.h>

#include "util.h"

static ssize_t (*libc_recv)(int, void *, size_t, int);

__attribute__((constructor)) static void find_libc_recv(void)
{
	libc_recv = (ssize_t(*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
	if (!libc_recv)
		die("cannot find recv in libc");
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	ssize_t n = libc_recv(fd, buf, len, flags);
	char c;
	if (n > 0 && (size_t)n < len && !(flags & MSG_PEEK) &&
	    libc_recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
		shutdown(fd, SHUT_RD);
	return n;
}
