/* The streaming JSON writer: what it writes is what json-c writes for the
 * same values, big texts are escaped from their bytes (lossy), and the
 * output survives a round trip through json-c's parser. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/jsonw.h"
#include "util/output.h"

struct mem {
	char *p;
	size_t len, calls;
	int fail_after; /* the sink fails from this call on; 0: never */
};

static int mem_sink(void *arg, const char *p, size_t n)
{
	struct mem *m = arg;
	if (m->fail_after && ++m->calls >= (size_t)m->fail_after)
		return -ENOSPC;
	m->p = realloc(m->p, m->len + n + 1);
	cr_assert_not_null(m->p);
	memcpy(m->p + m->len, p, n);
	m->len += n;
	m->p[m->len] = '\0';
	return 0;
}

static char *written(json_object *o, size_t *len)
{
	struct mem m = {0};
	struct ab_jw w;
	ab_jw_init(&w, mem_sink, &m);
	ab_jw_value(&w, o);
	cr_assert_eq(ab_jw_finish(&w), 0);
	if (len)
		*len = m.len;
	return m.p ? m.p : strdup("");
}

Test(jsonw, writes_what_json_c_writes)
{
	json_object *o = json_tokener_parse(
		"{\"a\":1,\"b\":-9223372036854775807,\"c\":18446744073709551615,\"d\":0.5,"
		"\"e\":true,\"f\":null,\"g\":[1,\"x\\\"y\\\\z/\",{\"h\":[]}],\"i\":\"\\u0001\\n\\t"
		"\\u00e9\\u20ac\",\"j\":{}}");
	cr_assert_not_null(o);
	char *mine = written(o, NULL);
	const char *theirs = json_object_to_json_string_ext(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	cr_assert_str_eq(mine, theirs);
	free(mine);
	json_object_put(o);
}

Test(jsonw, text_is_escaped_lossily_from_its_bytes)
{
	/* NUL, controls, quote, backslash, valid 2- and 4-byte sequences, a
	 * lone continuation byte, a truncated sequence, an overlong '/' */
	static const char in[] = "a\0b\x01\x1f\"\\/\xc3\xa9\xf0\x9f\x98\x80\x80z\xe2\x82\xc0\xaf";
	json_object *t = ab_json_text(in, sizeof(in) - 1);
	char *mine = written(t, NULL);
	cr_assert_str_eq(mine, "\"a\\u0000b\\u0001\\u001f\\\"\\\\/\xc3\xa9\xf0\x9f\x98\x80"
			       "\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
	/* json-c writes it the same way through the serializer */
	cr_assert_str_eq(json_object_to_json_string_ext(t, JSON_C_TO_STRING_PLAIN), mine);
	/* and reads back what was meant */
	json_object *back = json_tokener_parse(mine);
	cr_assert_not_null(back);
	cr_assert_eq(json_object_get_string_len(back), 30);
	cr_assert_eq(memcmp(json_object_get_string(back), "a\0b\x01\x1f\"\\/", 8), 0);
	json_object_put(back);
	json_object_put(t);
	free(mine);
}

Test(jsonw, a_big_text_crosses_the_buffer_intact)
{
	size_t n = 300000;
	char *data = malloc(n);
	for (size_t i = 0; i < n; i++)
		data[i] = (char)(i % 7 == 0 ? 0 : 'a' + i % 26);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "stdout", ab_json_text(data, n));
	json_object_object_add(o, "n", json_object_new_int64((int64_t)n));
	size_t len;
	char *text = written(o, &len);
	json_object *back = json_tokener_parse(text);
	cr_assert_not_null(back, "not JSON: %.200s", text);
	json_object *s;
	cr_assert(json_object_object_get_ex(back, "stdout", &s));
	cr_assert_eq((size_t)json_object_get_string_len(s), n);
	cr_assert_eq(memcmp(json_object_get_string(s), data, n), 0);
	json_object_put(back);
	json_object_put(o);
	free(text);
	free(data);
}

Test(jsonw, the_first_sink_error_is_returned)
{
	struct mem m = {.fail_after = 2};
	struct ab_jw w;
	ab_jw_init(&w, mem_sink, &m);
	char *big = calloc(1, 100000);
	json_object *t = ab_json_text(big, 100000);
	ab_jw_value(&w, t);
	cr_assert_eq(ab_jw_finish(&w), -ENOSPC);
	json_object_put(t);
	free(big);
	free(m.p);
}

/* Bytes that exercise every branch of the escaper: plain runs, each byte
 * JSON must escape (every control byte among them), UTF-8 sequences whole
 * and cut, bytes that are never UTF-8, characters followed by stray
 * continuation bytes (a piece must not cut them either); at every
 * alignment of its eight-byte steps. */
static void tricky_bytes(unsigned char *p, size_t n, unsigned *seed)
{
	static const char *pieces[] = {
		"plain text ",
		"\"",
		"\\",
		"\n",
		"\t",
		"\r",
		"\b",
		"\f",
		"\x01",
		"\x1f",
		"/",
		"\x7f",
		"\xc3\xa9",
		"\xe2\x82\xac",
		"\xf0\x9f\x98\x80",
		"\xe2\x82",
		"\xff",
		"\xc0\xaf",
		"\xed\xa0\x80",
		"\xc3\xa9\x80\x80\x80",
		"\xf0\x9f\x98\x80\x80\x80\x80\x80",
		"\0",
		NULL, /* a control byte, 0x01 to 0x1f */
	};
	size_t i = 0;
	while (i < n) {
		const char *s = pieces[rand_r(seed) % (sizeof(pieces) / sizeof(*pieces))];
		if (!s) {
			p[i++] = (unsigned char)(1 + rand_r(seed) % 31);
			continue;
		}
		size_t len = s[0] ? strlen(s) : 1;
		for (size_t k = 0; k < len && i < n; k++)
			p[i++] = (unsigned char)s[k];
	}
}

Test(jsonw, the_fast_escaper_escapes_as_json_c_does)
{
	unsigned seed = 21;
	unsigned char in[300];
	char out[6 * sizeof(in)];
	for (int round = 0; round < 2000; round++) {
		size_t n = (size_t)rand_r(&seed) % sizeof(in);
		tricky_bytes(in, n, &seed);
		json_object *o = json_object_new_string_len((const char *)in, (int)n);
		size_t jlen;
		const char *j = json_object_to_json_string_length(
			o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &jlen);
		size_t len = ab_json_escape(out, (const char *)in, n, false);
		cr_assert_eq(len, jlen - 2, "round %d: %zu bytes, not %zu", round, len, jlen - 2);
		cr_assert(memcmp(out, j + 1, len) == 0, "round %d: %.*s", round, (int)len, out);
		json_object_put(o);
	}
}

Test(jsonw, the_lossy_escaper_is_utf8_repair_then_escape)
{
	unsigned seed = 4;
	unsigned char in[300];
	char out[6 * sizeof(in)], want[6 * 3 * sizeof(in)];
	for (int round = 0; round < 2000; round++) {
		size_t n = (size_t)rand_r(&seed) % sizeof(in), fixed_len;
		tricky_bytes(in, n, &seed);
		char *fixed = utf8_lossy((const char *)in, n, &fixed_len);
		size_t wlen = ab_json_escape(want, fixed, fixed_len, false);
		size_t len = ab_json_escape(out, (const char *)in, n, true);
		cr_assert_eq(len, wlen, "round %d", round);
		cr_assert(memcmp(out, want, len) == 0, "round %d", round);
		free(fixed);
	}
}

Test(jsonw, text_pieces_make_the_whole)
{
	/* pieces never cut a character: written piece by piece, the text is
	 * what it is escaped at once, and base64 pieces decode as the whole;
	 * in small pieces (room for 4 bytes and up) and big ones */
	size_t n = 100000;
	unsigned char *in = malloc(n);
	unsigned seed = 7;
	tricky_bytes(in, n, &seed);
	char *whole = malloc(6 * n), *pieces = malloc(6 * n);
	size_t wlen = ab_json_escape(whole, (const char *)in, n, true);
	for (int round = 0; round < 4; round++) {
		int base64 = round & 1;
		size_t most = round < 2 ? 4000 : 200;
		const char *s = (const char *)in;
		size_t left = n, len = 0;
		while (left)
			len += ab_json_text_piece(pieces + len, 24 + (size_t)rand_r(&seed) % most,
						  &s, &left, base64);
		if (base64) {
			char *b = base64_encode((const char *)in, n);
			cr_assert_eq(len, strlen(b));
			cr_assert(memcmp(pieces, b, len) == 0);
			free(b);
		} else {
			cr_assert_eq(len, wlen, "round %d", round);
			cr_assert(memcmp(pieces, whole, len) == 0, "round %d", round);
		}
	}
	free(in);
	free(whole);
	free(pieces);
}
