/* The value parsers of options and profiles (src/util/parse.c): sizes,
 * durations, ids, rlimit names and paths in the view. The input, cut at
 * its first NUL, is given to each; after the first NUL comes a second
 * path for ab_path_is_under. What they accept must keep its promises:
 * normalised paths are normal, parsed numbers are in range. */
#include <limits.h>
#include <string.h>

#include "agentbox/agentbox.h"
#include "fuzz.h"
#include "cli/options.h"
#include "util/parse.h"

static bool is_normal(const char *p)
{
	if (p[0] != '/' || strstr(p, "//") || (strlen(p) > 1 && p[strlen(p) - 1] == '/'))
		return false;
	for (const char *s = p; (s = strchr(s, '/')); s++) {
		size_t n = strcspn(s + 1, "/");
		if ((n == 1 && s[1] == '.') || (n == 2 && s[1] == '.' && s[2] == '.'))
			return false;
	}
	return true;
}

static void check_path(const char *in, char **out)
{
	*out = NULL;
	if (ab_path_normalize(in, out) < 0) {
		FUZZ_CHECK(!*out);
		return;
	}
	FUZZ_CHECK(*out && is_normal(*out) && strlen(*out) <= strlen(in));
	char *again = NULL;
	FUZZ_CHECK(ab_path_normalize(*out, &again) == 0 && strcmp(again, *out) == 0);
	free(again);
	FUZZ_CHECK(ab_path_is_under(*out, *out) && ab_path_is_under(*out, "/"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	FUZZ_CHECK(s);
	memcpy(s, data, size);
	s[size] = '\0';
	size_t first = strlen(s);
	const char *second = first < size ? s + first + 1 : "";

	unsigned long long v;
	if (ab_parse_size(s, &v) == 0) {
		/* a plain number of bytes reads back the same */
		char buf[32];
		unsigned long long w;
		snprintf(buf, sizeof(buf), "%llu", v);
		FUZZ_CHECK(ab_parse_size(buf, &w) == 0 && w == v);
	}
	if (ab_parse_duration(s, &v) == 0)
		FUZZ_CHECK(v <= 365ULL * 24 * 3600 * 1000);
	uid_t id;
	if (ab_parse_id(s, &id) == 0)
		FUZZ_CHECK(id != (uid_t)-1);
	int res = ab_rlimit_by_name(s);
	if (res >= 0)
		FUZZ_CHECK(strcmp(ab_rlimit_name(res), s) == 0);

	char *a, *b;
	check_path(s, &a);
	check_path(second, &b);
	if (a && b && ab_path_is_under(a, b))
		FUZZ_CHECK(strncmp(a, b, strlen(b)) == 0 || strcmp(b, "/") == 0);
	free(a);
	free(b);
	free(s);
	return 0;
}
