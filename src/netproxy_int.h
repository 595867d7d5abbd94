/* The proxy's state, shared by netproxy.c (connections) and netsetup.c
 * (policy changes, reports, the sandbox side). Not a public header. */
#ifndef AB_NETPROXY_INT_H
#define AB_NETPROXY_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "netpolicy.h"
#include "netproxy.h"

struct conn;
struct net_resolver;

struct netproxy {
	int epfd, listen_fd, timerfd;
	struct net_resolver *res;
	struct net_policy pol;
	char **allow, **deny; /* the patterns, as given, NULL-terminated */
	uint8_t (*self)[16];  /* the host's own addresses */
	size_t n_self;
	struct conn *conns;
	size_t max, n_conns;
	uint64_t next_id;
	/* --net rate=: bytes that may still move this second */
	long long tokens;
	unsigned long long refilled_ms;
	bool throttled;
	struct ab_net_report total;
	netproxy_route_fn route;
	void *route_arg;
};

/* p->pol, p->allow and p->deny from cfg->net_rules; and their release. */
int netproxy_policy_from_config(struct netproxy *p, const struct ab_config *cfg,
				struct ab_error *err);
void netproxy_rules_free(struct netproxy *p);

#endif
