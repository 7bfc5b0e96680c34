/* md5.h -- md5, as placement, the volumes' ?md5, ETags and Content-MD5
 * use it: the one wrapper of OpenSSL's EVP.  Allocation failure aborts. */
#ifndef MKV_MD5_H
#define MKV_MD5_H

#include <stdbool.h>
#include <stddef.h>

/* A running md5: feed it, then take the digest once; md5_free (NULL is
 * fine) releases it. */
struct md5;
struct md5 *md5_new(void);
void md5_update(struct md5 *m, const void *p, size_t n);
void md5_final(struct md5 *m, unsigned char out[16]);
/* The digest as 32 lowercase hex digits and a NUL. */
void md5_final_hex(struct md5 *m, char out[33]);
void md5_free(struct md5 *m);

/* md5 of a[0..an) followed by b[0..bn) (bn may be 0), on a context the
 * thread keeps: as cheap as the hash itself (key2volume's hot path). */
void md5_pair(const void *a, size_t an, const void *b, size_t bn, unsigned char out[16]);
/* md5 of data in hex. */
void md5_hex(const void *data, size_t n, char out[33]);
/* md5 of p[0..n), base64url without padding (22 digits and a NUL): the
 * form of nginx's secure_link. */
void md5_b64url(const void *p, size_t n, char out[23]);
/* md5 of what is left to read from fd; false on a read error (errno set). */
bool md5_fd(int fd, char out[33]);

#endif
