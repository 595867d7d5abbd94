/* HTTP/1.1 message framing for the proxy's terminated connections
 * (src/net/netterm.c): where a request from the sandbox and a response
 * from the upstream begin and end (RFC 9112, section 6). Pure functions
 * over a buffer, fuzzed by tests/fuzz/fuzz_nethttp.c. Strict on the
 * requests: a head that a server could frame another way than the proxy
 * does is refused, never guessed at. */
#ifndef AB_HTTP_FRAME_H
#define AB_HTTP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A request head the proxy reads (net/netparse.c's too). */
#define NET_HEAD_MAX 16384

/* A response head may be longer than a request's (cookies, policies). */
#define NET_RESP_HEAD_MAX 65536

/* One request the sandbox sends in a terminated connection: its head's
 * length and how its body is framed. */
struct net_http_msg {
	size_t head_len; /* the request line and headers, CRLF CRLF included */
	size_t method_len;
	bool chunked;
	unsigned long long length; /* Content-Length (0 without) */
	bool upgrade;		   /* an Upgrade header */
	bool origin_form;	   /* the target is a path ("/..."), not a URL */
	bool close;		   /* HTTP/1.0, or Connection: close */
	size_t host_off, host_len; /* the Host header's value (host_len 0: none) */
};
/* 1: a complete head at b; 0: need more; -E2BIG: longer than
 * NET_HEAD_MAX; -EPROTO: malformed (*why says how): a bare CR or LF, a
 * control byte, a folded line, a header name that is not a token or is
 * followed by a space, a request line other than "METHOD SP TARGET SP
 * HTTP/1.0|1", Content-Length other than digits or given twice
 * differently, a Transfer-Encoding other than one "chunked" (or any in
 * HTTP/1.0), both, two Host headers. */
int net_http_msg_scan(const char *b, size_t n, struct net_http_msg *m, const char **why);
/* Whether the request has a body (Content-Length above 0, or chunked). */
bool net_http_has_body(const struct net_http_msg *m);
/* GET, HEAD, OPTIONS, DELETE, TRACE, CONNECT: a body has no defined
 * meaning, and many servers do not read one (it would be their next
 * request). */
bool net_http_bodyless_method(const char *method, size_t mlen);

/* One response from the upstream, after a request of method HEAD or not. */
struct net_http_resp {
	size_t head_len;
	unsigned status;
	bool no_body;		   /* 1xx, 204, 304, or an answer to HEAD */
	bool chunked;		   /* else Content-Length, else until close */
	bool until_close;	   /* no framing: the body ends with the connection */
	unsigned long long length; /* Content-Length */
	bool close;		   /* the connection ends after it */
};
/* 1: a complete head at b; 0: need more; -E2BIG: longer than
 * NET_RESP_HEAD_MAX; -EPROTO: not an HTTP/1 response, a bare LF, a
 * control byte, a folded line, a bad or conflicting Content-Length. */
int net_http_resp_scan(const char *b, size_t n, bool head_request, struct net_http_resp *r,
		       const char **why);

/* A body after a head, followed byte by byte without changing it. */
struct net_body {
	int st;
	unsigned long long left;
	unsigned digits, line, trailer;
	bool cr, done, bad, no_trailers;
};
/* A request's body (a chunked one may not carry trailer fields). */
void net_body_init(struct net_body *b, const struct net_http_msg *m);
/* A response's body (until_close: it never ends by itself). */
void net_body_init_resp(struct net_body *b, const struct net_http_resp *r);
/* How many of p[0..n) belong to the body; done once it ended, bad when
 * the chunked framing is broken (a chunk size other than 1 to 15 hex
 * digits, an extension other than ';' and text, a bare CR or LF, a
 * trailer section over 16 KiB). */
size_t net_body_step(struct net_body *b, const uint8_t *p, size_t n);

/* head[0..*len), a complete head with room for NET_CLOSE_ROOM more bytes:
 * its Connection and Keep-Alive lines dropped, "Connection: close" added. */
#define NET_CLOSE_ROOM 19
void net_http_set_close(char *head, size_t *len);

#endif
