/* The per-command shim of a session (see shim.h). It runs in the sandbox
 * with the init's confinement already in force (no capabilities,
 * no_new_privs, Landlock, seccomp), so the command inherits all of it and
 * only needs its own session, stdio, working directory and environment. */
#include "sandbox/shim.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "files/fileop.h"
#include "sandbox/isolation.h"
#include "view/landlock.h"
#include "util/proc.h"
#include "util/util.h"
#include "util/vfork.h"
#include "warm/warm.h"

#define STARTED_DELAY_MS 5

struct shim {
	int ctl;
	int out, err;		  /* the launcher's pipes, -1 once closed */
	int relay_out, relay_err; /* keep_background: the command's pipes to us */
	int log;		  /* keep_background: where output goes after the result */
	pid_t cmd;
	bool cmd_done, killing, exited_sent, started_sent;
	int status;
	struct shim_msg msg;
};

/* what: the first part of the message, strerror(e) follows */
static void shim_fail(struct shim *sh, int e, const char *what)
{
	struct shim_msg m = {.type = SHIM_FAILED, .status = e};
	snprintf(m.text, sizeof(m.text), "%s: %s", what, strerror(e));
	packet_send(sh->ctl, &m, sizeof(m), NULL, 0);
}

/* The spec's bytes: from a pipe (a small spec) up to its end, or from a
 * memfd of its size; NULL when it is over SHIM_SPEC_MAX or unreadable. */
static char *spec_bytes(int fd, size_t *len)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size > SHIM_SPEC_MAX)
		return NULL;
	bool pipe = S_ISFIFO(st.st_mode);
	size_t cap = pipe ? 4096 : (size_t)st.st_size, off = 0;
	char *buf = malloc(cap + 1);
	while (buf) {
		if (off == cap && (!pipe || cap >= SHIM_SPEC_MAX))
			break;
		if (off == cap) {
			char *grown = realloc(buf, 2 * cap + 1);
			if (!grown)
				break;
			buf = grown;
			cap *= 2;
		}
		ssize_t n = pipe ? read(fd, buf + off, cap - off)
				 : pread(fd, buf + off, cap - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (n == 0 && !pipe)) {
			free(buf);
			return NULL;
		}
		if (n == 0)
			break; /* the pipe's end */
		off += (size_t)n;
	}
	if (buf && pipe && off == cap && cap >= SHIM_SPEC_MAX) {
		free(buf);
		return NULL;
	}
	if (buf)
		buf[off] = '\0';
	*len = off;
	return buf;
}

/* The spec the launcher wrote: header and strings, every bound checked. */
static char *read_spec(int fd, struct shim_spec *hdr, char ***argv, char ***envp, char **cwd)
{
	size_t len;
	char *buf = spec_bytes(fd, &len);
	if (!buf)
		return NULL;
	if (len < sizeof(*hdr)) {
		free(buf);
		return NULL;
	}
	memcpy(hdr, buf, sizeof(*hdr));
	if (hdr->magic != SHIM_SPEC_MAGIC || hdr->argc == 0 || hdr->argc > len || hdr->envc > len) {
		free(buf);
		return NULL;
	}
	size_t n = (size_t)hdr->argc + hdr->envc + 1;
	char **v = calloc(n + 2, sizeof(char *)); /* argv NULL, envp NULL */
	if (!v) {
		free(buf);
		return NULL;
	}
	char *p = buf + sizeof(*hdr), *end = buf + len;
	for (size_t i = 0, k = 0; i < n; i++, k++) {
		if (p >= end) {
			free(v);
			free(buf);
			return NULL;
		}
		if (i == hdr->argc)
			k++; /* argv's NULL */
		v[k] = p;
		p += strlen(p) + 1;
	}
	*argv = v;
	*envp = v + hdr->argc + 1;
	*cwd = v[hdr->argc + 1 + hdr->envc];
	v[hdr->argc + 1 + hdr->envc] = NULL; /* envp's NULL */
	return buf;
}

/* --isolation best without namespaces (isolation_bare.c), else NULL; and
 * then the Landlock ruleset the command enforces itself: with no pid
 * namespace to protect them, agentbox's processes stay out of its domain,
 * which keeps the command from signalling them (scoped signals). */
static const struct ab_config *bare_cfg;
static int bare_landlock = -1;
/* A session shim's command layer (landlock_command_layer): each session
 * command, and the warm shell, in a Landlock domain of its own; -1 for
 * `agentbox run`'s one command, or where the sandbox has no Landlock. */
static int command_layer = -1;
/* RLIMIT_AS for every command, where no cgroup limits memory: set in the
 * command's process, not in the shim (whose memory is agentbox's). */
static unsigned long long as_limit;
/* Opened once for the shim's life, not on each command's path: SIGCHLD,
 * and a pidfd of the shim itself (sent with every SHIM_STARTED). */
static int shim_sigfd = -1, self_pidfd = -1;
static int shim_sigfd_errno; /* why shim_sigfd is -1 */
/* A session shim's warm child (warm.h): the next `sh -c` command, exec'd
 * while the shim is idle */
static struct warm shim_warm = {.object = -1, .devnull = -1, .ctl = -1, .disabled = true};

struct spawn_args {
	int in, out, err;
	bool ctty; /* in is a pty's slave: the command's controlling terminal */
	char **argv;
	unsigned long long as_limit; /* RLIMIT_AS for --memory without a cgroup; 0: none */
	int landlock_fd;	     /* to enforce (bare_landlock, command_layer), or -1 */
	int exec_errno;		     /* written by the child: memory is shared until it execs */
};

/* The child of spawn_command, on its own stack in the shim's memory: raw
 * system calls only until execve. */
static int spawn_child(void *p)
{
	struct spawn_args *a = p;
	sigset_t none;
	sigemptyset(&none);
	if (a->landlock_fd >= 0 && syscall(SYS_landlock_restrict_self, a->landlock_fd, 0) < 0) {
		a->exec_errno = errno;
		_exit(AB_EXIT_CANNOT_EXEC);
	}
	if (setsid() < 0 || (a->ctty && ioctl(a->in, TIOCSCTTY, 0) < 0) ||
	    dup2(a->in, STDIN_FILENO) < 0 || dup2(a->out, STDOUT_FILENO) < 0 ||
	    dup2(a->err, STDERR_FILENO) < 0) {
		a->exec_errno = errno;
		_exit(AB_EXIT_CANNOT_EXEC);
	}
	struct rlimit as = {a->as_limit, a->as_limit};
	if (a->as_limit && setrlimit(RLIMIT_AS, &as) < 0) {
		a->exec_errno = errno;
		_exit(AB_EXIT_CANNOT_EXEC);
	}
	/* a new terminal's signals act as on any terminal, even when
	 * agentbox's caller ignored them (a background job ignores SIGINT
	 * and SIGQUIT, and exec keeps that): Ctrl-C, Ctrl-\, Ctrl-Z work */
	static const int tty_signals[] = {SIGINT,  SIGQUIT, SIGTSTP, SIGTTIN,
					  SIGTTOU, SIGHUP,  SIGWINCH};
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	for (size_t i = 0; a->ctty && i < sizeof(tty_signals) / sizeof(tty_signals[0]); i++)
		sigaction(tty_signals[i], &dfl, NULL);
	/* every fd of the shim but 0-2 is close-on-exec */
	sigprocmask(SIG_SETMASK, &none, NULL);
	execvp(a->argv[0], a->argv); /* the PATH of environ: the command's */
	a->exec_errno = errno;
	_exit(AB_EXIT_CANNOT_EXEC);
}

/* The command, spawned the cheap way (vfork.h), as posix_spawn does, so no page table is copied,
 * but without its query of every signal's disposition (the shim has no handlers and no ignored
 * signals, so exec resets nothing). Its own session, an empty signal mask,
 * stdio, and only fds 0-2. Returns 0, or -errno of the exec. */
static int spawn_command(struct shim *sh, int in, int out, int err, bool ctty, char **argv,
			 char **envp)
{
	enum { STACK = 256 << 10 };
	static char *stack;
	if (!stack) {
		stack = mmap(NULL, STACK, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (stack == MAP_FAILED) {
			stack = NULL;
			return -ENOMEM;
		}
	}
	struct spawn_args a = {.in = in,
			       .out = out,
			       .err = err,
			       .ctty = ctty,
			       .argv = argv,
			       .as_limit = as_limit,
			       .landlock_fd = bare_cfg ? bare_landlock : command_layer};
	environ = envp;
	sh->cmd = ab_vfork_child(spawn_child, &a, 0, stack, STACK);
	environ = NULL;
	if (sh->cmd < 0)
		return -errno;
	if (a.exec_errno) {
		/* it exited without running anything: reap it here */
		waitpid(sh->cmd, NULL, 0);
		sh->cmd = -1;
		return -a.exec_errno;
	}
	return 0;
}

/* Every process below this one, by walking /proc (the sandbox's own
 * procfs, whose pids are ours): as the subreaper, whatever the command
 * left behind is our child or a child's descendant. Returns how many
 * there are; signals them when sig != 0; fills up to max of list. */
static size_t descendants(int sig, struct shim_msg *list, size_t max)
{
	enum { MAXP = 8192 };
	static pid_t pid[MAXP], ppid[MAXP];
	static bool mine[MAXP];
	size_t n = 0;
	struct ab_procs it;
	if (ab_procs_open(&it) < 0)
		return 0;
	while (n < MAXP && ab_procs_next(&it, &pid[n], &ppid[n]))
		mine[n++] = false;
	ab_procs_close(&it);
	pid_t self = getpid();
	size_t found = 0;
	for (bool grew = true; grew;) {
		grew = false;
		for (size_t i = 0; i < n; i++) {
			if (mine[i])
				continue;
			bool under = ppid[i] == self;
			for (size_t j = 0; !under && j < n; j++)
				under = mine[j] && pid[j] == ppid[i];
			if (under) {
				mine[i] = grew = true;
				found++;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!mine[i])
			continue;
		if (sig)
			kill(pid[i], sig);
		if (list && list->n_background < max) {
			char comm[32];
			/* right in an outer namespace's /proc too */
			ab_proc_comm(pid[i], comm, sizeof(comm));
			list->background[list->n_background].pid = pid[i];
			snprintf(list->background[list->n_background].comm,
				 sizeof(list->background[0].comm), "%.*s",
				 (int)sizeof(list->background[0].comm) - 1, comm);
			list->n_background++;
		}
	}
	return found;
}

static void add_rusage(struct shim_msg *m, const struct rusage *ru)
{
	m->utime_us += (uint64_t)ru->ru_utime.tv_sec * 1000000 + (uint64_t)ru->ru_utime.tv_usec;
	m->stime_us += (uint64_t)ru->ru_stime.tv_sec * 1000000 + (uint64_t)ru->ru_stime.tv_usec;
	if ((uint64_t)ru->ru_maxrss > m->maxrss_kb)
		m->maxrss_kb = (uint64_t)ru->ru_maxrss;
}

/* Reap what has exited. Returns false when no child is left. */
static bool reap(struct shim *sh)
{
	for (;;) {
		int st;
		struct rusage ru;
		pid_t p = wait4(-1, &st, WNOHANG, &ru);
		if (p < 0)
			return errno != ECHILD;
		if (p == 0)
			return true;
		add_rusage(&sh->msg, &ru);
		if (p == sh->cmd) {
			sh->cmd_done = true;
			sh->status = st;
		}
	}
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The launcher's output pipes (one fd when merged). */
static void close_output(struct shim *sh)
{
	if (sh->err != sh->out)
		close_fd(&sh->err);
	close_fd(&sh->out);
	sh->err = -1;
}

/* keep_background: copy what the command's pipe holds to dst. Returns
 * false at end of file. */
static bool relay(int *src, int dst)
{
	char buf[65536];
	ssize_t n = read(*src, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0) {
		close_fd(src);
		return false;
	}
	for (ssize_t off = 0; dst >= 0 && off < n;) {
		ssize_t w = write(dst, buf + off, (size_t)(n - off));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* the reader is gone: drop it */
		off += w;
	}
	return true;
}

static long long monotonic_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* SHIM_STARTED, with pidfds of the shim and of the command, once, when
 * the command has run STARTED_DELAY_MS; not at all when it exits before,
 * so that a short command costs the launcher one wake-up, not two.
 * The launcher needs the pidfds only to kill from outside should this
 * shim be gone; until then the init kills what a dead shim leaves. */
static void send_started(struct shim *sh)
{
	if (sh->started_sent)
		return;
	sh->started_sent = true;
	int pidfds[2] = {
		self_pidfd,
		sh->cmd > 0 ? (int)syscall(SYS_pidfd_open, sh->cmd, 0) : -1,
	};
	struct shim_msg started = {.type = SHIM_STARTED};
	packet_send(sh->ctl, &started, sizeof(started), pidfds,
		    pidfds[0] >= 0 && pidfds[1] >= 0 ? 2 : 0);
	close_fd(&pidfds[1]);
}

/* The main process has exited: report, and for keep_background move the
 * output of what is left to the log. */
static void report_exit(struct shim *sh, bool keep_background, uint64_t seq)
{
	/* no pid namespace ends what is left: that is done now, before the
	 * result, and the private tmp goes with it */
	if (bare_cfg && !keep_background)
		ab_bare_finish();
	bool left = reap(sh);
	sh->msg.type = SHIM_EXITED;
	sh->msg.status = sh->status;
	sh->msg.final = !left;
	if (left && keep_background) {
		descendants(0, &sh->msg, SHIM_MAX_BACKGROUND);
		snprintf(sh->msg.text, sizeof(sh->msg.text), "/tmp/agentbox-background-%llu.log",
			 (unsigned long long)seq);
		sh->log = open(sh->msg.text, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
			       0600);
		if (sh->log < 0)
			sh->msg.text[0] = '\0';
	}
	/* what is in the pipes now belongs to the result (also when nothing
	 * is left: its output may not have been relayed yet) */
	while (keep_background && sh->relay_out >= 0 &&
	       poll(&(struct pollfd){.fd = sh->relay_out, .events = POLLIN}, 1, 0) > 0 &&
	       relay(&sh->relay_out, sh->out))
		;
	while (keep_background && sh->relay_err >= 0 &&
	       poll(&(struct pollfd){.fd = sh->relay_err, .events = POLLIN}, 1, 0) > 0 &&
	       relay(&sh->relay_err, sh->err))
		;
	/* a run's init (ab_cgroup_hold_leave): out of the cgroups before its
	 * last word, so the launcher removes them without awaiting our end */
	if (!left)
		ab_cgroup_leave();
	/* a command reaped before it was ever said STARTED has no pidfd to
	 * give: EXITED alone says it all */
	sh->started_sent = true;
	packet_send(sh->ctl, &sh->msg, sizeof(sh->msg), NULL, 0);
	sh->exited_sent = true;
	/* our copies of the output pipes were held until now: the end of the
	 * output comes right behind EXITED, and the launcher takes both in one
	 * wake-up (with keep_background the result is complete, too) */
	close_output(sh);
	if (keep_background)
		close_fd(&sh->ctl);
}

/* SIGKILL to everything left, until nothing is. */
static void kill_all(struct shim *sh, bool keep_background, uint64_t seq)
{
	for (;;) {
		descendants(SIGKILL, NULL, 0);
		if (!reap(sh))
			break;
		if (sh->cmd_done && !sh->exited_sent)
			report_exit(sh, keep_background, seq);
		usleep(1000);
	}
	if (sh->cmd_done && !sh->exited_sent)
		report_exit(sh, keep_background, seq);
}

/* A file operation, done by this shim itself: no fork. For the launcher it
 * is a command whose process is the shim (both pidfds of SHIM_STARTED are
 * ours), so a timeout or a cancel kills the shim, and the pool makes
 * another. Its SHIM_EXITED is final: the launcher signals this process as
 * the operation's only until it has read it, and (SHIM_IDLE_AT_FINAL)
 * gives it no other command before, so no SHIM_KILL round trip follows. */
static void run_file_op(struct shim *sh, const char *request, int *data, bool no_started)
{
	int self[2] = {self_pidfd, self_pidfd};
	struct shim_msg started = {.type = SHIM_STARTED};
	if (!no_started)
		packet_send(sh->ctl, &started, sizeof(started), self, self_pidfd >= 0 ? 2 : 0);
	int r = fileop_run(request, sh->out, *data);
	close_fd(data);	  /* the bulk path's pipe: its end is the launcher's end of file */
	close_output(sh); /* the reply is complete */
	sh->msg = (struct shim_msg){.type = SHIM_EXITED, .status = r ? 1 << 8 : 0, .final = 1};
	sh->started_sent = true;
	sh->exited_sent = packet_send(sh->ctl, &sh->msg, sizeof(sh->msg), NULL, 0) >= 0;
}

/* A file operation's reply on its way back on pool (inline_file_op): the
 * last FILEOP_PKT_MAX bytes held for FILEOP_DONE, what came before sent. */
struct inline_reply {
	int pool, err;
	size_t len;
	char buf[FILEOP_PKT_MAX];
};

static void inline_put(const char *data, size_t len, void *arg)
{
	struct inline_reply *r = arg;
	while (len && !r->err) {
		if (r->len == sizeof(r->buf)) {
			r->err = fileop_pkt_send(r->pool, SYNC_FILEOP_OUT, 0, r->buf, r->len);
			r->len = 0;
		}
		size_t k = sizeof(r->buf) - r->len < len ? sizeof(r->buf) - r->len : len;
		memcpy(r->buf + r->len, data, k);
		r->len += k;
		data += k;
		len -= k;
	}
}

/* A file operation that came on pool itself (SYNC_FILEOP): no fds, no
 * control socket, no STARTED (the launcher has this shim's pidfd from the
 * init). The reply goes back on pool in FILEOP_OUT packets of
 * FILEOP_PKT_MAX, the rest in FILEOP_DONE, which also says the shim is
 * idle: one wake-up of the launcher for a reply that fits one packet. A
 * timeout or a cancel kills the shim, as for a file operation on fds.
 * Returns 0, or -errno when pool is gone. */
static int inline_file_op(int pool, const char *request)
{
	static struct inline_reply r;
	r.pool = pool;
	r.err = 0;
	r.len = 0;
	int st = fileop_run_with(request, inline_put, &r) ? 1 : 0;
	if (r.err)
		return r.err;
	return fileop_pkt_send(pool, SYNC_FILEOP_DONE, st, r.buf, r.len);
}

/* The command runs: reap, report its exit, relay kept-background output,
 * and do what the launcher says on ctl, until nothing of it is left. */
static void supervise_command(struct shim *sh, int sigfd, bool keep_bg, uint64_t seq)
{
	/* one deadline: processes that end more often than every
	 * STARTED_DELAY_MS must not hold STARTED off */
	long long started_at = monotonic_ms() + STARTED_DELAY_MS;
	for (;;) {
		struct pollfd p[4] = {
			{.fd = sigfd, .events = POLLIN},
			{.fd = sh->ctl, .events = POLLIN},
			{.fd = sh->relay_out, .events = POLLIN},
			{.fd = sh->relay_err, .events = POLLIN},
		};
		int timeout = -1;
		if (!sh->started_sent) {
			long long left = started_at - monotonic_ms();
			timeout = left > 0 ? (int)left : 0;
		}
		int ready = poll(p, 4, timeout);
		if (ready < 0 && errno != EINTR) {
			kill_all(sh, keep_bg, seq);
			break;
		}
		if (!p[0].revents || (!sh->started_sent && monotonic_ms() >= started_at))
			send_started(sh); /* it runs on: the launcher gets its pidfds now */
		if (p[0].revents) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == sizeof(si))
				;
			bool left = reap(sh);
			if (sh->cmd_done && !sh->exited_sent)
				report_exit(sh, keep_bg, seq);
			if (sh->cmd_done && !left && sh->relay_out < 0 && sh->relay_err < 0)
				break;
		}
		if (p[1].revents) {
			char c = 0;
			ssize_t n = read(sh->ctl, &c, 1);
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 1 && c == SHIM_TERM) {
				descendants(SIGTERM, NULL, 0);
			} else if (n == 1 && c > 0 && c < SHIM_SIGNAL_MAX) {
				/* forwarded: to the command's group, as a shell would */
				if (sh->cmd > 0 && kill(-sh->cmd, c) < 0 && !sh->cmd_done)
					kill(sh->cmd, c);
			} else {
				kill_all(sh, keep_bg, seq);
				break;
			}
		}
		int to_out = sh->exited_sent ? sh->log : sh->out;
		int to_err = sh->exited_sent ? sh->log : sh->err;
		if (p[2].revents)
			relay(&sh->relay_out, to_out);
		if (p[3].revents)
			relay(&sh->relay_err, to_err);
		if (sh->exited_sent && keep_bg && sh->relay_out < 0 && sh->relay_err < 0 &&
		    !reap(sh))
			break;
	}
}

/* SHIM_PTY: a new pty pair of the sandbox's own devpts instance (never a
 * terminal of the caller's), rows x cols. The slave is taken from the
 * master (TIOCGPTPEER), not by a path in /dev/pts. */
static int pty_open(const struct shim_spec *hdr, int *master, int *slave)
{
	*master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master < 0)
		return -errno;
	int unlock = 0;
	struct winsize ws = {.ws_row = hdr->rows, .ws_col = hdr->cols};
	if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 || ioctl(*master, TIOCSWINSZ, &ws) < 0 ||
	    (*slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		int e = errno;
		close_fd(master);
		return -e;
	}
	return 0;
}

/* The master to the launcher, first on ctl; none is kept here. */
static void pty_send(struct shim *sh, int *master)
{
	struct shim_msg m = {.type = SHIM_PTY_MASTER};
	packet_send(sh->ctl, &m, sizeof(m), master, 1);
	close_fd(master);
}

/* One command, from its fds to the last process reaped; every fd of it
 * closed on return. Returns true when its final SHIM_EXITED stands for
 * SYNC_READY (SHIM_IDLE_AT_FINAL). */
static bool shim_run(int fds[SYNC_EXEC_FDS])
{
	struct shim sh = {
		.ctl = fds[EXEC_FD_CTL],
		.out = fds[EXEC_FD_STDOUT],
		.err = fds[EXEC_FD_STDERR],
		.relay_out = -1,
		.relay_err = -1,
		.log = -1,
	};
	fds[EXEC_FD_CTL] = fds[EXEC_FD_STDOUT] = fds[EXEC_FD_STDERR] = -1; /* sh's now */
	struct shim_spec hdr = {0};
	char **argv = NULL, **envp, *cwd;
	int rp[2][2] = {{-1, -1}, {-1, -1}};
	int master = -1, slave = -1, e = 0;
	int sigfd = shim_sigfd;
	char *spec = read_spec(fds[EXEC_FD_SPEC], &hdr, &argv, &envp, &cwd);
	close_fd(&fds[EXEC_FD_SPEC]);
	if (!spec) {
		shim_fail(&sh, EBADMSG, "malformed command spec");
		goto done;
	}
	if (hdr.flags & SHIM_FILEOP) {
		run_file_op(&sh, argv[0], &fds[EXEC_FD_STDIN], hdr.flags & SHIM_NO_STARTED);
		goto done;
	}
	bool keep_bg = hdr.flags & SHIM_KEEP_BACKGROUND;
	bool merged = hdr.flags & SHIM_MERGED;
	if (bare_cfg) /* no mount view: the paths are the host's */
		ab_bare_spec(bare_cfg, &envp, &cwd);
	if (chdir(cwd) < 0) {
		char what[300];
		snprintf(what, sizeof(what), "cwd: cannot enter %.256s", cwd);
		shim_fail(&sh, errno, what);
		goto done;
	}

	int cmd_out = sh.out, cmd_err = sh.err;
	if (keep_bg) {
		/* the command writes to us; we pass it on until its main
		 * process ends, then into the log */
		for (int i = 0; i < (merged ? 1 : 2); i++)
			if (pipe2(rp[i], O_CLOEXEC) < 0 ||
			    fcntl(rp[i][0], F_SETFL, O_NONBLOCK) < 0) {
				shim_fail(&sh, errno, "cannot create the relay pipes");
				goto done;
			}
		cmd_out = rp[0][1];
		cmd_err = merged ? rp[0][1] : rp[1][1];
		sh.relay_out = rp[0][0];
		sh.relay_err = merged ? -1 : rp[1][0];
	}

	if (sigfd < 0) {
		shim_fail(&sh, shim_sigfd_errno, "cannot watch the command");
		goto done;
	}
	bool pty = hdr.flags & SHIM_PTY;
	if (pty && (e = -pty_open(&hdr, &master, &slave)) != 0) {
		shim_fail(&sh, e, "cannot make the command's terminal in /dev/pts");
		goto done;
	}

	/* `sh -c` to the warm child, if there is one: it is the command;
	 * anything else is spawned, and then a warm child would count as a
	 * process of the command: it goes first */
	if (!pty && warm_fits(argv, envp))
		sh.cmd = warm_take(&shim_warm, fds[EXEC_FD_STDIN], cmd_out, cmd_err, argv[3], cwd,
				   envp);
	else
		warm_end(&shim_warm);
	if (pty)
		e = -spawn_command(&sh, slave, slave, slave, true, argv, envp);
	else if (sh.cmd <= 0)
		e = -spawn_command(&sh, fds[EXEC_FD_STDIN], cmd_out, cmd_err, false, argv, envp);
	if (e) {
		/* as a shell says it, with its statuses */
		dprintf(pty ? slave : sh.err, "agentbox: cannot run '%s': %s\n", argv[0],
			strerror(e));
		sh.cmd = -1;
		sh.cmd_done = true;
		sh.status = (e == ENOENT || e == ENOTDIR ? AB_EXIT_NOT_FOUND : AB_EXIT_CANNOT_EXEC)
			    << 8;
	}
	close_fd(&fds[EXEC_FD_STDIN]);
	if (pty) {
		/* the command holds the slave: the master's end of file (EIO)
		 * is the end of its output */
		close_fd(&slave);
		pty_send(&sh, &master);
	}
	if (keep_bg) {
		close_fd(&rp[0][1]);
		close_fd(&rp[1][1]);
	}
	/* without keep_background our copies of the output pipes are closed
	 * right after EXITED (report_exit): from then on, only the command's
	 * processes hold them, and end of file means they are all done */
	if (sh.cmd_done)
		report_exit(&sh, keep_bg, hdr.seq);
	else
		supervise_command(&sh, sigfd, keep_bg, hdr.seq);
done:
	/* nothing of this command is left: the next one starts clean */
	free(argv);
	free(spec);
	close_fd(&fds[EXEC_FD_SPEC]);
	close_fd(&fds[EXEC_FD_STDIN]);
	close_output(&sh);
	int mine[] = {sh.ctl,	sh.relay_out, sh.relay_err, sh.log,
		      rp[0][1], rp[1][1],     master,	    slave};
	for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); i++)
		close_fd(&mine[i]);
	return (hdr.flags & SHIM_IDLE_AT_FINAL) && !(hdr.flags & SHIM_KEEP_BACKGROUND) &&
	       sh.exited_sent && sh.msg.final;
}

_Noreturn void shim_serve(const struct init_args *a, int pool)
{
	as_limit = ab_cgroup_rlimit_as(a->cgroup);
	if (a->cfg->isolation_missing & AB_MISSING_NAMESPACES) {
		bare_cfg = a->cfg;
		bare_landlock = a->landlock_fd;
	}
	/* orphans of the command's processes come here, not to the init */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	shim_sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	shim_sigfd_errno = shim_sigfd < 0 ? errno : 0; /* what each command is told */
	self_pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	/* not for `agentbox run`'s one command (it is already on its way);
	 * without namespaces each command enforces its own ruleset */
	if (!a->one_command && a->landlock_enforced)
		command_layer = landlock_command_layer();
	/* a warm shell only in a domain of its own: elsewhere (no Landlock,
	 * --landlock off, no namespaces) a command could ptrace it, or write
	 * /proc/PID/mem, and so become the next command */
	if (!a->one_command && !bare_cfg && command_layer >= 0)
		warm_init(&shim_warm, command_layer);
	/* what comes on pool: a SYNC_EXEC, or a SYNC_FILEOP and its request */
	static union {
		struct sync_msg m;
		struct fileop_pkt f;
		char bytes[sizeof(struct fileop_pkt) + FILEOP_PKT_MAX + 1];
	} in;
	for (;;) {
		int fds[SYNC_EXEC_FDS];
		size_t n;
		/* idle: the next command's shell starts now, in the caller's
		 * think time */
		warm_spawn(&shim_warm, as_limit);
		ssize_t got = packet_recv_upto(pool, &in, sizeof(in) - 1, fds, SYNC_EXEC_FDS, &n);
		if (got >= (ssize_t)sizeof(in.f) && n == 0 && !a->one_command &&
		    in.f.type == SYNC_FILEOP && in.f.len == (size_t)got - sizeof(in.f)) {
			in.bytes[got] = '\0';
			if (inline_file_op(pool, in.bytes + sizeof(in.f)) < 0)
				_exit(0);
			continue; /* its FILEOP_DONE said we are idle */
		}
		if (got != (ssize_t)sizeof(in.m) || !sync_valid(&in.m, n) ||
		    in.m.type != SYNC_EXEC) {
			for (size_t i = 0; got > 0 && i < n; i++)
				close(fds[i]);
			_exit(0);
		}
		bool idle_said = shim_run(fds);
		if (a->one_command) {
			/* without a pid namespace, nothing ends what is left but us */
			if (a->cfg->isolation_missing & AB_MISSING_NAMESPACES)
				ab_bare_finish();
			_exit(0); /* pid 1: the kernel ends whatever is left */
		}
		/* a SIGCHLD of this command left pending would wake the next */
		struct signalfd_siginfo si;
		while (shim_sigfd >= 0 && read(shim_sigfd, &si, sizeof(si)) == sizeof(si))
			;
		if (!idle_said && sync_send(pool, SYNC_READY, 0, 0, NULL) < 0)
			_exit(0);
	}
}
