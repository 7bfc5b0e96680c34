/* wire.c -- see wire.h.
 *
 * libmicrohttpd 0.9.75 sends a file response as: the header alone, pushed
 * to the network at once, then the body in 128 KiB sendfile calls under
 * TCP_CORK, and pushes the end by setting TCP_NODELAY, leaving the socket
 * corked for good.  nginx corks, sends the header and up to 1 MiB of body,
 * and uncorks.  On loopback that difference halves what a client can fetch
 * of 1 MiB files (bench row 6b: 0.57x nginx under wrk), for three reasons
 * measured with ss, nstat and the servers' CPU times:
 *   - The client's receive buffer never grows.  Linux takes a receive RTT
 *     sample only from a full-sized segment that echoes a new timestamp;
 *     every response's first segment is the small header, so the samples
 *     never come and the buffer stays at 128 KiB: zero windows, tail-loss
 *     probes, and the server's data sent from the client's ACKs.
 *   - 128 KiB per call interleaves eight sends per MiB with the event loop.
 *     nginx limited to 128 KiB chunks loses a third of its rate the same
 *     way.
 *   - On a socket that stays corked, the server's kernel time per 1 MiB
 *     response was twice nginx's (0.40 ms against 0.21), the same system
 *     calls notwithstanding; uncorked after each body it is nginx's.
 * libmicrohttpd has no option for any of them, so interpose.c wraps the three
 * calls it makes (send, setsockopt, sendfile64) in bin/mkv-volume, and
 * these functions decide, per descriptor, what they change:
 *   - a file body's header goes with MSG_MORE and the one push that
 *     follows it is skipped, so the header leaves with the body;
 *   - a 128 KiB sendfile of a body is widened to at most 1 MiB, never past
 *     the body's end and always one byte short of it, so that
 *     libmicrohttpd's own last call, the one that pushes, still happens;
 *   - that push, a TCP_NODELAY after a body, uncorks the socket as well.
 * Anything else passes unchanged.  A descriptor is touched by one
 * libmicrohttpd thread at a time, so the tables need no lock.  All of this
 * depends on 0.9.75's private call order: wire_init turns it off for any
 * other version, and then every call goes to libc as it came. */
#include "wire.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>

#include "../common/util.h"

#define MHD_CHUNK (128 * 1024)       /* libmicrohttpd's sendfile size */
#define WIRE_CHUNK (1024 * 1024)     /* nginx's sendfile_max_chunk here */
#define MAX_FDS (1u << 20)

enum { IDLE, HEADER_NEXT, PUSH_NEXT, BODY };

static unsigned char *sock_state;    /* by socket descriptor */
static uint64_t *body_end;           /* by file descriptor */
static unsigned int nfds;

static bool tracked(int fd)
{
	return fd >= 0 && (unsigned int)fd < nfds;
}

void wire_init(unsigned long max_fds, const char *mhd_version)
{
	if (nfds)
		return;                      /* a second server in the process */
	if (!mhd_version || strcmp(mhd_version, WIRE_MHD_VERSION)) {
		log_msg("libmicrohttpd %s, not %s: file bodies go out as libmicrohttpd sends "
			"them (slower for large files than nginx)",
			mhd_version ? mhd_version : "(unknown)", WIRE_MHD_VERSION);
		return;                      /* nothing tracked: every call passes */
	}
	nfds = max_fds < MAX_FDS ? (unsigned int)max_fds : MAX_FDS;
	sock_state = xcalloc(nfds, sizeof(*sock_state));
	body_end = xcalloc(nfds, sizeof(*body_end));
}

void wire_reset(int sock)
{
	if (tracked(sock))
		sock_state[sock] = IDLE;
}

void wire_file_body(int sock, int file_fd, uint64_t end)
{
	/* Each on its own: a socket beyond the table must not leave the file
	 * descriptor with a closed file's end, which widening would trust. */
	if (tracked(file_fd))
		body_end[file_fd] = end;
	if (tracked(sock))
		sock_state[sock] = HEADER_NEXT;
}

int wire_send_flags(int sock, int flags)
{
	if (!tracked(sock) || sock_state[sock] == IDLE)
		return flags;
	if (sock_state[sock] == HEADER_NEXT) {
		sock_state[sock] = PUSH_NEXT;
		return flags | MSG_MORE;
	}
	sock_state[sock] = IDLE;             /* a second send: no header merge */
	return flags;
}

enum wire_opt wire_setsockopt(int sock, int level, int opt, const void *val, socklen_t len)
{
	int on, st;
	if (!tracked(sock) || (st = sock_state[sock]) == IDLE || level != IPPROTO_TCP ||
	    !val || len != sizeof(on))
		return WIRE_PASS;
	memcpy(&on, val, sizeof(on));
	if (!((opt == TCP_NODELAY && on) || (opt == TCP_CORK && !on)))
		return WIRE_PASS;            /* not a push */
	sock_state[sock] = IDLE;
	if (st == PUSH_NEXT)
		return WIRE_SKIP;
	if (st == BODY && opt == TCP_NODELAY)
		return WIRE_UNCORK_TOO;
	return WIRE_PASS;
}

size_t wire_sendfile_count(int sock, int file_fd, const off_t *off, size_t count)
{
	uint64_t left;
	if (tracked(sock))                   /* the body has begun: its push comes next */
		sock_state[sock] = tracked(file_fd) && body_end[file_fd] ? BODY : IDLE;
	if (count != MHD_CHUNK || !off || *off < 0 || !tracked(file_fd) ||
	    body_end[file_fd] <= (uint64_t)*off)
		return count;
	left = body_end[file_fd] - (uint64_t)*off;
	if (left - 1 <= count)
		return count;
	return left - 1 < WIRE_CHUNK ? (size_t)(left - 1) : WIRE_CHUNK;
}
