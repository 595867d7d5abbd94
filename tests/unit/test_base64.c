/* The one base64 (src/util/base64.c): RFC 4648's vectors, the table
 * encoder against a plain one, round trips at every length, and the
 * strict decoder's refusals, each with its reason. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"

Test(base64, rfc4648_vectors)
{
	const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	for (size_t i = 0; i < 7; i++) {
		char *s = base64_encode(in[i], strlen(in[i]));
		cr_assert_str_eq(s, out[i]);
		free(s);
	}
	char *s = base64_encode("\x00\xff\xfe", 3);
	cr_assert_str_eq(s, "AP/+");
	free(s);
}

Test(base64, the_table_encoder_matches_a_plain_one_at_every_length)
{
	static const char tbl[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned char in[64];
	char out[BASE64_LEN(sizeof(in))], want[BASE64_LEN(sizeof(in))];
	unsigned seed = 3;
	for (size_t n = 0; n <= sizeof(in); n++) {
		for (size_t i = 0; i < n; i++)
			in[i] = (unsigned char)rand_r(&seed);
		size_t o = 0;
		for (size_t i = 0; i < n; i += 3) {
			unsigned v = (unsigned)in[i] << 16 |
				     (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
				     (i + 2 < n ? in[i + 2] : 0);
			want[o++] = tbl[v >> 18];
			want[o++] = tbl[(v >> 12) & 63];
			want[o++] = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
			want[o++] = i + 2 < n ? tbl[v & 63] : '=';
		}
		cr_assert_eq(base64_encode_into(out, in, n), o, "%zu bytes", n);
		cr_assert(memcmp(out, want, o) == 0, "%zu bytes", n);
	}
}

Test(base64, every_twelve_bit_value_in_both_halves)
{
	static const char tbl[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	for (unsigned hi = 0; hi < 4096; hi++) {
		unsigned lo = 4095 - hi, v = hi << 12 | lo;
		unsigned char in[3] = {(unsigned char)(v >> 16), (unsigned char)(v >> 8),
				       (unsigned char)v};
		char out[4], want[4] = {tbl[hi >> 6], tbl[hi & 63], tbl[lo >> 6], tbl[lo & 63]};
		cr_assert_eq(base64_encode_into(out, in, 3), 4);
		cr_assert(memcmp(out, want, 4) == 0, "0x%06x", v);
	}
}

Test(base64, decodes_the_rfc4648_vectors_and_binary)
{
	const char *in[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	const char *out[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		size_t n = 99;
		const char *why = NULL;
		char *s = base64_decode(in[i], strlen(in[i]), &n, &why);
		cr_assert_not_null(s, "%s: %s", in[i], why);
		cr_assert_eq(n, strlen(out[i]));
		cr_assert_str_eq(s, out[i]); /* NUL-terminated */
		free(s);
	}
	unsigned char b[4];
	cr_assert_eq(base64_decode_into(b, "AP/+", 4, NULL), 3);
	cr_assert(memcmp(b, "\x00\xff\xfe", 3) == 0);
}

Test(base64, round_trips_every_length_and_byte)
{
	unsigned char in[300];
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i * 97 + 13);
	for (size_t n = 0; n <= sizeof(in); n++) {
		char *e = base64_encode(in, n);
		cr_assert_not_null(e);
		cr_assert_eq(strlen(e), BASE64_LEN(n));
		size_t m;
		char *d = base64_decode(e, strlen(e), &m, NULL);
		cr_assert_not_null(d, "%zu bytes", n);
		cr_assert_eq(m, n);
		cr_assert(memcmp(d, in, n) == 0, "%zu bytes", n);
		free(d);
		free(e);
	}
}

Test(base64, refuses_what_is_not_strict_base64_saying_why)
{
	struct {
		const char *s, *why;
	} bad[] = {
		{"Zm9", "3 characters, not a multiple of 4"},
		{"Zm9vY", "5 characters, not a multiple of 4"},
		{"Zm 9", "a character outside the base64 alphabet at offset 2"},
		{"Zm9v\nZm9v", "9 characters, not a multiple of 4"},
		{"Zm9vZm9\n", "a character outside the base64 alphabet at offset 7"},
		{"Zm-_", "a character outside the base64 alphabet at offset 2"}, /* base64url */
		{"Zg==Zg==", "'=' at offset 2, before the end"},
		{"Zm=v", "'=' at offset 2, before the end"},
		{"Z===", "'=' at offset 1, before the end"},
		{"====", "'=' at offset 0, before the end"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = 7;
		const char *why = NULL;
		char *s = base64_decode(bad[i].s, strlen(bad[i].s), &n, &why);
		cr_assert_null(s, "%s decoded", bad[i].s);
		cr_assert_eq(n, 7, "out_len untouched");
		cr_assert_str_eq(why, bad[i].why);
	}
	/* a NUL byte is not base64 either, wherever it is */
	const char *why = NULL;
	unsigned char b[3];
	cr_assert_eq(base64_decode_into(b, "Zm\0v", 4, &why), -1);
	cr_assert_str_eq(why, "a character outside the base64 alphabet at offset 2");
}
