/* keylock.c -- see keylock.h.  A chained hash set of the keys being
 * written, under one mutex: few keys are ever locked at once. */
#include "store.h"
#include "../common/util.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024

struct held {
	struct held *next;
	size_t klen;
	char key[];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct held *buckets[NBUCKETS];

/* The link to key's entry, or to the NULL ending its bucket; mu held. */
static struct held **find(const char *key, size_t klen)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	struct held **pp;
	for (size_t i = 0; i < klen; i++)
		h = (h ^ (unsigned char)key[i]) * 16777619u;
	for (pp = &buckets[h % NBUCKETS]; *pp; pp = &(*pp)->next)
		if ((*pp)->klen == klen && !memcmp((*pp)->key, key, klen))
			break;
	return pp;
}

bool keylock_try(const char *key, size_t klen)
{
	struct held **pp, *h = NULL;
	pthread_mutex_lock(&mu);
	if (!*(pp = find(key, klen))) {
		h = xmalloc(sizeof(*h) + klen);
		h->next = NULL;
		h->klen = klen;
		memcpy(h->key, key, klen);
		*pp = h;
	}
	pthread_mutex_unlock(&mu);
	return h != NULL;
}

bool keylock_held(const char *key, size_t klen)
{
	bool held;
	pthread_mutex_lock(&mu);
	held = *find(key, klen) != NULL;
	pthread_mutex_unlock(&mu);
	return held;
}

void keylock_release(const char *key, size_t klen)
{
	struct held **pp, *h;
	pthread_mutex_lock(&mu);
	if ((h = *(pp = find(key, klen)))) {
		*pp = h->next;
		free(h);
	}
	pthread_mutex_unlock(&mu);
}
