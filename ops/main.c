/* main.c -- `mkv`: minikeyvalue's command line (single or double dash,
 * "-flag value" or "-flag=value"), then one of server, rebuild, rebalance,
 * verify, gc, put, get. */
#include "../master/mkv.h"
#include "../master/store.h"
#include "ops.h"
#include "../s3/s3.h"
#include "../common/flags.h"
#include "../common/httpc.h"
#include "../common/vconn.h"
#include "../common/volsign.h"
#include "../common/util.h"

#include <openssl/x509_vfy.h>
#include <stdlib.h>
#include <string.h>

/* Each command's synopsis; all of them are the usage. */
#define SERVER "mkv -volumes host:port,... -db DIR [flags] server|rebuild|rebalance\n"
#define VERIFY "mkv -volumes host:port,... -master H:P|-db DIR [-fix] [-rate MB/s] verify\n"
#define GC "mkv -volumes host:port,... -master H:P|-db DIR [-delete] [-unlinked] gc\n"
#define PUT "mkv -master H:P [-workers N] put DIR /prefix\n"
#define GET "mkv -master H:P [-workers N] get /prefix DIR\n"
static const char head[] = "usage: mkv [flags] server|rebuild|rebalance|verify|gc|put|get ... "
			   "(mkv -help: each command's)\n       " SERVER "       " VERIFY
			   "       " GC "       " PUT "       " GET "       mkv -version\n";

static struct config c = {
	.port = 3000, .replicas = 3, .subvolumes = 10, .md5sum = true,
	.voltimeout_ms = 1000, .puttimeout_ms = 60000, .workers = 16,
	.idletimeout_ms = 60000, .maxconns = 10000, .linkttl_ms = 60000,
	.maxlinkttl_ms = 24 * 3600 * 1000, .blockcache = 64,
};
static const char *volumes;

#define BOOL(name, dst, help) {name, FLAG_BOOL, dst, 0, 0, NULL, help}
#define STR(name, dst, arg, help) {name, FLAG_STR, dst, 0, 0, arg, help}

static const struct flag flags[] = {
	STR("volumes", &volumes, "LIST", "volume servers, comma separated (required)"),
	STR("db", &c.db, "DIR", "LevelDB index directory (required, but not for rebalance -master)"),
	{"port", FLAG_INT, &c.port, 1, 65535, "N", "master port (default 3000)"},
	{"replicas", FLAG_INT, &c.replicas, 1, 64, "N", "copies of each value (default 3)"},
	{"subvolumes", FLAG_INT, &c.subvolumes, 1, 256, "N", "directories sv00.. per volume (default 10)"},
	BOOL("protect", &c.protect, "refuse DELETE of a key that is not unlinked"),
	STR("fallback", &c.fallback, "H:P", "redirect missing keys to this server"),
	BOOL("md5sum", &c.md5sum, "record each value's md5 (default true; -md5sum=false)"),
	{"voltimeout", FLAG_DURATION, &c.voltimeout_ms, 1, 0, "D", "volume check timeout, e.g. 1s, 500ms (default 1s)"},
	{"puttimeout", FLAG_DURATION, &c.puttimeout_ms, 0, 0, "D", "a replica write with no progress this long fails (default 60s)"},
	{"idletimeout", FLAG_DURATION, &c.idletimeout_ms, 1000, 0, "D", "close a client connection silent this long (default 60s)"},
	{"maxconns", FLAG_INT, &c.maxconns, 1, 1000000, "N", "client connections served at once (default 10000)"},
	{"maxsize", FLAG_U64, &c.maxsize, 0, UINT64_MAX, "BYTES", "largest value a PUT may store, else 413 (default: no limit)"},
	{"blockcache", FLAG_U64, &c.blockcache, 1, 1 << 20, "MB", "the index's block cache, in MiB (default 64; docs/scale.md)"},
	STR("metrics", &c.metrics, "H:P", "serve /metrics and the status page on this address (default: off)"),
	STR("accesslog", &c.accesslog, "FILE", "log every request, nginx's combined format (-: stderr; default: off)"),
	STR("volumesecret", &c.volumesecret, "FILE", "sign every volume request with the first secret of FILE (docs/security.md)"),
	{"linkttl", FLAG_DURATION, &c.linkttl_ms, 1000, 0, "D", "how long a redirect's signature holds (default 60s)"},
	{"maxlinkttl", FLAG_DURATION, &c.maxlinkttl_ms, 1000, 0, "D", "the longest &ttl= a ?list&locations may ask (default 24h)"},
	STR("tls", &c.tls, "CERT,KEY", "serve HTTPS with this certificate (PEM; SIGHUP reloads it)"),
	STR("cacert", &vol_cacert, "FILE", "verify https:// volumes and -master by these CAs (default: the system's)"),
	STR("keys", &c.keys, "FILE", "keys and what each may do; requests must be signed (default: off)"),
	BOOL("headcheck", &c.headcheck, "HEAD the blob before each redirect (minikeyvalue's behaviour)"),
	{"workers", FLAG_INT, &c.workers, 1, 1024, "N", "parallel requests of the commands but server (default 16)"},
	STR("from", &c.from, "DIR", "rebuild: keep unlinked keys of this old index unlinked"),
	STR("master", &c.master, "H:P", "rebalance, verify, gc, put, get: work through a running master"),
	BOOL("fix", &c.fix, "verify: re-copy missing and corrupt replicas from good ones"),
	{"rate", FLAG_MBPS, &c.rate, 0, 0, "MB/s", "verify: read at most this many MB/s in all (default: no cap)"},
	BOOL("delete", &c.delete_, "gc: remove what it finds (default: a dry run)"),
	BOOL("unlinked", &c.unlinked, "gc: also remove unlinked keys, bytes and record"),
	BOOL("v", &c.verbose, "log one line per request"),
	BOOL("verbose", &c.verbose, NULL),
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* A bad command line prints the synopsis of the command it names. */
static const char *usage = head;
#define bad(...) flags_fail("mkv", usage, __VA_ARGS__)

static const struct command {
	const char *name;
	int (*run)(const struct config *cfg);
	bool online;              /* -master may stand for -db */
	const char *usage;
} commands[] = {
	{"server", server_main, false, "usage: " SERVER},
	{"rebuild", rebuild_main, false, "usage: " SERVER},
	{"rebalance", rebalance_main, true, "usage: " SERVER},
	{"verify", verify_main, true, "usage: " VERIFY}, {"gc", gc_main, true, "usage: " GC},
	{"put", put_main, true, "usage: " PUT}, {"get", get_main, true, "usage: " GET},
};

/* The command named name, or NULL. */
static const struct command *find(const char *name)
{
	for (size_t i = 0; name && i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(name, commands[i].name))
			return &commands[i];
	return NULL;
}

/* Returns the buffer the volume names point into (caller frees it and
 * c->volumes). */
static char *split_volumes(struct config *c, const char *list)
{
	char *s = xstrdup(list), *tok, *save = NULL;
	c->nvol = 0;
	c->volumes = xcalloc(strlen(list) + 1, sizeof(char *));
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *name = (char *)vol_scheme(tok);   /* https:// marks it */
		if (strchr(name, '/'))
			bad("volume %s: give host:port, http://host:port or https://host:port", tok);
		for (int i = 0; i < c->nvol; i++)
			if (!strcmp(c->volumes[i], name))
				bad("volume %s given twice", name);
		c->volumes[c->nvol++] = name;
	}
	return s;
}

/* The command named on the command line, then its operands checked. */
static const struct command *command(const char *cmd, int npos, char **pos)
{
	const struct command *k = find(cmd);
	usage = k ? k->usage : head;
	if (!cmd)
		bad("missing command");
	if (!k)
		bad("unknown command %s", cmd);
	if (npos > 1 && k->run != put_main && k->run != get_main)
		bad("unexpected argument %s", pos[1]);
	return k;
}

int main(int argc, char **argv)
{
	char *pos[3], *volbuf, err[OPS_ERR];
	const struct command *cmd;
	int rc, npos;
	bool putget;

	log_init("mkv");
	for (int i = argc - 1; i > 0 && usage == head; i--)   /* for a bad flag, before */
		usage = find(argv[i]) ? find(argv[i])->usage : head;   /* the command is known */
	/* the command, then (put, get) two operands, after which no flags */
	npos = flags_parse(flags, argc, argv, "mkv", usage, pos, 3, 2);
	cmd = command(npos ? pos[0] : NULL, npos, pos);
	httpc_global_init();
	if (c.volumesecret && volsign_load(c.volumesecret, err, sizeof(err)) < 0)
		bad("-volumesecret: %s", err);
	X509_STORE *cas = X509_STORE_new();   /* as libcurl's OpenSSL reads it */
	if (vol_cacert && (!cas || X509_STORE_load_file(cas, vol_cacert) != 1))
		bad("-cacert %s: no CA certificate there (PEM)", vol_cacert);
	X509_STORE_free(cas);
	/* the commands talk to the master too, by this URL (httpc_master) */
	c.master = ops_master_url(c.master);
	if (c.fallback && !*c.fallback)
		c.fallback = NULL;
	for (int i = 1; i < npos; i++)
		c.args[i - 1] = pos[i];
	/* put and get: the master knows the volumes (get -volumesecret signs
	 * for those of -volumes only) */
	putget = cmd->run == put_main || cmd->run == get_main;
	if (putget && !c.master)
		bad("%s needs -master host:port", cmd->name);
	if (putget && npos != 3)
		bad("%s takes two operands", cmd->name);
	volbuf = split_volumes(&c, volumes ? volumes : "");
	if (!putget) {
		if (!c.nvol)
			bad("-volumes is required");
		if (!c.db && !(c.master && cmd->online))
			bad("-db is required");
		if (c.db && c.master && (cmd->run == verify_main || cmd->run == gc_main))
			bad("give -master (online) or -db (offline), not both");
		if (c.nvol < c.replicas)
			bad("need at least as many volumes as -replicas");
		index_cache_size((size_t)c.blockcache << 20);
	}
	if (cmd->run != server_main) {
		ops_signals_init();
		/* the server's, once its signals are set */
		if (!putget && vol_check_names(&c, true) < 0)
			return 2;
	} else {
		front_route_add(&s3_route);   /* S3 on the master's port (docs/s3.md) */
	}
	rc = cmd->run(&c);
	free(c.volumes);
	free(volbuf);
	return rc;
}
