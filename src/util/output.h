/* Captured output: memory bounded whatever a command prints. The first
 * half of the cap is kept as it comes, the rest is a ring of the latest
 * bytes, so a truncated stream keeps its head and its tail (errors are
 * usually at the end) with a marker saying how much was dropped between. */
#ifndef AB_OUTPUT_H
#define AB_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"
#include "util/base64.h" /* output as base64 */

struct ab_capture {
	bool on;		  /* capture_init was called: this stream is captured */
	size_t max;		  /* bytes kept at most */
	char *buf;		  /* head (max/2) then the tail ring (the rest) */
	size_t cap;		  /* bytes allocated at buf, grown up to max */
	size_t head_len;	  /* bytes in the head */
	size_t tail_len;	  /* bytes in the ring */
	size_t tail_pos;	  /* next write position in the ring */
	unsigned long long total; /* every byte seen */
};

/* An empty capture that keeps at most max bytes; memory comes as they do. */
void capture_init(struct ab_capture *c, size_t max);
void capture_free(struct ab_capture *c);
void capture_append(struct ab_capture *c, const char *data, size_t len);
bool capture_truncated(const struct ab_capture *c);

/* Move what was kept into o: the kept bytes, head then tail, with the
 * marker "\n[... N bytes truncated ...]\n" between them when something was
 * dropped (NUL-terminated, not NUL-safe on its own: binary data), the total
 * and whether it was cut. The buffer is rearranged in place and handed
 * over, so c keeps nothing (o->data is NULL when the stream was not
 * captured, a string, maybe empty, when it was). */
int capture_take(struct ab_capture *c, struct ab_output *o);

/* Length of the valid UTF-8 sequence at s (at most n bytes, n > 0), or 0. */
size_t utf8_seq_len(const unsigned char *s, size_t n);

/* Whether s is valid UTF-8 throughout (no overlong forms, surrogates or
 * values past U+10FFFF). */
bool utf8_valid(const char *s, size_t len);

/* Text for JSON: each byte that is not part of valid UTF-8 replaced by
 * U+FFFD. Heap string of *out_len bytes (NUL bytes stay). */
char *utf8_lossy(const char *s, size_t len, size_t *out_len);

#endif
