/* agentbox runtime's own options (runtime.h): where it listens (HTTP and
 * gRPC), its connections' bounds, its locks (the token, the names and
 * origins it admits); the rest are agentbox serve's. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_auth.h"
#include "runtime/runtime.h"
#include "util/error.h"

int ab_runtime_options(int argc, char **argv, struct ab_runtime_opts *o, char **rest, int *n_rest,
		       struct ab_error *err)
{
	*o = (struct ab_runtime_opts){.listen = "127.0.0.1",
				      .port = 8888,
				      .conn_timeout_s = 30,
				      .drain_timeout_s = 20,
				      .exec_timeout_s = 300};
	const char *env = getenv("SANDBOX_EXEC_TIMEOUT_SECONDS");
	if (env) { /* as main.py: a bad value is the default, with a warning */
		char *end;
		double v = strtod(env, &end);
		if (*env && !*end && isfinite(v) && v > 0)
			o->exec_timeout_s = v;
		else
			fprintf(stderr,
				"agentbox: runtime: ignoring SANDBOX_EXEC_TIMEOUT_SECONDS=%s; "
				"using "
				"300 seconds\n",
				env);
	}
	int n = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (i > 0 && !strcmp(a, "--no-auth")) {
			o->no_auth = true;
			continue;
		}
		if (i > 0 && !strcmp(a, "--no-auth-on-network")) {
			o->no_auth_network = true;
			continue;
		}
		bool ours = !strcmp(a, "--listen") || !strcmp(a, "--http-port") ||
			    !strcmp(a, "--grpc-port") || !strcmp(a, "--http-timeout") ||
			    !strcmp(a, "--drain-timeout") || !strcmp(a, "--token-file") ||
			    !strcmp(a, "--host") || !strcmp(a, "--allow-origin");
		if (!ours || i == 0) {
			rest[n++] = argv[i];
			continue;
		}
		if (i + 1 >= argc)
			return ab_error_plain(err, EINVAL, "runtime: %s needs a value", a);
		const char *v = argv[++i];
		char *end;
		unsigned long u = strtoul(v, &end, 10);
		if (!strcmp(a, "--token-file")) {
			if (!*v)
				return ab_error_plain(err, EINVAL,
						      "runtime: --token-file needs a file");
			o->token_file = v;
		} else if (!strcmp(a, "--host") || !strcmp(a, "--allow-origin")) {
			bool host = !strcmp(a, "--host");
			unsigned *k = host ? &o->n_hosts : &o->n_origins;
			struct in6_addr a6; /* a name, or an address; an IPv6 one has colons */
			if (!*v || strlen(v) > 253 || strpbrk(v, host ? " \t/[]" : " \t") ||
			    (host && strchr(v, ':') && inet_pton(AF_INET6, v, &a6) != 1))
				return ab_error_plain(err, EINVAL, "runtime: %s %s: expected %s", a,
						      v,
						      host ? "a host name or address without a port"
							   : "an origin (scheme://host[:port])");
			if (*k >= 16)
				return ab_error_plain(err, EINVAL, "runtime: at most 16 %s options",
						      a);
			(host ? o->hosts : o->origins)[(*k)++] = v;
		} else if (!strcmp(a, "--listen")) {
			if (strlen(v) >= sizeof(o->listen))
				return ab_error_plain(err, EINVAL,
						      "runtime: --listen %s is too long", v);
			snprintf(o->listen, sizeof(o->listen), "%s", v);
		} else if (!*v || *end || u < 1 || u > (strstr(a, "-port") ? 65535 : 3600)) {
			return ab_error_plain(err, EINVAL,
					      "runtime: %s %s: expected a number from 1 to %s", a,
					      v, strstr(a, "-port") ? "65535" : "3600");
		} else if (!strcmp(a, "--http-port")) {
			o->port = (unsigned)u;
		} else if (!strcmp(a, "--grpc-port")) {
			o->grpc_port = (unsigned)u;
		} else if (!strcmp(a, "--http-timeout")) {
			o->conn_timeout_s = (unsigned)u;
		} else {
			o->drain_timeout_s = (unsigned)u;
		}
	}
	if (o->no_auth && o->token_file)
		return ab_error_plain(err, EINVAL,
				      "runtime: --no-auth and --token-file contradict each other");
	if (o->no_auth_network && !o->no_auth)
		return ab_error_plain(err, EINVAL, "runtime: --no-auth-on-network needs --no-auth");
	if (o->no_auth && !o->no_auth_network && !rt_auth_loopback(o->listen))
		return ab_error_plain(
			err, EPERM,
			"runtime: --no-auth with --listen %s would let anyone who reaches "
			"that address run commands in the sandbox: add "
			"--no-auth-on-network to mean it, or drop --no-auth",
			o->listen);
	rest[n] = NULL;
	*n_rest = n;
	return 0;
}
