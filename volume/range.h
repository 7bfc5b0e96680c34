/* range.h -- the volume's names for the Range and If-Match readings of
 * common/range.h (nginx's) and for httpc_parse_date: server.c and the
 * tests still spell them so. */
#ifndef VOL_RANGE_H
#define VOL_RANGE_H

#include "../common/httpc.h"
#include "../common/range.h"

#define vol_range range
#define VOL_RANGE_ALL RANGE_ALL
#define VOL_RANGE_ONE RANGE_ONE
#define VOL_RANGE_BAD RANGE_BAD
#define vol_range_parse range_parse
#define vol_etag_listed(list, etag, weak) etag_listed(list, etag, (weak) ? ETAG_WEAK : 0)
#define vol_http_time httpc_parse_date

#endif
