/* mkindex.c -- build a big index straight into LevelDB, for the scale
 * measurements (docs/scale.md, `make bench SCALE=1`).
 *
 *   mkindex -n N -volumes A,B,.. [-replicas 3] [-subvolumes 10]
 *           [-bloom BITS] [-filesize MB] [-blocksize BYTES] [-compress 0|1] DIR
 *   mkindex -check -n N -volumes A,B,.. [-replicas 3] [-subvolumes 10] DIR
 *
 * Key i (0 <= i < N) is scale_key(i) = "/scale/%010u"; its record (SPEC §3)
 * is "HASH" + md5(key) + its locations, placed as the master places them
 * (key2volume), so `mkv` serves it and tools/synthvol lists the same keys
 * at the same places.  Keys go in sorted, in WriteBatches of 10,000, not
 * synced: the fastest way LevelDB takes them.  -bloom BITS writes tables
 * with the bloom filter the master uses (10); 0 writes none, as the Go
 * original does.  -filesize, -blocksize and -compress are LevelDB's
 * max_file_size (in MiB), block_size and compression (0 none, 1 snappy):
 * by default the master's (master/index.c).  The index must not exist yet.  Prints one line:
 * keys=N seconds=S keys_per_s=R bytes=B.  -check reads an index (one
 * `mkv rebuild` wrote from tools/synthvol, say) and exits 1 unless it
 * holds exactly those N records, each as mkindex writes it.
 *
 * The one tool that includes leveldb/c.h: it writes what the master's
 * index.c reads, with LevelDB's own options, and nothing of the master's. */
#include "../common/md5.h"
#include "../common/placement.h"
#include "../common/util.h"

#include <leveldb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* master/index.c's table options */
#define INDEX_FILE_MB 32
#define INDEX_BLOCK_SIZE 4096
#define INDEX_COMPRESS 0

static void usage(void)
{
	fprintf(stderr, "usage: mkindex [-check] -n N -volumes A,B,.. [-replicas 3] "
			"[-subvolumes 10] [-bloom BITS] [-filesize MB] [-blocksize BYTES] "
			"[-compress 0|1] DIR\n");
	exit(2);
}

static unsigned long long du(const char *dir)
{
	char cmd[4200];
	unsigned long long kb = 0;
	FILE *f;
	snprintf(cmd, sizeof(cmd), "du -sk '%s'", dir);
	if ((f = popen(cmd, "r"))) {
		if (fscanf(f, "%llu", &kb) != 1)
			kb = 0;
		pclose(f);
	}
	return kb * 1024;
}

/* Key i and its record, into key and val; the record's length. */
static size_t record_of(unsigned long long i, char *key, int *klen, char *val, size_t vsize,
			char *const *vols, int nvol, int replicas, int subvolumes,
			char (*locs)[LOC_MAX])
{
	char hash[33];
	size_t vlen;
	int nl;
	*klen = snprintf(key, 32, "/scale/%010llu", i);
	nl = placement_volumes(key, (size_t)*klen, vols, nvol, replicas, subvolumes, locs);
	md5_hex(key, (size_t)*klen, hash);
	vlen = (size_t)snprintf(val, vsize, "HASH%s", hash);
	for (int j = 0; j < nl; j++)
		vlen += (size_t)snprintf(val + vlen, vsize - vlen, "%s%s", j ? "," : "", locs[j]);
	return vlen;
}

/* -check: 0 when dir holds exactly the records mkindex writes. */
static int check(const char *dir, unsigned long long n, char *const *vols, int nvol,
		 int replicas, int subvolumes)
{
	leveldb_options_t *o = leveldb_options_create();
	leveldb_readoptions_t *r = leveldb_readoptions_create();
	char *err = NULL, (*locs)[LOC_MAX] = xcalloc((size_t)replicas, LOC_MAX);
	unsigned long long i = 0, bad = 0;
	leveldb_t *db = leveldb_open(o, dir, &err);
	leveldb_iterator_t *it;
	if (err)
		die("mkindex: leveldb_open %s: %s", dir, err);
	leveldb_readoptions_set_fill_cache(r, 0);
	it = leveldb_create_iterator(db, r);
	for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it), i++) {
		char key[32], val[64 + 16 * LOC_MAX];
		int klen;
		size_t vlen = record_of(i, key, &klen, val, sizeof(val), vols, nvol, replicas,
					subvolumes, locs), gk, gv;
		const char *k = leveldb_iter_key(it, &gk), *v = leveldb_iter_value(it, &gv);
		if (gk != (size_t)klen || memcmp(k, key, gk) || gv != vlen || memcmp(v, val, gv)) {
			if (bad++ < 5)
				fprintf(stderr, "mkindex: record %llu: %.*s = %.*s, want %s = %.*s\n", i,
					(int)gk, k, (int)gv, v, key, (int)vlen, val);
		}
	}
	leveldb_iter_destroy(it);
	leveldb_close(db);
	printf("checked=%llu want=%llu bad=%llu\n", i, n, bad);
	return i == n && !bad ? 0 : 1;
}

int main(int argc, char **argv)
{
	bool checking = false;
	unsigned long long n = 0;
	int replicas = 3, subvolumes = 10, bloom = 10, nvol = 0;
	long filesize = INDEX_FILE_MB, blocksize = INDEX_BLOCK_SIZE, compress = INDEX_COMPRESS;
	char *vols[64], *dir = NULL, *err = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-check")) {
			checking = true;
			continue;
		}
		if (*a == '-' && i + 1 >= argc)
			usage();
		if (!strcmp(a, "-n"))
			n = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(a, "-replicas"))
			replicas = atoi(argv[++i]);
		else if (!strcmp(a, "-subvolumes"))
			subvolumes = atoi(argv[++i]);
		else if (!strcmp(a, "-bloom"))
			bloom = atoi(argv[++i]);
		else if (!strcmp(a, "-filesize"))
			filesize = atol(argv[++i]);
		else if (!strcmp(a, "-blocksize"))
			blocksize = atol(argv[++i]);
		else if (!strcmp(a, "-compress"))
			compress = atol(argv[++i]);
		else if (!strcmp(a, "-volumes"))
			for (char *s = strtok(xstrdup(argv[++i]), ","); s && nvol < 64;
			     s = strtok(NULL, ","))
				vols[nvol++] = s;
		else if (*a != '-' && !dir)
			dir = argv[i];
		else
			usage();
	}
	if (!n || !nvol || !dir || n > 9999999999ULL || filesize < 1 || blocksize < 256 ||
	    (compress != 0 && compress != 1))
		usage();
	if (checking)
		return check(dir, n, vols, nvol, replicas, subvolumes);
	struct stat st;
	if (stat(dir, &st) == 0)
		die("mkindex: %s exists; it builds a new index only", dir);

	leveldb_options_t *o = leveldb_options_create();
	leveldb_filterpolicy_t *fp = bloom ? leveldb_filterpolicy_create_bloom(bloom) : NULL;
	leveldb_options_set_create_if_missing(o, 1);
	leveldb_options_set_error_if_exists(o, 1);
	leveldb_options_set_max_file_size(o, (size_t)filesize << 20);
	leveldb_options_set_block_size(o, (size_t)blocksize);
	leveldb_options_set_compression(o, (int)compress);
	/* a memtable is written out as one table, whatever max_file_size says:
	 * one of about the table size keeps the tables the size asked for */
	leveldb_options_set_write_buffer_size(o, (size_t)(filesize > 4 ? filesize : 4) << 20);
	if (fp)
		leveldb_options_set_filter_policy(o, fp);
	leveldb_t *db = leveldb_open(o, dir, &err);
	if (err)
		die("mkindex: leveldb_open %s: %s", dir, err);
	leveldb_writeoptions_t *w = leveldb_writeoptions_create();
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	uint64_t t0 = now_ms();
	char (*locs)[LOC_MAX] = xcalloc((size_t)replicas, LOC_MAX);
	for (unsigned long long i = 0; i < n; i++) {
		char key[32], val[64 + 16 * LOC_MAX];
		int klen;
		size_t vlen = record_of(i, key, &klen, val, sizeof(val), vols, nvol, replicas,
					subvolumes, locs);
		leveldb_writebatch_put(b, key, (size_t)klen, val, vlen);
		if ((i + 1) % 10000 == 0 || i + 1 == n) {
			leveldb_write(db, w, b, &err);
			if (err)
				die("mkindex: leveldb_write: %s", err);
			leveldb_writebatch_clear(b);
		}
	}
	/* flush the memtable: the index is then all tables, as index_close leaves it */
	leveldb_compact_range(db, "", 0, "", 0);
	leveldb_close(db);
	double s = (double)(now_ms() - t0) / 1000;
	printf("keys=%llu seconds=%.1f keys_per_s=%.0f bytes=%llu\n", n, s, (double)n / s, du(dir));
	leveldb_writebatch_destroy(b);
	leveldb_writeoptions_destroy(w);
	leveldb_options_destroy(o);
	if (fp)
		leveldb_filterpolicy_destroy(fp);
	free(locs);
	return 0;
}
