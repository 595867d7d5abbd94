/* SHA-256 (FIPS 180-4), to check an OCI image's blobs against their digests
 * while they are read: no library for one hash. */
#ifndef AB_SHA256_H
#define AB_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	uint32_t h[8];
	uint64_t len;
	unsigned char buf[64];
	size_t n;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* The digest as 64 lowercase hex digits and a NUL. */
void sha256_hex(struct sha256 *s, char out[65]);

#endif
