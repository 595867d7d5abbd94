/* Base64 (RFC 4648 section 4, the standard alphabet with '=' padding): the
 * one encoder and decoder of agentbox. Output, uploads, files and a proxied
 * "Authorization: Basic" header all go through it. */
#ifndef AB_BASE64_H
#define AB_BASE64_H

#include <stddef.h>

/* The length of the base64 of len bytes (no NUL). */
#define BASE64_LEN(len) (((len) + 2) / 3 * 4)
/* At most how many bytes n characters of base64 decode to. */
#define BASE64_DECODED_MAX(n) ((n) / 4 * 3)

/* The base64 of len bytes at s into dst, which has room for BASE64_LEN(len)
 * bytes (no NUL); returns that length. Two output characters per table
 * look-up: the streamed output's encoder. */
size_t base64_encode_into(char *dst, const void *s, size_t len);
/* The same as a heap string; NULL when out of memory. */
char *base64_encode(const void *s, size_t len);

/* Decode the n characters at s into dst (room for BASE64_DECODED_MAX(n)
 * bytes), strictly: a multiple of 4 characters of the alphabet, '=' only
 * as the last one or two, nothing else (no spaces, no line breaks). The
 * decoded length, or -1 with *why (when why is not NULL) saying what is
 * wrong ("a character outside the base64 alphabet at offset 12"), written
 * into a static buffer of the calling thread. */
long base64_decode_into(void *dst, const char *s, size_t n, const char **why);
/* The same into a heap buffer of *out_len bytes and a NUL; NULL when s is
 * not base64 (*why set as above) or when out of memory (*why "out of
 * memory"). */
char *base64_decode(const char *s, size_t n, size_t *out_len, const char **why);

#endif
