/* The framing of a TLS-terminated connection (--net secret= or rules by
 * method and path, src/http/http_frame.c, src/net/netterm.c): an input
 * starting "HTTP/" is a response from the upstream (net_http_resp_scan,
 * as the answer to a HEAD and to another method), else the requests the
 * sandbox sends (net_http_msg_scan); net_body_step follows each body
 * (Content-Length, chunked, until close) so the next message is found
 * where the proxy sends it on; net_http_set_close rewrites a head.
 * Promises: a head is complete only once and ends in CRLF CRLF; a body
 * is never framed two ways; following a body in one piece or byte by
 * byte ends at the same byte with the same verdict; a head with
 * "Connection: close" set scans again as the same message, now closing. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "http/http_frame.h"

static void check_body(struct net_body *whole, struct net_body *bytes, const uint8_t *b, size_t n)
{
	size_t a = net_body_step(whole, b, n);
	FUZZ_CHECK(a <= n);
	size_t k = 0;
	while (k < n && !bytes->done && !bytes->bad)
		k += net_body_step(bytes, b + k, 1);
	FUZZ_CHECK(a == k && whole->done == bytes->done && whole->bad == bytes->bad);
	FUZZ_CHECK(!(whole->done && whole->bad));
}

/* head[0..len) with Connection: close set, in a copy */
static char *closed(const uint8_t *head, size_t len, size_t *n)
{
	char *c = malloc(len + NET_CLOSE_ROOM);
	FUZZ_CHECK(c);
	memcpy(c, head, len);
	*n = len;
	net_http_set_close(c, n);
	FUZZ_CHECK(*n <= len + NET_CLOSE_ROOM);
	FUZZ_CHECK(*n >= 23 && memcmp(c + *n - 23, "\r\nConnection: close\r\n\r\n", 23) == 0);
	return c;
}

static void response(const uint8_t *data, size_t size)
{
	for (int head_req = 0; head_req < 2; head_req++) {
		struct net_http_resp r, p;
		const char *why;
		int rc = net_http_resp_scan((const char *)data, size, head_req, &r, &why);
		if (rc != 1) {
			FUZZ_CHECK(rc <= 0 && (rc == 0 || why));
			continue;
		}
		FUZZ_CHECK(r.head_len >= 4 && r.head_len <= size &&
			   r.head_len <= NET_RESP_HEAD_MAX);
		FUZZ_CHECK(memcmp(data + r.head_len - 4, "\r\n\r\n", 4) == 0);
		FUZZ_CHECK(r.status >= 100 && r.status <= 999);
		FUZZ_CHECK(!(r.chunked && r.until_close) &&
			   !(r.no_body && (r.chunked || r.until_close)));
		FUZZ_CHECK(!r.until_close || r.close);
		FUZZ_CHECK(!head_req || r.no_body);
		FUZZ_CHECK(net_http_resp_scan((const char *)data, r.head_len - 1, head_req, &p,
					      &why) != 1);
		size_t n;
		char *c = closed(data, r.head_len, &n);
		if (n <= NET_RESP_HEAD_MAX) {
			FUZZ_CHECK(net_http_resp_scan(c, n, head_req, &p, &why) == 1);
			FUZZ_CHECK(p.head_len == n && p.status == r.status && p.close);
			FUZZ_CHECK(p.no_body == r.no_body && p.chunked == r.chunked);
		}
		free(c);
		struct net_body whole, bytes;
		net_body_init_resp(&whole, &r);
		net_body_init_resp(&bytes, &r);
		check_body(&whole, &bytes, data + r.head_len, size - r.head_len);
		FUZZ_CHECK(!r.until_close || !whole.done);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 70000)
		return 0;
	if (size >= 5 && memcmp(data, "HTTP/", 5) == 0) {
		response(data, size);
		return 0;
	}
	struct net_http_msg m, p;
	const char *why;
	int rc = net_http_msg_scan((const char *)data, size, &m, &why);
	if (rc != 1) {
		FUZZ_CHECK(rc <= 0 && (rc == 0 || why));
		return 0;
	}
	FUZZ_CHECK(m.head_len >= 4 && m.head_len <= size && m.head_len <= NET_HEAD_MAX);
	FUZZ_CHECK(memcmp(data + m.head_len - 4, "\r\n\r\n", 4) == 0);
	FUZZ_CHECK(!(m.chunked && m.length));
	FUZZ_CHECK(m.method_len > 0 && m.method_len < m.head_len);
	FUZZ_CHECK(m.host_off + m.host_len <= m.head_len);
	FUZZ_CHECK(net_http_msg_scan((const char *)data, m.head_len - 1, &p, &why) != 1);
	size_t n;
	char *c = closed(data, m.head_len, &n);
	if (n <= NET_HEAD_MAX) {
		FUZZ_CHECK(net_http_msg_scan(c, n, &p, &why) == 1);
		FUZZ_CHECK(p.head_len == n && p.close && p.chunked == m.chunked &&
			   p.length == m.length && p.method_len == m.method_len &&
			   p.host_len == m.host_len && p.upgrade == m.upgrade);
	}
	free(c);
	struct net_body whole, bytes;
	net_body_init(&whole, &m);
	net_body_init(&bytes, &m);
	FUZZ_CHECK(whole.done == !net_http_has_body(&m));
	check_body(&whole, &bytes, data + m.head_len, size - m.head_len);
	return 0;
}
