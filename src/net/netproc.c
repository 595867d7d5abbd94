/* The network helper (netproc.h). The helper's side: it sets itself up
 * (the CA, the name service's modules), confines itself (confine.h) and
 * serves the sandbox's proxy (netproxy.h), telling the launcher what it
 * allowed and denied. The launcher's side: its start, its
 * messages checked as hostile (each bounded, typed, in turn; a broken one
 * kills it), whose command each connection is (the launcher reads the
 * sandbox's /proc, the helper cannot), the reports, and its death: the
 * sandbox's network is then closed (the listener was the helper's only)
 * and every result says why. */
#include "net/netproc.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine/confine.h"
#include "util/error.h"
#include "net/netproxy.h"
#include "net/netsecret.h"
#include "util/util.h"

#define SETUP_MS    30000
#define ANSWER_MS   5000
#define BUNDLE_MAX  (16 << 20)
#define HELPER_TAGS 4096 /* connections tagged at once, at most */

struct np_tag {
	uint64_t id, owner;
};

struct netproc {
	pid_t pid;
	bool reaped;
	int sock, pidfd;
	struct netproxy *rules; /* the policy's copy: checked and answered here */
	struct ab_net_report total;
	netproc_owner_fn owner;
	netproc_report_fn report;
	void *route_arg;
	pid_t init;
	struct np_tag *tags;
	size_t n_tags;
	uint64_t seq;	      /* the last question's */
	bool answered;	      /* its answer came */
	uint32_t answer_code; /* NP_RULES_SET's */
	char answer_msg[512];
	bool set_up;   /* it said NP_SET_UP */
	char died[96]; /* "" while it lives */
	char buf[sizeof(struct np_head) + NP_PAYLOAD_MAX];
};

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

/* ---- the helper's side: set up, confined, serving ---- */

/* Virtual memory at most: the proxy's buffers (8 * NET_HEAD_MAX each way
 * per connection), up to NET_TERM_MAX threads' stacks, OpenSSL. */
#define HELPER_AS_MAX (1536ULL << 20)

/* What name lookups read (glibc re-reads them as they change), and the
 * host's CA certificates, which OpenSSL may look up by hash as it verifies
 * an upstream; nothing else of the filesystem is readable once set up. */
static const char *const readable[] = {
	"/etc/hosts",
	"/etc/resolv.conf",
	"/etc/nsswitch.conf",
	"/etc/host.conf",
	"/etc/gai.conf",
	"/etc/services",
	"/etc/ssl/certs",
	"/usr/lib/ssl/certs",
	"/etc/pki/tls/certs",
	"/etc/pki/ca-trust",
	NULL,
};

#define SYS(name)                                                                                  \
	{                                                                                          \
		.nr = SCMP_SYS(name), .arg = -1                                                    \
	}
/* What relaying, TLS and lookups need beyond confine_base and
 * confine_inet: no bind, listen, exec, ptrace, kill, unix sockets; files
 * opened read-only (and Landlock says which). */
static const struct confine_syscall net_syscalls[] = {
	{.nr = SCMP_SYS(socket), .arg = 0, .value = AF_INET, .mask = 0},
	{.nr = SCMP_SYS(socket), .arg = 0, .value = AF_INET6, .mask = 0},
	{.nr = SCMP_SYS(socket), .arg = 0, .value = AF_NETLINK, .mask = 0},
	SYS(recvmmsg),
	SYS(sendmmsg),
	{.nr = SCMP_SYS(openat),
	 .arg = 2,
	 .value = O_RDONLY,
	 .mask = O_ACCMODE | O_CREAT | O_TRUNC},
	SYS(uname),
	SYS(sysinfo),
};

static int np_send(int sock, const struct np_head *h, const void *payload, size_t len, int fd)
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

static void sink_accepted(void *arg, uint64_t id, unsigned port)
{
	struct np_head h = {.type = NP_ACCEPT, .a = port, .id = id};
	np_send(*(int *)arg, &h, NULL, 0, -1);
}

static void sink_record(void *arg, uint64_t id, unsigned client_port, bool allowed,
			const char *host, unsigned port, const char *why)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%.300s%c%.600s", host, 0, why ? why : "");
	struct np_head h = {.type = NP_RECORD, .a = client_port, .b = allowed, .c = port, .id = id};
	np_send(*(int *)arg, &h, buf, (size_t)n + 1, -1);
}

static void sink_closed(void *arg, uint64_t id)
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

static _Noreturn void nethelper_main(int sock, pid_t parent, const struct ab_config *cfg,
				     struct net_secrets *sec)
{
	struct ab_error err = {0};
	if (sock < 3) { /* above stdio, which /dev/null takes */
		int up = fcntl(sock, F_DUPFD_CLOEXEC, 3);
		close(sock);
		sock = up;
	}
	sock_g = sock;
	int keep[] = {sock}; /* 0-2 go onto /dev/null: a stray write reaches no socket */
	if (sock < 0)
		_exit(1);
	confine_signals();
	prctl(PR_SET_NAME, "agentbox-net"); /* ps names it; the tests find it by that */
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
	int landlocked;
	mallopt(M_ARENA_MAX, 2); /* each arena reserves 64 MiB of RLIMIT_AS */
	if (confine_identity(uid, gid, &err) < 0 || confine_memory(HELPER_AS_MAX, &err) < 0 ||
	    confine_landlock(readable, -1, CONFINE_LL_SCOPE, &landlocked, &err) < 0)
		fail(&err);
	struct np_head up = {.type = NP_SET_UP};
	np_send(sock, &up, NULL, 0, -1);
	int lfd = recv_listener(sock, &err);
	struct netproxy *p = NULL;
	if (lfd < 0 || netproxy_new(cfg, sec, lfd, &p, &err) < 0)
		fail(&err);
	struct netproxy_sink sink = {sink_accepted, sink_record, sink_closed, &sock_g};
	netproxy_set_sink(p, &sink);
	if (confine_seccomp_inet(net_syscalls, AB_ARRAY_SIZE(net_syscalls), &err) < 0)
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

/* ---- the launcher's side ---- */

/* ---- its death ---- */

static void reap(struct netproc *np, bool kill_it)
{
	if (np->pid <= 0 || np->reaped)
		return;
	if (kill_it)
		kill(np->pid, SIGKILL);
	/* its socket closes as it exits, a moment before it can be reaped */
	struct pollfd pf = {.fd = np->pidfd, .events = POLLIN};
	if (np->pidfd >= 0 && !kill_it)
		(void)poll(&pf, 1, 1000);
	int st = 0;
	pid_t r = waitpid(np->pid, &st, WNOHANG);
	if (r == 0) {
		kill(np->pid, SIGKILL);
		while ((r = waitpid(np->pid, &st, 0)) < 0 && errno == EINTR)
			;
	}
	np->reaped = true;
	if (np->died[0] || kill_it)
		return;
	if (r == np->pid && WIFSIGNALED(st))
		snprintf(np->died, sizeof(np->died), "network helper died (signal %d)",
			 WTERMSIG(st));
	else if (r == np->pid && WIFEXITED(st))
		snprintf(np->died, sizeof(np->died), "network helper died (exit status %d)",
			 WEXITSTATUS(st));
	else
		snprintf(np->died, sizeof(np->died), "network helper died");
}

/* It died, or broke the protocol (why: then it is killed). */
static void dead(struct netproc *np, const char *why)
{
	if (np->died[0] || np->sock < 0)
		return;
	if (why)
		snprintf(np->died, sizeof(np->died), "network helper killed: %s", why);
	reap(np, why != NULL);
	snprintf(np->total.failed, sizeof(np->total.failed), "%s", np->died);
	fprintf(stderr, "agentbox: %s: the sandbox's network is closed\n", np->died);
	ab_close_keep_errno(np->sock);
	ab_close_keep_errno(np->pidfd);
	np->sock = np->pidfd = -1;
}

/* ---- its messages ---- */

/* One message into np->buf: its length, 0 when none is there, -1 when it
 * died or sent something no message can be (then dead() was called). */
static ssize_t recv_one(struct netproc *np, bool wait_ms_given, int wait_ms)
{
	if (np->sock < 0)
		return -1;
	if (wait_ms_given) {
		struct pollfd pf = {.fd = np->sock, .events = POLLIN};
		if (poll(&pf, 1, wait_ms) <= 0)
			return 0;
	}
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {np->buf, sizeof(np->buf)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.b,
			   .msg_controllen = sizeof(u.b)};
	ssize_t n = recvmsg(np->sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	bool fds = false; /* it passes none: any it did are closed */
	for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			fds = true;
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				close(fd);
			}
		}
	if (n <= 0) {
		dead(np, NULL);
		return -1;
	}
	if (fds || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    n < (ssize_t)sizeof(struct np_head)) {
		dead(np, "a malformed message");
		return -1;
	}
	return n;
}

static struct np_tag *tag_of(struct netproc *np, uint64_t id)
{
	for (size_t i = 0; id && i < np->n_tags; i++)
		if (np->tags[i].id == id)
			return &np->tags[i];
	return NULL;
}

/* The command whose process connected from port (0: none). */
static uint64_t owner_of(struct netproc *np, uint32_t port)
{
	if (!np->owner || np->init <= 0 || !port || port > 65535)
		return 0;
	pid_t pid = netproxy_peer_pid(np->init, port);
	return pid > 0 ? np->owner(pid, np->route_arg) : 0;
}

static void on_accept(struct netproc *np, const struct np_head *h)
{
	uint64_t owner = owner_of(np, h->a);
	if (h->id && !tag_of(np, h->id)) {
		if (np->n_tags == HELPER_TAGS) /* the oldest goes: a lying helper's own loss */
			memmove(np->tags, np->tags + 1, --np->n_tags * sizeof(*np->tags));
		np->tags[np->n_tags++] = (struct np_tag){h->id, owner};
	}
	struct np_head t = {.type = NP_TAGGED, .id = h->id};
	if (np_send(np->sock, &t, NULL, 0, -1) < 0 && errno != EAGAIN)
		dead(np, NULL);
}

static void on_closed(struct netproc *np, const struct np_head *h)
{
	struct np_tag *t = tag_of(np, h->id);
	if (t) {
		size_t i = (size_t)(t - np->tags);
		memmove(t, t + 1, (--np->n_tags - i) * sizeof(*t));
	}
}

/* NUL-ended within len, and printable: it reaches the caller's terminal */
static bool text_ok(const char *s, size_t len)
{
	const char *end = memchr(s, 0, len);
	for (const char *c = s; end && c < end; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return false;
	return end != NULL;
}

static void on_record(struct netproc *np, const struct np_head *h, const char *pl, size_t len)
{
	/* "host\0why\0", each bounded; host: what the sandbox asked for */
	const char *host = pl, *why = NULL;
	if (text_ok(pl, len) && strlen(host) < 300) {
		why = host + strlen(host) + 1;
		if ((size_t)(why - pl) >= len || !text_ok(why, len - (size_t)(why - pl)))
			why = NULL;
	}
	if (!why || h->b > 1 || h->c > 65535) {
		dead(np, "a malformed report");
		return;
	}
	bool allowed = h->b;
	const char *w = allowed ? NULL : why;
	net_report_add(&np->total, allowed, host, h->c, w);
	struct np_tag *t = tag_of(np, h->id);
	uint64_t owner = t ? t->owner : h->id ? 0 : owner_of(np, h->a);
	struct ab_net_report *r = owner ? np->report(owner, np->route_arg) : NULL;
	if (r)
		net_report_add(r, allowed, host, h->c, w);
}

/* What it said, until nothing more is there. */
void netproc_dispatch(struct netproc *np)
{
	ssize_t n;
	while ((n = recv_one(np, false, 0)) > 0) {
		struct np_head h;
		memcpy(&h, np->buf, sizeof(h));
		const char *pl = np->buf + sizeof(h);
		size_t len = (size_t)n - sizeof(h);
		switch (h.type) {
		case NP_ACCEPT:
			on_accept(np, &h);
			break;
		case NP_RECORD:
			on_record(np, &h, pl, len);
			break;
		case NP_CLOSED:
			on_closed(np, &h);
			break;
		case NP_SETTLED:
		case NP_RULES_SET:
			if (h.id == np->seq) {
				np->answered = true;
				np->answer_code = h.a;
				snprintf(np->answer_msg, sizeof(np->answer_msg), "%.*s",
					 (int)strnlen(pl, len), pl);
			}
			break;
		default:
			dead(np, "a message out of turn");
			return;
		}
	}
	/* its pidfd said so, with nothing left to read */
	struct pollfd pf = {.fd = np->pidfd, .events = POLLIN};
	if (n == 0 && np->pidfd >= 0 && poll(&pf, 1, 0) == 1)
		dead(np, NULL);
}

/* Ask (h, seq set here) and read until its answer, at most ms; false when
 * none came. */
static bool ask(struct netproc *np, struct np_head *h, const void *pl, size_t len, int ms)
{
	if (np->sock < 0)
		return false;
	h->id = ++np->seq;
	np->answered = false;
	if (np_send(np->sock, h, pl, len, -1) < 0)
		return false;
	unsigned long long deadline = now_ms() + (unsigned)ms;
	while (!np->answered && np->sock >= 0) {
		unsigned long long now = now_ms();
		if (now >= deadline)
			return false;
		struct pollfd pf[2] = {{.fd = np->sock, .events = POLLIN},
				       {.fd = np->pidfd, .events = POLLIN}};
		if (poll(pf, 2, (int)(deadline - now)) > 0)
			netproc_dispatch(np);
	}
	return np->answered;
}

/* ---- start ---- */

static int setup_error(const struct np_head *h, const char *pl, size_t len, struct ab_error *err)
{
	int code = h->a > 0 && h->a < 4096 ? (int)h->a : EIO;
	/* its words, as text: bounded, control characters out */
	char msg[400];
	size_t k = 0;
	for (size_t i = 0; i < len && pl[i] && k + 1 < sizeof(msg); i++)
		msg[k++] = (unsigned char)pl[i] < 0x20 ? '?' : pl[i];
	msg[k] = 0;
	return ab_error_plain(err, code, "%s", k ? msg : "the network helper failed");
}

/* Its setup's messages until `until`: the CA bundle's pieces into sec. */
static int await(struct netproc *np, uint32_t until, struct net_secrets *sec, struct ab_error *err)
{
	unsigned long long deadline = now_ms() + SETUP_MS;
	for (;;) {
		unsigned long long now = now_ms();
		if (now >= deadline) {
			dead(np, "its setup took too long");
			return ab_error_plain(err, ETIMEDOUT, "the network helper did not start");
		}
		ssize_t n = recv_one(np, true, (int)(deadline - now));
		if (n < 0)
			return ab_error_plain(err, EIO, "the %s while it was set up",
					      np->died[0] ? np->died : "network helper died");
		if (n == 0)
			continue;
		struct np_head h;
		memcpy(&h, np->buf, sizeof(h));
		const char *pl = np->buf + sizeof(h);
		size_t len = (size_t)n - sizeof(h);
		if (h.type == until)
			return 0;
		if (h.type == NP_ERROR) {
			int r = setup_error(&h, pl, len, err);
			reap(np, true);
			return r;
		}
		if (h.type != NP_BUNDLE || !sec || until != NP_SET_UP ||
		    sec->bundle_len + len > BUNDLE_MAX) {
			dead(np, "a message out of turn");
			return ab_error_plain(err, EPROTO, "the network helper broke its protocol");
		}
		char *b = realloc(sec->bundle, sec->bundle_len + len + 1);
		if (!b)
			return ab_error_set(err, ENOMEM, "starting the network helper");
		memcpy(b + sec->bundle_len, pl, len);
		sec->bundle = b;
		sec->bundle_len += len;
	}
}

int netproc_start(const struct ab_config *cfg, struct net_secrets *sec, struct netproc **out,
		  struct ab_error *err)
{
	*out = NULL;
	struct netproc *np = calloc(1, sizeof(*np));
	if (!np)
		return ab_error_set(err, ENOMEM, "starting the network helper");
	np->sock = np->pidfd = -1;
	np->pid = -1;
	np->total.on = true;
	int r = netproxy_policy_new(cfg, &np->rules, err);
	int sv[2];
	if (r == 0 && (!(np->tags = calloc(HELPER_TAGS, sizeof(*np->tags))) ||
		       socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0))
		r = ab_error_set(err, errno ? errno : ENOMEM, "starting the network helper");
	if (r < 0) {
		netproc_free(np);
		return r;
	}
	pid_t parent = getpid();
	np->pid = fork();
	if (np->pid == 0) {
		close(sv[0]);
		nethelper_main(sv[1], parent, cfg, sec);
	}
	close(sv[1]);
	np->sock = sv[0];
	if (np->pid < 0) {
		netproc_free(np);
		return ab_error_set(err, errno, "starting the network helper");
	}
	np->pidfd = (int)syscall(SYS_pidfd_open, np->pid, 0);
	if (sec) { /* the helper's copy made it; the launcher's is its answer */
		free(sec->bundle);
		sec->bundle = NULL;
		sec->bundle_len = 0;
	}
	if (np->pidfd < 0)
		r = ab_error_set(err, errno, "starting the network helper");
	/* the CA's bundle goes into the sandbox: waited for now; without one
	 * the helper sets up while the sandbox does (netproc_serve waits) */
	if (r == 0 && sec)
		r = await(np, NP_SET_UP, sec, err);
	np->set_up = r == 0 && sec;
	if (r == 0 && sec && !sec->bundle_len)
		r = ab_error_plain(err, EPROTO, "the network helper made no CA");
	if (r < 0) {
		netproc_free(np);
		return r;
	}
	*out = np;
	return 0;
}

int netproc_serve(struct netproc *np, int listen_fd, netproc_owner_fn owner,
		  netproc_report_fn report, void *arg, pid_t init, struct ab_error *err)
{
	struct np_head h = {.type = NP_LISTENER};
	int r = np->set_up ? 0 : await(np, NP_SET_UP, NULL, err);
	if (r < 0) {
		close(listen_fd);
		return r;
	}
	np->set_up = true;
	r = np->sock < 0 ? -EPIPE : np_send(np->sock, &h, NULL, 0, listen_fd);
	close(listen_fd); /* the helper's only: its death refuses connections */
	if (r < 0)
		return ab_error_set(err, -r, "passing the proxy's socket to the network helper");
	if ((r = await(np, NP_SERVING, NULL, err)) < 0)
		return r;
	fcntl(np->sock, F_SETFL, O_NONBLOCK);
	np->owner = owner;
	np->report = report;
	np->route_arg = arg;
	np->init = init;
	return 0;
}

int netproc_fd(const struct netproc *np)
{
	return np->sock;
}

int netproc_pidfd(const struct netproc *np)
{
	return np->pidfd;
}

const char *netproc_died(const struct netproc *np)
{
	return np->died[0] ? np->died : NULL;
}

void netproc_settle(struct netproc *np, int ms)
{
	netproc_dispatch(np);
	struct np_head h = {.type = NP_SETTLE, .a = (uint32_t)ms};
	(void)ask(np, &h, NULL, 0, ms + 250);
}

/* ---- the policy ---- */

static int pack(char *buf, size_t *off, char *const *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		size_t len = strlen(v[i]) + 1;
		if (*off + len > NP_PAYLOAD_MAX)
			return -E2BIG;
		memcpy(buf + *off, v[i], len);
		*off += len;
	}
	return 0;
}

int netproc_set_rules(struct netproc *np, char *const *allow, size_t n_allow, char *const *deny,
		      size_t n_deny, struct ab_error *err)
{
	if (np->died[0])
		return ab_error_plain(err, EPIPE, "the %s: the sandbox's network is closed",
				      np->died);
	/* checked here first: the helper's answer is only its word */
	int r = netproxy_set_rules(np->rules, allow, n_allow, deny, n_deny, err);
	if (r < 0)
		return r;
	cleanup_free char *buf = malloc(NP_PAYLOAD_MAX);
	size_t off = 0;
	if (!buf)
		return ab_error_set(err, ENOMEM, "changing the network policy");
	if (pack(buf, &off, allow, n_allow) < 0 || pack(buf, &off, deny, n_deny) < 0)
		return ab_error_plain(err, E2BIG,
				      "the network policy is too long (%d bytes at most)",
				      NP_PAYLOAD_MAX);
	struct np_head h = {
		.type = NP_RULES, .a = allow != NULL, .b = deny != NULL, .c = (uint32_t)n_allow};
	if (!ask(np, &h, buf, off, ANSWER_MS))
		return ab_error_plain(err, EIO, "the %s: the policy did not change",
				      np->died[0] ? np->died : "network helper did not answer");
	if (np->answer_code)
		return ab_error_plain(err, EIO, "the network helper refused the policy");
	return 0;
}

size_t netproc_rules(const struct netproc *np, bool deny, const char **out, size_t max)
{
	return netproxy_rules(np->rules, deny, out, max);
}

const struct ab_net_report *netproc_total(const struct netproc *np)
{
	return &np->total;
}

void netproc_free(struct netproc *np)
{
	if (!np)
		return;
	reap(np, true);
	ab_close_keep_errno(np->sock);
	ab_close_keep_errno(np->pidfd);
	netproxy_free(np->rules);
	net_report_free(&np->total);
	free(np->tags);
	free(np);
}
