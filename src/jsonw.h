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

struct ab_jw {
	ab_jw_sink sink;
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

#endif
