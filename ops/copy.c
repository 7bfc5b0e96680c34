/* copy.c -- the streaming volume-to-volume copy of rebalance and
 * verify -fix: a GET whose body feeds the volume client's stream to the
 * destinations (common/httpc.h), so memory stays at one ring per copy
 * whatever the blob's size.  A PUT gets its last bytes only after the
 * whole blob was read and matched the md5: a truncated or corrupt source
 * fails the PUTs mid-body, and a volume never installs a partial upload
 * (it writes to a temporary file and renames only a complete body).  See
 * ops.h. */
#include "ops.h"
#include "../common/httpc.h"

#include <stdio.h>
#include <string.h>

int ops_copy(const char *src_url, char *const *dst_urls, int ndst, const char *md5,
	     long timeout_ms, char *err)
{
	struct httpc_req reqs[OPS_COPY_MAXDST];
	char why[256];
	int st;

	if (ndst > OPS_COPY_MAXDST) {
		snprintf(err, 256, "more than %d destinations", OPS_COPY_MAXDST);
		return -1;
	}
	for (int i = 0; i < ndst; i++)
		reqs[i].url = dst_urls[i];
	st = httpc_copy(src_url, md5 && strlen(md5) == 32 ? md5 : NULL, reqs, ndst, timeout_ms,
			why);
	if (st != 200) {
		if (st > 0)
			snprintf(err, 256, "GET %s: status %d", src_url, st);
		else
			snprintf(err, 256, "GET %s: %.160s", src_url, why);
		return 1;
	}
	for (int i = 0; i < ndst; i++) {
		if (reqs[i].status < 0) {
			snprintf(err, 256, "PUT %s: %.160s", dst_urls[i], reqs[i].err);
			return -1;
		}
		if (reqs[i].status != 200 && reqs[i].status != 201 && reqs[i].status != 204) {
			snprintf(err, 256, "PUT %s: status %d", dst_urls[i], reqs[i].status);
			return -1;
		}
	}
	return 0;
}
