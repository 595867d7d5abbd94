/* SHA-256 through libcrypto's EVP (sha256.h). */
#include "image/sha256.h"

#include <errno.h>
#include <stdio.h>

#include "crypto/ossl.h"

int sha256_init(struct sha256 *s, struct ab_error *err)
{
	s->ctx = NULL;
	int rc = ab_crypto_load("--image", err);
	if (rc < 0)
		return rc;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(c);
		return ab_error_set(err, ENOMEM, "--image: cannot start a SHA-256 digest");
	}
	s->ctx = c;
	return 0;
}

void sha256_update(struct sha256 *s, const void *data, size_t len)
{
	EVP_DigestUpdate(s->ctx, data, len);
}

void sha256_hex(struct sha256 *s, char out[65])
{
	unsigned char d[32];
	unsigned int n = 0;
	if (!EVP_DigestFinal_ex(s->ctx, d, &n) || n != sizeof(d))
		memset(d, 0, sizeof(d)); /* then it matches no digest of a blob */
	for (size_t i = 0; i < sizeof(d); i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
	sha256_free(s);
}

void sha256_free(struct sha256 *s)
{
	if (s->ctx)
		EVP_MD_CTX_free(s->ctx);
	s->ctx = NULL;
}

int sha256_hex_of(const void *data, size_t len, char out[65], struct ab_error *err)
{
	struct sha256 h;
	int rc = sha256_init(&h, err);
	if (rc < 0)
		return rc;
	sha256_update(&h, data, len);
	sha256_hex(&h, out);
	return 0;
}
