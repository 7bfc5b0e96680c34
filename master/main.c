/* main.c -- `mkv`: minikeyvalue's command line (single or double dash,
 * "-flag value" or "-flag=value"), then one of server, rebuild, rebalance,
 * verify, gc, put, get. */
#include "mkv.h"
#include "../common/flags.h"
#include "../common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char head[] =
	"usage: mkv -volumes host:port,... -db DIR [flags] server|rebuild|rebalance\n"
	"       mkv -volumes host:port,... -master H:P|-db DIR [-fix] [-rate MB/s] verify\n"
	"       mkv -volumes host:port,... -master H:P|-db DIR [-delete] [-unlinked] gc\n"
	"       mkv -master H:P [-workers N] put DIR /prefix\n"
	"       mkv -master H:P [-workers N] get /prefix DIR\n";

static struct config c = {
	.port = 3000, .replicas = 3, .subvolumes = 10, .md5sum = true,
	.voltimeout_ms = 1000, .puttimeout_ms = 60000, .workers = 16,
	.idletimeout_ms = 60000, .maxconns = 10000,
};
static const char *volumes;

static const struct flag flags[] = {
	{"volumes", FLAG_STR, &volumes, 0, 0, "LIST", "volume servers, comma separated (required)"},
	{"db", FLAG_STR, &c.db, 0, 0, "DIR", "LevelDB index directory (required, but not for rebalance -master)"},
	{"port", FLAG_INT, &c.port, 1, 65535, "N", "master port (default 3000)"},
	{"replicas", FLAG_INT, &c.replicas, 1, 64, "N", "copies of each value (default 3)"},
	{"subvolumes", FLAG_INT, &c.subvolumes, 1, 256, "N", "directories sv00.. per volume (default 10)"},
	{"protect", FLAG_BOOL, &c.protect, 0, 0, NULL, "refuse DELETE of a key that is not unlinked"},
	{"fallback", FLAG_STR, &c.fallback, 0, 0, "H:P", "redirect missing keys to this server"},
	{"md5sum", FLAG_BOOL, &c.md5sum, 0, 0, NULL, "record each value's md5 (default true; -md5sum=false)"},
	{"voltimeout", FLAG_DURATION, &c.voltimeout_ms, 1, 0, "D", "volume check timeout, e.g. 1s, 500ms (default 1s)"},
	{"puttimeout", FLAG_DURATION, &c.puttimeout_ms, 0, 0, "D", "a replica write with no progress this long fails (default 60s)"},
	{"idletimeout", FLAG_DURATION, &c.idletimeout_ms, 1000, 0, "D", "close a client connection silent this long (default 60s)"},
	{"maxconns", FLAG_INT, &c.maxconns, 1, 1000000, "N", "client connections served at once (default 10000)"},
	{"maxsize", FLAG_U64, &c.maxsize, 0, UINT64_MAX, "BYTES", "largest value a PUT may store, else 413 (default: no limit)"},
	{"headcheck", FLAG_BOOL, &c.headcheck, 0, 0, NULL, "HEAD the blob before each redirect (minikeyvalue's behaviour)"},
	{"workers", FLAG_INT, &c.workers, 1, 1024, "N", "parallel requests of the commands but server (default 16)"},
	{"from", FLAG_STR, &c.from, 0, 0, "DIR", "rebuild: keep unlinked keys of this old index unlinked"},
	{"master", FLAG_STR, &c.master, 0, 0, "H:P", "rebalance, verify, gc, put, get: work through a running master"},
	{"fix", FLAG_BOOL, &c.fix, 0, 0, NULL, "verify: re-copy missing and corrupt replicas from good ones"},
	{"rate", FLAG_MBPS, &c.rate, 0, 0, "MB/s", "verify: read at most this many MB/s in all (default: no cap)"},
	{"delete", FLAG_BOOL, &c.delete_, 0, 0, NULL, "gc: remove what it finds (default: a dry run)"},
	{"unlinked", FLAG_BOOL, &c.unlinked, 0, 0, NULL, "gc: also remove unlinked keys, bytes and record"},
	{"v", FLAG_BOOL, &c.verbose, 0, 0, NULL, "log one line per request"},
	{"verbose", FLAG_BOOL, &c.verbose, 0, 0, NULL, NULL},
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

static void bad(const char *fmt, const char *arg)
{
	flags_fail("mkv", head, fmt, arg);
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
	char *pos[3], *volbuf;
	const char *cmd;
	int rc, npos;

	log_init("mkv");
	/* the command, then (put, get) two operands, after which no flags */
	npos = flags_parse(flags, argc, argv, "mkv", head, pos, 3, 2);
	cmd = npos ? pos[0] : NULL;
	if (c.fallback && !*c.fallback)
		c.fallback = NULL;
	for (int i = 1; i < npos; i++)
		c.args[i - 1] = pos[i];
	if (npos > 1 && cmd && strcmp(cmd, "put") && strcmp(cmd, "get"))
		bad("unexpected argument %s", pos[1]);
	if (!cmd)
		bad("missing command (server, rebuild, rebalance, verify, gc, put or get)%s", "");
	if (strcmp(cmd, "server") && strcmp(cmd, "rebuild") && strcmp(cmd, "rebalance") &&
	    strcmp(cmd, "verify") && strcmp(cmd, "gc") && strcmp(cmd, "put") && strcmp(cmd, "get"))
		bad("unknown command %s", cmd);
	if (!strcmp(cmd, "put") || !strcmp(cmd, "get")) {
		/* the master knows the volumes: put and get need only it */
		if (!c.master)
			bad("%s needs -master host:port", cmd);
		if (npos != 3)
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
