/* s3.h -- the S3 API on the master's port (path style: /<bucket>/<key> is
 * key /<bucket>/<key>).  server.c hands a request here when s3_is_request
 * says so, and the S3 files answer it from then on, through the front
 * (front.h; s3.c routes; s3req.h lists the others).  What is supported,
 * and how: docs/s3.md. */
#ifndef MKV_S3_H
#define MKV_S3_H

#include <stdbool.h>
#include <stddef.h>
#include "front.h"
#include "index.h"
#include "mkv.h"

struct s3req;

void s3_init(const struct config *cfg, struct index *idx);
/* An S3 query form, or an S3 signature (Authorization: AWS4-HMAC-SHA256
 * or AWS, X-Amz-Date, X-Amz-Content-Sha256)?  query may be NULL. */
bool s3_is_request(struct MHD_Connection *c, const char *method, const char *query);
/* At the access handler's first call; path is raw (still percent-encoded),
 * query the raw query string or NULL.  Never fails. */
struct s3req *s3_new(struct MHD_Connection *c, const char *method, const char *path,
		     const char *query);
/* Every later call of the access handler; returns FRONT_YES or FRONT_NO. */
int s3_handler(struct s3req *s, const char *data, size_t *size);
/* The status answered (0 before an answer), for the request log. */
int s3_status(const struct s3req *s);
/* The request is over (answered or the client went away): frees s once
 * its workers are done with it. */
void s3_done(struct s3req *s);

#endif
