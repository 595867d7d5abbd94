/* --net secret=NAME@PATTERN[,...] and --net ca=FILE (docs/network.md): the
 * caller's NAME stays in the launcher, the sandbox gets a placeholder; the
 * proxy terminates TLS for the listed hosts with a certificate from a
 * per-sandbox CA (made here at start, its key only in the launcher's
 * memory), verifies the upstream itself, and puts the real value where
 * the placeholder is in each request's line and headers. */
#ifndef AB_NETSECRET_H
#define AB_NETSECRET_H

#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"
#include "net/netpolicy.h"

/* Where the sandbox finds the CA bundle: the host's CAs and its own CA. */
#define NET_CA_DIR    "/tmp"
#define NET_CA_NAME   ".agentbox-ca.pem"
#define NET_CA_BUNDLE NET_CA_DIR "/" NET_CA_NAME
/* "agentbox-secret-" and 32 hex digits */
#define NET_PLACEHOLDER_LEN 48

struct net_tls;

struct net_secret {
	char *name;  /* the environment variable */
	char *value; /* the real value: never sent into the sandbox */
	char placeholder[NET_PLACEHOLDER_LEN + 1];
	struct net_policy where; /* the hosts it goes to */
};

struct net_secrets {
	struct net_secret *v;
	size_t n;
	struct net_tls *tls;
	char *bundle; /* PEM the sandbox trusts */
	size_t bundle_len;
	char *ca; /* --net ca=FILE, or NULL */
};

/* From cfg->net_rules (NULL *out when no secret= is given): reads each
 * NAME from envp (missing: -ENOENT naming it), makes the placeholders.
 * No OpenSSL: the launcher maps none. */
int net_secrets_new(const struct ab_config *cfg, char *const *envp, struct net_secrets **out,
		    struct ab_error *err);
void net_secrets_free(struct net_secrets *s);
/* In the network helper (netproc.c): load OpenSSL, make the per-sandbox
 * CA (s->tls) and the bundle the sandbox trusts (the host's CAs and it). */
int net_secrets_make_ca(struct net_secrets *s, struct ab_error *err);
/* The command's environment: each NAME the placeholder, the CA variables
 * at NET_CA_BUNDLE. */
int net_secrets_env(const struct net_secrets *s, char ***envp, struct ab_error *err);
/* In the sandbox's init, in the view: write NET_CA_BUNDLE; then forget
 * the values and the CA's key (this process's copies, and its environ). */
int net_secrets_inside(struct net_secrets *s, struct ab_error *err);

/* nettls.c: the CA, the leaf certificates and the TLS contexts. */
int net_tls_new(const char *extra_ca, struct net_tls **out, char **ca_pem, struct ab_error *err);
void net_tls_free(struct net_tls *t);
void net_tls_forget_key(struct net_tls *t);
struct ssl_st;
/* The sandbox side of a terminated connection to target: a leaf for it. */
struct ssl_st *net_tls_serve(struct net_tls *t, const struct net_target *target);
/* The upstream side: SNI and the name (or address) checked. */
struct ssl_st *net_tls_connect(struct net_tls *t, const struct net_target *target);

/* netterm.c: one terminated connection, on its own thread. */
struct netproxy;
struct conn;
/* Whether c's target gets a secret (a CONNECT to a listed host). */
bool net_term_wanted(const struct netproxy *p, const struct conn *c);
/* Start c's thread; -EAGAIN when NET_TERM_MAX run already. */
int net_term_start(struct netproxy *p, struct conn *c);
/* A thread's message (the loop's W_TERM): false when none is left; why
 * (when not empty) to report; done: the thread ended, join it. */
bool net_term_recv(struct netproxy *p, uint64_t *id, bool *done, char *why, size_t len);
/* Join c's thread (stop: make it stop first) and free it. */
void net_term_join(struct netproxy *p, struct conn *c, bool stop);
/* A plain HTTP head to c's target: the placeholders put right (listed
 * host); unlisted[0..len) says what to report when one went elsewhere
 * (left empty else); <0 out of memory. */
int net_term_plain_head(struct netproxy *p, struct conn *c, char *unlisted, size_t len);

#define NET_TERM_MAX 32

#endif
