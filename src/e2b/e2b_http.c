/* agentbox e2b's HTTP/1.1 server: one poll loop over the listening
 * socket, the clients' connections and the sandboxes' links. A request's
 * head is framed by http/http_frame.c's strict scanner (NET_HEAD_MAX),
 * its body by Content-Length (at most E2B_BODY_MAX) or chunked (as the
 * SDK's fetch sends it: followed by net_body_step, decoded once whole); one request at a time per
 * connection, its answer either whole (Content-Length) or, for a Connect stream, chunked as it
 * comes. A client that does not read is dropped once E2B_OUT_MAX waits for it. */
#include "e2b/e2b_int.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/http_frame.h"
#include "util/util.h"

static int unhex(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* s[0..n) percent-decoded ('+' a space when plus) into a new string;
 * NULL when malformed or it holds a NUL. */
static char *pct_decode(const char *s, size_t n, bool plus)
{
	char *o = malloc(n + 1), *p = o;
	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%') {
			int a = i + 2 < n ? unhex(s[i + 1]) : -1;
			int b = i + 2 < n ? unhex(s[i + 2]) : -1;
			if (a < 0 || b < 0 || (a == 0 && b == 0)) {
				free(o);
				return NULL;
			}
			*p++ = (char)(a * 16 + b);
			i += 2;
		} else {
			*p++ = plus && s[i] == '+' ? ' ' : s[i];
		}
	}
	*p = 0;
	return o;
}

/* The head at c->in into a request (0), or -status. */
static int parse_head(struct e2b_conn *c, const struct net_http_msg *m, struct e2b_http *h)
{
	const char *b = c->in, *end = c->in + m->head_len - 2;
	const char *sp1 = memchr(b, ' ', m->head_len);
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1)) : NULL;
	const char *eol = memchr(b, '\r', m->head_len);
	if (!sp1 || !sp2 || !eol || sp2 > eol || sp1[1] != '/')
		return -400;
	h->method = ab_memdup_str(b, (size_t)(sp1 - b));
	const char *target = sp1 + 1, *qm = memchr(target, '?', (size_t)(sp2 - target));
	const char *pend = qm ? qm : sp2;
	h->path = pct_decode(target, (size_t)(pend - target), false);
	h->query = qm ? ab_memdup_str(qm + 1, (size_t)(sp2 - qm - 1)) : strdup("");
	if (!h->method || !h->path || !h->query)
		return -400;
	if (memcmp(sp2 + 1, "HTTP/1.0", 8) == 0)
		c->close_after = true;
	/* the headers: validated by net_http_msg_scan, each "name: value" */
	for (const char *l = eol + 2; l < end;) {
		const char *le = memchr(l, '\r', (size_t)(end - l + 2));
		const char *colon = le ? memchr(l, ':', (size_t)(le - l)) : NULL;
		if (!colon)
			return -400;
		const char *v = colon + 1, *ve = le;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		struct e2b_hdr *n = realloc(h->hdrs, (h->n_hdrs + 1) * sizeof(*n));
		if (!n || h->n_hdrs >= 200)
			return n ? (h->hdrs = n, -431) : -500;
		h->hdrs = n;
		h->hdrs[h->n_hdrs].name = ab_memdup_str(l, (size_t)(colon - l));
		h->hdrs[h->n_hdrs].value = ab_memdup_str(v, (size_t)(ve - v));
		h->n_hdrs++;
		if (!h->hdrs[h->n_hdrs - 1].name || !h->hdrs[h->n_hdrs - 1].value)
			return -500;
		l = le + 2;
	}
	const char *conn = e2b_http_header(h, "Connection");
	if (conn && !strcasecmp(conn, "close"))
		c->close_after = true;
	/* the query: name=value&... */
	for (char *s = h->query; *s;) {
		char *amp = strchr(s, '&'), *e = amp ? amp : s + strlen(s);
		char *eq = memchr(s, '=', (size_t)(e - s));
		char **q = realloc(h->q, (h->n_q + 2) * sizeof(*q));
		if (!q)
			return -500;
		h->q = q;
		h->q[h->n_q] = pct_decode(s, (size_t)((eq ? eq : e) - s), true);
		h->q[h->n_q + 1] = eq ? pct_decode(eq + 1, (size_t)(e - eq - 1), true) : strdup("");
		h->n_q += 2;
		if (!h->q[h->n_q - 2] || !h->q[h->n_q - 1])
			return -400;
		s = amp ? amp + 1 : e;
	}
	return 0;
}

static void bad_request(struct e2b_conn *c, int status, const char *why)
{
	c->close_after = true;
	char b[512];
	int n = snprintf(b, sizeof(b), "{\"code\":%d,\"message\":\"%s\"}", status, why);
	e2b_conn_head(c, status, "application/json", n);
	e2b_conn_write(c, b, (size_t)n);
	c->st = C_CLOSING; /* nothing more is read; closed once written */
	shutdown(c->fd, SHUT_RD);
}

/* A whole request: to Connect, envd's routes or the control API. */
static void dispatch(struct e2b_conn *c)
{
	struct e2b_http *h = c->req;
	/* the Connect services: e2b.h's tables */
	static const struct e2b_method *const services[] = {e2b_process_methods, e2b_fs_methods,
							    NULL};
	c->st = C_BUSY;
	if (e2b_connect_route(c, h, services))
		return;
	/* a signed /files URL names no sandbox with E2B_SANDBOX_URL */
	if (e2b_http_header(h, "E2b-Sandbox-Id") ||
	    (!strcmp(h->path, "/files") && e2b_http_query(h, "signature")))
		e2b_envd_route(h);
	else
		e2b_control_route(h);
}

/* A chunked body that net_body_step found whole and well framed, raw[0..n),
 * decoded into out (as long at most): its length. */
static size_t dechunk(const char *raw, size_t n, unsigned char *out)
{
	size_t i = 0, o = 0;
	while (i < n) {
		size_t size = 0;
		for (int d; i < n && (d = unhex(raw[i])) >= 0; i++)
			size = size * 16 + (size_t)d;
		while (i < n && raw[i] != '\n') /* an extension, CR LF */
			i++;
		i++;
		if (size == 0 || size > n - i)
			break; /* the last chunk (its trailers not kept) */
		memcpy(out + o, raw + i, size);
		o += size;
		i += size + 2;
	}
	return o;
}

/* What c has read: a head, then its body. */
static void conn_parse(struct e2b_conn *c)
{
	if (c->st == C_HEAD && c->in_len) {
		struct net_http_msg m;
		const char *why = NULL;
		int r = net_http_msg_scan(c->in, c->in_len, &m, &why);
		if (r == 0)
			return;
		if (r < 0)
			return bad_request(c, r == -E2BIG ? 431 : 400,
					   r == -E2BIG ? "request head too large"
						       : "malformed request");
		c->req = calloc(1, sizeof(*c->req));
		if (!c->req)
			return bad_request(c, 500, "out of memory");
		c->req->conn = c;
		c->close_after = m.close;
		r = parse_head(c, &m, c->req);
		if (r < 0) {
			e2b_http_free(c->req);
			c->req = NULL;
			return bad_request(c, -r, "malformed request");
		}
		c->head_len = m.head_len;
		if (e2b_host_take(c, c->req))
			return; /* a sandbox's port's: the head goes in as it came, its
				 * body of any size as it comes */
		if (m.length > E2B_BODY_MAX) {
			e2b_http_free(c->req);
			c->req = NULL;
			return bad_request(c, 413, "request body too large");
		}
		c->body_want = (size_t)m.length;
		c->chunked = m.chunked;
		c->body_raw = 0;
		net_body_init(&c->nb, &m);
		c->st = C_BODY;
		const char *expect = e2b_http_header(c->req, "Expect");
		if (expect && !strcasecmp(expect, "100-continue") &&
		    (c->chunked || c->in_len < c->head_len + c->body_want)) /* curl waits */
			e2b_conn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	}
	if (c->st == C_BODY && c->chunked) {
		size_t at = c->head_len + c->body_raw;
		c->body_raw += net_body_step(&c->nb, (const uint8_t *)c->in + at, c->in_len - at);
		if (c->nb.bad)
			return bad_request(c, 400, "a malformed chunked body");
		if (c->body_raw > E2B_BODY_RAW_MAX)
			return bad_request(c, 413, "request body too large");
		if (!c->nb.done)
			return;
	} else if (c->st != C_BODY || c->in_len < c->head_len + c->body_want) {
		return;
	}
	struct e2b_http *h = c->req;
	size_t raw = c->chunked ? c->body_raw : c->body_want;
	h->body = malloc(raw + 1);
	if (!h->body)
		return bad_request(c, 500, "out of memory");
	if (c->chunked) {
		h->body_len = dechunk(c->in + c->head_len, raw, h->body);
	} else {
		memcpy(h->body, c->in + c->head_len, raw);
		h->body_len = raw;
	}
	h->body[h->body_len] = 0;
	size_t used = c->head_len + raw;
	memmove(c->in, c->in + used, c->in_len - used);
	c->in_len -= used;
	dispatch(c);
}

static void conn_read(struct e2b_conn *c)
{
	size_t want = c->st != C_BODY ? NET_HEAD_MAX + 1
		      : c->chunked    ? c->head_len + E2B_BODY_RAW_MAX + 1
				      : c->head_len + c->body_want;
	if (c->in_len >= want)
		return;
	if (c->in_len == c->in_cap) { /* room as the bytes come, up to want */
		size_t cap = c->in_cap ? c->in_cap * 2 : 16384;
		if (cap > want)
			cap = want;
		char *p = realloc(c->in, cap);
		if (!p) {
			c->dead = true;
			return;
		}
		c->in = p;
		c->in_cap = cap;
	}
	ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		c->dead = true;
	else if (n > 0)
		c->in_len += (size_t)n;
	if (n > 0)
		c->last_ms = e2b_now_ms();
}

static void conn_flush(struct e2b_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (errno != EAGAIN)
				c->dead = true;
			return;
		}
		c->out_off += (size_t)n;
	}
	if ((c->close_after && c->st == C_HEAD) || c->st == C_CLOSING)
		c->dead = true; /* all written: close */
}

static void conn_free(struct e2b *srv, struct e2b_conn *c)
{
	e2b_host_free(c);
	if (c->req && c->st != C_BUSY && c->st != C_STREAM) {
		e2b_http_free(c->req); /* not dispatched */
	} else if (c->req) {
		/* an answer on its way: its call ends now; a plain request
		 * now too when its handler said how (gone), else when it
		 * answers */
		c->req->conn = NULL;
		if (c->call)
			e2b_call_conn_gone(c->call);
		else if (c->req->gone)
			e2b_http_done(c->req);
	}
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
	srv->n_conns--;
}

static void accept_all(struct e2b *srv)
{
	for (;;) {
		int fd = accept4(srv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (srv->n_conns >= E2B_CONNS_MAX) {
			close(fd);
			continue;
		}
		struct e2b_conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			return;
		}
		c->srv = srv;
		c->fd = fd;
		c->last_ms = e2b_now_ms();
		c->next = srv->conns;
		srv->conns = c;
		srv->n_conns++;
	}
}

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

/* The loop, until SIGINT or SIGTERM. */
int e2b_serve(struct e2b *srv)
{
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	size_t cap = 0;
	struct pollfd *pf = NULL;
	void **who = NULL;
	while (!stop_signal) {
		size_t n = 1 + 2 * srv->n_conns; /* a tunnel's second fd */
		for (struct e2b_sbx *s = srv->sbxs; s; s = s->next)
			n++;
		if (n > cap) {
			cap = n * 2;
			pf = realloc(pf, cap * sizeof(*pf));
			who = realloc(who, cap * sizeof(*who));
			if (!pf || !who)
				return -ENOMEM;
		}
		size_t k = 0;
		pf[k] = (struct pollfd){.fd = srv->lfd, .events = POLLIN};
		who[k++] = NULL;
		for (struct e2b_conn *c = srv->conns; c; c = c->next) {
			short ev = POLLRDHUP;
			if (c->st == C_HEAD || c->st == C_BODY)
				ev |= POLLIN;
			if (c->out_off < c->out_len)
				ev |= POLLOUT;
			if (c->tun)
				ev = e2b_host_client_events(c);
			pf[k] = (struct pollfd){.fd = c->fd, .events = ev};
			who[k++] = c;
		}
		size_t first_up = k;
		for (struct e2b_conn *c = srv->conns; c; c = c->next) {
			short ev;
			int fd = c->tun ? e2b_host_up_fd(c, &ev) : -1;
			if (fd >= 0) {
				pf[k] = (struct pollfd){.fd = fd, .events = ev};
				who[k++] = c;
			}
		}
		size_t first_sbx = k;
		for (struct e2b_sbx *s = srv->sbxs; s; s = s->next) {
			short ev = 0;
			pf[k] = (struct pollfd){.fd = e2b_sbx_poll_fd(s, &ev), .events = ev};
			pf[k].events = ev;
			who[k++] = s;
		}
		long long now = e2b_now_ms();
		int wait = e2b_calls_wait_ms(srv, now);
		int r = poll(pf, k, wait < 0 ? 1000 : wait > 1000 ? 1000 : wait);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0 && (pf[0].revents & POLLIN))
			accept_all(srv);
		for (size_t i = first_sbx; r > 0 && i < k; i++)
			if (pf[i].revents)
				e2b_sbx_io(who[i], pf[i].revents);
		for (size_t i = first_up; r > 0 && i < first_sbx; i++)
			if (pf[i].revents)
				e2b_host_up_io(who[i], pf[i].revents);
		for (size_t i = 1; r > 0 && i < first_up; i++) {
			struct e2b_conn *c = who[i];
			if (c->tun) {
				e2b_host_client_io(c, pf[i].revents);
				continue;
			}
			if (pf[i].revents & POLLIN)
				conn_read(c);
			else if (pf[i].revents & (POLLHUP | POLLERR | POLLRDHUP))
				c->dead = true;
			if (!c->dead)
				conn_parse(c);
		}
		now = e2b_now_ms();
		e2b_calls_tick(srv, now);
		e2b_sbxs_expire(srv, now);
		for (struct e2b_conn **pc = &srv->conns; *pc;) {
			struct e2b_conn *c = *pc;
			if (!c->dead)
				conn_flush(c);
			if (!c->dead && c->st == C_HEAD && c->in_len)
				conn_parse(c); /* a request that came behind the last */
			if ((c->st == C_BODY || (c->st == C_HEAD && c->in_len)) &&
			    now - c->last_ms > E2B_STALL_MS)
				c->dead = true;
			if ((c->st == C_TUNNEL || (c->st == C_HEAD && !c->in_len)) &&
			    now - c->last_ms > E2B_IDLE_MS)
				c->dead = true;
			if (c->dead) {
				*pc = c->next;
				conn_free(srv, c);
			} else {
				pc = &c->next;
			}
		}
	}
	free(pf);
	free(who);
	return 0;
}
