#include "util/output.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void capture_init(struct ab_capture *c, size_t max)
{
	memset(c, 0, sizeof(*c));
	c->on = true;
	c->max = max;
}

void capture_free(struct ab_capture *c)
{
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

/* Make the buffer hold at least need bytes (need <= max): the head grows by
 * doubling as it fills, the ring comes whole once the head is full. Most
 * commands print little, and a buffer of max bytes made and freed for every
 * command in a session cost the launcher page-table work and TLB flushes. */
static bool capture_reserve(struct ab_capture *c, size_t need)
{
	if (need <= c->cap)
		return true;
	size_t cap = c->cap ? c->cap : 4096;
	while (cap < need)
		cap *= 2;
	if (cap > c->max || need > c->max / 2)
		cap = c->max;
	char *b = realloc(c->buf, cap);
	if (!b)
		return false;
	c->buf = b;
	c->cap = cap;
	return true;
}

void capture_append(struct ab_capture *c, const char *data, size_t len)
{
	c->total += len;
	size_t head_cap = c->max / 2;
	size_t ring_cap = c->max - head_cap;
	size_t n = head_cap - c->head_len;
	if (n > len)
		n = len;
	if (n) {
		/* bytes that find no memory are dropped, and counted as truncated */
		if (!capture_reserve(c, c->head_len + n))
			return;
		memcpy(c->buf + c->head_len, data, n);
		c->head_len += n;
		data += n;
		len -= n;
	}
	if (!len || !ring_cap || !capture_reserve(c, c->max))
		return;
	/* only the last ring_cap bytes of a long write can survive */
	if (len > ring_cap) {
		data += len - ring_cap;
		len = ring_cap;
	}
	char *ring = c->buf + head_cap;
	while (len) {
		size_t chunk = ring_cap - c->tail_pos;
		if (chunk > len)
			chunk = len;
		memcpy(ring + c->tail_pos, data, chunk);
		c->tail_pos = (c->tail_pos + chunk) % ring_cap;
		c->tail_len = c->tail_len + chunk > ring_cap ? ring_cap : c->tail_len + chunk;
		data += chunk;
		len -= chunk;
	}
}

bool capture_truncated(const struct ab_capture *c)
{
	return c->total > c->head_len + c->tail_len;
}

static void reverse(char *p, size_t n)
{
	for (size_t i = 0; i < n / 2; i++) {
		char t = p[i];
		p[i] = p[n - 1 - i];
		p[n - 1 - i] = t;
	}
}

/* p[k..n) then p[0..k), in place. */
static void rotate_left(char *p, size_t n, size_t k)
{
	reverse(p, k);
	reverse(p + k, n - k);
	reverse(p, n);
}

size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	if (s[0] < 0x80)
		return 1;
	size_t len;
	unsigned cp;
	if ((s[0] & 0xE0) == 0xC0)
		len = 2, cp = s[0] & 0x1F;
	else if ((s[0] & 0xF0) == 0xE0)
		len = 3, cp = s[0] & 0x0F;
	else if ((s[0] & 0xF8) == 0xF0)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	/* overlong forms, surrogates and values past U+10FFFF are invalid */
	static const unsigned min[] = {0, 0, 0x80, 0x800, 0x10000};
	if (cp < min[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
		return 0;
	return len;
}

bool utf8_valid(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0, n; i < len; i += n)
		if (!(n = utf8_seq_len(u + i, len - i)))
			return false;
	return true;
}

int capture_take(struct ab_capture *c, struct ab_output *o)
{
	o->total = c->total;
	o->truncated = capture_truncated(c);
	o->data = NULL;
	o->len = 0;
	if (!c->on)
		return 0;
	size_t head_cap = c->max / 2, ring_cap = c->max - head_cap;
	/* the oldest ring byte sits at tail_pos once the ring has wrapped */
	if (c->tail_len == ring_cap && c->tail_pos)
		rotate_left(c->buf + head_cap, ring_cap, c->tail_pos);
	char marker[80] = "";
	if (o->truncated)
		snprintf(marker, sizeof(marker), "\n[... %llu bytes truncated ...]\n",
			 c->total - c->head_len - c->tail_len);
	size_t mlen = strlen(marker);
	size_t n = c->head_len + mlen + c->tail_len;
	/* a tail exists only behind a full head, in a buffer of max bytes */
	char *b = realloc(c->buf, (c->tail_len && c->max > n ? c->max : n) + 1);
	if (!b)
		return -ENOMEM;
	if (c->tail_len)
		memmove(b + c->head_len + mlen, b + head_cap, c->tail_len);
	memcpy(b + c->head_len, marker, mlen);
	b[n] = '\0';
	o->data = b;
	o->len = n;
	c->buf = NULL;
	c->cap = 0;
	return 0;
}

char *utf8_lossy(const char *s, size_t len, size_t *out_len)
{
	/* each bad byte becomes the 3 bytes of U+FFFD at worst */
	char *out = malloc(len * 3 + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq_len(u + i, len - i);
		if (n) {
			memcpy(out + o, s + i, n);
			o += n;
			i += n;
		} else {
			memcpy(out + o, "\xEF\xBF\xBD", 3);
			o += 3;
			i++;
		}
	}
	out[o] = '\0';
	*out_len = o;
	return out;
}
