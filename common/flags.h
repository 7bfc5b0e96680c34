/* flags.h -- minikeyvalue's (Go's flag package) command line, from a table:
 * "-name value", "-name=value", one or two dashes; booleans take no
 * separate value ("-protect", "-md5sum=false").  One table per program
 * drives both the parsing and the -h text. */
#ifndef MKV_FLAGS_H
#define MKV_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The version and the commit this binary was built from (tools/version.sh),
 * and "mkv/VERSION": the Server header both daemons send and the master
 * compares with its volumes'. */
extern const char mkv_version[], mkv_commit[], mkv_server[];

enum flag_kind {
	FLAG_BOOL,      /* bool *                                          */
	FLAG_STR,       /* const char * (points into argv)                 */
	FLAG_INT,       /* int, within [min, max]                          */
	FLAG_U64,       /* uint64_t, within [min, max]                     */
	FLAG_DURATION,  /* uint64_t milliseconds ("1s", "500ms"), >= min   */
	FLAG_MBPS,      /* uint64_t bytes per second, given in MB/s (> 0)  */
};

struct flag {
	const char *name;         /* without the dash; NULL ends the table */
	enum flag_kind kind;
	void *dst;
	uint64_t min, max;        /* FLAG_INT/U64: bounds; FLAG_DURATION: min */
	const char *arg;          /* the value's name in -h, e.g. "N", "DIR" */
	const char *help;         /* NULL: an alias, not listed in -h */
};

/* Parse argv[1..argc) by the table.  Arguments that are not flags go to
 * pos[] in order (at most npos); after flags_until of them, or after
 * "--", every argument is one, dashes and all.  -h/--help prints head,
 * then the table, to stdout and exits 0; -version prints "prog VERSION
 * (commit HASH)" (tools/version.sh) and exits 0.  On any error: "prog: reason", head's first line to
 * stderr, exit 2.  Returns the number of positional arguments. */
int flags_parse(const struct flag *t, int argc, char **argv, const char *prog,
		const char *head, char **pos, int npos, int flags_until);
/* The error path of flags_parse, for checks made after it. */
void flags_fail(const char *prog, const char *head, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

#endif
