#include "sandbox/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"
#include "view/idmap.h"
#include "sandbox/isolation.h"
#include "util/sync.h"
#include "util/util.h"
#include "util/vfork.h"

unsigned long userns_clone_flags(const struct ab_config *cfg)
{
	/* no CLONE_NEWCGROUP: the init makes the cgroup namespace itself once
	 * the launcher has moved it into the sandbox's cgroup, its root then */
	/* --isolation best without namespaces (isolation_bare.c) */
	if (cfg->isolation_missing & AB_MISSING_NAMESPACES)
		return 0;
	unsigned long f = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
	if (cfg->net != AB_NET_HOST) /* none, and the proxy's */
		f |= CLONE_NEWNET;
	return f;
}

int userns_write_maps(pid_t pid, const struct ab_config *cfg, struct ab_error *err)
{
	if (cfg->isolation_missing & AB_MISSING_NAMESPACES) /* no user namespace */
		return 0;
	/* without CAP_SETGID on the host, a gid map needs setgroups denied
	 * (user_namespaces(7)); with it, the sandbox drops its groups itself */
	return idmap_write_maps(pid, cfg->uid, cfg->host_uid, cfg->gid, cfg->host_gid,
				geteuid() != 0, err);
}

int userns_lock_view(const struct ab_config *cfg, struct ab_error *err)
{
	/* mounts copied into a mount namespace owned by a less privileged user
	 * namespace are locked (mount_namespaces(7)): their flags cannot be
	 * changed nor can they be unmounted to reveal what is beneath, even by
	 * a process holding CAP_SYS_ADMIN in the nested namespace */
	/* the first mount namespace stays referenced for the init's life:
	 * released here, its teardown (every mount and superblock of the
	 * view, after an RCU grace period) would be paid on the start's path;
	 * with the init's end it goes with the second, off the launcher's
	 * path (session.c). Close-on-exec: no command ever holds it, and
	 * without capabilities the init cannot enter it (setns(2)). */
	static int first_ns = -1;
	if (first_ns < 0)
		first_ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return ab_error_set(err, errno, "cannot lock the view in a nested namespace");
	/* /proc/self of a non-dumpable process belongs to root, who is not
	 * mapped here: dumpable just long enough to write our own maps (the
	 * caller makes it non-dumpable again; nothing else runs meanwhile) */
	prctl(PR_SET_DUMPABLE, 1);
	return idmap_write_maps(0, cfg->uid, cfg->uid, cfg->gid, cfg->gid, true, err);
}

int userns_become_sandbox_user(const struct ab_config *cfg, bool by_root, struct ab_error *err)
{
	/* started by root: drop root's supplementary groups, which the
	 * kernel would otherwise keep checking against the host's files */
	if (by_root && setgroups(0, NULL) < 0)
		return ab_error_set(err, errno, "cannot drop supplementary groups");
	if (setresgid(cfg->gid, cfg->gid, cfg->gid) < 0)
		return ab_error_set(err, errno, "cannot become gid %u", (unsigned)cfg->gid);
	if (setresuid(cfg->uid, cfg->uid, cfg->uid) < 0)
		return ab_error_set(err, errno, "cannot become uid %u", (unsigned)cfg->uid);
	return 0;
}

/* Inotify instances and watches are counted per user up the chain of user
 * namespaces, so a sandbox's count against the user who created it (host
 * root, when agentbox runs as root) up to the host's per-user limit: a
 * sandbox without a limit of its own could take them all and leave that
 * user's own programs none. The sandbox's namespace gets half of the host's
 * limit. Needs CAP_SYS_RESOURCE in the sandbox's user namespace, whose
 * /proc/sys/user/ files these are; best effort, as a read-only /proc/sys
 * (agentbox in a container) leaves only the host's limit.
 *
 * /proc/sys/user is looked up once, both files beside it by its fd: each
 * user namespace has its own "user" there, and the lookup of that name
 * compares it against the entries the dcache keeps for every other user
 * namespace's (proc_sys_compare), the costliest step of this at each
 * start where many sandboxes have run. */
void userns_limit_inotify(void)
{
	static const char *const files[][2] = {
		{"/proc/sys/fs/inotify/max_user_instances", "max_inotify_instances"},
		{"/proc/sys/fs/inotify/max_user_watches", "max_inotify_watches"},
	};
	cleanup_fd int dir = -1;
	for (size_t i = 0; i < AB_ARRAY_SIZE(files); i++) {
		int host = ab_read_int(files[i][0]);
		if (host <= 1)
			continue;
		if (dir < 0 && (dir = open("/proc/sys/user", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
			return;
		char v[32];
		snprintf(v, sizeof(v), "%d\n", host / 2);
		cleanup_fd int fd = openat(dir, files[i][1], O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && write(fd, v, strlen(v)) < 0)
			continue;
	}
}

/* Loopback up in the caller's network namespace, by socket *s (the
 * caller's to close, also on failure). Returns 0 or -1 (errno). */
static int loopback_up(int *s)
{
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if ((*s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
	    ioctl(*s, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	return ioctl(*s, SIOCSIFFLAGS, &ifr);
}

int userns_setup_uts_net(const struct ab_config *cfg, bool net_beside, struct ab_error *err)
{
	/* --isolation best without uts (isolation.h) */
	if (!(cfg->isolation_missing & AB_MISSING_UTS) &&
	    sethostname(cfg->hostname, strlen(cfg->hostname)) < 0)
		return ab_error_set(err, errno, "cannot set the host name to '%s'", cfg->hostname);
	/* the launcher's is up already (userns_make_net) */
	if (cfg->net == AB_NET_HOST || net_beside)
		return 0;
	cleanup_fd int s = -1;
	if (loopback_up(&s) < 0)
		return ab_error_set(err, errno, "cannot bring up the loopback interface");
	return 0;
}

bool userns_net_beside(const struct ab_config *cfg)
{
	return (userns_clone_flags(cfg) & CLONE_NEWNET) && prctl(PR_GET_SECCOMP) == 0;
}

/* What a net_maker says: err 0 with the namespace's fd along, or the
 * errno of the step it failed at. */
struct net_made {
	int32_t err;
	int32_t step;
};

static const char *const net_steps[] = {
	"cannot enter the sandbox's user namespace",
	"cannot create the sandbox's network namespace",
	"cannot bring up the loopback interface",
	"cannot open the sandbox's network namespace",
};

struct net_maker {
	int userns; /* the sandbox's */
	int sock;   /* where the answer goes */
};

/* In the sandbox's user namespace, with its capabilities there: a network
 * namespace it owns, as CLONE_NEWNET makes it, with loopback up; its fd
 * goes back on m->sock. Its own fds go with its exit. */
static int net_maker(void *arg)
{
	const struct net_maker *m = arg;
	struct net_made r = {0, 0};
	int s = -1, net = -1;
	if (setns(m->userns, CLONE_NEWUSER) < 0)
		goto fail;
	r.step++;
	if (unshare(CLONE_NEWNET) < 0)
		goto fail;
	r.step++;
	if (loopback_up(&s) < 0)
		goto fail;
	r.step++;
	if ((net = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		goto fail;
	return packet_send(m->sock, &r, sizeof(r), &net, 1) < 0;
fail:
	r.err = errno;
	return packet_send(m->sock, &r, sizeof(r), NULL, 0) < 0;
}

int userns_make_net(int userns, struct ab_error *err)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return ab_error_set(err, errno, "%s", net_steps[1]);
	/* the launcher is suspended until the child has exited, which runs on
	 * this frame (a fork under Valgrind, which the answer survives) */
	_Alignas(16) char stack[16384];
	struct net_maker m = {.userns = userns, .sock = sp[1]};
	pid_t pid = ab_vfork_child(net_maker, &m, 0, stack, sizeof(stack));
	int e = errno;
	close(sp[1]);
	if (pid < 0) {
		close(sp[0]);
		return ab_error_set(err, e, "%s", net_steps[1]);
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	struct net_made r;
	int net = -1;
	size_t n = 0;
	ssize_t got = packet_recv(sp[0], &r, sizeof(r), &net, 1, &n);
	close(sp[0]);
	if (got == (ssize_t)sizeof(r) && r.err == 0 && n == 1)
		return net;
	if (n)
		close(net);
	if (got != (ssize_t)sizeof(r) || r.err <= 0 || r.step < 0 ||
	    (size_t)r.step >= AB_ARRAY_SIZE(net_steps))
		return ab_error_plain(err, EIO, "%s: its maker died", net_steps[1]);
	if (r.err == ENOSPC)
		return ab_error_plain(err, ENOSPC,
				      "%s: too many network namespaces "
				      "(sysctl user.max_net_namespaces)",
				      net_steps[r.step]);
	return ab_error_set(err, r.err, "%s", net_steps[r.step]);
}
