/* date.h -- RFC 1123 dates ("Sun, 06 Nov 1994 08:49:37 GMT") without
 * gmtime/strftime, whose locks and locale lookups show up on the GET path. */
#ifndef VOL_DATE_H
#define VOL_DATE_H

#include <time.h>

#define VOL_DATE_LEN 30   /* 29 characters and the NUL */

void vol_http_date(time_t t, char out[VOL_DATE_LEN]);

#endif
