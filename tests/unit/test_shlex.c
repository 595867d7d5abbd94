/* The /execute splitter (src/lex/shlex.c) splits as Python's
 * shlex.split() does: each expected value here is what Python 3.11 gives
 * for the same input. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "lex/shlex.h"

#define MAXW 8

struct split_case {
	const char *in;
	size_t len;		 /* 0: strlen(in) */
	const char *words[MAXW]; /* NULL-terminated; ignored when why is set */
	const char *why;
};

static const struct split_case cases[] = {
	{"", 0, {NULL}, NULL},
	{"   ", 0, {NULL}, NULL},
	{"true", 0, {"true"}, NULL},
	{"echo hello world", 0, {"echo", "hello", "world"}, NULL},
	{" a\tb\r\nc ", 0, {"a", "b", "c"}, NULL},
	{"'a b'", 0, {"a b"}, NULL},
	{"\"a b\"", 0, {"a b"}, NULL},
	{"a''b", 0, {"ab"}, NULL},
	{"''", 0, {""}, NULL},
	{"\"\"", 0, {""}, NULL},
	{"a '' b", 0, {"a", "", "b"}, NULL},
	{"\"a\\\"b\"", 0, {"a\"b"}, NULL},
	{"\"a\\\\b\"", 0, {"a\\b"}, NULL},
	{"\"a\\nb\"", 0, {"a\\nb"}, NULL},
	{"\"a\\$b\"", 0, {"a\\$b"}, NULL},
	{"a\\ b", 0, {"a b"}, NULL},
	{"\\'", 0, {"'"}, NULL},
	{"\\\"", 0, {"\""}, NULL},
	{"'a\\b'", 0, {"a\\b"}, NULL},
	{"a\\\\", 0, {"a\\"}, NULL},
	{"a#b", 0, {"a#b"}, NULL},
	{"# not a comment", 0, {"#", "not", "a", "comment"}, NULL},
	{"a\\\nb", 0, {"a\nb"}, NULL},
	{"'a'\"b\"c", 0, {"abc"}, NULL},
	{"echo $HOME;ls|wc", 0, {"echo", "$HOME;ls|wc"}, NULL},
	{"x=1 'y'=\"2\"", 0, {"x=1", "y=2"}, NULL},
	{"'unclosed", 0, {NULL}, "No closing quotation"},
	{"\"unclosed", 0, {NULL}, "No closing quotation"},
	{"a\\", 0, {NULL}, "No escaped character"},
	{"\"a\\", 0, {NULL}, "No escaped character"},
	/* Python splits these; exec then refuses the NUL, after the split's
	 * own errors */
	{"a\0b", 3, {NULL}, "embedded null byte"},
	{"'\0", 2, {NULL}, "No closing quotation"},
};

Test(shlex, splits_as_python_does)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct split_case *c = &cases[i];
		size_t len = c->len ? c->len : strlen(c->in);
		struct ab_shlex sh;
		const char *why;
		int r = ab_shlex_split(c->in, len, 64, &sh, &why);
		if (c->why) {
			cr_expect_eq(r, -EINVAL, "case %zu: %d", i, r);
			cr_expect(why && strcmp(why, c->why) == 0, "case %zu: %s", i, why);
		} else {
			cr_assert_eq(r, 0, "case %zu (%s): %d %s", i, c->in, r, why);
			size_t n = 0;
			while (c->words[n])
				n++;
			cr_expect_eq(sh.argc, n, "case %zu: %zu words", i, sh.argc);
			for (size_t k = 0; k < n && k < sh.argc; k++)
				cr_expect_str_eq(sh.argv[k], c->words[k], "case %zu word %zu", i,
						 k);
			cr_expect_null(sh.argv[sh.argc]);
		}
		ab_shlex_free(&sh);
	}
}

Test(shlex, bounds_the_number_of_words)
{
	struct ab_shlex sh;
	const char *why;
	cr_expect_eq(ab_shlex_split("a b c", 5, 3, &sh, &why), 0);
	cr_expect_eq(sh.argc, 3);
	ab_shlex_free(&sh);
	cr_expect_eq(ab_shlex_split("a b c d", 7, 3, &sh, &why), -E2BIG);
	ab_shlex_free(&sh);
}

Test(shlex, any_bytes_split_within_the_input)
{
	/* random input from the bytes that matter: never a crash, every word
	 * within the buffer, no word longer than the input */
	static const char alphabet[] = " \t\n'\"\\a#\0";
	unsigned seed = 37;
	char in[64];
	for (int round = 0; round < 20000; round++) {
		size_t len = (size_t)(rand_r(&seed) % sizeof(in));
		for (size_t k = 0; k < len; k++)
			in[k] = alphabet[rand_r(&seed) % (sizeof(alphabet) - 1)];
		struct ab_shlex sh;
		const char *why;
		int r = ab_shlex_split(in, len, 64, &sh, &why);
		if (r == 0) {
			cr_assert_leq(sh.argc, len);
			for (size_t k = 0; k < sh.argc; k++)
				cr_assert_leq(strlen(sh.argv[k]), len);
		} else {
			cr_assert(r == -EINVAL && why, "round %d: %d", round, r);
		}
		ab_shlex_free(&sh);
	}
}
