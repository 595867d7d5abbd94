/* A command line split as Python's shlex.split() splits it (POSIX mode, no
 * comments): the words of agent-sandbox's legacy `POST /execute`, which
 * runs them without a shell. Pure, bounded, no I/O (shlex.c). */
#ifndef AB_SHLEX_H
#define AB_SHLEX_H

#include <stddef.h>

struct ab_shlex {
	char **argv; /* argc words, then NULL; they point into buf */
	size_t argc;
	char *buf;
};

/* Split the len bytes at s into out (freed with ab_shlex_free, also after a
 * failure). Whitespace is " \t\r\n"; '...' is literal; in "..." a backslash
 * escapes only '"' and '\\' (otherwise it stays); outside quotes it escapes
 * any byte; an empty quoted word is a word. Returns 0, -EINVAL with *why set
 * to Python's message ("No closing quotation", "No escaped character", or
 * "embedded null byte" for a NUL, which no argument can hold), -E2BIG when
 * there would be more than max_args words, or -ENOMEM. */
int ab_shlex_split(const char *s, size_t len, size_t max_args, struct ab_shlex *out,
		   const char **why);
void ab_shlex_free(struct ab_shlex *sh);

#endif
