/* The legacy runtime's path rules (src/lex/rtpath.c): each expected
 * value here is what Python 3.11 gives for the same input, through
 * urllib.parse.unquote() and main.py's get_safe_path() on a base that does
 * not exist (so realpath() is lexical, as ours is). */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "lex/rtpath.h"

#define BASE "/nonexist-ab/app"

static const struct {
	const char *in;
	const char *rel; /* NULL: Access denied (403) */
} within_cases[] = {
	{"", ""},
	{"/", ""},
	{"a", "a"},
	{"/a/b", "a/b"},
	{"a//b/", "a/b"},
	{"./a/./b", "a/b"},
	{"a/../b", "b"},
	{"..", NULL},
	{"../", NULL},
	{"../app", ""},
	{"../app/x", "x"},
	{"../apps/x", NULL},
	{"../../nonexist-ab/app/y", "y"},
	{"a/../../app/z", "z"},
	{"/../app", ""},
	{"//etc/passwd", "etc/passwd"},
	{"a/b/../../..", NULL},
	{"...", "..."},
	{".hidden/..x", ".hidden/..x"},
	{"a/b/c/../../../../app", ""},
};

Test(rtpath, within_the_base_as_get_safe_path)
{
	char out[256];
	for (size_t i = 0; i < sizeof(within_cases) / sizeof(within_cases[0]); i++) {
		int r = ab_rtpath_within(BASE, within_cases[i].in, 0, out, sizeof(out));
		if (!within_cases[i].rel) {
			cr_expect_eq(r, -EACCES, "%s: %d", within_cases[i].in, r);
			continue;
		}
		cr_expect_eq(r, 0, "%s: %d", within_cases[i].in, r);
		cr_expect_str_eq(out, within_cases[i].rel, "%s", within_cases[i].in);
	}
}

Test(rtpath, root_base_holds_everything)
{
	char out[64];
	cr_expect_eq(ab_rtpath_within("/", "../../etc/passwd", 0, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "etc/passwd");
	cr_expect_eq(ab_rtpath_within("/", "..", 0, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "");
}

Test(rtpath, bad_base_and_long_paths_refused)
{
	char out[8];
	cr_expect_eq(ab_rtpath_within("app", "a", 0, out, sizeof(out)), -EINVAL);
	cr_expect_eq(ab_rtpath_within(BASE, "abcdefgh", 0, out, sizeof(out)), -ENAMETOOLONG);
	cr_expect_eq(ab_rtpath_within(BASE, "abcdefg", 0, out, sizeof(out)), 0);
	static char big[20000];
	memset(big, 'x', sizeof(big) - 1);
	char o2[64];
	cr_expect_eq(ab_rtpath_within(BASE, big, 0, o2, sizeof(o2)), -ENAMETOOLONG);
}

/* sandboxd's SanitizePath (its REST API's paths), lexically: a path at or
 * under the base as it is, any other joined to it, as Go's filepath.Join
 * and Clean give them */
static const struct {
	const char *in;
	const char *rel; /* NULL: path traversal forbidden (403) */
} base_abs_cases[] = {
	{"", ""},
	{"/", ""},
	{"a/b", "a/b"},
	{BASE, ""},
	{BASE "/", ""},
	{BASE "/x/./y", "x/y"},
	{BASE "/x/../..", NULL},
	{BASE "/../app/z", "z"},
	{BASE "x", "nonexist-ab/appx"},
	{"/nonexist-ab/other", "nonexist-ab/other"},
	{"../..", NULL},
	{"/..", NULL},
};

Test(rtpath, base_abs_as_sanitize_path)
{
	char out[256];
	for (size_t i = 0; i < sizeof(base_abs_cases) / sizeof(base_abs_cases[0]); i++) {
		int r = ab_rtpath_within(BASE, base_abs_cases[i].in, AB_RTPATH_BASE_ABS, out,
					 sizeof(out));
		if (!base_abs_cases[i].rel) {
			cr_expect_eq(r, -EACCES, "%s: %d", base_abs_cases[i].in, r);
			continue;
		}
		cr_expect_eq(r, 0, "%s: %d", base_abs_cases[i].in, r);
		cr_expect_str_eq(out, base_abs_cases[i].rel, "%s", base_abs_cases[i].in);
	}
}

static const struct {
	const char *in, *out;
} unquote_cases[] = {
	{"a%2Fb", "a/b"},     {"%252F", "%2F"}, {"%", "%"},	  {"%4", "%4"},
	{"%4g", "%4g"},	      {"%41%42", "AB"}, {"a%20b", "a b"}, {"%e2%82%ac", "\xe2\x82\xac"},
	{"%2e%2e%2f", "../"}, {"x%", "x%"},	{"%%41", "%A"},
};

Test(rtpath, unquote_as_urllib)
{
	for (size_t i = 0; i < sizeof(unquote_cases) / sizeof(unquote_cases[0]); i++) {
		const char *in = unquote_cases[i].in;
		char out[64];
		size_t n = 99;
		cr_expect_eq(ab_rtpath_unquote(in, strlen(in), out, &n), 0, "%s", in);
		cr_expect_str_eq(out, unquote_cases[i].out, "%s", in);
		cr_expect_eq(n, strlen(unquote_cases[i].out), "%s", in);
	}
}

Test(rtpath, unquote_twice_gives_the_slash)
{
	/* the SDK quotes with safe='' and the framework decodes once more */
	char once[16], twice[16];
	size_t n;
	cr_assert_eq(ab_rtpath_unquote("a%252Fb", 7, once, &n), 0);
	cr_assert_eq(ab_rtpath_unquote(once, n, twice, &n), 0);
	cr_expect_str_eq(twice, "a/b");
}

Test(rtpath, unquote_refuses_nul)
{
	char out[16];
	size_t n;
	cr_expect_eq(ab_rtpath_unquote("a%00b", 5, out, &n), -EINVAL);
	cr_expect_eq(ab_rtpath_unquote("a\0b", 3, out, &n), -EINVAL);
}
