/* A helper process confined (confine.h). Each step in the order it must
 * come: what needs a capability (the bounding set, the identity) before
 * the capabilities go; PR_SET_PDEATHSIG after the identity (a change of
 * uid clears it); no_new_privs before Landlock and seccomp; seccomp last,
 * so that the steps before it need none of its system calls. */
#include "confine/confine_spec.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine/landlock_compat.h"
#include "util/error.h"
#include "util/util.h"

int confine_caps_drop(struct ab_error *err)
{
	/* the bounding set first: dropping from it needs CAP_SETPCAP, which
	 * clearing the effective set below takes away */
	/* up to the kernel's last, not CAP_LAST_CAP: the kernel may know more
	 * than our headers; its capabilities are numbered without gaps, so the
	 * first EINVAL is past the last one (cap_valid) */
	for (int c = 0; c < 64; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL)
			break;
		/* an unprivileged process outside any user namespace
		 * of its own (isolation_bare.c) has no CAP_SETPCAP; it holds no
		 * capability, and no_new_privs below keeps exec from granting one */
		if (errno == EPERM && geteuid() != 0)
			break;
		return ab_error_set(err, errno, "cannot drop capability %d from the bounding set",
				    c);
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return ab_error_set(err, errno, "cannot clear the ambient capabilities");
	cap_t none = cap_init();
	if (!none)
		return ab_error_set(err, errno, "cannot drop capabilities");
	int r = cap_set_proc(none);
	int saved = errno;
	cap_free(none);
	if (r < 0)
		return ab_error_set(err, saved, "cannot drop capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return ab_error_set(err, errno, "cannot set no_new_privs");
	return 0;
}

static bool kept(int fd, const struct confine_spec *s)
{
	for (size_t i = 0; i < s->n_keep; i++)
		if (s->keep_fds[i] == fd)
			return true;
	return false;
}

/* 0, 1 and 2 on /dev/null (nothing the helper writes reaches the
 * launcher's terminal, and no file it opens takes their numbers), every
 * other fd but the kept closed. */
static int close_fds(const struct confine_spec *s, struct ab_error *err)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return ab_error_set(err, errno, "cannot open /dev/null");
	for (int fd = 0; fd < 3; fd++)
		if (kept(fd, s) || dup2(null, fd) < 0)
			return ab_error_set(err, kept(fd, s) ? EINVAL : errno,
					    "cannot put /dev/null on fd %d", fd);
	int hi = 2;
	for (size_t i = 0; i < s->n_keep; i++)
		hi = s->keep_fds[i] > hi ? s->keep_fds[i] : hi;
	for (int fd = 3; fd <= hi; fd++)
		if (!kept(fd, s))
			close(fd);
	if (syscall(SYS_close_range, hi + 1, ~0U, 0) < 0) /* Linux 5.9 */
		for (int fd = hi + 1; fd < 65536; fd++)
			close(fd);
	return 0;
}

static int identity(const struct confine_spec *s, struct ab_error *err)
{
	if (!s->switch_id)
		return 0;
	if (setgroups(0, NULL) < 0 || setresgid(s->gid, s->gid, s->gid) < 0 ||
	    setresuid(s->uid, s->uid, s->uid) < 0)
		return ab_error_set(err, errno, "cannot become uid %u gid %u", (unsigned)s->uid,
				    (unsigned)s->gid);
	return 0;
}

#define FS_ALL_V1 ((LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1)

int confine_landlock_ruleset(unsigned flags, int *out, int *abi_out, uint64_t *handled,
			     struct ab_error *err)
{
	*abi_out = 0;
	*out = -1;
	int abi =
		(int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1)
		return 0; /* ENOSYS, or disabled: EOPNOTSUPP */
	uint64_t fs = FS_ALL_V1;
	if (abi >= 2)
		fs |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5 && (flags & CONFINE_LL_IOCTL_DEV))
		fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	struct ab_landlock_ruleset_attr rs = {.handled_access_fs = fs};
	size_t size = sizeof(uint64_t);
	if (abi >= 4 && (flags & CONFINE_LL_NET)) {
		/* no rule: every TCP bind and connect is refused */
		rs.handled_access_net =
			LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
		size = 2 * sizeof(uint64_t);
	}
	if (abi >= 6 && (flags & CONFINE_LL_SCOPE)) {
		rs.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
		size = sizeof(rs);
	}
	int fd = (int)syscall(SYS_landlock_create_ruleset, &rs, size, 0);
	if (fd < 0)
		return ab_error_set(err, errno, "landlock: cannot create a ruleset");
	*out = fd;
	*abi_out = abi;
	*handled = fs;
	return 0;
}

/* A ruleset into *out that handles every right the kernel knows and
 * allows them beneath write_dir only; no TCP, no signal or abstract socket
 * out of the domain (as far as the kernel's ABI goes). *out -1 and *abi 0
 * without Landlock. */
static int landlock_ruleset(int write_dir, int *out, int *abi_out, struct ab_error *err)
{
	uint64_t fs;
	int r = confine_landlock_ruleset(CONFINE_LL_NET | CONFINE_LL_SCOPE | CONFINE_LL_IOCTL_DEV,
					 out, abi_out, &fs, err);
	if (r < 0 || *out < 0 || write_dir < 0)
		return r;
	struct landlock_path_beneath_attr pb = {.allowed_access = fs, .parent_fd = write_dir};
	if (syscall(SYS_landlock_add_rule, *out, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) {
		r = ab_error_set(err, errno, "landlock: cannot allow the directory");
		close(*out);
		*out = -1;
	}
	return r;
}

static int seccomp_allow(const struct confine_spec *s, struct ab_error *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return ab_error_plain(err, ENOMEM, "seccomp: cannot make a filter");
	int r = 0;
	for (size_t i = 0; r == 0 && i < s->n_syscalls; i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, s->syscalls[i], 0);
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r < 0 ? ab_error_set(err, -r, "seccomp: cannot load the helper's filter") : 0;
}

int confine_self(const struct confine_spec *s, int *landlock_abi, struct ab_error *err)
{
	*landlock_abi = 0;
	int r = close_fds(s, err);
	struct rlimit mem = {s->mem_bytes, s->mem_bytes};
	if (r == 0 && s->mem_bytes && setrlimit(RLIMIT_AS, &mem) < 0)
		r = ab_error_set(err, errno, "cannot bound the helper's memory");
	/* made while the directory may still be opened by root */
	cleanup_fd int ruleset = -1;
	if (r == 0)
		r = landlock_ruleset(s->write_dir, &ruleset, landlock_abi, err);
	/* the bounding set while CAP_SETPCAP is held, then the identity,
	 * which clears the permitted and effective sets of root's helper */
	if (r == 0 && s->switch_id)
		for (int c = 0; c < 64 && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0; c++)
			;
	if (r == 0)
		r = identity(s, err);
	if (r == 0)
		r = confine_caps_drop(err);
	if (r == 0 && s->parent &&
	    (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != s->parent))
		r = ab_error_plain(err, ESRCH, "the launcher is gone");
	/* no /proc/PID/fd, no ptrace by another process of the same uid */
	if (r == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		r = ab_error_set(err, errno, "cannot make the helper undumpable");
	if (r == 0 && ruleset >= 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		r = ab_error_set(err, errno, "landlock: cannot restrict the helper");
	if (r == 0) {
		close(ab_steal_fd(&ruleset));
		r = seccomp_allow(s, err);
	}
	return r;
}
