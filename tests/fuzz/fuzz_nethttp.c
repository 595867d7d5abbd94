/* The requests a sandbox sends inside a TLS-terminated connection
 * (--net secret=, src/net/netterm.c): net_http_msg_scan reads each head,
 * net_body_step follows its body (Content-Length, chunked) so the next
 * head is found where the server will find it. Promises: a head is
 * complete only once and ends in CRLF CRLF; a body is never framed two
 * ways; following a body in one piece or byte by byte ends at the same
 * byte with the same verdict. */
#include <string.h>

#include "fuzz.h"
#include "net/netparse.h"

static void follow(const uint8_t *b, size_t n, const struct net_http_msg *m)
{
	struct net_body whole, bytes;
	net_body_init(&whole, m);
	net_body_init(&bytes, m);
	size_t a = net_body_step(&whole, b, n);
	FUZZ_CHECK(a <= n);
	size_t k = 0;
	while (k < n && !bytes.done && !bytes.bad)
		k += net_body_step(&bytes, b + k, 1);
	FUZZ_CHECK(a == k && whole.done == bytes.done && whole.bad == bytes.bad);
	FUZZ_CHECK(!(whole.done && whole.bad));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 70000)
		return 0;
	struct net_http_msg m;
	const char *why;
	int rc = net_http_msg_scan((const char *)data, size, &m, &why);
	if (rc != 1) {
		FUZZ_CHECK(rc <= 0 && (rc == 0 || why));
		return 0;
	}
	FUZZ_CHECK(m.head_len >= 4 && m.head_len <= size && m.head_len <= NET_HEAD_MAX);
	FUZZ_CHECK(memcmp(data + m.head_len - 4, "\r\n\r\n", 4) == 0);
	FUZZ_CHECK(!(m.chunked && m.length));
	FUZZ_CHECK(m.host_off + m.host_len <= m.head_len);
	struct net_http_msg p;
	FUZZ_CHECK(net_http_msg_scan((const char *)data, m.head_len - 1, &p, &why) != 1);
	follow(data + m.head_len, size - m.head_len, &m);
	return 0;
}
