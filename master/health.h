/* health.h -- which volumes and subvolumes are up, kept by background
 * checkers so that a GET never waits on a volume.
 *
 * One thread per volume sends it one HEAD every interval (a second, or
 * -voltimeout if longer), with -voltimeout: of the marker file (".mkv",
 * hidden from listings) in one of its subvolume directories, each in turn
 * (every one in the first round, and after the volume did not answer).
 * A volume that does not answer is down, all its subvolumes with it.
 * A marker missing when first seen is written; a marker that disappears
 * later means the disk was swapped for an empty one, and that subvolume
 * stays down (logged) until the master restarts -- its blobs are gone, so
 * redirecting there would only give 404s. */
#ifndef MKV_HEALTH_H
#define MKV_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "store.h"

/* Start the checkers and wait (up to voltimeout) for a first round. */
void health_start(const struct config *cfg);
void health_stop(void);

/* Volume i of -volumes as the checkers last saw it, for the metrics. */
struct health_info {
	const char *name;
	int subvolumes, up;             /* subvolumes, and how many are up */
	uint64_t check_ns;              /* the last round of checks took this long */
	uint64_t disk_total, disk_free; /* its fullest subvolume's disk (0: not known) */
	uint64_t sent, errors;          /* requests sent to it, and those that failed */
	int misconfig;                  /* enum misconfig */
	char server[64];                /* its Server header ("" not known, e.g. nginx's) */
	bool version_differs;           /* an mkv of another version than the master */
};
/* A volume that disagrees with the master's -volumesecret: refused (403)
 * or expired (410) the master's signature (the volume counts as down),
 * or answered a request with none (it works, but guards nothing). */
enum misconfig { MISCONFIG_NONE, MISCONFIG_REFUSED, MISCONFIG_EXPIRED, MISCONFIG_UNSIGNED };
/* Short names for the metrics' label: "" for none. */
extern const char *const health_misconfig_name[];
int health_volumes(void);
void health_info(int i, struct health_info *h);

#endif
