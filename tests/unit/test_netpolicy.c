/* The --net allow=/deny= policy (src/net/netpolicy.c) and the proxy's request
 * parsers (src/net/netparse.c): what a pattern matches, which addresses a name
 * may never reach, and how requests are read and rewritten. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/netparse.h"
#include "net/netpolicy.h"

static struct net_policy pol;

static void with(const char *const *specs)
{
	netpolicy_init(&pol);
	struct ab_error err = {0};
	for (; *specs; specs++)
		cr_assert_eq(netpolicy_add(&pol, *specs, &err), 0, "%s: %s", *specs, err.msg);
}

static void done(void)
{
	netpolicy_free(&pol);
}

/* NULL when allowed, else why not: the name's check, then its address */
static const char *judge(const char *host, unsigned port, const char *addr)
{
	struct net_target t;
	cr_assert_eq(net_target_set(&t, host, strlen(host), port), 0, "%s", host);
	const char *why = netpolicy_check_name(&pol, &t);
	if (why)
		return why;
	struct net_target a;
	cr_assert_eq(net_target_set(&a, addr, strlen(addr), port), 0, "%s", addr);
	cr_assert(a.is_addr);
	static const uint8_t self[1][16] = {
		{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7}};
	return netpolicy_check_addr(&pol, a.addr, port, !t.is_addr, self, 1);
}

#define ALLOWED(h, p, a) cr_assert_null(judge(h, p, a), "%s:%u at %s", h, p, a)
#define DENIED(h, p, a, what)                                                                      \
	do {                                                                                       \
		const char *w = judge(h, p, a);                                                    \
		cr_assert(w &&strstr(w, what), "%s:%u at %s: %s", h, p, a, w ? w : "allowed");     \
	} while (0)

Test(netpolicy, names_wildcards_and_default_ports, .fini = done)
{
	with((const char *const[]){"allow=pypi.org,*.pythonhosted.org:443,Git.Example.ORG.:*",
				   NULL});
	ALLOWED("pypi.org", 443, "151.101.0.223");
	ALLOWED("PyPI.org.", 80, "151.101.0.223");
	DENIED("pypi.org", 8080, "151.101.0.223", "not allowed");
	DENIED("www.pypi.org", 443, "151.101.0.223", "not allowed");
	ALLOWED("files.pythonhosted.org", 443, "151.101.0.223");
	ALLOWED("a.b.pythonhosted.org", 443, "151.101.0.223");
	DENIED("pythonhosted.org", 443, "151.101.0.223", "not allowed"); /* subdomains only */
	DENIED("evilpythonhosted.org", 443, "151.101.0.223", "not allowed");
	DENIED("files.pythonhosted.org", 80, "151.101.0.223", "not allowed");
	ALLOWED("git.example.org", 9418, "93.184.216.34");
	/* an address literal needs an address rule */
	DENIED("151.101.0.223", 443, "151.101.0.223", "not allowed");
}

Test(netpolicy, special_addresses_need_an_address_rule, .fini = done)
{
	with((const char *const[]){"allow=*:*,10.1.0.0/16:5432,[fd00::1]:*,0.0.0.0/0,::/0", NULL});
	DENIED("db.internal", 5432, "127.0.0.1", "loopback");
	DENIED("db.internal", 5432, "10.2.0.1", "private");
	ALLOWED("db.internal", 5432, "10.1.200.3");
	DENIED("db.internal", 5433, "10.1.200.3", "private");
	DENIED("x.org", 80, "169.254.169.254", "link-local");
	DENIED("x.org", 80, "100.100.100.200", "CGNAT");
	DENIED("x.org", 80, "172.31.255.255", "private");
	ALLOWED("x.org", 80, "172.32.0.1");
	DENIED("x.org", 80, "192.168.1.1", "private");
	DENIED("x.org", 80, "fe80::1", "link-local");
	DENIED("x.org", 80, "fd00::2", "private");
	ALLOWED("x.org", 80, "fd00::1");
	DENIED("x.org", 80, "::1", "loopback");
	DENIED("x.org", 80, "::ffff:127.0.0.1", "loopback");
	DENIED("x.org", 80, "64:ff9b::a9fe:a9fe", "link-local"); /* NAT64 of 169.254.169.254 */
	DENIED("x.org", 80, "2002:7f00:1::", "loopback");	 /* 6to4 of 127.0.0.1 */
	DENIED("x.org", 80, "0.0.0.0", "unspecified");
	DENIED("x.org", 80, "::", "unspecified");
	DENIED("x.org", 80, "224.0.0.1", "multicast");
	DENIED("x.org", 80, "192.0.2.7", "the host itself");
	ALLOWED("x.org", 80, "93.184.216.34");
	ALLOWED("93.184.216.34", 80, "93.184.216.34"); /* by 0.0.0.0/0 */
}

Test(netpolicy, deny_wins, .fini = done)
{
	with((const char *const[]){"allow=*.example.org,127.0.0.1:8000", "deny=bad.example.org",
				   "deny=127.0.0.0/8:8000,93.184.0.0/16", NULL});
	DENIED("bad.example.org", 443, "1.2.3.4", "deny");
	DENIED("bad.example.org", 1234, "1.2.3.4", "deny"); /* deny: every port */
	ALLOWED("good.example.org", 443, "1.2.3.4");
	DENIED("good.example.org", 443, "93.184.216.34", "deny");
	DENIED("127.0.0.1", 8000, "127.0.0.1", "deny");
}

Test(netpolicy, bad_patterns)
{
	static const char *const bad[] = {
		"allow=",	    "allow=a..b",	 "allow=-",
		"allow=x.org:0",    "allow=x.org:65536", "allow=x.org:",
		"allow=10.1.0.0/8", "allow=1.2.3.4/33",	 "allow=[::1",
		"allow=[1.2.3.4]",  "allow=*.*.org",	 "allow=a b",
		"allow=1.2.3",	    "allow=x.org:80:80", "max-conns=0",
		"max-conns=5000",   "rate=10",		 "rate=fast",
		"both=x",	    "allow=,",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct net_policy p;
		netpolicy_init(&p);
		struct ab_error err = {0};
		cr_expect_lt(netpolicy_add(&p, bad[i], &err), 0, "%s", bad[i]);
		cr_expect_eq(p.n, 0, "%s", bad[i]);
		cr_expect(err.msg[0], "%s", bad[i]);
		netpolicy_free(&p);
	}
}

Test(netparse, http_rewrites_to_what_was_checked)
{
	static const char req[] = "GET http://Example.org:8080/a?b HTTP/1.1\r\nHost: evil\r\n"
				  "Proxy-Authorization: x\r\nAccept: */*\r\nConnection: "
				  "keep-alive\r\n\r\nBODY";
	struct net_request r;
	cr_assert_eq(net_http_parse(req, sizeof(req) - 1, &r), 1, "%s", r.why);
	cr_assert_eq(r.kind, NET_REQ_HTTP);
	cr_assert_str_eq(r.target.host, "example.org");
	cr_assert_eq(r.target.port, 8080);
	cr_assert_eq(r.used, sizeof(req) - 1 - 4);
	cr_assert_str_eq(r.head, "GET /a?b HTTP/1.1\r\nAccept: */*\r\nHost: example.org:8080\r\n"
				 "Connection: close\r\n\r\n");
	net_request_clear(&r);
	static const char conn[] = "CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n";
	cr_assert_eq(net_http_parse(conn, sizeof(conn) - 1, &r), 1);
	cr_assert_eq(r.kind, NET_REQ_CONNECT);
	cr_assert_str_eq(r.target.host, "2001:db8::1");
	cr_assert(r.target.is_addr);
	cr_assert_eq(net_http_parse(conn, sizeof(conn) - 3, &r), 0);
	net_request_clear(&r);
}

Test(netparse, socks5)
{
	static const uint8_t greet[] = {5, 2, 2, 0};
	size_t used;
	cr_assert_eq(net_socks_greeting(greet, 4, &used), 1);
	cr_assert_eq(used, 4);
	cr_assert_eq(net_socks_greeting(greet, 3, &used), 0);
	static const uint8_t auth_only[] = {5, 1, 2};
	cr_assert_eq(net_socks_greeting(auth_only, 3, &used), -ENOTSUP);
	static const uint8_t name[] = {5,   1,	 0,   3,   8,	'p', 'y', 'p',
				       'i', '.', 'o', 'r', 'g', 1,   187};
	struct net_request r;
	cr_assert_eq(net_socks_request(name, sizeof(name), &r), 1);
	cr_assert_str_eq(r.target.host, "pypi.org");
	cr_assert_eq(r.target.port, 443);
	cr_assert_eq(net_socks_request(name, sizeof(name) - 1, &r), 0);
	static const uint8_t bind[] = {5, 2, 0, 1, 127, 0, 0, 1, 0, 80};
	cr_assert_eq(net_socks_request(bind, sizeof(bind), &r), -ENOTSUP);
	static const uint8_t nul[] = {5, 1, 0, 3, 3, 'a', 0, 'b', 0, 80};
	cr_assert_eq(net_socks_request(nul, sizeof(nul), &r), -EINVAL);
}

Test(netpolicy, options_and_profiles)
{
	struct ab_config cfg;
	struct ab_error err = {0};
	bool help = false;
	ab_config_init(&cfg);
	char *argv[] = {"run",	       "--net",		"allow=pypi.org:443",
			"--net",       "deny=evil.org", "--net",
			"max-conns=3", "true",		NULL};
	cr_assert_eq(ab_config_parse_run(&cfg, 8, argv, &help, &err), 0, "%s", err.msg);
	cr_assert_eq(cfg.net, AB_NET_PROXY);
	cr_assert_eq(cfg.n_net_rules, 3);
	cr_assert_str_eq(cfg.net_rules[1], "deny=evil.org");
	ab_config_free(&cfg);

	char path[] = "/tmp/agentbox-netprofile-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	static const char prof[] = "{\"net\": \"allow=*.pythonhosted.org,pypi.org\"}\n";
	cr_assert_eq(write(fd, prof, sizeof(prof) - 1), (ssize_t)sizeof(prof) - 1);
	close(fd);
	ab_config_init(&cfg);
	char *argv2[] = {"run", "--profile", path, "--net", "deny=pypi.org", "true", NULL};
	int r = ab_config_parse_run(&cfg, 6, argv2, &help, &err);
	unlink(path);
	cr_assert_eq(r, 0, "%s", err.msg);
	cr_assert_eq(cfg.net, AB_NET_PROXY);
	cr_assert_eq(cfg.n_net_rules, 2);
	cr_assert_str_eq(cfg.net_rules[0], "allow=*.pythonhosted.org,pypi.org");
	ab_config_free(&cfg);

	ab_config_init(&cfg);
	char *argv3[] = {"run", "--net", "allow=pypi.org,bad..org", "true", NULL};
	cr_assert_lt(ab_config_parse_run(&cfg, 4, argv3, &help, &err), 0);
	cr_assert(strstr(err.msg, "'bad..org'"), "%s", err.msg);
	ab_config_free(&cfg);
}

/* "GET,HEAD:host/path": NULL when the request head is allowed */
static const char *req(const char *host, unsigned port, const char *head)
{
	static char why[300];
	struct net_target t;
	cr_assert_eq(net_target_set(&t, host, strlen(host), port), 0, "%s", host);
	return netpolicy_check_head(&pol, &t, head, strlen(head), why, sizeof(why));
}

Test(netpolicy, methods_and_paths, .fini = done)
{
	with((const char *const[]){"allow=GET,HEAD:api.github.com/repos/acme/*,x.org",
				   "allow=POST:api.github.com:443/graphql,x.org/a", NULL});
	cr_assert_null(req("api.github.com", 443, "GET /repos/acme/x/y?z HTTP/1.1\r\n\r\n"));
	cr_assert_null(req("api.github.com", 443, "HEAD /repos/acme/x HTTP/1.1\r\n\r\n"));
	cr_assert_null(req("api.github.com", 443, "POST /graphql HTTP/1.1\r\n\r\n"));
	cr_assert_null(req("api.github.com", 443, "POST /graphql/ HTTP/1.1\r\n\r\n"));
	cr_assert_not_null(req("api.github.com", 443, "POST /graphqlx HTTP/1.1\r\n\r\n"));
	cr_assert_not_null(req("api.github.com", 443, "POST /repos/acme/x HTTP/1.1\r\n\r\n"));
	cr_assert_not_null(req("api.github.com", 443, "GET /repos/acme HTTP/1.1\r\n\r\n"));
	cr_assert_not_null(req("api.github.com", 443, "GET /repos/acme/../b HTTP/1.1\r\n\r\n"));
	cr_assert_not_null(req("api.github.com", 443, "GET /repos/acme/%2e%2E/x HTTP/1.1\r\n\r\n"));
	cr_assert_null(req("api.github.com", 443, "GET /repos/x/%2e%2E/acme/y HTTP/1.1\r\n\r\n"));
	cr_assert_null(req("api.github.com", 443, "GET //repos/./acme//x HTTP/1.1\r\n\r\n"));
	cr_assert_not_null(req("api.github.com", 443, "GET /repos/acme%2fx HTTP/1.1\r\n\r\n"));
	cr_assert_not_null(req("api.github.com", 443, "GET /.. HTTP/1.1\r\n\r\n"));
	cr_assert_not_null(req("api.github.com", 443, "GET /repos/acme/%zz HTTP/1.1\r\n\r\n"));
	/* a host-only rule for the host: everything; no rule by method or
	 * path for the host (x.org:80 has none): nothing is checked */
	cr_assert_null(req("x.org", 443, "DELETE /anything HTTP/1.1\r\n\r\n"));
	cr_assert(netpolicy_restricted(
		&pol, &(struct net_target){.host = "api.github.com", .port = 443}));
	cr_assert_not(
		netpolicy_restricted(&pol, &(struct net_target){.host = "x.org", .port = 443}));
	char out[NET_PATH_MAX + 1];
	cr_assert_null(netrule_path("/a/./b/../c//d/.?x/../", 22, out, sizeof(out)));
	cr_assert_str_eq(out, "/a/c/d/");
	cr_assert_null(netrule_path("/a/%62/..", 9, out, sizeof(out)));
	cr_assert_str_eq(out, "/a/");
}

/* "GET+body:host/path": a body on a method that has none, per rule */
static const char *body(const char *host, const char *head)
{
	static char why[300];
	struct net_target t;
	cr_assert_eq(net_target_set(&t, host, strlen(host), 443), 0, "%s", host);
	return netpolicy_check_body(&pol, &t, head, strlen(head), why, sizeof(why));
}

Test(netpolicy, a_body_on_get_by_rule, .fini = done)
{
	with((const char *const[]){"allow=GET+body,HEAD:es.example/_search,GET:es.example/",
				   "allow=x.org,DELETE+body:y.org/items/*", NULL});
	cr_assert_null(body("es.example", "GET /_search/x HTTP/1.1\r\n\r\n"));
	cr_assert_null(req("es.example", 443, "GET /_search HTTP/1.1\r\n\r\n"));
	cr_assert_null(req("es.example", 443, "HEAD /_search HTTP/1.1\r\n\r\n"));
	const char *why = body("es.example", "GET /other HTTP/1.1\r\n\r\n");
	cr_assert(why && strstr(why, "a body on GET is refused"), "%s", why);
	cr_assert(why && strstr(why, "GET+body:HOST/PATH"), "%s", why);
	cr_assert_not_null(body("es.example", "HEAD /_search HTTP/1.1\r\n\r\n"));
	why = body("es.example", "TRACE /_search HTTP/1.1\r\n\r\n");
	cr_assert(why && strstr(why, "a body on TRACE is refused") && !strstr(why, "+body"), "%s",
		  why);
	/* a host-only rule allows every method, never a body on GET */
	cr_assert_not_null(body("x.org", "GET / HTTP/1.1\r\n\r\n"));
	cr_assert_null(body("y.org", "DELETE /items/3 HTTP/1.1\r\n\r\n"));
	cr_assert_not_null(body("y.org", "DELETE /other HTTP/1.1\r\n\r\n"));
	struct ab_error err = {0};
	struct net_policy p;
	netpolicy_init(&p);
	cr_assert_lt(netpolicy_add(&p, "allow=GET+bod:x.org/a", &err), 0);
	cr_assert_lt(netpolicy_add(&p, "allow=+body:x.org/a", &err), 0);
	netpolicy_free(&p);
}
