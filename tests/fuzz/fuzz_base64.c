/* The one base64 (src/util/base64.c): any bytes either decode strictly
 * (a multiple of 4 characters of the alphabet, '=' only at the end) and
 * encode back to the same characters when their padding bits are zero, or
 * are refused with a reason; and any bytes encode to base64 that decodes
 * back to them, the table encoder agreeing with a plain one. */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "util/base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Whether s is base64 by the rules, judged character by character. */
static bool is_base64(const char *s, size_t n)
{
	if (n % 4)
		return false;
	size_t pad = n && s[n - 1] == '=' ? (n > 1 && s[n - 2] == '=' ? 2 : 1) : 0;
	for (size_t i = 0; i < n - pad; i++)
		if (!s[i] || !strchr(alphabet, s[i]))
			return false;
	return true;
}

static void encode_plain(char *o, const unsigned char *u, size_t len)
{
	for (size_t i = 0; i < len; i += 3, o += 4) {
		unsigned v = (unsigned)u[i] << 16 | (i + 1 < len ? (unsigned)u[i + 1] << 8 : 0) |
			     (i + 2 < len ? u[i + 2] : 0);
		o[0] = alphabet[v >> 18];
		o[1] = alphabet[(v >> 12) & 63];
		o[2] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
		o[3] = i + 2 < len ? alphabet[v & 63] : '=';
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data, *why = NULL;
	size_t n = 0;
	char *dec = base64_decode(s, size, &n, &why);
	FUZZ_CHECK(!dec == !is_base64(s, size));
	if (dec) {
		FUZZ_CHECK(n <= BASE64_DECODED_MAX(size) && dec[n] == '\0');
		FUZZ_CHECK(n == size / 4 * 3 - (size && s[size - 1] == '=') -
					(size > 1 && s[size - 2] == '='));
		char *again = base64_encode(dec, n);
		FUZZ_CHECK(again && strlen(again) == size);
		/* the same but for the bits that padding leaves over */
		for (size_t i = 0; i < size; i++)
			FUZZ_CHECK(again[i] == s[i] || i + 3 >= size);
		free(again);
		free(dec);
	} else {
		FUZZ_CHECK(why && *why);
	}

	char *enc = base64_encode(data, size), *plain = malloc(BASE64_LEN(size) + 1);
	FUZZ_CHECK(enc && plain && strlen(enc) == BASE64_LEN(size));
	encode_plain(plain, data, size);
	FUZZ_CHECK(memcmp(enc, plain, BASE64_LEN(size)) == 0);
	char *back = base64_decode(enc, BASE64_LEN(size), &n, NULL);
	FUZZ_CHECK(back && n == size && memcmp(back, data, size) == 0);
	free(back);
	free(plain);
	free(enc);
	return 0;
}
