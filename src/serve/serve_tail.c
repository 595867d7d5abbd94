/* A streamed command's kept output; see serve_tail.h. */
#include "serve/serve_tail.h"

#include <stdlib.h>
#include <string.h>

size_t tail_copy(const struct tail *t, unsigned long long from, char *dst, size_t n)
{
	if (!t->cap || from < tail_start(t) || from >= t->end)
		return 0;
	size_t skip = (size_t)(from - tail_start(t));
	if (n > t->len - skip)
		n = t->len - skip;
	size_t pos = (t->first + skip) % t->cap, k = n < t->cap - pos ? n : t->cap - pos;
	memcpy(dst, t->buf + pos, k);
	memcpy(dst + k, t->buf, n - k);
	return n;
}

/* The ring grown towards room for want bytes, as the bounds allow. */
static void tail_grow(struct tail *t, struct tail_budget *b, size_t want)
{
	/* a quarter more than asked, in 64 KiB: few copies, little slack */
	size_t cap = (want + want / 4 + 65535) & ~(size_t)65535;
	if (cap > b->per_stream)
		cap = b->per_stream;
	size_t room = b->total > b->used ? b->total - b->used : 0;
	if (cap - t->cap > room)
		cap = t->cap + room;
	if (cap <= t->cap)
		return;
	char *q = malloc(cap);
	if (!q)
		return; /* it keeps what it can: less, said as dropped */
	tail_copy(t, tail_start(t), q, t->len);
	free(t->buf);
	b->used += cap - t->cap;
	t->buf = q;
	t->cap = cap;
	t->first = 0;
}

void tail_add(struct tail *t, struct tail_budget *b, const char *p, size_t n)
{
	if (!n)
		return; /* (p may be NULL then) */
	if (b && n && t->len + n > t->cap && t->cap < b->per_stream)
		tail_grow(t, b, t->len + n);
	t->end += n;
	if (!b || !t->cap) {
		t->len = 0;
		return;
	}
	if (n >= t->cap) {
		memcpy(t->buf, p + n - t->cap, t->cap);
		t->first = 0;
		t->len = t->cap;
		return;
	}
	if (t->len + n > t->cap) { /* the oldest make room */
		size_t drop = t->len + n - t->cap;
		t->first = (t->first + drop) % t->cap;
		t->len -= drop;
	}
	size_t w = (t->first + t->len) % t->cap, k = n < t->cap - w ? n : t->cap - w;
	memcpy(t->buf + w, p, k);
	memcpy(t->buf, p + k, n - k);
	t->len += n;
}

void tail_trim(struct tail *t, unsigned long long from)
{
	if (from <= tail_start(t) || !t->cap)
		return;
	size_t d = from >= t->end ? t->len : (size_t)(from - tail_start(t));
	t->first = (t->first + d) % t->cap;
	t->len -= d;
}

void tail_fit(struct tail *t, struct tail_budget *b)
{
	if (t->cap == t->len)
		return;
	char *q = t->len ? malloc(t->len) : NULL;
	if (t->len && !q)
		return;
	tail_copy(t, tail_start(t), q, t->len);
	free(t->buf);
	b->used -= t->cap - t->len;
	t->buf = q;
	t->cap = t->len;
	t->first = 0;
}

void tail_free(struct tail *t, struct tail_budget *b)
{
	if (b)
		b->used -= t->cap;
	free(t->buf);
	*t = (struct tail){0};
}
