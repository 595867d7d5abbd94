/* Confining a helper process (confine.h): the steps nsjail and minijail
 * take before a process touches untrusted data, each on its own. */
#include "confine/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/landlock.h>
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

#include "util/util.h"

#define NOBODY 65534

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

int confine_fds(const int *keep, size_t n, struct ab_error *err)
{
	int sorted[16];
	if (n > AB_ARRAY_SIZE(sorted))
		return ab_error_plain(err, EINVAL, "confine: too many fds to keep");
	memcpy(sorted, keep, n * sizeof(*keep));
	qsort(sorted, n, sizeof(*sorted), cmp_int);
	unsigned lo = 0;
	for (size_t i = 0; i <= n; i++) {
		unsigned hi = i < n ? (unsigned)sorted[i] : ~0U;
		if (i < n && sorted[i] < 0)
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

void confine_pick_identity(const char *path, uid_t *uid, gid_t *gid)
{
	struct stat st;
	*uid = NOBODY;
	*gid = NOBODY;
	if (path && stat(path, &st) == 0 && st.st_uid != 0) {
		*uid = st.st_uid;
		*gid = st.st_gid;
	}
}

static int drop_bounding(struct ab_error *err)
{
	/* up to the kernel's last: the first EINVAL is past it */
	for (int c = 0; c < 64; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL)
			break;
		return ab_error_set(err, errno,
				    "confine: cannot drop capability %d from the bounding set", c);
	}
	return 0;
}

int confine_identity(uid_t uid, gid_t gid, struct ab_error *err)
{
	int r;
	if (geteuid() == 0) {
		/* the bounding set while CAP_SETPCAP is still held */
		if ((r = drop_bounding(err)) < 0)
			return r;
		/* a user namespace may deny setgroups: then none must be held */
		bool no_groups = setgroups(0, NULL) == 0 || getgroups(0, NULL) == 0;
		if (!no_groups || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
			return ab_error_set(err, errno, "confine: cannot become uid %d", (int)uid);
		if (geteuid() == 0 || getegid() == 0)
			return ab_error_plain(err, EPERM, "confine: still root");
	} else if (unshare(CLONE_NEWUSER) == 0) {
		/* a plain user: a user namespace of its own gives the
		 * CAP_SETPCAP that empties the bounding set; without one (none
		 * allowed here) it holds no capability anyway and no_new_privs
		 * keeps it so */
		if ((r = drop_bounding(err)) < 0)
			return r;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return ab_error_set(err, errno, "confine: cannot clear the ambient capabilities");
	cap_t none = cap_init();
	if (!none)
		return ab_error_set(err, errno, "confine: cannot drop capabilities");
	r = cap_set_proc(none);
	int saved = errno;
	cap_free(none);
	if (r < 0)
		return ab_error_set(err, saved, "confine: cannot drop capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return ab_error_set(err, errno, "confine: cannot set no_new_privs");
	return 0;
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

/* Landlock's values newer than the oldest headers agentbox builds with
 * (Debian 12's know ABI 1) */
#define LL_REFER	  (1ULL << 13) /* ABI 2 */
#define LL_TRUNCATE	  (1ULL << 14) /* ABI 3 */
#define LL_SCOPE_ABSTRACT (1ULL << 0)  /* ABI 6 */
#define LL_SCOPE_SIGNAL	  (1ULL << 1)
#define LL_FS_ALL                                                                                  \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                              \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |                              \
	 LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                          \
	 LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |                              \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                              \
	 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |                            \
	 LANDLOCK_ACCESS_FS_MAKE_SYM)

struct ll_ruleset_attr {
	uint64_t handled_access_fs, handled_access_net, scoped;
};

static int ll_allow_read(int ruleset, const char *path, struct ab_error *err)
{
	cleanup_fd int fd = open(path, O_PATH | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return 0; /* not on this host: nothing to allow */
	struct landlock_path_beneath_attr a = {
		.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE,
		.parent_fd = fd,
	};
	if (S_ISDIR(st.st_mode))
		a.allowed_access |= LANDLOCK_ACCESS_FS_READ_DIR;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &a, 0) < 0)
		return ab_error_set(err, errno, "confine: landlock rule for %s", path);
	return 0;
}

int confine_landlock(const char *const *read_only, bool *applied, struct ab_error *err)
{
	*applied = false;
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1)
		return 0;
	struct ll_ruleset_attr rs = {.handled_access_fs = LL_FS_ALL};
	size_t size = sizeof(uint64_t);
	if (abi >= 2)
		rs.handled_access_fs |= LL_REFER;
	if (abi >= 3)
		rs.handled_access_fs |= LL_TRUNCATE;
	if (abi >= 6) {
		rs.scoped = LL_SCOPE_ABSTRACT | LL_SCOPE_SIGNAL;
		size = sizeof(rs);
	}
	cleanup_fd int ruleset = (int)syscall(SYS_landlock_create_ruleset, &rs, size, 0);
	if (ruleset < 0)
		return ab_error_set(err, errno, "confine: landlock ruleset");
	for (const char *const *p = read_only; p && *p; p++) {
		int r = ll_allow_read(ruleset, *p, err);
		if (r < 0)
			return r;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		return ab_error_set(err, errno, "confine: landlock_restrict_self");
	*applied = true;
	return 0;
}

#define SYS0(name)                                                                                 \
	{                                                                                          \
		SCMP_SYS(name), -1, 0, 0                                                           \
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
	{SCMP_SYS(clone), 0, CLONE_THREAD, CLONE_THREAD},
	/* a signal to itself only (abort, raise) */
	{SCMP_SYS(tgkill), 0, 0, 0} /* arg 0: its own pid, set at load */,
	{SCMP_SYS(ioctl), 1, FIONREAD, 0},
	{SCMP_SYS(ioctl), 1, FIONBIO, 0},
	{SCMP_SYS(ioctl), 1, FIOCLEX, 0},
};
const size_t confine_n_base = AB_ARRAY_SIZE(confine_base);

int confine_seccomp(const struct confine_syscall *allow, size_t n, struct ab_error *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
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
		if (s->arg < 0)
			r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, s->nr, 0);
		else
			r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, s->nr, 1, &c);
	}
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r < 0)
		return ab_error_set(err, -r, "confine: cannot load the seccomp filter");
	return 0;
}
