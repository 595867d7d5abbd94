/* The port relay (port.h): agentbox __port-relay, a confined helper the
 * launcher starts for a sandbox's first published port. It holds a
 * netlink sock_diag socket made on the host, then enters the sandbox's
 * network namespace (so that every socket it makes later is made there),
 * confines itself, and serves: the launcher passes it the host listeners;
 * each connection accepted is checked (its peer's uid, by sock_diag on the
 * 4-tuple, unless the port is public) and relayed to 127.0.0.1:PORT inside
 * by splice() through two pipes. It parses nothing: bytes are moved, never
 * read, but for a port with a token (beyond loopback): there the client's
 * first line is read (at most PREAMBLE_MAX bytes, within
 * PORT_TOKEN_WAIT_MS), compared with the token in constant time and
 * dropped, before anything is connected inside; a wrong or late one is
 * reset. It connects only inside, and only to the published ports. */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "confine/confine.h"
#include "image/unpack_proc.h"
#include "port/port.h"
#include "port/port_int.h"
#include "port/port_peer.h"
#include "util/util.h"

#define PIPE_BYTES   (256 * 1024)
#define PREAMBLE_MAX (PORT_TOKEN_MAX + 2 + 256) /* the token's line and what came after */
#define RELAY_AS_MAX (256ULL << 20)

#define SYS(name)                                                                                  \
	{                                                                                          \
		.nr = SCMP_SYS(name), .arg = -1                                                    \
	}
/* Beyond confine_base and confine_inet: TCP sockets (made inside), splice
 * and its pipes; no bind, listen, exec, file. */
static const struct confine_syscall relay_syscalls[] = {
	{.nr = SCMP_SYS(socket), .arg = 0, .value = AF_INET, .mask = 0},
	SYS(splice),
	SYS(pipe2),
};

struct lst {
	int fd;
	uint32_t key;
	uint16_t port;
	bool public;
	char token[PORT_TOKEN_MAX + 1]; /* "": none */
};

/* One relayed connection: a (outside, the client) and b (inside). */
struct conn {
	int a, b;
	int ab[2], ba[2]; /* pipes: a to b, b to a */
	size_t n_ab, n_ba;
	bool eof_a, eof_b, shut_a, shut_b, connecting;
	/* a port with a token: its first line awaited, nothing inside yet */
	const struct lst *auth;
	unsigned long long deadline; /* ms */
	char pre[PREAMBLE_MAX];
	size_t pre_len;
};

struct relay {
	int ctl, diag, ep;
	uid_t owner;
	struct lst lst[PORT_MAX];
	struct conn conn[PORT_MAX_CONNS];
	size_t n_conns, n_auth; /* n_auth: awaiting their token */
	bool paused;		/* at PORT_MAX_CONNS: the listeners are not polled */
};

enum { K_CTL = 0, K_LST = 1, K_A = 2, K_B = 3 };
#define KEY(kind, i) (((uint64_t)(kind) << 32) | (uint32_t)(i))

static void reply(int ctl, uint32_t type, uint32_t key, int err, const char *msg)
{
	struct port_msg m = {.type = type, .key = key, .err = err};
	if (msg)
		snprintf(m.msg, sizeof(m.msg), "%.199s", msg);
	(void)!send(ctl, &m, sizeof(m), MSG_NOSIGNAL);
}

static void fail(int ctl, const struct ab_error *err)
{
	reply(ctl, PORT_FAIL, 0, err->code ? err->code : EPERM, err->msg);
	_exit(1);
}

static void pause_listeners(struct relay *r, bool pause)
{
	if (r->paused == pause)
		return;
	r->paused = pause;
	for (size_t i = 0; i < PORT_MAX; i++)
		if (r->lst[i].fd >= 0) {
			struct epoll_event ev = {.events = pause ? 0 : EPOLLIN,
						 .data.u64 = KEY(K_LST, i)};
			epoll_ctl(r->ep, EPOLL_CTL_MOD, r->lst[i].fd, &ev);
		}
}

static void conn_close(struct relay *r, size_t i, bool reset)
{
	struct conn *c = &r->conn[i];
	if (reset) { /* the client sees a reset, not a clean end */
		struct linger lg = {1, 0};
		setsockopt(c->a, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	int fds[] = {c->a, c->b, c->ab[0], c->ab[1], c->ba[0], c->ba[1]};
	for (size_t k = 0; k < AB_ARRAY_SIZE(fds); k++)
		if (fds[k] >= 0)
			close(fds[k]);
	if (c->auth)
		r->n_auth--;
	explicit_bzero(c->pre, sizeof(c->pre));
	*c = (struct conn){.a = -1, .b = -1, .ab = {-1, -1}, .ba = {-1, -1}};
	r->n_conns--;
	pause_listeners(r, false);
}

/* Move what src has through the pipe p into dst, without blocking, until
 * neither side moves; src's end passed on as dst's write side shut. */
static int pump(int src, int dst, int p[2], size_t *n, bool *eof, bool *shut)
{
	for (;;) {
		bool moved = false;
		if (!*eof && *n < PIPE_BYTES) {
			ssize_t k = splice(src, NULL, p[1], NULL, PIPE_BYTES - *n,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				*n += (size_t)k;
				moved = true;
				/* ACK what was taken now: a sender that writes
				 * twice in a row (a head, then a body) and
				 * has Nagle on waits for that ACK, which a
				 * delayed one holds for 40 ms */
				setsockopt(src, IPPROTO_TCP, TCP_QUICKACK, &(int){1}, sizeof(int));
			} else if (k == 0) {
				*eof = true;
			} else if (errno != EAGAIN) {
				return -1;
			}
		}
		if (*n > 0) {
			ssize_t k = splice(p[0], NULL, dst, NULL, *n,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				*n -= (size_t)k;
				moved = true;
			} else if (k < 0 && errno != EAGAIN) {
				return -1;
			}
		}
		if (*eof && *n == 0 && !*shut) {
			shutdown(dst, SHUT_WR);
			*shut = true;
		}
		if (!moved)
			return 0;
	}
}

static void auth_step(struct relay *r, size_t i);

/* Both directions moved as far as they go. Every fd is edge-triggered:
 * a direction stops only on EAGAIN (its source empty, or its target full,
 * whose edge comes later) or with its pipe full (at most PIPE_BYTES held
 * per direction: backpressure), which the target's edge empties. */
static void conn_step(struct relay *r, size_t i, uint32_t kind)
{
	struct conn *c = &r->conn[i];
	if (c->auth) {
		if (kind == K_A)
			auth_step(r, i);
		return;
	}
	if (c->connecting) {
		int e = 0;
		socklen_t el = sizeof(e);
		struct sockaddr_in to;
		socklen_t tl = sizeof(to);
		if (kind != K_B)
			return; /* the client spoke first: its bytes wait */
		if (getsockopt(c->b, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e) {
			conn_close(r, i, true); /* nothing listens inside */
			return;
		}
		if (getpeername(c->b, (struct sockaddr *)&to, &tl) < 0)
			return; /* not yet (an event of a slot's earlier connection) */
		c->connecting = false;
	}
	if (pump(c->a, c->b, c->ab, &c->n_ab, &c->eof_a, &c->shut_b) < 0 ||
	    pump(c->b, c->a, c->ba, &c->n_ba, &c->eof_b, &c->shut_a) < 0) {
		conn_close(r, i, true);
		return;
	}
	if (c->shut_a && c->shut_b)
		conn_close(r, i, false);
}

static int conn_pipes(struct conn *c)
{
	if (pipe2(c->ab, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(c->ba, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	(void)fcntl(c->ab[1], F_SETPIPE_SZ, PIPE_BYTES);
	(void)fcntl(c->ba[1], F_SETPIPE_SZ, PIPE_BYTES);
	return 0;
}

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

/* Connection i, admitted, connected to 127.0.0.1:port inside (its first
 * bytes, if any, already in its a-to-b pipe). */
static void connect_inside(struct relay *r, size_t i, uint16_t port)
{
	struct conn *c = &r->conn[i];
	/* made now, in the sandbox's network namespace: 127.0.0.1 is its own */
	c->b = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1;
	if (c->b < 0 || (c->ab[0] < 0 && conn_pipes(c) < 0)) {
		conn_close(r, i, true);
		return;
	}
	setsockopt(c->b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->b, (struct sockaddr *)&to, sizeof(to)) < 0) {
		if (errno != EINPROGRESS) {
			conn_close(r, i, true);
			return;
		}
		c->connecting = true;
	}
	struct epoll_event eb = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.u64 = KEY(K_B, i)};
	if (epoll_ctl(r->ep, EPOLL_CTL_ADD, c->b, &eb) < 0) {
		conn_close(r, i, true);
		return;
	}
	if (!c->connecting)
		conn_step(r, i, K_B);
}

/* Whether the n bytes at line are the token t, in time independent of
 * where they differ. */
static bool token_ok(const char *line, size_t n, const char *t)
{
	size_t tn = strlen(t);
	unsigned char d = n != tn;
	for (size_t k = 0; k < PORT_TOKEN_MAX; k++)
		d |= (unsigned char)((k < n ? line[k] : 0) ^ (k < tn ? t[k] : 0));
	return d == 0 && n <= PORT_TOKEN_MAX;
}

/* A connection awaiting its token: what the client sent, read; its first
 * line judged once it is whole. The rest of what was read goes inside
 * after it, the line itself never. */
static void auth_step(struct relay *r, size_t i)
{
	struct conn *c = &r->conn[i];
	bool eof = false;
	while (c->pre_len < sizeof(c->pre)) {
		ssize_t k =
			recv(c->a, c->pre + c->pre_len, sizeof(c->pre) - c->pre_len, MSG_DONTWAIT);
		if (k > 0) {
			c->pre_len += (size_t)k;
		} else if (k == 0) {
			eof = true;
			break;
		} else if (errno == EAGAIN) {
			break;
		} else {
			conn_close(r, i, true);
			return;
		}
	}
	char *nl = memchr(c->pre, '\n', c->pre_len);
	if (!nl) {
		if (eof || c->pre_len == sizeof(c->pre) || c->pre_len > PORT_TOKEN_MAX + 1)
			conn_close(r, i, true); /* no token line: reset */
		return;
	}
	size_t n = (size_t)(nl - c->pre);
	if (n && c->pre[n - 1] == '\r')
		n--;
	const struct lst *l = c->auth;
	if (!token_ok(c->pre, n, l->token)) {
		conn_close(r, i, true);
		return;
	}
	size_t rest = c->pre_len - (size_t)(nl + 1 - c->pre);
	c->auth = NULL;
	r->n_auth--;
	if (conn_pipes(c) < 0 ||
	    (rest && write(c->ab[1], nl + 1, rest) != (ssize_t)rest)) { /* an empty pipe */
		conn_close(r, i, true);
		return;
	}
	c->n_ab = rest;
	c->eof_a = eof;
	explicit_bzero(c->pre, sizeof(c->pre));
	c->pre_len = 0;
	connect_inside(r, i, l->port);
}

/* Connections whose token did not come in time: reset. The time to the
 * next deadline (ms, -1: none). */
static int auth_expire(struct relay *r)
{
	if (!r->n_auth)
		return -1;
	unsigned long long now = now_ms(), next = 0;
	for (size_t i = 0; i < PORT_MAX_CONNS; i++) {
		struct conn *c = &r->conn[i];
		if (c->a < 0 || !c->auth)
			continue;
		if (now >= c->deadline)
			conn_close(r, i, true);
		else if (!next || c->deadline < next)
			next = c->deadline;
	}
	return next ? (int)(next - now) + 1 : -1;
}

/* A connection accepted on listener l: checked (its peer's uid, or its
 * token first), then connected inward. */
static void on_accept(struct relay *r, const struct lst *l)
{
	int a = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (a < 0)
		return;
	if (!l->token[0] && !l->public && port_peer_uid(r->diag, a) != (long)r->owner) {
		struct linger lg = {1, 0}; /* another user's: reset at once */
		setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(a);
		return;
	}
	size_t i = 0;
	while (i < PORT_MAX_CONNS && r->conn[i].a >= 0)
		i++;
	if (i == PORT_MAX_CONNS) {
		close(a);
		return;
	}
	struct conn *c = &r->conn[i];
	r->n_conns++;
	c->a = a;
	int one = 1;
	setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct epoll_event ea = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.u64 = KEY(K_A, i)};
	if (epoll_ctl(r->ep, EPOLL_CTL_ADD, c->a, &ea) < 0) {
		conn_close(r, i, true);
		return;
	}
	if (r->n_conns == PORT_MAX_CONNS)
		pause_listeners(r, true);
	if (l->token[0]) { /* nothing inside until its token came */
		c->auth = l;
		c->deadline = now_ms() + PORT_TOKEN_WAIT_MS;
		r->n_auth++;
		auth_step(r, i);
		return;
	}
	if (conn_pipes(c) < 0) {
		conn_close(r, i, true);
		return;
	}
	connect_inside(r, i, l->port);
}

/* A word from the launcher: a listener to serve (its fd attached), or
 * one to close. */
static void on_ctl(struct relay *r)
{
	struct port_msg m;
	int fd = -1;
	ssize_t n = port_recv(r->ctl, &m, &fd);
	if (n == 0)
		_exit(0); /* the launcher is gone */
	if (n != (ssize_t)sizeof(m)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	size_t i = 0;
	if (m.type == PORT_ADD) {
		while (i < PORT_MAX && r->lst[i].fd >= 0)
			i++;
		struct epoll_event ev = {.events = r->paused ? 0 : EPOLLIN,
					 .data.u64 = KEY(K_LST, i)};
		if (fd < 0 || i == PORT_MAX || epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			if (fd >= 0)
				close(fd);
			reply(r->ctl, PORT_FAIL, m.key, EMFILE, "the relay cannot take it");
			return;
		}
		r->lst[i] = (struct lst){fd, m.key, m.port, m.public, ""};
		m.token[sizeof(m.token) - 1] = '\0';
		memcpy(r->lst[i].token, m.token, sizeof(m.token));
		explicit_bzero(m.token, sizeof(m.token));
		reply(r->ctl, PORT_OK, m.key, 0, NULL);
	} else if (m.type == PORT_DEL) {
		if (fd >= 0)
			close(fd);
		for (i = 0; i < PORT_MAX; i++)
			if (r->lst[i].fd >= 0 && r->lst[i].key == m.key) {
				close(r->lst[i].fd); /* epoll forgets it */
				r->lst[i].fd = -1;
				for (size_t k = 0; k < PORT_MAX_CONNS; k++)
					if (r->conn[k].a >= 0 && r->conn[k].auth == &r->lst[i])
						conn_close(r, k, true);
				explicit_bzero(r->lst[i].token, sizeof(r->lst[i].token));
			}
		reply(r->ctl, PORT_OK, m.key, 0, NULL);
	} else if (fd >= 0) {
		close(fd);
	}
}

static void serve(struct relay *r)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = KEY(K_CTL, 0)};
	if (epoll_ctl(r->ep, EPOLL_CTL_ADD, r->ctl, &ev) < 0)
		_exit(1);
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(r->ep, evs, 64, auth_expire(r));
		for (int k = 0; k < n; k++) {
			uint32_t kind = (uint32_t)(evs[k].data.u64 >> 32);
			size_t i = (uint32_t)evs[k].data.u64;
			if (kind == K_CTL)
				on_ctl(r);
			else if (kind == K_LST && r->lst[i].fd >= 0)
				on_accept(r, &r->lst[i]);
			else if ((kind == K_A || kind == K_B) && r->conn[i].a >= 0)
				conn_step(r, i, kind);
		}
	}
}

/* Into the sandbox's network namespace: as a plain user through its user
 * namespace first, whose owner the launcher is (setns(2) wants
 * CAP_SYS_ADMIN over the network namespace and in the caller's own). */
static int enter(int netns, bool root, struct ab_error *err)
{
	if (!root) {
		cleanup_fd int userns = ioctl(netns, NS_GET_USERNS);
		if (userns < 0 || setns(userns, CLONE_NEWUSER) < 0)
			return ab_error_set(
				err, errno,
				"port relay: cannot enter the sandbox's user namespace");
	}
	if (setns(netns, CLONE_NEWNET) < 0)
		return ab_error_set(err, errno,
				    "port relay: cannot enter the sandbox's network namespace");
	return 0;
}

int port_relay_main(int argc, char **argv)
{
	/* agentbox __port-relay OWNER PARENT, the control socket on 3 and the
	 * network namespace on 4 */
	long long owner = argc == 4 ? strtoll(argv[2], NULL, 10) : -1;
	long long parent = argc == 4 ? strtoll(argv[3], NULL, 10) : 0;
	struct stat st;
	if (argc != 4 || owner < 0 || parent <= 1 || fstat(PORT_HELPER_CTL, &st) < 0 ||
	    !S_ISSOCK(st.st_mode) || fstat(PORT_HELPER_NETNS, &st) < 0) {
		fputs("agentbox: __port-relay is agentbox's own, started by agentbox port\n",
		      stderr);
		return 125;
	}
	unpack_proc_prelude("agentbox-port");
	struct relay r = {.ctl = PORT_HELPER_CTL, .owner = (uid_t)owner, .ep = -1};
	for (size_t i = 0; i < PORT_MAX; i++)
		r.lst[i].fd = -1;
	for (size_t i = 0; i < PORT_MAX_CONNS; i++)
		r.conn[i] = (struct conn){.a = -1, .b = -1, .ab = {-1, -1}, .ba = {-1, -1}};
	struct ab_error err = {0};
	/* on the host: the peers it looks up are the host's */
	r.diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	r.ep = epoll_create1(EPOLL_CLOEXEC);
	struct timeval tv = {.tv_sec = 1}; /* the kernel answers at once */
	if (r.diag < 0 || r.ep < 0 ||
	    setsockopt(r.diag, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		ab_error_set(&err, errno, "port relay: cannot make its sockets");
		fail(r.ctl, &err);
	}
	int keep[] = {r.ctl, r.diag, r.ep, PORT_HELPER_NETNS};
	bool root = geteuid() == 0;
	confine_signals();
	if (confine_fds(keep, AB_ARRAY_SIZE(keep), &err) < 0 ||
	    confine_die_with((pid_t)parent, &err) < 0 || enter(PORT_HELPER_NETNS, root, &err) < 0)
		fail(r.ctl, &err);
	close(PORT_HELPER_NETNS);
	int landlocked;
	/* root's relay becomes nobody; a plain user's drops what it holds in
	 * the sandbox's user namespace */
	if ((root ? confine_identity(65534, 65534, &err) : confine_caps_drop(&err)) < 0 ||
	    confine_memory(RELAY_AS_MAX, &err) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
	    confine_landlock(NULL, -1, CONFINE_LL_SCOPE, &landlocked, &err) < 0 ||
	    confine_seccomp_inet(relay_syscalls, AB_ARRAY_SIZE(relay_syscalls), &err) < 0)
		fail(r.ctl, &err);
	reply(r.ctl, PORT_READY, 0, 0, NULL);
	serve(&r);
	return 0;
}
