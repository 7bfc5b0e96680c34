/* loadgen.c -- the load tool behind `make bench` (bench/run.sh).
 *
 * One process, one libcurl multi handle, -c requests in flight.  Every mode
 * prints one line of key=value pairs on stdout (the script reads `rate=`)
 * and exits 1 if any request got an answer it should not have.
 *
 *   loadgen cycle    -c 16 -d SECS -s SIZE [-p PREFIX] BASE
 *       PUT BASE/PREFIX/<fresh key>, GET it (following a redirect, length
 *       checked), DELETE it; repeat until SECS are up.  rate = cycles/s.
 *   loadgen direct   -c 16 -d SECS -s SIZE -volumes A,B,.. [-replicas 3]
 *                    [-subvolumes 10] [-p PREFIX]
 *       The volume requests of one cycle through the master, made straight:
 *       PUT the key's blob to each of its volumes at key2path (SPEC §2),
 *       GET it from the first, DELETE it from each, one request after the
 *       other.  rate = cycles/s: what the volumes allow the master.
 *   loadgen walk     -c 16 -volumes A,B,..
 *       The listings `mkv rebuild` asks the volumes for, made straight:
 *       each volume's top, each svNN/, each /xx/ plainly and then again
 *       with ?recursive -- or, on a volume that answered ?recursive with
 *       directories (nginx), its /xx/yy/ straight away -- and every
 *       directory below that a plain answer names.  rate = listings/s.
 *   loadgen move     -c 16 -n N -s SIZE -volumes OLD,.. -to NEW,..
 *                    [-replicas 3] [-subvolumes 10] [-p PREFIX] [-pull]
 *       The volume requests of a rebalance OLD -> NEW, made straight: for
 *       each key that needs a copy, GET it from its first old location,
 *       PUT it to each new location that lacks it, DELETE it from each old
 *       location that is no longer used.  rate = moved keys/s.  With
 *       -pull, what a rebalance between mkv-volumes started with -peers
 *       asks instead of the GET and PUT: a PUT with Mkv-Pull naming the
 *       first old location (and Mkv-Pull-Md5, the value's md5) to each new
 *       location, so the volume fetches the blob itself (docs/protocol.md).
 *   loadgen get      -c 16 -d SECS -n N [-p PREFIX] BASE
 *       GET BASE/PREFIX/k<i> for i round robin in [0,N), following
 *       redirects.  rate = requests/s, plus MiB/s.
 *   loadgen put      -c 16 -n N -s SIZE [-p PREFIX] BASE
 *       PUT N keys BASE/PREFIX/k<i>.  rate = PUTs/s.
 *   loadgen populate -c 64 -n N -s SIZE -volumes A,B,.. [-replicas 3]
 *                    [-subvolumes 10] [-p PREFIX] [-dirs D1,D2,..]
 *       PUT each key's blob straight to its volumes at key2path, as the
 *       master would have placed it (docs/protocol.md §2).  rate = files/s.  With
 *       -dirs (one data directory per volume, in -volumes order) the files
 *       are written straight into the directories instead, as mkv-volume
 *       lays them out (md5 in the user.mkv.md5 xattr), without fsync: the
 *       fast way to fill volumes that are not running yet.
 *   loadgen moves    -n N -volumes OLD,.. -to NEW,.. [-replicas 3]
 *                    [-subvolumes 10] [-p PREFIX]
 *       No network: how many keys a rebalance OLD -> NEW must move, and
 *       how many files it copies and deletes.
 *   loadgen restore  -n N -volumes OLD,.. -to NEW,.. -dirs D1,.. [-s SIZE]
 *                    [-replicas 3] [-subvolumes 10] [-p PREFIX]
 *       Undo a rebalance OLD -> NEW on disk, as populate -dirs made it
 *       (NEW's volumes must be among OLD's; -dirs in OLD's order): the
 *       copies it made are renamed back to where it deleted old ones.
 *
 * cycle and direct also give each step's mean and 99th percentile latency
 * (put_ms, put_p99, ...; in direct, of one volume request).
 *
 * Keys are PREFIX/k<i> (PREFIX defaults to "/bench"), plain ASCII, so they
 * need no escaping in a URL.  Bodies are a fixed pseudo-random pattern. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <jansson.h>

#include "../common/placement.h"
#include "../common/record.h"
#include "../common/util.h"

enum mode { CYCLE, DIRECT, WALK, MOVE, GET, PUT, POPULATE, MOVES, RESTORE };

struct opts {
	enum mode mode;
	const char *base, *prefix;
	int conc, replicas, subvolumes;
	double secs;
	long n;
	size_t size;
	char **vols, **to, **dirs;
	int nvol, nto, ndirs;
	bool pull;               /* move: the new copies are pulled by their volumes */
};

/* One request in flight.  step: cycle 0 PUT, 1 GET, 2 DELETE; populate
 * walks loc over the key's replicas. */
#define PLAN_MAX 17          /* move: a GET, up to 8 PUTs and 8 DELETEs */

enum walk_level { W_TOP, W_ROOT, W_XX, W_REC };

struct plan_step {
	int kind;                /* 0 PUT, 1 GET, 2 DELETE */
	int level;               /* walk: what the listing is */
	char url[600];
};

struct slot {
	CURL *h;
	long key;
	int step, loc;
	size_t got;
	char url[1024];
	char errbuf[CURL_ERROR_SIZE];
	struct plan_step plan[PLAN_MAX];   /* walk, move: the requests to make */
	int nplan;
	bool idle;               /* walk: waiting for listings to come */
	struct buf resp;         /* walk: the listing */
	char src[600];           /* move -pull: the key's first old location's URL */
	struct curl_slist *pull_hdrs;
};

static struct opts o = { .prefix = "/bench", .conc = 16, .replicas = 3, .subvolumes = 10,
			 .secs = 5, .n = 0, .size = 1024 };
static char *body, body_md5[33];
static struct curl_slist *hdrs;
static uint64_t t_end_ms;
static long next_key, ops, units, errors;
/* cycle, direct: each request's microseconds, by kind (PUT, GET, DELETE) */
static double *lat[3];
static long nlat[3], caplat[3];
static unsigned long long bytes_in;

/* walk: listings still to ask for */
static struct plan_step *queue;
static long nqueue, capqueue;

static size_t on_data(char *p, size_t sz, size_t n, void *arg)
{
	struct slot *s = arg;
	s->got += sz * n;
	if (o.mode == WALK)
		buf_append(&s->resp, p, sz * n);
	return sz * n;
}

static void key_name(long i, char *out, size_t cap)
{
	if (o.mode == CYCLE || o.mode == DIRECT)
		snprintf(out, cap, "%s/c%d-%ld", o.prefix, (int)getpid(), i);
	else
		snprintf(out, cap, "%s/k%ld", o.prefix, i);
}

/* At most RECORD_MAX_LOCS replicas: what a record can name. */
static int replicas(void)
{
	int r = o.replicas < o.nvol || !o.nvol ? o.replicas : o.nvol;
	return r < RECORD_MAX_LOCS ? r : RECORD_MAX_LOCS;
}

/* The kind of request a step is: 0 PUT, 1 GET, 2 DELETE.  A direct cycle
 * is replicas() PUTs, one GET, replicas() DELETEs. */
static int step_kind(const struct slot *s)
{
	if (o.mode == WALK || o.mode == MOVE)
		return s->plan[s->step].kind;
	if (o.mode == CYCLE)
		return s->step;
	if (o.mode == DIRECT)
		return s->step < replicas() ? 0 : s->step == replicas() ? 1 : 2;
	return o.mode == GET ? 1 : 0;
}

static int last_step(const struct slot *s)
{
	if (o.mode == WALK || o.mode == MOVE)
		return s->nplan - 1;
	return o.mode == DIRECT ? 2 * replicas() : 2;
}

/* Set s->url to where this step goes. */
static void step_url(struct slot *s)
{
	char key[256];
	if (o.mode == WALK || o.mode == MOVE) {
		snprintf(s->url, sizeof(s->url), "%s", s->plan[s->step].url);
		return;
	}
	key_name(s->key, key, sizeof(key));
	if (o.mode != POPULATE && o.mode != DIRECT) {
		snprintf(s->url, sizeof(s->url), "%s%s", o.base, key);
		return;
	}
	char (*locs)[LOC_MAX] = xmalloc(sizeof(*locs) * RECORD_MAX_LOCS), path[PATH_MAX_LEN];
	int loc = s->loc;
	placement_volumes(key, strlen(key), o.vols, o.nvol, replicas(), o.subvolumes, locs);
	placement_path(key, strlen(key), path);
	if (o.mode == DIRECT)
		loc = step_kind(s) == 0 ? s->step : step_kind(s) == 1 ? 0 : s->step - replicas() - 1;
	snprintf(s->url, sizeof(s->url), "http://%s%s", locs[loc], path);
	free(locs);
}

static const char *step_method(const struct slot *s)
{
	static const char *const m[] = {"PUT", "GET", "DELETE"};
	return m[step_kind(s)];
}

static void setup(struct slot *s, const char *method)
{
	CURL *h = s->h;
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, s->url);
	if (getenv("LG_CACERT"))   /* https:// volumes' redirects (bench row 18) */
		curl_easy_setopt(h, CURLOPT_CAINFO, getenv("LG_CACERT"));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(h, CURLOPT_PRIVATE, s);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, s->errbuf);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (!strcmp(method, "PUT") && o.mode == MOVE && o.pull) {
		/* no body: the volume GETs it from src (docs/protocol.md, the pull) */
		char line[700];
		curl_slist_free_all(s->pull_hdrs);
		snprintf(line, sizeof(line), "Mkv-Pull: %s", s->src);
		s->pull_hdrs = curl_slist_append(curl_slist_append(NULL, "Expect:"), line);
		snprintf(line, sizeof(line), "Mkv-Pull-Md5: %s", body_md5);
		s->pull_hdrs = curl_slist_append(s->pull_hdrs, line);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, s->pull_hdrs);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
	} else if (!strcmp(method, "PUT")) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o.size);
	} else if (!strcmp(method, "DELETE")) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
	} else {
		curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	}
	s->got = 0;
	s->errbuf[0] = '\0';
}

static void queue_push(int level, const char *url)
{
	if (nqueue == capqueue) {
		capqueue = capqueue ? 2 * capqueue : 1024;
		queue = xrealloc(queue, sizeof(*queue) * (size_t)capqueue);
	}
	queue[nqueue].kind = 1;
	queue[nqueue].level = level;
	snprintf(queue[nqueue].url, sizeof(queue[nqueue].url), "%s", url);
	nqueue++;
}

/* walk: the volumes ("host:port") seen answering ?recursive plainly. */
static char flat_vol[64][128];
static int nflat;

static bool is_flat(const char *url, bool mark)
{
	const char *h = strstr(url, "://") ? strstr(url, "://") + 3 : url;
	int n = (int)strcspn(h, "/");
	for (int i = 0; i < nflat; i++)
		if ((int)strlen(flat_vol[i]) == n && !strncmp(flat_vol[i], h, (size_t)n))
			return true;
	if (mark && nflat < 64 && n < 128)
		snprintf(flat_vol[nflat++], sizeof(flat_vol[0]), "%.*s", n, h);
	return false;
}

/* walk: a listing came; queue what rebuild would ask for next. */
static void walk_done(struct slot *s)
{
	const struct plan_step *st = &s->plan[s->step];
	json_t *a = json_loadb(s->resp.data ? s->resp.data : "", s->resp.len, 0, NULL);
	char base[600], u[1200];
	size_t i;
	json_t *e;
	bool has_sv = false;
	int level = st->level;

	snprintf(base, sizeof(base), "%s", st->url);
	base[strcspn(base, "?")] = '\0';
	json_array_foreach(a, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *type = json_string_value(json_object_get(e, "type"));
		if (name && type && !strcmp(type, "directory") && level == W_TOP &&
		    !strncmp(name, "sv", 2))
			has_sv = true;
	}
	if (level == W_TOP && !has_sv)
		level = W_ROOT;      /* no subvolumes: the volume is the root */
	json_array_foreach(a, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *type = json_string_value(json_object_get(e, "type"));
		if (!name || !type || strcmp(type, "directory"))
			continue;
		snprintf(u, sizeof(u), "%s%s/", base, name);
		if (level == W_TOP && !strncmp(name, "sv", 2)) {
			queue_push(W_ROOT, u);
		} else if (level == W_ROOT) {
			queue_push(W_XX, u);
		} else if (level == W_XX && is_flat(base, false)) {
			queue_push(W_REC, u);   /* rebuild lists a plain volume's /xx/yy/ at once */
		} else if (level == W_REC) {
			is_flat(base, true);
			queue_push(W_REC, u);
		}
	}
	if (level == W_XX && !is_flat(base, false)) {
		snprintf(u, sizeof(u), "%s?recursive", base);
		queue_push(W_REC, u);
	}
	json_decref(a);
}

/* move: the requests that move key i, or 0 when it stays; src: where a
 * pull fetches it (-pull). */
static int move_plan(long i, struct plan_step *plan, char src[600])
{
	char key[256], path[PATH_MAX_LEN];
	char (*a)[LOC_MAX] = xmalloc(sizeof(*a) * RECORD_MAX_LOCS);
	char (*b)[LOC_MAX] = xmalloc(sizeof(*b) * RECORD_MAX_LOCS);
	int r = replicas() < 8 ? replicas() : 8, first = o.pull ? 0 : 1, n = first, ra, rb;
	key_name(i, key, sizeof(key));
	placement_path(key, strlen(key), path);
	ra = placement_volumes(key, strlen(key), o.vols, o.nvol, r, o.subvolumes, a);
	rb = placement_volumes(key, strlen(key), o.to, o.nto, r, o.subvolumes, b);
	plan[0].kind = 1;   /* the GET, unless the volumes pull */
	snprintf(plan[0].url, sizeof(plan[0].url), "http://%.300s%s", a[0], path);
	snprintf(src, 600, "%s", plan[0].url);
	for (int j = 0; j < rb; j++) {
		int k = 0;
		while (k < ra && strcmp(b[j], a[k]))
			k++;
		if (k == ra) {
			plan[n].kind = 0;
			snprintf(plan[n++].url, sizeof(plan[0].url), "http://%.300s%s", b[j], path);
		}
	}
	if (n == first)
		n = 0;           /* every new location has its copy: nothing moves */
	for (int k = 0; n && k < ra; k++) {
		int j = 0;
		while (j < rb && strcmp(a[k], b[j]))
			j++;
		if (j == rb) {
			plan[n].kind = 2;
			snprintf(plan[n++].url, sizeof(plan[0].url), "http://%.300s%s", a[k], path);
		}
	}
	free(a);
	free(b);
	return n;
}

/* Give the slot its next request; false when there is no more work. */
static bool slot_next(struct slot *s, bool first)
{
	bool timed = o.mode == CYCLE || o.mode == DIRECT || o.mode == GET;
	s->resp.len = 0;
	if (o.mode == WALK) {
		s->idle = !nqueue;
		if (s->idle)
			return false;
		s->plan[0] = queue[--nqueue];
		s->nplan = 1;
		s->step = 0;
	} else if (o.mode == MOVE && (first || s->step >= last_step(s))) {
		s->nplan = 0;
		while (!s->nplan && next_key < o.n)
			s->nplan = move_plan(next_key++, s->plan, s->src);
		if (!s->nplan)
			return false;
		s->step = 0;
	} else if (o.mode == MOVE) {
		s->step++;
	} else if (!first && (o.mode == CYCLE || o.mode == DIRECT) && s->step < last_step(s)) {
		s->step++;
	} else if (!first && o.mode == POPULATE && s->loc + 1 < replicas()) {
		s->loc++;
	} else {
		if (timed && now_ms() >= t_end_ms)
			return false;
		if (!timed && next_key >= o.n)
			return false;
		s->key = o.mode == GET ? next_key++ % o.n : next_key++;
		s->step = 0;
		s->loc = 0;
	}
	step_url(s);
	setup(s, step_method(s));
	return true;
}

/* Did this answer do what the step asked?  nginx answers 204 to a PUT that
 * replaced a file; mkv-volume too. */
static bool answer_ok(struct slot *s, CURLcode rc, long status)
{
	if (rc != CURLE_OK)
		return false;
	if (step_kind(s) == 1)
		return status == 200 && (o.mode == GET || o.mode == WALK || s->got == o.size);
	if (step_kind(s) == 2)
		return status == 204 || status == 200;
	return status == 201 || status == 204;
}

/* A slot finished a unit of work (a cycle, a GET, a key's PUTs). */
static bool unit_done(struct slot *s)
{
	if (o.mode == CYCLE || o.mode == DIRECT || o.mode == MOVE)
		return s->step == last_step(s);
	if (o.mode == POPULATE)
		return s->loc + 1 >= replicas();
	return true;
}

static void lat_add(int kind, double us)
{
	if (nlat[kind] == caplat[kind]) {
		caplat[kind] = caplat[kind] ? 2 * caplat[kind] : 4096;
		lat[kind] = xrealloc(lat[kind], sizeof(double) * (size_t)caplat[kind]);
	}
	lat[kind][nlat[kind]++] = us;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* " put_ms=MEAN put_p99=P99 get_ms=..." in milliseconds. */
static void lat_print(void)
{
	static const char *const names[] = {"put", "get", "delete"};
	for (int k = 0; k < 3; k++) {
		double sum = 0, p99 = 0;
		for (long i = 0; i < nlat[k]; i++)
			sum += lat[k][i];
		if (nlat[k]) {
			qsort(lat[k], (size_t)nlat[k], sizeof(double), cmp_double);
			p99 = lat[k][(nlat[k] * 99 - 1) / 100];
		}
		printf(" %s_ms=%.2f %s_p99=%.2f", names[k], nlat[k] ? sum / nlat[k] / 1000.0 : 0.0,
		       names[k], p99 / 1000.0);
		free(lat[k]);
	}
}

/* The value every request sends (o.size bytes), and its md5 when asked. */
static void make_body(char md5[33])
{
	body = xmalloc(o.size ? o.size : 1);
	for (size_t i = 0; i < o.size; i++)
		body[i] = (char)('a' + (i * 7919 + i / 13) % 26);
	if (md5)
		md5_hex(body, o.size, md5);
}

static int run(void)
{
	CURLM *m = curl_multi_init();
	struct slot *slots = xcalloc((size_t)o.conc, sizeof(*slots));
	uint64_t t0 = now_ms(), t1;
	int active = 0, running;

	make_body(body_md5);
	hdrs = curl_slist_append(NULL, "Expect:");
	hdrs = curl_slist_append(hdrs, "Content-Type:");
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)o.conc * 4 + 8);
	t_end_ms = t0 + (uint64_t)(o.secs * 1000);
	for (int v = 0; o.mode == WALK && v < o.nvol; v++) {
		char u[600];
		snprintf(u, sizeof(u), "http://%s/", o.vols[v]);
		queue_push(W_TOP, u);
	}
	for (int i = 0; i < o.conc; i++) {
		slots[i].h = curl_easy_init();
		if (slot_next(&slots[i], true)) {
			curl_multi_add_handle(m, slots[i].h);
			active++;
		}
	}
	while (active > 0) {
		CURLMsg *msg;
		int left;
		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left))) {
			struct slot *s;
			long status = 0;
			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
			curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
			curl_multi_remove_handle(m, s->h);
			ops++;
			bytes_in += s->got;
			if (o.mode == CYCLE || o.mode == DIRECT) {
				curl_off_t us = 0;
				curl_easy_getinfo(s->h, CURLINFO_TOTAL_TIME_T, &us);
				lat_add(step_kind(s), (double)us);
			}
			if (!answer_ok(s, msg->data.result, status)) {
				if (errors++ < 5)
					fprintf(stderr, "loadgen: %s %s: status %ld, got %zu bytes %s\n",
						step_method(s), s->url, status, s->got, s->errbuf);
				s->step = last_step(s); /* abandon this cycle */
				s->loc = o.replicas;
			} else if (o.mode == WALK) {
				walk_done(s);
				units++;
			} else if (unit_done(s)) {
				units++;
			}
			if (slot_next(s, false))
				curl_multi_add_handle(m, s->h);
			else
				active--;
		}
		/* walk: listings that came in give work to idle slots */
		for (int i = 0; o.mode == WALK && nqueue && i < o.conc; i++) {
			if (slots[i].idle && slot_next(&slots[i], false)) {
				curl_multi_add_handle(m, slots[i].h);
				active++;
			}
		}
		if (active > 0)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	t1 = now_ms();
	double secs = (t1 - t0) / 1000.0;
	if (secs <= 0)
		secs = 0.001;
	printf("units=%ld ops=%ld secs=%.3f rate=%.1f mibps=%.1f", units, ops, secs, units / secs,
	       bytes_in / 1048576.0 / secs);
	if (o.mode == CYCLE || o.mode == DIRECT)
		lat_print();
	printf(" errors=%ld\n", errors);
	for (int i = 0; i < o.conc; i++) {
		curl_easy_cleanup(slots[i].h);
		buf_free(&slots[i].resp);
		curl_slist_free_all(slots[i].pull_hdrs);
	}
	free(queue);
	curl_multi_cleanup(m);
	curl_slist_free_all(hdrs);
	free(slots);
	free(body);
	return errors ? 1 : 0;
}

/* mkdir -p of path's parent directories. */
static void make_parents(char *path)
{
	for (char *q = strchr(path + 1, '/'); q; q = strchr(q + 1, '/')) {
		*q = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			die("mkdir %s: %s", path, strerror(errno));
		*q = '/';
	}
}

/* The file that holds key's blob at location loc ("host:port[/svNN]"),
 * in the -dirs directory of loc's volume.  Returns the length of its
 * (sub)volume's directory: what is below it is placement's. */
static size_t blob_file(const char *key, const char *loc, char *file, size_t cap)
{
	char path[PATH_MAX_LEN];
	int v;
	size_t vl = 0;
	for (v = 0; v < o.nvol; v++) {
		vl = strlen(o.vols[v]);
		if (!strncmp(loc, o.vols[v], vl) && (loc[vl] == '/' || !loc[vl]))
			break;
	}
	if (v == o.nvol)
		die("location %s names no volume", loc);
	placement_path(key, strlen(key), path);
	snprintf(file, cap, "%s%s%s", o.dirs[v], loc + vl, path);
	return strlen(o.dirs[v]) + strlen(loc + vl);
}

/* file has gone: remove the directories it leaves empty, up to its
 * (sub)volume's, which stays (top is blob_file's answer). */
static void drop_empty_dirs(char *file, size_t top)
{
	char *slash;
	while ((slash = strrchr(file, '/')) && (size_t)(slash - file) > top) {
		*slash = '\0';
		if (rmdir(file) < 0)
			break;
	}
}

/* Write body (o.size bytes, md5 hex) as key's blob at loc. */
static void blob_write(const char *key, const char *loc, const char *md5)
{
	char file[4096];
	int fd;
	blob_file(key, loc, file, sizeof(file));
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 && errno == ENOENT) {
		make_parents(file);
		fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	}
	if (fd < 0 || write(fd, body, o.size) != (ssize_t)o.size)
		die("write %s: %s", file, strerror(errno));
	if (fsetxattr(fd, "user.mkv.md5", md5, 32, 0) < 0 && errno != ENOTSUP)
		die("fsetxattr %s: %s", file, strerror(errno));
	close(fd);
}

/* The -dirs modes wait on the disk more than they compute (here each
 * unlink and rmdir waits for a discard): DISK_THREADS of them work at
 * once, each on the keys whose hash directory (/xx/) it owns, so that
 * no two threads ever create or remove the same directory. */
#define DISK_THREADS 8

struct disk_job {
	void (*one)(const char *key, char md5[33]);
	char *md5;
	int t;
};

static void *disk_thread(void *arg)
{
	struct disk_job *j = arg;
	char key[256], path[PATH_MAX_LEN];
	for (long k = 0; k < o.n; k++) {
		key_name(k, key, sizeof(key));
		placement_path(key, strlen(key), path);   /* "/xx/yy/..." */
		if (strtol((char[3]){path[1], path[2], '\0'}, NULL, 16) % DISK_THREADS == j->t)
			j->one(key, j->md5);
	}
	return NULL;
}

static void disk_run(void (*one)(const char *key, char md5[33]), char md5[33])
{
	pthread_t th[DISK_THREADS];
	struct disk_job jobs[DISK_THREADS];
	if (o.ndirs != o.nvol)
		die("-dirs needs one directory per volume (%d, not %d)", o.nvol, o.ndirs);
	for (int t = 0; t < DISK_THREADS; t++) {
		jobs[t] = (struct disk_job){one, md5, t};
		if (pthread_create(&th[t], NULL, disk_thread, &jobs[t]))
			die("pthread_create failed");
	}
	for (int t = 0; t < DISK_THREADS; t++)
		pthread_join(th[t], NULL);
}

static _Atomic long files, renamed, removed, written;

/* populate -dirs: each key's replicas as files in the volumes' directories,
 * named as mkv-volume names them (volume/fs.h: md5 in VOL_MD5_XATTR). */
static void populate_key(const char *key, char md5[33])
{
	char locs[RECORD_MAX_LOCS][LOC_MAX];
	int r = placement_volumes(key, strlen(key), o.vols, o.nvol, replicas(), o.subvolumes,
				  locs);
	for (int j = 0; j < r; j++, files++)
		blob_write(key, locs[j], md5);
}

static int populate_dirs(void)
{
	uint64_t t0 = now_ms();
	char md5[33];
	make_body(md5);
	disk_run(populate_key, md5);
	double secs = (now_ms() - t0) / 1000.0;
	printf("units=%ld ops=%ld secs=%.3f rate=%.1f mibps=%.1f errors=0\n", (long)files,
	       (long)files, secs, files / (secs > 0 ? secs : 0.001),
	       files * (double)o.size / 1048576.0 / (secs > 0 ? secs : 0.001));
	free(body);
	return 0;
}

/* restore: put the files back where populate -dirs placed them for o.vols
 * after a rebalance onto o.to moved them: each copy at a new location
 * that populate did not use is renamed to an old location that lacks one
 * (no new inode, no data written: cheap, and the md5 xattr goes along)
 * and the directories it leaves empty go; an old location left without a
 * file gets a fresh one. */
static void restore_key(const char *key, char md5[33])
{
	char a[RECORD_MAX_LOCS][LOC_MAX], b[RECORD_MAX_LOCS][LOC_MAX];
	char from[4096], to[4096];
	int k = 0;
	int rold = placement_volumes(key, strlen(key), o.vols, o.nvol, replicas(),
				     o.subvolumes, a);
	int rnew = placement_volumes(key, strlen(key), o.to, o.nto, replicas(), o.subvolumes,
				     b);
	for (int j = 0; j < rnew; j++) {
		struct stat st;
		int m;
		for (m = 0; m < rold && strcmp(b[j], a[m]); m++)
			;
		if (m < rold)
			continue;            /* populate put a copy here too */
		size_t top = blob_file(key, b[j], from, sizeof(from));
		/* the next old location without its file */
		for (; k < rold; k++) {
			blob_file(key, a[k], to, sizeof(to));
			if (stat(to, &st) < 0)
				break;
		}
		if (k < rold) {
			if (rename(from, to) < 0 && errno == ENOENT) {
				make_parents(to);
				if (rename(from, to) < 0 && errno != ENOENT)
					die("rename %s: %s", from, strerror(errno));
			}
			if (stat(to, &st) == 0 && stat(from, &st) < 0) {
				renamed++;
				k++;
				drop_empty_dirs(from, top);
				continue;
			}
		}
		if (unlink(from) == 0)
			removed++;
		else if (errno != ENOENT)
			die("unlink %s: %s", from, strerror(errno));
		drop_empty_dirs(from, top);
	}
	for (k = 0; k < rold; k++) {
		struct stat st;
		blob_file(key, a[k], to, sizeof(to));
		if (stat(to, &st) == 0)
			continue;
		blob_write(key, a[k], md5);
		written++;
	}
}

static int restore(void)
{
	char md5[33];
	make_body(md5);
	disk_run(restore_key, md5);
	printf("renamed=%ld removed=%ld written=%ld\n", (long)renamed, (long)removed,
	       (long)written);
	free(body);
	return 0;
}

/* Keys a rebalance from o.vols to o.to must touch. */
static int moves(void)
{
	long keys = 0, moved = 0, copies = 0, deletes = 0;
	int rold = o.replicas < o.nvol ? o.replicas : o.nvol;
	int rnew = o.replicas < o.nto ? o.replicas : o.nto;
	char (*a)[LOC_MAX] = xmalloc(sizeof(*a) * (size_t)rold);
	char (*b)[LOC_MAX] = xmalloc(sizeof(*b) * (size_t)rnew);
	for (long i = 0; i < o.n; i++) {
		char key[256];
		int same = 0;
		key_name(i, key, sizeof(key));
		placement_volumes(key, strlen(key), o.vols, o.nvol, o.replicas, o.subvolumes, a);
		placement_volumes(key, strlen(key), o.to, o.nto, o.replicas, o.subvolumes, b);
		for (int j = 0; j < rnew; j++)
			for (int k = 0; k < rold; k++)
				if (!strcmp(b[j], a[k])) {
					same++;
					break;
				}
		/* minikeyvalue compares the location lists in order */
		bool differ = rold != rnew;
		for (int j = 0; !differ && j < rnew; j++)
			differ = strcmp(a[j], b[j]) != 0;
		keys += differ;
		moved += same < rnew;
		copies += rnew - same;
		deletes += rold - same;
	}
	printf("keys=%ld relocated=%ld moved=%ld copies=%ld deletes=%ld\n", o.n, keys, moved, copies,
	       deletes);
	free(a);
	free(b);
	return 0;
}

static int split(const char *s, char ***out)
{
	char *dup = xstrdup(s), *tok, *save = NULL;
	int n = 0;
	*out = NULL;
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		*out = xrealloc(*out, sizeof(char *) * (size_t)(n + 1));
		(*out)[n++] = xstrdup(tok);
	}
	free(dup);
	return n;
}

static void usage(int rc)
{
	fprintf(rc ? stderr : stdout,
		"usage: loadgen cycle    [-c N] [-d SECS] [-s BYTES] [-p PREFIX] BASEURL\n"
		"       loadgen direct   [-c N] [-d SECS] [-s BYTES] -volumes A,B [-replicas R] [-subvolumes S]\n"
		"       loadgen walk     [-c N] -volumes A,B\n"
		"       loadgen move     [-c N] -n KEYS [-s BYTES] -volumes OLD,.. -to NEW,.. [-replicas R]\n"
		"                        [-subvolumes S] [-p PREFIX] [-pull]\n"
		"       loadgen get      [-c N] [-d SECS] -n KEYS [-p PREFIX] BASEURL\n"
		"       loadgen put      [-c N] -n KEYS [-s BYTES] [-p PREFIX] BASEURL\n"
		"       loadgen populate [-c N] -n KEYS [-s BYTES] -volumes A,B [-replicas R] [-subvolumes S]\n"
		"                        [-dirs DIR_A,DIR_B]\n"
		"       loadgen moves    -n KEYS -volumes OLD,.. -to NEW,.. [-replicas R] [-subvolumes S]\n"
		"       loadgen restore  -n KEYS -volumes OLD,.. -to NEW,.. -dirs DIR,.. [-s BYTES]\n"
		"                        [-replicas R] [-subvolumes S]\n");
	exit(rc);
}

int main(int argc, char **argv)
{
	static const char *modes[] = { "cycle", "direct", "walk", "move", "get", "put",
				       "populate", "moves", "restore" };
	int i = 2;
	uint64_t v;

	log_init(argv[0]);
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
		usage(argc < 2);
	for (o.mode = 0; o.mode <= RESTORE && strcmp(argv[1], modes[o.mode]); o.mode++)
		;
	if (o.mode > RESTORE)
		usage(2);
	for (; i < argc; i++) {
		const char *f = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (f[0] != '-') {
			o.base = f;
			continue;
		}
		f += f[1] == '-' ? 2 : 1;
		if (!strcmp(f, "pull")) {
			o.pull = true;
			continue;
		}
		if (!val)
			die("flag -%s needs a value", f);
		i++;
		if (!strcmp(f, "c") && parse_u64(val, 1, 10000, &v))
			o.conc = (int)v;
		else if (!strcmp(f, "n") && parse_u64(val, 1, 1000000000, &v))
			o.n = (long)v;
		else if (!strcmp(f, "s") && parse_u64(val, 0, (uint64_t)1 << 32, &v))
			o.size = (size_t)v;
		else if (!strcmp(f, "d"))
			o.secs = atof(val);
		else if (!strcmp(f, "p"))
			o.prefix = val;
		else if (!strcmp(f, "replicas") && parse_u64(val, 1, 100, &v))
			o.replicas = (int)v;
		else if (!strcmp(f, "subvolumes") && parse_u64(val, 1, 10000, &v))
			o.subvolumes = (int)v;
		else if (!strcmp(f, "volumes"))
			o.nvol = split(val, &o.vols);
		else if (!strcmp(f, "to"))
			o.nto = split(val, &o.to);
		else if (!strcmp(f, "dirs"))
			o.ndirs = split(val, &o.dirs);
		else
			die("bad flag -%s %s", f, val);
	}
	if (o.secs <= 0)
		die("-d must be positive");
	if ((o.mode == DIRECT || o.mode == WALK || o.mode == MOVE) && o.nvol == 0)
		die("-volumes is required");
	if (o.mode == MOVE && o.nto == 0)
		die("-to is required");
	if (o.mode != CYCLE && o.mode != DIRECT && o.mode != WALK && o.n <= 0)
		die("-n KEYS is required");
	if (o.mode >= POPULATE && o.nvol == 0)
		die("-volumes is required");
	if (o.mode >= MOVES && o.nto == 0)
		die("-to is required");
	if (o.mode == RESTORE && o.ndirs == 0)
		die("-dirs is required");
	if (o.mode < POPULATE && o.mode != DIRECT && o.mode != WALK && o.mode != MOVE && !o.base)
		die("BASEURL is required");
	if (o.mode == MOVES)
		return moves();
	if (o.mode == RESTORE)
		return restore();
	if (o.mode == POPULATE && o.ndirs)
		return populate_dirs();
	curl_global_init(CURL_GLOBAL_DEFAULT);
	int rc = run();
	curl_global_cleanup();
	return rc;
}
