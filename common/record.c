/* record.c -- see record.h.  Mirrors minikeyvalue's toRecord/fromRecord. */
#include "record.h"
#include "util.h"

#include <string.h>

bool record_deleted(const char *val, size_t n)
{
	return n >= 7 && !memcmp(val, "DELETED", 7);
}

bool record_hash(const char *val, size_t n, char hash[33])
{
	size_t skip = record_deleted(val, n) ? 7 : 0;
	hash[0] = '\0';
	if (n - skip < 36 || memcmp(val + skip, "HASH", 4))
		return false;
	memcpy(hash, val + skip + 4, 32);
	hash[32] = '\0';
	return true;
}

int record_parse(char *val, size_t n, struct record *r)
{
	char *p = val, *end = val + n;
	val[n] = '\0';
	r->nlocs = 0;
	if ((r->deleted = record_deleted(val, n)))
		p += 7;
	if (record_hash(val, n, r->hash))
		p += 36;
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

static void put_locs(struct buf *b, char *const *locs, int n)
{
	buf_puts(b, "");            /* b->data is a string even with no locations */
	for (int i = 0; i < n; i++)
		buf_printf(b, "%s%s", i ? "," : "", locs[i]);
}

char *record_join_locs(char *const *locs, int n)
{
	struct buf b = {0};
	put_locs(&b, locs, n);
	return b.data;
}

char *record_encode(const struct record *r, size_t *len)
{
	struct buf b = {0};
	if (r->deleted)
		buf_puts(&b, "DELETED");
	if (strlen(r->hash) == 32) {
		buf_puts(&b, "HASH");
		buf_puts(&b, r->hash);
	}
	put_locs(&b, (char *const *)r->locs, r->nlocs);
	*len = b.len;
	return b.data;
}

bool record_has_loc(char *const *locs, int n, const char *loc)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(locs[i], loc))
			return true;
	return false;
}

bool record_same_locs(char *const *a, int na, char *const *b, int nb)
{
	for (int i = 0; i < na && na == nb; i++)
		if (strcmp(a[i], b[i]))
			return false;
	return na == nb;
}
