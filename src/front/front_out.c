/* The replies on their way to the client; see front_out.h. */
#include "front/front_out.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/jsonw.h"
#include "util/output.h"

/* A result's output shorter than this is written at once. */
#define DEFER_MIN 4096

/* What waits behind the buffer, in order: bytes (raw), or a result's
 * output to write as escaped or base64 content, piece by piece as the
 * buffer drains (own: its memory, freed when written). */
struct front_part {
	struct front_part *next;
	char *raw;
	size_t raw_len;
	const char *text;
	size_t text_len;
	bool base64;
	char *own;
};

void out_init(struct front_out *o, int fd, bool nonblock)
{
	*o = (struct front_out){.fd = fd, .nonblock = nonblock, .stop_fd = -1};
}

void out_fail(struct front_out *o)
{
	/* the session cannot answer any more: it ends (ab_serve) */
	o->failed = o->broken = true;
}

size_t out_pending(const struct front_out *o)
{
	return o->len - o->off;
}

/* Room for n more bytes at the end of the buffer: its address, or NULL. */
static char *out_reserve(struct front_out *o, size_t n)
{
	if (o->failed)
		return NULL;
	if (o->off && (o->len + n > o->cap || o->off >= out_pending(o) || o->len > OUT_PAUSE)) {
		/* what was written makes room: the memory the buffer touches
		 * stays near OUT_PAUSE plus one event (a memmove of at most
		 * what is pending, OUT_PAUSE at most) */
		memmove(o->buf, o->buf + o->off, out_pending(o));
		o->len -= o->off;
		o->off = 0;
	}
	if (o->len + n > o->cap) {
		size_t cap = o->cap ? o->cap : 65536;
		while (cap < o->len + n)
			cap *= 2;
		char *q = realloc(o->buf, cap);
		if (!q) {
			out_fail(o);
			return NULL;
		}
		o->buf = q;
		o->cap = cap;
	}
	return o->buf + o->len;
}

static struct front_part *part_new(struct front_out *o)
{
	struct front_part *p = calloc(1, sizeof(*p));
	if (!p) {
		out_fail(o);
		return NULL;
	}
	if (o->parts_tail)
		o->parts_tail->next = p;
	else
		o->parts = p;
	o->parts_tail = p;
	return p;
}

void out_add(struct front_out *o, const char *p, size_t n)
{
	if (o->failed || !n)
		return;
	if (!o->parts) {
		char *d = out_reserve(o, n);
		if (d) {
			memcpy(d, p, n);
			o->len += n;
		}
		return;
	}
	/* behind a text still to write: in order, after it */
	struct front_part *t = o->parts_tail;
	if (t->text || !t->raw)
		t = part_new(o);
	char *q = t ? realloc(t->raw, t->raw_len + n) : NULL;
	if (!q) {
		out_fail(o);
		return;
	}
	memcpy(q + t->raw_len, p, n);
	t->raw = q;
	t->raw_len += n;
	o->parts_raw += n;
}

static int out_sink(void *arg, const char *p, size_t n)
{
	out_add(arg, p, n);
	return 0;
}

/* out_json_copy's mark in o->stealing: every big text is copied. */
static struct ab_result copying;

/* A big output of the result being sent (o->stealing) is not escaped
 * now but as the client reads: the result's buffer is kept till then. */
static bool out_defer(void *arg, const char *data, size_t len, bool base64)
{
	struct front_out *o = arg;
	struct ab_result *res = o->stealing;
	bool copy = res == &copying;
	if (len < DEFER_MIN || !res || (!copy && data != res->out.data && data != res->err.data))
		return false;
	char *own = copy ? malloc(len) : (char *)data;
	struct front_part *p = own ? part_new(o) : NULL;
	if (!p) {
		if (copy)
			free(own);
		return false;
	}
	if (copy)
		memcpy(own, data, len);
	p->text = own;
	p->text_len = len;
	p->base64 = base64;
	p->own = own;
	if (data == res->out.data) /* (copying: the result keeps its own) */
		res->out.data = NULL;
	else if (data == res->err.data)
		res->err.data = NULL;
	o->parts_text++;
	return true;
}

void out_json(struct front_out *o, json_object *v, struct ab_result *steal)
{
	struct ab_jw w;
	ab_jw_init(&w, out_sink, o);
	o->stealing = steal;
	w.defer = steal ? out_defer : NULL;
	ab_jw_value(&w, v);
	ab_jw_raw(&w, "\n", 1);
	ab_jw_finish(&w);
	o->stealing = NULL;
	json_object_put(v);
}

void out_json_copy(struct front_out *o, json_object *v)
{
	out_json(o, v, &copying);
}

static void part_free(struct front_part *p)
{
	free(p->raw);
	free(p->own);
	free(p);
}

/* Parts into the buffer while it is below OUT_PAUSE. */
static void out_pump(struct front_out *o)
{
	while (o->parts && out_pending(o) < OUT_PAUSE && !o->failed) {
		struct front_part *p = o->parts;
		if (p->raw) {
			char *d = out_reserve(o, p->raw_len);
			if (!d)
				return;
			memcpy(d, p->raw, p->raw_len);
			o->len += p->raw_len;
			o->parts_raw -= p->raw_len;
		} else {
			/* 32 KiB of text at a time: at most 192 KiB escaped */
			size_t room = 6 * (32u << 10);
			char *d = out_reserve(o, room);
			if (!d)
				return;
			o->len += ab_json_text_piece(d, room, &p->text, &p->text_len, p->base64);
			if (p->text_len)
				continue;
			o->parts_text--;
		}
		o->parts = p->next;
		if (!o->parts)
			o->parts_tail = NULL;
		part_free(p);
	}
}

/* Write what is queued; false when stdout is gone. */
bool out_flush(struct front_out *o, bool block)
{
	for (;;) {
		out_pump(o);
		if (o->off == o->len || o->broken)
			break;
		ssize_t n = write(o->fd, o->buf + o->off, o->len - o->off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (!block)
				break;
			struct pollfd p[2] = {{.fd = o->fd, .events = POLLOUT},
					      {.fd = o->stop_fd, .events = POLLIN}};
			if (poll(p, 2, 1000) > 0 && p[1].revents)
				break; /* told to stop waiting for the client */
			continue;
		}
		if (n <= 0) {
			o->broken = true;
			break;
		}
		o->off += (size_t)n;
		o->mid_line = o->buf[o->off - 1] != '\n';
		if (o->off == o->len)
			o->off = o->len = 0;
	}
	return !o->broken;
}

/* Anything still to write to the client. */
bool out_waiting(const struct front_out *o)
{
	return out_pending(o) || o->parts;
}

/* The content of the n bytes at s into the buffer a piece at a time,
 * written out between pieces while the client keeps up: the memory
 * touched is about a piece, not the whole escaped chunk (six times its
 * size when it is NUL bytes). */
static void out_content(struct front_out *o, const char *s, size_t n, bool base64)
{
	while (n) {
		size_t room = 6 * (32u << 10);
		char *d = out_reserve(o, room);
		if (!d)
			return;
		o->len += ab_json_text_piece(d, room, &s, &n, base64);
		if (n && out_pending(o) >= OUT_PAUSE && o->nonblock)
			out_flush(o, false);
	}
}

void out_event(struct front_out *o, const char *id, size_t id_len, const char *stream,
	       unsigned long long offset, bool base64, const char *a, size_t alen, const char *b,
	       size_t blen)
{
	static const char type[] = "{\"type\":\"output\",\"id\":";
	char off[48];
	int off_len = snprintf(off, sizeof(off), "\",\"offset\":%llu,\"data\":\"", offset);
	const char *enc = base64 ? "\",\"encoding\":\"base64\"}\n" : "\",\"encoding\":\"utf-8\"}\n";
	if (o->parts) {
		/* behind a result still to write (rare: output is paused
		 * then): a line of its own, queued after it */
		size_t max = sizeof(type) + id_len + 32 + (size_t)off_len + strlen(enc) +
			     (base64 ? BASE64_LEN(alen) : AB_JSON_ESCAPED_MAX(alen + blen));
		char *line = malloc(max), *d = line;
		if (!line) {
			out_fail(o);
			return;
		}
		d = mempcpy(d, type, sizeof(type) - 1);
		d = mempcpy(d, id, id_len);
		d = mempcpy(d, ",\"stream\":\"", 11);
		d = mempcpy(d, stream, strlen(stream));
		d = mempcpy(d, off, (size_t)off_len);
		if (base64) {
			d += base64_encode_into(d, a, alen);
		} else {
			d += ab_json_escape(d, a, alen, true);
			d += ab_json_escape(d, b, blen, true);
		}
		d = mempcpy(d, enc, strlen(enc));
		out_add(o, line, (size_t)(d - line));
		free(line);
		return;
	}
	out_add(o, type, sizeof(type) - 1);
	out_add(o, id, id_len);
	out_add(o, ",\"stream\":\"", 11);
	out_add(o, stream, strlen(stream));
	out_add(o, off, (size_t)off_len);
	out_content(o, a, alen, base64);
	if (!base64)
		out_content(o, b, blen, false);
	out_add(o, enc, strlen(enc));
	if (out_pending(o) >= OUT_PAUSE && o->nonblock)
		out_flush(o, false);
}

bool out_full(const struct front_out *o)
{
	return out_pending(o) >= OUT_PAUSE || o->parts;
}

bool out_drained(const struct front_out *o)
{
	return !o->parts && out_pending(o) < OUT_RESUME;
}

/* Drop the rest of a line cut short: in the buffer, else on into the parts
 * up to the raw bytes that end it. */
static void drop_line_rest(struct front_out *o)
{
	char *nl = memchr(o->buf + o->off, '\n', out_pending(o));
	if (nl) {
		o->off = (size_t)(nl + 1 - o->buf);
		return;
	}
	o->off = o->len = 0;
	while (o->parts) {
		struct front_part *p = o->parts;
		nl = p->raw ? memchr(p->raw, '\n', p->raw_len) : NULL;
		if (nl) {
			size_t cut = (size_t)(nl + 1 - p->raw);
			memmove(p->raw, p->raw + cut, p->raw_len - cut);
			p->raw_len -= cut;
			o->parts_raw -= cut;
			return;
		}
		o->parts = p->next;
		if (!o->parts)
			o->parts_tail = NULL;
		o->parts_raw -= p->raw_len;
		if (p->text)
			o->parts_text--;
		part_free(p);
	}
}

void out_client_gone(struct front_out *o)
{
	static const char ev[] = "{\"type\":\"output\",";
	if (o->mid_line)
		drop_line_rest(o);
	o->mid_line = false;
	/* the output events among the whole lines of the buffer */
	size_t r = o->off, w = o->off;
	while (r < o->len) {
		char *nl = memchr(o->buf + r, '\n', o->len - r);
		size_t end = nl ? (size_t)(nl + 1 - o->buf) : o->len;
		if (!nl || end - r < sizeof(ev) - 1 || memcmp(o->buf + r, ev, sizeof(ev) - 1)) {
			memmove(o->buf + w, o->buf + r, end - r);
			w += end - r;
		}
		r = end;
	}
	o->len = w;
	o->broken = false;
}

void out_splice(struct front_out *dst, struct front_out *src)
{
	out_add(dst, src->buf + src->off, out_pending(src));
	if (src->parts) {
		if (dst->parts_tail)
			dst->parts_tail->next = src->parts;
		else
			dst->parts = src->parts;
		dst->parts_tail = src->parts_tail;
		dst->parts_raw += src->parts_raw;
		dst->parts_text += src->parts_text;
		src->parts = src->parts_tail = NULL;
	}
	dst->failed |= src->failed;
	out_free(src);
	src->off = src->len = src->cap = 0;
}

void out_free(struct front_out *o)
{
	while (o->parts) {
		struct front_part *p = o->parts;
		o->parts = p->next;
		part_free(p);
	}
	free(o->buf);
	o->buf = NULL;
	o->parts_tail = NULL;
}
