/* One command of a session, from the launcher's side: its pipes and
 * control socket handed to a shim (shim.h), its output read within the
 * cap, its deadline, the SIGTERM-then-SIGKILL escalation over every
 * process of its tree (the shim, their subreaper, signals them), signals
 * forwarded to it, and the shim's messages validated. When it is complete
 * (the shim is done with it and the pipes are at their end),
 * command_finish (command_result.c) gives its result. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "util/error.h"
#include "files/fileop.h"
#include "util/parse.h"
#include "session/session.h"
#include "util/sync.h"
#include "util/util.h"

/* ---- starting a command ---- */

/* A free slot for a command tagged tag, or a negative errno. */
static int free_slot(const struct ab_session *s, unsigned long long tag, struct ab_error *err)
{
	size_t slot = s->max;
	for (size_t i = 0; i < s->max; i++) {
		if (s->cmds[i].used && s->cmds[i].tag == tag)
			return ab_error_plain(err, EEXIST, "a command with this tag is running");
		if (!s->cmds[i].used && slot == s->max)
			slot = i;
	}
	if (slot == s->max)
		return ab_error_plain(err, EBUSY, "%zu commands are running already", s->max);
	return (int)slot;
}

/* The working directory: absolute, or under /workspace. */
static int command_cwd(const struct ab_session *s, const struct ab_exec *x, char **cwd,
		       struct ab_error *err)
{
	const char *want = x->cwd ? x->cwd : s->sb.cfg.cwd;
	cleanup_free char *joined = NULL;
	if (want[0] != '/' && asprintf(&joined, "/workspace/%s", want) < 0)
		return ab_error_set(err, ENOMEM, "starting the command");
	int r = ab_path_normalize(joined ? joined : want, cwd);
	if (r < 0)
		return ab_error_plain(err, EINVAL, "cwd: '%s' %s", want,
				      r == -ELOOP ? "contains '..'" : "is not a valid path");
	return 0;
}

/* The caller's fd n of x->fds, duplicated for the shim, or -2 when the
 * caller passed none there; -1 with errno on failure. */
static int passed_fd(const struct ab_exec *x, int n)
{
	if (!x->fds || x->fds[n] < 0)
		return -2;
	return fcntl(x->fds[n], F_DUPFD_CLOEXEC, 3);
}

static int command_ctl(struct cmd *c, int fds[SYNC_EXEC_FDS], struct ab_error *err)
{
	int ctl[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
		return ab_error_set(err, errno, "cannot create the command's control channel");
	fds[EXEC_FD_CTL] = ctl[1];
	c->ctl = ctl[0];
	return 0;
}

/* A pty command's: stdin /dev/null, stdout (and stderr, merged) a copy of
 * it; its output comes on the master (SHIM_PTY_MASTER). */
static int command_pty_fds(struct ab_session *s, struct cmd *c, int fds[SYNC_EXEC_FDS],
			   struct ab_error *err)
{
	fds[EXEC_FD_STDIN] = s->devnull;
	fds[EXEC_FD_STDOUT] = fds[EXEC_FD_STDERR] = fcntl(s->devnull, F_DUPFD_CLOEXEC, 3);
	if (fds[EXEC_FD_STDOUT] < 0)
		return ab_error_set(err, errno, "starting the command");
	return command_ctl(c, fds, err);
}

/* A streamed stdin: a pipe whose write end c keeps, non-blocking; its read
 * end for the shim, or -1 with errno. */
static int stream_stdin(struct cmd *c)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	c->in_wr = p[1];
	return p[0];
}

/* The fds of SYNC_EXEC into fds[]: the spec, stdin (the caller's, the
 * request's data or /dev/null), the control socket, and stdout and stderr
 * (the caller's own, or pipes whose read ends go to c). */
static int command_fds(struct ab_session *s, struct cmd *c, const struct ab_exec *x,
		       const char *cwd, uint32_t flags, int fds[SYNC_EXEC_FDS],
		       struct ab_error *err)
{
	fds[EXEC_FD_SPEC] = command_spec(s, x, cwd, flags, err);
	if (fds[EXEC_FD_SPEC] < 0)
		return fds[EXEC_FD_SPEC];
	if (c->pty) /* the shim's pty is the command's stdio: these go unused */
		return command_pty_fds(s, c, fds, err);
	fds[EXEC_FD_STDIN] = x->stdin_stream ? stream_stdin(c) : passed_fd(x, 0);
	if (fds[EXEC_FD_STDIN] == -2) /* /dev/null is the session's: sent, never closed */
		fds[EXEC_FD_STDIN] =
			x->stdin_data ? command_memfd("agentbox-stdin", x->stdin_data, x->stdin_len)
				      : s->devnull;
	if (fds[EXEC_FD_STDIN] < 0)
		return ab_error_set(err, fds[EXEC_FD_STDIN] == -1 ? errno : -fds[EXEC_FD_STDIN],
				    "starting the command");
	for (int i = 0; i < (c->merged ? 1 : 2); i++) {
		int fd = passed_fd(x, 1 + i), p[2];
		if (fd == -1)
			return ab_error_set(err, errno, "cannot pass the command's output on");
		if (fd < 0 && pipe2(p, O_CLOEXEC) < 0)
			return ab_error_set(err, errno, "cannot create the output pipes");
		fds[EXEC_FD_STDOUT + i] = fd >= 0 ? fd : p[1];
		*(i ? &c->err_rd : &c->out_rd) = fd >= 0 ? -1 : p[0];
	}
	if (c->merged)
		fds[EXEC_FD_STDERR] = fds[EXEC_FD_STDOUT];
	return command_ctl(c, fds, err);
}

/* The timeout in force for x: its own or the session's, clamped. */
static unsigned long long command_timeout(const struct ab_session *s, const struct ab_exec *x)
{
	if (x->no_timeout)
		return 0;
	return sandbox_timeout(&s->sb.cfg, x->timeout_ms ? x->timeout_ms : s->sb.cfg.timeout_ms);
}

/* A streaming command's output pipes this big, where the user's pipe
 * budget allows: fewer wake-ups and bigger reads (the kernel's default is
 * 64 KiB). Only while it runs, and only those: the pages count against the
 * user's pipe-user-pages-soft, past which every new pipe of the user gets
 * two pages. */
#define OUTPUT_PIPE_SIZE (256 << 10)
#define DRAIN_SIZE	 (OUTPUT_PIPE_SIZE / 2)
_Static_assert(DRAIN_SIZE >= sizeof(struct fileop_pkt) + FILEOP_PKT_MAX,
	       "a shim's file operation packet fits the session's buffer");

/* c's fds into the session's epoll set, non-blocking; a stream command's
 * output pipes only while output is not paused. */
static int command_watch(struct ab_session *s, struct cmd *c, size_t slot)
{
	const struct {
		int fd, kind;
	} w[] = {{c->ctl, K_CTL}, {c->out_rd, K_OUT}, {c->err_rd, K_ERR}};
	for (size_t i = 0; i < AB_ARRAY_SIZE(w); i++) {
		if (w[i].fd < 0)
			continue;
		fcntl(w[i].fd, F_SETFL, O_NONBLOCK);
		if (w[i].kind != K_CTL && c->stream)
			fcntl(w[i].fd, F_SETPIPE_SZ, OUTPUT_PIPE_SIZE); /* best effort */
		if (w[i].kind != K_CTL && c->stream && s->out_paused)
			continue;
		int r = session_watch(s, w[i].fd, slot, w[i].kind);
		if (r < 0)
			return r;
	}
	return 0;
}

int ab_session_start(struct ab_session *s, const struct ab_exec *x, unsigned long long tag,
		     struct ab_error *err)
{
	if (s->dead) {
		*err = *s->death;
		return -EPIPE;
	}
	const struct ab_exec *asked = x;
	struct ab_exec fop;
	char *fop_argv[2] = {(char *)x->file_op, NULL};
	int fop_fds[3] = {x->fds ? x->fds[0] : -1, -1, -1};
	if (x->file_op) {
		fop = (struct ab_exec){
			.argv = fop_argv,
			.cwd = "/", /* whatever commands did to the session's */
			.timeout_ms = x->timeout_ms,
			.max_output = x->max_output ? x->max_output : FILEOP_REPLY_MAX,
			.stream = x->stream, /* a watch's events */
			.no_timeout = x->no_timeout,
			/* the bulk path's pipe (fileop_host.h) as its stdin */
			.fds = x->fds && x->fds[0] >= 0 ? fop_fds : NULL,
		};
		x = &fop;
	}
	if (!x->argv || !x->argv[0] || !x->argv[0][0])
		return ab_error_plain(err, EINVAL, "no command given");
	int slot = free_slot(s, tag, err);
	cleanup_free char *cwd = NULL;
	if (slot < 0)
		return slot;
	int r = command_cwd(s, x, &cwd, err);
	if (r < 0)
		return r;

	struct cmd *c = &s->cmds[slot];
	command_clear(c);
	c->file_op = x == &fop;
	c->pty = x->pty && !c->file_op;
	c->stdin_stream = x->stdin_stream && !c->file_op && !c->pty;
	/* a terminal is one stream; a file operation's reply needs one pipe */
	c->merged = x->merge_output || c->pty || c->file_op;
	c->stream = x->stream;
	c->keep_bg = x->keep_background && !c->pty;
	c->rows = x->pty_rows;
	c->cols = x->pty_cols;
	if (c->pty && (c->rows < 1 || c->cols < 1))
		return ab_error_plain(err, EINVAL, "a terminal's rows and cols are 1 to 65535");
	uint32_t flags = (c->keep_bg ? SHIM_KEEP_BACKGROUND : 0) | (c->merged ? SHIM_MERGED : 0) |
			 (c->file_op ? SHIM_FILEOP : 0) | (c->pty ? SHIM_PTY : 0) |
			 SHIM_IDLE_AT_FINAL;
	/* a file operation's process is its shim: the pidfd the init gave
	 * with it does what STARTED's would (every shim came with one) */
	if (c->file_op && !s->shim_no_pidfd)
		flags |= SHIM_NO_STARTED;
	/* a file operation with no fds goes on the shim's own socket: no
	 * pipes, no control socket, one packet each way (SYNC_FILEOP); it
	 * needs the shim's pidfd to be stopped, and a buffer for the reply */
	c->inline_op = c->file_op && !x->fds && !x->stream && !s->one_command &&
		       !s->shim_no_pidfd && !s->no_inline && strlen(x->argv[0]) <= FILEOP_PKT_MAX &&
		       session_buf(s);
	int fds[SYNC_EXEC_FDS] = {-1, -1, -1, -1, -1};
	s->seq++;
	if (!c->inline_op && (r = command_fds(s, c, x, cwd, flags, fds, err)) < 0)
		goto out;
	size_t max = x->max_output ? x->max_output : s->sb.cfg.max_output;
	if (c->out_rd >= 0 || c->pty || c->inline_op)
		capture_init(&c->out, max);
	if (c->err_rd >= 0)
		capture_init(&c->err, max);
	c->used = true;
	c->tag = tag;
	c->seq = s->seq;
	c->started_ms = session_now_ms();
	s->running++;
	c->timeout_ms = command_timeout(s, x);
	c->deadline_ms = c->timeout_ms ? c->started_ms + c->timeout_ms : 0;
	c->oom_before = ab_cgroup_oom_kills(s->sb.cg);
	c->pids_before = ab_cgroup_pids_refused(s->sb.cg);
	if ((r = command_watch(s, c, (size_t)slot)) < 0) {
		ab_error_set(err, -r, "starting the command");
		command_release(s, c);
		goto out;
	}
	r = c->inline_op ? pool_give_fileop(s, x->argv[0], err) : pool_give(s, fds, err);
	if (r == -EMSGSIZE && c->inline_op) {
		/* this host's sockets take no packet that big: fds from now on */
		command_release(s, c);
		s->no_inline = true;
		return ab_session_start(s, asked, tag, err);
	}
	if (r < 0) {
		command_release(s, c);
	} else {
		c->shim_pid = s->shims[r].pid;
		c->shim_slot = (size_t)r;
		c->shim_gen = s->shims[r].gen;
		if ((flags & SHIM_NO_STARTED) && s->shims[r].pidfd >= 0)
			c->cmd_pidfd = fcntl(s->shims[r].pidfd, F_DUPFD_CLOEXEC, 3);
		if (c->inline_op && c->cmd_pidfd < 0) /* it could not be stopped */
			syscall(SYS_pidfd_send_signal, s->shims[r].pidfd, SIGKILL, NULL, 0);
		command_arm_timer(s); /* now: a file operation's shim may not speak */
		r = 0;
	}
out:
	for (int i = 0; i < SYNC_EXEC_FDS; i++)
		if ((i != EXEC_FD_STDERR || fds[i] != fds[EXEC_FD_STDOUT]) &&
		    (i != EXEC_FD_STDIN || fds[i] != s->devnull))
			ab_close_keep_errno(fds[i]);
	if (r < 0 && !c->used) {
		ab_close_keep_errno(c->in_wr);
		ab_close_keep_errno(c->ctl);
		ab_close_keep_errno(c->out_rd);
		ab_close_keep_errno(c->err_rd);
		command_clear(c);
	}
	return r;
}

static void ctl_send(struct cmd *c, char what)
{
	if (c->ctl >= 0 && !c->ctl_eof)
		send(c->ctl, &what, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (what == SHIM_KILL)
		c->kill_sent = true;
	else if (what == SHIM_TERM)
		c->term_sent = true;
}

static void cmd_kill(struct cmd *c)
{
	ctl_send(c, SHIM_KILL);
	/* from outside too, should the shim be gone */
	if (c->cmd_pidfd >= 0)
		syscall(SYS_pidfd_send_signal, c->cmd_pidfd, SIGKILL, NULL, 0);
}

/* Timeout or cancel: SIGTERM to the command's processes, SIGKILL after the
 * grace. */
static void cmd_stop(struct ab_session *s, struct cmd *c, unsigned long long now)
{
	if (c->term_sent || c->kill_sent)
		return;
	c->timeout_signal = SIGTERM;
	if (s->sb.cfg.kill_after_ms == 0 || c->file_op) {
		/* a file operation has nothing to clean up: no grace */
		c->timeout_signal = SIGKILL;
		cmd_kill(c);
		return;
	}
	ctl_send(c, SHIM_TERM);
	if (c->cmd_pidfd >= 0 && c->ctl_eof)
		syscall(SYS_pidfd_send_signal, c->cmd_pidfd, SIGTERM, NULL, 0);
	c->kill_at_ms = now + s->sb.cfg.kill_after_ms;
}

int ab_session_cancel(struct ab_session *s, unsigned long long tag)
{
	for (size_t i = 0; i < s->max; i++) {
		struct cmd *c = &s->cmds[i];
		if (!c->used || c->tag != tag)
			continue;
		if (!c->exited && !c->failed) {
			c->cancelled = true;
			cmd_stop(s, c, session_now_ms());
		}
		return 0;
	}
	return -ESRCH;
}

int ab_session_signal(struct ab_session *s, unsigned long long tag, int sig)
{
	if (sig <= 0 || sig >= SHIM_SIGNAL_MAX)
		return -EINVAL;
	for (size_t i = 0; i < s->max; i++) {
		struct cmd *c = &s->cmds[i];
		if (!c->used || c->tag != tag)
			continue;
		/* a file operation's process is the shim: not the caller's to signal */
		if (!c->exited && !c->failed && !c->file_op)
			ctl_send(c, (char)sig);
		return 0;
	}
	return -ESRCH;
}

/* While output is paused, a stream command's pipes are open because they
 * are not read: the grace for the processes the shim left holding them
 * (ORPHAN_PIPE_GRACE_MS) runs only while they are read. */
static bool grace_paused(const struct ab_session *s, const struct cmd *c)
{
	return c->ctl_eof && c->stream && s->out_paused;
}

void command_pause_output(struct ab_session *s, struct cmd *c, bool pause, unsigned long long now)
{
	if (!c->used || !c->stream)
		return;
	size_t slot = (size_t)(c - s->cmds);
	int fds[2] = {c->out_rd, c->err_rd};
	for (int k = 0; k < 2; k++) {
		if (fds[k] < 0)
			continue;
		/* level-triggered: out of the set, or it would wake us for
		 * ever; back in as it was (session_watch) */
		if (pause)
			epoll_ctl(s->epfd, EPOLL_CTL_DEL, fds[k], NULL);
		else
			session_watch(s, fds[k], slot, k ? K_ERR : K_OUT);
	}
	if (!c->ctl_eof || !c->grace_at_ms)
		return;
	if (pause) /* what is left of the grace waits */
		c->grace_left_ms = c->grace_at_ms > now ? c->grace_at_ms - now : 0;
	else
		c->grace_at_ms = now + c->grace_left_ms;
}

char *session_buf(struct ab_session *s)
{
	if (!s->drain_buf)
		s->drain_buf = malloc(DRAIN_SIZE);
	return s->drain_buf;
}

/* Read what the pipe has, in big chunks, and hand it on: to the capture,
 * and as OUTPUT events of a stream command, unless the events' reader
 * paused (ab_session_pause_output). force: the writers are gone or the
 * session is: what is left is bounded, and read whatever the pause. */
static void drain(struct ab_session *s, struct cmd *c, int *fd, int stream, ab_event_fn fn,
		  void *arg, bool force)
{
	/* half a pipe (OUTPUT_PIPE_SIZE) per read, a few per wake-up so that
	 * other fds get their turn; small enough that the reader's escaped
	 * copy of it stays small too. The session's own buffer (two sessions
	 * may run in two threads), made on first use; a small one without. */
	char small[4096], *buf = session_buf(s);
	size_t size = DRAIN_SIZE;
	if (!buf) {
		buf = small;
		size = sizeof(small);
	}
	for (int rounds = 0; rounds < 4; rounds++) {
		if (c->stream && s->out_paused && !force)
			return;
		ssize_t n = read(*fd, buf, size);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			session_unwatch(s, fd);
			return;
		}
		capture_append(stream == 2 ? &c->err : &c->out, buf, (size_t)n);
		if (c->stream && fn) {
			struct ab_event ev = {
				.kind = AB_EVENT_OUTPUT,
				.tag = c->tag,
				.stream = stream,
				.data = buf,
				.len = (size_t)n,
			};
			fn(&ev, arg);
		}
	}
}

void command_drain(struct ab_session *s, struct cmd *c, int *fd, int stream, ab_event_fn fn,
		   void *arg)
{
	drain(s, c, fd, stream, fn, arg, s->dead);
}

static void shim_broke(struct cmd *c, const char *why)
{
	if (!c->failed) {
		c->failed = true;
		c->msg.status = EBADMSG;
		snprintf(c->msg.text, sizeof(c->msg.text), "%s", why);
	}
	cmd_kill(c);
	if (c->shim_pidfd >= 0)
		syscall(SYS_pidfd_send_signal, c->shim_pidfd, SIGKILL, NULL, 0);
}

static bool valid_exit(const struct shim_msg *m)
{
	if (!(WIFEXITED(m->status) || WIFSIGNALED(m->status)) ||
	    m->n_background > SHIM_MAX_BACKGROUND || m->final > 1 ||
	    !memchr(m->text, '\0', sizeof(m->text)))
		return false;
	for (uint32_t i = 0; i < m->n_background; i++)
		if (!memchr(m->background[i].comm, '\0', sizeof(m->background[i].comm)))
			return false;
	return true;
}

/* The shim is gone: how long others may still hold the pipes. */
static void orphan_grace(struct cmd *c)
{
	c->grace_at_ms = session_now_ms() + ORPHAN_PIPE_GRACE_MS;
	c->grace_left_ms = ORPHAN_PIPE_GRACE_MS; /* should output be paused */
}

/* SHIM_PTY_MASTER's fd, checked to be a pty's master (the shim is not
 * believed): the command's output, and its stdin through a copy. */
static bool take_master(struct ab_session *s, struct cmd *c, int fd)
{
	struct stat st;
	unsigned n;
	size_t slot = (size_t)(c - s->cmds);
	if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) || ioctl(fd, TIOCGPTN, &n) < 0)
		return false;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	struct winsize ws = {.ws_row = c->rows, .ws_col = c->cols};
	ioctl(fd, TIOCSWINSZ, &ws); /* a resize asked before it came */
	c->pty_got = true;
	c->out_rd = fd;
	if (!c->stream || !s->out_paused)
		session_watch(s, fd, slot, K_OUT);
	c->in_wr = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (c->in_wr >= 0 && c->in_busy && session_watch_out(s, c->in_wr, slot, K_IN, true) == 0)
		c->in_watched = true; /* written when there is room */
	return true;
}

/* The end of c's shim without its last word (ctl's end, or, for an
 * inline_op, its socket's); broke: it sent something malformed. */
static void command_shim_gone(struct ab_session *s, struct cmd *c, bool broke)
{
	if (broke) {
		c->ctl_eof = true;
		shim_broke(c, "the command's supervisor sent a malformed message");
		orphan_grace(c);
		return;
	}
	c->ctl_eof = true;
	session_unwatch(s, &c->ctl);
	if (!c->exited && !c->failed && c->file_op && (c->timed_out || c->cancelled)) {
		/* the operation's process was the shim: ended as asked */
		c->exited = true;
		c->msg = (struct shim_msg){.type = SHIM_EXITED, .status = SIGKILL};
	} else if (!c->exited && !c->failed && command_oom(s, c)) {
		/* the OOM killer took the shim (in `agentbox run`, the
		 * init): the command was killed for memory, its result */
		c->exited = true;
		c->msg = (struct shim_msg){.type = SHIM_EXITED, .status = SIGKILL};
		cmd_kill(c);
	} else if (!c->exited && !c->failed) {
		/* the shim died: the command may have killed it, and
		 * with it (kill -9 -1) the idle ones, which may not have
		 * exited yet: none of them gets the next command */
		pool_drop_idle(s);
		c->failed = true;
		c->msg.status = EIO;
		snprintf(c->msg.text, sizeof(c->msg.text),
			 "the command's supervisor in the sandbox was killed (did "
			 "a command signal every process, e.g. kill -9 -1 or kill "
			 "-STOP -1?); the command was killed");
		cmd_kill(c);
	}
	/* the shim reaped every process it had: the pipes are at
	 * their end, unless others hold them */
	orphan_grace(c);
}

/* An inline_op's FILEOP_DONE: as a file operation's final SHIM_EXITED
 * (run_file_op); status 0, or 1: failed. */
static void inline_done(struct cmd *c, int status)
{
	c->exited = true;
	c->msg = (struct shim_msg){.type = SHIM_EXITED, .status = status << 8, .final = 1};
	c->ctl_eof = c->kill_sent = true;
	orphan_grace(c);
}

/* A file operation's packets on its shim's socket: the reply into the
 * capture, FILEOP_DONE its end (and the shim idle again). A few packets a
 * wake-up: a shim that sends for ever gets no more of the loop than any
 * other fd, and its timeout still comes. Its end, or a packet that breaks
 * the protocol, ends the operation and the shim's slot. */
void command_on_shim(struct ab_session *s, struct cmd *c, size_t i)
{
	char *buf = s->drain_buf; /* big enough: the start made sure of it */
	for (int round = 0; round < 16; round++) {
		struct fileop_pkt h;
		size_t nfds;
		ssize_t n = packet_recv_upto(s->shims[i].sock, buf, sizeof(h) + FILEOP_PKT_MAX,
					     NULL, 0, &nfds);
		if (n == -EAGAIN)
			return;
		if (n >= (ssize_t)sizeof(h))
			memcpy(&h, buf, sizeof(h));
		bool ok = n >= (ssize_t)sizeof(h) && h.len == (size_t)n - sizeof(h) && !h.zero &&
			  (h.type == SYNC_FILEOP_OUT
				   ? !h.status
				   : h.type == SYNC_FILEOP_DONE && h.status >= 0 && h.status <= 1);
		if (!ok) {
			command_shim_gone(s, c, n > 0 || n == -EBADMSG);
			pool_forget(s, i);
			return;
		}
		capture_append(&c->out, buf + sizeof(h), h.len);
		if (h.type == SYNC_FILEOP_DONE) {
			inline_done(c, h.status);
			pool_set_idle(s, i);
			return;
		}
	}
}

void command_on_ctl(struct ab_session *s, struct cmd *c)
{
	for (;;) {
		struct shim_msg m;
		int fds[2];
		size_t nfds;
		ssize_t n = packet_recv(c->ctl, &m, sizeof(m), fds, 2, &nfds);
		if (n == -EAGAIN)
			return;
		if (n == 0 || (n < 0 && n != -EBADMSG)) {
			command_shim_gone(s, c, false);
			return;
		}
		if (n < 0) {
			shim_broke(c, "the command's supervisor sent a malformed message");
			return;
		}
		if (m.type == SHIM_PTY_MASTER && nfds == 1 && c->pty && !c->pty_got &&
		    c->shim_pidfd < 0 && !c->exited && !c->failed) {
			if (!take_master(s, c, fds[0])) {
				close(fds[0]);
				shim_broke(c, "the command's supervisor sent something else than a "
					      "terminal");
				return;
			}
		} else if (m.type == SHIM_STARTED && nfds == 2 && c->shim_pidfd < 0 &&
			   c->cmd_pidfd < 0) {
			c->shim_pidfd = fds[0];
			c->cmd_pidfd = fds[1];
		} else if (m.type == SHIM_STARTED && nfds == 0 && c->shim_pidfd < 0 &&
			   c->cmd_pidfd < 0) {
			if (!c->shim_pid)
				c->shim_pid = -1; /* no pidfds on this kernel */
		} else if (m.type == SHIM_FAILED && nfds == 0 && !c->exited && !c->failed &&
			   memchr(m.text, '\0', sizeof(m.text))) {
			c->failed = true;
			c->msg = m;
			if (c->msg.status <= 0 || c->msg.status > 4095)
				c->msg.status = EIO;
		} else if (m.type == SHIM_EXITED && nfds == 0 && !c->exited && !c->failed &&
			   valid_exit(&m)) {
			c->exited = true;
			c->msg = m;
			if (m.final && !c->keep_bg) {
				/* nothing left behind and nothing more to come: the
				 * end of ctl would only say so again (closing it
				 * tells the shim to make sure of it); and the shim
				 * is free (SHIM_IDLE_AT_FINAL); a file operation's
				 * shim, too: its EXITED is always final */
				pool_idle_at_final(s, c);
				c->ctl_eof = c->kill_sent = true;
				session_unwatch(s, &c->ctl);
				orphan_grace(c);
				return;
			}
			if (!c->keep_bg) {
				/* what it left behind: killed once the pipes are
				 * closed, or after a short grace */
				c->grace_at_ms = session_now_ms() + BACKGROUND_GRACE_MS;
			}
		} else {
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
			shim_broke(c, "the command's supervisor sent a message out of turn");
			return;
		}
	}
}

/* Deadlines, and whether a command is complete. */
void command_check(struct ab_session *s, struct cmd *c, unsigned long long now, ab_event_fn fn,
		   void *arg)
{
	if (c->deadline_ms && now >= c->deadline_ms && !c->exited && !c->failed) {
		c->deadline_ms = 0;
		c->timed_out = true;
		cmd_stop(s, c, now);
	}
	if (c->kill_at_ms && now >= c->kill_at_ms) {
		c->kill_at_ms = 0;
		c->timeout_signal = SIGKILL;
		cmd_kill(c);
	}
	bool pipes_open = c->out_rd >= 0 || c->err_rd >= 0;
	if (c->exited && !c->keep_bg && !c->kill_sent && !c->ctl_eof &&
	    (!pipes_open || (c->grace_at_ms && now >= c->grace_at_ms))) {
		ctl_send(c, SHIM_KILL);
		c->grace_at_ms = 0;
	}
	if (c->ctl_eof && pipes_open && c->grace_at_ms && now >= c->grace_at_ms &&
	    !grace_paused(s, c)) {
		/* the shim is gone, someone else still holds the pipes: keep
		 * what is there, stop waiting for more */
		if (c->out_rd >= 0)
			drain(s, c, &c->out_rd, 1, fn, arg, true);
		if (c->err_rd >= 0)
			drain(s, c, &c->err_rd, 2, fn, arg, true);
		session_unwatch(s, &c->out_rd);
		session_unwatch(s, &c->err_rd);
		pipes_open = false;
	}
	if (c->ctl_eof && !pipes_open)
		command_finish(s, c, fn, arg);
}

unsigned long long command_next_deadline(const struct ab_session *s)
{
	unsigned long long next = 0;
	for (size_t i = 0; i < s->max; i++) {
		const struct cmd *c = &s->cmds[i];
		if (!c->used)
			continue;
		/* (a timeout is no deadline once the command has ended: its
		 * result may still wait for its output to be read) */
		unsigned long long d[] = {c->exited || c->failed ? 0 : c->deadline_ms,
					  c->kill_at_ms, grace_paused(s, c) ? 0 : c->grace_at_ms};
		for (size_t k = 0; k < AB_ARRAY_SIZE(d); k++)
			if (d[k] && (!next || d[k] < next))
				next = d[k];
	}
	return next;
}

/* absolute CLOCK_MONOTONIC, at least 1 ns so that it stays armed */
void command_arm_timer(struct ab_session *s)
{
	unsigned long long next = command_next_deadline(s);
	if (next == s->timer_at)
		return; /* armed for it already: no system call on every wake-up */
	struct itimerspec its = {0};
	if (next) {
		its.it_value.tv_sec = (time_t)(next / 1000);
		its.it_value.tv_nsec = (long)(next % 1000) * 1000000 + 1;
	}
	if (timerfd_settime(s->timerfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		s->timer_at = next;
}
