/* The sandbox side: what the cloned child does, from the first instruction
 * in the new namespaces to pid 1's loop. The same for `agentbox run` and
 * `agentbox serve`: a run is a session of one command.
 *
 * Setup order (fixed; each step needs the one before it):
 *   1. wait for the launcher's GO: the uid/gid maps exist, and the init is
 *      in the sandbox's v2 cgroup where there is one
 *   2. new session; become the sandbox user (capabilities in the new user
 *      namespace stay); parent-death signal set again, since a credential
 *      change clears it; not dumpable
 *   3. open mount sources while the host tree is visible, build the view,
 *      pivot, detach the host root, root read-only
 *   4. enter the v1 cgroups the launcher made meanwhile, by their tasks
 *      files it sends (SYNC_CGROUP); a new cgroup namespace makes the
 *      sandbox's cgroups its root
 *   5. the network namespace the launcher made meanwhile, loopback up
 *      (SYNC_NETNS; or the clone's); host name; loopback up (the clone's);
 *      then a nested user and mount namespace, which locks every mount of
 *      the view (flags, and what lies beneath). A sysfs, if the view ever
 *      gets one, would have to be mounted after this: it keeps the
 *      mounter's network namespace
 *   6. the Landlock ruleset (if the kernel has Landlock); working directory
 *   7. confine itself, once for every command: rlimits, every capability
 *      dropped, no_new_privs, Landlock enforced, the idmap guard, seccomp
 *      last (its listener goes to the launcher); tell the launcher READY
 *      with the Landlock ABI (fails if it is gone)
 *   8. start command shims (shim.c) as the launcher asks and hand their
 *      sockets over, or, in a one-command session, be that shim itself
 *      (which leaves its v1 cgroups before its last word, so the launcher
 *      removes them without waiting for its end); as pid 1, reap, kill
 *      a shim that stops (its socket's end tells the launcher), and kill
 *      what a command left when it killed its shim. When it exits,
 *      the kernel kills whatever is left.
 */
#include "sandbox/init.h"
#include "net/netproxy.h"
#include "net/netsecret.h"

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
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/caps.h"
#include "sandbox/gitid.h"
#include "cgroup/cgroup.h"
#include "view/landlock.h"
#include "util/parse.h"
#include "seccomp/seccomp_profile.h"
#include "sandbox/shim.h"
#include "util/error.h"
#include "view/idmap.h"
#include "view/overlay.h"
#include "sandbox/isolation.h"
#include "layer/layer.h"
#include "util/proc.h"
#include "util/sync.h"
#include "sandbox/userns.h"
#include "util/util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

const int ab_forwarded_signals[6] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

int ab_forwarded_signals_fd(int extra, sigset_t *old)
{
	sigset_t mask;
	sigemptyset(&mask);
	for (size_t i = 0; i < AB_ARRAY_SIZE(ab_forwarded_signals); i++)
		sigaddset(&mask, ab_forwarded_signals[i]);
	if (extra)
		sigaddset(&mask, extra);
	if (sigprocmask(SIG_BLOCK, &mask, old) < 0)
		return -1;
	return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

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

/* A one-command session (`agentbox run`): the init is that command's shim
 * itself, on the socket the launcher made before the clone (its command
 * may be waiting there already), so a run has no process more than the
 * command and its pid 1, and no round trip more than READY. */
static _Noreturn void be_the_shim(struct init_args *a, int sigfd)
{
	close(sigfd);
	/* as pid 1 it is the reaper of everything the command starts */
	shim_serve(a, a->shim_sock);
}

/* Confine the init once, for every command: what a command's process
 * would do, so that each command only needs a spawn, and the seccomp
 * listener is handed over once for the whole session. Not inlined: its
 * error's buffer stays off the idle loop's frame. */
static __attribute__((noinline)) void confine_once(struct init_args *a)
{
	struct ab_error err = {0};
	/* without namespaces the command enforces Landlock itself (shim.c):
	 * the init stays out of its domain */
	bool bare = a->cfg->isolation_missing & AB_MISSING_NAMESPACES;
	/* the RLIMIT_AS standing in for --memory is the command's alone, set
	 * as each starts (shim.c): a limit on the init and the shims would
	 * hold agentbox's own processes, and cannot work under ASan at all */
	if (apply_rlimits(a->cfg, &err) < 0 || ab_cgroup_apply_nproc(a->cgroup, &err) < 0 ||
	    caps_drop_all(&err) < 0 || landlock_enforce(bare ? -1 : a->landlock_fd, &err) < 0 ||
	    idmap_guard_install(a->plan, &err) < 0)
		init_fail(a->sync_fd, &err);
	if (a->landlock_fd >= 0 && !bare) {
		a->landlock_enforced = true;
		close(a->landlock_fd);
	}
	/* what building the view and the confinement so far used and freed
	 * goes back, for every idle sandbox (and the shims forked from
	 * here): the last step before the seccomp filter, whose profile may
	 * not know madvise or brk */
	ab_cgroup_forget_sweeps();
	ab_memory_trim();
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
}

/* Room for twice as many shims as *cap (a table moved from few to the
 * heap); false at 1,024 or without memory. */
static bool shims_grow(pid_t **shim, pid_t *few, size_t *cap)
{
	enum { MAX_SHIMS = 1024 };
	if (*cap >= MAX_SHIMS)
		return false;
	pid_t *more = realloc(*shim == few ? NULL : *shim, 2 * *cap * sizeof(**shim));
	if (!more)
		return false;
	if (*shim == few)
		memcpy(more, few, *cap * sizeof(*few));
	*shim = more;
	*cap *= 2;
	return true;
}

/* The init confines itself (confine_once), says READY, then starts command
 * shims when the launcher asks (SYNC_NEW_SHIM) and hands their sockets
 * over: the launcher gives each command to an idle shim directly. The init
 * reaps, and kills what a command left when it killed its own shim. As
 * pid 1 of the namespace, no process of the sandbox can kill it. */
static _Noreturn void session_loop(struct init_args *a, int sigfd, int landlock_abi)
{
	confine_once(a);
	/* the parent-death signal is armed again; if the launcher died in
	 * between, this send fails and nothing runs unsupervised */
	if (sync_send(a->sync_fd, SYNC_READY, 0, landlock_abi, NULL) < 0)
		_exit(AB_EXIT_FAILURE);
	if (a->one_command)
		be_the_shim(a, sigfd);
	/* on this frame while few, on the heap beyond: not a static table,
	 * whose page of .bss the init alone would write (a copy of the
	 * launcher's, one more page of every idle sandbox) */
	pid_t few[64], *shim = few;
	size_t n_shims = 0, cap = AB_ARRAY_SIZE(few);
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
			int st;
			for (pid_t p; (p = waitpid(-1, &st, WNOHANG | WUNTRACED)) > 0;) {
				/* stopped (a command's kill -STOP, where no
				 * Landlock signal scope keeps it out): it would
				 * take work and never do it. Killed, and its
				 * socket's end tells the launcher, which asks
				 * for another; reaped on its SIGCHLD */
				if (WIFSTOPPED(st)) {
					kill(p, SIGKILL);
					continue;
				}
				for (size_t i = 0; i < n_shims;)
					if (shim[i] == p)
						shim[i] = shim[--n_shims];
					else
						i++;
			}
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
		if (n_shims == cap && !shims_grow(&shim, few, &cap))
			sync_send(a->sync_fd, SYNC_NO_SHIM, 0, EAGAIN, NULL);
		else if ((shim[n_shims] = new_shim(a, sigfd)) > 0)
			n_shims++;
	}
}

/* The v1 cgroups, which the launcher made while the view was built: it
 * sends their tasks files (none on a v2 host, or without a cgroup) and the
 * RLIMIT_AS fallback it decided on the way. Writing "0" moves only the
 * init itself, which takes no global lock (cgroup.h). */
static void join_cgroup(struct init_args *a)
{
	struct sync_msg m;
	int fds[8];
	size_t n = 0;
	if (sync_recv_fds(a->sync_fd, &m, fds, AB_ARRAY_SIZE(fds), &n) != 1 ||
	    m.type != SYNC_CGROUP)
		_exit(AB_EXIT_FAILURE);
	ab_cgroup_set_rlimit_as(a->cgroup,
				(unsigned long long)(uint32_t)m.code << 32 | (uint32_t)m.status);
	/* "NPROC leave|stay": the RLIMIT_NPROC standing in for --pids */
	unsigned long nproc = 0;
	char how[8] = "";
	if (sscanf(m.text, "%lu %7s", &nproc, how) != 2)
		_exit(AB_EXIT_FAILURE);
	ab_cgroup_set_rlimit_nproc(a->cgroup, nproc);
	/* a run's: the ways out, taken once its command is gone (shim.c) */
	if (strcmp(how, SYNC_CGROUP_LEAVE) == 0) {
		n /= 2;
		if (a->one_command)
			ab_cgroup_hold_leave(fds + n, n);
		else
			for (size_t i = n; i < 2 * n; i++)
				close(fds[i]);
	}
	struct ab_error err = {0};
	int r = ab_cgroup_enter(fds, n, &err);
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	if (r < 0)
		init_fail(a->sync_fd, &err);
}

/* The network namespace the launcher made meanwhile (userns_make_net),
 * loopback up: the sandbox's from here on. */
static void join_net(struct init_args *a)
{
	struct sync_msg m;
	int fd = -1;
	size_t n = 0;
	if (sync_recv_fds(a->sync_fd, &m, &fd, 1, &n) != 1 || m.type != SYNC_NETNS || n != 1)
		_exit(AB_EXIT_FAILURE);
	struct ab_error err = {0};
	if (setns(fd, CLONE_NEWNET) < 0) {
		ab_error_set(&err, errno, "cannot enter the sandbox's network namespace");
		init_fail(a->sync_fd, &err);
	}
	close(fd);
}

/* The launcher's stdin, stdout and stderr, which the clone copied, are the
 * caller's (a session's protocol pipes, a log file): the view's /dev/null
 * in their place, so that no host file stays open in the init or a shim
 * (a file operation reaches /proc/self/fd/2 like any path). Without a
 * /dev/null in the view (a minimal container has none), a sealed empty
 * memfd: reads see its end, writes fail. */
static void stdio_from_view(int sync_fd)
{
	int fd = open("/dev/null", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	if (fd < 0 && (fd = memfd_create("agentbox-null", MFD_CLOEXEC | MFD_ALLOW_SEALING)) >= 0)
		fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_WRITE);
	struct ab_error err = {0};
	for (int i = 0; i < 3; i++)
		if (fd < 0 || dup2(fd, i) < 0) {
			ab_error_set(&err, errno,
				     "cannot replace the launcher's stdio in the sandbox");
			init_fail(sync_fd, &err);
		}
	if (fd > 2)
		close(fd);
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

/* Everything before the loop, in a frame of its own (never inlined): its
 * buffers are not on the stack the idle init waits on, a page of every
 * idle sandbox. Returns the signal fd, the Landlock ABI in *landlock_abi. */
static __attribute__((noinline)) int init_setup(struct init_args *a, int *landlock_abi_out)
{
	struct ab_error err = {0};
	struct sync_msg m;

	scrub_environ();
	/* the launcher may ignore SIGPIPE (agentbox serve does); commands
	 * get every signal at its default */
	signal(SIGPIPE, SIG_DFL);
	if (a->cfg->umask_set) /* a detached sandbox's: the caller's (agentbox.h) */
		umask(a->cfg->umask);

	/* if the launcher died before this, GO never comes: recv sees EOF */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* the launcher's detached mounts of the sources (idmap.h) stay */
	int keep[4 + a->plan->n];
	size_t n_keep = 0;
	keep[n_keep++] = a->sync_fd;
	keep[n_keep++] = a->shim_sock;
	for (size_t i = 0; i < a->plan->n; i++)
		if (a->plan->e[i].tree_fd >= 0)
			keep[n_keep++] = a->plan->e[i].tree_fd;
	if (a->plan->layer) /* its upper and work directories (layer.h) */
		n_keep += layer_keep_fds(a->plan->layer, keep + n_keep);
	close_fds_except(keep, n_keep);
	if (sync_recv(a->sync_fd, &m, NULL) != 1 || m.type != SYNC_GO)
		_exit(AB_EXIT_FAILURE);

	setsid();
	int landlock_abi = 0;
	if (a->cfg->isolation_missing & AB_MISSING_NAMESPACES) {
		join_cgroup(a);
		if (ab_bare_confine(a, &landlock_abi, &err) < 0)
			init_fail(a->sync_fd, &err);
		goto confined;
	}
	if (userns_become_sandbox_user(a->cfg, a->by_root, &err) < 0)
		init_fail(a->sync_fd, &err);
	userns_limit_inotify();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_DUMPABLE, 0);

	/* an overlay workspace's checkpoints (ckpt/) restack it from the
	 * launcher, with these clones (a plain user's) in these namespaces */
	bool restack = a->plan->layer && !a->one_command;
	int trees[2] = {-1, -1};
	a->plan->restack = restack;
	if (view_open_sources(a->plan, &err) < 0 ||
	    (restack && !a->by_root && overlay_clone_for_checkpoints(a->plan, trees, &err) < 0) ||
	    view_build(a->plan, &err) < 0 || gitid_write(a->cfg->home, a->gitconfig, &err) < 0 ||
	    (a->secrets && net_secrets_inside(a->secrets, &err) < 0))
		init_fail(a->sync_fd, &err);
	stdio_from_view(a->sync_fd);
	join_cgroup(a);
	if (unshare(CLONE_NEWCGROUP) < 0) {
		ab_error_set(&err, errno, "cannot create the cgroup namespace");
		init_fail(a->sync_fd, &err);
	}
	if (a->net_beside)
		join_net(a);
	int view_ns = restack ? open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC) : -1;
	if (userns_setup_uts_net(a->cfg, a->net_beside, &err) < 0 ||
	    userns_lock_view(a->cfg, &err) < 0 || (restack && view_proc_read_only(&err) < 0))
		init_fail(a->sync_fd, &err);
	if (restack) {
		int mnt = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
		if (view_ns < 0 || mnt < 0 || sync_send_fd(a->sync_fd, SYNC_VIEWNS, view_ns) < 0 ||
		    sync_send_fds_status(a->sync_fd, SYNC_VIEWNS, 0, 1, &mnt, 1, NULL) < 0)
			_exit(AB_EXIT_FAILURE);
		for (int i = 0; i < 2; i++)
			if (trees[i] >= 0 && sync_send_fds_status(a->sync_fd, SYNC_VIEWNS, 0, 2 + i,
								  &trees[i], 1, NULL) < 0)
				_exit(AB_EXIT_FAILURE);
		for (size_t i = 0, k = 0; i < a->plan->n; i++) {
			struct view_entry *e = &a->plan->e[i];
			if (e->own_layer && e->own_fd >= 0 &&
			    sync_send_fds_status(a->sync_fd, SYNC_VIEWNS, 0, 4 + (int)k, &e->own_fd,
						 1, NULL) < 0)
				_exit(AB_EXIT_FAILURE);
			k += e->own_layer;
			ab_close_keep_errno(e->own_fd);
			e->own_fd = -1;
		}
		close(view_ns);
		close(mnt);
		ab_close_keep_errno(trees[0]);
		ab_close_keep_errno(trees[1]);
	}
	if (a->cfg->net == AB_NET_PROXY && netproxy_listen_inside(a->sync_fd, &err) < 0)
		init_fail(a->sync_fd, &err); /* --net allow=: docs/network.md */
	prctl(PR_SET_DUMPABLE, 0);
	if (!a->cfg->no_landlock &&
	    landlock_prepare(a->plan, restack, &a->landlock_fd, &landlock_abi, &err) < 0)
		init_fail(a->sync_fd, &err);
	if (chdir(a->cfg->cwd) < 0) {
		ab_error_set(&err, errno, "--cwd: cannot enter %s in the sandbox", a->cfg->cwd);
		init_fail(a->sync_fd, &err);
	}

confined:;
	/* blocked here too: a session's launcher does not block them for us */
	int sigfd = ab_forwarded_signals_fd(SIGCHLD, NULL);
	if (sigfd < 0) {
		ab_error_set(&err, errno, "cannot watch signals in the sandbox");
		init_fail(a->sync_fd, &err);
	}
	*landlock_abi_out = landlock_abi;
	return sigfd;
}

_Noreturn void init_main(struct init_args *a)
{
	int landlock_abi = 0;
	int sigfd = init_setup(a, &landlock_abi);
	session_loop(a, sigfd, landlock_abi);
}
