/* Parsers of what a sandbox sends its proxy before any byte is relayed:
 * an HTTP request head (CONNECT, or a plain request in absolute form) and
 * the SOCKS5 greeting and request (RFC 1928). Pure functions over a
 * buffer, fuzzed by tests/fuzz/fuzz_netparse.c. */
#ifndef AB_NETPARSE_H
#define AB_NETPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/http_frame.h"
#include "net/netpolicy.h"

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

#endif
