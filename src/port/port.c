/* Published ports, the launcher's half (port.h): the listeners made on
 * the host, the relay started, told and watched; what is published,
 * listed. Every word from the relay is checked (size, type, key). */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image/unpack_proc.h"
#include "port/port.h"
#include "port/port_int.h"
#include "util/sync.h"
#include "util/util.h"

/* How long the relay may take to start or to answer: it does nothing
 * slow; this only bounds a relay that hangs. */
#define RELAY_WAIT_MS 5000

union port_addr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

struct port_pub {
	uint32_t key;
	uint16_t port;	      /* inside */
	union port_addr addr; /* on the host */
	bool public;
	bool token; /* each connection sends the token first */
};

struct port_set {
	int netns, ctl;
	uid_t owner;
	pid_t pid;
	struct port_pub pub[PORT_MAX];
	size_t n;
	uint32_t next_key;
};

struct port_set *port_set_new(int netns, uid_t owner)
{
	struct port_set *ps = calloc(1, sizeof(*ps));
	if (!ps)
		return NULL;
	ps->netns = netns;
	ps->ctl = -1;
	ps->owner = owner;
	return ps;
}

static void relay_stop(struct port_set *ps)
{
	if (ps->ctl >= 0)
		close(ps->ctl);
	ps->ctl = -1;
	if (ps->pid > 0) {
		kill(ps->pid, SIGKILL);
		while (waitpid(ps->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	ps->pid = 0;
	ps->n = 0; /* its listeners were its only copies: closed with it */
}

void port_set_free(struct port_set *ps)
{
	if (!ps)
		return;
	relay_stop(ps);
	if (ps->netns >= 0)
		close(ps->netns);
	free(ps);
}

ssize_t port_recv(int sock, struct port_msg *m, int *fd)
{
	size_t n = 0;
	ssize_t r = packet_recv(sock, m, sizeof(*m), fd, 1, &n);
	if (n == 0)
		*fd = -1;
	m->msg[sizeof(m->msg) - 1] = '\0';
	return r;
}

static int relay_send(struct port_set *ps, const struct port_msg *m, int fd)
{
	return packet_send(ps->ctl, m, sizeof(*m), &fd, fd >= 0 ? 1 : 0);
}

/* The relay's answer of type want (for key), checked; a relay that says
 * anything else, or nothing in time, is killed. */
static int relay_wait(struct port_set *ps, uint32_t want, uint32_t key, struct ab_error *err)
{
	struct pollfd p = {.fd = ps->ctl, .events = POLLIN};
	struct port_msg m;
	int fd = -1;
	int r = poll(&p, 1, RELAY_WAIT_MS);
	ssize_t n = r == 1 ? port_recv(ps->ctl, &m, &fd) : -1;
	if (fd >= 0)
		close(fd); /* it sends none */
	if (n == (ssize_t)sizeof(m) && m.type == want && m.key == key)
		return 0;
	int code = EIO;
	if (n == (ssize_t)sizeof(m) && m.type == PORT_FAIL && m.key == key) {
		code = m.err > 0 && m.err < 4096 ? m.err : EIO;
		ab_error_plain(err, code, "%s", m.msg[0] ? m.msg : "the port relay refused");
	} else {
		ab_error_plain(err, EIO, "the port relay %s",
			       r == 0 ? "did not answer in time" : "failed");
	}
	if (want == PORT_READY || n != (ssize_t)sizeof(m) || m.type != PORT_FAIL)
		relay_stop(ps);
	return -code;
}

static int relay_start(struct port_set *ps, struct ab_error *err)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return ab_error_set(err, errno, "port relay: socketpair");
	char owner[24], parent[24];
	snprintf(owner, sizeof(owner), "%lu", (unsigned long)ps->owner);
	snprintf(parent, sizeof(parent), "%ld", (long)getpid());
	char *argv[] = {"agentbox", "__port-relay", owner, parent, NULL};
	pid_t pid = unpack_proc_spawn(argv, (int[]){sv[1], ps->netns}, 2);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return ab_error_set(err, (int)-pid, "cannot start the port relay");
	}
	ps->ctl = sv[0];
	ps->pid = pid;
	return relay_wait(ps, PORT_READY, 0, err);
}

/* A relay that died since it was last asked: reaped, its ports gone. */
static int relay_check(struct port_set *ps, struct ab_error *err)
{
	if (ps->ctl < 0)
		return 0;
	struct pollfd p = {.fd = ps->ctl, .events = POLLIN};
	if (poll(&p, 1, 0) == 0 || !(p.revents & (POLLHUP | POLLERR)))
		return 0;
	int st = 0;
	pid_t pid = ps->pid;
	close(ps->ctl);
	ps->ctl = -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	ps->pid = 0;
	ps->n = 0;
	if (WIFSIGNALED(st))
		return ab_error_plain(err, EIO,
				      "the port relay had died (signal %d): every port it served "
				      "is closed; publish them again",
				      WTERMSIG(st));
	return ab_error_plain(err, EIO,
			      "the port relay had ended (status %d): every port it served is "
			      "closed; publish them again",
			      WEXITSTATUS(st));
}

/* a's address as text and its port */
static uint16_t addr_text(const union port_addr *a, char ip[INET6_ADDRSTRLEN])
{
	bool v6 = a->sa.sa_family == AF_INET6;
	inet_ntop(a->sa.sa_family,
		  v6 ? (const void *)&a->in6.sin6_addr : (const void *)&a->in.sin_addr, ip,
		  INET6_ADDRSTRLEN);
	return ntohs(v6 ? a->in6.sin6_port : a->in.sin_port);
}

/* "ADDR:PORT" or "[ADDR6]:PORT" into a; *loopback says whether ADDR is
 * a loopback address. */
static int parse_host(const char *s, union port_addr *a, bool *loopback, struct ab_error *err)
{
	const char *colon = strrchr(s, ':');
	char ip[INET6_ADDRSTRLEN];
	char *end;
	bool v6 = s[0] == '[';
	size_t len = colon ? (size_t)(colon - s) : 0;
	long p = colon ? strtol(colon + 1, &end, 10) : -1;
	if (v6 && len >= 2 && s[len - 1] == ']') {
		s++;
		len -= 2;
	} else if (v6) {
		len = 0;
	}
	*a = (union port_addr){.sa.sa_family = v6 ? AF_INET6 : AF_INET};
	if (!colon || len == 0 || len >= sizeof(ip) || !colon[1] || *end || p < 0 || p > 65535)
		return ab_error_plain(err, EINVAL,
				      "port: 'host' must be ADDR:PORT or [ADDR6]:PORT (a port, 0 "
				      "for any), not '%.64s'",
				      s - v6);
	memcpy(ip, s, len);
	ip[len] = '\0';
	if (inet_pton(a->sa.sa_family, ip,
		      v6 ? (void *)&a->in6.sin6_addr : (void *)&a->in.sin_addr) != 1)
		return ab_error_plain(err, EINVAL, "port: '%s' is not an IPv%c address", ip,
				      v6 ? '6' : '4');
	*loopback = v6 ? IN6_IS_ADDR_LOOPBACK(&a->in6.sin6_addr)
		       : (ntohl(a->in.sin_addr.s_addr) >> 24) == 127;
	if (v6)
		a->in6.sin6_port = htons((uint16_t)p);
	else
		a->in.sin_port = htons((uint16_t)p);
	return 0;
}

static int listen_on(union port_addr *a, struct ab_error *err)
{
	char ip[INET6_ADDRSTRLEN];
	uint16_t port = addr_text(a, ip);
	bool v6 = a->sa.sa_family == AF_INET6;
	cleanup_fd int fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	socklen_t len = v6 ? sizeof(a->in6) : sizeof(a->in);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (v6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
	    bind(fd, &a->sa, len) < 0 || listen(fd, PORT_BACKLOG) < 0 ||
	    getsockname(fd, &a->sa, &len) < 0)
		return ab_error_set(err, errno,
				    v6 ? "port: cannot listen on [%s]:%u"
				       : "port: cannot listen on %s:%u",
				    ip, port);
	return ab_steal_fd(&fd);
}

static json_object *pub_json(const struct port_pub *p)
{
	char ip[INET6_ADDRSTRLEN], url[INET6_ADDRSTRLEN + 24];
	uint16_t port = addr_text(&p->addr, ip);
	/* a port with a token is no plain HTTP URL: each connection sends the
	 * token's line first (docs/network.md) */
	snprintf(url, sizeof(url), p->addr.sa.sa_family == AF_INET6 ? "%s://[%s]:%u" : "%s://%s:%u",
		 p->token ? "tcp" : "http", ip, port);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "port", json_object_new_int(p->port));
	json_object_object_add(o, "address", json_object_new_string(ip));
	json_object_object_add(o, "host_port", json_object_new_int(port));
	json_object_object_add(o, "url", json_object_new_string(url));
	json_object_object_add(o, "public", json_object_new_boolean(p->public));
	json_object_object_add(o, "token", json_object_new_boolean(p->token));
	return o;
}

/* A token given (checked) or, with make, a new one: 32 random bytes as
 * hex, into t. */
static int token_of(const char *given, bool make, char t[PORT_TOKEN_MAX + 1], struct ab_error *err)
{
	if (make) {
		unsigned char b[32];
		if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
			return ab_error_set(err, errno, "port: cannot make a token");
		for (size_t i = 0; i < sizeof(b); i++)
			snprintf(t + 2 * i, 3, "%02x", b[i]);
		return 0;
	}
	size_t n = strlen(given);
	bool ok = n >= PORT_TOKEN_MIN && n <= PORT_TOKEN_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = given[i] > 0x20 && given[i] < 0x7f;
	if (!ok)
		return ab_error_plain(err, EINVAL,
				      "port: 'token' must be %d to %d printable ASCII bytes "
				      "without spaces, or true for a new one",
				      PORT_TOKEN_MIN, PORT_TOKEN_MAX);
	memcpy(t, given, n + 1);
	return 0;
}

static struct port_pub *find(struct port_set *ps, long port)
{
	for (size_t i = 0; i < ps->n; i++)
		if (ps->pub[i].port == port)
			return &ps->pub[i];
	return NULL;
}

/* public: 1, 0, or -1 when not said (as published already, else 0);
 * token: NULL (none), or the one each connection must send first */
static int publish(struct port_set *ps, long port, const char *host, int public, const char *token,
		   struct ab_error *err)
{
	union port_addr a = {
		.in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)}};
	bool loopback = true;
	int r = host ? parse_host(host, &a, &loopback, err) : 0;
	char ip[INET6_ADDRSTRLEN];
	if (r == 0 && !loopback && !token) {
		addr_text(&a, ip);
		return ab_error_plain(err, EPERM,
				      "port: %s is not a loopback address: beyond this host's "
				      "loopback a port is published only with a token that each "
				      "connection sends first (agentbox port --token-file FILE or "
				      "--new-token; \"token\" in the protocol); --public does not "
				      "lift this",
				      ip);
	}
	struct port_pub *old = r == 0 ? find(ps, port) : NULL;
	if (r < 0 || (old && !host && !token && (public < 0 || old->public == public)))
		return r; /* the same again: as it is */
	if (old)
		return ab_error_plain(err, EEXIST,
				      "port: %ld is published already (close it first)", port);
	if (ps->n == PORT_MAX)
		return ab_error_plain(err, EMFILE, "port: at most %d ports are published at once",
				      PORT_MAX);
	if (ps->ctl < 0 && (r = relay_start(ps, err)) < 0)
		return r;
	cleanup_fd int fd = listen_on(&a, err);
	if (fd < 0)
		return fd;
	struct port_msg m = {.type = PORT_ADD,
			     .key = ++ps->next_key,
			     .port = (uint16_t)port,
			     .public = public > 0};
	if (token)
		snprintf(m.token, sizeof(m.token), "%s", token);
	if ((r = relay_send(ps, &m, fd)) < 0)
		return ab_error_set(err, -r, "port: cannot reach the port relay");
	if ((r = relay_wait(ps, PORT_OK, m.key, err)) < 0)
		return r;
	/* the relay's is the only copy now: its death closes the port */
	ps->pub[ps->n++] = (struct port_pub){m.key, (uint16_t)port, a, public > 0, token != NULL};
	explicit_bzero(m.token, sizeof(m.token));
	return 0;
}

static int unpublish(struct port_set *ps, long port, struct ab_error *err)
{
	struct port_pub *p = find(ps, port);
	if (!p)
		return ab_error_plain(err, ENOENT, "port: %ld is not published", port);
	struct port_msg m = {.type = PORT_DEL, .key = p->key};
	int r = relay_send(ps, &m, -1);
	if (r < 0 || (r = relay_wait(ps, PORT_OK, m.key, err)) < 0)
		return r < 0 && !err->msg[0] ? ab_error_set(err, -r, "port: the relay") : r;
	*p = ps->pub[--ps->n];
	return 0;
}

static int field(json_object *req, const char *key, json_type t, json_object **v,
		 struct ab_error *err)
{
	*v = NULL;
	if (!json_object_object_get_ex(req, key, v) || !*v)
		return 0;
	if (!json_object_is_type(*v, t))
		return ab_error_plain(err, EINVAL, "port: '%s' must be %s", key,
				      t == json_type_int       ? "an integer"
				      : t == json_type_boolean ? "true or false"
							       : "a string");
	return 1;
}

json_object *port_op(struct port_set *ps, json_object *req, struct ab_error *err)
{
	json_object *vp, *vh, *vpub, *vc, *vt = NULL;
	if (field(req, "port", json_type_int, &vp, err) < 0 ||
	    field(req, "host", json_type_string, &vh, err) < 0 ||
	    field(req, "public", json_type_boolean, &vpub, err) < 0 ||
	    field(req, "close", json_type_boolean, &vc, err) < 0)
		return NULL;
	char token[PORT_TOKEN_MAX + 1] = "";
	bool made = false;
	if (json_object_object_get_ex(req, "token", &vt) && vt) {
		bool yes =
			json_object_is_type(vt, json_type_boolean) && json_object_get_boolean(vt);
		if (!yes && !json_object_is_type(vt, json_type_string)) {
			ab_error_plain(err, EINVAL, "port: 'token' must be a string or true");
			return NULL;
		}
		if (token_of(yes ? NULL : json_object_get_string(vt), yes, token, err) < 0)
			return NULL;
		made = yes;
	}
	long port = vp ? (long)json_object_get_int64(vp) : 0;
	bool close_it = vc && json_object_get_boolean(vc);
	if (vp && (port < 1 || port > 65535)) {
		ab_error_plain(err, EINVAL, "port: 'port' must be 1 to 65535");
		return NULL;
	}
	if (!vp && (vh || vpub || close_it || token[0])) {
		ab_error_plain(err, EINVAL,
			       "port: 'host', 'public', 'token' and 'close' need a 'port'");
		return NULL;
	}
	if (close_it && (vh || vpub || token[0])) {
		ab_error_plain(err, EINVAL, "port: 'close' takes no 'host', 'public' or 'token'");
		return NULL;
	}
	if (relay_check(ps, err) < 0)
		return NULL;
	int r = !vp	   ? 0
		: close_it ? unpublish(ps, port, err)
			   : publish(ps, port, vh ? json_object_get_string(vh) : NULL,
				     vpub ? json_object_get_boolean(vpub) : -1,
				     token[0] ? token : NULL, err);
	if (r < 0) {
		explicit_bzero(token, sizeof(token));
		return NULL;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("port"));
	if (made) /* said once: the launcher keeps no copy */
		json_object_object_add(o, "token", json_object_new_string(token));
	explicit_bzero(token, sizeof(token));
	struct port_pub *p = vp && !close_it ? find(ps, port) : NULL;
	if (p) {
		json_object *one = pub_json(p);
		json_object_object_add(o, "url",
				       json_object_get(json_object_object_get(one, "url")));
		json_object_put(one);
	}
	json_object *all = json_object_new_array();
	for (size_t i = 0; i < ps->n; i++)
		json_object_array_add(all, pub_json(&ps->pub[i]));
	json_object_object_add(o, "ports", all);
	return o;
}
