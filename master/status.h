/* status.h -- what the master shows on its metrics listener: its own
 * families (per volume up, check latency, requests sent and their errors;
 * writes handed off; key-lock conflicts; keys in the index) and the status
 * page's JSON (/status) and HTML (/).  docs/protocol.md §7. */
#ifndef MKV_STATUS_H
#define MKV_STATUS_H

#include "index.h"
#include "mkv.h"

/* Register the collector; with -metrics, start counting the index's keys
 * (a thread that walks it after writes) and the status page's sampler;
 * status_stop ends both before the index closes. */
void status_start(const struct config *cfg, struct index *idx);
void status_stop(void);

/* Counted where they happen. */
void status_count_handoff(void);   /* a write placed on a volume not its home */
void status_count_conflict(void);  /* a 409: another write of the key runs */

#endif
