/* main.c -- mkv-volume: flags, signals, and the server of server.c. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "../common/flags.h"
#include "../common/front.h"
#include "../common/util.h"
#include "../common/volsign.h"
#include "server.h"

static const char head[] =
	"usage: mkv-volume [-port N] [-idletimeout D] [-peers LIST] [-volumesecret FILE] [-metrics H:P]\n"
	"                  [-accesslog FILE] [-tls CERT,KEY] DIR\n"
	"       mkv-volume -version\n"
	"  Serve the blobs in DIR (created if missing) over HTTP: GET, HEAD,\n"
	"  PUT, DELETE and JSON listings of directories, as nginx does.\n";

int main(int argc, char **argv)
{
	const char *port_s = getenv("PORT"), *peers = NULL;
	uint64_t idle_ms = 60000;
	const char *metrics = NULL, *accesslog = NULL, *secret = NULL, *tls = NULL;
	char err[300];
	const struct flag flags[] = {
		{"port", FLAG_STR, &port_s, 0, 0, "N", "port to listen on (default: $PORT, else 3001)"},
		{"metrics", FLAG_STR, &metrics, 0, 0, "H:P",
		 "serve /metrics and the status page on this address (default: off)"},
		{"accesslog", FLAG_STR, &accesslog, 0, 0, "FILE",
		 "log every request, nginx's combined format (-: stderr; default: off)"},
		{"idletimeout", FLAG_DURATION, &idle_ms, 1000, 0, "D",
		 "close a client connection silent, or sending its request head, this long (default 60s)"},
		{"peers", FLAG_STR, &peers, 0, 0, "LIST",
		 "the volumes (host:port,...: the master's -volumes) a PUT with Mkv-Pull may read "
		 "from; none: pulls are refused"},
		{"volumesecret", FLAG_STR, &secret, 0, 0, "FILE",
		 "answer only requests signed with a secret of FILE (one or two, one a line), "
		 "else 403, 410 once expired (default: off)"},
		{"tls", FLAG_STR, &tls, 0, 0, "CERT,KEY",
		 "serve HTTPS with this certificate (PEM; SIGHUP reloads it; default: HTTP)"},
		{NULL, 0, NULL, 0, 0, NULL, NULL},
	};
	char *dir[2];
	uint64_t port;
	struct vol_server *s;
	sigset_t sigs;
	int sig;

	log_init(argv[0]);
	log_stamps();
	if (flags_parse(flags, argc, argv, "mkv-volume", head, dir, 2, 2) != 1)
		flags_fail("mkv-volume", head, "give one directory");
	if (secret && volsign_load(secret, err, sizeof(err)) < 0)
		flags_fail("mkv-volume", head, "-volumesecret: %s", err);
	if (!port_s || !*port_s)
		port_s = "3001";
	if (!parse_u64(port_s, 1, 65535, &port))
		flags_fail("mkv-volume", head, "bad port %s", port_s);

	/* Without TZ, glibc re-reads /etc/localtime whenever libmicrohttpd
	 * asks for the time: an open, read and close on every request. */
	if (!getenv("TZ"))
		setenv("TZ", ":/etc/localtime", 1);
	/* Block the stop signals before any thread starts, then wait for one. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	vol_server_peers(peers);
	s = vol_server_start((int)port, dir[0], idle_ms, metrics, accesslog, tls);
	if (!s)
		return 1;
	while (!sigwait(&sigs, &sig) && sig == SIGHUP) {
		front_reload();        /* logrotate, a renewed -tls */
		volsign_reload();      /* a rotated -volumesecret */
	}
	log_msg("signal %d: stopping", sig);
	vol_server_stop(s);
	return 0;
}
