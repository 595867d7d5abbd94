/* The sandbox side: what the cloned child does, from the first instruction
 * in the new namespaces to pid 1's reaping loop.
 *
 * Setup order (fixed; each step needs the one before it):
 *   1. wait for the launcher's GO: the uid/gid maps exist, and the init is
 *      in the sandbox's cgroup, which a new cgroup namespace now makes its root
 *   2. new session; become the sandbox user (capabilities in the new user
 *      namespace stay); parent-death signal set again, since a credential
 *      change clears it; not dumpable
 *   3. open mount sources while the host tree is visible, build the view,
 *      pivot, detach the host root, root read-only
 *   4. host name, loopback up; then a nested user and mount namespace,
 *      which locks every mount of the view (flags, and what lies beneath)
 *   5. the Landlock ruleset (if the kernel has Landlock); working directory;
 *      tell the launcher READY with the Landlock ABI (fails if it is gone)
 *   6. fork the command: own session, signals unblocked, every capability
 *      dropped, no_new_privs, Landlock enforced, fds above 2 closed, exec
 *   7. as pid 1, reap everything; report the command's status; exit, which
 *      makes the kernel kill whatever the command left behind.
 */
#include "init.h"

#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caps.h"
#include "cgroup.h"
#include "landlock.h"
#include "seccomp_profile.h"
#include "shim.h"
#include "error.h"
#include "idmap.h"
#include "options.h"
#include "proc.h"
#include "sync.h"
#include "userns.h"
#include "util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static _Noreturn void init_fail(int sync_fd, const struct ab_error *err)
{
	sync_send(sync_fd, SYNC_ERROR, err->code, 0, err->msg);
	_exit(AB_EXIT_FAILURE);
}

static bool fd_kept(int fd, const int *keep, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (keep[i] == fd)
			return true;
	return false;
}

/* Close every fd above 2 except those in keep (whatever the caller of
 * agentbox left open must not reach the sandbox). */
static void close_fds_except(const int *keep, size_t n)
{
	int hi = 2;
	for (size_t i = 0; i < n; i++)
		hi = keep[i] > hi ? keep[i] : hi;
	for (int fd = 3; fd < hi; fd++)
		if (!fd_kept(fd, keep, n))
			close(fd);
	if (syscall(SYS_close_range, hi + 1, ~0U, 0) == 0)
		return;
	/* before Linux 5.9 */
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		int fd = atoi(de->d_name);
		if (fd > 2 && fd != dirfd(d) && !fd_kept(fd, keep, n))
			close(fd);
	}
	closedir(d);
}

static int apply_rlimits(const struct ab_config *cfg, struct ab_error *err)
{
	for (size_t i = 0; i < cfg->n_rlimits; i++) {
		struct rlimit rl = {cfg->rlimits[i].value, cfg->rlimits[i].value};
		if (setrlimit(cfg->rlimits[i].resource, &rl) < 0)
			return ab_error_set(err, errno, "--rlimit %s=%llu",
					    ab_rlimit_name(cfg->rlimits[i].resource),
					    cfg->rlimits[i].value);
	}
	return 0;
}

/* Mark every fd above 2 close-on-exec, so exec leaves only 0, 1 and 2. */
static void cloexec_fds_above_stdio(void)
{
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		int fd = atoi(de->d_name);
		if (fd > 2 && fd != dirfd(d))
			fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	closedir(d);
}

static _Noreturn void exec_command(const struct init_args *a)
{
	struct ab_error err = {0};
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* captured output: the launcher holds the read ends */
	if ((a->out_fd >= 0 && dup2(a->out_fd, STDOUT_FILENO) < 0) ||
	    (a->err_fd >= 0 && dup2(a->err_fd, STDERR_FILENO) < 0)) {
		ab_error_set(&err, errno, "cannot connect the command's output");
		init_fail(a->sync_fd, &err);
	}
	if (apply_rlimits(a->cfg, &err) < 0 || ab_cgroup_apply_rlimits(a->cgroup, &err) < 0)
		init_fail(a->sync_fd, &err);
	/* its own session: no controlling terminal, so no TIOCSTI into the
	 * caller's terminal, and a process group the init can signal whole */
	if (setsid() < 0) {
		ab_error_set(&err, errno, "cannot start a session for the command");
		init_fail(a->sync_fd, &err);
	}
	if (caps_drop_all(&err) < 0 || landlock_enforce(a->landlock_fd, &err) < 0 ||
	    idmap_guard_install(a->plan, &err) < 0)
		init_fail(a->sync_fd, &err);
	cloexec_fds_above_stdio();
	/* seccomp last: nothing after it but handing the listener to the
	 * launcher and exec. No need to wait: a denied syscall waits until
	 * the launcher answers, and the listener travels in the message */
	if (a->seccomp) {
		int listener = -1;
		if (ab_seccomp_install(a->seccomp, &listener, &err) < 0)
			init_fail(a->sync_fd, &err);
		if (listener >= 0) {
			int r = sync_send_fd(a->sync_fd, SYNC_LISTENER, listener);
			if (r < 0) {
				ab_error_set(&err, -r, "cannot pass the seccomp listener on");
				init_fail(a->sync_fd, &err);
			}
			close(listener);
		}
	}
	/* execvp searches the PATH of environ, which is the sandbox's */
	environ = a->envp;
	execvp(a->cfg->argv[0], a->cfg->argv);
	int e = errno;
	dprintf(STDERR_FILENO, "agentbox: cannot run '%s': %s\n", a->cfg->argv[0], strerror(e));
	_exit(e == ENOENT || e == ENOTDIR ? AB_EXIT_NOT_FOUND : AB_EXIT_CANNOT_EXEC);
}

static _Noreturn void reap_loop(const struct init_args *a, pid_t cmd, int sigfd)
{
	struct pollfd pfd[2] = {
		{.fd = sigfd, .events = POLLIN},
		{.fd = a->sync_fd, .events = POLLIN},
	};
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(AB_EXIT_FAILURE);
		}
		if (pfd[1].revents) {
			struct sync_msg m;
			/* anything but a request to signal means the launcher is gone
			 * or misbehaves: leave, and the kernel ends the sandbox */
			if (sync_recv(a->sync_fd, &m, NULL) != 1 || m.type != SYNC_SIGNAL_ALL ||
			    m.status <= 0 || m.status >= NSIG)
				_exit(AB_EXIT_FAILURE);
			/* every process of the sandbox but pid 1: double-forked
			 * daemons and setsid children too */
			kill(-1, m.status);
		}
		if (!pfd[0].revents)
			continue;
		struct signalfd_siginfo si;
		if (read(sigfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo != SIGCHLD) {
			/* forwarded by the launcher: to the command's whole group */
			if (kill(-cmd, (int)si.ssi_signo) < 0)
				kill(cmd, (int)si.ssi_signo);
			continue;
		}
		int status;
		pid_t p;
		while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
			if (p == cmd) {
				sync_send(a->sync_fd, SYNC_EXIT, 0, status, NULL);
				/* pid 1 exiting kills every process left in the sandbox */
				_exit(0);
			}
		}
	}
}

/* A new shim for the pool: it waits for commands on a socket whose other
 * end is returned (-1 when it cannot be made). It must hold no fd but its
 * own: a copy of another command's pipe would keep that pipe open. */
/* A new shim, its socket sent to the launcher (SYNC_SHIM), or SYNC_NO_SHIM
 * with the reason. The shim holds no fd but its socket: a copy of another
 * command's pipe would keep that pipe open. Returns its pid, or -1. */
static pid_t new_shim(struct init_args *a, int sigfd)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		sync_send(a->sync_fd, SYNC_NO_SHIM, 0, errno, NULL);
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(sp[0]);
		close(sigfd);
		close(a->sync_fd);
		shim_serve(a, sp[1]);
	}
	int e = errno;
	close(sp[1]);
	if (pid < 0)
		sync_send(a->sync_fd, SYNC_NO_SHIM, 0, e, NULL);
	else {
		/* so the launcher knows the shim before any command of it runs:
		 * a denied syscall is routed to its command by the shim's pid */
		int fds[2] = {sp[0], (int)syscall(SYS_pidfd_open, pid, 0)};
		sync_send_fds(a->sync_fd, SYNC_SHIM, fds, fds[1] >= 0 ? 2 : 1);
		if (fds[1] >= 0)
			close(fds[1]);
	}
	close(sp[0]);
	return pid;
}

/* A command that killed its shim (kill -9 $PPID) leaves what it started to
 * the init, the reaper of the pid namespace; every other process of a
 * command has a live shim as its subreaper. Kill every child of the init
 * that is not a shim of the pool: their own children come here in turn
 * when they die, and that SIGCHLD brings the next round. */
static void kill_orphans(const pid_t *shims, size_t n)
{
	struct ab_procs it;
	if (ab_procs_open(&it) < 0)
		return;
	pid_t p, ppid;
	while (ab_procs_next(&it, &p, &ppid)) {
		if (p <= 1 || ppid != 1)
			continue;
		bool shim = false;
		for (size_t i = 0; i < n && !shim; i++)
			shim = shims[i] == p;
		if (!shim)
			kill(p, SIGKILL);
	}
	ab_procs_close(&it);
}

/* Session mode: the init confines itself once (what every command would
 * do), so that each command only needs a fork, and its seccomp listener is
 * handed over once for the whole session; then it starts command shims
 * when the launcher asks (SYNC_NEW_SHIM) and hands their sockets over: the
 * launcher gives each command to an idle shim directly. The init reaps, and
 * kills what a command left when it killed its own shim. As pid 1 of the
 * namespace, no process of the sandbox can kill it. */
static _Noreturn void session_loop(struct init_args *a, int sigfd, int landlock_abi)
{
	struct ab_error err = {0};
	/* the RLIMIT_AS standing in for --memory is the command's alone, set
	 * as each starts (shim.c): a limit on the init and the shims would
	 * hold agentbox's own processes, and cannot work under ASan at all */
	if (apply_rlimits(a->cfg, &err) < 0 || caps_drop_all(&err) < 0 ||
	    landlock_enforce(a->landlock_fd, &err) < 0 || idmap_guard_install(a->plan, &err) < 0)
		init_fail(a->sync_fd, &err);
	if (a->landlock_fd >= 0)
		close(a->landlock_fd);
	if (a->seccomp) {
		int listener = -1;
		if (ab_seccomp_install(a->seccomp, &listener, &err) < 0)
			init_fail(a->sync_fd, &err);
		if (listener >= 0) {
			if (sync_send_fd(a->sync_fd, SYNC_LISTENER, listener) < 0)
				_exit(AB_EXIT_FAILURE);
			close(listener);
		}
	}
	if (sync_send(a->sync_fd, SYNC_READY, 0, landlock_abi, NULL) < 0)
		_exit(AB_EXIT_FAILURE);
	enum { MAX_SHIMS = 1024 };
	static pid_t shim[MAX_SHIMS];
	size_t n_shims = 0;
	/* the first one unasked, so the first command finds it */
	if ((shim[n_shims] = new_shim(a, sigfd)) > 0)
		n_shims++;
	for (;;) {
		struct pollfd pfd[2] = {
			{.fd = sigfd, .events = POLLIN},
			{.fd = a->sync_fd, .events = POLLIN},
		};
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(AB_EXIT_FAILURE);
		}
		if (pfd[0].revents) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == sizeof(si))
				;
			for (pid_t p; (p = waitpid(-1, NULL, WNOHANG)) > 0;)
				for (size_t i = 0; i < n_shims;)
					if (shim[i] == p)
						shim[i] = shim[--n_shims];
					else
						i++;
			/* a shim or an orphan died: what it left is the init's now */
			kill_orphans(shim, n_shims);
		}
		if (!pfd[1].revents)
			continue;
		/* the launcher is gone or misbehaves: leave, and the kernel
		 * ends the sandbox */
		struct sync_msg m;
		if (sync_recv(a->sync_fd, &m, NULL) != 1 || m.type != SYNC_NEW_SHIM)
			_exit(AB_EXIT_FAILURE);
		if (n_shims == MAX_SHIMS)
			sync_send(a->sync_fd, SYNC_NO_SHIM, 0, EAGAIN, NULL);
		else if ((shim[n_shims] = new_shim(a, sigfd)) > 0)
			n_shims++;
	}
}

/* The init is a copy of the launcher, environment included: wipe the
 * strings (the command gets its own filtered copy, a->envp), so that no
 * variable the policy filtered out is left in the sandbox's memory. */
static void scrub_environ(void)
{
	for (char **e = environ; e && *e; e++)
		explicit_bzero(*e, strlen(*e));
	environ = NULL;
}

_Noreturn void init_main(struct init_args *a)
{
	struct ab_error err = {0};
	struct sync_msg m;

	scrub_environ();
	/* the launcher may ignore SIGPIPE (agentbox serve does); commands
	 * get every signal at its default */
	signal(SIGPIPE, SIG_DFL);

	/* if the launcher died before this, GO never comes: recv sees EOF */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* the launcher's detached mounts of the sources (idmap.h) stay */
	int keep[3 + 8 + a->plan->n];
	size_t n_keep = ab_cgroup_entry_fds(a->cgroup, keep);
	keep[n_keep++] = a->sync_fd;
	keep[n_keep++] = a->out_fd;
	keep[n_keep++] = a->err_fd;
	for (size_t i = 0; i < a->plan->n; i++)
		if (a->plan->e[i].tree_fd >= 0)
			keep[n_keep++] = a->plan->e[i].tree_fd;
	close_fds_except(keep, n_keep);
	if (sync_recv(a->sync_fd, &m, NULL) != 1 || m.type != SYNC_GO)
		_exit(AB_EXIT_FAILURE);
	/* into the cgroup before anything else runs here (limits, pids) */
	if (ab_cgroup_enter(a->cgroup, &err) < 0)
		init_fail(a->sync_fd, &err);

	setsid();
	if (unshare(CLONE_NEWCGROUP) < 0) {
		ab_error_set(&err, errno, "cannot create the cgroup namespace");
		init_fail(a->sync_fd, &err);
	}
	if (userns_become_sandbox_user(a->cfg, a->by_root, &err) < 0)
		init_fail(a->sync_fd, &err);
	userns_limit_inotify();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_DUMPABLE, 0);

	if (view_open_sources(a->plan, &err) < 0 || view_build(a->plan, &err) < 0)
		init_fail(a->sync_fd, &err);
	if (userns_setup_uts_net(a->cfg, &err) < 0 || userns_lock_view(a->cfg, &err) < 0)
		init_fail(a->sync_fd, &err);
	prctl(PR_SET_DUMPABLE, 0);
	int landlock_abi = 0;
	if (!a->cfg->no_landlock &&
	    landlock_prepare(a->plan, &a->landlock_fd, &landlock_abi, &err) < 0)
		init_fail(a->sync_fd, &err);
	if (chdir(a->cfg->cwd) < 0) {
		ab_error_set(&err, errno, "--cwd: cannot enter %s in the sandbox", a->cfg->cwd);
		init_fail(a->sync_fd, &err);
	}

	sigset_t mask;
	sigemptyset(&mask);
	for (size_t i = 0; i < AB_ARRAY_SIZE(ab_forwarded_signals); i++)
		sigaddset(&mask, ab_forwarded_signals[i]);
	sigaddset(&mask, SIGCHLD);
	/* blocked here too: a session's launcher does not block them for us */
	sigprocmask(SIG_BLOCK, &mask, NULL);
	int sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sigfd < 0) {
		ab_error_set(&err, errno, "cannot watch signals in the sandbox");
		init_fail(a->sync_fd, &err);
	}
	if (a->session)
		session_loop(a, sigfd, landlock_abi);
	/* the parent-death signal is armed again; if the launcher died in
	 * between, this send fails and nothing runs unsupervised */
	if (sync_send(a->sync_fd, SYNC_READY, 0, landlock_abi, NULL) < 0)
		_exit(AB_EXIT_FAILURE);

	/* vfork: the command runs in our memory and on our stack, below this
	 * frame, until it execs, while we wait; no page table is copied, which
	 * a fork here cost every run. What it changes before exec is its own
	 * (rlimits, session, credentials, Landlock and seccomp are per
	 * process); memory it allocates stays ours, and we only reap from now
	 * on. It never returns from here: exec_command execs or exits. */
	pid_t cmd = vfork();
	if (cmd == 0) {
		close(sigfd);
		exec_command(a);
	}
	if (cmd < 0) {
		ab_error_set(&err, errno, "cannot start the command");
		init_fail(a->sync_fd, &err);
	}
	/* only the command may hold the output pipes, so EOF means it is done */
	ab_close_keep_errno(a->out_fd);
	if (a->err_fd != a->out_fd)
		ab_close_keep_errno(a->err_fd);
	reap_loop(a, cmd, sigfd);
}
