/* agentbox e2b's connections' answers and its requests' accessors
 * (e2b.h's e2b_http_*): the bottom of the server, which calls nothing of
 * its own above it; e2b_http.c reads and frames the requests. */
#include "e2b/e2b_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

bool e2b_same(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	unsigned char d = n != m;
	for (size_t i = 0; i < n && i < m; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

long long e2b_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void e2b_random_hex(char *out, size_t digits)
{
	unsigned char b[64];
	size_t n = (digits + 1) / 2;
	if (n > sizeof(b))
		n = sizeof(b);
	size_t got = 0;
	while (got < n) {
		ssize_t r = getrandom(b + got, n - got, 0);
		if (r < 0 && errno != EINTR)
			abort(); /* no randomness: no key worth the name */
		if (r > 0)
			got += (size_t)r;
	}
	for (size_t i = 0; i < digits && i / 2 < n; i++)
		out[i] = "0123456789abcdef"[i % 2 ? b[i / 2] & 15 : b[i / 2] >> 4];
	out[digits] = 0;
}

/* ---- output ---- */

void e2b_conn_write(struct e2b_conn *c, const void *b, size_t n)
{
	if (c->dead || !n)
		return;
	if (c->out_len - c->out_off + n > E2B_OUT_MAX) {
		c->dead = true; /* the client does not read */
		return;
	}
	if (c->out_off && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + n > c->out_cap) {
		if (c->out_off) {
			memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
			c->out_len -= c->out_off;
			c->out_off = 0;
		}
		size_t cap = c->out_cap ? c->out_cap : 4096;
		while (cap < c->out_len + n)
			cap *= 2;
		char *p = realloc(c->out, cap);
		if (!p) {
			c->dead = true;
			return;
		}
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, b, n);
	c->out_len += n;
}

static const char *reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 204:
		return "No Content";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 409:
		return "Conflict";
	case 411:
		return "Length Required";
	case 413:
		return "Content Too Large";
	case 415:
		return "Unsupported Media Type";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	default:
		return "Status";
	}
}

/* The head of an answer: len bytes of body, or (-1) chunked. */
void e2b_conn_head(struct e2b_conn *c, int status, const char *ctype, long long len)
{
	char h[512];
	int n = snprintf(h, sizeof(h), "HTTP/1.1 %d %s\r\n", status, reason(status));
	if (ctype && status != 204)
		n += snprintf(h + n, sizeof(h) - n, "Content-Type: %s\r\n", ctype);
	if (len < 0)
		n += snprintf(h + n, sizeof(h) - n, "Transfer-Encoding: chunked\r\n");
	else if (status != 204)
		n += snprintf(h + n, sizeof(h) - n, "Content-Length: %lld\r\n", len);
	if (c->close_after)
		n += snprintf(h + n, sizeof(h) - n, "Connection: close\r\n");
	n += snprintf(h + n, sizeof(h) - n, "\r\n");
	e2b_conn_write(c, h, (size_t)n);
}

/* ---- a request ---- */

void e2b_http_free(struct e2b_http *h)
{
	if (h->gone)
		h->gone(h, h->data);
	free(h->method);
	free(h->path);
	free(h->query);
	for (size_t i = 0; i < h->n_hdrs; i++) {
		free(h->hdrs[i].name);
		free(h->hdrs[i].value);
	}
	free(h->hdrs);
	free(h->body);
	for (size_t i = 0; i < h->n_q; i++)
		free(h->q[i]);
	free(h->q);
	free(h);
}

/* The connection ready for its next request. */
void e2b_http_done(struct e2b_http *h)
{
	struct e2b_conn *c = h->conn;
	if (c) {
		c->req = NULL;
		c->call = NULL;
		c->st = C_HEAD;
		c->last_ms = e2b_now_ms();
		if (c->close_after)
			shutdown(c->fd, SHUT_RD);
	}
	e2b_http_free(h);
}

const char *e2b_http_header(struct e2b_http *h, const char *name)
{
	for (size_t i = 0; i < h->n_hdrs; i++)
		if (!strcasecmp(h->hdrs[i].name, name))
			return h->hdrs[i].value;
	return NULL;
}

const char *e2b_http_query(struct e2b_http *h, const char *name)
{
	for (size_t i = 0; i + 1 < h->n_q; i += 2)
		if (!strcmp(h->q[i], name))
			return h->q[i + 1];
	return NULL;
}

const unsigned char *e2b_http_body(struct e2b_http *h, size_t *len)
{
	*len = h->body_len;
	return h->body;
}

struct e2b_sbx *e2b_http_sbx(struct e2b_http *h)
{
	return h->sbx;
}

void e2b_http_set_data(struct e2b_http *h, void *data, void (*gone)(struct e2b_http *, void *))
{
	h->data = data;
	h->gone = gone;
}

void e2b_http_reply(struct e2b_http *h, int status, const char *ctype, const void *body, size_t len)
{
	if (h->conn) {
		e2b_conn_head(h->conn, status, ctype ? ctype : "application/json", (long long)len);
		if (status != 204)
			e2b_conn_write(h->conn, body, len);
	}
	e2b_http_done(h);
}

void e2b_http_begin(struct e2b_http *h, int status, const char *ctype, long long len)
{
	h->chunked = len < 0;
	if (!h->conn)
		return;
	e2b_conn_head(h->conn, status, ctype ? ctype : "application/octet-stream", len);
	h->conn->st = C_STREAM;
}

void e2b_http_write(struct e2b_http *h, const void *b, size_t n)
{
	if (!h->conn || !n)
		return;
	if (h->chunked) {
		char pre[32];
		int k = snprintf(pre, sizeof(pre), "%zx\r\n", n);
		e2b_conn_write(h->conn, pre, (size_t)k);
	}
	e2b_conn_write(h->conn, b, n);
	if (h->chunked)
		e2b_conn_write(h->conn, "\r\n", 2);
}

void e2b_http_finish(struct e2b_http *h)
{
	if (h->conn && h->chunked)
		e2b_conn_write(h->conn, "0\r\n\r\n", 5);
	e2b_http_done(h);
}

size_t e2b_http_waiting(struct e2b_http *h)
{
	return h->conn ? h->conn->out_len - h->conn->out_off : 0;
}

/* E2B's error shape: {"code": status, "message": ...} */
void e2b_http_error(struct e2b_http *h, int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "code", json_object_new_int(status));
	json_object_object_add(o, "message", json_object_new_string(msg));
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	e2b_http_reply(h, status, NULL, s, strlen(s));
	json_object_put(o);
}
