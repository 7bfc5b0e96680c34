/* keylock.c -- see keylock.h.  A chained hash set of the keys being
 * written, under one mutex: few keys are ever locked at once. */
#include "keylock.h"
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

static unsigned bucket(const char *key, size_t klen)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < klen; i++)
		h = (h ^ (unsigned char)key[i]) * 16777619u;
	return h % NBUCKETS;
}

bool keylock_try(const char *key, size_t klen)
{
	unsigned b = bucket(key, klen);
	struct held *h;
	pthread_mutex_lock(&mu);
	for (h = buckets[b]; h; h = h->next) {
		if (h->klen == klen && !memcmp(h->key, key, klen)) {
			pthread_mutex_unlock(&mu);
			return false;
		}
	}
	h = xmalloc(sizeof(*h) + klen);
	h->klen = klen;
	memcpy(h->key, key, klen);
	h->next = buckets[b];
	buckets[b] = h;
	pthread_mutex_unlock(&mu);
	return true;
}

void keylock_release(const char *key, size_t klen)
{
	unsigned b = bucket(key, klen);
	pthread_mutex_lock(&mu);
	for (struct held **pp = &buckets[b]; *pp; pp = &(*pp)->next) {
		struct held *h = *pp;
		if (h->klen == klen && !memcmp(h->key, key, klen)) {
			*pp = h->next;
			free(h);
			break;
		}
	}
	pthread_mutex_unlock(&mu);
}
