/* date.c -- see date.h.  Days to civil date after Howard Hinnant's
 * days_from_civil inverse (proleptic Gregorian, any time_t). */
#include "date.h"

#include <stdint.h>
#include <string.h>

static void put2(char *p, int v)
{
	p[0] = (char)('0' + v / 10);
	p[1] = (char)('0' + v % 10);
}

static void put3(char *p, const char *s)
{
	memcpy(p, s, 3);
}

void vol_http_date(time_t t, char out[VOL_DATE_LEN])
{
	static const char wday[] = "ThuFriSatSunMonTueWed";     /* 1970-01-01 was a Thursday */
	static const char mon[] = "MarAprMayJunJulAugSepOctNovDecJanFeb";
	int64_t days = (int64_t)t / 86400, secs = (int64_t)t % 86400;
	int64_t z, era, doe, yoe, doy, mp, y;
	if (secs < 0) {
		secs += 86400;
		days--;
	}
	z = days + 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	y = yoe + era * 400 + (mp >= 10);
	put3(out, wday + 3 * (((days % 7) + 7) % 7));
	out[3] = ',';
	out[4] = ' ';
	put2(out + 5, (int)(doy - (153 * mp + 2) / 5 + 1));
	out[7] = ' ';
	put3(out + 8, mon + 3 * mp);
	out[11] = ' ';
	put2(out + 12, (int)(y / 100 % 100));
	put2(out + 14, (int)(y % 100));
	out[16] = ' ';
	put2(out + 17, (int)(secs / 3600));
	out[19] = ':';
	put2(out + 20, (int)(secs / 60 % 60));
	out[22] = ':';
	put2(out + 23, (int)(secs % 60));
	memcpy(out + 25, " GMT", 5);
}
