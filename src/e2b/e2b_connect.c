/* agentbox e2b's Connect protocol (connectrpc.com/docs/protocol) with
 * the JSON codec, as the E2B SDK's transport speaks it
 * (createConnectTransport({useBinaryFormat: false})): POST
 * /SERVICE/METHOD; a unary call's request and reply are JSON bodies
 * (application/json), an error a {"code","message"} body with the code's
 * HTTP status; a server-streaming call's request is one enveloped message
 * (application/connect+json: a flags byte, a 32-bit big-endian length,
 * the JSON), its reply 200 with enveloped messages sent as HTTP chunks
 * and an end-of-stream envelope (flags 2) holding the error, if any. The
 * methods are e2b.h's tables (e2b_http.c's list); a call is for the sandbox E2b-Sandbox-Id
 * names, with its access token in X-Access-Token. */
#include "e2b/e2b_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct e2b_call {
	struct e2b_call *next;
	struct e2b *srv;
	struct e2b_http *h;
	const struct e2b_method *m;
	json_object *req;
	bool head_sent, ended;
	void *data;
	void (*gone)(struct e2b_call *, void *);
	void (*tick)(struct e2b_call *, void *);
	int tick_ms;
	long long next_tick;
};

json_object *e2b_call_req(struct e2b_call *c)
{
	return c->req;
}

struct e2b_sbx *e2b_call_sbx(struct e2b_call *c)
{
	return c->h->sbx;
}

const char *e2b_call_header(struct e2b_call *c, const char *name)
{
	return e2b_http_header(c->h, name);
}

void e2b_call_set_data(struct e2b_call *c, void *data, void (*gone)(struct e2b_call *, void *))
{
	c->data = data;
	c->gone = gone;
}

void *e2b_call_data(struct e2b_call *c)
{
	return c->data;
}

void e2b_call_set_tick(struct e2b_call *c, int ms, void (*tick)(struct e2b_call *, void *))
{
	c->tick_ms = ms;
	c->tick = tick;
	c->next_tick = e2b_now_ms() + ms;
}

/* The call over: its handler told, its request freed, the connection
 * ready for the next. */
static void call_finish(struct e2b_call *c)
{
	for (struct e2b_call **p = &c->srv->calls; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	c->ended = true;
	if (c->gone)
		c->gone(c, c->data);
	if (c->h->conn)
		c->h->conn->call = NULL;
	e2b_http_done(c->h);
	json_object_put(c->req);
	free(c);
}

void e2b_call_conn_gone(struct e2b_call *c)
{
	c->h->conn = NULL;
	call_finish(c);
}

static int code_status(const char *code)
{
	static const struct {
		const char *code;
		int status;
	} t[] = {
		{"canceled", 499},
		{"invalid_argument", 400},
		{"deadline_exceeded", 504},
		{"not_found", 404},
		{"already_exists", 409},
		{"permission_denied", 403},
		{"resource_exhausted", 429},
		{"failed_precondition", 400},
		{"aborted", 409},
		{"out_of_range", 400},
		{"unimplemented", 501},
		{"unavailable", 503},
		{"unauthenticated", 401},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(t[i].code, code))
			return t[i].status;
	return 500;
}

/* One envelope as one HTTP chunk. */
static void envelope(struct e2b_call *c, unsigned flags, json_object *msg)
{
	struct e2b_conn *conn = c->h->conn;
	if (!conn)
		return;
	if (!c->head_sent) {
		e2b_conn_head(conn, 200, "application/connect+json", -1);
		conn->st = C_STREAM;
		c->head_sent = true;
	}
	size_t n;
	const char *s = json_object_to_json_string_length(msg, JSON_C_TO_STRING_PLAIN, &n);
	char pre[32];
	int k = snprintf(pre, sizeof(pre), "%zx\r\n", n + 5);
	unsigned char env[5] = {(unsigned char)flags, (unsigned char)(n >> 24),
				(unsigned char)(n >> 16), (unsigned char)(n >> 8),
				(unsigned char)n};
	e2b_conn_write(conn, pre, (size_t)k);
	e2b_conn_write(conn, env, 5);
	e2b_conn_write(conn, s, n);
	e2b_conn_write(conn, "\r\n", 2);
}

void e2b_call_send(struct e2b_call *c, json_object *msg)
{
	if (!c->ended && c->m->kind == E2B_STREAM)
		envelope(c, 0, msg);
	json_object_put(msg);
}

static void stream_end(struct e2b_call *c, json_object *error)
{
	json_object *o = json_object_new_object();
	if (error)
		json_object_object_add(o, "error", error);
	envelope(c, 2, o);
	json_object_put(o);
	if (c->h->conn)
		e2b_conn_write(c->h->conn, "0\r\n\r\n", 5);
	call_finish(c);
}

void e2b_call_reply(struct e2b_call *c, json_object *msg)
{
	if (c->ended) {
		json_object_put(msg);
		return;
	}
	if (c->m->kind == E2B_STREAM) {
		e2b_call_send(c, msg);
		stream_end(c, NULL);
		return;
	}
	json_object *o = msg ? msg : json_object_new_object();
	size_t n;
	const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
	if (c->h->conn) {
		e2b_conn_head(c->h->conn, 200, "application/json", (long long)n);
		e2b_conn_write(c->h->conn, s, n);
	}
	json_object_put(o);
	call_finish(c);
}

void e2b_call_end(struct e2b_call *c)
{
	if (c->ended)
		return;
	if (c->m->kind == E2B_STREAM)
		stream_end(c, NULL);
	else
		e2b_call_reply(c, NULL);
}

static json_object *error_obj(const char *code, const char *msg)
{
	json_object *e = json_object_new_object();
	json_object_object_add(e, "code", json_object_new_string(code));
	json_object_object_add(e, "message", json_object_new_string(msg));
	return e;
}

void e2b_call_error(struct e2b_call *c, const char *code, const char *fmt, ...)
{
	if (c->ended)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->m->kind == E2B_STREAM) {
		stream_end(c, error_obj(code, msg));
		return;
	}
	json_object *e = error_obj(code, msg);
	size_t n;
	const char *s = json_object_to_json_string_length(e, JSON_C_TO_STRING_PLAIN, &n);
	if (c->h->conn) {
		e2b_conn_head(c->h->conn, code_status(code), "application/json", (long long)n);
		e2b_conn_write(c->h->conn, s, n);
	}
	json_object_put(e);
	call_finish(c);
}

/* ---- the loop's side ---- */

void e2b_calls_tick(struct e2b *srv, long long now)
{
	for (struct e2b_call *c = srv->calls, *next; c; c = next) {
		next = c->next;
		if (c->tick && c->tick_ms > 0 && now >= c->next_tick) {
			c->next_tick = now + c->tick_ms;
			c->tick(c, c->data); /* may end c: next was taken before */
		}
	}
}

int e2b_calls_wait_ms(struct e2b *srv, long long now)
{
	long long w = -1;
	for (struct e2b_call *c = srv->calls; c; c = c->next)
		if (c->tick && c->tick_ms > 0 && (w < 0 || c->next_tick - now < w))
			w = c->next_tick - now < 0 ? 0 : c->next_tick - now;
	return (int)w;
}

static const struct e2b_method *find_method(const struct e2b_method *const *tables, const char *svc,
					    size_t svc_len, const char *name)
{
	for (size_t t = 0; tables[t]; t++)
		for (const struct e2b_method *m = tables[t]; m->service; m++)
			if (strlen(m->service) == svc_len && !strncmp(m->service, svc, svc_len) &&
			    !strcmp(m->method, name))
				return m;
	return NULL;
}

/* A Connect request's failure before its handler: as its kind says. */
static int refuse(struct e2b_call *c, const char *code, const char *msg)
{
	e2b_call_error(c, code, "%s", msg);
	return 1;
}

static bool ctype_is(const char *v, const char *want)
{
	size_t n = strlen(want);
	return v && !strncasecmp(v, want, n) && (v[n] == 0 || v[n] == ';' || v[n] == ' ');
}

/* The message of h's body: the JSON itself (unary), or its one envelope. */
static json_object *decode(struct e2b_call *c, const char **why)
{
	const unsigned char *b = c->h->body;
	size_t n = c->h->body_len;
	if (c->m->kind == E2B_STREAM) {
		if (n < 5) {
			*why = "the request is not one enveloped message";
			return NULL;
		}
		size_t len = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
		if (b[0] != 0 || len != n - 5) {
			*why = b[0] & 1 ? "compressed messages are not taken"
					: "the request is not one enveloped message";
			return NULL;
		}
		b += 5;
		n -= 5;
	}
	if (n == 0)
		return json_object_new_object();
	json_tokener *tok = json_tokener_new_ex(64);
	json_object *o = tok ? json_tokener_parse_ex(tok, (const char *)b, (int)n) : NULL;
	bool whole = tok && json_tokener_get_error(tok) == json_tokener_success &&
		     json_tokener_get_parse_end(tok) == n;
	json_tokener_free(tok);
	if (!o || !whole || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		*why = "the request is not a JSON object";
		return NULL;
	}
	return o;
}

int e2b_connect_route(struct e2b_conn *conn, struct e2b_http *h,
		      const struct e2b_method *const *tables)
{
	const char *p = h->path + 1, *slash = strchr(p, '/');
	if (!slash || strchr(slash + 1, '/') || !memchr(p, '.', (size_t)(slash - p)) || !slash[1])
		return 0;
	static const struct e2b_method unknown = {"", "", E2B_UNARY, NULL};
	const struct e2b_method *m = find_method(tables, p, (size_t)(slash - p), slash + 1);
	const char *ctype = e2b_http_header(h, "Content-Type");
	struct e2b_call *c = calloc(1, sizeof(*c));
	if (!c) {
		e2b_http_error(h, 500, "out of memory");
		return 1;
	}
	c->srv = conn->srv;
	c->h = h;
	c->m = m ? m : &unknown;
	c->next = conn->srv->calls;
	conn->srv->calls = c;
	conn->call = c;
	if (!m)
		return refuse(c, E2B_UNIMPLEMENTED, "no such method");
	if (strcmp(h->method, "POST") != 0)
		return refuse(c, E2B_UNIMPLEMENTED, "a Connect call is a POST");
	if (!ctype_is(ctype,
		      m->kind == E2B_STREAM ? "application/connect+json" : "application/json"))
		return refuse(
			c, E2B_INVALID_ARGUMENT,
			m->kind == E2B_STREAM
				? "a streaming call's Content-Type is application/connect+json"
				: "a unary call's Content-Type is application/json");
	const char *id = e2b_http_header(h, "E2b-Sandbox-Id");
	h->sbx = id ? e2b_sbx_find(conn->srv, id) : NULL;
	if (!h->sbx)
		return refuse(c, E2B_NOT_FOUND,
			      id ? "no such sandbox" : "no E2b-Sandbox-Id header");
	const char *tok = e2b_http_header(h, "X-Access-Token");
	if (!tok || !e2b_same(tok, h->sbx->token))
		return refuse(c, E2B_UNAUTHENTICATED, "a wrong or missing X-Access-Token");
	if (h->sbx->paused)
		return refuse(c, E2B_UNAVAILABLE, "the sandbox is paused");
	const char *why = NULL;
	c->req = decode(c, &why);
	if (!c->req)
		return refuse(c, E2B_INVALID_ARGUMENT, why);
	m->fn(c);
	return 1;
}
