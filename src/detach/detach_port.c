/* agentbox port ID [PORT] (detach.h): a TCP port of a detached sandbox
 * published on the host, through its launcher's {"op":"port"}
 * (docs/protocol.md); listed, closed. create --port comes here too. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "detach/detach.h"
#include "detach/detach_lines.h"
#include "util/error.h"
#include "util/util.h"

static const char usage_port[] =
	"Usage: agentbox port ID PORT [--host ADDR:HOSTPORT] [--public]\n"
	"       agentbox port ID PORT --host ADDR:HOSTPORT --token-file FILE|--new-token\n"
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
	"                        port; IPv6: [::1]:HOSTPORT); an ADDR that is not\n"
	"                        a loopback address needs a token\n"
	"  --public              any local user may connect, not only you\n"
	"  --token-file FILE     each connection must send this token (FILE's\n"
	"                        text, 16 to 128 printable bytes) and a newline\n"
	"                        first; it is dropped before the rest goes in\n"
	"  --new-token           the same with a new random token, printed once\n"
	"                        on stderr\n"
	"  --close               stop publishing PORT\n";

/* FILE's token: its text without a final newline (a Secret's file, 0600
 * or read-only); -errno with err. */
static int read_token(const char *path, char *t, size_t size, struct ab_error *err)
{
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return ab_error_set(err, errno, "port: cannot read --token-file %s", path);
	if (!S_ISREG(st.st_mode))
		return ab_error_plain(err, EINVAL, "port: --token-file %s is not a regular file",
				      path);
	ssize_t n = read(fd, t, size - 1);
	if (n < 0)
		return ab_error_set(err, errno, "port: cannot read --token-file %s", path);
	t[n] = '\0';
	if (n && t[n - 1] == '\n')
		t[--n] = '\0';
	if (n && t[n - 1] == '\r')
		t[--n] = '\0';
	return 0;
}

/* PORT as a number from 1 to 65535, or -1. */
long detach_port_number(const char *s)
{
	char *end;
	errno = 0;
	long p = s && *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : -1;
	return p >= 1 && p <= 65535 && !errno && !*end ? p : -1;
}

static int port_send(const char *id, json_object *req, json_object **reply, struct ab_error *err);

/* {"op":"port"} with these values (port 0: none) */
static json_object *port_req(long port, const char *host, bool public, bool close_it)
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
	return req;
}

int detach_port_request(const char *id, long port, const char *host, bool public, bool close_it,
			json_object **reply, struct ab_error *err)
{
	return port_send(id, port_req(port, host, public, close_it), reply, err);
}

/* req (taken) to sandbox id: its port reply, or its refusal in err */
static int port_send(const char *id, json_object *req, json_object **reply, struct ab_error *err)
{
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
	const char *id = NULL, *port_s = NULL, *host = NULL, *token_file = NULL;
	bool public = false, close_it = false, new_token = false;
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
		else if (!strcmp(a, "--token-file") && i + 1 < argc) token_file = argv[++i];
		else if (!strcmp(a, "--new-token")) new_token = true;
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
	if (!port_s && (host || public || close_it || token_file || new_token))
		return detach_fail("port: --host, --public, --token-file, --new-token and --close "
				   "need a PORT");
	if (token_file && new_token)
		return detach_fail("port: --token-file and --new-token: one token, not two");
	if (close_it && (token_file || new_token))
		return detach_fail("port: --close takes no token");
	json_object *reply = NULL;
	struct ab_error err = {0};
	char token[4096] = "";
	if (token_file && read_token(token_file, token, sizeof(token), &err) < 0)
		return detach_fail("%s", err.msg);
	json_object *req = port_req(port, host, public, close_it);
	if (token_file || new_token)
		json_object_object_add(req, "token",
				       new_token ? json_object_new_boolean(true)
						 : json_object_new_string(token));
	explicit_bzero(token, sizeof(token));
	if (port_send(id, req, &reply, &err) < 0)
		return detach_fail("%s", err.msg);
	const char *made = lines_str(reply, "token");
	if (made)
		fprintf(stderr,
			"agentbox: port %ld: token %s (each connection sends it and a newline "
			"first; it is not shown again)\n",
			port, made);
	if (port_s && !close_it)
		printf("%s\n", lines_str(reply, "url") ? lines_str(reply, "url") : "?");
	else if (!port_s)
		print_list(reply);
	json_object_put(reply);
	return 0;
}
