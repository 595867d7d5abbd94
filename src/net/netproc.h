/* The network helper (design.md, invariant 12): --net allow='s proxy
 * (netproxy.h) runs in a child of the launcher confined before it reads
 * a byte from the sandbox (confine/confine.h: no capability, no_new_privs,
 * its own seccomp filter, Landlock, RLIMIT_AS, no fd but its own), so
 * that HTTP, SOCKS and TLS from the sandbox, and name lookups, are parsed
 * outside the trusted launcher, and OpenSSL is mapped only there.
 *
 * The launcher's side is this handle: the helper is started before the
 * sandbox (it makes the CA of --net secret=), is given the sandbox's
 * listening socket (the launcher keeps no copy: when the helper dies, the
 * sandbox's connections are refused), and speaks over one SOCK_SEQPACKET
 * socket whose every message the launcher bounds and checks as hostile:
 * what it allowed and denied (which the launcher counts per command),
 * and the answers to policy changes and settles. */
#ifndef AB_NETPROC_H
#define AB_NETPROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"

struct netproc;
struct net_secrets;

/* Whose a connection is: the command host pid belongs to (a key, 0:
 * none), looked up while the process waits for the proxy's answer; and
 * that command's report, or NULL once it has gone (the sandbox's total
 * only). */
typedef uint64_t (*netproc_owner_fn)(pid_t pid, void *arg);
typedef struct ab_net_report *(*netproc_report_fn)(uint64_t owner, void *arg);

/* Start the helper with cfg's policy and sec (NULL: none); with sec, the
 * helper makes the CA and sec->bundle is filled from its answer. */
int netproc_start(const struct ab_config *cfg, struct net_secrets *sec, struct netproc **out,
		  struct ab_error *err);
/* Hand it the sandbox's listening socket (closed here, on failure too);
 * init: the sandbox's init, whose descendants connect. */
int netproc_serve(struct netproc *np, int listen_fd, netproc_owner_fn owner,
		  netproc_report_fn report, void *arg, pid_t init, struct ab_error *err);
/* The fds a loop watches: its socket and its pidfd; -1 once it died. */
int netproc_fd(const struct netproc *np);
int netproc_pidfd(const struct netproc *np);
/* Read what it said (the socket or the pidfd is readable). */
void netproc_dispatch(struct netproc *np);
/* "network helper died (signal N)" once it has died (said on stderr
 * once), else NULL. */
const char *netproc_died(const struct netproc *np);
/* The reports of connections ending now, waited for (at most ms) before a
 * command's result is made (netproxy_settle in the helper). */
void netproc_settle(struct netproc *np, int ms);
/* netproxy_set_rules and netproxy_rules: checked here, then in force in
 * the helper when this returns 0. */
int netproc_set_rules(struct netproc *np, char *const *allow, size_t n_allow, char *const *deny,
		      size_t n_deny, struct ab_error *err);
size_t netproc_rules(const struct netproc *np, bool deny, const char **out, size_t max);
/* The sandbox's total since it started. */
const struct ab_net_report *netproc_total(const struct netproc *np);
/* Kill and reap the helper. */
void netproc_free(struct netproc *np);

/* ---- the wire between the launcher and the helper (netproc.c) ---- */

enum np_type {
	/* helper to launcher */
	NP_BUNDLE = 1, /* a piece of the CA bundle (payload) */
	NP_SET_UP,     /* the bundle is whole; setup done */
	NP_SERVING,    /* the listener taken, confined, serving */
	NP_ERROR,      /* a: errno; payload: the message */
	NP_ACCEPT,     /* id; a: the client's port */
	NP_RECORD,     /* id (0: refused as it came); a: client port, b: allowed,
			* c: target port; payload: host NUL why NUL */
	NP_CLOSED,     /* id */
	NP_SETTLED,    /* id: the settle's sequence */
	NP_RULES_SET,  /* id: the change's sequence; a: 0 or errno; payload */
	/* launcher to helper */
	NP_LISTENER = 32, /* the socket, passed */
	NP_TAGGED,	  /* id: read that connection now */
	NP_SETTLE,	  /* id: sequence; a: ms */
	NP_RULES,	  /* id: sequence; a: allow given, b: deny given, c: how many
			   * allow; payload: the patterns, each NUL ended */
};

struct np_head {
	uint32_t type, a, b, c;
	uint64_t id;
};

/* a message's payload at most; bigger is a broken protocol */
#define NP_PAYLOAD_MAX (60 * 1024)

#endif
