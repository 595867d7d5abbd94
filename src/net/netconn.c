/* The egress proxy's connections (netproxy.h, netproxy_int.h). Each connection goes
 * HEAD (read the client's request; SOCKS5 or HTTP by its first byte) ->
 * LOOKUP (a name, on the resolver) -> CONNECT (non-blocking, to each
 * address the policy allows in turn) -> RELAY, or -> CLOSING with an error
 * reply. Buffers are fixed per connection, every fd is non-blocking, a
 * connection that stalls its handshake or idles is dropped, and reads pause
 * while the sandbox's byte budget (--net rate=) is spent: a slow or hostile
 * client costs its own slot and nothing else. */
#include "net/netproxy.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/error.h"
#include "http/http_frame.h"
#include "net/netparse.h"
#include "net/netproxy_int.h"
#include "net/netresolve.h"
#include "net/netsecret.h"
#include "util/util.h"

void conn_close(struct netproxy *p, struct conn *c)
{
	if (c->cfd >= 0) {
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->cfd, NULL);
		close(c->cfd);
	}
	if (c->ufd >= 0) {
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->ufd, NULL);
		close(c->ufd);
	}
	if (c->ai)
		freeaddrinfo(c->ai);
	net_request_clear(&c->req);
	c->st = S_FREE;
	c->cfd = c->ufd = -1;
	c->ai = c->ai_cur = NULL;
	free(c->c2u); /* both buffers, one allocation */
	c->c2u = c->u2c = NULL;
	p->n_conns--;
	if (p->sink.closed)
		p->sink.closed(p->sink.arg, c->id);
}

/* ---- replies ---- */

static void put_reply(struct conn *c, const void *data, size_t n)
{
	size_t room = sizeof(c->u2c->b) - c->u2c->len;
	if (n > room)
		n = room;
	memcpy(c->u2c->b + c->u2c->len, data, n);
	c->u2c->len += n;
}

static void socks_reply(struct conn *c, uint8_t code)
{
	uint8_t r[10] = {5, code, 0, 1, 0, 0, 0, 0, 0, 0};
	put_reply(c, r, sizeof(r));
}

/* An error to the client, then close once it is sent. */
void conn_fail(struct conn *c, int http, uint8_t socks, const char *why)
{
	if (c->socks) {
		socks_reply(c, socks);
	} else {
		static const struct {
			int code;
			const char *text;
		} texts[] = {{400, "Bad Request"},	  {403, "Forbidden"},
			     {405, "Method Not Allowed"}, {431, "Request Header Fields Too Large"},
			     {502, "Bad Gateway"},	  {503, "Service Unavailable"},
			     {504, "Gateway Timeout"}};
		const char *text = "Error";
		for (size_t i = 0; i < AB_ARRAY_SIZE(texts); i++)
			if (texts[i].code == http)
				text = texts[i].text;
		char body[512], head[256];
		int bn = snprintf(body, sizeof(body), "agentbox: %s\n", why);
		if (bn < 0 || (size_t)bn >= sizeof(body))
			bn = (int)sizeof(body) - 1;
		int hn = snprintf(head, sizeof(head),
				  "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: "
				  "%d\r\nConnection: close\r\nProxy-Agent: agentbox\r\n\r\n",
				  http, text, bn);
		put_reply(c, head, (size_t)hn);
		put_reply(c, body, (size_t)bn);
	}
	c->st = S_CLOSING;
	c->c2u->len = 0;
}

void conn_record(struct netproxy *p, struct conn *c, bool allowed, const char *why)
{
	const char *host = c->req.target.host[0] ? c->req.target.host : "?";
	net_report_add(&p->total, allowed, host, c->req.target.port, why);
	if (p->sink.record)
		p->sink.record(p->sink.arg, c->id, c->client_port, allowed, host,
			       c->req.target.port, why);
}

static void deny(struct netproxy *p, struct conn *c, const char *why)
{
	char msg[400];
	snprintf(msg, sizeof(msg), "connection to %s port %u refused: %s", c->req.target.host,
		 c->req.target.port, why);
	conn_record(p, c, false, why);
	conn_fail(c, 403, 2, msg);
}

/* ---- connecting ---- */

static void connected(struct netproxy *p, struct conn *c)
{
	conn_record(p, c, true, NULL);
	c->st = S_RELAY;
	c->deadline = net_now_ms() + IDLE_MS;
	/* both sides: a TLS handshake's flight relayed in two writes must not
	 * wait for a delayed ACK (40 ms) */
	int one = 1;
	setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (net_term_wanted(p, c)) { /* --net secret=: netterm.c */
		int r = c->c2u->len ? -EPROTO : net_term_start(p, c);
		if (r == -EPROTO)
			conn_fail(c, 400, 1, "bytes sent before the tunnel was established");
		else if (r < 0)
			conn_fail(c, 503, 1, "too many TLS-terminated connections at once");
		else
			c->st = S_TERM;
	} else if (c->socks) {
		socks_reply(c, 0);
	} else if (c->req.kind == NET_REQ_CONNECT) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n"
					 "Proxy-Agent: agentbox\r\n\r\n";
		put_reply(c, ok, sizeof(ok) - 1);
	}
}

/* Connect to the next address the policy allows; when none is left, the
 * connection gets its error reply. */
static void try_next(struct netproxy *p, struct conn *c)
{
	/* the policy may have changed ({"op":"net"}) while the name resolved */
	const char *gone = netpolicy_check_name(&p->pol, &c->req.target);
	if (gone) {
		deny(p, c, gone);
		return;
	}
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len;
		if (c->req.target.is_addr) {
			if (c->literal_tried)
				break;
			c->literal_tried = true;
			memset(&ss, 0, sizeof(ss));
			const uint8_t *a = c->req.target.addr;
			static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
							   0, 0, 0, 0, 0xff, 0xff};
			if (memcmp(a, mapped, 12) == 0) {
				struct sockaddr_in *in = (struct sockaddr_in *)&ss;
				in->sin_family = AF_INET;
				memcpy(&in->sin_addr, a + 12, 4);
				len = sizeof(*in);
			} else {
				struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
				in6->sin6_family = AF_INET6;
				memcpy(&in6->sin6_addr, a, 16);
				len = sizeof(*in6);
			}
		} else {
			if (!c->ai_cur)
				break;
			memcpy(&ss, c->ai_cur->ai_addr, c->ai_cur->ai_addrlen);
			len = c->ai_cur->ai_addrlen;
			c->ai_cur = c->ai_cur->ai_next;
		}
		uint8_t a[16];
		unsigned ignored;
		if (net_addr_from_sockaddr((struct sockaddr *)&ss, a, &ignored) < 0)
			continue;
		const char *why = netpolicy_check_addr(&p->pol, a, c->req.target.port,
						       !c->req.target.is_addr, p->self, p->n_self);
		if (why) {
			c->refused = why;
			continue;
		}
		if (ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)c->req.target.port);
		else
			((struct sockaddr_in6 *)&ss)->sin6_port =
				htons((uint16_t)c->req.target.port);
		if (c->ufd >= 0) {
			epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->ufd, NULL);
			close(c->ufd);
		}
		c->ufd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->ufd < 0)
			continue;
		c->tried_connect = true;
		c->umask = EPOLLOUT;
		if (net_add_fd(p, c->ufd, net_key((size_t)(c - p->conns), W_UPSTREAM), EPOLLOUT) <
		    0)
			continue;
		if (connect(c->ufd, (struct sockaddr *)&ss, len) == 0) {
			connected(p, c);
			return;
		}
		if (errno == EINPROGRESS) {
			c->st = S_CONNECT;
			return;
		}
	}
	if (c->ufd >= 0) {
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->ufd, NULL);
		close(c->ufd);
		c->ufd = -1;
	}
	if (c->refused && !c->tried_connect) {
		char why[200];
		bool cls = c->refused[0] == 'a'; /* "a loopback address", not a rule */
		snprintf(why, sizeof(why), "%s%s",
			 !cls			 ? ""
			 : c->req.target.is_addr ? "it is "
						 : "it resolves to ",
			 c->refused);
		deny(p, c, why);
	} else {
		conn_fail(c, 502, 5, "could not connect");
	}
}

static void on_connect(struct netproxy *p, struct conn *c)
{
	int e = 0;
	socklen_t l = sizeof(e);
	if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
		e = errno;
	if (e == EINPROGRESS)
		return;
	if (e == 0)
		connected(p, c);
	else
		try_next(p, c);
}

static void start_lookup(struct netproxy *p, struct conn *c)
{
	int r = net_resolver_start(p->res, c->id, c->req.target.host);
	if (r == -EAGAIN) {
		c->st = S_WAIT_LOOKUP;
		return;
	}
	if (r < 0) {
		conn_fail(c, 502, 1, "cannot resolve names right now");
		return;
	}
	c->st = S_LOOKUP;
}

/* A plain request to a host with rules by method and path, framed as on a
 * terminated connection (http/http_frame.h): a head a server could frame another
 * way, or a body on GET (and the like) no rule allows, is refused: the
 * server may not read such a body, and take it for a request the rules
 * never saw. True (and why in why[0..len)) when refused. */
static bool plain_framing(struct netproxy *p, struct conn *c, char *why, size_t len)
{
	struct net_http_msg m;
	const char *bad = NULL;
	char rule[300];
	if (net_http_msg_scan(c->req.head, c->req.head_len, &m, &bad) == 1 &&
	    (!net_http_has_body(&m) || !net_http_bodyless_method(c->req.head, m.method_len) ||
	     !(bad = netpolicy_check_body(&p->pol, &c->req.target, c->req.head, c->req.head_len,
					  rule, sizeof(rule)))))
		return false;
	snprintf(why, len, "bad request to %s: %s", c->req.target.host,
		 bad ? bad : "malformed request head");
	return true;
}

/* The client's request is known: judge the name, then look up or connect. */
static void target_known(struct netproxy *p, struct conn *c)
{
	const char *why = netpolicy_check_name(&p->pol, &c->req.target);
	char rule[400];
	if (!why && netpolicy_restricted(&p->pol, &c->req.target)) {
		/* method/path rules: the proxy must read each request */
		if (c->socks)
			why = "the host has --net allow rules by method and path, which SOCKS "
			      "cannot carry: use the HTTP proxy (HTTPS_PROXY)";
		else if (c->req.kind == NET_REQ_CONNECT && !p->sec)
			why = "the host has --net allow rules by method and path, and the proxy "
			      "terminates TLS only when such a rule (or a secret=) is given at "
			      "start";
		else if (c->req.kind == NET_REQ_HTTP &&
			 !(why = netpolicy_check_head(&p->pol, &c->req.target, c->req.head,
						      c->req.head_len, rule, sizeof(rule))) &&
			 plain_framing(p, c, rule, sizeof(rule))) {
			conn_record(p, c, false, rule);
			conn_fail(c, 400, 1, rule);
			return;
		}
	}
	if (why) {
		deny(p, c, why);
		return;
	}
	if (c->req.target.is_addr)
		try_next(p, c);
	else
		start_lookup(p, c);
}

void conn_on_lookups(struct netproxy *p)
{
	struct net_lookup *list = net_resolver_take(p->res);
	for (struct net_lookup *l = list; l; l = l->next) {
		struct conn *c = NULL;
		for (size_t i = 0; i < p->max && !c; i++)
			if (p->conns[i].st == S_LOOKUP && p->conns[i].id == l->conn_id)
				c = &p->conns[i];
		if (!c)
			continue;
		if (l->rc != 0 || !l->ai) {
			char msg[400];
			snprintf(msg, sizeof(msg), "cannot resolve %s: %s", c->req.target.host,
				 gai_strerror(l->rc));
			conn_fail(c, 502, 4, msg);
			continue;
		}
		c->ai = c->ai_cur = l->ai;
		l->ai = NULL;
		try_next(p, c);
	}
	net_lookup_free(list);
	/* slots freed: start lookups that waited */
	for (size_t i = 0; i < p->max; i++)
		if (p->conns[i].st == S_WAIT_LOOKUP)
			start_lookup(p, &p->conns[i]);
}

/* ---- the client's request ---- */

static void on_head(struct netproxy *p, struct conn *c)
{
	struct pipebuf *b = c->c2u;
	if (c->st == S_HEAD && b->len && b->b[0] == 5) {
		size_t used = 0;
		int r = net_socks_greeting(b->b, b->len, &used);
		c->socks = true;
		if (r == 0)
			return;
		if (r < 0) {
			static const uint8_t no[2] = {5, 0xff};
			put_reply(c, no, 2);
			c->st = S_CLOSING;
			c->c2u->len = 0;
			return;
		}
		static const uint8_t yes[2] = {5, 0};
		put_reply(c, yes, 2);
		memmove(b->b, b->b + used, b->len - used);
		b->len -= used;
		c->st = S_SOCKS_REQ;
	}
	if (c->st == S_SOCKS_REQ) {
		int r = net_socks_request(b->b, b->len, &c->req);
		if (r == 0)
			return;
		if (r < 0) {
			uint8_t code = r == -ENOTSUP	    ? 7
				       : r == -EAFNOSUPPORT ? 8
				       : r == -EINVAL	    ? 4
							    : 1;
			conn_fail(c, 400, code, c->req.why);
			return;
		}
		memmove(b->b, b->b + c->req.used, b->len - c->req.used);
		b->len -= c->req.used;
		target_known(p, c);
		return;
	}
	if (c->st != S_HEAD)
		return;
	int r = net_http_parse((const char *)b->b, b->len, &c->req);
	if (r == 0)
		return;
	if (r < 0) {
		char msg[200];
		snprintf(msg, sizeof(msg), "bad proxy request: %s", c->req.why);
		conn_fail(c, r == -E2BIG ? 431 : r == -ENOTSUP ? 405 : 400, 1, msg);
		return;
	}
	/* CONNECT: what follows the head is the tunnel's; HTTP: the new head,
	 * then the body */
	size_t rest = b->len - c->req.used;
	if (c->req.kind == NET_REQ_HTTP) {
		char unlisted[300] = "";
		if (net_term_plain_head(p, c, unlisted, sizeof(unlisted)) < 0) { /* --net secret= */
			conn_fail(c, 503, 1, "out of memory");
			return;
		}
		if (unlisted[0])
			conn_record(p, c, false, unlisted);
		if (c->req.head_len + rest > sizeof(b->b)) {
			conn_fail(c, 431, 1, "request head too long");
			return;
		}
		memmove(b->b + c->req.head_len, b->b + c->req.used, rest);
		memcpy(b->b, c->req.head, c->req.head_len);
		b->len = c->req.head_len + rest;
	} else {
		memmove(b->b, b->b + c->req.used, rest);
		b->len = rest;
	}
	target_known(p, c);
}

/* ---- moving bytes ---- */

static bool budget(struct netproxy *p, size_t *want)
{
	if (!p->pol.rate)
		return true;
	if (p->tokens <= 0) {
		p->throttled = true;
		return false;
	}
	if ((long long)*want > p->tokens)
		*want = (size_t)p->tokens;
	return true;
}

static void spend(struct netproxy *p, size_t n)
{
	if (p->pol.rate) {
		p->tokens -= (long long)n;
		if (p->tokens <= 0)
			p->throttled = true;
	}
}

/* Read what fits from fd into b; false at EOF or an error (eof set). */
static void fill(struct netproxy *p, struct conn *c, int fd, struct pipebuf *b, bool *eof,
		 bool counted)
{
	size_t room = sizeof(b->b) - b->len;
	if (c->st == S_HEAD || c->st == S_SOCKS_REQ)
		room = NET_HEAD_MAX > b->len ? NET_HEAD_MAX - b->len : 0;
	if (!room || (counted && !budget(p, &room)))
		return;
	ssize_t n = recv(fd, b->b + b->len, room, 0);
	if (n > 0) {
		b->len += (size_t)n;
		if (counted)
			spend(p, (size_t)n);
		c->deadline = c->st == S_RELAY ? net_now_ms() + IDLE_MS : c->deadline;
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		*eof = true;
	}
}

static bool flush(struct conn *c, int fd, struct pipebuf *b)
{
	if (!b->len)
		return true;
	ssize_t n = send(fd, b->b, b->len, MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	memmove(b->b, b->b + n, b->len - (size_t)n);
	b->len -= (size_t)n;
	if (c->st == S_RELAY)
		c->deadline = net_now_ms() + IDLE_MS;
	return true;
}

/* Relaying: read from one side and write to the other straight away, a
 * few rounds while both keep up, instead of one epoll round per chunk.
 * False when the writing side failed. */
static bool pump(struct netproxy *p, struct conn *c, int from, int to, struct pipebuf *b, bool *eof)
{
	for (int i = 0; i < 8 && !*eof; i++) {
		size_t before = b->len;
		fill(p, c, from, b, eof, true);
		if (b->len == before && i > 0)
			break;
		if (!flush(c, to, b))
			return false;
		if (b->len)
			break; /* the other side is full: wait for it */
	}
	return true;
}

/* Interest in each fd from the state; closes a connection that is done. */
void conn_update(struct netproxy *p, size_t i)
{
	struct conn *c = &p->conns[i];
	if (c->st == S_FREE)
		return;
	if (c->st == S_TERM) { /* the thread has the fds */
		net_set_mask(p, i, c->cfd, &c->cmask, 0, W_CLIENT);
		net_set_mask(p, i, c->ufd, &c->umask, 0, W_UPSTREAM);
		return;
	}
	bool relay = c->st == S_RELAY;
	/* a reply or bytes just queued go out now, not an epoll round later */
	if (c->u2c->len && !(c->cmask & EPOLLOUT) && !flush(c, c->cfd, c->u2c)) {
		c->c_eof = c->u_eof = c->c_shut = c->u_shut = true;
		c->u2c->len = 0;
	}
	if (relay && c->c2u->len && !(c->umask & EPOLLOUT) && !flush(c, c->ufd, c->c2u))
		c->c_eof = c->u_eof = c->c_shut = c->u_shut = true;
	/* half-closes pass on once the other side's bytes are out */
	if (relay && c->c_eof && !c->c2u->len && !c->u_shut) {
		shutdown(c->ufd, SHUT_WR);
		c->u_shut = true;
	}
	if (relay && c->u_eof && !c->u2c->len && !c->c_shut) {
		shutdown(c->cfd, SHUT_WR);
		c->c_shut = true;
	}
	/* an error reply out: stop sending, and read what the client still
	 * sends until it closes (bounded), so that closing with unread bytes
	 * does not reset the connection before the client read the reply */
	if (c->st == S_CLOSING && !c->u2c->len && !c->c_shut) {
		shutdown(c->cfd, SHUT_WR);
		c->c_shut = true;
		c->deadline = net_now_ms() + LINGER_MS;
	}
	bool done = (c->st == S_CLOSING && c->c_shut && c->c_eof) ||
		    (relay && c->c_shut && c->u_shut) ||
		    (c->c_eof && c->st != S_RELAY && c->st != S_CLOSING);
	if (done) {
		conn_close(p, c);
		return;
	}
	bool reading = !p->throttled || !relay;
	uint32_t cm = 0, um = 0;
	if ((c->st == S_HEAD || c->st == S_SOCKS_REQ || (relay && reading) ||
	     (c->st == S_CLOSING && c->c_shut)) &&
	    !c->c_eof && c->c2u->len < sizeof(c->c2u->b))
		cm |= EPOLLIN;
	if (c->u2c->len)
		cm |= EPOLLOUT;
	if (c->st == S_CONNECT || (relay && c->c2u->len))
		um |= EPOLLOUT;
	if (relay && reading && !c->u_eof && c->u2c->len < sizeof(c->u2c->b))
		um |= EPOLLIN;
	net_set_mask(p, i, c->cfd, &c->cmask, cm, W_CLIENT);
	net_set_mask(p, i, c->ufd, &c->umask, um, W_UPSTREAM);
}

void conn_on_client(struct netproxy *p, struct conn *c, uint32_t ev)
{
	if (c->st == S_TERM)
		return;
	if (ev & EPOLLOUT && !flush(c, c->cfd, c->u2c)) {
		c->c_eof = c->u_eof = c->c_shut = c->u_shut = true;
		c->st = c->st == S_RELAY ? S_RELAY : S_CLOSING;
		c->u2c->len = 0;
		return;
	}
	if (c->st == S_CLOSING) {
		char sink[4096];
		ssize_t n = recv(c->cfd, sink, sizeof(sink), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			c->c_eof = true;
		return;
	}
	if (c->st == S_RELAY) {
		bool ok = !(ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) ||
			  pump(p, c, c->cfd, c->ufd, c->c2u, &c->c_eof);
		/* room made for the upstream's bytes */
		if (ok && ev & EPOLLOUT && !c->u2c->len)
			ok = pump(p, c, c->ufd, c->cfd, c->u2c, &c->u_eof);
		if (!ok)
			c->c_eof = c->u_eof = c->c_shut = c->u_shut = true;
		return;
	}
	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		fill(p, c, c->cfd, c->c2u, &c->c_eof, false);
		if (c->st == S_HEAD || c->st == S_SOCKS_REQ)
			on_head(p, c);
	}
}

void conn_on_upstream(struct netproxy *p, struct conn *c, uint32_t ev)
{
	if (c->st == S_CONNECT) {
		if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			on_connect(p, c);
		return;
	}
	if (c->st != S_RELAY)
		return;
	bool ok = !(ev & EPOLLOUT) || flush(c, c->ufd, c->c2u);
	if (ok && ev & EPOLLOUT && !c->c2u->len)
		ok = pump(p, c, c->cfd, c->ufd, c->c2u, &c->c_eof);
	if (ok && ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
		ok = pump(p, c, c->ufd, c->cfd, c->u2c, &c->u_eof);
	if (!ok)
		c->c_eof = c->u_eof = c->c_shut = c->u_shut = true;
}
