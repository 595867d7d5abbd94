/* Streaming JSON output; see jsonw.h. */
#include "jsonw.h"

#include <errno.h>
#include <json-c/printbuf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output.h"

#define TEXT_MAGIC 0x61627478u /* "abtx" */

struct text {
	uint32_t magic;
	const char *data;
	size_t len;
};

void ab_jw_init(struct ab_jw *w, ab_jw_sink sink, void *arg)
{
	w->sink = sink;
	w->arg = arg;
	w->err = 0;
	w->len = 0;
}

static void flush(struct ab_jw *w)
{
	if (w->len && !w->err)
		w->err = w->sink(w->arg, w->buf, w->len);
	w->len = 0;
}

void ab_jw_raw(struct ab_jw *w, const char *p, size_t n)
{
	if (n > sizeof(w->buf) - w->len) {
		flush(w);
		if (n > sizeof(w->buf)) {
			if (!w->err)
				w->err = w->sink(w->arg, p, n);
			return;
		}
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

int ab_jw_finish(struct ab_jw *w)
{
	flush(w);
	return w->err;
}

int ab_jw_fd_sink(void *arg, const char *p, size_t n)
{
	int fd = (int)(intptr_t)arg;
	for (size_t off = 0; off < n;) {
		ssize_t k = write(fd, p + off, n - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		off += (size_t)k;
	}
	return 0;
}

/* "..." with what JSON must escape escaped; lossy: bytes that are not
 * valid UTF-8 become U+FFFD (else they pass as they are, as json-c does).
 * Runs of plain bytes are copied whole. */
static void escape(struct ab_jw *w, const char *s, size_t n, bool lossy)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	ab_jw_raw(w, "\"", 1);
	size_t run = 0; /* start of the pending plain run */
	for (size_t i = 0; i < n;) {
		unsigned char c = u[i];
		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
			i++;
			continue;
		}
		size_t seq = c >= 0x80 && lossy ? utf8_seq_len(u + i, n - i) : 1;
		if (c >= 0x80 && (!lossy || seq)) {
			i += seq;
			continue;
		}
		ab_jw_raw(w, s + run, i - run);
		char e[6] = {'\\', 0};
		size_t el = 2;
		switch (c) {
		case '"':
		case '\\':
			e[1] = (char)c;
			break;
		case '\n':
			e[1] = 'n';
			break;
		case '\t':
			e[1] = 't';
			break;
		case '\r':
			e[1] = 'r';
			break;
		case '\b':
			e[1] = 'b';
			break;
		case '\f':
			e[1] = 'f';
			break;
		default:
			if (c >= 0x80) { /* lossy, and not UTF-8 */
				memcpy(e, "\xEF\xBF\xBD", 3);
				el = 3;
			} else {
				memcpy(e, "\\u00", 4);
				e[4] = hex[c >> 4];
				e[5] = hex[c & 15];
				el = 6;
			}
		}
		ab_jw_raw(w, e, el);
		run = ++i;
	}
	ab_jw_raw(w, s + run, n - run);
	ab_jw_raw(w, "\"", 1);
}

static const struct text *text_of(json_object *o)
{
	const struct text *t = json_object_get_userdata(o);
	return t && t->magic == TEXT_MAGIC ? t : NULL;
}

void ab_jw_value(struct ab_jw *w, json_object *o)
{
	switch (json_object_get_type(o)) {
	case json_type_null:
		ab_jw_raw(w, "null", 4);
		return;
	case json_type_string: {
		const struct text *t = text_of(o);
		if (t)
			escape(w, t->data, t->len, true);
		else
			escape(w, json_object_get_string(o), (size_t)json_object_get_string_len(o),
			       false);
		return;
	}
	case json_type_object: {
		bool first = true;
		ab_jw_raw(w, "{", 1);
		json_object_object_foreach(o, key, val)
		{
			if (!first)
				ab_jw_raw(w, ",", 1);
			first = false;
			escape(w, key, strlen(key), false);
			ab_jw_raw(w, ":", 1);
			ab_jw_value(w, val);
		}
		ab_jw_raw(w, "}", 1);
		return;
	}
	case json_type_array: {
		size_t n = json_object_array_length(o);
		ab_jw_raw(w, "[", 1);
		for (size_t i = 0; i < n; i++) {
			if (i)
				ab_jw_raw(w, ",", 1);
			ab_jw_value(w, json_object_array_get_idx(o, i));
		}
		ab_jw_raw(w, "]", 1);
		return;
	}
	default: { /* numbers and booleans: as json-c writes them */
		size_t len;
		const char *s = json_object_to_json_string_length(
			o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
		ab_jw_raw(w, s, len);
	}
	}
}

/* ---- ab_json_text ---- */

static int printbuf_sink(void *arg, const char *p, size_t n)
{
	return printbuf_memappend(arg, p, (int)n) < 0 ? -ENOMEM : 0;
}

/* When json-c itself writes the value (the audit log, json-c's to_string). */
static int text_serialize(json_object *o, struct printbuf *pb, int level, int flags)
{
	(void)level;
	(void)flags;
	struct ab_jw w;
	ab_jw_init(&w, printbuf_sink, pb);
	const struct text *t = text_of(o);
	escape(&w, t->data, t->len, true);
	return ab_jw_finish(&w) < 0 ? -1 : 0;
}

static void text_free(json_object *o, void *ud)
{
	(void)o;
	free(ud);
}

json_object *ab_json_text(const char *data, size_t len)
{
	struct text *t = malloc(sizeof(*t));
	json_object *o = json_object_new_string("");
	if (!t || !o) {
		free(t);
		json_object_put(o);
		return NULL;
	}
	*t = (struct text){.magic = TEXT_MAGIC, .data = data ? data : "", .len = data ? len : 0};
	json_object_set_serializer(o, text_serialize, t, text_free);
	return o;
}
