/* server.h -- mkv-volume's requests on the front (common/front.h):
 * docs/protocol.md §5 over one data directory. */
#ifndef VOL_SERVER_H
#define VOL_SERVER_H

struct vol_server;

#include <stdint.h>

/* Serve dir (created if missing) on port; 0 picks nothing, give a port.
 * A connection silent, or sending its request head, for idle_ms is cut
 * off.  metrics (HOST:PORT), accesslog (FILE, "-") and tls (CERT,KEY) may
 * be NULL: see front_opts.  One per process.  Returns NULL after logging why it could not
 * start. */
struct vol_server *vol_server_start(int port, const char *dir, uint64_t idle_ms,
				   const char *metrics, const char *accesslog, const char *tls);
/* The volumes a pull (PUT with Mkv-Pull, docs/protocol.md) may read
 * from: "host:port" (or "http://host:port", a "/svNN" ignored), comma
 * separated, as the master's -volumes.  None: every pull is refused (403).
 * Call before vol_server_start. */
void vol_server_peers(const char *list);
/* Refuse new requests, finish the writes being made durable, stop, free. */
void vol_server_stop(struct vol_server *s);

#endif
