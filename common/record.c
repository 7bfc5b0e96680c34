/* record.c -- see record.h.  Mirrors minikeyvalue's toRecord/fromRecord. */
#include "record.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

bool record_deleted(const char *val, size_t n)
{
	return n >= 7 && !memcmp(val, "DELETED", 7);
}

void record_hash(const char *val, size_t n, char hash[33])
{
	size_t skip = record_deleted(val, n) ? 7 : 0;
	hash[0] = '\0';
	if (n - skip >= 36 && !memcmp(val + skip, "HASH", 4)) {
		memcpy(hash, val + skip + 4, 32);
		hash[32] = '\0';
	}
}

int record_parse(char *val, size_t n, struct record *r)
{
	char *p = val, *end = val + n;
	val[n] = '\0';
	r->deleted = false;
	r->hash[0] = '\0';
	r->nlocs = 0;
	if (n >= 7 && !memcmp(p, "DELETED", 7)) {
		r->deleted = true;
		p += 7;
	}
	if (end - p >= 36 && !memcmp(p, "HASH", 4)) {
		memcpy(r->hash, p + 4, 32);
		r->hash[32] = '\0';
		p += 36;
	}
	/* Go's strings.Split: "" gives one empty location; we give none. */
	if (p == end)
		return 0;
	for (;;) {
		char *c = memchr(p, ',', (size_t)(end - p));
		if (r->nlocs == RECORD_MAX_LOCS)
			return -1;
		r->locs[r->nlocs++] = p;
		if (!c)
			break;
		*c = '\0';
		p = c + 1;
	}
	return 0;
}

char *record_join_locs(char *const *locs, int n)
{
	struct buf b = {0};
	buf_puts(&b, "");
	for (int i = 0; i < n; i++) {
		if (i)
			buf_append(&b, ",", 1);
		buf_puts(&b, locs[i]);
	}
	return b.data;
}

char *record_encode(const struct record *r, size_t *len)
{
	struct buf b = {0};
	char *locs = record_join_locs((char *const *)r->locs, r->nlocs);
	buf_puts(&b, "");
	if (r->deleted)
		buf_puts(&b, "DELETED");
	if (strlen(r->hash) == 32) {
		buf_puts(&b, "HASH");
		buf_puts(&b, r->hash);
	}
	buf_puts(&b, locs);
	free(locs);
	*len = b.len;
	return b.data;
}
