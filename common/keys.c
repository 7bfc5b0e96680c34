/* keys.c -- see keys.h. */
#include "keys.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const perm_names[] = {"read", "list", "write", "delete", "admin"};

static void key_free(struct key *k)
{
	free(k->id);
	free(k->secret);
	for (int i = 0; i < k->nprefix; i++)
		free(k->prefixes[i]);
	free(k->prefixes);
}

void keyring_put(struct keyring *k)
{
	if (!k || atomic_fetch_sub(&k->refs, 1) != 1)
		return;
	for (int i = 0; i < k->n; i++)
		key_free(&k->keys[i]);
	free(k->keys);
	free(k);
}

/* "read,list" into *out; false on a name that is no permission. */
static bool parse_perms(char *s, unsigned *out)
{
	char *save = NULL;
	*out = 0;
	for (char *p = strtok_r(s, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		size_t i = 0;
		while (i < 5 && strcmp(p, perm_names[i]))
			i++;
		if (i == 5)
			return false;
		*out |= 1u << i;
	}
	return *out != 0;
}

/* One line's fields into k: NULL, or what is wrong with them. */
static const char *parse_line(char **f, int nf, struct key *k)
{
	bool anon = !strcmp(f[0], "anonymous");
	int first = anon ? 2 : 3;   /* the first prefix */
	if (nf < first + 1)
		return anon ? "want: anonymous PERMISSIONS PREFIX..."
			    : "want: ID SECRET PERMISSIONS PREFIX...";
	if (!anon && strlen(f[1]) < KEY_SECRET_MIN)
		return "secret shorter than 16 bytes (make one: openssl rand -hex 16)";
	if (!parse_perms(f[first - 1], &k->perms))
		return "permissions are read, list, write, delete, admin, joined by ','";
	k->id = xstrdup(f[0]);
	k->secret = anon ? NULL : xstrdup(f[1]);
	k->prefixes = xcalloc((size_t)(nf - first), sizeof(char *));
	for (int i = first; i < nf; i++) {
		if (f[i][0] != '/')
			return "a prefix starts with / (\"/\" is every key)";
		k->prefixes[k->nprefix++] = xstrdup(f[i]);
	}
	return NULL;
}

struct keyring *keyring_parse(const char *text, const char *name, char **why)
{
	struct keyring *k = xcalloc(1, sizeof(*k));
	char *copy = xstrdup(text), *line, *save = NULL;
	int lineno = 0, cap = 0, anon = -1;
	size_t tl = strlen(text);
	atomic_init(&k->refs, 1);
	*why = NULL;
	if (tl && text[tl - 1] != '\n') {   /* caught mid-write: its last key may be cut */
		for (const char *p = text; (p = strchr(p, '\n')); p++)
			lineno++;
		*why = xasprintf("%s:%d: the last line has no newline (a file caught mid-edit?): "
				 "write a new file and rename it over the old", name, lineno + 1);
		free(copy);
		keyring_put(k);
		return NULL;
	}
	for (line = copy; line; line = save) {
		char *f[65], *fs = NULL, *nl = strchr(line, '\n');
		const char *bad = NULL;
		int nf = 0;
		save = nl ? nl + 1 : NULL;
		if (nl)
			*nl = '\0';
		lineno++;
		for (char *t = strtok_r(line, " \t\r", &fs); t && *t != '#'; t = strtok_r(NULL, " \t\r", &fs))
			if (nf < 65)
				f[nf++] = t;
		if (!nf)
			continue;
		if (k->n == cap)
			k->keys = xrealloc(k->keys, sizeof(*k->keys) * (size_t)(cap = cap ? 2 * cap : 8));
		memset(&k->keys[k->n], 0, sizeof(k->keys[0]));
		if (nf > 64)
			bad = "more than 60 prefixes on one line";
		else if (!strcmp(f[0], "anonymous") ? anon >= 0 : keyring_find(k, f[0], strlen(f[0])) != NULL)
			bad = "this id is given twice";
		else
			bad = parse_line(f, nf, &k->keys[k->n]);
		if (bad) {
			key_free(&k->keys[k->n]);
			*why = xasprintf("%s:%d: %s", name, lineno, bad);
			break;
		}
		if (!k->keys[k->n].secret)
			anon = k->n;
		k->n++;
	}
	free(copy);
	if (anon >= 0)   /* the array has stopped moving */
		k->anonymous = &k->keys[anon];
	if (*why) {
		keyring_put(k);
		return NULL;
	}
	return k;
}

/* Read and parse path; warns when the file is readable by group or others. */
static struct keyring *keyring_load(const char *path, char **why)
{
	FILE *f = fopen(path, "r");
	char *text = NULL;
	size_t cap = 0;
	ssize_t n;
	struct stat st;
	struct keyring *k = NULL;
	if (!f) {
		*why = xasprintf("-keys: open() \"%s\" failed (%d: %s)", path, errno, strerror(errno));
		return NULL;
	}
	/* the whole file (parsing ends at a NUL anyway) */
	if ((n = getdelim(&text, &cap, '\0', f)) < 0 && ferror(f)) {
		*why = xasprintf("-keys: read() \"%s\" failed", path);
	} else {
		if (!fstat(fileno(f), &st) && (st.st_mode & 077))
			log_msg("warning: -keys %s is readable by others (mode %03o): chmod 600 it",
				path, (unsigned)(st.st_mode & 0777));
		k = keyring_parse(n > 0 ? text : "", path, why);
	}
	fclose(f);
	free(text);
	return k;
}

const struct key *keyring_find(const struct keyring *k, const char *id, size_t n)
{
	for (int i = 0; i < k->n; i++)
		if (k->keys[i].secret && strlen(k->keys[i].id) == n && !memcmp(k->keys[i].id, id, n))
			return &k->keys[i];
	return NULL;
}

bool key_allows(const struct key *k, unsigned perm, const char *path, size_t n)
{
	if (!k || (k->perms & perm) != perm)
		return false;
	for (int i = 0; i < k->nprefix; i++) {
		size_t pl = strlen(k->prefixes[i]);
		if (pl <= n && !memcmp(k->prefixes[i], path, pl))
			return true;
	}
	return false;
}

bool key_touches(const struct key *k, unsigned perm, const char *path, size_t n)
{
	if (!k || !(k->perms & perm))
		return false;
	for (int i = 0; i < k->nprefix; i++) {
		size_t pl = strlen(k->prefixes[i]), m = pl < n ? pl : n;
		if (!memcmp(k->prefixes[i], path, m))
			return true;
	}
	return false;
}

/* ---- the running keys ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct keyring *_Atomic cur;
static const char *cur_path;

/* cur_path's keys in force: 0, or -1 (logged; those in force stay). */
static int load(const char *again)
{
	char *why = NULL;
	struct keyring *k = keyring_load(cur_path, &why), *old;
	if (!k) {
		log_msg("%s%s", why, again ? "; the keys loaded before stay in force" : "");
		free(why);
		return -1;
	}
	pthread_mutex_lock(&mu);
	old = atomic_exchange(&cur, k);
	pthread_mutex_unlock(&mu);
	keyring_put(old);
	log_msg("-keys %s%s: %d keys%s", cur_path, again ? again : "", k->n - (k->anonymous != NULL),
		k->anonymous ? " and an anonymous line" : "");
	return 0;
}

int keys_start(const char *path)
{
	cur_path = path;
	if (load(NULL) == 0)
		return 0;
	cur_path = NULL;
	return -1;
}

void keys_reload(void)
{
	if (cur_path)
		load(" reloaded");
}

struct keyring *keys_current(void)
{
	struct keyring *k;
	if (!atomic_load_explicit(&cur, memory_order_relaxed))   /* off: the one check */
		return NULL;
	pthread_mutex_lock(&mu);
	k = atomic_load(&cur);
	atomic_fetch_add(&k->refs, 1);
	pthread_mutex_unlock(&mu);
	return k;
}

void keys_stop(void)
{
	pthread_mutex_lock(&mu);
	keyring_put(atomic_exchange(&cur, NULL));
	pthread_mutex_unlock(&mu);
	cur_path = NULL;
}
