/* A helper process confined before it touches hostile input (confine.h).
 * Anchors: OpenSSH's privilege separation (sshd's preauth child: a fresh
 * unprivileged identity, rlimits, its own seccomp filter), nsjail. */
#include "seccomp/confine.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/error.h"

int ab_confine_open_fds(int *fds, size_t max)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int self = dirfd(d), n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end || fd == self)
			continue;
		if ((size_t)n == max) {
			closedir(d);
			errno = EMFILE;
			return -1;
		}
		int i = n++;
		while (i > 0 && fds[i - 1] > fd) { /* ascending */
			fds[i] = fds[i - 1];
			i--;
		}
		fds[i] = (int)fd;
	}
	closedir(d);
	return n;
}

static bool kept(const struct ab_confine *c, int fd)
{
	if (fd <= 2)
		return true;
	for (size_t i = 0; i < c->n_keep; i++)
		if (c->keep[i] == fd)
			return true;
	return false;
}

static int close_others(const struct ab_confine *c, struct ab_error *err)
{
	int fds[4096];
	int n = ab_confine_open_fds(fds, sizeof(fds) / sizeof(fds[0]));
	if (n < 0)
		return ab_error_set(err, errno, "confine: cannot list /proc/self/fd");
	for (int i = 0; i < n; i++)
		if (!kept(c, fds[i]))
			close(fds[i]);
	return 0;
}

static int last_cap(void)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	int last = CAP_LAST_CAP;
	if (f) {
		if (fscanf(f, "%d", &last) != 1 || last < 0 || last > 63)
			last = CAP_LAST_CAP;
		fclose(f);
	}
	return last;
}

/* root's identity given up: the bounding set emptied first (that needs
 * CAP_SETPCAP), then no supplementary group, then gid and uid, all three
 * of each (a saved root uid would let it come back). */
static int become(const struct ab_confine *c, int last, struct ab_error *err)
{
	uid_t uid = c->uid ? c->uid : 65534;
	gid_t gid = c->gid ? c->gid : 65534;
	for (int cap = 0; cap <= last; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return ab_error_set(err, errno,
					    "confine: cannot drop capability %d from "
					    "the bounding set",
					    cap);
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return ab_error_set(err, errno, "confine: cannot become uid %u gid %u",
				    (unsigned)uid, (unsigned)gid);
	if (setresuid(0, 0, 0) == 0) /* must never work again */
		return ab_error_plain(err, EPERM, "confine: root came back after setresuid");
	return 0;
}

static int no_caps(struct ab_error *err)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {0};
	if (syscall(SYS_capset, &h, d) < 0)
		return ab_error_set(err, errno, "confine: cannot clear the capabilities");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return ab_error_set(err, errno, "confine: cannot clear the ambient capabilities");
	return 0;
}

static int filter(const char *const *names, bool sock_diag, struct ab_error *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return ab_error_plain(err, ENOMEM, "confine: seccomp_init failed");
	int rc = 0;
	for (size_t i = 0; names[i] && rc == 0; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
	}
	if (rc == 0 && sock_diag)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
				      SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
				      SCMP_A2(SCMP_CMP_EQ, NETLINK_SOCK_DIAG));
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc < 0)
		return ab_error_set(err, -rc, "confine: cannot load the seccomp filter");
	return 0;
}

int ab_confine(const struct ab_confine *c, struct ab_error *err)
{
	int last = last_cap(); /* before the fds go */
	if (close_others(c, err) < 0)
		return -1;
	if (c->max_as) {
		struct rlimit rl = {c->max_as, c->max_as};
		if (setrlimit(RLIMIT_AS, &rl) < 0)
			return ab_error_set(err, errno, "confine: cannot bound RLIMIT_AS");
	}
	struct rlimit core = {0, 0};
	setrlimit(RLIMIT_CORE, &core);
	if (geteuid() == 0 && become(c, last, err) < 0)
		return -1;
	if (no_caps(err) < 0)
		return -1;
	/* after the identity changed, which clears both */
	if ((c->parent_death_signal &&
	     prctl(PR_SET_PDEATHSIG, c->parent_death_signal, 0, 0, 0) < 0) ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return ab_error_set(err, errno, "confine: prctl failed");
	return c->syscalls ? filter(c->syscalls, c->sock_diag, err) : 0;
}
