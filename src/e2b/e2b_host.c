/* getHost(port) (docs/e2b.md, "Ports"): a request whose Host is
 * PORT-ID.DOMAIN (the SDK's getHost, DOMAIN the server's --domain) is
 * relayed to TCP port PORT of sandbox ID. The sandbox's launcher publishes
 * the port on the host's loopback ({"op":"port"} on the sandbox's link: the
 * port relay, port/), reachable by its owner only, which is this server's
 * user; the server connects there and from then on the client's connection
 * is a tunnel: its bytes, the request's head first (without the
 * e2b-traffic-access-token header), go in as they come, and what comes out
 * goes back, until either end closes. Who may: the client's uid, read by
 * sock_diag, the server's own (the sandboxes' owner), or, for a sandbox
 * made with network.allowPublicTraffic false, whoever sends its traffic
 * access token (and only they). Errors are E2B's proxy's: 502 JSON with
 * the sandbox's id. */
#include "e2b/e2b_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "port/port_peer.h"

#define TUNNEL_BUF     (64u << 10)  /* client -> sandbox, at most */
#define TUNNEL_OUT_MAX (256u << 10) /* sandbox -> client waiting, then no more read */
#define TRAFFIC_HEADER "e2b-traffic-access-token"
/* E2B's proxy's words when nothing listens on the port */
#define NOT_OPEN "The sandbox is running but port is not open"

struct e2b_tunnel {
	struct e2b_sbx *s; /* while its port request is pending */
	long rq;
	int up; /* the connection to the published port, -1 none yet */
	bool connecting, client_eof, up_shut, got;
	unsigned port;
	char id[64];
};

/* An answer of E2B's proxy's shape, then the connection's end. */
static void refuse(struct e2b_conn *c, int status, const char *msg)
{
	struct e2b_tunnel *t = c->tun;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "message", json_object_new_string(msg));
	json_object_object_add(o, "sandboxId", json_object_new_string(t ? t->id : ""));
	if (t && t->port)
		json_object_object_add(o, "port", json_object_new_int((int)t->port));
	json_object_object_add(o, "code", json_object_new_int(status));
	size_t n;
	const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
	c->close_after = true;
	c->out_len = c->out_off = 0; /* nothing of an answer went yet (t->got false) */
	e2b_conn_head(c, status, "application/json", (long long)n);
	e2b_conn_write(c, s, n);
	json_object_put(o);
	c->st = C_CLOSING;
	shutdown(c->fd, SHUT_RD);
	if (t && t->up >= 0) {
		close(t->up);
		t->up = -1;
	}
}

/* host ("PORT-ID.DOMAIN[:N]") split: 1 when it names DOMAIN (port 0 when
 * PORT is not one), else 0 (not ours: the API's routes). */
static int parse_host(const char *host, const char *domain, unsigned *port, char *id,
		      size_t id_size)
{
	const char *dash = strchr(host, '-'), *dot = dash ? strchr(dash, '.') : NULL;
	if (!dash || !dot)
		return 0;
	const char *rest = dot + 1, *colon = strrchr(rest, ':');
	size_t n = colon ? (size_t)(colon - rest) : strlen(rest);
	if (n != strlen(domain) || strncasecmp(rest, domain, n) != 0)
		return 0;
	size_t idn = (size_t)(dot - dash - 1);
	if (idn == 0 || idn >= id_size)
		return 0;
	memcpy(id, dash + 1, idn);
	id[idn] = 0;
	unsigned long p = 0;
	const char *d = host;
	for (; d < dash && *d >= '0' && *d <= '9' && p <= 65535; d++)
		p = p * 10 + (unsigned long)(*d - '0');
	*port = d == dash && d > host && p >= 1 && p <= 65535 ? (unsigned)p : 0;
	return 1;
}

/* The head at c->in without the traffic token's header: the raw lines
 * kept as they came (the request line first), c->head_len updated. */
static void strip_token(struct e2b_conn *c)
{
	size_t hl = strlen(TRAFFIC_HEADER);
	char *p = memchr(c->in, '\n', c->head_len);
	while (p && (size_t)(p + 1 - c->in) < c->head_len) {
		char *line = p + 1;
		char *eol = memchr(line, '\n', c->head_len - (size_t)(line - c->in));
		if (!eol)
			return;
		size_t len = (size_t)(eol + 1 - line);
		if (len > hl && line[hl] == ':' && !strncasecmp(line, TRAFFIC_HEADER, hl)) {
			memmove(line, eol + 1, c->in_len - (size_t)(eol + 1 - c->in));
			c->in_len -= len;
			c->head_len -= len;
			p = line - 1;
		} else {
			p = eol;
		}
	}
}

static void connect_up(struct e2b_conn *c, unsigned host_port)
{
	struct e2b_tunnel *t = c->tun;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)host_port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	t->up = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (t->up < 0)
		return refuse(c, 502, "cannot make a socket for the sandbox's port");
	/* a relay: each piece goes on as it comes (Nagle's wait on the second of
	 * two small writes would meet the peer's delayed ACK: 40 ms) */
	int one = 1;
	setsockopt(t->up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(t->up, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS)
		return refuse(c, 502, "cannot reach the sandbox's published port");
	t->connecting = true;
	c->last_ms = e2b_now_ms();
}

/* The launcher's answer to {"op":"port"}: the URL published
 * ("http://127.0.0.1:HOSTPORT"), or why not. */
static void published(void *arg, json_object *msg, bool last)
{
	struct e2b_conn *c = arg;
	struct e2b_tunnel *t = c->tun;
	if (!last)
		return;
	t->s = NULL;
	t->rq = 0;
	json_object *v = NULL;
	const char *type = msg && json_object_object_get_ex(msg, "type", &v)
				   ? json_object_get_string(v)
				   : NULL;
	const char *url =
		msg && json_object_object_get_ex(msg, "url", &v) ? json_object_get_string(v) : NULL;
	const char *colon = url ? strrchr(url, ':') : NULL;
	long hp = colon ? strtol(colon + 1, NULL, 10) : 0;
	if (!msg)
		return refuse(c, 502, "The sandbox was not found");
	if (!type || strcmp(type, "port") || !url || strncmp(url, "http://127.0.0.1:", 17) ||
	    hp < 1 || hp > 65535) {
		char b[700];
		const char *why = json_object_object_get_ex(msg, "message", &v)
					  ? json_object_get_string(v)
					  : "no URL";
		snprintf(b, sizeof(b), "cannot publish the sandbox's port: %s", why);
		return refuse(c, 502, b);
	}
	connect_up(c, (unsigned)hp);
}

int e2b_host_take(struct e2b_conn *c, struct e2b_http *h)
{
	struct e2b *srv = c->srv;
	const char *host = e2b_http_header(h, "Host");
	unsigned port = 0;
	char id[64];
	if (!host || !parse_host(host, srv->domain, &port, id, sizeof(id)))
		return 0;
	struct e2b_tunnel *t = calloc(1, sizeof(*t));
	if (!t)
		return 0;
	t->up = -1;
	t->port = port;
	snprintf(t->id, sizeof(t->id), "%s", id);
	c->tun = t;
	const char *hv = e2b_http_header(h, TRAFFIC_HEADER);
	char tok[E2B_KEY_LEN + 2] = "";
	if (hv && strlen(hv) <= E2B_KEY_LEN)
		memcpy(tok, hv, strlen(hv) + 1);
	e2b_http_free(h);
	c->req = NULL;
	c->st = C_TUNNEL;
	struct e2b_sbx *s = e2b_sbx_find(srv, id);
	/* who may first, before anything is said of the sandbox (whether it
	 * is, is paused): its owner, or whoever has the traffic token where
	 * the sandbox asked for one; refused alike whatever the reason */
	bool ok = s && s->traffic[0] ? tok[0] && e2b_same(tok, s->traffic)
				     : port_peer_uid(-1, c->fd) == (long)getuid();
	if (!ok) {
		refuse(c, 403,
		       "not allowed: only the server's own user may reach a sandbox's port, "
		       "and for a sandbox created with network.allowPublicTraffic false only "
		       "with its e2b-traffic-access-token");
		return 1;
	}
	if (!s) {
		refuse(c, 502, "The sandbox was not found");
		return 1;
	}
	if (!port) {
		refuse(c, 400, "not a port: the host is PORT-ID.DOMAIN, PORT from 1 to 65535");
		return 1;
	}
	if (s->paused) {
		refuse(c, 502, "The sandbox is paused");
		return 1;
	}
	strip_token(c);
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("port"));
	json_object_object_add(req, "port", json_object_new_int((int)port));
	t->s = s;
	t->rq = e2b_sbx_request(s, req, published, c);
	if (t->rq < 0) {
		t->s = NULL;
		t->rq = 0;
		refuse(c, 502, "the sandbox's link is down");
	}
	return 1;
}

short e2b_host_client_events(struct e2b_conn *c)
{
	struct e2b_tunnel *t = c->tun;
	short ev = 0;
	if (c->st == C_TUNNEL && !t->client_eof && c->in_len < TUNNEL_BUF)
		ev |= POLLIN;
	if (c->out_off < c->out_len)
		ev |= POLLOUT;
	return ev;
}

int e2b_host_up_fd(struct e2b_conn *c, short *events)
{
	struct e2b_tunnel *t = c->tun;
	*events = 0;
	if (c->st != C_TUNNEL || t->up < 0)
		return -1;
	if (t->connecting || ((c->in_len || t->client_eof) && !t->up_shut))
		*events |= POLLOUT;
	if (!t->connecting && c->out_len - c->out_off < TUNNEL_OUT_MAX)
		*events |= POLLIN;
	return t->up;
}

/* The client's bytes (the head first) into the sandbox's port as it takes
 * them; at the client's end, once all went, the port's end too. */
static void pump_in(struct e2b_conn *c)
{
	struct e2b_tunnel *t = c->tun;
	while (c->in_len && !t->up_shut) {
		ssize_t n = send(t->up, c->in, c->in_len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (errno != EAGAIN)
				t->up_shut = true; /* the port went: its answer (or end) tells */
			break;
		}
		memmove(c->in, c->in + n, c->in_len - (size_t)n);
		c->in_len -= (size_t)n;
		c->last_ms = e2b_now_ms();
	}
	if (t->client_eof && !c->in_len && !t->up_shut) {
		shutdown(t->up, SHUT_WR);
		t->up_shut = true;
	}
}

void e2b_host_client_io(struct e2b_conn *c, short revents)
{
	struct e2b_tunnel *t = c->tun;
	if (c->st != C_TUNNEL)
		return;
	if (revents & (POLLERR | POLLHUP)) {
		c->dead = true;
		return;
	}
	if (!(revents & POLLIN))
		return;
	if (c->in_cap < TUNNEL_BUF) {
		char *p = realloc(c->in, TUNNEL_BUF);
		if (!p) {
			c->dead = true;
			return;
		}
		c->in = p;
		c->in_cap = TUNNEL_BUF;
	}
	ssize_t n = recv(c->fd, c->in + c->in_len, TUNNEL_BUF - c->in_len, MSG_DONTWAIT);
	if (n == 0) {
		t->client_eof = true;
	} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
		c->dead = true;
		return;
	} else if (n > 0) {
		c->in_len += (size_t)n;
		c->last_ms = e2b_now_ms();
	}
	if (t->up >= 0 && !t->connecting)
		pump_in(c);
}

void e2b_host_up_io(struct e2b_conn *c, short revents)
{
	struct e2b_tunnel *t = c->tun;
	if (c->st != C_TUNNEL || t->up < 0)
		return;
	if (t->connecting) {
		int e = 0;
		socklen_t len = sizeof(e);
		if (getsockopt(t->up, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
			e = errno;
		if (e == EINPROGRESS || e == EALREADY)
			return;
		if (e == ECONNRESET || e == EPIPE) /* taken, then reset by the relay */
			return refuse(c, 502, NOT_OPEN);
		if (e)
			return refuse(c, 502, "cannot reach the sandbox's published port");
		t->connecting = false;
	}
	if (revents & POLLOUT)
		pump_in(c);
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	char b[TUNNEL_BUF];
	ssize_t n = recv(t->up, b, sizeof(b), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		t->got = true;
		c->last_ms = e2b_now_ms();
		e2b_conn_write(c, b, (size_t)n);
		return;
	}
	/* the port's end: reset before any answer when nothing listens inside
	 * (the relay's connection inside was refused) */
	if (!t->got)
		return refuse(c, 502, NOT_OPEN);
	close(t->up);
	t->up = -1;
	c->st = C_CLOSING; /* what came is written, then the end */
	shutdown(c->fd, SHUT_RD);
}

void e2b_host_free(struct e2b_conn *c)
{
	struct e2b_tunnel *t = c->tun;
	if (!t)
		return;
	if (t->s && t->rq > 0 && !t->s->dead)
		e2b_sbx_forget(t->s, t->rq);
	if (t->up >= 0)
		close(t->up);
	free(t);
	c->tun = NULL;
}
