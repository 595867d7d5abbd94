/* The proxy's request parsers (netparse.h). Strict on purpose: a head
 * with a folded header line, a bare LF, a control byte or a URL with user
 * information is refused rather than guessed at, so that the proxy and the
 * server behind it can never read one request two ways. */
#include "net/netparse.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void net_request_clear(struct net_request *r)
{
	free(r->head);
	memset(r, 0, sizeof(*r));
}

static int bad(struct net_request *r, int code, const char *why)
{
	r->why = why;
	return code;
}

static const char *find_end(const char *b, size_t n)
{
	for (size_t i = 0; i + 3 < n; i++)
		if (b[i] == '\r' && b[i + 1] == '\n' && b[i + 2] == '\r' && b[i + 3] == '\n')
			return b + i;
	return NULL;
}

static bool parse_uint_port(const char *s, size_t n, unsigned *port)
{
	if (n == 0 || n > 5)
		return false;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	*port = v;
	return v > 0 && v <= 65535;
}

/* "host:port", "[v6]:port", or without the port when dflt is not 0. */
static int parse_authority(const char *s, size_t n, unsigned dflt, struct net_target *t)
{
	size_t hlen = n;
	unsigned port = dflt;
	const char *colon = NULL;
	if (n && s[0] == '[') {
		const char *close = memchr(s, ']', n);
		if (!close)
			return -EPROTO;
		hlen = (size_t)(close - s) + 1;
		if (hlen < n) {
			if (s[hlen] != ':')
				return -EPROTO;
			colon = s + hlen;
		}
	} else {
		colon = memchr(s, ':', n);
		if (colon)
			hlen = (size_t)(colon - s);
	}
	if (colon && !parse_uint_port(colon + 1, n - (size_t)(colon + 1 - s), &port))
		return -EPROTO;
	if (!port)
		return -EPROTO;
	return net_target_set(t, s, hlen, port) < 0 ? -EPROTO : 0;
}

static bool header_is(const char *line, size_t n, const char *name)
{
	size_t k = strlen(name);
	return n > k && line[k] == ':' && strncasecmp(line, name, k) == 0;
}

/* The headers the proxy replaces or drops: hop-by-hop ones, credentials
 * meant for a proxy, and Host, which must name what the policy checked. */
static bool dropped(const char *line, size_t n)
{
	static const char *const names[] = {"host",
					    "connection",
					    "proxy-connection",
					    "keep-alive",
					    "proxy-authorization",
					    "proxy-authenticate",
					    "te",
					    "upgrade"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (header_is(line, n, names[i]))
			return true;
	return false;
}

static int append(struct net_request *r, size_t *cap, const char *s, size_t n)
{
	if (r->head_len + n + 1 > *cap) {
		size_t c = (*cap ? *cap : 512) * 2 + n;
		char *v = realloc(r->head, c);
		if (!v)
			return -ENOMEM;
		r->head = v;
		*cap = c;
	}
	memcpy(r->head + r->head_len, s, n);
	r->head_len += n;
	r->head[r->head_len] = '\0';
	return 0;
}

/* GET http://host[:port]/path HTTP/1.1 -> GET /path HTTP/1.1 with Host
 * set to what was checked and Connection: close (one request per
 * connection: nothing can ride a kept-alive connection to another host). */
static int rewrite(const char *method, size_t mlen, const char *path, size_t plen,
		   const char *version, const char *hdrs, const char *end, struct net_request *r)
{
	size_t cap = 0;
	char host[NET_HOST_MAX + 16];
	bool v6 = strchr(r->target.host, ':') != NULL;
	if (r->target.port == 80)
		snprintf(host, sizeof(host), v6 ? "[%s]" : "%s", r->target.host);
	else
		snprintf(host, sizeof(host), v6 ? "[%s]:%u" : "%s:%u", r->target.host,
			 r->target.port);
	if (append(r, &cap, method, mlen) || append(r, &cap, " ", 1) ||
	    append(r, &cap, plen ? path : "/", plen ? plen : 1) || append(r, &cap, " ", 1) ||
	    append(r, &cap, version, 8) || append(r, &cap, "\r\n", 2))
		return -ENOMEM;
	for (const char *line = hdrs; line < end;) {
		const char *eol = strstr(line, "\r\n");
		size_t n = (size_t)(eol - line);
		if (!dropped(line, n) && append(r, &cap, line, n + 2))
			return -ENOMEM;
		line = eol + 2;
	}
	if (append(r, &cap, "Host: ", 6) || append(r, &cap, host, strlen(host)) ||
	    append(r, &cap, "\r\nConnection: close\r\n\r\n", 23))
		return -ENOMEM;
	return 0;
}

/* Header lines: "Name: value", tokens for names, no folding, no control
 * bytes but tab. */
static bool headers_valid(const char *hdrs, const char *end)
{
	for (const char *line = hdrs; line < end;) {
		const char *eol = strstr(line, "\r\n");
		const char *colon = memchr(line, ':', (size_t)(eol - line));
		if (!colon || colon == line)
			return false;
		for (const char *c = line; c < colon; c++)
			if (!isalnum((unsigned char)*c) && !strchr("!#$%&'*+-.^_`|~", *c))
				return false;
		for (const char *c = colon; c < eol; c++)
			if ((unsigned char)*c < 0x20 && *c != '\t')
				return false;
		line = eol + 2;
	}
	return true;
}

int net_http_parse(const char *b, size_t n, struct net_request *r)
{
	memset(r, 0, sizeof(*r));
	const char *end = find_end(b, n);
	if (!end)
		return n >= NET_HEAD_MAX    ? bad(r, -E2BIG, "request head too long")
		       : memchr(b, '\0', n) ? bad(r, -EPROTO, "not an HTTP request")
					    : 0;
	if ((size_t)(end - b) + 4 > NET_HEAD_MAX)
		return bad(r, -E2BIG, "request head too long");
	r->used = (size_t)(end - b) + 4;
	for (const char *c = b; c < end; c++)
		if (*c == '\0' || (*c == '\n' && (c == b || c[-1] != '\r')) ||
		    (*c == '\r' && c[1] != '\n'))
			return bad(r, -EPROTO, "malformed request head");
	/* request line: METHOD SP TARGET SP HTTP/1.x */
	const char *eol = strstr(b, "\r\n");
	const char *sp1 = memchr(b, ' ', (size_t)(eol - b));
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || sp1 == b || sp2 == sp1 + 1 || eol - sp2 - 1 != 8 ||
	    strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1'))
		return bad(r, -EPROTO, "malformed request line");
	size_t mlen = (size_t)(sp1 - b);
	for (size_t i = 0; i < mlen; i++)
		if (!isupper((unsigned char)b[i]))
			return bad(r, -EPROTO, "malformed method");
	const char *target = sp1 + 1;
	size_t tlen = (size_t)(sp2 - target);
	const char *hdrs = eol + 2;
	if (!headers_valid(hdrs, end + 2))
		return bad(r, -EPROTO, "malformed header line");
	if (mlen == 7 && strncmp(b, "CONNECT", 7) == 0) {
		r->kind = NET_REQ_CONNECT;
		if (parse_authority(target, tlen, 0, &r->target) < 0)
			return bad(r, -EPROTO, "CONNECT needs host:port");
		return 1;
	}
	if (tlen < 7 || strncasecmp(target, "http://", 7) != 0)
		return bad(r, -ENOTSUP,
			   tlen >= 8 && strncasecmp(target, "https://", 8) == 0
				   ? "use CONNECT for https"
				   : "only http:// URLs in absolute form and CONNECT are proxied");
	const char *auth = target + 7;
	size_t alen = strcspn(auth, "/? ");
	if (auth + alen > sp2)
		alen = (size_t)(sp2 - auth);
	if (memchr(auth, '@', alen))
		return bad(r, -EPROTO, "user information in the URL");
	r->kind = NET_REQ_HTTP;
	if (parse_authority(auth, alen, 80, &r->target) < 0)
		return bad(r, -EPROTO, "malformed host in the URL");
	const char *path = auth + alen;
	size_t plen = (size_t)(sp2 - path);
	if (plen && path[0] == '?') /* http://h?q is http://h/?q */
		return bad(r, -EPROTO, "a URL's query needs a path");
	int rc = rewrite(b, mlen, path, plen, sp2 + 1, hdrs, end + 2, r);
	if (rc < 0) {
		free(r->head);
		r->head = NULL;
		return bad(r, rc, "out of memory");
	}
	return 1;
}

int net_socks_greeting(const uint8_t *b, size_t n, size_t *used)
{
	if (n < 2)
		return n && b[0] != 5 ? -EPROTO : 0;
	if (b[0] != 5 || b[1] == 0)
		return -EPROTO;
	if (n < 2u + b[1])
		return 0;
	*used = 2u + b[1];
	return memchr(b + 2, 0, b[1]) ? 1 : -ENOTSUP;
}

int net_socks_request(const uint8_t *b, size_t n, struct net_request *r)
{
	memset(r, 0, sizeof(*r));
	r->kind = NET_REQ_SOCKS;
	if ((n > 0 && b[0] != 5) || (n > 2 && b[2] != 0))
		return bad(r, -EPROTO, "malformed SOCKS5 request");
	if (n > 3 && b[3] != 1 && b[3] != 3 && b[3] != 4)
		return bad(r, -EAFNOSUPPORT, "unknown SOCKS5 address type");
	if (n < 5)
		return 0;
	size_t alen;
	char host[NET_HOST_MAX + 1];
	switch (b[3]) {
	case 1:
		alen = 4;
		break;
	case 4:
		alen = 16;
		break;
	case 3:
		alen = 1u + b[4];
		if (b[4] == 0)
			return bad(r, -EINVAL, "empty host name");
		break;
	default:
		return bad(r, -EAFNOSUPPORT, "unknown SOCKS5 address type");
	}
	if (n < 4 + alen + 2)
		return 0;
	r->used = 4 + alen + 2;
	if (b[1] != 1)
		return bad(r, -ENOTSUP, "only the SOCKS5 CONNECT command is supported");
	unsigned port = (unsigned)b[4 + alen] << 8 | b[5 + alen];
	int rc;
	if (b[3] == 3) {
		rc = net_target_set(&r->target, (const char *)b + 5, b[4], port);
	} else {
		uint8_t a[16];
		if (b[3] == 1) {
			memset(a, 0, 10);
			a[10] = a[11] = 0xff;
			memcpy(a + 12, b + 4, 4);
		} else {
			memcpy(a, b + 4, 16);
		}
		net_addr_format(a, host, sizeof(host));
		rc = net_target_set(&r->target, host, strlen(host), port);
	}
	return rc < 0 ? bad(r, -EINVAL, "not a host name, or port 0") : 1;
}
