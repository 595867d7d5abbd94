/* agentbox e2b [--listen ADDR] [--port N] [--api-key-file FILE] [--domain NAME]: the
 * server's command line, its key and its socket; then the loop
 * (e2b_http.c) until SIGINT or SIGTERM, and every sandbox it made ended. */
#include "e2b/e2b_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "detach/detach.h"
#include "layer/layer_review.h"
#include "util/util.h"

#define E2B_PORT_DEFAULT 49983 /* envd's own port */

static const char usage[] =
	"Usage: agentbox e2b [--listen ADDR] [--port N] [--api-key-file FILE]\n"
	"                    [--domain NAME]\n"
	"\n"
	"Serve E2B's control API and envd's API on one local port, backed by\n"
	"agentbox's detached sandboxes, so that code written for E2B's SDK runs\n"
	"here with E2B_API_URL and E2B_SANDBOX_URL pointed at it (docs/e2b.md).\n"
	"\n"
	"  --listen ADDR        the IPv4 or IPv6 address to listen on (default\n"
	"                       127.0.0.1; anything but loopback lets others in\n"
	"                       who hold the key)\n"
	"  --port N             the port (default 49983; 0: any free one)\n"
	"  --api-key-file FILE  the API key clients give (X-API-Key): FILE's first\n"
	"                       line, at least 16 characters; default: a random key\n"
	"                       written to a new 0600 file, whose path is printed\n"
	"  --domain NAME        getHost(port)'s domain (default localhost): a\n"
	"                       request for PORT-ID.NAME reaches that port of\n"
	"                       sandbox ID; NAME must resolve to this server\n"
	"\n"
	"Prints the two environment variables to set, then serves until SIGINT or\n"
	"SIGTERM, which end every sandbox it made.\n";

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "agentbox: e2b: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	return 125;
}

static int read_key(const char *file, char *key, size_t size)
{
	cleanup_fd int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail("cannot read %s: %s", file, strerror(errno));
	char buf[512];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return fail("cannot read %s: %s", file, strerror(errno));
	buf[n] = 0;
	buf[strcspn(buf, "\r\n")] = 0;
	size_t len = strlen(buf);
	if (len < 16 || len >= size)
		return fail("%s: the key is its first line, 16 to 64 characters", file);
	for (size_t i = 0; i < len; i++)
		if (buf[i] <= ' ' || buf[i] > '~')
			return fail("%s: the key is printable ASCII without spaces", file);
	memcpy(key, buf, len + 1);
	return 0;
}

static int write_key(struct e2b *srv, int port, char *path, size_t size)
{
	e2b_random_hex(srv->key, E2B_KEY_LEN);
	snprintf(path, size, "%s/e2b-%d.key", srv->root, port);
	cleanup_fd int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || fchmod(fd, 0600) < 0 || write(fd, srv->key, E2B_KEY_LEN) != E2B_KEY_LEN ||
	    write(fd, "\n", 1) != 1)
		return fail("cannot write %s: %s", path, strerror(errno));
	return 0;
}

static int listen_on(const char *addr, long port, int *out)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, addr, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		len = sizeof(*in6);
	} else {
		return fail("--listen: '%s' is not an IPv4 or IPv6 address", addr);
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return fail("cannot listen on %s: %s", addr, strerror(e));
	}
	*out = fd;
	return 0;
}

static int bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					     : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

int e2b_cli(int argc, char **argv)
{
	const char *listen_addr = "127.0.0.1", *key_file = NULL, *domain = "localhost";
	long port = E2B_PORT_DEFAULT;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		if (i + 1 >= argc || (strcmp(a, "--listen") && strcmp(a, "--port") &&
				      strcmp(a, "--api-key-file") && strcmp(a, "--domain")))
			return fail("unknown option or a missing value: '%s' (agentbox e2b --help)",
				    a);
		const char *v = argv[++i];
		if (!strcmp(a, "--listen")) {
			listen_addr = v;
		} else if (!strcmp(a, "--api-key-file")) {
			key_file = v;
		} else if (!strcmp(a, "--domain")) {
			domain = v;
			size_t n = strlen(v);
			if (!n || n > 200 ||
			    strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
				      "WXYZ0123456789.-") != n ||
			    *v == '.' || *v == '-')
				return fail("--domain: '%s' is not a host name (letters, digits, "
					    "'.' and '-', at most 200)",
					    v);
		} else {
			char *end;
			errno = 0;
			port = strtol(v, &end, 10);
			if (errno || *end || !*v || port < 0 || port > 65535)
				return fail("--port: '%s' is not a port from 0 to 65535", v);
		}
	}
	static struct e2b srv;
	struct ab_error err = {0};
	srv.lfd = -1;
	if (detach_root(srv.root, sizeof(srv.root), true, &err) < 0)
		return fail("%s", err.msg);
	if (key_file && read_key(key_file, srv.key, sizeof(srv.key)))
		return 125;
	int r = listen_on(listen_addr, port, &srv.lfd);
	if (r)
		return r;
	int bound = bound_port(srv.lfd);
	snprintf(srv.domain, sizeof(srv.domain), "%s", domain);
	snprintf(srv.domain_port, sizeof(srv.domain_port), "%s:%d", domain, bound);
	char key_path[PATH_MAX + 32];
	if (!key_file && write_key(&srv, bound, key_path, sizeof(key_path))) {
		close(srv.lfd);
		return 125;
	}
	snprintf(srv.workroot, sizeof(srv.workroot), "/tmp/agentbox-e2b-%d-XXXXXX", (int)getuid());
	if (!mkdtemp(srv.workroot)) {
		close(srv.lfd);
		return fail("cannot make %s: %s", srv.workroot, strerror(errno));
	}
	bool v6 = strchr(listen_addr, ':') != NULL;
	printf("E2B_API_URL=http://%s%s%s:%d\nE2B_SANDBOX_URL=http://%s%s%s:%d\n", v6 ? "[" : "",
	       listen_addr, v6 ? "]" : "", bound, v6 ? "[" : "", listen_addr, v6 ? "]" : "", bound);
	printf("E2B_API_KEY is in %s\n", key_file ? key_file : key_path);
	fflush(stdout);
	r = e2b_serve(&srv);
	e2b_sbxs_end(&srv);
	e2b_snaps_end(&srv);
	layer_remove_tree_at(AT_FDCWD, srv.workroot);
	if (!key_file)
		unlink(key_path);
	close(srv.lfd);
	if (r < 0) {
		fprintf(stderr, "agentbox: e2b: %s\n", strerror(-r));
		return 125;
	}
	return 0;
}
