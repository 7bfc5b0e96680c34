/* mkv.h -- the master's configuration (minikeyvalue's flags) and its
 * commands.  main.c parses flags into a struct config and calls one of the
 * *_main functions, which return the process exit code. */
#ifndef MKV_MKV_H
#define MKV_MKV_H

#include <stdbool.h>
#include <stdint.h>

struct config {
	char **volumes;           /* -volumes, in command-line order */
	int nvol;
	const char *db;           /* -db */
	int port;                 /* -port, default 3000 */
	int replicas;             /* -replicas, default 3 */
	int subvolumes;           /* -subvolumes, default 10 */
	bool protect;             /* -protect */
	const char *fallback;     /* -fallback host:port, or NULL */
	bool md5sum;              /* -md5sum, default true */
	uint64_t voltimeout_ms;   /* -voltimeout, default 1s */
	bool headcheck;           /* -headcheck */
	bool verbose;             /* -v */
	int workers;              /* -workers (the commands but server), default 16 */
	const char *from;         /* -from OLD_DB (rebuild) */
	const char *master;       /* -master: the commands make it a URL (ops_master_url) */
	uint64_t puttimeout_ms;   /* -puttimeout: a stalled replica write fails after this */
	uint64_t idletimeout_ms;  /* -idletimeout: a silent client connection is closed */
	int maxconns;             /* -maxconns: connections served at once */
	uint64_t blockcache;      /* -blockcache MB: the index's block cache */
	uint64_t maxsize;         /* -maxsize: largest value a PUT may store (0 = any) */
	const char *metrics;      /* -metrics HOST:PORT: /metrics and the status page, or NULL */
	const char *accesslog;    /* -accesslog FILE ("-": stderr), or NULL */
	const char *keys;         /* -keys FILE: who may do what (docs/security.md), or NULL */
	bool fix;                 /* -fix (verify) */
	bool delete_;             /* -delete (gc) */
	bool unlinked;            /* -unlinked (gc) */
	uint64_t rate;            /* -rate MB/s (verify), as bytes/s; 0 = no cap */
	const char *volumesecret; /* -volumesecret FILE: sign volume requests, or NULL */
	const char *tls;          /* -tls CERT,KEY: serve HTTPS, or NULL */
	uint64_t linkttl_ms;      /* -linkttl: how long a redirect's signature holds */
	uint64_t maxlinkttl_ms;   /* -maxlinkttl: the longest &ttl= ?list&locations grants */
	const char *args[2];      /* put DIR PREFIX, get PREFIX DIR */
};

int server_main(const struct config *cfg);
int rebuild_main(const struct config *cfg);
int rebalance_main(const struct config *cfg);
int verify_main(const struct config *cfg);
int gc_main(const struct config *cfg);
int put_main(const struct config *cfg);
int get_main(const struct config *cfg);

#endif
