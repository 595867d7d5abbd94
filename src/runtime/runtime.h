/* agentbox runtime: kubernetes-sigs/agent-sandbox's APIs (the legacy
 * in-pod runtime's and sandboxd's, over HTTP: httpapi/; sandboxd's gRPC
 * ProcessService: grpc/) backed by one session for the server's lifetime
 * (docs/kubernetes.md). */
#ifndef AB_RUNTIME_H
#define AB_RUNTIME_H

#include "agentbox/agentbox.h"

struct ab_runtime_opts {
	char listen[64];	  /* the address to listen on (default 127.0.0.1) */
	unsigned port;		  /* --http-port (default 8888) */
	unsigned grpc_port;	  /* --grpc-port (sandboxd's 9090), 0: no gRPC server */
	unsigned conn_timeout_s;  /* --http-timeout: an idle connection's bound */
	unsigned drain_timeout_s; /* after SIGTERM, how long requests may finish */
	double exec_timeout_s;	  /* SANDBOX_EXEC_TIMEOUT_SECONDS, as main.py reads it */
	const char *token_file;	  /* --token-file (NULL: a token is made) */
	bool no_auth;		  /* --no-auth */
	bool no_auth_network;	  /* --no-auth-on-network: also beyond loopback */
	const char *hosts[16];	  /* --host NAME: names the Host header may give */
	unsigned n_hosts;
	const char *origins[16]; /* --allow-origin ORIGIN */
	unsigned n_origins;
};

/* Take the runtime's own options out of argv (argv[0] is "runtime"):
 * opts gets them, rest (room for argc + 1) the others, for
 * ab_config_parse_serve. Returns 0, or -EINVAL with err naming the bad
 * option or value. */
int ab_runtime_options(int argc, char **argv, struct ab_runtime_opts *opts, char **rest,
		       int *n_rest, struct ab_error *err);

/* Serve the protocols (NULL-terminated: the HTTP API, httpapi/, and
 * gRPC, grpc/; rt_server.h) until SIGTERM, SIGINT or SIGHUP. Returns the
 * exit status: 0 after a clean end (a drain), AB_EXIT_FAILURE when the
 * sandbox could not be built or an address cannot be listened on. */
struct rt_proto;
int ab_runtime(struct ab_config *cfg, const struct ab_runtime_opts *opts,
	       const struct rt_proto *const *protos);

#endif
