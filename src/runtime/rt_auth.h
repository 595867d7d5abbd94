/* The locks of agentbox runtime's doors (rt_auth.c), which its HTTP
 * (httpapi/) and gRPC (grpc/) listeners both call: the bearer token, the
 * Host or :authority a request names (DNS rebinding), its Origin, and
 * how many connections one client (a local uid, else a peer address) may
 * hold and for how long before its request's head is in. */
#ifndef AB_RT_AUTH_H
#define AB_RT_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/runtime.h"
#include "util/error.h"

#define RT_TOKEN_MAX	4096 /* a --token-file's token, in bytes */
#define RT_CLIENT_CONNS 32   /* HTTP connections one client may hold */
#define RT_CLIENT_GRPC	16   /* gRPC connections one client may hold */
#define RT_HEAD_DEADLINE_S                                                                         \
	10		   /* a request's head (or a gRPC connection's                             \
			      first authenticated call) must be in by then */
#define RT_CLIENTS_MAX 320 /* clients counted at once (>= every slot) */

struct rt_client {
	char key[64]; /* "uid 1000" or "addr 10.0.0.5"; "" when free */
	unsigned http, grpc;
};

struct rt_auth {
	const struct ab_runtime_opts *o;
	bool off;		  /* --no-auth */
	unsigned char digest[32]; /* SHA-256 of the token */
	char file[4200];	  /* the token file it made (removed at the end), or "" */
	struct rt_client clients[RT_CLIENTS_MAX];
	struct rt_hconn *hconns; /* HTTP connections (rt_auth_http_*) */
};

/* The token: --token-file's, else a new random one written to a 0600 file
 * in the caller's runtime directory, which stderr names; nothing with
 * --no-auth (a warning on stderr). 0, or -errno with err. */
int rt_auth_open(struct rt_auth *a, const struct ab_runtime_opts *o, struct ab_error *err);
/* Remove the file rt_auth_open made. */
void rt_auth_close(struct rt_auth *a);

/* Whether addr (text) is a loopback address (127/8, ::1). */
bool rt_auth_loopback(const char *addr);
/* Whether an Authorization value (len bytes, not NUL-terminated) is
 * "Bearer TOKEN" with the token, compared in constant time; always with
 * --no-auth. */
bool rt_auth_bearer_ok(const struct rt_auth *a, const char *v, size_t len);
/* Whether a Host header or :authority (len bytes) names this server: a
 * loopback name or address, the --listen address, the address the
 * connection fd came to, or a --host name (any port). */
bool rt_auth_host_ok(const struct rt_auth *a, const char *v, size_t len, int fd);
/* Whether an Origin value (len bytes) is one --allow-origin names. */
bool rt_auth_origin_ok(const struct rt_auth *a, const char *v, size_t len);

/* A new connection fd of a client counted (grpc: on the gRPC port): the
 * client's index, or -1 when the client holds its share already (the
 * caller closes fd). rt_auth_client_put undoes it. */
int rt_auth_client_take(struct rt_auth *a, int fd, bool grpc);
void rt_auth_client_put(struct rt_auth *a, int client, bool grpc);

#endif
