/* index.c -- see index.h. */
#include "index.h"
#include "../common/md5.h"
#include "../common/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <leveldb/c.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A write queued for the committer: a batch (of one put or delete, of
 * index_batch_write's puts, or empty: index_sync). */
struct pending {
	leveldb_writebatch_t *batch;
	bool sync;
	void (*done)(void *, int);
	void *arg;
	struct pending *next;
};

struct index {
	leveldb_t *db;
	/* the committer (index_write_async), started at its first write.
	 * It sleeps on wake (posted only when it said it was idle, under
	 * mu), not on a condition variable: a condition variable's wait
	 * takes the mutex back as contended, which costs a futex call at
	 * every unlock after it, and a signal under the mutex makes the
	 * woken thread block on it once more. */
	pthread_mutex_t mu;
	sem_t wake;
	struct pending *head, **tail;
	bool running, stopping, idle;
	pthread_t committer;
	leveldb_options_t *opts;
	leveldb_readoptions_t *ropts;
	leveldb_readoptions_t *scan;  /* iterators: a scan does not fill the block cache */
	leveldb_writeoptions_t *wopts;
	leveldb_writeoptions_t *wopts_nosync;
	leveldb_filterpolicy_t *bloom;
	/* The count (index_keys): each write adds what it changed, read
	 * before it (a key new to the index +1, a key deleted -1), under
	 * count_lock's shared side; a walk takes it alone only to start, so
	 * the writes after its start are those in keys - at_start. */
	pthread_rwlock_t count_lock;
	_Atomic int64_t keys;
	atomic_bool keys_known;
	char *path;
	/* No write after one failed (broken): LevelDB's log writer has
	 * moved past bytes that never reached the disk, so recovery would
	 * cut the log there and drop every later write.  Only the
	 * committer writes, and only it leaves the state (recover), which a
	 * request thread reads without waiting on the disk: why under why_mu,
	 * held for a copy only. */
	atomic_bool broken;
	pthread_mutex_t why_mu;
	char why[300];
	uint64_t tried_ns;           /* the last recover, at most one a second */
	_Atomic uint64_t write_errors;
};

/* The count kept with the index, in DIR/mkv-keys when mkv closed it:
 * "mkv-keys 1 KEYS STATE", STATE the md5 of the LevelDB files' names,
 * sizes and times then.  Anything else opening the index (the Go
 * original, a crash and LevelDB's recovery) writes a new log and
 * MANIFEST, so the state no longer matches and the count is walked
 * again (index_count).  LevelDB and goleveldb leave a file of a name
 * they do not use alone, as they leave the sidecar (mkv-meta/). */
#define KEYS_FILE "mkv-keys"

/* The size of new tables and of the memtable, in MiB (index_open). */
#define TABLE_MB 32

/* LevelDB's files, as scandir picks them. */
static int leveldb_file(const struct dirent *e)
{
	const char *nm = e->d_name, *dot = strrchr(nm, '.');
	return !strcmp(nm, "CURRENT") || !strncmp(nm, "MANIFEST-", 9) ||
	       (dot && (!strcmp(dot, ".ldb") || !strcmp(dot, ".sst") || !strcmp(dot, ".log")));
}

/* The state of the LevelDB files in dir as 32 hex digits: the md5 of a
 * line per file (name, size, time) in name order (the process never calls
 * setlocale: alphasort is strcmp's).  false when there is no index there
 * yet (no CURRENT). */
static bool files_state(const char *dir, char out[33])
{
	struct dirent **e;
	int n = scandir(dir, &e, leveldb_file, alphasort);
	bool current = false;
	struct md5 *m = md5_new();
	for (int i = 0; i < n; i++) {
		char *p = xasprintf("%s/%s", dir, e[i]->d_name), *line;
		struct stat st;
		current |= !strcmp(e[i]->d_name, "CURRENT");
		if (stat(p, &st) == 0) {
			line = xasprintf("%s %lld %lld.%09ld\n", e[i]->d_name, (long long)st.st_size,
					 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
			md5_update(m, line, strlen(line));
			free(line);
		}
		free(p);
		free(e[i]);
	}
	if (n >= 0)
		free(e);
	md5_final_hex(m, out);
	md5_free(m);
	return current;
}

/* Before leveldb_open: the count kept at the last close, if the files
 * are still as that close left them (or 0 for a new index). */
static void keys_load(struct index *idx)
{
	char state[33], want[33], *p = xasprintf("%s/" KEYS_FILE, idx->path);
	long long n;
	FILE *f;
	if (!files_state(idx->path, state)) {
		atomic_store(&idx->keys, 0);
		atomic_store(&idx->keys_known, true);
	} else if ((f = fopen(p, "r"))) {
		if (fscanf(f, "mkv-keys 1 %lld %32s", &n, want) == 2 && n >= 0 &&
		    !strcmp(want, state)) {
			atomic_store(&idx->keys, n);
			atomic_store(&idx->keys_known, true);
		}
		fclose(f);
	}
	free(p);
}

/* After leveldb_close: keep the count, if known, for the next open. */
static void keys_save(struct index *idx)
{
	char state[33], *p, *tmp;
	FILE *f;
	if (!atomic_load(&idx->keys_known) || !files_state(idx->path, state))
		return;
	p = xasprintf("%s/" KEYS_FILE, idx->path);
	tmp = xasprintf("%s.tmp", p);
	if ((f = fopen(tmp, "w"))) {
		bool ok = fprintf(f, "mkv-keys 1 %lld %s\n", (long long)atomic_load(&idx->keys),
				  state) > 0;
		ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
		ok &= fclose(f) == 0;
		if (!ok || rename(tmp, p) < 0) {
			log_msg("keeping the key count: writing %s failed: %m", p);
			unlink(tmp);
		}
	}
	free(tmp);
	free(p);
}

/* One block cache for every index of the process (the index and its
 * sidecar), made at the first open: -blockcache. */
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static leveldb_cache_t *cache;
static int cache_users;
static size_t cache_bytes = (size_t)64 << 20;

void index_cache_size(size_t bytes)
{
	cache_bytes = bytes;
}

static leveldb_cache_t *cache_get(void)
{
	pthread_mutex_lock(&cache_mu);
	if (!cache_users++)
		cache = leveldb_cache_create_lru(cache_bytes);
	pthread_mutex_unlock(&cache_mu);
	return cache;
}

static void cache_put(void)
{
	pthread_mutex_lock(&cache_mu);
	if (!--cache_users)
		leveldb_cache_destroy(cache);
	pthread_mutex_unlock(&cache_mu);
}

/* How many tables LevelDB keeps open: a quarter of the open file limit
 * (front_nofile raised it), at least LevelDB's 1,000.  A table not open is
 * opened (its index and filter read and parsed) by the read that needs
 * it: a big index (100M keys are about 3,300 tables of 2 MB) with fewer
 * open tables than it has pays that on most reads.  Each open table costs
 * a descriptor and about 20 KB (its index and filter blocks). */
static int open_tables(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return 1000;
	return rl.rlim_cur / 4 > 1000 ? (int)(rl.rlim_cur / 4 < 1000000 ? rl.rlim_cur / 4 : 1000000)
				       : 1000;
}

/* mkdir -p the parents of path (LevelDB makes only the last directory;
 * goleveldb, and so minikeyvalue, makes them all).  Errors are left for
 * leveldb_open to report. */
static void make_parents(const char *path)
{
	char *p = xstrdup(path);
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	free(p);
}

static void enqueue(struct index *idx, struct pending *p);

struct index *index_open(const char *path, char **why)
{
	struct index *idx = xcalloc(1, sizeof(*idx));
	char *err = NULL;
	pthread_mutex_init(&idx->mu, NULL);
	sem_init(&idx->wake, 0, 0);
	idx->tail = &idx->head;
	pthread_rwlock_init(&idx->count_lock, NULL);
	pthread_mutex_init(&idx->why_mu, NULL);
	idx->path = xstrdup(path);
	idx->opts = leveldb_options_create();
	idx->ropts = leveldb_readoptions_create();
	idx->scan = leveldb_readoptions_create();
	leveldb_readoptions_set_fill_cache(idx->scan, 0);
	idx->wopts = leveldb_writeoptions_create();
	idx->wopts_nosync = leveldb_writeoptions_create();
	leveldb_options_set_create_if_missing(idx->opts, 1);
	leveldb_options_set_cache(idx->opts, cache_get());
	/* New tables carry a bloom filter (10 bits a key, 1 % false hits): a
	 * read skips the tables that lack its key without reading a block of
	 * them (every key's count-keeping read of a new key, a GET of a
	 * missing one, and the upper levels of a big index).  goleveldb, not
	 * told of a filter, reads such tables and ignores it. */
	idx->bloom = leveldb_filterpolicy_create_bloom(10);
	leveldb_options_set_filter_policy(idx->opts, idx->bloom);
	leveldb_options_set_max_open_files(idx->opts, open_tables());
	/* New tables are written uncompressed, of up to TABLE_MB (LevelDB's
	 * 2 MB is 3,300 tables at 100M keys, and it memory-maps only 1,000
	 * of them: a read past those preads its block, decompresses it and
	 * puts it in the block cache).  A block of a mapped, uncompressed
	 * table is read in place: no copy, no snappy, no cache.  The cost is
	 * disk and page cache: the index takes twice the room (about 115
	 * bytes a key of SPEC §3 records with three locations, against 58).
	 * The memtable is as big as a table, so a flush writes one. */
	leveldb_options_set_compression(idx->opts, leveldb_no_compression);
	leveldb_options_set_max_file_size(idx->opts, (size_t)TABLE_MB << 20);
	leveldb_options_set_write_buffer_size(idx->opts, (size_t)TABLE_MB << 20);
	leveldb_writeoptions_set_sync(idx->wopts, 1);
	make_parents(path);
	keys_load(idx);
	idx->db = leveldb_open(idx->opts, path, &err);
	if (!err) {
		/* from now on the files differ from what the count was kept with */
		char *p = xasprintf("%s/" KEYS_FILE, path);
		unlink(p);
		free(p);
		return idx;
	}
	atomic_store(&idx->keys_known, false);  /* not ours to keep */
	/* another process's flock (EAGAIN), or this one's */
	if (strstr(err, "lock") && (strstr(err, "temporarily unavailable") ||
				    strstr(err, "already held")))
		*why = xasprintf("index %s is in use by another process (%s)", path, err);
	else
		*why = xasprintf("cannot open index %s: %s", path, err);
	leveldb_free(err);
	index_close(idx);
	return NULL;
}

void index_close(struct index *idx)
{
	if (!idx)
		return;
	if (idx->running) {   /* what is queued is written first */
		enqueue(idx, NULL);
		pthread_join(idx->committer, NULL);
	}
	pthread_mutex_destroy(&idx->mu);
	sem_destroy(&idx->wake);
	/* Leave no write only in the log: goleveldb (the Go original, an
	 * operator swapping back) skips log batches numbered below what the
	 * MANIFEST records, which C++ LevelDB advances at each compaction
	 * while its log still holds newer writes.  A compaction of a range
	 * holding no key flushes the memtable into a table, and nothing else. */
	if (idx->db) {
		leveldb_compact_range(idx->db, "", 0, "", 0);
		leveldb_close(idx->db);
		keys_save(idx);
	}
	pthread_rwlock_destroy(&idx->count_lock);
	pthread_mutex_destroy(&idx->why_mu);
	free(idx->path);
	leveldb_options_destroy(idx->opts);
	leveldb_filterpolicy_destroy(idx->bloom);
	cache_put();
	leveldb_readoptions_destroy(idx->ropts);
	leveldb_readoptions_destroy(idx->scan);
	leveldb_writeoptions_destroy(idx->wopts);
	leveldb_writeoptions_destroy(idx->wopts_nosync);
	free(idx);
}

char *index_get(struct index *idx, const char *key, size_t klen, size_t *vlen)
{
	char *err = NULL, *v, *out;
	v = leveldb_get(idx->db, idx->ropts, key, klen, vlen, &err);
	if (err) {
		log_msg("leveldb_get failed: %s", err);
		leveldb_free(err);
	}
	if (!v)
		return NULL;
	out = xstrndup(v, *vlen);
	leveldb_free(v);
	return out;
}

/* What a put (or a delete) of key changes the count by: +1 for a key
 * new to the index, -1 for a delete of one there.  The caller holds
 * count_lock shared, and the key's writes come one at a time (the
 * master's key lock; a rebuild writes each key from one thread), so
 * nothing changes the key between this read and the write. */
static int64_t keys_delta(struct index *idx, const char *key, size_t klen, bool put)
{
	char *err = NULL, *v;
	size_t vlen;
	v = leveldb_get(idx->db, idx->ropts, key, klen, &vlen, &err);
	if (err) {   /* the write will most likely fail too; if not, walk again */
		leveldb_free(err);
		atomic_store(&idx->keys_known, false);
		return 0;
	}
	leveldb_free(v);
	return put ? !v : -(int64_t)(v != NULL);
}

/* The count's change for each write of a batch, summed. */
struct delta {
	struct index *idx;
	int64_t d;
};

static void delta_put(void *s, const char *key, size_t klen, const char *val, size_t vlen)
{
	struct delta *x = s;
	(void)val, (void)vlen;
	x->d += keys_delta(x->idx, key, klen, true);
}

static void delta_delete(void *s, const char *key, size_t klen)
{
	struct delta *x = s;
	x->d += keys_delta(x->idx, key, klen, false);
}

static void set_why(struct index *idx, const char *err)
{
	pthread_mutex_lock(&idx->why_mu);
	snprintf(idx->why, sizeof(idx->why), "index %s refuses writes after a failed one (%s): "
		 "they resume once its disk is sound, else restart the master", idx->path, err);
	pthread_mutex_unlock(&idx->why_mu);
}

/* The highest number of a log file in the index's directory. */
static unsigned long last_log(const struct index *idx)
{
	DIR *d = opendir(idx->path);
	struct dirent *e;
	unsigned long n = 0, k;
	char end[8];
	while (d && (e = readdir(d)))
		if (sscanf(e->d_name, "%lu%7s", &k, end) == 2 && !strcmp(end, ".log") && k > n)
			n = k;
	if (d)
		closedir(d);
	return n;
}

/* Can the disk take the flush: a file made, written, synced and given
 * room for need bytes?  The flush is not tried otherwise: LevelDB keeps
 * a failed flush's error for as long as it is open. */
static bool disk_sound(const struct index *idx, off_t need)
{
	char *p = xasprintf("%s/mkv-probe", idx->path), blk[4096] = {0};
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	bool ok = fd >= 0 && write(fd, blk, sizeof(blk)) == (ssize_t)sizeof(blk) &&
		  fdatasync(fd) == 0 && posix_fallocate(fd, 0, need) == 0;
	if (fd >= 0)
		close(fd);
	unlink(p);
	free(p);
	return ok;
}

/* Out of the broken state (the committer's, at most once a second): when
 * the disk is sound, a compaction of an empty range writes the memtable
 * (every write that was acknowledged, none that failed) to a synced table
 * and begins a fresh log, and the old one, cut where the write failed, is
 * deleted.  It says nothing of how it went: a log of a higher number
 * must be there, and an empty synced write to it must go. */
static void recover(struct index *idx)
{
	leveldb_writebatch_t *b;
	char *mem, *err = NULL;
	unsigned long log0;
	off_t need;
	if (now_ns() - idx->tried_ns < 1000000000ull)
		return;
	idx->tried_ns = now_ns();
	mem = leveldb_property_value(idx->db, "leveldb.approximate-memory-usage");
	/* the table (at most the memtable's size), a new log and MANIFEST */
	need = 2 * (mem ? strtoll(mem, NULL, 10) : (off_t)TABLE_MB << 20) + (256 << 10);
	leveldb_free(mem);
	if (!disk_sound(idx, need))
		return;
	log0 = last_log(idx);
	leveldb_compact_range(idx->db, "", 0, "", 0);
	if (last_log(idx) <= log0)
		return;   /* no fresh log: the next write would follow the cut */
	b = leveldb_writebatch_create();
	leveldb_write(idx->db, idx->wopts, b, &err);
	leveldb_writebatch_destroy(b);
	if (err) {
		set_why(idx, err);
		leveldb_free(err);
		return;
	}
	atomic_store(&idx->broken, false);
	log_msg("index %s: writable again (its writes flushed to a table, a fresh log begun)",
		idx->path);
}

bool index_writable(struct index *idx, char *why, size_t n)
{
	if (!atomic_load(&idx->broken))
		return true;
	pthread_mutex_lock(&idx->why_mu);
	snprintf(why, n, "%s", idx->why);
	pthread_mutex_unlock(&idx->why_mu);
	return false;
}

uint64_t index_write_errors(struct index *idx)
{
	return atomic_load(&idx->write_errors);
}

/* Every write goes here, on the committer: batch b (a key at most once
 * in it), each key read first for the count, all under count_lock's
 * shared side. */
static int commit(struct index *idx, leveldb_writebatch_t *b, bool sync)
{
	struct delta x = {idx, 0};
	char *err = NULL;
	if (atomic_load(&idx->broken))
		recover(idx);
	if (atomic_load(&idx->broken))
		return -1;
	pthread_rwlock_rdlock(&idx->count_lock);
	leveldb_writebatch_iterate(b, &x, delta_put, delta_delete);
	leveldb_write(idx->db, sync ? idx->wopts : idx->wopts_nosync, b, &err);
	if (!err)
		atomic_fetch_add(&idx->keys, x.d);
	pthread_rwlock_unlock(&idx->count_lock);
	if (!err)
		return 0;
	set_why(idx, err);
	idx->tried_ns = now_ns();
	atomic_fetch_add(&idx->write_errors, 1);
	atomic_store(&idx->broken, true);
	log_msg("%s", idx->why);
	leveldb_free(err);
	return -1;
}

/* Every write, the loops' and the others', goes through the committer:
 * one thread writes the index, in batches that group what waits, so that
 * nothing is written after a write that failed (commit) and synced
 * writes of many threads share a sync.  The others wait for theirs. */
struct waiter {
	sem_t done;
	int rc;
};

static void woken(void *arg, int rc)
{
	struct waiter *w = arg;
	w->rc = rc;
	sem_post(&w->done);
}

static int write_wait(struct index *idx, struct pending *p)
{
	struct waiter w;
	sem_init(&w.done, 0, 0);
	p->done = woken;
	p->arg = &w;
	enqueue(idx, p);
	while (sem_wait(&w.done) < 0 && errno == EINTR)
		;
	sem_destroy(&w.done);
	return w.rc;
}

static struct pending *pending_new(leveldb_writebatch_t *b, bool sync)
{
	struct pending *p = xcalloc(1, sizeof(*p));
	p->batch = b;
	p->sync = sync;
	return p;
}

/* A put of val, or a delete of key when val is NULL, as a batch. */
static leveldb_writebatch_t *one_write(const char *key, size_t klen, const char *val, size_t vlen)
{
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	if (val)
		leveldb_writebatch_put(b, key, klen, val, vlen);
	else
		leveldb_writebatch_delete(b, key, klen);
	return b;
}

int index_write(struct index *idx, const char *key, size_t klen, const char *val, size_t vlen,
		bool sync)
{
	return write_wait(idx, pending_new(one_write(key, klen, val, vlen), sync));
}

/* An index_batch is LevelDB's. */
struct index_batch *index_batch_new(void)
{
	return (struct index_batch *)leveldb_writebatch_create();
}

void index_batch_put(struct index_batch *b, const char *key, size_t klen, const char *val,
		     size_t vlen)
{
	leveldb_writebatch_put((leveldb_writebatch_t *)b, key, klen, val, vlen);
}

void index_batch_free(struct index_batch *b)
{
	if (b)
		leveldb_writebatch_destroy((leveldb_writebatch_t *)b);
}

int index_batch_write(struct index *idx, struct index_batch *b)
{
	return write_wait(idx, pending_new((leveldb_writebatch_t *)b, false));
}

bool index_keys(struct index *idx, uint64_t *n)
{
	int64_t k = atomic_load(&idx->keys);
	*n = k > 0 ? (uint64_t)k : 0;
	return atomic_load(&idx->keys_known);
}

int index_count(struct index *idx, const atomic_bool *stop)
{
	leveldb_iterator_t *it;
	int64_t at_start, n = 0;
	if (atomic_load(&idx->keys_known))
		return 0;
	pthread_rwlock_wrlock(&idx->count_lock);
	it = leveldb_create_iterator(idx->db, idx->scan);  /* its view: the writes so far */
	at_start = atomic_load(&idx->keys);
	pthread_rwlock_unlock(&idx->count_lock);
	for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it) && !atomic_load(stop);
	     leveldb_iter_next(it))
		n++;
	leveldb_iter_destroy(it);
	if (atomic_load(stop))
		return -1;
	atomic_fetch_add(&idx->keys, n - at_start);
	atomic_store(&idx->keys_known, true);
	return 0;
}

int index_sync(struct index *idx)
{
	/* an empty synced write syncs the log */
	return write_wait(idx, pending_new(leveldb_writebatch_create(), true));
}

/* Write the items of list p whose sync is sync, as one batch; then tell
 * each and free it.  Returns the others, in order. */
static struct pending *write_batch(struct index *idx, struct pending *p, bool sync)
{
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	struct pending *rest = NULL, **rt = &rest, *mine = NULL, **mt = &mine, *next;
	int rc = 0;
	for (; p; p = next) {
		next = p->next;
		p->next = NULL;
		if (p->sync != sync) {
			*rt = p;
			rt = &p->next;
			continue;
		}
		leveldb_writebatch_append(b, p->batch);
		*mt = p;
		mt = &p->next;
	}
	if (mine)
		rc = commit(idx, b, sync);
	leveldb_writebatch_destroy(b);
	for (p = mine; p; p = next) {
		next = p->next;
		if (p->done)
			p->done(p->arg, rc);
		leveldb_writebatch_destroy(p->batch);
		free(p);
	}
	return rest;
}

/* The committer: everything queued, in two batches: the writes that need
 * no sync first (a PUT's DELETED record, which its bytes wait for), then
 * one synced batch of the others.  Writes of one key never wait in the
 * queue together (each waits for the one before, under the key's lock),
 * so only writes of different keys change order. */
static void *committer(void *arg)
{
	struct index *idx = arg;
	for (;;) {
		struct pending *p;
		bool stop;
		pthread_mutex_lock(&idx->mu);
		p = idx->head;
		idx->head = NULL;
		idx->tail = &idx->head;
		stop = idx->stopping;
		idx->idle = !p && !stop;
		pthread_mutex_unlock(&idx->mu);
		if (p)
			write_batch(idx, write_batch(idx, p, false), true);
		else if (stop)
			return NULL;   /* stopping, and nothing is left */
		else if (atomic_load(&idx->broken)) { /* writes resume without one coming */
			struct timespec t;
			clock_gettime(CLOCK_REALTIME, &t);
			t.tv_sec++;
			sem_timedwait(&idx->wake, &t);
			recover(idx);
		}
		else
			while (sem_wait(&idx->wake) < 0 && errno == EINTR)
				;
	}
}

/* Queue p for the committer (started at the first), or with p NULL have
 * it stop once the queue is written; wake it if it sleeps. */
static void enqueue(struct index *idx, struct pending *p)
{
	bool wake;
	pthread_mutex_lock(&idx->mu);
	if (!idx->running) {
		if (pthread_create(&idx->committer, NULL, committer, idx))
			die("pthread_create failed: out of threads");
		idx->running = true;
	}
	if (p) {
		*idx->tail = p;
		idx->tail = &p->next;
	} else {
		idx->stopping = true;
	}
	wake = idx->idle;
	idx->idle = false;
	pthread_mutex_unlock(&idx->mu);
	if (wake)
		sem_post(&idx->wake);
}

void index_write_async(struct index *idx, const char *key, size_t klen, const char *val,
		       size_t vlen, bool sync, void (*done)(void *arg, int rc), void *arg)
{
	struct pending *p = pending_new(one_write(key, klen, val, vlen), sync);
	p->done = done;
	p->arg = arg;
	enqueue(idx, p);
}

/* An index_iter is LevelDB's iterator. */
struct index_iter *index_iter_new(struct index *idx, const char *start, size_t slen)
{
	leveldb_iterator_t *it = leveldb_create_iterator(idx->db, idx->scan);
	leveldb_iter_seek(it, start, slen);
	return (struct index_iter *)it;
}

void index_iter_seek(struct index_iter *it, const char *key, size_t len)
{
	leveldb_iter_seek((leveldb_iterator_t *)it, key, len);
}

bool index_iter_valid(struct index_iter *it)
{
	return leveldb_iter_valid((leveldb_iterator_t *)it);
}

void index_iter_next(struct index_iter *it)
{
	leveldb_iter_next((leveldb_iterator_t *)it);
}

const char *index_iter_key(struct index_iter *it, size_t *len)
{
	return leveldb_iter_key((leveldb_iterator_t *)it, len);
}

const char *index_iter_value(struct index_iter *it, size_t *len)
{
	return leveldb_iter_value((leveldb_iterator_t *)it, len);
}

void index_iter_free(struct index_iter *it)
{
	if (it)
		leveldb_iter_destroy((leveldb_iterator_t *)it);
}
