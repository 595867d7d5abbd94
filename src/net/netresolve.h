/* Name lookups for the proxy off its loop: each on a short-lived thread
 * (getaddrinfo honours /etc/hosts and nsswitch, which c-ares would not),
 * at most NET_RESOLVE_MAX at once; results come back on a list and an
 * eventfd wakes the loop. A finished lookup whose connection has gone is
 * simply freed. */
#ifndef AB_NETRESOLVE_H
#define AB_NETRESOLVE_H

#include <netdb.h>
#include <stdint.h>

#include "agentbox/agentbox.h"

#define NET_RESOLVE_MAX 8

struct net_resolver;

struct net_lookup {
	uint64_t conn_id; /* whom it is for */
	char host[256];
	int rc;		     /* getaddrinfo's */
	struct addrinfo *ai; /* owned; freeaddrinfo */
	struct net_lookup *next;
};

int net_resolver_new(struct net_resolver **out, struct ab_error *err);
/* Threads still running keep the resolver until they end. */
void net_resolver_free(struct net_resolver *r);
int net_resolver_fd(const struct net_resolver *r);
/* -EAGAIN when NET_RESOLVE_MAX lookups are running (ask again later). */
int net_resolver_start(struct net_resolver *r, uint64_t conn_id, const char *host);
/* Finished lookups (a list the caller frees with net_lookup_free). */
struct net_lookup *net_resolver_take(struct net_resolver *r);
void net_lookup_free(struct net_lookup *l);

#endif
