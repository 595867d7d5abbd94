/* The requests of a JSON-lines front (serve's, MCP's) on their way in:
 * the bytes read, framed into lines, a line over the bound answered and
 * skipped up to its newline. */
#ifndef AB_FRONT_IN_H
#define AB_FRONT_IN_H

#include <stdbool.h>
#include <stddef.h>

/* What a front does with its lines; arg is its own. */
struct front_in_fns {
	void (*line)(void *arg, const char *p, size_t n);
	/* a line over the bound, of which n bytes are at p */
	void (*too_long)(void *arg, const char *p, size_t n);
	/* NULL: never; true: the lines wait (a changes or commit runs) */
	bool (*hold)(void *arg);
};

/* The complete lines of buf (*len bytes; eof: no more come, a last one
 * without its newline then taken too) each to fns->line, what is left
 * moved to buf's start. A line over max (complete_max for one whose
 * newline is at hand) goes to fns->too_long once, and is skipped up to
 * its newline (*discarding meanwhile). */
void front_in_take(char *buf, size_t *len, bool *discarding, bool eof, size_t max,
		   size_t complete_max, const struct front_in_fns *fns, void *arg);

#endif
