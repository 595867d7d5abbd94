/* Base64 (base64.h). Written here, not taken from libcrypto: the output
 * streams through it in pieces (jsonw.c, serve_out.c) on every `agentbox
 * run --capture`, which maps no libcrypto, and OpenSSL's EVP_DecodeBlock
 * is not strict (it skips blanks and keeps the padding's zero bytes). */
#include "util/base64.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The two characters of each 12-bit value v at 2 * v, made by the
 * compiler (a table built at run time would need a lock: sessions may
 * run in threads of their own). */
#define B64(x)                                                                                     \
	(char)((x) + ((x) < 26	  ? 'A'                                                            \
		      : (x) < 52  ? 'a' - 26                                                       \
		      : (x) < 62  ? '0' - 52                                                       \
		      : (x) == 62 ? '+' - 62                                                       \
				  : '/' - 63))
#define B64_PAIR(v) B64((v) >> 6), B64((v)&63)
#define B64_4(v)    B64_PAIR(v), B64_PAIR((v) + 1), B64_PAIR((v) + 2), B64_PAIR((v) + 3)
#define B64_16(v)   B64_4(v), B64_4((v) + 4), B64_4((v) + 8), B64_4((v) + 12)
#define B64_64(v)   B64_16(v), B64_16((v) + 16), B64_16((v) + 32), B64_16((v) + 48)
#define B64_256(v)  B64_64(v), B64_64((v) + 64), B64_64((v) + 128), B64_64((v) + 192)
#define B64_1024(v) B64_256(v), B64_256((v) + 256), B64_256((v) + 512), B64_256((v) + 768)
static const char b64_pair[2 * 4096] = {B64_1024(0), B64_1024(1024), B64_1024(2048),
					B64_1024(3072)};

size_t base64_encode_into(char *dst, const void *src, size_t len)
{
	const unsigned char *u = src;
	char *o = dst;
	size_t i = 0;
	for (; i + 3 <= len; i += 3, o += 4) {
		unsigned v = (unsigned)u[i] << 16 | (unsigned)u[i + 1] << 8 | u[i + 2];
		memcpy(o, b64_pair + 2 * (v >> 12), 2);
		memcpy(o + 2, b64_pair + 2 * (v & 4095), 2);
	}
	if (i < len) {
		unsigned v = (unsigned)u[i] << 16 | (i + 1 < len ? (unsigned)u[i + 1] << 8 : 0);
		o[0] = b64[v >> 18];
		o[1] = b64[(v >> 12) & 63];
		o[2] = i + 1 < len ? b64[(v >> 6) & 63] : '=';
		o[3] = '=';
		o += 4;
	}
	return (size_t)(o - dst);
}

char *base64_encode(const void *s, size_t len)
{
	char *out = malloc(BASE64_LEN(len) + 1);
	if (!out)
		return NULL;
	out[base64_encode_into(out, s, len)] = '\0';
	return out;
}

/* 1 + the value of each base64 character, 0 for the others: a table, as
 * uploads decode megabytes at a time. */
static const unsigned char b64_values[256] = {
	['A'] = 1,  ['B'] = 2,	['C'] = 3,  ['D'] = 4,	['E'] = 5,  ['F'] = 6,	['G'] = 7,
	['H'] = 8,  ['I'] = 9,	['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14,
	['O'] = 15, ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21,
	['V'] = 22, ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28,
	['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35,
	['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42,
	['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49,
	['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
	['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63,
	['/'] = 64};

/* What is wrong with the n characters at s, which are not base64. */
static const char *base64_why(const char *s, size_t n)
{
	static __thread char why[80];
	if (n % 4) {
		snprintf(why, sizeof(why), "%zu characters, not a multiple of 4", n);
		return why;
	}
	size_t i = 0;
	while (i < n && b64_values[(unsigned char)s[i]])
		i++;
	if (i < n && s[i] == '=')
		snprintf(why, sizeof(why), "'=' at offset %zu, before the end", i);
	else
		snprintf(why, sizeof(why), "a character outside the base64 alphabet at offset %zu",
			 i);
	return why;
}

long base64_decode_into(void *dst, const char *s, size_t n, const char **why)
{
	unsigned char *out = dst;
	size_t o = 0;
	for (size_t i = 0; n % 4 == 0 && i < n; i += 4) {
		const unsigned char *q = (const unsigned char *)s + i;
		int pad = i + 4 == n ? (q[3] == '=') + (q[3] == '=' && q[2] == '=') : 0;
		int v0 = b64_values[q[0]] - 1, v1 = b64_values[q[1]] - 1;
		int v2 = pad == 2 ? 0 : b64_values[q[2]] - 1, v3 = pad ? 0 : b64_values[q[3]] - 1;
		if ((v0 | v1 | v2 | v3) < 0)
			break;
		uint32_t w =
			(uint32_t)v0 << 18 | (uint32_t)v1 << 12 | (uint32_t)v2 << 6 | (uint32_t)v3;
		out[o++] = (unsigned char)(w >> 16);
		if (pad < 2)
			out[o++] = (unsigned char)(w >> 8);
		if (pad < 1)
			out[o++] = (unsigned char)w;
		if (i + 4 == n)
			return (long)o;
	}
	if (n == 0)
		return 0;
	if (why)
		*why = base64_why(s, n);
	return -1;
}

char *base64_decode(const char *s, size_t n, size_t *out_len, const char **why)
{
	char *out = malloc(BASE64_DECODED_MAX(n) + 1);
	if (!out) {
		if (why)
			*why = "out of memory";
		return NULL;
	}
	long got = base64_decode_into(out, s, n, why);
	if (got < 0) {
		free(out);
		return NULL;
	}
	out[got] = '\0';
	*out_len = (size_t)got;
	return out;
}
