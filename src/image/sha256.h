/* SHA-256, to check an OCI image's blobs against their digests while they
 * are read: libcrypto's EVP (crypto/ossl.h), loaded when an image is
 * first read. */
#ifndef AB_SHA256_H
#define AB_SHA256_H

#include <stddef.h>

#include "util/error.h"

struct sha256 {
	void *ctx; /* EVP_MD_CTX */
};

/* Start a digest; 0, or -errno with err saying why (libcrypto missing). */
int sha256_init(struct sha256 *s, struct ab_error *err);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* The digest as 64 lowercase hex digits and a NUL; s is then done with. */
void sha256_hex(struct sha256 *s, char out[65]);
/* Let go of a digest not finished (after sha256_hex: nothing to do). */
void sha256_free(struct sha256 *s);
/* The digest of len bytes at data, in one call. */
int sha256_hex_of(const void *data, size_t len, char out[65], struct ab_error *err);

#endif
