/* The egress policy: patterns from --net allow=/deny=, and the address
 * classes a name may never reach unless an address rule names them
 * (docs/network.md, "Policy"). Deny wins over allow; names are matched
 * before any lookup so that a name nobody allowed is never resolved (no
 * DNS exfiltration through the proxy); every address is checked as it is
 * connected to, so a name that re-resolves elsewhere (DNS rebinding) is
 * caught where it matters. */
#include "net/netpolicy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

void netpolicy_init(struct net_policy *p)
{
	memset(p, 0, sizeof(*p));
	p->max_conns = NET_DEFAULT_MAX_CONNS;
}

void netpolicy_free(struct net_policy *p)
{
	free(p->r);
	p->r = NULL;
	p->n = 0;
}

bool netpolicy_is_spec(const char *s)
{
	return strncmp(s, "allow=", 6) == 0 || strncmp(s, "deny=", 5) == 0 ||
	       strncmp(s, "max-conns=", 10) == 0 || strncmp(s, "rate=", 5) == 0 ||
	       strncmp(s, "secret=", 7) == 0 || strncmp(s, "ca=", 3) == 0;
}

static void map_v4(const struct in_addr *a, uint8_t out[16])
{
	memset(out, 0, 10);
	out[10] = out[11] = 0xff;
	memcpy(out + 12, a, 4);
}

static bool is_v4(const uint8_t a[16])
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(a, prefix, 12) == 0;
}

static bool prefix_match(const uint8_t a[16], const uint8_t net[16], unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;
	if (memcmp(a, net, whole) != 0)
		return false;
	if (!rest)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[whole] & mask) == (net[whole] & mask);
}

/* "1.2.3.4", "::1": true with the 16-byte form. */
static bool parse_addr(const char *s, uint8_t out[16], bool *v4)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET, s, &a4) == 1) {
		map_v4(&a4, out);
		*v4 = true;
		return true;
	}
	if (inet_pton(AF_INET6, s, &a6) == 1) {
		memcpy(out, &a6, 16);
		*v4 = is_v4(out);
		return true;
	}
	return false;
}

void net_addr_format(const uint8_t a[16], char *buf, size_t len)
{
	char tmp[INET6_ADDRSTRLEN] = "?";
	if (is_v4(a))
		inet_ntop(AF_INET, a + 12, tmp, sizeof(tmp));
	else
		inet_ntop(AF_INET6, a, tmp, sizeof(tmp));
	snprintf(buf, len, "%s", tmp);
}

int net_addr_from_sockaddr(const struct sockaddr *sa, uint8_t out[16], unsigned *port)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		map_v4(&in->sin_addr, out);
		*port = ntohs(in->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		memcpy(out, &in6->sin6_addr, 16);
		*port = ntohs(in6->sin6_port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

/* Letters, digits, '-', '_' in labels of 1-63 that do not start or end
 * with '-', at most 253 in all. */
static bool valid_name(const char *s, size_t n)
{
	if (n == 0 || n > NET_HOST_MAX || s[0] == '-' || s[n - 1] == '-')
		return false;
	size_t label = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '.') {
			if (label == 0 || s[i - 1] == '-' || (i + 1 < n && s[i + 1] == '-'))
				return false;
			label = 0;
		} else if (isalnum(c) || c == '-' || c == '_') {
			if (++label > 63)
				return false;
		} else {
			return false;
		}
	}
	return label > 0;
}

int net_target_set(struct net_target *t, const char *host, size_t len, unsigned port)
{
	memset(t, 0, sizeof(*t));
	t->port = port;
	if (len && host[0] == '[' && host[len - 1] == ']') {
		host++;
		len -= 2;
	}
	if (len > 1 && host[len - 1] == '.')
		len--; /* "example.org." is example.org */
	if (len == 0 || len > NET_HOST_MAX || port == 0 || port > 65535)
		return -EINVAL;
	memcpy(t->host, host, len);
	t->host[len] = '\0';
	bool v4;
	if (parse_addr(t->host, t->addr, &v4)) {
		t->is_addr = true;
		net_addr_format(t->addr, t->host, sizeof(t->host));
		return 0;
	}
	if (!valid_name(t->host, len))
		return -EINVAL;
	/* all digits and dots, but not an address: "1.2.3" is refused, not
	 * handed to a resolver that reads it as 1.2.0.3 */
	if (strspn(t->host, "0123456789.") == len)
		return -EINVAL;
	for (char *c = t->host; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	return 0;
}

static int parse_port(const char *s, struct net_rule *r)
{
	if (strcmp(s, "*") == 0) {
		r->any_port = true;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (!isdigit((unsigned char)*s) || *end || errno || v == 0 || v > 65535)
		return -EINVAL;
	r->port = (unsigned)v;
	return 0;
}

/* "a.b.c.d[/n]" or "v6[/n]" into r; false if it is not one. */
static bool parse_cidr(char *s, struct net_rule *r)
{
	char *slash = strchr(s, '/');
	if (slash)
		*slash = '\0';
	bool v4;
	if (!parse_addr(s, r->addr, &v4))
		return false;
	r->is_addr = true;
	r->prefix = 128;
	if (slash) {
		char *end;
		unsigned long bits = strtoul(slash + 1, &end, 10);
		if (!isdigit((unsigned char)slash[1]) || *end || bits > (v4 ? 32u : 128u))
			return false;
		r->prefix = (unsigned)bits + (v4 ? 96 : 0);
		/* the address must be the network's: 10.1.0.0/8 is a typo */
		uint8_t net[16];
		memcpy(net, r->addr, 16);
		for (unsigned b = r->prefix; b < 128; b++)
			net[b / 8] &= (uint8_t) ~(0x80 >> (b % 8));
		if (memcmp(net, r->addr, 16) != 0)
			return false;
	}
	return true;
}

static int parse_pattern(const char *pat, bool deny, bool host_only, struct net_rule *r,
			 const char **why)
{
	char buf[NET_HOST_MAX + NET_PATH_MAX + 96];
	memset(r, 0, sizeof(*r));
	r->deny = deny;
	if (strlen(pat) >= sizeof(buf) || !*pat)
		return -EINVAL;
	strcpy(buf, pat);
	if ((*why = netrule_split(buf, host_only, r)))
		return -EINVAL;
	if (strlen(buf) >= NET_HOST_MAX + 64)
		return -EINVAL;
	char *host = buf, *port = NULL;
	if (buf[0] == '[') {
		char *close = strchr(buf, ']');
		if (!close || (close[1] && close[1] != ':'))
			return -EINVAL;
		*close = '\0';
		host = buf + 1;
		port = close[1] ? close + 2 : NULL;
		if (!parse_cidr(host, r) || is_v4(r->addr))
			return -EINVAL;
	} else if (strchr(buf, ':') != strrchr(buf, ':')) {
		if (!parse_cidr(host, r)) /* a bare IPv6 address or CIDR, no port */
			return -EINVAL;
	} else {
		char *colon = strchr(buf, ':');
		if (colon) {
			*colon = '\0';
			port = colon + 1;
		}
		if (!parse_cidr(host, r)) {
			if (strcmp(host, "*") == 0) {
				r->any_name = true;
			} else {
				if (strncmp(host, "*.", 2) == 0) {
					r->wildcard = true;
					host += 2;
				}
				struct net_target t;
				if (net_target_set(&t, host, strlen(host), 1) < 0 || t.is_addr)
					return -EINVAL;
				snprintf(r->host, sizeof(r->host), "%s", t.host);
			}
		}
	}
	if (port && parse_port(port, r) < 0)
		return -EINVAL;
	return 0;
}

static int add_rules(struct net_policy *p, const char *list, bool deny, const char *opt,
		     struct ab_error *err)
{
	char *copy = strdup(list);
	if (!copy)
		return ab_error_set(err, ENOMEM, "--net %s", opt);
	int r = 0;
	size_t before = p->n; /* all or nothing */
	for (char *pat = copy, *next; pat && r == 0; pat = next) {
		/* "GET,HEAD:host": a method list's ',' does not end a pattern */
		char *seg = pat, *c;
		while ((c = strchr(seg, ',')) && netrule_is_method(seg, (size_t)(c - seg)))
			seg = c + 1;
		next = c ? c + 1 : NULL;
		if (c)
			*c = '\0';
		if (!*pat)
			continue;
		struct net_rule rule;
		const char *why = NULL;
		if (netrule_is_method(pat, strlen(pat)) ||
		    strrchr(pat, ',') == pat + strlen(pat) - 1)
			why = "methods without a host";
		if (why || parse_pattern(pat, deny, strcmp(opt, "allow") != 0, &rule, &why) < 0) {
			if (why)
				r = ab_error_plain(err, EINVAL, "--net %s: '%s': %s", opt, pat,
						   why);
			else
				r = ab_error_plain(
					err, EINVAL,
					"--net %s: '%s' is not a host name (with an optional "
					"'*.' in front), an IP address or CIDR, with an optional "
					":PORT or :* (allow= takes METHOD,...: before and /PATH "
					"after too)",
					opt, pat);
			break;
		}
		struct net_rule *v = realloc(p->r, (p->n + 1) * sizeof(*v));
		if (!v) {
			r = ab_error_set(err, ENOMEM, "--net %s", opt);
			break;
		}
		p->r = v;
		p->r[p->n++] = rule;
	}
	free(copy);
	if (r == 0 && p->n == before)
		r = ab_error_plain(err, EINVAL, "--net %s=%s: no pattern given", opt, list);
	if (r < 0)
		p->n = before;
	return r;
}

static int add_secret(struct net_policy *p, const char *spec, struct ab_error *err);

int netpolicy_add(struct net_policy *p, const char *spec, struct ab_error *err)
{
	if (strncmp(spec, "allow=", 6) == 0)
		return add_rules(p, spec + 6, false, "allow", err);
	if (strncmp(spec, "deny=", 5) == 0)
		return add_rules(p, spec + 5, true, "deny", err);
	if (strncmp(spec, "max-conns=", 10) == 0) {
		char *end;
		unsigned long v = strtoul(spec + 10, &end, 10);
		if (!isdigit((unsigned char)spec[10]) || *end || v == 0 || v > 4096)
			return ab_error_plain(
				err, EINVAL, "--net max-conns: '%s' is not a number from 1 to 4096",
				spec + 10);
		p->max_conns = (unsigned)v;
		return 0;
	}
	if (strncmp(spec, "rate=", 5) == 0) {
		unsigned long long v;
		if (strcmp(spec + 5, "none") == 0)
			v = 0;
		else if (ab_parse_size(spec + 5, &v) < 0 || v < 1024)
			return ab_error_plain(err, EINVAL,
					      "--net rate: '%s' is not a size of at least 1K "
					      "(bytes per second) or none",
					      spec + 5);
		p->rate = v;
		return 0;
	}
	if (strncmp(spec, "secret=", 7) == 0)
		return add_secret(p, spec + 7, err);
	if (strncmp(spec, "ca=", 3) == 0) {
		if (!spec[3])
			return ab_error_plain(err, EINVAL, "--net ca=: give the file of the CAs");
		return 0;
	}
	return ab_error_plain(err, EINVAL,
			      "--net: '%s' is not one of none, host, allow=PATTERN[,...], "
			      "deny=PATTERN[,...], max-conns=N, rate=SIZE, "
			      "secret=NAME@PATTERN[,...], ca=FILE",
			      spec);
}

size_t netpolicy_secret_name(const char *spec)
{
	size_t n = 0;
	if (!isalpha((unsigned char)spec[0]) && spec[0] != '_')
		return 0;
	while (isalnum((unsigned char)spec[n]) || spec[n] == '_')
		n++;
	return spec[n] == '@' && n <= 128 ? n : 0;
}

/* secret=NAME@PATTERN[,...]: the patterns are allow patterns too */
static int add_secret(struct net_policy *p, const char *spec, struct ab_error *err)
{
	size_t n = netpolicy_secret_name(spec);
	if (!n)
		return ab_error_plain(
			err, EINVAL,
			"--net secret=%s: expected NAME@PATTERN[,PATTERN...], NAME an "
			"environment variable's name (letters, digits, _)",
			spec);
	if (!spec[n + 1])
		return ab_error_plain(err, EINVAL,
				      "--net secret=%s: no host pattern after '@' (say where %.*s "
				      "may go)",
				      spec, (int)n, spec);
	return add_rules(p, spec + n + 1, false, "secret", err);
}

/* ---- decisions ---- */

static bool port_match(const struct net_rule *r, unsigned port)
{
	if (r->any_port)
		return true;
	if (r->port)
		return r->port == port;
	/* a deny rule without a port denies every port */
	return r->deny || port == 80 || port == 443;
}

static bool addr_rule_match(const struct net_rule *r, const uint8_t a[16], unsigned port,
			    bool deny);
static bool name_match(const struct net_rule *r, const char *host);

bool net_rule_names(const struct net_rule *r, const struct net_target *t)
{
	if (r->deny || !port_match(r, t->port))
		return false;
	return t->is_addr ? addr_rule_match(r, t->addr, t->port, false) : name_match(r, t->host);
}

static bool name_match(const struct net_rule *r, const char *host)
{
	if (r->is_addr)
		return false;
	if (r->any_name)
		return true;
	if (!r->wildcard)
		return strcmp(r->host, host) == 0;
	size_t hl = strlen(host), rl = strlen(r->host);
	return hl > rl + 1 && host[hl - rl - 1] == '.' && strcmp(host + hl - rl, r->host) == 0;
}

const char *netpolicy_check_name(const struct net_policy *p, const struct net_target *t)
{
	if (t->is_addr)
		return NULL; /* judged by address alone */
	for (size_t i = 0; i < p->n; i++)
		if (p->r[i].deny && name_match(&p->r[i], t->host) && port_match(&p->r[i], t->port))
			return "denied by --net deny";
	for (size_t i = 0; i < p->n; i++)
		if (!p->r[i].deny && name_match(&p->r[i], t->host) && port_match(&p->r[i], t->port))
			return NULL;
	return "not allowed by --net allow";
}

/* Address classes no name reaches; an allow rule reaches one only by
 * naming it or a range inside it (allow=0.0.0.0/0 is not enough). */
struct special {
	uint8_t net[16];
	unsigned prefix;
	const char *what;
	bool never; /* not even by address */
};

#define V4(a, b, c, d)                                                                             \
	{                                                                                          \
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d                               \
	}
static const struct special specials[] = {
	{V4(0, 0, 0, 0), 96 + 8, "an unspecified address", true},
	{V4(127, 0, 0, 0), 96 + 8, "a loopback address", false},
	{V4(10, 0, 0, 0), 96 + 8, "a private address", false},
	{V4(172, 16, 0, 0), 96 + 12, "a private address", false},
	{V4(192, 168, 0, 0), 96 + 16, "a private address", false},
	{V4(100, 64, 0, 0), 96 + 10, "a shared (CGNAT) address", false},
	{V4(169, 254, 0, 0), 96 + 16, "a link-local (cloud metadata) address", false},
	{V4(192, 0, 0, 0), 96 + 24, "a reserved address", false},
	{V4(198, 18, 0, 0), 96 + 15, "a reserved address", false},
	{V4(224, 0, 0, 0), 96 + 4, "a multicast address", true},
	{V4(240, 0, 0, 0), 96 + 4, "a reserved address", true},
	{{0}, 128, "an unspecified address", true},
	{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, "a loopback address", false},
	{{0}, 96, "a reserved address", true}, /* IPv4-compatible */
	{{0xfc}, 7, "a private (unique local) address", false},
	{{0xfe, 0x80}, 10, "a link-local address", false},
	{{0xfe, 0xc0}, 10, "a site-local address", false},
	{{0xff}, 8, "a multicast address", true},
};
#undef V4

static const struct special *classify(const uint8_t a[16])
{
	for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++)
		if (prefix_match(a, specials[i].net, specials[i].prefix))
			return &specials[i];
	return NULL;
}

/* NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address a
 * gateway may turn into a connection to it: judge that address too. */
static bool embedded_v4(const uint8_t a[16], uint8_t out[16])
{
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
	struct in_addr v4;
	if (memcmp(a, nat64, 12) == 0)
		memcpy(&v4, a + 12, 4);
	else if (a[0] == 0x20 && a[1] == 0x02)
		memcpy(&v4, a + 2, 4);
	else
		return false;
	map_v4(&v4, out);
	return true;
}

static bool addr_rule_match(const struct net_rule *r, const uint8_t a[16], unsigned port, bool deny)
{
	return r->is_addr && r->deny == deny && port_match(r, port) &&
	       prefix_match(a, r->addr, r->prefix);
}

static const char *judge(const struct net_policy *p, const uint8_t a[16], unsigned port,
			 bool name_ok, const uint8_t (*self)[16], size_t n_self)
{
	for (size_t i = 0; i < p->n; i++)
		if (addr_rule_match(&p->r[i], a, port, true))
			return "denied by --net deny";
	const struct special *sp = classify(a);
	unsigned need = sp ? sp->prefix : 0;
	const char *what = sp ? sp->what : NULL;
	for (size_t i = 0; !sp && i < n_self; i++)
		if (memcmp(self[i], a, 16) == 0) {
			need = 128;
			what = "an address of the host itself";
		}
	if (sp && sp->never)
		return what;
	for (size_t i = 0; i < p->n; i++)
		if (addr_rule_match(&p->r[i], a, port, false) && p->r[i].prefix >= need)
			return NULL;
	if (what)
		return what;
	return name_ok ? NULL : "not allowed by --net allow";
}

bool netpolicy_matches(const struct net_policy *p, const struct net_target *t)
{
	for (size_t i = 0; i < p->n; i++) {
		const struct net_rule *r = &p->r[i];
		if (r->deny || !port_match(r, t->port))
			continue;
		if (t->is_addr ? addr_rule_match(r, t->addr, t->port, false)
			       : name_match(r, t->host))
			return true;
	}
	return false;
}

const char *netpolicy_check_addr(const struct net_policy *p, const uint8_t addr[16], unsigned port,
				 bool name_ok, const uint8_t (*self)[16], size_t n_self)
{
	const char *why = judge(p, addr, port, name_ok, self, n_self);
	uint8_t inner[16];
	if (!why && embedded_v4(addr, inner))
		why = judge(p, inner, port, true, self, n_self); /* its class only */
	return why;
}

int ab_net_option(struct ab_config *cfg, const char *arg, struct ab_error *err)
{
	struct net_policy p;
	netpolicy_init(&p);
	int r = netpolicy_add(&p, arg, err);
	netpolicy_free(&p);
	if (r < 0)
		return r;
	char **v = realloc(cfg->net_rules, (cfg->n_net_rules + 2) * sizeof(char *));
	if (!v)
		return ab_error_set(err, ENOMEM, "--net");
	cfg->net_rules = v;
	if (!(v[cfg->n_net_rules] = strdup(arg)))
		return ab_error_set(err, ENOMEM, "--net");
	v[++cfg->n_net_rules] = NULL;
	cfg->net = AB_NET_PROXY;
	return 0;
}

/* ---- method and path rules, per request (netrule.c has the rule's own) ---- */

bool netpolicy_restricted(const struct net_policy *p, const struct net_target *t)
{
	bool any = false;
	for (size_t i = 0; i < p->n; i++) {
		const struct net_rule *r = &p->r[i];
		if (r->deny || r->implicit || !net_rule_names(r, t))
			continue;
		if (!netrule_restricted(r))
			return false;
		any = true;
	}
	return any;
}

const char *netpolicy_check_request(const struct net_policy *p, const struct net_target *t,
				    const char *method, size_t mlen, const char *path)
{
	if (!netpolicy_restricted(p, t))
		return NULL;
	for (size_t i = 0; i < p->n; i++) {
		const struct net_rule *r = &p->r[i];
		if (!r->deny && !r->implicit && net_rule_names(r, t) &&
		    netrule_matches(r, method, mlen, path))
			return NULL;
	}
	return "no --net allow rule for the host allows the method and path";
}

/* head's method (*ml bytes) and target (*tl bytes) */
static const char *head_parts(const char *head, size_t len, size_t *ml, size_t *tl)
{
	*ml = 0;
	while (*ml < len && head[*ml] != ' ' && head[*ml] != '\r')
		(*ml)++;
	const char *target = head + *ml + (*ml < len);
	*tl = 0;
	while (target + *tl < head + len && target[*tl] != ' ' && target[*tl] != '\r')
		(*tl)++;
	return target;
}

const char *netpolicy_check_head(const struct net_policy *p, const struct net_target *t,
				 const char *head, size_t len, char *why, size_t wlen)
{
	if (!netpolicy_restricted(p, t))
		return NULL;
	size_t ml, tl;
	const char *target = head_parts(head, len, &ml, &tl);
	char path[NET_PATH_MAX + 1];
	const char *bad = netrule_path(target, tl, path, sizeof(path));
	if (!bad)
		bad = netpolicy_check_request(p, t, head, ml, path);
	if (!bad)
		return NULL;
	int pl = (int)(tl > 200 ? 200 : tl);
	/* the reason first: a report keeps its start */
	snprintf(why, wlen, "%s (%.*s %.*s)", bad, (int)(ml > 16 ? 16 : ml), head, pl, target);
	return why;
}

const char *netpolicy_check_body(const struct net_policy *p, const struct net_target *t,
				 const char *head, size_t len, char *why, size_t wlen)
{
	size_t ml, tl;
	const char *target = head_parts(head, len, &ml, &tl);
	char path[NET_PATH_MAX + 1];
	if (!netrule_path(target, tl, path, sizeof(path)))
		for (size_t i = 0; i < p->n; i++) {
			const struct net_rule *r = &p->r[i];
			if (!r->deny && !r->implicit && net_rule_names(r, t) &&
			    netrule_allows_body(r, head, ml, path))
				return NULL;
		}
	int m = (int)(ml > 16 ? 16 : ml);
	if (netrule_is_method(head, ml))
		snprintf(why, wlen,
			 "a body on %.*s is refused: a server may read it as another request (a "
			 "--net allow rule %.*s+body:HOST/PATH allows one)",
			 m, head, m, head);
	else
		snprintf(why, wlen,
			 "a body on %.*s is refused: a server may read it as another request", m,
			 head);
	return why;
}
