/* The launcher side of one sandbox (design.md, "Processes and trust").
 *
 * Order: check the configuration and plan the view (nothing created yet),
 * build the environment, block the signals we forward, clone the init into
 * the new namespaces, write its uid/gid maps, send GO, then supervise: read
 * the init's messages, forward signals, reap. Nothing the init says is
 * trusted beyond its validated form; an init that dies without reporting is
 * an error of agentbox (125), never a result. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "init.h"
#include "mount.h"
#include "sync.h"
#include "userns.h"
#include "util.h"

extern char **environ;

static int read_sysctl(const char *path)
{
	char buf[32] = {0};
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
		return -1;
	return atoi(buf);
}

/* Say why the kernel refused new namespaces, in terms a user can act on. */
static int clone_error(int e, struct ab_error *err)
{
	if (read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0 && geteuid() != 0)
		return ab_error_plain(err, e,
				      "cannot create a user namespace: user namespaces are "
				      "disabled (sysctl kernel.unprivileged_userns_clone=0)");
	if (read_sysctl("/proc/sys/user/max_user_namespaces") == 0)
		return ab_error_plain(err, e,
				      "cannot create a user namespace: user namespaces are "
				      "disabled (sysctl user.max_user_namespaces=0)");
	if (read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1 &&
	    geteuid() != 0)
		return ab_error_plain(err, e,
				      "cannot create a user namespace: AppArmor restricts "
				      "unprivileged user namespaces "
				      "(sysctl kernel.apparmor_restrict_unprivileged_userns=1)");
	return ab_error_set(err, e, "cannot create the sandbox's namespaces");
}

static void kill_and_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

struct supervision {
	bool ready;
	bool have_exit;
	int status; /* the command's wait status, from the init */
	bool have_error;
	struct ab_error error;
	int init_status;
};

static int supervise(pid_t init, int sync_fd, int sigfd, struct supervision *s)
{
	struct pollfd pfd[2] = {
		{.fd = sigfd, .events = POLLIN},
		{.fd = sync_fd, .events = POLLIN},
	};
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pfd[1].revents) {
			struct sync_msg m;
			int r = sync_recv(sync_fd, &m);
			if (r <= 0) {
				if (r < 0 && !s->have_error) {
					/* a malformed message: the init is not ours any more */
					s->have_error = true;
					ab_error_plain(&s->error, EBADMSG,
						       "the sandbox sent a malformed message");
					kill(init, SIGKILL);
				}
				pfd[1].fd = -1; /* EOF: wait for the exit */
			} else if (m.type == SYNC_ERROR && !s->have_error) {
				s->have_error = true;
				ab_error_plain(&s->error, m.code > 0 ? m.code : EIO, "%s", m.text);
			} else if (m.type == SYNC_READY) {
				s->ready = true;
			} else if (m.type == SYNC_EXIT && s->ready && !s->have_exit &&
				   (WIFEXITED(m.status) || WIFSIGNALED(m.status))) {
				s->have_exit = true;
				s->status = m.status;
			}
		}
		if (!pfd[0].revents)
			continue;
		struct signalfd_siginfo si;
		if (read(sigfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo != SIGCHLD) {
			kill(init, (int)si.ssi_signo);
			continue;
		}
		pid_t p = waitpid(init, &s->init_status, WNOHANG);
		if (p == init)
			return 0;
	}
}

static int run_sandbox(struct ab_config *cfg, struct view_plan *plan, char **envp,
		       struct ab_result *res, struct ab_error *err)
{
	sigset_t mask, old;
	sigemptyset(&mask);
	for (size_t i = 0; i < AB_ARRAY_SIZE(ab_forwarded_signals); i++)
		sigaddset(&mask, ab_forwarded_signals[i]);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, &old) < 0)
		return ab_error_set(err, errno, "cannot block signals");
	cleanup_fd int sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sigfd < 0) {
		int r = ab_error_set(err, errno, "cannot watch signals");
		sigprocmask(SIG_SETMASK, &old, NULL);
		return r;
	}

	int pair[2];
	int r = sync_pair(pair, err);
	if (r < 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		return r;
	}
	cleanup_fd int sync_fd = pair[0];
	cleanup_fd int child_fd = pair[1];

	/* raw clone: fork semantics with the new namespaces in one step */
	pid_t pid = (pid_t)syscall(SYS_clone, userns_clone_flags(cfg) | SIGCHLD, NULL, NULL,
				   NULL, NULL);
	if (pid < 0) {
		r = clone_error(errno, err);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return r;
	}
	if (pid == 0) {
		close(sync_fd);
		struct init_args a = {
			.cfg = cfg,
			.plan = plan,
			.envp = envp,
			.sync_fd = child_fd,
			.by_root = geteuid() == 0,
		};
		init_main(&a);
	}
	ab_close_keep_errno(ab_steal_fd(&child_fd));

	r = userns_write_maps(pid, cfg, err);
	if (r == 0 && (r = sync_send(sync_fd, SYNC_GO, 0, 0, NULL)) < 0)
		ab_error_set(err, -r, "cannot start the sandbox");
	if (r < 0) {
		kill_and_reap(pid);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return r;
	}

	struct supervision s = {0};
	r = supervise(pid, sync_fd, sigfd, &s);
	if (r < 0) {
		kill_and_reap(pid);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return ab_error_set(err, -r, "supervising the sandbox");
	}
	sigprocmask(SIG_SETMASK, &old, NULL);

	if (s.have_error) {
		*err = s.error;
		return -err->code;
	}
	if (!s.have_exit) {
		if (WIFSIGNALED(s.init_status))
			return ab_error_plain(err, EIO,
					      "the sandbox's init was killed by signal %d before "
					      "the command's status was known",
					      WTERMSIG(s.init_status));
		return ab_error_plain(err, EIO,
				      "the sandbox's init exited with status %d before the "
				      "command's status was known",
				      WEXITSTATUS(s.init_status));
	}
	if (WIFSIGNALED(s.status)) {
		res->signal = WTERMSIG(s.status);
		res->exit_code = AB_EXIT_SIGNAL_BASE + res->signal;
	} else {
		res->signal = 0;
		res->exit_code = WEXITSTATUS(s.status);
	}
	return 0;
}

int ab_run(struct ab_config *cfg, struct ab_result *res, struct ab_error *err)
{
	int r = ab_config_finish(cfg, err);
	if (r < 0)
		return r;
	struct view_plan plan;
	r = view_plan_build(cfg, &plan, err);
	if (r < 0) {
		view_plan_free(&plan);
		return r;
	}
	char **envp = NULL;
	r = ab_env_build(cfg, environ, &envp, err);
	if (r == 0)
		r = run_sandbox(cfg, &plan, envp, res, err);
	ab_env_free(envp);
	view_plan_free(&plan);
	return r;
}
