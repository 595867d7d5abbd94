/* A terminated connection (netsecret.h): for a CONNECT to a host a --net
 * secret= goes to, or one with rules by method and path, one thread (at
 * most NET_TERM_MAX at once) answers the CONNECT, does TLS with the
 * sandbox's client under a leaf certificate of the per-sandbox CA, makes
 * its own verified TLS connection upstream, and relays one exchange at a
 * time: the proxy frames each request itself (http/http_frame.c), judges
 * it (its Host, its method and path, a body on a method that has none),
 * forwards its head with the placeholders put right and exactly the bytes
 * of its body, then reads the response in full (framed too) and passes it
 * back before it reads the sandbox's next request. So a server that
 * frames a request otherwise (one that does not read a GET's body) never
 * gets a byte the proxy did not judge as part of the request it sent, and
 * never two requests at once. A request with a body is the last on its
 * upstream connection ("Connection: close" both ways): a server that did
 * not read that body cannot take it for a request. After a 101 answer to
 * an Upgrade request (refused where rules by method and path apply) the
 * connection is relayed as it is. The loop keeps the connection's slot
 * (max-conns) and its fds; the thread says when it is done, and what to
 * report, over a SOCK_SEQPACKET pair (W_TERM). */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto/ossl.h"
#include "http/http_frame.h"
#include "net/netparse.h"
#include "net/netproxy_int.h"
#include "net/netsecret.h"
#include "util/base64.h"

#define IO_MS 30000

struct term {
	pthread_t th;
	struct net_secrets *sec;
	int cfd, ufd, notify;
	uint64_t id;
	struct net_target target;
	struct net_policy rules; /* the allow rules naming target, copied */
	atomic_bool stop;
	SSL *c, *u;
	unsigned reported; /* bit i: secret i's placeholder reported */
};

struct term_msg {
	uint64_t id;
	bool done;
	char why[400];
};

void tell(struct term *t, bool done, const char *why)
{
	struct term_msg m = {.id = t->id, .done = done};
	snprintf(m.why, sizeof(m.why), "%s", why ? why : "");
	(void)!send(t->notify, &m, sizeof(m), MSG_NOSIGNAL);
}

bool wait_fd(struct term *t, int fd, short ev, int ms)
{
	struct pollfd pf = {.fd = fd, .events = ev};
	return !atomic_load(&t->stop) && poll(&pf, 1, ms) > 0 && !atomic_load(&t->stop);
}

/* SSL_ERROR_WANT_*: wait for it; false on anything else */
static bool want(struct term *t, SSL *s, int fd, int rc)
{
	int e = SSL_get_error(s, rc);
	if (e == SSL_ERROR_WANT_READ)
		return wait_fd(t, fd, POLLIN, IO_MS);
	if (e == SSL_ERROR_WANT_WRITE)
		return wait_fd(t, fd, POLLOUT, IO_MS);
	return false;
}

static bool handshake(struct term *t, SSL *s, int fd, bool server)
{
	if (server)
		SSL_set_accept_state(s);
	else
		SSL_set_connect_state(s);
	for (;;) {
		int rc = SSL_do_handshake(s);
		if (rc == 1)
			return true;
		if (!want(t, s, fd, rc))
			return false;
	}
}

bool write_all(struct term *t, SSL *s, int fd, const void *buf, size_t n)
{
	while (n) {
		int rc = SSL_write(s, buf, n > INT_MAX ? INT_MAX : (int)n);
		if (rc > 0) {
			buf = (const char *)buf + rc;
			n -= (size_t)rc;
		} else if (!want(t, s, fd, rc)) {
			return false;
		}
	}
	return true;
}

void reply(struct term *t, int code, const char *text, const char *why)
{
	char body[800], head[200];
	int bn = snprintf(body, sizeof(body), "agentbox: %s\n", why);
	if (bn < 0 || (size_t)bn >= sizeof(body))
		bn = (int)sizeof(body) - 1;
	int hn = snprintf(head, sizeof(head),
			  "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
			  "Connection: close\r\nProxy-Agent: agentbox\r\n\r\n",
			  code, text, bn);
	if (!write_all(t, t->c, t->cfd, head, (size_t)hn) ||
	    !write_all(t, t->c, t->cfd, body, (size_t)bn))
		return;
	/* then read what the client still sends until it closes (bounded):
	 * closing with its request unread would reset the connection before
	 * it read the reply */
	SSL_shutdown(t->c);
	shutdown(t->cfd, SHUT_WR);
	char sink[4096];
	unsigned long long end = net_now_ms() + LINGER_MS;
	while (net_now_ms() < end && wait_fd(t, t->cfd, POLLIN, LINGER_MS) &&
	       recv(t->cfd, sink, sizeof(sink), 0) > 0)
		;
}

/* The head with each placeholder of a secret for this host replaced by
 * its value; others reported (they go out as they are). */
static char *replace(struct term *t, const char *head, size_t len, size_t *out_len)
{
	size_t cap = len + 1 + NET_CLOSE_ROOM;
	for (size_t i = 0; i < t->sec->n; i++)
		cap += (len / NET_PLACEHOLDER_LEN + 1) * strlen(t->sec->v[i].value);
	char *o = malloc(cap);
	if (!o)
		return NULL;
	o[len] = '\0';
	memcpy(o, head, len);
	size_t n = len;
	for (size_t i = 0; i < t->sec->n; i++) {
		const struct net_secret *s = &t->sec->v[i];
		if (!memmem(o, n, s->placeholder, NET_PLACEHOLDER_LEN))
			continue;
		if (!netpolicy_matches(&s->where, &t->target)) {
			if (i < 32 && !(t->reported & (1u << i))) {
				char why[300];
				snprintf(why, sizeof(why),
					 "the placeholder of secret %s went out as it is: the host "
					 "is not listed for it",
					 s->name);
				tell(t, false, why);
				t->reported |= 1u << i;
			}
			continue;
		}
		size_t vl = strlen(s->value);
		char *p;
		while ((p = memmem(o, n, s->placeholder, NET_PLACEHOLDER_LEN))) {
			memmove(p + vl, p + NET_PLACEHOLDER_LEN,
				n - (size_t)(p - o) - NET_PLACEHOLDER_LEN);
			memcpy(p, s->value, vl);
			n = n - NET_PLACEHOLDER_LEN + vl;
			o[n] = '\0';
		}
	}
	*out_len = n;
	return o;
}

static void drop(char *s, size_t n)
{
	OPENSSL_cleanse(s, n);
	free(s);
}

/* "Authorization: Basic base64(user:password)" (a URL's user information):
 * a placeholder inside is put right too. o is freed when replaced. */
static char *basic_auth(struct term *t, char *o, size_t *n)
{
	for (char *h = o; (h = strcasestr(h, "\r\nAuthorization:"));) {
		char *v = h + 16;
		while (*v == ' ' || *v == '\t')
			v++;
		h = v;
		if (strncasecmp(v, "Basic ", 6) != 0)
			continue;
		for (v += 6; *v == ' ';)
			v++;
		size_t bl = strcspn(v, "\r");
		while (bl && (v[bl - 1] == ' ' || v[bl - 1] == '\t'))
			bl--; /* a field value's trailing blanks are not part of it */
		unsigned char dec[BASE64_DECODED_MAX(4096)];
		long dl = bl <= 4096 ? base64_decode_into(dec, v, bl, NULL) : -1;
		if (dl <= 0)
			continue;
		size_t nl;
		char *rep = replace(t, (const char *)dec, (size_t)dl, &nl);
		OPENSSL_cleanse(dec, sizeof(dec));
		if (!rep) {
			drop(o, *n);
			return NULL;
		}
		size_t pre = (size_t)(v - o), el = BASE64_LEN(nl);
		char *no = malloc(*n - bl + el + 1 + NET_CLOSE_ROOM);
		if (!no) {
			drop(rep, nl);
			drop(o, *n);
			return NULL;
		}
		memcpy(no, o, pre);
		base64_encode_into(no + pre, rep, nl);
		memcpy(no + pre + el, v + bl, *n - pre - bl);
		drop(rep, nl);
		drop(o, *n);
		*n = *n - bl + el;
		no[*n] = '\0';
		o = no;
		h = no + pre + el;
	}
	return o;
}

static char *substitute(struct term *t, const char *head, size_t len, size_t *out_len)
{
	char *o = replace(t, head, len, out_len);
	return o ? basic_auth(t, o, out_len) : NULL;
}

/* The request names the host the connection was made to: a path, and a
 * Host header with its name (and its port, or 443), so that a shared
 * front end (a CDN) cannot route it, and a secret, to another site. */
static const char *wrong_host(const struct term *t, const char *head, const struct net_http_msg *m)
{
	if (!m->origin_form)
		return "the request's target is not a path (\"GET /...\")";
	if (!m->host_len)
		return "the request has no Host header";
	const char *h = head + m->host_off;
	size_t n = m->host_len, hl = n;
	unsigned port = 443;
	const char *colon = memrchr(h, ':', n);
	if (colon && (h[0] != '[' || colon > (const char *)memchr(h, ']', n))) {
		hl = (size_t)(colon - h);
		port = 0;
		for (const char *d = colon + 1; d < h + n && port < 70000; d++)
			port = *d >= '0' && *d <= '9' ? port * 10 + (unsigned)(*d - '0') : 70000;
	}
	if (hl > 1 && h[0] == '[' && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	struct net_target ht;
	if (port != t->target.port || net_target_set(&ht, h, hl, port) < 0 ||
	    ht.is_addr != t->target.is_addr ||
	    (ht.is_addr ? memcmp(ht.addr, t->target.addr, 16) != 0
			: strcmp(ht.host, t->target.host) != 0))
		return "the Host header names another host than the one connected to";
	return NULL;
}

/* ---- the requests and responses, one exchange at a time ---- */

struct side {
	SSL *s;
	int fd;
	uint8_t *b;
	size_t len, cap;
};

/* 1 read, 0 nothing yet (or no room), -1 closed or failed */
static int pull(struct side *x)
{
	size_t room = x->cap - x->len;
	if (!room)
		return 0;
	int rc = SSL_read(x->s, x->b + x->len, room > INT_MAX ? INT_MAX : (int)room);
	if (rc > 0) {
		x->len += (size_t)rc;
		return 1;
	}
	int e = SSL_get_error(x->s, rc);
	return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? 0 : -1;
}

static void eat(struct side *x, size_t n)
{
	memmove(x->b, x->b + n, x->len - n);
	x->len -= n;
}

/* Which side has bytes (bit 1: the client, when asked; bit 2: the
 * upstream); 0 when none within ms or the thread is to stop. */
static int ready(struct term *t, bool client, int ms)
{
	int r = (client && SSL_pending(t->c) ? 1 : 0) | (SSL_pending(t->u) ? 2 : 0);
	if (r)
		return r;
	struct pollfd pf[2] = {{.fd = client ? t->cfd : -1, .events = POLLIN},
			       {.fd = t->ufd, .events = POLLIN}};
	if (atomic_load(&t->stop) || poll(pf, 2, ms) <= 0 || atomic_load(&t->stop))
		return 0;
	return (pf[0].revents ? 1 : 0) | (pf[1].revents ? 2 : 0);
}

static bool to_client(struct term *t, const void *b, size_t n)
{
	return write_all(t, t->c, t->cfd, b, n);
}

static bool to_upstream(struct term *t, const void *b, size_t n)
{
	return write_all(t, t->u, t->ufd, b, n);
}

/* A refused request: reported, answered, and the connection ends. */
static bool refuse(struct term *t, int code, const char *text, const char *why)
{
	tell(t, false, why);
	reply(t, code, text, why);
	return false;
}

static bool bad_upstream(struct term *t, const char *what)
{
	char msg[400];
	snprintf(msg, sizeof(msg), "%s sent a bad response: %s", t->target.host, what);
	return refuse(t, 502, "Bad Gateway", msg);
}

/* What the proxy holds against the request at c->b: 0 (nothing), or the
 * status to refuse it with, msg saying why. */
static int judge(struct term *t, const char *head, const struct net_http_msg *m, char *msg,
		 size_t len)
{
	const char *why = wrong_host(t, head, m);
	if (why) {
		snprintf(msg, len, "request to %s refused: %s", t->target.host, why);
		return 400;
	}
	bool restricted = netpolicy_restricted(&t->rules, &t->target);
	if (m->upgrade && restricted) {
		snprintf(msg, len,
			 "the host has --net allow rules by method and path, and what follows an "
			 "Upgrade (WebSocket) request cannot be checked: it is refused");
		return 403;
	}
	if (netpolicy_check_head(&t->rules, &t->target, head, m->head_len, msg, len))
		return 403;
	if (net_http_has_body(m) && m->upgrade) {
		snprintf(msg, len, "an Upgrade request with a body is refused");
		return 400;
	}
	if (net_http_has_body(m) && net_http_bodyless_method(head, m->method_len) &&
	    netpolicy_check_body(&t->rules, &t->target, head, m->head_len, msg, len))
		return 400;
	return 0;
}

/* After a 101: both ways as they are, until either side ends. */
static void blind(struct term *t, struct side *c, struct side *u)
{
	for (;;) {
		int w = ready(t, true, IDLE_MS);
		if (!w)
			return;
		if (w & 1 && (pull(c) < 0 || (c->len && !to_upstream(t, c->b, c->len))))
			return;
		c->len = 0;
		if (w & 2 && (pull(u) < 0 || (u->len && !to_client(t, u->b, u->len))))
			return;
		u->len = 0;
	}
}

/* The response's head at u->b (r), sent on with "Connection: close" when
 * close and the server did not say so itself. */
static bool send_head(struct term *t, struct side *u, const struct net_http_resp *r, bool close)
{
	if (!close || r->close)
		return to_client(t, u->b, r->head_len);
	char *h = malloc(r->head_len + NET_CLOSE_ROOM);
	if (!h)
		return false;
	size_t n = r->head_len;
	memcpy(h, u->b, n);
	net_http_set_close(h, &n);
	bool ok = to_client(t, h, n);
	free(h);
	return ok;
}

/* The final response's body; false when the connection is to end. */
static bool send_body(struct term *t, struct side *u, const struct net_http_resp *r)
{
	struct net_body b;
	net_body_init_resp(&b, r);
	for (;;) {
		if (u->len && !b.done) {
			size_t used = net_body_step(&b, u->b, u->len);
			if (used && !to_client(t, u->b, used))
				return false;
			eat(u, used);
			if (b.bad)
				return false; /* cut: the client sees it end short */
		}
		if (b.done)
			return !u->len; /* bytes after the response: out of turn */
		if (!ready(t, false, IDLE_MS) || pull(u) < 0)
			return false; /* the end of a response until close, or cut */
	}
}

/* Send the request at the head of c (m) and its body, and pass its
 * response back. True when the connection goes on. */
static bool exchange(struct term *t, struct side *c, struct side *u, const struct net_http_msg *m)
{
	bool is_head = m->method_len == 4 && memcmp(c->b, "HEAD", 4) == 0;
	bool body = net_http_has_body(m), close = m->close || body;
	size_t n;
	char *head = substitute(t, (const char *)c->b, m->head_len, &n);
	if (!head)
		return false;
	if (body)
		net_http_set_close(head, &n);
	bool ok = to_upstream(t, head, n);
	OPENSSL_cleanse(head, n);
	free(head);
	if (!ok)
		return false;
	eat(c, m->head_len);
	struct net_body rb;
	net_body_init(&rb, m);
	struct net_http_resp r;
	for (;;) {
		if (!rb.done && c->len) {
			size_t used = net_body_step(&rb, c->b, c->len);
			if (used && !to_upstream(t, c->b, used))
				return false;
			eat(c, used);
			if (rb.bad) {
				char msg[300];
				snprintf(msg, sizeof(msg),
					 "request to %s refused: a broken chunked body (what "
					 "came before it was sent, the rest was not)",
					 t->target.host);
				return refuse(t, 400, "Bad Request", msg);
			}
		}
		const char *why;
		int s = net_http_resp_scan((const char *)u->b, u->len, is_head, &r, &why);
		if (s < 0)
			return bad_upstream(t, why);
		if (s == 1 && r.status == 101) {
			if (!m->upgrade)
				return bad_upstream(t, "101 to a request without Upgrade");
			if (!to_client(t, u->b, u->len) ||
			    (c->len && !to_upstream(t, c->b, c->len)))
				return false;
			u->len = c->len = 0;
			blind(t, c, u);
			return false;
		}
		if (s == 1 && r.status < 200) { /* 100 Continue, 103 Early Hints */
			if (!to_client(t, u->b, r.head_len))
				return false;
			eat(u, r.head_len);
			continue;
		}
		if (s == 1)
			break;
		int w = ready(t, !rb.done && !c->len, IDLE_MS);
		if (!w || (w & 1 && pull(c) < 0) || (w & 2 && pull(u) < 0))
			return false;
	}
	/* the server answered before the body ended: what it made of the
	 * rest is unknown, so the connection ends after the answer */
	close |= !rb.done || r.close;
	if (!send_head(t, u, &r, close))
		return false;
	eat(u, r.head_len);
	return send_body(t, u, &r) && !close;
}

static void relay(struct term *t)
{
	struct side c = {t->c, t->cfd, malloc(NET_HEAD_MAX), 0, NET_HEAD_MAX};
	struct side u = {t->u, t->ufd, malloc(NET_RESP_HEAD_MAX), 0, NET_RESP_HEAD_MAX};
	while (c.b && u.b) {
		struct net_http_msg m;
		const char *why;
		int s = net_http_msg_scan((const char *)c.b, c.len, &m, &why);
		if (s < 0) {
			char msg[400];
			snprintf(msg, sizeof(msg), "bad request to %s: %s", t->target.host, why);
			refuse(t, s == -E2BIG ? 431 : 400, "Bad Request", msg);
			break;
		}
		if (s == 0) {
			/* between requests the server has nothing to say: a
			 * close (or bytes out of turn) ends the connection */
			int w = ready(t, true, IDLE_MS);
			if (!w || (w & 2 && (pull(&u) != 0 || u.len)) || (w & 1 && pull(&c) < 0))
				break;
			continue;
		}
		char msg[400];
		int code = judge(t, (const char *)c.b, &m, msg, sizeof(msg));
		if (code) {
			refuse(t, code, code == 403 ? "Forbidden" : "Bad Request", msg);
			break;
		}
		if (!exchange(t, &c, &u, &m))
			break;
	}
	if (c.b)
		OPENSSL_cleanse(c.b, c.cap);
	free(c.b);
	free(u.b);
}

static const char *upstream_why(SSL *u, char *buf, size_t len)
{
	long v = SSL_get_verify_result(u);
	unsigned long e = ERR_peek_last_error();
	if (v != X509_V_OK)
		snprintf(buf, len, "its certificate is not trusted (%s)",
			 X509_verify_cert_error_string(v));
	else
		snprintf(buf, len, "TLS failed (%s)",
			 e ? ERR_reason_error_string(e) : "the connection closed");
	return buf;
}

static void *term_main(void *arg)
{
	struct term *t = arg;
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n"
				 "Proxy-Agent: agentbox\r\n\r\n";
	char why[512] = "";
	size_t off = 0;
	int one = 1;
	setsockopt(t->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	while (off < sizeof(ok) - 1 && wait_fd(t, t->cfd, POLLOUT, IO_MS)) {
		ssize_t n = send(t->cfd, ok + off, sizeof(ok) - 1 - off, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (off < sizeof(ok) - 1)
		goto out;
	if (!(t->c = net_tls_serve(t->sec->tls, &t->target)) || !SSL_set_fd(t->c, t->cfd) ||
	    !handshake(t, t->c, t->cfd, true)) {
		snprintf(why, sizeof(why),
			 "the client did not accept the sandbox's CA for %s (it pins another "
			 "certificate, or ignores the CA bundle)",
			 t->target.host);
		goto out;
	}
	if (!(t->u = net_tls_connect(t->sec->tls, &t->target)) || !SSL_set_fd(t->u, t->ufd) ||
	    !handshake(t, t->u, t->ufd, false)) {
		char reason[240], msg[600];
		snprintf(why, sizeof(why), "TLS to %s: %s", t->target.host,
			 upstream_why(t->u, reason, sizeof(reason)));
		snprintf(msg, sizeof(msg), "%s; nothing was sent", why);
		/* reported before the client can read the answer and end the run */
		tell(t, false, why);
		why[0] = '\0';
		reply(t, 502, "Bad Gateway", msg);
		goto out;
	}
	relay(t);
	SSL_shutdown(t->c);
out:
	SSL_free(t->c);
	SSL_free(t->u);
	t->c = t->u = NULL;
	ERR_clear_error();
	OPENSSL_thread_stop();
	tell(t, true, why[0] ? why : NULL);
	return NULL;
}

/* ---- the loop's side ---- */

bool net_term_wanted(const struct netproxy *p, const struct conn *c)
{
	if (!p->sec || c->socks || c->req.kind != NET_REQ_CONNECT)
		return false;
	if (netpolicy_restricted(&p->pol, &c->req.target))
		return true;
	for (size_t i = 0; i < p->sec->n; i++)
		if (netpolicy_matches(&p->sec->v[i].where, &c->req.target))
			return true;
	return false;
}

int net_term_start(struct netproxy *p, struct conn *c)
{
	if (p->n_term >= NET_TERM_MAX)
		return -EAGAIN;
	struct term *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->sec = p->sec;
	t->cfd = c->cfd;
	t->ufd = c->ufd;
	t->notify = p->term_pair[1];
	t->id = c->id;
	t->target = c->req.target;
	netpolicy_init(&t->rules);
	for (size_t i = 0; i < p->pol.n; i++)
		if (net_rule_names(&p->pol.r[i], &t->target))
			t->rules.n++;
	if (t->rules.n && !(t->rules.r = calloc(t->rules.n, sizeof(*t->rules.r)))) {
		free(t);
		return -ENOMEM;
	}
	t->rules.n = 0;
	for (size_t i = 0; i < p->pol.n; i++)
		if (net_rule_names(&p->pol.r[i], &t->target))
			t->rules.r[t->rules.n++] = p->pol.r[i];
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 * 1024);
	int r = pthread_create(&t->th, &a, term_main, t);
	pthread_attr_destroy(&a);
	if (r) {
		netpolicy_free(&t->rules);
		free(t);
		return -r;
	}
	c->term = t;
	p->n_term++;
	return 0;
}

void net_term_join(struct netproxy *p, struct conn *c, bool stop)
{
	if (stop) {
		atomic_store(&c->term->stop, true);
		shutdown(c->cfd, SHUT_RDWR);
		shutdown(c->ufd, SHUT_RDWR);
	}
	pthread_join(c->term->th, NULL);
	netpolicy_free(&c->term->rules);
	free(c->term);
	c->term = NULL;
	p->n_term--;
}

bool net_term_recv(struct netproxy *p, uint64_t *id, bool *done, char *why, size_t len)
{
	struct term_msg m;
	if (recv(p->term_pair[0], &m, sizeof(m), MSG_DONTWAIT) != (ssize_t)sizeof(m))
		return false;
	m.why[sizeof(m.why) - 1] = '\0';
	*id = m.id;
	*done = m.done;
	snprintf(why, len, "%s", m.why);
	return true;
}

int net_term_plain_head(struct netproxy *p, struct conn *c, char *unlisted, size_t len)
{
	if (!p->sec || c->req.kind != NET_REQ_HTTP || !c->req.head)
		return 0;
	struct term t = {.sec = p->sec, .target = c->req.target, .notify = -1, .id = c->id};
	bool any = false;
	for (size_t i = 0; i < p->sec->n; i++) {
		const struct net_secret *s = &p->sec->v[i];
		if (!memmem(c->req.head, c->req.head_len, s->placeholder, NET_PLACEHOLDER_LEN))
			continue;
		any = true;
		if (!netpolicy_matches(&s->where, &c->req.target) && !unlisted[0])
			snprintf(unlisted, len,
				 "the placeholder of secret %s went out as it is: the host is not "
				 "listed for it",
				 s->name);
	}
	if (!any)
		return 0;
	t.reported = ~0u; /* reported above */
	size_t n;
	char *head = substitute(&t, c->req.head, c->req.head_len, &n);
	if (!head)
		return -ENOMEM;
	OPENSSL_cleanse(c->req.head, c->req.head_len);
	free(c->req.head);
	c->req.head = head;
	c->req.head_len = n;
	return 0;
}
