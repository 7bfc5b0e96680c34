/* md5.c -- see md5.h.  The digest is fetched once (OpenSSL 3 otherwise
 * looks it up again on every init), and the one-shot hashes reuse a
 * context per thread: an EVP context made per call costs more than
 * hashing a key. */
#include "md5.h"
#include "util.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <unistd.h>

static EVP_MD *md5_md;
static pthread_key_t tl_key;       /* frees a thread's context at its exit */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread EVP_MD_CTX *tl_ctx;

static void free_ctx(void *c)
{
	EVP_MD_CTX_free(c);
}

static void init(void)
{
	if (!(md5_md = EVP_MD_fetch(NULL, "MD5", NULL)) || pthread_key_create(&tl_key, free_ctx))
		die("md5: no digest");
}

struct md5 *md5_new(void)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	pthread_once(&once, init);
	if (!c || !EVP_DigestInit_ex2(c, md5_md, NULL))
		die("md5: init failed");
	return (struct md5 *)c;
}

void md5_update(struct md5 *m, const void *p, size_t n)
{
	if (n && !EVP_DigestUpdate((EVP_MD_CTX *)m, p, n))
		die("md5: update failed");
}

void md5_final(struct md5 *m, unsigned char out[16])
{
	if (!EVP_DigestFinal_ex((EVP_MD_CTX *)m, out, NULL))
		die("md5: final failed");
}

void md5_final_hex(struct md5 *m, char out[33])
{
	unsigned char d[16];
	md5_final(m, d);
	to_hex(d, 16, out);
}

void md5_free(struct md5 *m)
{
	EVP_MD_CTX_free((EVP_MD_CTX *)m);
}

/* This thread's context, started anew. */
static struct md5 *thread_md5(void)
{
	if (!tl_ctx) {
		tl_ctx = (EVP_MD_CTX *)md5_new();
		pthread_setspecific(tl_key, tl_ctx);
	} else if (!EVP_DigestInit_ex2(tl_ctx, md5_md, NULL)) {
		die("md5: init failed");
	}
	return (struct md5 *)tl_ctx;
}

void md5_pair(const void *a, size_t an, const void *b, size_t bn, unsigned char out[16])
{
	struct md5 *m = thread_md5();
	md5_update(m, a, an);
	md5_update(m, b, bn);
	md5_final(m, out);
}

void md5_hex(const void *data, size_t n, char out[33])
{
	unsigned char d[16];
	md5_pair(data, n, NULL, 0, d);
	to_hex(d, 16, out);
}

bool md5_fd(int fd, char out[33])
{
	unsigned char buf[64 * 1024];
	struct md5 *m = thread_md5();
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno != EINTR)
			return false;
		if (n > 0)
			md5_update(m, buf, (size_t)n);
	}
	md5_final_hex(m, out);
	return true;
}

void md5_b64url(const void *p, size_t n, char out[23])
{
	unsigned char d[16], b64[25];
	md5_pair(p, n, NULL, 0, d);
	EVP_EncodeBlock(b64, d, 16);        /* 22 digits and "==" */
	for (int i = 0; i < 22; i++)
		out[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : (char)b64[i];
	out[22] = '\0';
}
