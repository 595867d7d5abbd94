/* The egress proxy for --net allow= (docs/network.md): HTTP
 * CONNECT, plain HTTP forwarding and SOCKS5, served on a listening socket
 * the sandbox's init made on its own loopback and passed out, so the
 * network helper (netproc.c, a confined child of the launcher) serves the
 * sandbox's 127.0.0.1 directly. Non-blocking; all of
 * it hangs off one epoll fd (netproxy_fd) that a caller's loop watches
 * and calls netproxy_dispatch() for. Names resolve on a helper thread
 * (getaddrinfo, so /etc/hosts and nsswitch are honoured) that reports
 * through an eventfd: the loop never waits for DNS. */
#ifndef AB_NETPROXY_H
#define AB_NETPROXY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"
#include "net/netpolicy.h"

/* Port the proxy listens on in the sandbox's own loopback. */
#define NET_PROXY_PORT 3128

struct netproxy;
struct net_secrets;

/* Takes listen_fd (closed on failure too) and a copy of the policy built
 * from cfg->net_rules; sec (--net secret=, netsecret.h, or NULL) must
 * outlive the proxy. */
int netproxy_new(const struct ab_config *cfg, struct net_secrets *sec, int listen_fd,
		 struct netproxy **out, struct ab_error *err);
int netproxy_fd(const struct netproxy *p);
void netproxy_dispatch(struct netproxy *p);
void netproxy_free(struct netproxy *p);

/* Where the proxy says what it does (the network helper's channel to the
 * launcher, netproc.c): each connection accepted, from which port of the
 * sandbox's loopback (the launcher finds whose it is; the proxy reads the
 * connection only after netproxy_tagged), each allowed or denied (id 0: a
 * connection refused as it came), each closed. */
struct netproxy_sink {
	void (*accepted)(void *arg, uint64_t id, unsigned client_port);
	void (*record)(void *arg, uint64_t id, unsigned client_port, bool allowed, const char *host,
		       unsigned port, const char *why);
	void (*closed)(void *arg, uint64_t id);
	void *arg;
};
void netproxy_set_sink(struct netproxy *p, const struct netproxy_sink *sink);
/* The launcher has tagged connection id: read it from now on. */
void netproxy_tagged(struct netproxy *p, uint64_t id);
/* A proxy with the policy of cfg only (no socket, no thread): the
 * launcher's copy of the rules, checked and answered from there. */
int netproxy_policy_new(const struct ab_config *cfg, struct netproxy **out, struct ab_error *err);
/* The host pid of the sandbox process whose socket connected from
 * client_port to the proxy, found through /proc; 0 when not found. */
pid_t netproxy_peer_pid(pid_t init, unsigned client_port);
/* The sandbox's total since it started. */
const struct ab_net_report *netproxy_total(const struct netproxy *p);
/* The reports of TLS-terminated connections whose client has gone, waited
 * for (at most ms) before a command's result is made. */
void netproxy_settle(struct netproxy *p, int ms);

/* Replace the allow and the deny patterns (each NULL: keep that list) for
 * connections from now on; all checked before anything changes. */
int netproxy_set_rules(struct netproxy *p, char *const *allow, size_t n_allow, char *const *deny,
		       size_t n_deny, struct ab_error *err);
/* The patterns in force, as given ("allow=..." entries). */
size_t netproxy_rules(const struct netproxy *p, bool deny, const char **out, size_t max);

/* Reports: add one connection, copy, free. */
void net_report_add(struct ab_net_report *r, bool allowed, const char *host, unsigned port,
		    const char *why);
int net_report_copy(struct ab_net_report *dst, const struct ab_net_report *src);
void net_report_free(struct ab_net_report *r);

/* In the sandbox's init, after loopback is up: listen on
 * 127.0.0.1:NET_PROXY_PORT and pass the socket to the launcher. */
int netproxy_listen_inside(int sync_fd, struct ab_error *err);

/* The NAME=VALUE strings that point the usual tools at the proxy. */
extern const char *const net_proxy_env[];

#endif
