/* The /execute command splitter (src/lex/shlex.c): any bytes split
 * into at most as many words as bytes, none longer than the input, or are
 * refused with one of Python's messages; and the words, each quoted as
 * Python's shlex.quote() would ('...', a ' as '"'"'), joined by spaces,
 * split back into the same words. */
#include <errno.h>
#include <stdbool.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "lex/shlex.h"

static bool known(const char *why)
{
	return why && (!strcmp(why, "No closing quotation") ||
		       !strcmp(why, "No escaped character") || !strcmp(why, "embedded null byte"));
}

static char *quoted(const struct ab_shlex *sh, size_t *len)
{
	size_t cap = 1;
	for (size_t i = 0; i < sh->argc; i++)
		cap += 5 * strlen(sh->argv[i]) + 3;
	char *q = malloc(cap), *p = q;
	FUZZ_CHECK(q);
	for (size_t i = 0; i < sh->argc; i++) {
		*p++ = '\'';
		for (const char *c = sh->argv[i]; *c; c++) {
			if (*c == '\'') {
				memcpy(p, "'\"'\"'", 5);
				p += 5;
			} else {
				*p++ = *c;
			}
		}
		*p++ = '\'';
		*p++ = ' ';
	}
	*len = (size_t)(p - q);
	return q;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ab_shlex sh, again;
	const char *why;
	int r = ab_shlex_split((const char *)data, size, 4096, &sh, &why);
	if (r < 0) {
		FUZZ_CHECK(r == -E2BIG || (r == -EINVAL && known(why)));
		ab_shlex_free(&sh);
		return 0;
	}
	FUZZ_CHECK(sh.argc <= size && sh.argv && !sh.argv[sh.argc]);
	size_t total = 0;
	for (size_t i = 0; i < sh.argc; i++)
		total += strlen(sh.argv[i]);
	FUZZ_CHECK(total <= size);
	size_t qlen;
	char *q = quoted(&sh, &qlen);
	FUZZ_CHECK(ab_shlex_split(q, qlen, 4096, &again, &why) == 0 && again.argc == sh.argc);
	for (size_t i = 0; i < sh.argc; i++)
		FUZZ_CHECK(!strcmp(again.argv[i], sh.argv[i]));
	free(q);
	ab_shlex_free(&again);
	ab_shlex_free(&sh);
	return 0;
}
