/* The legacy runtime's path rules (src/lex/rtpath.c): any bytes,
 * decoded twice (the framework's decoding, then main.py's), decode to no
 * more bytes than they had or are refused for a NUL; a decoded path is
 * either refused as escaping the base or made a normal relative path (no
 * leading '/', no empty, "." or ".." component) that maps to itself again,
 * with the base "/" taking every path. */
#include <errno.h>
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
	char rel[512], again[512];
	int r = ab_rtpath_within(base, p, rel, sizeof(rel));
	if (r < 0) {
		FUZZ_CHECK(r == -ENAMETOOLONG || (r == -EACCES && strcmp(base, "/")));
		return;
	}
	check_normal(rel);
	FUZZ_CHECK(ab_rtpath_within(base, rel, again, sizeof(again)) == 0);
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
