/* The .gitignore patterns a layer's review honours (layer_ignore.h): git's
 * wildmatch rules, and a bound on what a hostile pattern costs. */
#include <criterion/criterion.h>
#include <time.h>

#include "layer/layer_ignore.h"

#define MATCH(p, s)    cr_assert(layer_ignore_wildmatch(p, s), "%s should match %s", p, s)
#define NO_MATCH(p, s) cr_assert_not(layer_ignore_wildmatch(p, s), "%s should not match %s", p, s)

Test(ignore, stars_and_classes_stop_at_slashes)
{
	MATCH("*.pyc", "a.pyc");
	NO_MATCH("*.pyc", "d/a.pyc"); /* a name pattern is matched against the name */
	MATCH("a?c", "abc");
	NO_MATCH("a?c", "a/c");
	MATCH("doc/*.md", "doc/x.md");
	NO_MATCH("doc/*.md", "doc/sub/x.md");
	MATCH("[abc].txt", "b.txt");
	MATCH("[!abc].txt", "d.txt");
	NO_MATCH("[!abc].txt", "a.txt");
	MATCH("[a-c]x", "cx");
	NO_MATCH("a[/]b", "a/b");
	MATCH("[unterminated", "[unterminated");
	MATCH("\\*lit", "*lit");
	NO_MATCH("\\*lit", "xlit");
}

Test(ignore, double_stars)
{
	MATCH("**/gen", "gen");
	MATCH("**/gen", "a/b/gen");
	MATCH("docs/**/gen", "docs/gen");
	MATCH("docs/**/gen", "docs/a/b/gen");
	NO_MATCH("docs/**/gen", "other/a/gen");
	MATCH("build/**", "build/x/y");
	NO_MATCH("build/**", "build");
	MATCH("a**b", "axxb"); /* not a component: one star */
	NO_MATCH("a**b", "a/b");
}

Test(ignore, a_hostile_pattern_is_bounded)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	NO_MATCH("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
		 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
	cr_assert_lt(ms, 1000.0, "took %.0f ms", ms);
}
