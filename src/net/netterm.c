/* A terminated connection (netsecret.h): for a CONNECT to a host a --net
 * secret= goes to, one thread (at most NET_TERM_MAX at once) answers the
 * CONNECT, does TLS with the sandbox's client under a leaf certificate of
 * the per-sandbox CA, makes its own verified TLS connection upstream, and
 * relays: each request's head from the sandbox has the placeholders put
 * right, its body is followed (Content-Length, chunked) and relayed as
 * is, and what the server sends goes back unchanged. The loop keeps the
 * connection's slot (max-conns) and its fds; the thread says when it is
 * done, and what to report, over a SOCK_SEQPACKET pair (W_TERM). */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
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

#include "net/netparse.h"
#include "net/netproxy_int.h"
#include "net/netsecret.h"

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

static void tell(struct term *t, bool done, const char *why)
{
	struct term_msg m = {.id = t->id, .done = done};
	snprintf(m.why, sizeof(m.why), "%s", why ? why : "");
	(void)!send(t->notify, &m, sizeof(m), MSG_NOSIGNAL);
}

static bool wait_fd(struct term *t, int fd, short ev, int ms)
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

static bool write_all(struct term *t, SSL *s, int fd, const void *buf, size_t n)
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

static void reply(struct term *t, int code, const char *text, const char *why)
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
	size_t cap = len + 1;
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
		unsigned char dec[3 * 4096 / 4 + 4];
		int dl = bl && bl % 4 == 0 && bl <= 4096
				 ? EVP_DecodeBlock(dec, (const unsigned char *)v, (int)bl)
				 : -1;
		if (dl < 3)
			continue;
		dl -= (v[bl - 1] == '=') + (v[bl - 2] == '=');
		size_t nl;
		char *rep = replace(t, (const char *)dec, (size_t)dl, &nl);
		OPENSSL_cleanse(dec, sizeof(dec));
		if (!rep) {
			drop(o, *n);
			return NULL;
		}
		size_t pre = (size_t)(v - o), el = 4 * ((nl + 2) / 3);
		char *no = malloc(*n - bl + el + 1);
		if (!no) {
			drop(rep, nl);
			drop(o, *n);
			return NULL;
		}
		memcpy(no, o, pre);
		EVP_EncodeBlock((unsigned char *)no + pre, (const unsigned char *)rep, (int)nl);
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

enum { C_HEAD, C_BODY, C_BLIND };

/* The client's bytes in cb: heads (rewritten), bodies (as they are).
 * False when the connection is to end. */
static bool from_client(struct term *t, uint8_t *cb, size_t *clen, int *cs, struct net_body *body)
{
	for (;;) {
		size_t used = 0;
		if (*cs == C_HEAD) {
			struct net_http_msg m;
			const char *why;
			int r = net_http_msg_scan((const char *)cb, *clen, &m, &why);
			if (r == 0)
				return true;
			if (r < 0) {
				char msg[400];
				snprintf(msg, sizeof(msg), "bad request to %s: %s", t->target.host,
					 why);
				reply(t, r == -E2BIG ? 431 : 400, "Bad Request", msg);
				return false;
			}
			const char *bad_host = wrong_host(t, (const char *)cb, &m);
			if (bad_host) {
				char msg[400];
				snprintf(msg, sizeof(msg), "request to %s refused: %s",
					 t->target.host, bad_host);
				tell(t, false, msg);
				reply(t, 400, "Bad Request", msg);
				return false;
			}
			char msg[400];
			if (m.upgrade && netpolicy_restricted(&t->rules, &t->target))
				snprintf(msg, sizeof(msg),
					 "the host has --net allow rules by method and path, and "
					 "what follows an Upgrade (WebSocket) request cannot be "
					 "checked: it is refused");
			if ((m.upgrade && netpolicy_restricted(&t->rules, &t->target)) ||
			    netpolicy_check_head(&t->rules, &t->target, (const char *)cb,
						 m.head_len, msg, sizeof(msg))) {
				tell(t, false, msg);
				reply(t, 403, "Forbidden", msg);
				return false;
			}
			size_t n;
			char *head = substitute(t, (const char *)cb, m.head_len, &n);
			bool ok = head && write_all(t, t->u, t->ufd, head, n);
			if (head) {
				OPENSSL_cleanse(head, n);
				free(head);
			}
			if (!ok)
				return false;
			used = m.head_len;
			net_body_init(body, &m);
			*cs = m.upgrade ? C_BLIND : body->done ? C_HEAD : C_BODY;
		} else if (*cs == C_BODY) {
			used = net_body_step(body, cb, *clen);
			if (body->bad)
				return false;
			if (!write_all(t, t->u, t->ufd, cb, used))
				return false;
			if (body->done)
				*cs = C_HEAD;
		} else {
			used = *clen;
			if (!write_all(t, t->u, t->ufd, cb, used))
				return false;
		}
		memmove(cb, cb + used, *clen - used);
		*clen -= used;
		if (!*clen || (!used && *cs != C_HEAD))
			return true;
	}
}

/* 1 read, 0 nothing yet, -1 closed or failed */
static int read_some(SSL *s, uint8_t *b, size_t room, size_t *got)
{
	*got = 0;
	if (!room)
		return 0;
	int rc = SSL_read(s, b, (int)room);
	if (rc > 0) {
		*got = (size_t)rc;
		return 1;
	}
	int e = SSL_get_error(s, rc);
	return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? 0 : -1;
}

static void relay(struct term *t)
{
	uint8_t cb[NET_HEAD_MAX], ub[16384];
	size_t clen = 0;
	int cs = C_HEAD;
	struct net_body body = {0};
	for (;;) {
		if (!SSL_pending(t->c) && !SSL_pending(t->u)) {
			struct pollfd pf[2] = {{.fd = t->cfd, .events = POLLIN},
					       {.fd = t->ufd, .events = POLLIN}};
			if (poll(pf, 2, IDLE_MS) <= 0 || atomic_load(&t->stop))
				return;
		}
		size_t got;
		int r = read_some(t->c, cb + clen, sizeof(cb) - clen, &got);
		if (r < 0)
			return;
		clen += got;
		if (got && !from_client(t, cb, &clen, &cs, &body))
			return;
		r = read_some(t->u, ub, sizeof(ub), &got);
		if (r < 0)
			return;
		if (got && !write_all(t, t->c, t->cfd, ub, got))
			return;
	}
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
