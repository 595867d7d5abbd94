/* HTTP/1.1 framing of requests and responses on a terminated connection
 * (http_frame.h). Written here rather than taken from a library: the proxy
 * must refuse every head that one server could frame differently from
 * another (RFC 9112, 6.3 and 11.2), which a general parser (llhttp's
 * lenient flags, picohttpparser's bare LF) accepts on purpose. */
#include "http/http_frame.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

static int fail(const char **why, const char *text)
{
	*why = text;
	return -EPROTO;
}

static bool tchar(char c)
{
	return isalnum((unsigned char)c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* "Name:" with the name a token; the value with its spaces cut */
static bool header(const char *line, size_t n, const char *name, const char **value, size_t *vlen)
{
	size_t k = strlen(name);
	if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
		return false;
	const char *v = line + k + 1, *end = line + n;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*value = v;
	*vlen = (size_t)(end - v);
	return true;
}

/* a comma-separated list holds the token tok (case-insensitively) */
static bool has_token(const char *v, size_t n, const char *tok)
{
	size_t k = strlen(tok);
	for (size_t i = 0; i < n;) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		size_t s = i;
		while (i < n && v[i] != ',')
			i++;
		size_t e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - s == k && strncasecmp(v + s, tok, k) == 0)
			return true;
	}
	return false;
}

static bool digits(const char *v, size_t n, unsigned long long *out)
{
	unsigned long long x = 0;
	if (!n || n > 18)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)v[i]))
			return false;
		x = x * 10 + (unsigned)(v[i] - '0');
	}
	*out = x;
	return true;
}

/* The head's end (CRLF CRLF) in b[0..n): 1 found (*len set), 0 not yet,
 * -EPROTO a bare LF before it. */
static int head_end(const char *b, size_t n, size_t *len)
{
	for (size_t i = 0; i < n; i++) {
		if (b[i] != '\n')
			continue;
		if (i == 0 || b[i - 1] != '\r')
			return -EPROTO;
		if (i >= 3 && b[i - 2] == '\n' && b[i - 3] == '\r') {
			*len = i + 1;
			return 1;
		}
	}
	return 0;
}

/* What a head's framing errors say, a request's or a response's. */
struct head_words {
	const char *bare_lf, *too_long, *bare_cr;
};

static const struct head_words request_words = {
	"a bare LF in the request head", "request head too long", "a bare CR in the request head"};
static const struct head_words response_words = {"a bare LF in the response head",
						 "response head too long",
						 "a bare CR in the response head"};

/* The head at b within max bytes: 1 with its length in *hl, 0 when it has
 * not all come yet, else an error with *why. */
static int head_of(const char *b, size_t n, size_t max, const struct head_words *w, size_t *hl,
		   const char **why)
{
	int r = head_end(b, n < max ? n : max, hl);
	if (r < 0)
		return fail(why, w->bare_lf);
	if (!r && n >= max)
		return *why = w->too_long, -E2BIG;
	return r;
}

/* The head's next line at *at, *len bytes long without its CRLF (*at
 * moves past it): false at the blank line that ends the head (at end),
 * or on a bare CR (*why then). */
static bool next_line(const char **at, const char *end, size_t *len, const struct head_words *w,
		      const char **why)
{
	if (*at >= end - 2)
		return false;
	const char *eol = memchr(*at, '\r', (size_t)(end - *at));
	if (eol[1] != '\n') {
		*why = w->bare_cr;
		return false;
	}
	*len = (size_t)(eol - *at);
	*at = eol + 2;
	return true;
}

/* A header line: a token name right before ':', no control byte but tab,
 * not folded. NULL or why not. */
static const char *field_bad(const char *line, size_t len)
{
	if (line[0] == ' ' || line[0] == '\t')
		return "a folded header line";
	const char *colon = memchr(line, ':', len);
	if (!colon || colon == line)
		return "a header line without a name and ':'";
	for (const char *c = line; c < colon; c++)
		if (!tchar(*c))
			return "a header name that is not a token (a space before ':'?)";
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)line[i] < 0x20 && line[i] != '\t') || line[i] == 0x7f)
			return "a control byte (a bare CR) in the head";
	return NULL;
}

static const char *request_line(const char *line, size_t len, struct net_http_msg *m)
{
	size_t i = 0;
	while (i < len && tchar(line[i]))
		i++;
	m->method_len = i;
	if (!i || i >= len || line[i] != ' ')
		return "not an HTTP/1 request line (METHOD SP TARGET SP HTTP/1.1)";
	size_t t = ++i;
	while (i < len && (unsigned char)line[i] > 0x20 && (unsigned char)line[i] < 0x7f)
		i++;
	if (i == t || len - i != 9 || memcmp(line + i, " HTTP/1.", 8) != 0 ||
	    (line[len - 1] != '0' && line[len - 1] != '1'))
		return "not an HTTP/1 request line (METHOD SP TARGET SP HTTP/1.1)";
	m->origin_form = line[t] == '/';
	m->close = line[len - 1] == '0';
	return NULL;
}

int net_http_msg_scan(const char *b, size_t n, struct net_http_msg *m, const char **why)
{
	memset(m, 0, sizeof(*m));
	*why = NULL;
	size_t hl = 0, len;
	int r = head_of(b, n, NET_HEAD_MAX, &request_words, &hl, why);
	if (r <= 0)
		return r;
	m->head_len = hl;
	bool have_len = false, http10 = false;
	for (const char *line = b, *at = b; next_line(&at, b + hl, &len, &request_words, why);
	     line = at) {
		const char *v, *bad;
		size_t vl;
		if (line == b) {
			if ((bad = request_line(line, len, m)))
				return fail(why, bad);
			http10 = m->close;
		} else if ((bad = field_bad(line, len))) {
			return fail(why, bad);
		} else if (header(line, len, "Content-Length", &v, &vl)) {
			unsigned long long x;
			if (!digits(v, vl, &x))
				return fail(why, "a bad Content-Length");
			if (have_len && x != m->length)
				return fail(why, "two different Content-Lengths");
			m->length = x;
			have_len = true;
		} else if (header(line, len, "Transfer-Encoding", &v, &vl)) {
			if (vl != 7 || strncasecmp(v, "chunked", 7) != 0 || m->chunked)
				return fail(why, "a Transfer-Encoding other than one \"chunked\"");
			if (http10)
				return fail(why, "a Transfer-Encoding in an HTTP/1.0 request");
			m->chunked = true;
		} else if (header(line, len, "Upgrade", &v, &vl)) {
			m->upgrade = true;
		} else if (header(line, len, "Connection", &v, &vl)) {
			m->close |= has_token(v, vl, "close");
		} else if (header(line, len, "Host", &v, &vl)) {
			if (m->host_len || !vl)
				return fail(why, "two Host headers, or an empty one");
			m->host_off = (size_t)(v - b);
			m->host_len = vl;
		}
	}
	if (*why)
		return -EPROTO;
	if (m->chunked && have_len)
		return fail(why, "both Content-Length and Transfer-Encoding");
	return 1;
}

bool net_http_has_body(const struct net_http_msg *m)
{
	return m->chunked || m->length;
}

bool net_http_bodyless_method(const char *method, size_t mlen)
{
	static const char *const names[] = {"GET", "HEAD", "OPTIONS", "DELETE", "TRACE", "CONNECT"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == mlen && memcmp(names[i], method, mlen) == 0)
			return true;
	return false;
}

/* the last coding of a Transfer-Encoding value is chunked */
static bool last_is_chunked(const char *v, size_t n)
{
	const char *c = memrchr(v, ',', n);
	const char *s = c ? c + 1 : v;
	size_t l = (size_t)(v + n - s);
	while (l && (*s == ' ' || *s == '\t')) {
		s++;
		l--;
	}
	return l == 7 && strncasecmp(s, "chunked", 7) == 0;
}

int net_http_resp_scan(const char *b, size_t n, bool head_request, struct net_http_resp *r,
		       const char **why)
{
	memset(r, 0, sizeof(*r));
	*why = NULL;
	size_t hl = 0, len;
	int e = head_of(b, n, NET_RESP_HEAD_MAX, &response_words, &hl, why);
	if (e <= 0)
		return e;
	r->head_len = hl;
	bool have_len = false, have_te = false;
	for (const char *line = b, *at = b; next_line(&at, b + hl, &len, &response_words, why);
	     line = at) {
		const char *v, *bad;
		size_t vl;
		if (line == b) {
			if (len < 12 || memcmp(line, "HTTP/1.", 7) != 0 ||
			    (line[7] != '0' && line[7] != '1') || line[8] != ' ' ||
			    !isdigit((unsigned char)line[9]) || !isdigit((unsigned char)line[10]) ||
			    !isdigit((unsigned char)line[11]) || (len > 12 && line[12] != ' '))
				return fail(why, "not an HTTP/1 status line");
			r->status = (unsigned)((line[9] - '0') * 100 + (line[10] - '0') * 10 +
					       (line[11] - '0'));
			if (r->status < 100)
				return fail(why, "not an HTTP/1 status line");
			r->close = line[7] == '0';
			for (size_t i = 12; i < len; i++)
				if (((unsigned char)line[i] < 0x20 && line[i] != '\t') ||
				    line[i] == 0x7f)
					return fail(why, "a control byte in the status line");
		} else if ((bad = field_bad(line, len))) {
			return fail(why, bad);
		} else if (header(line, len, "Content-Length", &v, &vl)) {
			unsigned long long x;
			if (!digits(v, vl, &x) || (have_len && x != r->length))
				return fail(why, "a bad Content-Length in the response");
			r->length = x;
			have_len = true;
		} else if (header(line, len, "Transfer-Encoding", &v, &vl)) {
			have_te = true;
			r->chunked = last_is_chunked(v, vl);
		} else if (header(line, len, "Connection", &v, &vl)) {
			r->close |= has_token(v, vl, "close");
		}
	}
	if (*why)
		return -EPROTO;
	if (r->status < 200 || r->status == 204 || r->status == 304 || head_request) {
		r->no_body = true;
		r->chunked = false;
		return 1;
	}
	if (have_te) {
		/* Transfer-Encoding wins over Content-Length; either way the
		 * connection is not to be reused (RFC 9112, 6.3) */
		r->close |= have_len || !r->chunked;
		r->until_close = !r->chunked;
		r->length = 0;
	} else if (!have_len) {
		r->until_close = r->close = true;
	}
	return 1;
}

enum {
	B_LEN,
	B_CLOSE,
	B_SIZE,
	B_SIZE_WS,
	B_EXT,
	B_SIZE_LF,
	B_DATA,
	B_DATA_CR,
	B_DATA_LF,
	B_TRAILER,
	B_TLINE,
	B_TLF,
	B_END_LF
};

#define LINE_MAX_EXT 4096
#define TRAILER_MAX  16384

void net_body_init(struct net_body *b, const struct net_http_msg *m)
{
	memset(b, 0, sizeof(*b));
	b->st = m->chunked ? B_SIZE : B_LEN;
	b->left = m->chunked ? 0 : m->length;
	b->done = !m->chunked && !m->length;
	b->no_trailers = true;
}

void net_body_init_resp(struct net_body *b, const struct net_http_resp *r)
{
	memset(b, 0, sizeof(*b));
	b->st = r->chunked ? B_SIZE : r->until_close ? B_CLOSE : B_LEN;
	b->left = r->chunked ? 0 : r->length;
	b->done = r->no_body || (b->st == B_LEN && !r->length);
}

static size_t body_fail(struct net_body *b, size_t used)
{
	b->bad = true;
	return used;
}

static bool ctl(uint8_t c)
{
	return (c < 0x20 && c != '\t') || c == 0x7f;
}

size_t net_body_step(struct net_body *b, const uint8_t *p, size_t n)
{
	size_t i = 0;
	while (i < n && !b->done && !b->bad) {
		uint8_t c = p[i];
		switch (b->st) {
		case B_CLOSE:
			return n;
		case B_LEN:
		case B_DATA: {
			size_t k = n - i < b->left ? n - i : (size_t)b->left;
			i += k;
			b->left -= k;
			if (!b->left && b->st == B_LEN)
				b->done = true;
			else if (!b->left)
				b->st = B_DATA_CR;
			continue;
		}
		case B_SIZE:
			if (isxdigit(c)) {
				if (b->digits++ >= 15)
					return body_fail(b, i);
				b->left = b->left * 16 +
					  (unsigned)(isdigit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
			} else if (!b->digits) {
				return body_fail(b, i);
			} else if (c == ' ' || c == '\t') {
				b->st = B_SIZE_WS;
			} else if (c == ';') {
				b->st = B_EXT;
			} else if (c == '\r') {
				b->st = B_SIZE_LF;
			} else {
				return body_fail(b, i);
			}
			break;
		case B_SIZE_WS:
			if (c == ';')
				b->st = B_EXT;
			else if (c == '\r')
				b->st = B_SIZE_LF;
			else if ((c != ' ' && c != '\t') || ++b->line > LINE_MAX_EXT)
				return body_fail(b, i);
			break;
		case B_EXT:
			if (c == '\r')
				b->st = B_SIZE_LF;
			else if (ctl(c) || ++b->line > LINE_MAX_EXT)
				return body_fail(b, i);
			break;
		case B_SIZE_LF:
			if (c != '\n')
				return body_fail(b, i);
			b->digits = 0;
			b->line = 0;
			b->st = b->left ? B_DATA : B_TRAILER;
			break;
		case B_DATA_CR:
			if (c != '\r')
				return body_fail(b, i);
			b->st = B_DATA_LF;
			break;
		case B_DATA_LF:
			if (c != '\n')
				return body_fail(b, i);
			b->st = B_SIZE;
			break;
		case B_TRAILER:
			if (c == '\r')
				b->st = B_END_LF;
			else if (b->no_trailers || ctl(c) || c == ' ' || c == '\t' ||
				 ++b->trailer > TRAILER_MAX)
				return body_fail(b, i);
			else
				b->st = B_TLINE;
			break;
		case B_TLINE:
			if (c == '\r')
				b->st = B_TLF;
			else if (ctl(c) || ++b->trailer > TRAILER_MAX)
				return body_fail(b, i);
			break;
		case B_TLF:
		case B_END_LF:
			if (c != '\n')
				return body_fail(b, i);
			b->done = b->st == B_END_LF;
			b->st = B_TRAILER;
			break;
		}
		i++;
	}
	return i;
}

void net_http_set_close(char *head, size_t *len)
{
	static const char *const drop[] = {"Connection", "Keep-Alive", "Proxy-Connection"};
	char *line = memchr(head, '\n', *len) + 1, *end = head + *len - 2;
	while (line < end) {
		char *eol = memchr(line, '\n', (size_t)(end - line)) + 1;
		size_t l = (size_t)(eol - line);
		bool gone = false;
		for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]) && !gone; i++) {
			size_t k = strlen(drop[i]);
			gone = l > k && line[k] == ':' && strncasecmp(line, drop[i], k) == 0;
		}
		if (gone) {
			memmove(line, eol, (size_t)(head + *len - eol));
			*len -= l;
			end -= l;
		} else {
			line = eol;
		}
	}
	memcpy(end, "Connection: close\r\n\r\n", 21);
	*len += NET_CLOSE_ROOM;
}
