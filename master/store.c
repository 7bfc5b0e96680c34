/* store.c -- the store's calls that are not one module's (store.h):
 * reading a live key, writing and deleting one. */
#include "store.h"
#include "put.h"
#include "status.h"
#include "../common/httpc.h"
#include "../common/loop.h"
#include "../common/placement.h"
#include "../common/vconn.h"
#include "../common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct config *the_cfg;
static struct index *the_idx;

void store_init(const struct config *cfg, struct index *idx)
{
	the_cfg = cfg;
	the_idx = idx;
}

const struct config *store_cfg(void)
{
	return the_cfg;
}

struct index *store_index(void)
{
	return the_idx;
}

bool store_writable(char *why, size_t n)
{
	return index_writable(the_idx, why, n) && meta_writable(why, n);
}

bool store_live(struct index *idx, const char *key, size_t klen, char **v, struct record *r)
{
	size_t vlen;
	*v = index_get(idx, key, klen, &vlen);
	if (!*v)
		return false;
	if (record_parse(*v, vlen, r) < 0 || r->deleted || !r->nlocs) {
		free(*v);
		*v = NULL;
		return false;
	}
	return true;
}

int store_urls(struct index *idx, const char *key, size_t klen, struct store_urls *u)
{
	struct record r;
	char *v, path[PATH_MAX_LEN];
	u->n = 0;
	u->hash[0] = '\0';
	if (!store_live(idx, key, klen, &v, &r))
		return -1;
	placement_path(key, klen, path);
	for (int i = 0; i < r.nlocs; i++)
		if (health_up(r.locs[i], strlen(r.locs[i])))
			u->url[u->n++] = httpc_url(r.locs[i], path);
	memcpy(u->hash, r.hash, sizeof(u->hash));
	free(v);
	return u->n;
}

void store_urls_free(struct store_urls *u)
{
	for (int i = 0; i < u->n; i++)
		free(u->url[i]);
	u->n = 0;
}

int store_locations(const struct config *cfg, const char *key, size_t klen, char (*out)[LOC_MAX],
		    const char **why)
{
	char (*order)[LOC_MAX] = xmalloc((size_t)cfg->nvol * LOC_MAX);
	int want = cfg->replicas < cfg->nvol ? cfg->replicas : cfg->nvol, n = 0;
	int total = placement_volumes(key, klen, cfg->volumes, cfg->nvol, cfg->nvol,
				      cfg->subvolumes, order);
	if (want > RECORD_MAX_LOCS)
		want = RECORD_MAX_LOCS;
	int last = 0;
	for (int i = 0; i < total && n < want; i++)
		if (health_up(order[i], strlen(order[i])))
			memcpy(out[n++], order[(last = i)], LOC_MAX);
	free(order);
	if (n < want) {
		*why = "fewer volumes are up than -replicas: cannot place every copy";
		return -1;
	}
	if (last >= want)   /* a home volume was down: a copy went past them */
		status_count_handoff();
	return n;
}

struct put *store_write(const struct config *cfg, struct index *idx, const char *key,
			size_t klen, bool replace, int64_t clen, void (*wake)(void *), void *arg,
			size_t ring, const char **why)
{
	char locs[RECORD_MAX_LOCS][LOC_MAX];
	int n = store_locations(cfg, key, klen, locs, why);
	if (n < 0) {
		keylock_release(key, klen);
		return NULL;
	}
	return put_start(cfg, idx, key, klen, locs, n, clen, wake, arg, replace, ring);
}

/* ---- DELETE, on the event loop ----
 * None of its steps blocks the loop.  Soft-delete first: from then on
 * nothing is served, whatever fails.  Synced: UNLINK is answered on this
 * write, and DELETE removes the blobs next, durably -- a power loss before
 * its final delete would otherwise bring back a live record naming blobs
 * that are gone.  That final delete need not wait for the disk: lost, it
 * leaves the key unlinked, never served, for gc -unlinked (one fsync per
 * DELETE).  The writes go to the index's committer, the volume DELETEs
 * (a volume the checker marks down is not asked: on a silent host the
 * DELETE would wait -puttimeout; its copy stays named, as a refuser's)
 * run on the loop's transfers. */
struct del {
	const struct config *cfg;
	struct index *idx;
	struct loop *loop;
	char *key, *v;
	size_t klen;
	struct record r;
	bool unlink;
	char path[PATH_MAX_LEN];
	struct httpc_req reqs[RECORD_MAX_LOCS];
	int up[RECORD_MAX_LOCS], nup;      /* which of r.locs were asked */
	int rc;
	void (*next)(struct del *);       /* on the loop, after a write */
	void (*done)(void *, int, const char *);
	void *arg;
};

static void del_end(struct del *d, int st, const char *why)
{
	loop_release(d->loop);
	d->done(d->arg, st, why);
	for (int i = 0; i < d->nup; i++)
		free((char *)d->reqs[i].url);
	free(d->key);
	free(d->v);
	free(d);
}

static void del_written_loop(void *arg)
{
	struct del *d = arg;
	d->next(d);
}

/* On the committer's thread. */
static void del_written(void *arg, int rc)
{
	struct del *d = arg;
	d->rc = rc;
	loop_post(d->loop, del_written_loop, d);
}

static void del_write(struct del *d, bool sync, void (*next)(struct del *))
{
	size_t len;
	char *enc = record_encode(&d->r, &len);
	d->next = next;
	index_write_async(d->idx, d->key, d->klen, enc, len, sync, del_written, d);
	free(enc);
}

static void del_refused_written(struct del *d)
{
	del_end(d, 500, "a volume refused the delete; the key stays unlinked");
}

static void del_gone(struct del *d)
{
	if (d->rc < 0) {
		del_end(d, 500, "index delete failed; the key stays unlinked");
		return;
	}
	/* unsynced: lost alone, it leaves a stale entry no listing reads */
	meta_raw_put('m', d->key, d->klen, NULL, false);
	del_end(d, 204, NULL);
}

static void del_sent(void *arg, int gone)
{
	struct del *d = arg;
	int kept = 0, j = 0;
	bool ok[RECORD_MAX_LOCS];
	(void)gone;
	if (httpc_outcome("", "DELETE", d->reqs, d->nup, ok) == d->r.nlocs) {
		d->next = del_gone;
		index_write_async(d->idx, d->key, d->klen, NULL, 0, false, del_written, d);
		return;
	}
	/* naming only the copies the delete did not remove: a RELINK serves
	 * the key from those (as delete_replicas) */
	for (int i = 0; i < d->r.nlocs; i++) {
		bool asked = j < d->nup && d->up[j] == i;
		if (!asked || !ok[j++])
			d->r.locs[kept++] = d->r.locs[i];
	}
	d->r.nlocs = kept;
	del_write(d, true, del_refused_written);
}

/* A volume the checker marks down while its DELETE is under way answers
 * nothing until -puttimeout: the DELETE ends now (its copy stays named). */
static bool del_down(void *arg, int j)
{
	struct del *d = arg;
	return !health_up(d->r.locs[d->up[j]], strlen(d->r.locs[d->up[j]]));
}

static void del_marked(struct del *d)
{
	if (d->rc < 0) {
		del_end(d, 500, "index write failed");
		return;
	}
	if (d->unlink) {
		del_end(d, 204, NULL);
		return;
	}
	placement_path(d->key, d->klen, d->path);
	for (int i = 0; i < d->r.nlocs; i++) {
		if (!health_up(d->r.locs[i], strlen(d->r.locs[i]))) {
			log_msg("DELETE %s%s not sent: its volume is marked down", d->r.locs[i],
				d->path);
			continue;
		}
		d->up[d->nup] = i;
		d->reqs[d->nup++].url = httpc_url(d->r.locs[i], d->path);
	}
	if (vconn_fanout("DELETE", d->reqs, d->nup, NULL, 0, (long)d->cfg->puttimeout_ms, del_down,
			 d, del_sent, d) < 0) {   /* another thread's loop: none sent */
		for (int i = 0; i < d->nup; i++)
			d->reqs[i] = (struct httpc_req){d->reqs[i].url, -1, false, "not sent"};
		del_sent(d, -1);
	}
}

static int del_start(struct loop *l, const struct config *cfg, struct index *idx,
		     const char *key, size_t klen, enum del_mode mode, const char **why,
		     void (*done)(void *arg, int status, const char *why), void *arg)
{
	struct del *d = xcalloc(1, sizeof(*d));
	size_t vlen;
	int st = 0;
	d->v = index_get(idx, key, klen, &vlen);
	if (!d->v) {
		*why = "key not found";
		st = 404;
	} else if (record_parse(d->v, vlen, &d->r) < 0) {
		*why = "index record is malformed";
		st = 500;
	} else if (mode == DEL_UNLINK && d->r.deleted) {
		*why = "key already unlinked";
		st = 404;
	} else if (mode == DEL_UNLINKED && !d->r.deleted) {
		*why = "DELETE ?unlinked: the key is live";
		st = 403;
	} else if (mode == DEL_DELETE && cfg->protect && !d->r.deleted) {
		*why = "-protect is set: UNLINK the key before DELETE";
		st = 403;
	}
	if (st) {
		free(d->v);
		free(d);
		return st;
	}
	d->unlink = mode == DEL_UNLINK;
	d->cfg = cfg;
	d->idx = idx;
	d->loop = l;
	d->key = xstrndup(key, klen);
	d->klen = klen;
	d->done = done;
	d->arg = arg;
	d->r.deleted = true;
	loop_hold(l);
	del_write(d, true, del_marked);
	return 0;
}

int store_delete_start(const struct config *cfg, struct index *idx, const char *key,
		       size_t klen, enum del_mode mode, const char **why,
		       void (*done)(void *arg, int status, const char *why), void *arg)
{
	if (!loop_current())
		return store_delete(cfg, idx, key, klen, mode, why);
	return del_start(loop_current(), cfg, idx, key, klen, mode, why, done, arg);
}

struct del_wait {
	int st;
	const char *why;
};

static void del_waited(void *arg, int st, const char *why)
{
	struct del_wait *w = arg;
	w->st = st;
	w->why = why;
}

int store_delete(const struct config *cfg, struct index *idx, const char *key, size_t klen,
		 enum del_mode mode, const char **why)
{
	struct del_wait w = {0};
	int st = del_start(vconn_loop(), cfg, idx, key, klen, mode, why, del_waited, &w);
	if (st)
		return st;
	vconn_run();   /* until it ended */
	*why = w.why;
	return w.st;
}
