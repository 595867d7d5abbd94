/* The sandbox side: what the cloned child does, from the first instruction
 * in the new namespaces to pid 1's reaping loop.
 *
 * Setup order (fixed; each step needs the one before it):
 *   1. wait for the launcher's GO: the uid/gid maps exist
 *   2. new session; become the sandbox user (capabilities in the new user
 *      namespace stay); parent-death signal set again, since a credential
 *      change clears it; not dumpable
 *   3. open mount sources while the host tree is visible, build the view,
 *      pivot, detach the host root, root read-only
 *   4. host name, loopback up
 *   5. working directory; tell the launcher READY (fails if it is gone)
 *   6. fork the command: own session, signals unblocked, every capability
 *      dropped, no_new_privs, fds above 2 closed, exec
 *   7. as pid 1, reap everything; report the command's status; exit, which
 *      makes the kernel kill whatever the command left behind.
 */
#include "init.h"

#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caps.h"
#include "error.h"
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

/* Close every fd from `from` up, except keep. */
static void close_fds_from(int from, int keep)
{
	if (keep >= from) {
		if (keep > from)
			syscall(SYS_close_range, from, keep - 1, 0);
		from = keep + 1;
	}
	if (syscall(SYS_close_range, from, ~0U, 0) == 0)
		return;
	/* before Linux 5.9 */
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		int fd = atoi(de->d_name);
		if (fd >= from && fd != dirfd(d) && fd != keep)
			close(fd);
	}
	closedir(d);
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
	/* its own session: no controlling terminal, so no TIOCSTI into the
	 * caller's terminal, and a process group the init can signal whole */
	if (setsid() < 0) {
		ab_error_set(&err, errno, "cannot start a session for the command");
		init_fail(a->sync_fd, &err);
	}
	if (caps_drop_all(&err) < 0)
		init_fail(a->sync_fd, &err);
	cloexec_fds_above_stdio();
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
		if (pfd[1].revents)
			_exit(AB_EXIT_FAILURE); /* the launcher is gone or misbehaves */
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

_Noreturn void init_main(struct init_args *a)
{
	struct ab_error err = {0};
	struct sync_msg m;

	/* if the launcher died before this, GO never comes: recv sees EOF */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close_fds_from(3, a->sync_fd);
	if (sync_recv(a->sync_fd, &m) != 1 || m.type != SYNC_GO)
		_exit(AB_EXIT_FAILURE);

	setsid();
	if (userns_become_sandbox_user(a->cfg, a->by_root, &err) < 0)
		init_fail(a->sync_fd, &err);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_DUMPABLE, 0);

	if (view_open_sources(a->plan, &err) < 0 || view_build(a->plan, &err) < 0)
		init_fail(a->sync_fd, &err);
	if (userns_setup_uts_net(a->cfg, &err) < 0)
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
	int sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sigfd < 0) {
		ab_error_set(&err, errno, "cannot watch signals in the sandbox");
		init_fail(a->sync_fd, &err);
	}
	/* the parent-death signal is armed again; if the launcher died in
	 * between, this send fails and nothing runs unsupervised */
	if (sync_send(a->sync_fd, SYNC_READY, 0, 0, NULL) < 0)
		_exit(AB_EXIT_FAILURE);

	pid_t cmd = fork();
	if (cmd < 0) {
		ab_error_set(&err, errno, "cannot start the command");
		init_fail(a->sync_fd, &err);
	}
	if (cmd == 0) {
		close(sigfd);
		exec_command(a);
	}
	reap_loop(a, cmd, sigfd);
}
