/* fetch.c -- rebuild's many listings in flight on one thread: the volume
 * client's httpc_multi under the name ops.h gives it. */
#include "ops.h"
#include "../common/httpc.h"
#include "../common/util.h"

#include <stdlib.h>

struct ops_fetch {
	struct httpc_multi *m;
};

struct ops_fetch *ops_fetch_new(int concurrency, size_t max)
{
	struct ops_fetch *f = xmalloc(sizeof(*f));
	f->m = httpc_multi_new(concurrency, max);
	return f;
}

void ops_fetch_add(struct ops_fetch *f, const char *url, void *req)
{
	httpc_multi_add(f->m, url, req);
}

void ops_fetch_run(struct ops_fetch *f, int (*more)(void *ctx),
		   void (*done)(void *ctx, void *req, int status, const char *body, size_t len,
				const char *err),
		   void *ctx)
{
	httpc_multi_run(f->m, more, done, ctx);
}

void ops_fetch_free(struct ops_fetch *f)
{
	if (!f)
		return;
	httpc_multi_free(f->m);
	free(f);
}
