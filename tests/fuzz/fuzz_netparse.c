/* The network proxy's parsers (src/net/netparse.c) and the --net policy
 * (src/net/netpolicy.c). The first byte picks what the rest is: 0 an HTTP
 * request head, 1 a SOCKS5 greeting and request, 3 a request target whose
 * path netrule.c normalises, else a --net value whose rules then judge a
 * few names, addresses and requests (methods, paths, a body on GET by a
 * "GET+body" rule). What they accept
 * must keep its promises: a head is complete only once, the rewritten head
 * names the checked host once and carries no proxy header, ports are in
 * range, a normalised path starts with '/' and has no '//', '.' or '..'
 * segment, no query. */
#include <string.h>

#include "fuzz.h"
#include "net/netparse.h"
#include "net/netpolicy.h"

static void http(const char *b, size_t n)
{
	struct net_request r;
	int rc = net_http_parse(b, n, &r);
	if (rc == 1) {
		FUZZ_CHECK(r.used <= n && r.used >= 4 &&
			   memcmp(b + r.used - 4, "\r\n\r\n", 4) == 0);
		FUZZ_CHECK(r.target.port >= 1 && r.target.port <= 65535 && r.target.host[0]);
		/* a prefix without the end is never complete */
		struct net_request p;
		FUZZ_CHECK(net_http_parse(b, r.used - 1, &p) != 1);
		net_request_clear(&p);
		if (r.kind == NET_REQ_HTTP) {
			FUZZ_CHECK(r.head && strlen(r.head) == r.head_len);
			char *end = strstr(r.head, "\r\n\r\n");
			FUZZ_CHECK(end && (size_t)(end - r.head) + 4 == r.head_len);
			char *host = strstr(r.head, "\r\nHost: ");
			FUZZ_CHECK(host && !strstr(host + 1, "\r\nHost: "));
			FUZZ_CHECK(!strstr(r.head, "\r\nProxy-Authorization:"));
			FUZZ_CHECK(strstr(r.head, "\r\nConnection: close\r\n"));
		} else {
			FUZZ_CHECK(!r.head);
		}
	} else {
		FUZZ_CHECK(rc <= 0 && !r.head);
		FUZZ_CHECK(rc == 0 || r.why);
	}
	net_request_clear(&r);
}

static void socks(const uint8_t *b, size_t n)
{
	size_t used = 0;
	int rc = net_socks_greeting(b, n, &used);
	if (rc != 1)
		return;
	FUZZ_CHECK(used >= 3 && used <= n);
	struct net_request r;
	rc = net_socks_request(b + used, n - used, &r);
	if (rc == 1) {
		FUZZ_CHECK(r.used <= n - used && r.target.port >= 1 && r.target.port <= 65535);
		FUZZ_CHECK(strlen(r.target.host) > 0 && strlen(r.target.host) <= NET_HOST_MAX);
	}
	net_request_clear(&r);
}

static void path(const char *s, size_t n)
{
	char out[NET_PATH_MAX + 1];
	if (netrule_path(s, n, out, sizeof(out)))
		return;
	FUZZ_CHECK(out[0] == '/' && strlen(out) < sizeof(out));
	FUZZ_CHECK(!strstr(out, "//") && !strstr(out, "/./") && !strstr(out, "/../") &&
		   !strchr(out, '?'));
	size_t l = strlen(out);
	FUZZ_CHECK(!(l >= 2 && strcmp(out + l - 2, "/.") == 0) &&
		   !(l >= 3 && strcmp(out + l - 3, "/..") == 0));
}

static void policy(const char *s)
{
	struct net_policy p;
	netpolicy_init(&p);
	struct ab_error err = {0};
	if (netpolicy_add(&p, s, &err) < 0) {
		FUZZ_CHECK(err.msg[0] && p.n == 0);
	} else {
		static const char *const hosts[] = {"example.org", "a.b.example.org",
						    "127.0.0.1",   "::1",
						    "10.1.2.3",	   "::ffff:169.254.169.254"};
		for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
			struct net_target t;
			FUZZ_CHECK(net_target_set(&t, hosts[i], strlen(hosts[i]), 443) == 0);
			(void)netpolicy_check_name(&p, &t);
			if (t.is_addr)
				(void)netpolicy_check_addr(&p, t.addr, t.port, false, NULL, 0);
			static const char *const heads[] = {"GET /repos/acme/x?y HTTP/1.1\r\n\r\n",
							    "POST /a/../b HTTP/1.1\r\n\r\n",
							    "PROPFIND / HTTP/1.1\r\n\r\n", "GET"};
			for (size_t j = 0; j < sizeof(heads) / sizeof(heads[0]); j++) {
				char why[200];
				const char *w = netpolicy_check_head(
					&p, &t, heads[j], strlen(heads[j]), why, sizeof(why));
				FUZZ_CHECK(!w || (w == why && why[0]));
				/* no method/path rule: nothing is read, all is allowed */
				FUZZ_CHECK(w == NULL || netpolicy_restricted(&p, &t));
				/* a body on GET: allowed by a GET+body rule, or why not */
				w = netpolicy_check_body(&p, &t, heads[j], strlen(heads[j]), why,
							 sizeof(why));
				FUZZ_CHECK(!w || (w == why && why[0]));
			}
		}
		for (size_t i = 0; i < p.n; i++) {
			FUZZ_CHECK(!p.r[i].path[0] || p.r[i].path[0] == '/');
			FUZZ_CHECK((p.r[i].body_methods & ~p.r[i].methods) == 0);
		}
	}
	netpolicy_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 70000)
		return 0;
	char *s = malloc(size);
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	if (data[0] == 0)
		http(s, size - 1);
	else if (data[0] == 1)
		socks(data + 1, size - 1);
	else if (data[0] == 3)
		path(s, size - 1);
	else
		policy(s);
	free(s);
	return 0;
}
