/* wire.h -- how a file's bytes go out on the socket (see wire.c). */
#ifndef MKV_VOLUME_WIRE_H
#define MKV_VOLUME_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Descriptors from 0 to max_fds - 1 may be tuned; call once, with the
 * version of libmicrohttpd running.  The tuning follows the call order of
 * the version it was measured against (WIRE_MHD_VERSION); with any other,
 * nothing is changed (libc's behaviour), and the log says so. */
#define WIRE_MHD_VERSION "0.9.75"
void wire_init(unsigned long max_fds, const char *mhd_version);
/* A connection on socket fd sock starts: forget what its number held. */
void wire_reset(int sock);
/* A GET's answer on sock is a header, then file_fd's bytes up to offset end
 * by sendfile. */
void wire_file_body(int sock, int file_fd, uint64_t end);

/* The decisions behind the wrappers in interpose.c. */
int wire_send_flags(int sock, int flags);
enum wire_opt { WIRE_PASS, WIRE_SKIP, WIRE_UNCORK_TOO };
enum wire_opt wire_setsockopt(int sock, int level, int opt, const void *val, socklen_t len);
size_t wire_sendfile_count(int sock, int file_fd, const off_t *off, size_t count);

#endif
