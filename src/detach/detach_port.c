/* agentbox port ID [PORT] (detach.h): a TCP port of a detached sandbox
 * published on the host, through its launcher's {"op":"port"}
 * (docs/protocol.md); listed, closed. create --port comes here too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detach/detach.h"
#include "detach/detach_lines.h"
#include "util/error.h"
#include "util/util.h"

static const char usage_port[] =
	"Usage: agentbox port ID PORT [--host ADDR:HOSTPORT] [--public]\n"
	"       agentbox port ID PORT --close\n"
	"       agentbox port ID\n"
	"\n"
	"Publish TCP port PORT of sandbox ID on the host: a listener on this host's\n"
	"loopback relays each connection to 127.0.0.1:PORT inside the sandbox's\n"
	"network namespace (also under --net none; nothing is opened outward).\n"
	"Prints the URL. Only you (your uid) can connect, unless --public.\n"
	"Without PORT: the ports published, one a line. docs/network.md.\n"
	"\n"
	"  --host ADDR:HOSTPORT  where to listen (default 127.0.0.1:0, any free\n"
	"                        port); ADDR must be a loopback address (IPv6:\n"
	"                        [::1]:HOSTPORT)\n"
	"  --public              any local user may connect, not only you\n"
	"  --close               stop publishing PORT\n";

/* PORT as a number from 1 to 65535, or -1. */
long detach_port_number(const char *s)
{
	char *end;
	errno = 0;
	long p = s && *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : -1;
	return p >= 1 && p <= 65535 && !errno && !*end ? p : -1;
}

int detach_port_request(const char *id, long port, const char *host, bool public, bool close_it,
			json_object **reply, struct ab_error *err)
{
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("port"));
	json_object_object_add(req, "id", json_object_new_string("port-1"));
	if (port > 0)
		json_object_object_add(req, "port", json_object_new_int((int)port));
	if (host)
		json_object_object_add(req, "host", json_object_new_string(host));
	if (public)
		json_object_object_add(req, "public", json_object_new_boolean(true));
	if (close_it)
		json_object_object_add(req, "close", json_object_new_boolean(true));
	int r = detach_request(id, req, reply, err);
	json_object_put(req);
	if (r < 0)
		return r;
	const char *type = lines_str(*reply, "type");
	if (type && !strcmp(type, "port"))
		return 0;
	const char *msg = lines_str(*reply, "message");
	r = ab_error_plain(err, EINVAL, "%s", msg ? msg : "the sandbox refused");
	json_object_put(*reply);
	*reply = NULL;
	return r;
}

static void print_list(json_object *reply)
{
	json_object *ports = json_object_object_get(reply, "ports");
	size_t n =
		json_object_is_type(ports, json_type_array) ? json_object_array_length(ports) : 0;
	for (size_t i = 0; i < n; i++) {
		json_object *p = json_object_array_get_idx(ports, i);
		const char *url = lines_str(p, "url");
		json_object *pub = json_object_object_get(p, "public");
		printf("%d %s%s\n", json_object_get_int(json_object_object_get(p, "port")),
		       url ? url : "?", pub && json_object_get_boolean(pub) ? " public" : "");
	}
}

int detach_cli_port(int argc, char **argv)
{
	const char *id = NULL, *port_s = NULL, *host = NULL;
	bool public = false, close_it = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (detach_is_help(a)) {
			fputs(usage_port, stdout);
			return 0;
		}
		if (!strcmp(a, "--public"))
		public = true;
		else if (!strcmp(a, "--close")) close_it = true;
		else if (!strcmp(a, "--host") && i + 1 < argc) host = argv[++i];
		else if (a[0] == '-' ||
			 (id && port_s)) return detach_bad_arg("port", "unexpected argument", a);
		else if (!id) id = a;
		else port_s = a;
	}
	if (!id)
		return detach_bad_arg("port", "missing the sandbox's id", "");
	long port = port_s ? detach_port_number(port_s) : 0;
	if (port < 0)
		return detach_bad_arg("port", "not a port (1 to 65535)", port_s);
	if (!port_s && (host || public || close_it))
		return detach_fail("port: --host, --public and --close need a PORT");
	json_object *reply = NULL;
	struct ab_error err = {0};
	if (detach_port_request(id, port, host, public, close_it, &reply, &err) < 0)
		return detach_fail("%s", err.msg);
	if (port_s && !close_it)
		printf("%s\n", lines_str(reply, "url") ? lines_str(reply, "url") : "?");
	else if (!port_s)
		print_list(reply);
	json_object_put(reply);
	return 0;
}
