/* s3.h -- the S3 API on the master's port (path style: /<bucket>/<key> is
 * key /<bucket>/<key>).  The front hands a request here when s3_route
 * claims it, and the S3 files answer it from then on, through the front
 * and the store (store.h) alone (s3.c routes; s3req.h lists the rest).  What is supported,
 * and how: docs/s3.md. */
#ifndef MKV_S3_H
#define MKV_S3_H

#include "../common/front.h"

/* The S3 requests' route (front.h): ops/main.c adds it to the master's
 * front. */
extern const struct front_route s3_route;

#endif
