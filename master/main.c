/* main.c -- `mkv`: minikeyvalue's command line (single or double dash,
 * "-flag value" or "-flag=value"), then one of server, rebuild, rebalance,
 * verify, gc, put, get. */
#include "mkv.h"
#include "../common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: mkv -volumes host:port,... -db DIR [flags] server|rebuild|rebalance\n"
	"       mkv -volumes host:port,... -master H:P|-db DIR [-fix] [-rate MB/s] verify\n"
	"       mkv -volumes host:port,... -master H:P|-db DIR [-delete] [-unlinked] gc\n"
	"       mkv -master H:P [-workers N] put DIR /prefix\n"
	"       mkv -master H:P [-workers N] get /prefix DIR\n"
	"  -volumes LIST     volume servers, comma separated (required)\n"
	"  -db DIR           LevelDB index directory (required, but not for rebalance -master)\n"
	"  -port N           master port (default 3000)\n"
	"  -replicas N       copies of each value (default 3)\n"
	"  -subvolumes N     directories sv00.. per volume (default 10)\n"
	"  -protect          refuse DELETE of a key that is not unlinked\n"
	"  -fallback H:P     redirect missing keys to this server\n"
	"  -md5sum=BOOL      record each value's md5 (default true)\n"
	"  -voltimeout D     volume check timeout, e.g. 1s, 500ms (default 1s)\n"
	"  -puttimeout D     a replica write with no progress this long fails (default 60s)\n"
	"  -idletimeout D    close a client connection silent this long (default 60s)\n"
	"  -maxconns N       client connections served at once (default 10000)\n"
	"  -maxsize BYTES    largest value a PUT may store, else 413 (default: no limit)\n"
	"  -headcheck        HEAD the blob before each redirect (minikeyvalue's behaviour)\n"
	"  -workers N        parallel requests of the commands but server (default 16)\n"
	"  -from DIR         rebuild: keep unlinked keys of this old index unlinked\n"
	"  -master H:P       rebalance, verify, gc, put, get: work through a running master\n"
	"  -fix              verify: re-copy missing and corrupt replicas from good ones\n"
	"  -rate MB/s        verify: read at most this many MB/s in all (default: no cap)\n"
	"  -delete           gc: remove what it finds (default: a dry run)\n"
	"  -unlinked         gc: also remove unlinked keys, bytes and record\n"
	"  -v                log one line per request\n";

static void bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "mkv: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage);
	exit(2);
}

static bool parse_bool(const char *name, const char *v)
{
	if (!v || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "t") || !strcmp(v, "TRUE"))
		return true;
	if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "f") || !strcmp(v, "FALSE"))
		return false;
	bad("invalid boolean value for -%s", name);
	return false;
}

static int parse_int(const char *name, const char *v, int min, int max)
{
	uint64_t n;
	if (!parse_u64(v, (uint64_t)min, (uint64_t)max, &n))
		bad("invalid value for -%s", name);
	return (int)n;
}

/* Returns the buffer the volume names point into (caller frees it and
 * c->volumes). */
static char *split_volumes(struct config *c, const char *list)
{
	char *s = xstrdup(list), *tok, *save = NULL;
	c->nvol = 0;
	c->volumes = xcalloc(strlen(list) + 1, sizeof(char *));
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (int i = 0; i < c->nvol; i++)
			if (!strcmp(c->volumes[i], tok))
				bad("volume %s given twice", tok);
		c->volumes[c->nvol++] = tok;
	}
	return s;
}

int main(int argc, char **argv)
{
	struct config c = {
		.port = 3000, .replicas = 3, .subvolumes = 10, .md5sum = true,
		.voltimeout_ms = 1000, .puttimeout_ms = 60000, .workers = 16,
		.idletimeout_ms = 60000, .maxconns = 10000,
	};
	const char *cmd = NULL, *volumes = NULL;
	char *volbuf;
	int rc, nargs = 0;

	log_init("mkv");
	for (int i = 1; i < argc; i++) {
		char *a = argv[i], *name, *val;
		if (a[0] != '-' || !a[1] || nargs) {
			if (!cmd)
				cmd = a;
			else if (nargs < 2 && (!strcmp(cmd, "put") || !strcmp(cmd, "get")))
				c.args[nargs++] = a;   /* operands: after them, no flags */
			else
				bad("unexpected argument %s", a);
			continue;
		}
		name = a + 1 + (a[1] == '-');
		val = strchr(name, '=');
		if (val)
			*val++ = '\0';
		if (!strcmp(name, "h") || !strcmp(name, "help")) {
			fputs(usage, stdout);
			return 0;
		}
		/* boolean flags take no separate value */
		if (!strcmp(name, "protect")) {
			c.protect = parse_bool(name, val);
			continue;
		}
		if (!strcmp(name, "md5sum")) {
			c.md5sum = parse_bool(name, val);
			continue;
		}
		if (!strcmp(name, "headcheck")) {
			c.headcheck = parse_bool(name, val);
			continue;
		}
		if (!strcmp(name, "fix")) {
			c.fix = parse_bool(name, val);
			continue;
		}
		if (!strcmp(name, "delete")) {
			c.delete_ = parse_bool(name, val);
			continue;
		}
		if (!strcmp(name, "unlinked")) {
			c.unlinked = parse_bool(name, val);
			continue;
		}
		if (!strcmp(name, "v") || !strcmp(name, "verbose")) {
			c.verbose = parse_bool(name, val);
			continue;
		}
		if (!val) {
			if (i + 1 >= argc)
				bad("flag needs an argument: -%s", name);
			val = argv[++i];
		}
		if (!strcmp(name, "volumes"))
			volumes = val;
		else if (!strcmp(name, "db"))
			c.db = val;
		else if (!strcmp(name, "port"))
			c.port = parse_int(name, val, 1, 65535);
		else if (!strcmp(name, "replicas"))
			c.replicas = parse_int(name, val, 1, 64);
		else if (!strcmp(name, "subvolumes"))
			c.subvolumes = parse_int(name, val, 1, 256);
		else if (!strcmp(name, "fallback"))
			c.fallback = *val ? val : NULL;
		else if (!strcmp(name, "voltimeout")) {
			if (!parse_duration_ms(val, &c.voltimeout_ms) || !c.voltimeout_ms)
				bad("invalid duration for -voltimeout: %s", val);
		} else if (!strcmp(name, "puttimeout")) {
			if (!parse_duration_ms(val, &c.puttimeout_ms))
				bad("invalid duration for -puttimeout: %s", val);
		} else if (!strcmp(name, "idletimeout")) {
			if (!parse_duration_ms(val, &c.idletimeout_ms) || c.idletimeout_ms < 1000)
				bad("invalid duration for -idletimeout (at least 1s): %s", val);
		} else if (!strcmp(name, "maxconns"))
			c.maxconns = parse_int(name, val, 1, 1000000);
		else if (!strcmp(name, "maxsize")) {
			if (!parse_u64(val, 0, UINT64_MAX, &c.maxsize))
				bad("invalid value for -maxsize: %s", val);
		} else if (!strcmp(name, "workers"))
			c.workers = parse_int(name, val, 1, 1024);
		else if (!strcmp(name, "from"))
			c.from = val;
		else if (!strcmp(name, "master"))
			c.master = val;
		else if (!strcmp(name, "rate")) {
			char *end;
			double mb = strtod(val, &end);
			if (end == val || *end || !(mb > 0 && mb < 1e9))
				bad("invalid value for -rate (MB/s): %s", val);
			c.rate = (uint64_t)(mb * 1e6);
		}
		else
			bad("flag provided but not defined: -%s", name);
	}
	if (!cmd)
		bad("missing command (server, rebuild, rebalance, verify, gc, put or get)%s", "");
	if (strcmp(cmd, "server") && strcmp(cmd, "rebuild") && strcmp(cmd, "rebalance") &&
	    strcmp(cmd, "verify") && strcmp(cmd, "gc") && strcmp(cmd, "put") && strcmp(cmd, "get"))
		bad("unknown command %s", cmd);
	if (!strcmp(cmd, "put") || !strcmp(cmd, "get")) {
		/* the master knows the volumes: put and get need only it */
		if (!c.master)
			bad("%s needs -master host:port", cmd);
		if (nargs != 2)
			bad(!strcmp(cmd, "put") ? "usage: mkv -master H:P put DIR /prefix%s"
						: "usage: mkv -master H:P get /prefix DIR%s", "");
		return !strcmp(cmd, "put") ? put_main(&c) : get_main(&c);
	}
	if (!volumes || !*volumes)
		bad("-volumes is required%s", "");
	volbuf = split_volumes(&c, volumes);
	if (!c.nvol)
		bad("-volumes is required%s", "");
	if (!c.db && !(c.master && (!strcmp(cmd, "rebalance") || !strcmp(cmd, "verify") ||
				     !strcmp(cmd, "gc"))))
		bad("-db is required%s", "");
	if (c.db && c.master && (!strcmp(cmd, "verify") || !strcmp(cmd, "gc")))
		bad("give -master (online) or -db (offline), not both%s", "");
	if (c.nvol < c.replicas)
		bad("need at least as many volumes as -replicas%s", "");

	if (!strcmp(cmd, "server"))
		rc = server_main(&c);
	else if (!strcmp(cmd, "rebuild"))
		rc = rebuild_main(&c);
	else if (!strcmp(cmd, "verify"))
		rc = verify_main(&c);
	else if (!strcmp(cmd, "gc"))
		rc = gc_main(&c);
	else
		rc = rebalance_main(&c);
	free(c.volumes);
	free(volbuf);
	return rc;
}
