/* Parsers of what a sandbox sends its proxy before any byte is relayed:
 * an HTTP request head (CONNECT, or a plain request in absolute form) and
 * the SOCKS5 greeting and request (RFC 1928). Pure functions over a
 * buffer, fuzzed by tests/fuzz/fuzz_netparse.c. */
#ifndef AB_NETPARSE_H
#define AB_NETPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/netpolicy.h"

#define NET_HEAD_MAX 16384

enum net_req_kind { NET_REQ_CONNECT, NET_REQ_HTTP, NET_REQ_SOCKS };

struct net_request {
	enum net_req_kind kind;
	struct net_target target;
	size_t used; /* bytes of the buffer the head took */
	char *head;  /* NET_REQ_HTTP: the request head to send upstream (malloc) */
	size_t head_len;
	const char *why; /* a failure: what was wrong, for the error reply */
};

void net_request_clear(struct net_request *r);

/* 1: a complete head in b[0..n) (r filled; r->used bytes of it); 0: need
 * more; <0 a bad request, r->why saying what: -E2BIG longer than
 * NET_HEAD_MAX, -ENOTSUP a method or scheme the proxy does not handle,
 * -EPROTO malformed, -ENOMEM. */
int net_http_parse(const char *b, size_t n, struct net_request *r);

/* The SOCKS5 greeting: 1 complete and "no authentication" offered, 0 need
 * more, -EPROTO malformed (or not version 5), -ENOTSUP no method we take. */
int net_socks_greeting(const uint8_t *b, size_t n, size_t *used);
/* The SOCKS5 request: 1 complete (r->target), 0 need more, -EPROTO
 * malformed, -ENOTSUP a command other than CONNECT (reply 7),
 * -EAFNOSUPPORT an unknown address type (reply 8), -EINVAL a name that is
 * not a host name (reply 4). */
int net_socks_request(const uint8_t *b, size_t n, struct net_request *r);

/* One request the sandbox sends in a terminated connection (netterm.c):
 * its head's length and how its body is framed. */
struct net_http_msg {
	size_t head_len; /* the request line and headers, CRLF CRLF included */
	bool chunked;
	unsigned long long length; /* Content-Length (0 without) */
	bool upgrade;		   /* Upgrade: or CONNECT: what follows is not HTTP */
	bool origin_form;	   /* the target is a path ("/..."), not a URL */
	size_t host_off, host_len; /* the Host header's value (host_len 0: none) */
};
/* 1: a complete head at b; 0: need more; -E2BIG: longer than
 * NET_HEAD_MAX; -EPROTO: malformed (*why says how; also a body framed
 * two ways, two Host headers: a request the server could read otherwise). */
int net_http_msg_scan(const char *b, size_t n, struct net_http_msg *m, const char **why);

/* The body after a head, followed byte by byte without changing it. */
struct net_body {
	int st;
	unsigned long long left;
	unsigned digits, line;
	bool cr, done, bad;
};
void net_body_init(struct net_body *b, const struct net_http_msg *m);
/* How many of p[0..n) belong to the body; done once it ended, bad when
 * the chunked framing is broken. */
size_t net_body_step(struct net_body *b, const uint8_t *p, size_t n);

#endif
