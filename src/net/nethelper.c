/* The network helper's side (netproc.h): a child of the launcher that
 * sets itself up (the CA, the name service's modules), confines itself
 * (confine/confine.h) and then serves the sandbox's proxy (netproxy.h),
 * telling the launcher what it allowed and denied. Nothing here is
 * trusted by the launcher: it checks every message (netproc.c). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine/confine.h"
#include "net/netproc.h"
#include "net/netproxy.h"
#include "net/netsecret.h"
#include "util/util.h"

/* Virtual memory at most: the proxy's buffers (8 * NET_HEAD_MAX each way
 * per connection), up to NET_TERM_MAX threads' stacks, OpenSSL. */
#define HELPER_AS_MAX (1536ULL << 20)

/* What name lookups read (glibc re-reads them as they change); nothing
 * else of the filesystem is readable once set up. */
static const char *const resolv_files[] = {
	"/etc/hosts",
	"/etc/resolv.conf",
	"/etc/nsswitch.conf",
	"/etc/host.conf",
	"/etc/gai.conf",
	"/etc/services",
	NULL,
};

#define SYS(name)                                                                                  \
	{                                                                                          \
		SCMP_SYS(name), -1, 0, 0                                                           \
	}
#define SOCKET(family)                                                                             \
	{                                                                                          \
		SCMP_SYS(socket), 0, family, 0                                                     \
	}

/* What relaying, TLS and lookups need beyond confine_base: no bind,
 * listen, exec, ptrace, kill, file writes (Landlock), unix sockets. */
static const struct confine_syscall net_syscalls[] = {
	SOCKET(AF_INET), SOCKET(AF_INET6), SOCKET(AF_NETLINK), SYS(connect),	 SYS(accept4),
	SYS(getsockopt), SYS(setsockopt),  SYS(getsockname),   SYS(getpeername), SYS(shutdown),
	SYS(recvfrom),	 SYS(sendto),	   SYS(recvmsg),       SYS(sendmsg),	 SYS(recvmmsg),
	SYS(sendmmsg),	 SYS(openat),	   SYS(uname),	       SYS(sysinfo),	 SYS(pipe2),
	SYS(getdents64),
};

int np_send(int sock, const struct np_head *h, const void *payload, size_t len, int fd)
{
	struct iovec iov[2] = {{(void *)h, sizeof(*h)}, {(void *)payload, len}};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = payload && len ? 2 : 1};
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	ssize_t n;
	while ((n = sendmsg(sock, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return n < 0 ? -errno : 0;
}

static int sock_g = -1;

static _Noreturn void fail(const struct ab_error *err)
{
	struct np_head h = {.type = NP_ERROR, .a = (uint32_t)(err->code > 0 ? err->code : EIO)};
	np_send(sock_g, &h, err->msg, strlen(err->msg) + 1, -1);
	_exit(1);
}

/* The name service's modules of the hosts: line loaded now (glibc's own
 * dlopen of them later finds them loaded: no file to open), and one
 * lookup, so that its configuration is read before Landlock. */
static void warm_nss(void)
{
	FILE *f = fopen("/etc/nsswitch.conf", "re");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "hosts:", 6) != 0)
			continue;
		for (char *save = NULL, *w = strtok_r(line + 6, " \t\n", &save); w;
		     w = strtok_r(NULL, " \t\n", &save)) {
			if (w[0] == '[')
				continue;
			char so[128];
			snprintf(so, sizeof(so), "libnss_%s.so.2", w);
			(void)dlopen(so, RTLD_NOW | RTLD_NODELETE); /* files, dns: in libc */
		}
	}
	if (f)
		fclose(f);
	struct addrinfo *ai = NULL, hints = {.ai_socktype = SOCK_STREAM};
	if (getaddrinfo("localhost", "80", &hints, &ai) == 0)
		freeaddrinfo(ai);
}

/* ---- the proxy's sink: its words to the launcher ---- */

static void on_accepted(void *arg, uint64_t id, unsigned port)
{
	struct np_head h = {.type = NP_ACCEPT, .a = port, .id = id};
	np_send(*(int *)arg, &h, NULL, 0, -1);
}

static void on_record(void *arg, uint64_t id, unsigned client_port, bool allowed, const char *host,
		      unsigned port, const char *why)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%.300s%c%.600s", host, 0, why ? why : "");
	struct np_head h = {.type = NP_RECORD, .a = client_port, .b = allowed, .c = port, .id = id};
	np_send(*(int *)arg, &h, buf, (size_t)n + 1, -1);
}

static void on_closed(void *arg, uint64_t id)
{
	struct np_head h = {.type = NP_CLOSED, .id = id};
	np_send(*(int *)arg, &h, NULL, 0, -1);
}

/* ---- the launcher's words ---- */

static void set_rules(struct netproxy *p, int sock, const struct np_head *h, const char *pl,
		      size_t len)
{
	char *v[1024];
	size_t n = 0;
	for (size_t off = 0; off < len && n < AB_ARRAY_SIZE(v);) {
		v[n++] = (char *)pl + off;
		off += strnlen(pl + off, len - off) + 1;
	}
	size_t na = h->c <= n ? h->c : n;
	struct ab_error err = {0};
	int r = netproxy_set_rules(p, h->a ? v : NULL, na, h->b ? v + na : NULL, n - na, &err);
	struct np_head a = {.type = NP_RULES_SET, .id = h->id, .a = r < 0 ? (uint32_t)-r : 0};
	np_send(sock, &a, err.msg, strlen(err.msg) + 1, -1);
}

static void on_launcher(struct netproxy *p, int sock)
{
	static char buf[sizeof(struct np_head) + NP_PAYLOAD_MAX];
	ssize_t n = recv(sock, buf, sizeof(buf), MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		_exit(0); /* the launcher has gone */
	if (n < (ssize_t)sizeof(struct np_head))
		return;
	struct np_head h;
	memcpy(&h, buf, sizeof(h));
	const char *pl = buf + sizeof(h);
	size_t len = (size_t)n - sizeof(h);
	if (h.type == NP_TAGGED) {
		netproxy_tagged(p, h.id);
	} else if (h.type == NP_SETTLE) {
		netproxy_dispatch(p); /* what already came, first */
		netproxy_settle(p, h.a > 1000 ? 1000 : (int)h.a);
		struct np_head a = {.type = NP_SETTLED, .id = h.id};
		np_send(sock, &a, NULL, 0, -1);
	} else if (h.type == NP_RULES) {
		set_rules(p, sock, &h, pl, len);
	}
}

static int recv_listener(int sock, struct ab_error *err)
{
	struct np_head h;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {&h, sizeof(h)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	ssize_t n;
	while ((n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n == 0)
		_exit(0);
	struct cmsghdr *c = n == sizeof(h) ? CMSG_FIRSTHDR(&m) : NULL;
	int fd = -1;
	if (c && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (h.type != NP_LISTENER || fd < 0)
		return ab_error_plain(err, EPROTO, "the network helper got no listener");
	return fd;
}

_Noreturn void nethelper_main(int sock, pid_t parent, const struct ab_config *cfg,
			      struct net_secrets *sec)
{
	struct ab_error err = {0};
	if (sock < 3) { /* above stdio, which /dev/null takes */
		int up = fcntl(sock, F_DUPFD_CLOEXEC, 3);
		close(sock);
		sock = up;
	}
	sock_g = sock;
	/* 0-2 onto /dev/null: a stray write to stderr reaches no socket */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; null >= 0 && fd < 3; fd++)
		if (fd != null && fd != sock)
			dup2(null, fd);
	int keep[] = {0, 1, 2, sock};
	if (sock < 0)
		_exit(1);
	if (confine_fds(keep, AB_ARRAY_SIZE(keep), &err) < 0 || confine_die_with(parent, &err) < 0)
		fail(&err);
	/* as the launcher's identity still: --net ca=FILE is the caller's */
	if (sec && net_secrets_make_ca(sec, &err) < 0)
		fail(&err);
	for (size_t off = 0; sec && off < sec->bundle_len; off += NP_PAYLOAD_MAX) {
		size_t len = sec->bundle_len - off;
		struct np_head h = {.type = NP_BUNDLE};
		np_send(sock, &h, sec->bundle + off, len < NP_PAYLOAD_MAX ? len : NP_PAYLOAD_MAX,
			-1);
	}
	warm_nss();
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (geteuid() == 0)
		uid = gid = 65534; /* nobody: no file, process or key of anyone */
	bool landlocked;
	mallopt(M_ARENA_MAX, 2); /* each arena reserves 64 MiB of RLIMIT_AS */
	if (confine_identity(uid, gid, &err) < 0 || confine_memory(HELPER_AS_MAX, &err) < 0 ||
	    confine_landlock(resolv_files, &landlocked, &err) < 0)
		fail(&err);
	struct np_head up = {.type = NP_SET_UP};
	np_send(sock, &up, NULL, 0, -1);
	int lfd = recv_listener(sock, &err);
	struct netproxy *p = NULL;
	if (lfd < 0 || netproxy_new(cfg, sec, lfd, &p, &err) < 0)
		fail(&err);
	struct netproxy_sink sink = {on_accepted, on_record, on_closed, &sock_g};
	netproxy_set_sink(p, &sink);
	struct confine_syscall all[128];
	size_t n = 0;
	for (size_t i = 0; i < confine_n_base && n < AB_ARRAY_SIZE(all); i++)
		all[n++] = confine_base[i];
	for (size_t i = 0; i < AB_ARRAY_SIZE(net_syscalls) && n < AB_ARRAY_SIZE(all); i++)
		all[n++] = net_syscalls[i];
	if (n < confine_n_base + AB_ARRAY_SIZE(net_syscalls)) {
		ab_error_plain(&err, E2BIG, "the network helper's syscall list is too long");
		fail(&err);
	}
	if (confine_seccomp(all, n, &err) < 0)
		fail(&err);
	struct np_head serving = {.type = NP_SERVING};
	np_send(sock, &serving, NULL, 0, -1);
	for (;;) {
		struct pollfd pf[2] = {{.fd = sock, .events = POLLIN},
				       {.fd = netproxy_fd(p), .events = POLLIN}};
		if (poll(pf, 2, -1) < 0)
			continue;
		if (pf[1].revents)
			netproxy_dispatch(p);
		if (pf[0].revents)
			on_launcher(p, sock);
	}
}
