/* The proxy's state, shared by netloop.c (the loop's primitives),
 * netproxy.c (the loop, setup), netconn.c (each connection) and netsetup.c
 * (policy changes, reports, the sandbox side). Not a public header. */
#ifndef AB_NETPROXY_INT_H
#define AB_NETPROXY_INT_H

#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "net/netparse.h"
#include "net/netpolicy.h"
#include "net/netproxy.h"

struct net_resolver;

#define BUF_SIZE	 (8 * NET_HEAD_MAX)
#define HANDSHAKE_MS	 30000
#define IDLE_MS		 (10 * 60 * 1000)
#define TICK_MS		 1000
#define THROTTLE_TICK_MS 20
#define LINGER_MS	 2000

enum conn_state {
	S_FREE,
	S_TAG, /* accepted, not read until the launcher knows whose it is */
	S_HEAD,
	S_SOCKS_REQ,
	S_WAIT_LOOKUP,
	S_LOOKUP,
	S_CONNECT,
	S_RELAY,
	S_TERM, /* its thread has the fds (netterm.c) */
	S_CLOSING
};
enum { W_CLIENT, W_UPSTREAM, W_LISTEN, W_RESOLVER, W_TIMER, W_TERM };

struct pipebuf {
	uint8_t b[BUF_SIZE];
	size_t len;
};

struct conn {
	enum conn_state st;
	uint64_t id;
	int cfd, ufd;
	uint32_t cmask, umask; /* events registered */
	unsigned client_port;  /* on the sandbox's loopback */
	bool c_eof, u_eof, c_shut, u_shut, socks;
	struct net_request req;
	struct addrinfo *ai, *ai_cur;
	bool literal_tried;
	const char *refused; /* why the last address was refused */
	bool tried_connect;
	unsigned long long deadline;
	struct term *term; /* S_TERM */
	/* last: a new connection clears everything before them; allocated
	 * while the connection is open */
	struct pipebuf *c2u, *u2c;
};

struct netproxy {
	int epfd, listen_fd, timerfd;
	struct net_resolver *res;
	struct net_policy pol;
	char **allow, **deny; /* the patterns, as given, NULL-terminated */
	char **implicit;      /* secret= hosts: allowed whatever allow= says */
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
	struct netproxy_sink sink; /* all NULL: none */
	/* accepted past --net max-conns, refused once tagged (netproxy_tagged) */
	struct refusing {
		uint64_t id;
		int fd;
		unsigned port;
	} refusing[16];
	size_t n_refusing;
	/* --net secret= (netsecret.h; NULL: none), borrowed */
	struct net_secrets *sec;
	int term_pair[2]; /* the terminating threads' messages: [1] theirs */
	unsigned n_term;
};

/* netloop.c: the clock, the epoll set's keys and interest */
unsigned long long net_now_ms(void);
uint64_t net_key(size_t i, int what);
int net_add_fd(struct netproxy *p, int fd, uint64_t k, uint32_t events);
void net_set_mask(struct netproxy *p, size_t i, int fd, uint32_t *cur, uint32_t want, int what);

/* netconn.c: one connection's life */
void conn_close(struct netproxy *p, struct conn *c);
void conn_on_client(struct netproxy *p, struct conn *c, uint32_t ev);
void conn_on_upstream(struct netproxy *p, struct conn *c, uint32_t ev);
void conn_update(struct netproxy *p, size_t i); /* interest, or close when done */
void conn_fail(struct conn *c, int http, uint8_t socks, const char *why);
void conn_on_lookups(struct netproxy *p);
/* Count c in the sandbox's total and its command's report. */
void conn_record(struct netproxy *p, struct conn *c, bool allowed, const char *why);

/* p->pol, p->allow and p->deny from cfg->net_rules (the hosts of
 * secret= allowed too); and their release. */
int netproxy_policy_from_config(struct netproxy *p, const struct ab_config *cfg,
				struct ab_error *err);
void netproxy_rules_free(struct netproxy *p);

#endif
