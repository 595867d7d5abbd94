/* Streaming JSON output; see jsonw.h. */
#include "util/jsonw.h"

#include <errno.h>
#include <json-c/printbuf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/output.h"

#define TEXT_MAGIC 0x61627478u /* "abtx" */

struct text {
	uint32_t magic;
	bool base64;
	const char *data;
	size_t len;
};

void ab_jw_init(struct ab_jw *w, ab_jw_sink sink, void *arg)
{
	w->sink = sink;
	w->defer = NULL;
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

/* Sixteen bytes at a time, in the compiler's vector extension (SSE2 on
 * x86-64, NEON on arm64, plain code elsewhere). */
typedef unsigned char bytes16 __attribute__((vector_size(16)));

/* Of the 16 bytes at p, those below 0x20, a quote, a backslash or at or
 * above 0x80 (every byte JSON escapes, or that is not ASCII) as 0xff in
 * two words, the first eight bytes in *lo. */
static inline bool special16(const unsigned char *p, uint64_t *lo, uint64_t *hi)
{
	bytes16 x;
	memcpy(&x, p, 16);
	bytes16 m = (bytes16)((x < 0x20) | (x == '"') | (x == '\\') | (x >= 0x80));
	uint64_t w[2];
	memcpy(w, &m, 16);
	*lo = w[0];
	*hi = w[1];
	return w[0] | w[1];
}

/* A byte JSON takes as it is, and that is ASCII. */
static inline bool plain(unsigned char c)
{
	return c >= 0x20 && c != '"' && c != '\\' && c < 0x80;
}

/* Index of the first byte, in memory order, set in a word of special16. */
static inline size_t first_special(uint64_t m)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (size_t)__builtin_ctzll(m) >> 3;
#else
	return (size_t)__builtin_clzll(m) >> 3;
#endif
}

size_t ab_json_escape(char *dst, const char *s, size_t n, bool lossy)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	char *d = dst;
	size_t i = 0;
	while (i < n) {
		/* plain bytes sixteen at a time, up to the first that is not
		 * (not even tried on one that is: runs of those are common) */
		while (i + 16 <= n && plain(u[i])) {
			uint64_t lo, hi;
			bool any = special16(u + i, &lo, &hi);
			memcpy(d, u + i, 16); /* dst has room: at least 6 per byte */
			size_t k = !any ? 16 : lo ? first_special(lo) : 8 + first_special(hi);
			d += k;
			i += k;
			if (any)
				break;
		}
		if (i >= n)
			break;
		unsigned char c = u[i];
		if (plain(c)) {
			*d++ = (char)c;
			i++;
			continue;
		}
		if (c >= 0x80) {
			size_t seq = lossy ? utf8_seq_len(u + i, n - i) : 1;
			if (seq) {
				memcpy(d, u + i, seq);
				d += seq;
				i += seq;
			} else {
				memcpy(d, "\xEF\xBF\xBD", 3);
				d += 3;
				i++;
			}
			continue;
		}
		*d++ = '\\';
		switch (c) {
		case '"':
		case '\\':
			*d++ = (char)c;
			break;
		case '\n':
			*d++ = 'n';
			break;
		case '\t':
			*d++ = 't';
			break;
		case '\r':
			*d++ = 'r';
			break;
		case '\b':
			*d++ = 'b';
			break;
		case '\f':
			*d++ = 'f';
			break;
		default:
			memcpy(d, "u00", 3);
			d[3] = hex[c >> 4];
			d[4] = hex[c & 15];
			d += 5;
		}
		i++;
	}
	return (size_t)(d - dst);
}

/* How much of the n bytes at s to take, at most max (>= 4), without
 * cutting a UTF-8 sequence (unless it is longer than it can be). */
static size_t utf8_piece(const char *s, size_t n, size_t max)
{
	if (n <= max)
		return n;
	size_t k = max;
	while (k > max - 3 && ((unsigned char)s[k] & 0xC0) == 0x80)
		k--;
	/* four continuation bytes from k: the one at max belongs to no
	 * character (none has more than three), so no cut there splits one */
	return ((unsigned char)s[k] & 0xC0) == 0x80 ? max : k;
}

size_t ab_json_text_piece(char *dst, size_t room, const char **s, size_t *n, bool base64)
{
	size_t k, out;
	if (base64) {
		k = *n < room / 4 * 3 ? *n : room / 4 * 3;
		out = base64_encode_into(dst, *s, k);
	} else {
		k = utf8_piece(*s, *n, room / 6);
		out = ab_json_escape(dst, *s, k, true);
	}
	*s += k;
	*n -= k;
	return out;
}

/* The content of a text, escaped (lossy) or base64, through w's buffer. */
static void text_content(struct ab_jw *w, const char *s, size_t n, bool lossy, bool base64)
{
	while (n) {
		if (w->len + 384 > sizeof(w->buf))
			flush(w);
		char *dst = w->buf + w->len;
		size_t room = sizeof(w->buf) - w->len;
		if (lossy || base64) {
			w->len += ab_json_text_piece(dst, room, &s, &n, base64);
		} else {
			size_t k = utf8_piece(s, n, room / 6);
			w->len += ab_json_escape(dst, s, k, false);
			s += k;
			n -= k;
		}
	}
}

/* "..." with what JSON must escape escaped; see ab_json_escape. */
static void escape(struct ab_jw *w, const char *s, size_t n, bool lossy)
{
	ab_jw_raw(w, "\"", 1);
	text_content(w, s, n, lossy, false);
	ab_jw_raw(w, "\"", 1);
}

static const struct text *text_of(json_object *o)
{
	const struct text *t = json_object_get_userdata(o);
	return t && t->magic == TEXT_MAGIC ? t : NULL;
}

static void text_write(struct ab_jw *w, const struct text *t)
{
	ab_jw_raw(w, "\"", 1);
	if (w->defer && t->len) {
		flush(w);
		if (!w->err && w->defer(w->arg, t->data, t->len, t->base64)) {
			ab_jw_raw(w, "\"", 1);
			return;
		}
	}
	text_content(w, t->data, t->len, true, t->base64);
	ab_jw_raw(w, "\"", 1);
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
			text_write(w, t);
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
	text_write(&w, text_of(o));
	return ab_jw_finish(&w) < 0 ? -1 : 0;
}

static void text_free(json_object *o, void *ud)
{
	(void)o;
	free(ud);
}

static json_object *text_new(const char *data, size_t len, bool base64)
{
	struct text *t = malloc(sizeof(*t));
	json_object *o = json_object_new_string("");
	if (!t || !o) {
		free(t);
		json_object_put(o);
		return NULL;
	}
	*t = (struct text){.magic = TEXT_MAGIC,
			   .base64 = base64,
			   .data = data ? data : "",
			   .len = data ? len : 0};
	json_object_set_serializer(o, text_serialize, t, text_free);
	return o;
}

json_object *ab_json_text(const char *data, size_t len)
{
	return text_new(data, len, false);
}

json_object *ab_json_base64(const char *data, size_t len)
{
	return text_new(data, len, true);
}

int ab_json_parse_whole(const char *buf, size_t len, json_object **out, size_t *off,
			enum json_tokener_error *je)
{
	*out = NULL;
	json_tokener *tok = json_tokener_new();
	if (!tok)
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	json_object *root = json_tokener_parse_ex(tok, buf, (int)len);
	*je = json_tokener_get_error(tok);
	*off = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!root || *je != json_tokener_success || *off != len) {
		json_object_put(root);
		return -EINVAL;
	}
	*out = root;
	return 0;
}
