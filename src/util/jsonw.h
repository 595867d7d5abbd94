/* Writing JSON without holding it: json-c values go out through a small
 * buffer to a sink (an fd, the server's reply queue), and the big text
 * fields (captured output, streamed chunks) are escaped straight from the
 * bytes they are, with U+FFFD for bytes that are not UTF-8. json-c alone
 * would copy such a field three times (the lossy copy, its string, the
 * serialised text, six bytes per NUL) and escape it a byte at a time. */
#ifndef AB_JSONW_H
#define AB_JSONW_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

/* Takes n bytes; returns 0 or -errno. */
typedef int (*ab_jw_sink)(void *arg, const char *p, size_t n);
/* Offered a big text value (ab_json_text, ab_json_base64) in place of
 * writing it: returns true when it takes it, to write its content (what
 * goes between the quotes) later, in order after what the sink got. */
typedef bool (*ab_jw_defer)(void *arg, const char *data, size_t len, bool base64);

struct ab_jw {
	ab_jw_sink sink;
	ab_jw_defer defer; /* NULL: texts are written in place */
	void *arg;
	int err; /* the first error of the sink, as -errno */
	size_t len;
	char buf[16384];
};

void ab_jw_init(struct ab_jw *w, ab_jw_sink sink, void *arg);
/* o (NULL is null) as compact JSON, as json-c's PLAIN|NOSLASHESCAPE. */
void ab_jw_value(struct ab_jw *w, json_object *o);
void ab_jw_raw(struct ab_jw *w, const char *p, size_t n);
/* Flush; 0 or the sink's first error. */
int ab_jw_finish(struct ab_jw *w);

/* A sink writing to the blocking fd (intptr_t)arg. */
int ab_jw_fd_sink(void *arg, const char *p, size_t n);

/* A json-c string value whose text is the len bytes at data, not copied:
 * data must stay valid until the object is written or freed. Written
 * (by ab_jw_value, or by json-c itself) with every byte that is not part
 * of valid UTF-8 as U+FFFD. */
json_object *ab_json_text(const char *data, size_t len);
/* The same, written as the base64 of the bytes. */
json_object *ab_json_base64(const char *data, size_t len);

/* The JSON string content (no quotes) of the n bytes at s into dst, which
 * has room for AB_JSON_ESCAPED_MAX(n) bytes; returns the bytes written.
 * lossy: bytes that are not part of valid UTF-8 become U+FFFD (a
 * sequence cut at the end of s counts as not valid); else they pass as
 * they are. Runs of plain ASCII are copied sixteen bytes at a time. */
#define AB_JSON_ESCAPED_MAX(n) ((n)*6)
size_t ab_json_escape(char *dst, const char *s, size_t n, bool lossy);

/* The next piece of a text's content into dst (room bytes, at least
 * 384): as many of the *n bytes at *s as surely fit, cut between UTF-8
 * characters, escaped (lossy) or as base64 (then a multiple of 3 bytes
 * unless it is the last piece); *s and *n advance past them. Returns the
 * bytes written. Pieces written one after another make the whole. */
size_t ab_json_text_piece(char *dst, size_t room, const char **s, size_t *n, bool base64);

/* The len bytes at buf as one strict JSON value (JSON_TOKENER_STRICT)
 * with nothing after it: 0 and *out; -ENOMEM; -EINVAL with *off where it
 * stopped and *je why (json_tokener_success: data after the value,
 * json_tokener_continue: it ends too soon). */
int ab_json_parse_whole(const char *buf, size_t len, json_object **out, size_t *off,
			enum json_tokener_error *je);

#endif
