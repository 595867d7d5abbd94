/* Confining a helper process (confine.h): the steps nsjail and minijail
 * take before a process touches untrusted data, each on its own, and
 * confine_self, which takes them in the order they must come: what needs
 * a capability (the bounding set, the identity) before the capabilities
 * go; PR_SET_PDEATHSIG after the identity (a change of uid clears it);
 * no_new_privs before Landlock and seccomp; seccomp last, so that the
 * steps before it need none of its system calls. */
#include "confine/confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine/landlock_compat.h"
#include "util/util.h"

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static bool kept(int fd, const int *keep, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (keep[i] == fd)
			return true;
	return false;
}

int confine_fds(const int *keep, size_t n, struct ab_error *err)
{
	int sorted[64];
	if (n > AB_ARRAY_SIZE(sorted))
		return ab_error_plain(err, EINVAL, "confine: too many fds to keep");
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return ab_error_set(err, errno, "confine: cannot open /dev/null");
	for (int fd = 0; fd < 3; fd++)
		if (!kept(fd, keep, n) && fd != null && dup2(null, fd) < 0)
			return ab_error_set(err, errno, "confine: cannot put /dev/null on fd %d",
					    fd);
	memcpy(sorted, keep, n * sizeof(*keep));
	qsort(sorted, n, sizeof(*sorted), cmp_int);
	unsigned lo = 3; /* 0-2 are kept or /dev/null */
	for (size_t i = 0; i <= n; i++) {
		unsigned hi = i < n ? (unsigned)sorted[i] : ~0U;
		if (i < n && sorted[i] < 3)
			continue;
		if (hi > lo && syscall(SYS_close_range, lo, hi - 1, 0) < 0) {
			if (errno != ENOSYS)
				return ab_error_set(err, errno, "confine: cannot close fds");
			for (unsigned fd = lo; fd < hi && fd < 65536; fd++)
				close((int)fd);
		}
		lo = hi + 1;
	}
	return 0;
}

int confine_open_fds(int *fds, size_t max)
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

void confine_signals(void)
{
	(void)setsid();
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &dfl, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

int confine_die_with(pid_t parent, struct ab_error *err)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return ab_error_set(err, errno, "confine: PR_SET_PDEATHSIG");
	if (getppid() != parent) /* it died before the line above */
		return ab_error_plain(err, ESRCH, "confine: the parent has gone");
	return 0;
}

/* Up to the kernel's last capability: the first EINVAL is past it (the
 * kernel may know more than our headers). Without CAP_SETPCAP (a plain
 * user outside a user namespace of its own) when tolerant: it holds
 * nothing to drop, and no_new_privs keeps exec from granting any. */
static int drop_bounding(bool tolerant, struct ab_error *err)
{
	for (int c = 0; c < 64; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL || (tolerant && errno == EPERM && geteuid() != 0))
			break;
		return ab_error_set(err, errno,
				    "confine: cannot drop capability %d from the bounding set", c);
	}
	return 0;
}

/* The ambient, effective, permitted and inheritable sets emptied, and
 * no_new_privs. */
static int clear_caps(struct ab_error *err)
{
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return ab_error_set(err, errno, "confine: cannot clear the ambient capabilities");
	cap_t none = cap_init();
	if (!none)
		return ab_error_set(err, errno, "confine: cannot drop capabilities");
	int r = cap_set_proc(none);
	int saved = errno;
	cap_free(none);
	if (r < 0)
		return ab_error_set(err, saved, "confine: cannot drop capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return ab_error_set(err, errno, "confine: cannot set no_new_privs");
	return 0;
}

int confine_caps_drop(struct ab_error *err)
{
	int r = drop_bounding(true, err);
	return r < 0 ? r : clear_caps(err);
}

int confine_identity(uid_t uid, gid_t gid, struct ab_error *err)
{
	int r, deathsig = 0;
	(void)prctl(PR_GET_PDEATHSIG, &deathsig);
	if (geteuid() == 0) {
		/* the bounding set while CAP_SETPCAP is still held */
		if ((r = drop_bounding(false, err)) < 0)
			return r;
		/* a user namespace may deny setgroups: then none must be held */
		bool no_groups = setgroups(0, NULL) == 0 || getgroups(0, NULL) == 0;
		if (!no_groups || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
			return ab_error_set(err, errno, "confine: cannot become uid %d", (int)uid);
		if (geteuid() == 0 || getegid() == 0)
			return ab_error_plain(err, EPERM, "confine: still root");
		/* the change of uid cleared it */
		if (deathsig && prctl(PR_SET_PDEATHSIG, deathsig) < 0)
			return ab_error_set(err, errno, "confine: PR_SET_PDEATHSIG");
	} else if (unshare(CLONE_NEWUSER) == 0) {
		/* a plain user: a user namespace of its own gives the
		 * CAP_SETPCAP that empties the bounding set; without one (none
		 * allowed here) it holds no capability anyway and no_new_privs
		 * keeps it so */
		if ((r = drop_bounding(false, err)) < 0)
			return r;
	}
	return clear_caps(err);
}

#if defined(__SANITIZE_ADDRESS__)
#define AB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AB_ASAN 1
#endif
#endif

int confine_memory(size_t bytes, struct ab_error *err)
{
	struct rlimit rl = {.rlim_cur = bytes, .rlim_max = bytes}, none = {0, 0};
#ifdef AB_ASAN
	rl.rlim_cur = rl.rlim_max = RLIM_INFINITY; /* its shadow maps terabytes */
#endif
	if (setrlimit(RLIMIT_AS, &rl) < 0)
		return ab_error_set(err, errno, "confine: cannot set RLIMIT_AS");
	if (setrlimit(RLIMIT_CORE, &none) < 0)
		return ab_error_set(err, errno, "confine: cannot set RLIMIT_CORE");
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
		return ab_error_set(err, errno, "confine: cannot create a Landlock ruleset");
	*out = fd;
	*abi_out = abi;
	*handled = fs;
	return 0;
}

static int ll_rule(int ruleset, int fd, uint64_t access, const char *what, struct ab_error *err)
{
	struct landlock_path_beneath_attr a = {.allowed_access = access, .parent_fd = fd};
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &a, 0) < 0)
		return ab_error_set(err, errno, "confine: cannot add the Landlock rule for %s",
				    what);
	return 0;
}

/* The ruleset of confine_landlock, not yet enforced: *out -1 without
 * Landlock. */
static int ll_make(const char *const *read_only, int write_dir, unsigned flags, int *out, int *abi,
		   struct ab_error *err)
{
	uint64_t fs = 0;
	cleanup_fd int rs = -1;
	int r = confine_landlock_ruleset(flags, &rs, abi, &fs, err);
	if (r < 0 || rs < 0)
		return r;
	for (const char *const *p = read_only; p && *p; p++) {
		cleanup_fd int fd = open(*p, O_PATH | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0)
			continue; /* not on this host: nothing to allow */
		uint64_t read = LANDLOCK_ACCESS_FS_READ_FILE |
				(S_ISDIR(st.st_mode) ? LANDLOCK_ACCESS_FS_READ_DIR : 0);
		if ((r = ll_rule(rs, fd, read, *p, err)) < 0)
			return r;
	}
	if (write_dir >= 0 && (r = ll_rule(rs, write_dir, fs, "its directory", err)) < 0)
		return r;
	*out = ab_steal_fd(&rs);
	return 0;
}

static int ll_enforce(int ruleset, struct ab_error *err)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		return ab_error_set(err, errno, "confine: cannot enforce the Landlock ruleset");
	return 0;
}

int confine_landlock(const char *const *read_only, int write_dir, unsigned flags, int *abi,
		     struct ab_error *err)
{
	cleanup_fd int rs = -1;
	int r = ll_make(read_only, write_dir, flags, &rs, abi, err);
	if (r < 0 || rs < 0)
		return r;
	if ((r = ll_enforce(rs, err)) < 0)
		*abi = 0;
	return r;
}

#define SYS0(name)                                                                                 \
	{                                                                                          \
		.nr = SCMP_SYS(name), .arg = -1                                                    \
	}

const struct confine_syscall confine_base[] = {
	SYS0(read),
	SYS0(write),
	SYS0(readv),
	SYS0(writev),
	SYS0(pread64),
	SYS0(close),
	SYS0(lseek),
	SYS0(fstat),
	SYS0(newfstatat),
	SYS0(statx),
	SYS0(fcntl),
	SYS0(mmap),
	SYS0(munmap),
	SYS0(mremap),
	SYS0(mprotect),
	SYS0(brk),
	SYS0(madvise),
	SYS0(futex),
	SYS0(set_robust_list),
	SYS0(rseq),
	SYS0(set_tid_address),
	SYS0(sched_yield),
	SYS0(sched_getaffinity),
	SYS0(getrandom),
	SYS0(clock_gettime),
	SYS0(clock_getres),
	SYS0(gettimeofday),
	SYS0(nanosleep),
	SYS0(clock_nanosleep),
	SYS0(rt_sigaction),
	SYS0(rt_sigprocmask),
	SYS0(rt_sigreturn),
	SYS0(sigaltstack),
	SYS0(getpid),
	SYS0(gettid),
	SYS0(getuid),
	SYS0(geteuid),
	SYS0(getgid),
	SYS0(getegid),
	SYS0(getppid),
	SYS0(exit),
	SYS0(exit_group),
	SYS0(poll),
	SYS0(ppoll),
	SYS0(epoll_wait),
	SYS0(epoll_pwait),
	SYS0(epoll_ctl),
	SYS0(epoll_create1),
	SYS0(eventfd2),
	SYS0(timerfd_settime),
	SYS0(timerfd_gettime),
	SYS0(prlimit64),
	SYS0(membarrier),
	/* threads: a clone that makes anything but a thread fails */
	{.nr = SCMP_SYS(clone), .arg = 0, .value = CLONE_THREAD, .mask = CLONE_THREAD},
	/* a signal to itself only (abort, raise) */
	{.nr = SCMP_SYS(tgkill),
	 .arg = 0,
	 .value = 0,
	 .mask = 0} /* arg 0: its own pid, set at load */,
	{.nr = SCMP_SYS(ioctl), .arg = 1, .value = FIONREAD, .mask = 0},
	{.nr = SCMP_SYS(ioctl), .arg = 1, .value = FIONBIO, .mask = 0},
	{.nr = SCMP_SYS(ioctl), .arg = 1, .value = FIOCLEX, .mask = 0},
};
const size_t confine_n_base = AB_ARRAY_SIZE(confine_base);

int confine_seccomp(const struct confine_syscall *allow, size_t n, bool kill, struct ab_error *err)
{
	scmp_filter_ctx ctx = seccomp_init(kill ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return ab_error_plain(err, ENOMEM, "confine: seccomp_init");
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
#if SCMP_VER_MAJOR > 2 || (SCMP_VER_MAJOR == 2 && SCMP_VER_MINOR >= 5)
	/* a binary tree of the syscalls: every read and write of a relay
	 * goes through it */
	if (r == 0)
		(void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
#endif
	/* glibc falls back to clone, whose flags can be checked */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	for (size_t i = 0; r == 0 && i < n; i++) {
		const struct confine_syscall *s = &allow[i];
		if (s->nr < 0) /* not on this architecture */
			continue;
		struct scmp_arg_cmp c = {.arg = (unsigned)s->arg,
					 .op = s->mask ? SCMP_CMP_MASKED_EQ : SCMP_CMP_EQ,
					 .datum_a = s->mask ? s->mask : s->value,
					 .datum_b = s->value};
		if (s->nr == SCMP_SYS(tgkill))
			c.datum_a = (scmp_datum_t)getpid();
		struct scmp_arg_cmp both[2] = {
			c, {.arg = (unsigned)s->arg_b, .op = SCMP_CMP_EQ, .datum_a = s->value_b}};
		if (s->arg < 0)
			r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, s->nr, 0);
		else
			r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, s->nr, s->arg_b > 0 ? 2 : 1,
						   both);
	}
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r < 0)
		return ab_error_set(err, -r, "confine: cannot load the seccomp filter");
	return 0;
}

const struct confine_syscall confine_inet[] = {
	SYS0(connect),	   SYS0(accept4),     SYS0(getsockopt), SYS0(setsockopt),
	SYS0(getsockname), SYS0(getpeername), SYS0(shutdown),	SYS0(recvfrom),
	SYS0(sendto),	   SYS0(recvmsg),     SYS0(sendmsg),
};
const size_t confine_n_inet = AB_ARRAY_SIZE(confine_inet);

static int seccomp_lists(bool inet, const struct confine_syscall *extra, size_t n,
			 struct ab_error *err)
{
	struct confine_syscall all[192];
	size_t k = confine_n_base + (inet ? confine_n_inet : 0);
	if (k + n > AB_ARRAY_SIZE(all))
		return ab_error_plain(err, E2BIG, "confine: too many system calls");
	memcpy(all, confine_base, confine_n_base * sizeof(*all));
	if (inet)
		memcpy(all + confine_n_base, confine_inet, confine_n_inet * sizeof(*all));
	memcpy(all + k, extra, n * sizeof(*all));
	return confine_seccomp(all, k + n, false, err);
}

int confine_seccomp_base(const struct confine_syscall *extra, size_t n, struct ab_error *err)
{
	return seccomp_lists(false, extra, n, err);
}

int confine_seccomp_inet(const struct confine_syscall *extra, size_t n, struct ab_error *err)
{
	return seccomp_lists(true, extra, n, err);
}

int confine_self(const struct confine_spec *s, int *landlock_abi, struct ab_error *err)
{
	*landlock_abi = 0;
	if (s->n_syscalls > 512)
		return ab_error_plain(err, EINVAL, "confine: too many system calls");
	struct confine_syscall allow[512];
	for (size_t i = 0; i < s->n_syscalls; i++)
		allow[i] = (struct confine_syscall){.nr = s->syscalls[i], .arg = -1};
	int r = confine_fds(s->keep_fds, s->n_keep, err);
	if (r == 0 && s->mem_bytes)
		r = confine_memory(s->mem_bytes, err);
	/* made while the directory may still be opened by root */
	cleanup_fd int ruleset = -1;
	if (r == 0)
		r = ll_make(NULL, s->write_dir,
			    CONFINE_LL_NET | CONFINE_LL_SCOPE | CONFINE_LL_IOCTL_DEV, &ruleset,
			    landlock_abi, err);
	if (r == 0)
		r = s->switch_id ? confine_identity(s->uid, s->gid, err) : confine_caps_drop(err);
	if (r == 0 && s->parent)
		r = confine_die_with(s->parent, err);
	/* no /proc/PID/fd, no ptrace by another process of the same uid */
	if (r == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		r = ab_error_set(err, errno, "confine: cannot make the helper undumpable");
	if (r == 0 && ruleset >= 0 && (r = ll_enforce(ruleset, err)) < 0)
		*landlock_abi = 0;
	if (r == 0)
		r = confine_seccomp(allow, s->n_syscalls, true, err);
	return r;
}
