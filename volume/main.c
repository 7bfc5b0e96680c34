/* main.c -- mkv-volume: flags, signals, and the server of server.c. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "server.h"

static const char usage[] =
	"usage: mkv-volume [-port N] DIR\n"
	"  Serve the blobs in DIR (created if missing) over HTTP: GET, HEAD,\n"
	"  PUT, DELETE and JSON listings of directories, as nginx does.\n"
	"  -port N   port to listen on (default: $PORT, else 3001)\n";

static void bad_usage(const char *why)
{
	fprintf(stderr, "mkv-volume: %s\n%.*s", why, (int)(strchr(usage, '\n') - usage + 1), usage);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *port_s = getenv("PORT"), *dir = NULL;
	uint64_t port;
	struct vol_server *s;
	sigset_t sigs;
	int sig;

	log_init(argv[0]);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq;
		if (a[0] != '-' || !a[1]) {
			if (dir)
				bad_usage("only one directory");
			dir = a;
			continue;
		}
		a += a[1] == '-' ? 2 : 1;            /* -flag and --flag alike */
		eq = strchr(a, '=');
		if (!strcmp(a, "h") || !strcmp(a, "help")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strncmp(a, "port", 4) && (a[4] == '\0' || a[4] == '=')) {
			if (eq)
				port_s = eq + 1;
			else if (++i < argc)
				port_s = argv[i];
			else
				bad_usage("-port needs a value");
		} else {
			char why[128];
			snprintf(why, sizeof(why), "unknown flag %.100s", argv[i]);
			bad_usage(why);
		}
	}
	if (!dir)
		bad_usage("no directory given");
	if (!port_s || !*port_s)
		port_s = "3001";
	if (!parse_u64(port_s, 1, 65535, &port))
		bad_usage("bad port");

	/* Without TZ, glibc re-reads /etc/localtime whenever libmicrohttpd
	 * asks for the time: an open, read and close on every request. */
	if (!getenv("TZ"))
		setenv("TZ", ":/etc/localtime", 1);
	/* Block the stop signals before any thread starts, then wait for one. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	s = vol_server_start((int)port, dir);
	if (!s)
		return 1;
	sigwait(&sigs, &sig);
	log_msg("signal %d: stopping", sig);
	vol_server_stop(s);
	return 0;
}
