/* Python's shlex.split() in C (shlex.h): the state machine of
 * shlex.read_token with posix=True, whitespace_split=True and no comment
 * characters, which is what shlex.split() sets up. */
#include "lex/shlex.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Ends the word in progress at *w: its NUL, its slot in argv. */
static int end_word(struct ab_shlex *sh, char **w, char *start, size_t max_args)
{
	if (sh->argc >= max_args)
		return -E2BIG;
	char **argv = realloc(sh->argv, (sh->argc + 2) * sizeof(*argv));
	if (!argv)
		return -ENOMEM;
	sh->argv = argv;
	*(*w)++ = '\0';
	argv[sh->argc++] = start;
	argv[sh->argc] = NULL;
	return 0;
}

int ab_shlex_split(const char *s, size_t len, size_t max_args, struct ab_shlex *out,
		   const char **why)
{
	*out = (struct ab_shlex){0};
	*why = NULL;
	/* each word's bytes come from the input, at most one NUL per input
	 * byte plus one: the output never outgrows 2 * len + 1 */
	out->buf = malloc(2 * len + 1);
	out->argv = calloc(1, sizeof(*out->argv));
	if (!out->buf || !out->argv)
		return -ENOMEM;
	char *w = out->buf, *start = NULL;
	char quote = 0; /* the quote we are in, or 0 */
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (quote == '\'') {
			if (c == '\'')
				quote = 0;
			else
				*w++ = c;
			continue;
		}
		if (quote == '"') {
			if (c == '"') {
				quote = 0;
			} else if (c == '\\') {
				if (++i == len) {
					*why = "No escaped character";
					return -EINVAL;
				}
				if (s[i] != '"' && s[i] != '\\')
					*w++ = '\\';
				*w++ = s[i];
			} else {
				*w++ = c;
			}
			continue;
		}
		if (is_space(c)) {
			if (start) {
				int r = end_word(out, &w, start, max_args);
				if (r < 0)
					return r;
				start = NULL;
			}
			continue;
		}
		if (!start)
			start = w;
		if (c == '\'' || c == '"') {
			quote = c;
		} else if (c == '\\') {
			if (++i == len) {
				*why = "No escaped character";
				return -EINVAL;
			}
			*w++ = s[i];
		} else {
			*w++ = c;
		}
	}
	if (quote) {
		*why = "No closing quotation";
		return -EINVAL;
	}
	int r = start ? end_word(out, &w, start, max_args) : 0;
	if (r == 0 && memchr(s, '\0', len)) {
		/* Python splits it, then cannot exec it: its error, after the
		 * split's own */
		*why = "embedded null byte";
		return -EINVAL;
	}
	return r;
}

void ab_shlex_free(struct ab_shlex *sh)
{
	free(sh->argv);
	free(sh->buf);
	*sh = (struct ab_shlex){0};
}
