/* The legacy runtime's path rules (src/lex/rtpath.c): any bytes,
 * decoded twice (the framework's decoding, then main.py's), decode to no
 * more bytes than they had or are refused for a NUL; a decoded path is
 * either refused as escaping the base or made a normal relative path (no
 * leading '/', no empty, "." or ".." component) that maps to itself again,
 * with the base "/" taking every path; with AB_RTPATH_BASE_ABS (sandboxd's
 * REST paths) a path at or under the base is its rest below the base and
 * any other is cleaned as without the flag. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "lex/rtpath.h"

static void check_normal(const char *rel)
{
	if (!*rel)
		return;
	FUZZ_CHECK(rel[0] != '/' && rel[strlen(rel) - 1] != '/' && !strstr(rel, "//"));
	for (const char *c = rel; *c;) {
		const char *e = strchrnul(c, '/');
		size_t n = (size_t)(e - c);
		FUZZ_CHECK(!(n == 1 && c[0] == '.') && !(n == 2 && c[0] == '.' && c[1] == '.'));
		c = *e ? e + 1 : e;
	}
}

static void check_within(const char *base, const char *p)
{
	char rel[512], again[512], abs_rel[512], rest_rel[512];
	int r = ab_rtpath_within(base, p, 0, rel, sizeof(rel));
	/* sandboxd's semantics (AB_RTPATH_BASE_ABS): a p at or under base is
	 * its rest taken below base, any other p is get_safe_path()'s */
	size_t bn = strlen(base);
	bool under = !strncmp(p, base, bn) && (!p[bn] || p[bn] == '/');
	int ra = ab_rtpath_within(base, p, AB_RTPATH_BASE_ABS, abs_rel, sizeof(abs_rel));
	int rr = ab_rtpath_within(base, under ? p + bn : p, 0, rest_rel, sizeof(rest_rel));
	FUZZ_CHECK(ra == rr && (ra < 0 || !strcmp(abs_rel, rest_rel)));
	if (ra == 0) {
		check_normal(abs_rel);
		FUZZ_CHECK(ab_rtpath_within(base, abs_rel, AB_RTPATH_BASE_ABS, again,
					    sizeof(again)) == 0);
		FUZZ_CHECK(!strcmp(abs_rel, again));
	}
	if (r < 0) {
		FUZZ_CHECK(r == -ENAMETOOLONG || (r == -EACCES && strcmp(base, "/")));
		return;
	}
	check_normal(rel);
	FUZZ_CHECK(ab_rtpath_within(base, rel, 0, again, sizeof(again)) == 0);
	FUZZ_CHECK(!strcmp(rel, again));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *once = malloc(size + 1), *twice = malloc(size + 1);
	size_t n1, n2;
	FUZZ_CHECK(once && twice);
	int r = ab_rtpath_unquote((const char *)data, size, once, &n1);
	FUZZ_CHECK(n1 <= size && once[n1] == '\0');
	if (r == 0) {
		r = ab_rtpath_unquote(once, n1, twice, &n2);
		FUZZ_CHECK(n2 <= n1 && twice[n2] == '\0');
	}
	if (r < 0) {
		FUZZ_CHECK(r == -EINVAL);
	} else {
		check_within("/app", twice);
		check_within("/a/b/c", twice);
		check_within("/", twice);
	}
	free(once);
	free(twice);
	return 0;
}
