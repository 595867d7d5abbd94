/* The tail of a streamed command's output that a detached sandbox keeps
 * for the next client (docs/detached.md, "Nothing lost"): per stream, a
 * ring of the last bytes, bounded per command and stream and, over all
 * commands, per sandbox; and where the stream stands (every output
 * event's "offset"). Pure memory, no I/O. */
#ifndef AB_SERVE_TAIL_H
#define AB_SERVE_TAIL_H

#include <stdbool.h>
#include <stddef.h>

/* What the rings of a sandbox may hold: each at most per_stream bytes,
 * all of them at most total (used: their memory now). */
struct tail_budget {
	size_t per_stream, total, used;
};

struct tail {
	char *buf;
	size_t cap, first, len;	 /* buf[first..] (wrapping): the len bytes before end */
	unsigned long long end;	 /* the stream's bytes so far: the next one's offset */
	unsigned long long sent; /* [0, sent) was handed to a client */
};

/* n bytes at p are the stream's next: kept (b NULL: only counted), the
 * oldest dropped past the bounds. */
void tail_add(struct tail *t, struct tail_budget *b, const char *p, size_t n);
/* The offset of the first byte kept. */
static inline unsigned long long tail_start(const struct tail *t)
{
	return t->end - t->len;
}
/* Up to n kept bytes from offset from (tail_start <= from <= end) into
 * dst; how many. */
size_t tail_copy(const struct tail *t, unsigned long long from, char *dst, size_t n);
/* The bytes before offset from are kept no more. */
void tail_trim(struct tail *t, unsigned long long from);
/* The ring no bigger than what it keeps (no more is added). */
void tail_fit(struct tail *t, struct tail_budget *b);
void tail_free(struct tail *t, struct tail_budget *b);

#endif
