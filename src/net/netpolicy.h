/* The network egress policy of --net allow=/deny= (docs/network.md): which
 * host names and addresses a sandbox's proxy may connect to. Pure code, no
 * I/O: the proxy (netproxy.c) asks it about a name before resolving it and
 * about every address before connecting to it. */
#ifndef AB_NETPOLICY_H
#define AB_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "agentbox/agentbox.h"

#define NET_HOST_MAX 253
#define NET_PATH_MAX 255

struct net_rule {
	bool deny;
	bool is_addr;		     /* an address or CIDR; else a host name pattern */
	bool wildcard;		     /* "*.example.org": its subdomains, at any depth */
	bool any_name;		     /* "*": every name (public addresses only) */
	unsigned port;		     /* 0: the default ports, 80 and 443 */
	bool any_port;		     /* ":*" */
	char host[NET_HOST_MAX + 1]; /* lower case, no trailing dot */
	uint8_t addr[16];	     /* IPv4 as ::ffff:a.b.c.d */
	unsigned prefix;	     /* in bits of the 128 */
	bool implicit;		     /* a secret='s host, allowed by it */
	unsigned methods;	     /* bit i: netrule.c's methods[i]; 0: any */
	unsigned body_methods;	     /* of those, "GET+body": may carry a body */
	char path[NET_PATH_MAX + 1]; /* a prefix or glob; "": any */
};

struct net_policy {
	struct net_rule *r;
	size_t n;
	unsigned max_conns;	 /* at once per sandbox */
	unsigned long long rate; /* bytes per second, both ways together; 0: none */
};

#define NET_DEFAULT_MAX_CONNS 64

void netpolicy_init(struct net_policy *p);
void netpolicy_free(struct net_policy *p);
/* One --net value: allow=PATTERN[,PATTERN...], deny=..., max-conns=N or
 * rate=SIZE. -EINVAL with err naming the bad pattern. */
int netpolicy_add(struct net_policy *p, const char *spec, struct ab_error *err);
/* secret=NAME@...: the length of NAME (0: not a valid name and '@'). */
size_t netpolicy_secret_name(const char *spec);
/* True when spec is a --net value this file handles (after none/host). */
bool netpolicy_is_spec(const char *spec);
/* --net VALUE other than none and host: checked, kept in cfg->net_rules,
 * and the sandbox gets the proxy (AB_NET_PROXY). */
int ab_net_option(struct ab_config *cfg, const char *arg, struct ab_error *err);

/* A requested host: a name (checked as one, case-insensitively) or an IP
 * literal (IPv6 without brackets). Returns -EINVAL when it is neither. */
struct net_target {
	char host[NET_HOST_MAX + 1];
	bool is_addr;
	uint8_t addr[16];
	unsigned port;
};
int net_target_set(struct net_target *t, const char *host, size_t len, unsigned port);

/* Before any lookup: NULL when the name may be resolved and connected to
 * (subject to netpolicy_check_addr for each address), else why not. */
const char *netpolicy_check_name(const struct net_policy *p, const struct net_target *t);
/* True when an allow rule of p names t (its name or address, and port):
 * the hosts a --net secret= goes to. */
bool netpolicy_matches(const struct net_policy *p, const struct net_target *t);
/* For an address about to be connected to (name_ok: the target was a name
 * an allow rule matched): NULL when allowed, else why not. self: the
 * host's own addresses (count n_self, 16 bytes each). */
const char *netpolicy_check_addr(const struct net_policy *p, const uint8_t addr[16], unsigned port,
				 bool name_ok, const uint8_t (*self)[16], size_t n_self);
/* True when r (an allow rule) names t: its name or address, and port. */
bool net_rule_names(const struct net_rule *r, const struct net_target *t);

/* netrule.c: methods and paths ("GET,HEAD:host/path/...").
 * netrule_split takes pat's methods and path into r and leaves its host
 * (and port) in pat; NULL, or why not (host_only: deny=, secret=). */
const char *netrule_split(char *pat, bool host_only, struct net_rule *r);
bool netrule_restricted(const struct net_rule *r);
/* "GET" (or "GET+body") alone: a method list's part that a ',' split off
 * its pattern. */
bool netrule_is_method(const char *s, size_t n);
/* The path of an origin-form target: query and fragment cut, percent-
 * escapes decoded, "//", "." and ".." resolved; NULL, or why refused
 * (an encoded '/', '\', '%', '?', '#' or NUL, a control character, a bad
 * escape, above the root). */
const char *netrule_path(const char *target, size_t n, char *out, size_t cap);
/* Whether a request's method (mlen bytes) and normalised path are r's. */
bool netrule_matches(const struct net_rule *r, const char *method, size_t mlen, const char *path);
/* Whether r allows a body on the method ("GET+body:") and the path. */
bool netrule_allows_body(const struct net_rule *r, const char *method, size_t mlen,
			 const char *path);
/* netpolicy.c, with r's rules: true when t's allow rules all carry methods
 * or paths (no host-only rule for it): its requests are read and checked
 * (TLS terminated). */
bool netpolicy_restricted(const struct net_policy *p, const struct net_target *t);
/* One request to t: NULL when allowed, else why not. */
const char *netpolicy_check_request(const struct net_policy *p, const struct net_target *t,
				    const char *method, size_t mlen, const char *path);
/* A request head to t ("METHOD TARGET HTTP/1.1\r\n..."): NULL when
 * allowed, else why (written to why[0..wlen): method, target, reason). */
const char *netpolicy_check_head(const struct net_policy *p, const struct net_target *t,
				 const char *head, size_t len, char *why, size_t wlen);
/* A request head with a body to t whose method has no body by definition
 * (GET, HEAD, OPTIONS, DELETE, TRACE): NULL when an allow rule naming t
 * allows it ("GET+body:host/path"), else why not (in why[0..wlen)). */
const char *netpolicy_check_body(const struct net_policy *p, const struct net_target *t,
				 const char *head, size_t len, char *why, size_t wlen);
/* sockaddr_in/in6 to the 16-byte form (IPv4 mapped); -EAFNOSUPPORT else. */
int net_addr_from_sockaddr(const struct sockaddr *sa, uint8_t out[16], unsigned *port);
void net_addr_format(const uint8_t a[16], char *buf, size_t len);

#endif
