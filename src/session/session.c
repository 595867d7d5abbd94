/* The launcher side of a session (design.md, "Processes and trust"): one
 * sandbox, many commands (session.h says which file does what). This file
 * builds the sandbox and waits for its init to be ready, then runs
 * everything from one epoll set, so that a caller can fold the session
 * into its own poll loop (ab_session_fd): the init's messages, the seccomp
 * listener, the shims, each command's fds and the one timer of every
 * deadline. A malformed message from the init ends the session. */
#include <errno.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentbox/agentbox.h"
#include "cgroup/cgroup.h"
#include "util/error.h"
#include "sandbox/isolation.h"
#include "layer/layer.h"
#include "net/netproc.h"
#include "session/session.h"
#include "port/port.h"
#include "util/proc.h"
#include "util/sync.h"
#include "view/bindfile.h"
#include "view/landlock.h"
#include "warm/warm.h"
#include "util/util.h"

/* A proxy connection counts for the command its process belongs to: that
 * command's seq, found as the connection is made, and its report as long
 * as it runs. */
static uint64_t net_owner(pid_t pid, void *arg)
{
	struct ab_denials *d = command_route_denial(pid, arg);
	return d ? ((struct cmd *)((char *)d - offsetof(struct cmd, denials)))->seq : 0;
}

static struct ab_net_report *net_report_of(uint64_t seq, void *arg)
{
	struct ab_session *s = arg;
	for (size_t i = 0; i < s->max; i++)
		if (s->cmds[i].used && s->cmds[i].seq == seq)
			return &s->cmds[i].net;
	return NULL;
}

/* The init's messages until it is ready: errors, the seccomp listener it
 * installed on itself and --net allow='s listening socket, passed over the
 * sync socket. */
static int await_ready(struct ab_session *s, struct ab_error *err)
{
	unsigned long long deadline = session_now_ms() + SETUP_TIMEOUT_MS;
	for (;;) {
		struct pollfd p[2] = {
			{.fd = s->sync_fd, .events = POLLIN},
			{.fd = s->init_pidfd, .events = POLLIN},
		};
		unsigned long long now = session_now_ms();
		if (now >= deadline)
			return ab_error_plain(err, ETIMEDOUT,
					      "the sandbox did not get ready in %d s",
					      SETUP_TIMEOUT_MS / 1000);
		int n = poll(p, 2, (int)(deadline - now));
		if (n < 0 && errno != EINTR)
			return ab_error_set(err, errno, "waiting for the sandbox");
		if (n <= 0)
			continue;
		if (!p[0].revents)
			return ab_error_plain(err, EIO,
					      "the sandbox's init died while it was set up");
		struct sync_msg m;
		int passed = -1;
		int r = sync_recv(s->sync_fd, &m, &passed);
		if (r == 0)
			return ab_error_plain(err, EIO,
					      "the sandbox's init died while it was set up");
		if (r < 0)
			return ab_error_plain(err, EBADMSG, "the sandbox sent a malformed message");
		switch (m.type) {
		case SYNC_ERROR:
			return ab_error_plain(err, m.code > 0 ? m.code : EIO, "%s", m.text);
		case SYNC_LISTENER:
			if (s->listener >= 0 || !s->sb.seccomp) {
				close(passed);
				return ab_error_plain(err, EBADMSG,
						      "the sandbox sent a listener twice");
			}
			s->listener = passed;
			break;
		case SYNC_NET_LISTENER: /* --net allow=: docs/network.md */
			if (s->net || !s->sb.netproc) {
				close(passed);
				return ab_error_plain(err, EBADMSG,
						      "the sandbox sent a proxy socket unasked");
			}
			/* to the helper; the launcher keeps no copy */
			if ((r = netproc_serve(s->sb.netproc, passed, net_owner, net_report_of, s,
					       s->init, err)) < 0)
				return r;
			s->net = s->sb.netproc;
			break;
		case SYNC_VIEWNS: { /* kept for checkpoints (ckpt/) */
			struct ab_layer *l = s->sb.plan.layer;
			int *slot = !l || s->one_command ? NULL
				    : m.status == 0	 ? &l->view_userns
				    : m.status == 1	 ? &l->view_mntns
				    : m.status == 2	 ? &l->dir_tree
				    : m.status == 3	 ? &l->ws_tree
				    : m.status >= 4 && (size_t)m.status < 4 + l->n_own
					    ? &l->own[m.status - 4].tree
					    : NULL;
			/* what it says it is: a user namespace, a mount namespace */
			int want = m.status == 0 ? CLONE_NEWUSER : m.status == 1 ? CLONE_NEWNS : 0;
			if (!slot || *slot >= 0 || (want && ioctl(passed, NS_GET_NSTYPE) != want)) {
				close(passed);
				return ab_error_plain(err, EBADMSG,
						      "the sandbox sent a namespace unasked");
			}
			*slot = passed;
			break;
		}
		case SYNC_READY:
			s->limits.landlock_abi = m.status > 0 && m.status < 100 ? m.status : 0;
			return 0;
		default:
			return ab_error_plain(err, EBADMSG,
					      "the sandbox sent a message out of turn");
		}
	}
}

int session_ready(struct ab_session *s, struct ab_error *err)
{
	int r = await_ready(s, err);
	if (r < 0)
		return r;
	/* from now on read when epoll says so, or in idle_shim: never block */
	fcntl(s->sync_fd, F_SETFL, O_NONBLOCK);
	s->ready = true;
	if ((r = session_watch(s, s->sync_fd, (size_t)-1, K_SYNC)) < 0 ||
	    (r = session_watch(s, s->init_pidfd, (size_t)-1, K_INIT)) < 0 ||
	    (s->listener >= 0 && (r = session_watch(s, s->listener, (size_t)-1, K_LISTENER)) < 0) ||
	    (r = session_watch(s, s->timerfd, (size_t)-1, K_TIMER)) < 0 ||
	    (s->net && (r = session_watch(s, netproc_fd(s->net), (size_t)-1, K_NET)) < 0) ||
	    (s->net && (r = session_watch(s, netproc_pidfd(s->net), (size_t)-1, K_NET)) < 0))
		return ab_error_set(err, -r, "opening the session");
	return 0;
}

/* The command slots: pages of their own, which only a command's use
 * makes memory (a slot is zeroed when it is free: command_release), and
 * which an idle session gives back (cmds_trim). NULL: none. */
static size_t cmds_size(size_t max)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return (max * sizeof(struct cmd) + page - 1) / page * page;
}

static struct cmd *cmds_map(size_t max)
{
	void *p = mmap(NULL, cmds_size(max), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* Every page of the slots that holds only free ones: zero, as it was. */
static void cmds_trim(struct ab_session *s)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), size = cmds_size(s->max);
	for (size_t off = 0; off < size; off += page) {
		bool used = false;
		for (size_t i = off / sizeof(struct cmd);
		     i < s->max && i * sizeof(struct cmd) < off + page && !used; i++)
			used = s->cmds[i].used;
		if (!used)
			madvise((char *)s->cmds + off, page, MADV_DONTNEED);
	}
}

/* The session's own fds, and the slots of its commands and shims. */
static int session_alloc(struct ab_session *s, struct ab_error *err)
{
	s->cmds = cmds_map(s->max);
	s->n_shims = 2 * s->max + 1;
	s->shims = calloc(s->n_shims, sizeof(*s->shims));
	for (size_t i = 0; s->shims && i < s->n_shims; i++)
		s->shims[i].sock = s->shims[i].pidfd = -1;
	s->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (!s->cmds || !s->shims || s->devnull < 0 || s->epfd < 0 || s->timerfd < 0)
		return ab_error_set(err, errno ? errno : ENOMEM, "opening the session");
	return 0;
}

/* Clone the init. For one command, its shim's socket is made here and
 * the init keeps the other end: the command can be given to it before
 * the init is ready, and reaches it without a round trip. */
static int session_clone(struct ab_session *s, struct ab_error *err)
{
	int pair[2] = {-1, -1};
	if (s->one_command && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
		return ab_error_set(err, errno, "cannot create the command's channel");
	struct init_args a = {.one_command = s->one_command, .shim_sock = pair[1]};
	pid_t pid = sandbox_clone(&s->sb, &a, &s->sync_fd, err);
	ab_close_keep_errno(pair[1]);
	if (pid < 0) {
		ab_close_keep_errno(pair[0]);
		return pid;
	}
	s->init = pid;
	if (s->one_command)
		pool_add(s, pair[0], pid, -1);
	else
		s->asked = 1; /* the init starts the first one unasked */
	s->init_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (s->init_pidfd < 0)
		return ab_error_set(err, errno,
				    "cannot watch the sandbox (pidfd_open needs Linux 5.3)");
	return 0;
}

int session_open(struct ab_config *cfg, bool one_command, struct ab_result *limits,
		 struct ab_session **out, struct ab_error *err)
{
	*out = NULL;
	struct ab_session *s = calloc(1, sizeof(*s));
	if (!s)
		return ab_error_set(err, ENOMEM, "opening the session");
	s->init_pidfd = s->sync_fd = s->listener = s->epfd = s->timerfd = s->devnull = -1;
	s->one_command = one_command;
	s->max = one_command ? 1 : cfg->max_concurrent ? cfg->max_concurrent : 8;
	int r = sandbox_prepare(cfg, &s->sb, err);
	if (r < 0) {
		free(s);
		return r;
	}
	s->started_ms = session_now_ms();
	/* a bound file is read back after the command: the init must outlive
	 * it, as in a session of many (with one slot) */
	if (one_command && view_plan_has_copies(&s->sb.plan))
		s->one_command = one_command = false;
	if (!one_command) {
		/* the shims' copy: they have no environment */
		warm_read_knobs();
		landlock_read_knobs();
	}
	r = session_alloc(s, err);
	if (r == 0)
		r = session_clone(s, err);
	/* complete only now: v1 cgroups are made after the clone (sandbox.c) */
	sandbox_limits_into(&s->sb, &s->limits);
	if (limits)
		sandbox_limits_into(&s->sb, limits);
	if (r == 0 && !one_command)
		r = session_ready(s, err);
	if (r < 0) {
		session_free(s);
		ab_isolation_explain(cfg, ~0u, err); /* name what a container refuses */
		return r;
	}
	snprintf(s->id, sizeof(s->id), "ab-%d-%d-%llu", (int)getpid(), (int)s->init,
		 (unsigned long long)s->started_ms);
	*out = s;
	return 0;
}

int ab_session_open(struct ab_config *cfg, struct ab_session **out, struct ab_error *err)
{
	return session_open(cfg, false, NULL, out, err);
}

const struct ab_result *ab_session_limits(const struct ab_session *s)
{
	return &s->limits;
}

const char *ab_session_id(const struct ab_session *s)
{
	return s->id;
}

struct ab_layer *ab_session_layer(struct ab_session *s)
{
	return s->sb.plan.layer;
}

int ab_session_fd(const struct ab_session *s)
{
	return s->epfd;
}

size_t ab_session_running(const struct ab_session *s)
{
	return s->running;
}

/* SIGKILL to the init: through its pidfd, never by a pid that may have
 * been reaped and reused (pid_max can be 32768: a busy host wraps it in a
 * minute, and the pid could be another sandbox's init by then). */
static void kill_init(struct ab_session *s)
{
	if (s->init_pidfd >= 0)
		syscall(SYS_pidfd_send_signal, s->init_pidfd, SIGKILL, NULL, 0);
	else if (!s->init_reaped)
		kill(s->init, SIGKILL);
}

/* A command when the sandbox ends: what its shim said before is read; if
 * it had exited, or the OOM killer took the init (in a small cgroup the
 * largest process when the command's are many small ones) and with it
 * the command, that is its result. Returns false when it has none. */
static bool finish_at_death(struct ab_session *s, struct cmd *c, ab_event_fn fn, void *arg)
{
	if (c->ctl >= 0)
		command_on_ctl(s, c);
	if (c->failed || (!c->exited && !command_oom(s, c)))
		return false;
	if (!c->exited)
		c->msg = (struct shim_msg){.type = SHIM_EXITED, .status = SIGKILL};
	c->exited = c->ctl_eof = true;
	session_unwatch(s, &c->ctl);
	/* every writer is gone with the init: what is left is read */
	for (int k = 0; k < 2; k++) {
		int *fd = k ? &c->err_rd : &c->out_rd;
		if (*fd >= 0) {
			fcntl(*fd, F_SETFL, 0);
			command_drain(s, c, fd, 1 + k, fn, arg);
		}
	}
	command_finish(s, c, fn, arg);
	return true;
}

/* A session's death without memory for its why. */
static struct ab_error death_no_memory;

/* The sandbox is gone or hostile: nothing runs on, and every command
 * without a result (finish_at_death) fails. */
static void die(struct ab_session *s, const char *why, ab_event_fn fn, void *arg)
{
	if (!s->dead) {
		s->dead = true;
		if (!(s->death = calloc(1, sizeof(*s->death))))
			s->death = &death_no_memory;
		ab_error_plain(s->death, EIO, "%s", why);
	}
	kill_init(s);
	for (size_t i = 0; i < s->max; i++) {
		struct cmd *c = &s->cmds[i];
		if (!c->used || finish_at_death(s, c, fn, arg))
			continue;
		unsigned long long tag = c->tag;
		command_release(s, c);
		if (fn) {
			struct ab_event ev = {
				.kind = AB_EVENT_RESULT, .tag = tag, .error = s->death};
			fn(&ev, arg);
		}
	}
}

int ab_session_dispatch(struct ab_session *s, int timeout_ms, ab_event_fn fn, void *arg,
			struct ab_error *err)
{
	if (s->dead) {
		*err = *s->death;
		return -EPIPE;
	}
	struct epoll_event evs[64];
	int n = epoll_wait(s->epfd, evs, 64, timeout_ms);
	if (n < 0 && errno != EINTR)
		return ab_error_set(err, errno, "supervising the session");
	for (int i = 0; i < n && !s->dead; i++) {
		int kind = (int)(evs[i].data.u64 & 0xff);
		size_t slot = (size_t)(evs[i].data.u64 >> 8) - 1;
		struct cmd *c = slot < s->max ? &s->cmds[slot] : NULL;
		switch (kind) {
		case K_SHIM: {
			if (slot >= s->n_shims || s->shims[slot].sock < 0)
				break;
			struct cmd *op = pool_inline_cmd(s, slot);
			if (op)
				command_on_shim(s, op, slot);
			else
				pool_on_shim(s, slot);
			break;
		}
		case K_SYNC:
			if (pool_on_sync(s))
				break;
			/* fall through */
		case K_INIT: {
			/* after setup the init only answers for shims: another
			 * message or its end is the end of the session */
			int st = 0;
			const char *why = "the sandbox broke the protocol (a message out of turn); "
					  "it was killed";
			/* the socket closes as the init exits, a moment before its
			 * pidfd says so: wait that moment (bounded) before blaming
			 * the protocol */
			struct pollfd pfd = {.fd = s->init_pidfd, .events = POLLIN};
			if (kind == K_INIT || (s->sync_eof && poll(&pfd, 1, 1000) == 1))
				why = "the sandbox's init died";
			else if (waitpid(s->init, &st, WNOHANG) == s->init) {
				s->init_reaped = true;
				why = "the sandbox's init died";
			}
			die(s, why, fn, arg);
			break;
		}
		case K_LISTENER:
			if (ab_seccomp_answer(s->sb.seccomp, s->listener, session_denials(s),
					      command_route_denial, s) < 0)
				session_unwatch(s, &s->listener);
			break;
		case K_NET: /* the network helper: its reports, or its death */
			netproc_dispatch(s->net);
			break;
		case K_TIMER: {
			uint64_t ticks;
			(void)!read(s->timerfd, &ticks, sizeof(ticks));
			s->timer_at = 0; /* it fired: armed again below if still due */
			break;
		}
		case K_CTL:
			if (c && c->used && c->ctl >= 0)
				command_on_ctl(s, c);
			break;
		case K_OUT:
			if (c && c->used && c->out_rd >= 0)
				command_drain(s, c, &c->out_rd, 1, fn, arg);
			break;
		case K_ERR:
			if (c && c->used && c->err_rd >= 0)
				command_drain(s, c, &c->err_rd, 2, fn, arg);
			break;
		case K_IN:
			if (c && c->used)
				command_input_write(s, c, fn, arg);
			break;
		}
	}
	if (s->dead) {
		*err = *s->death;
		return -EPIPE;
	}
	unsigned long long now = session_now_ms();
	for (size_t i = 0; i < s->max; i++)
		if (s->cmds[i].used)
			command_check(s, &s->cmds[i], now, fn, arg);
	command_arm_timer(s);
	return 0;
}

void ab_session_pause_output(struct ab_session *s, bool pause)
{
	if (s->out_paused == pause)
		return;
	s->out_paused = pause;
	unsigned long long now = session_now_ms();
	for (size_t i = 0; i < s->max; i++)
		command_pause_output(s, &s->cmds[i], pause, now);
	command_arm_timer(s); /* a grace that stopped or runs on again */
}

void session_result_event(const struct ab_event *ev, void *arg)
{
	struct session_result_wait *w = arg;
	if (ev->kind != AB_EVENT_RESULT || ev->tag != w->tag)
		return;
	w->done = true;
	if (ev->error) {
		*w->err = *ev->error;
		w->r = -(ev->error->code ? ev->error->code : EIO);
		return;
	}
	*w->res = *ev->result;
	memset(ev->result, 0, sizeof(*ev->result)); /* ownership moves to the caller */
}

int ab_session_exec(struct ab_session *s, const struct ab_exec *x, struct ab_result *res,
		    struct ab_error *err)
{
	struct session_result_wait w = {.tag = ~0ULL - s->seq, .res = res, .err = err};
	int r = ab_session_start(s, x, w.tag, err);
	while (r == 0 && !w.done)
		r = ab_session_dispatch(s, -1, session_result_event, &w, err);
	/* a result that came as the sandbox ended is still the result */
	return w.done ? w.r : r;
}

int ab_session_freeze(struct ab_session *s, bool freeze, struct ab_error *err)
{
	return ab_cgroup_freeze(s->sb.cg, freeze, err);
}

int ab_session_idle_trim(struct ab_session *s)
{
	if (s->asked || ab_session_running(s))
		return -EAGAIN;
	pool_drop_idle(s);
	cmds_trim(s);
	ab_memory_trim();
	return 0;
}

int ab_session_status(struct ab_session *s, struct ab_session_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->uptime_ms = session_now_ms() - s->started_ms;
	st->commands_run = s->commands_run;
	st->running = s->running;
	st->memory_peak = st->pids_current = st->cpu_user_ms = st->cpu_system_ms = -1;
	st->have_cgroup = ab_cgroup_memory(s->sb.cg, &st->memory_current) == 0;
	return 0;
}

int ab_session_memory_file(struct ab_session *s, char *out, size_t size)
{
	return ab_cgroup_memory_file(s->sb.cg, out, size);
}

int ab_session_stats(struct ab_session *s, struct ab_session_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->uptime_ms = session_now_ms() - s->started_ms;
	st->commands_run = s->commands_run;
	st->running = s->running;
	free(s->stats_denied);
	s->stats_denied = NULL;
	if (s->denials && denials_collect(s->denials, &s->stats_denied, &st->n_denied) < 0)
		return -ENOMEM;
	st->denied = s->stats_denied;
	struct ab_cgroup_stats cs;
	st->memory_current = st->memory_peak = st->pids_current = -1;
	st->cpu_user_ms = st->cpu_system_ms = -1;
	if (ab_cgroup_stats(s->sb.cg, &cs) == 0) {
		st->have_cgroup = true;
		st->memory_current = cs.memory_current;
		st->pids_current = cs.pids_current;
		if (cs.have_memory_peak)
			st->memory_peak = (long long)cs.memory_peak;
		if (cs.have_cpu) {
			st->cpu_user_ms = (long long)(cs.cpu_user_us / 1000);
			st->cpu_system_ms = (long long)(cs.cpu_system_us / 1000);
		}
	}
	return 0;
}

void session_free(struct ab_session *s)
{
	if (!s)
		return;
	if (s->init > 0) {
		/* pid 1 going takes every process of the sandbox with it */
		kill_init(s);
		/* agentbox run: the init left its cgroups once the command was
		 * gone; removed now, nothing waits for its namespaces' teardown */
		bool gone = s->sb.cfg.exit_after_run && ab_cgroup_remove_left(s->sb.cg);
		while (!gone && !s->init_reaped && waitpid(s->init, NULL, 0) < 0 && errno == EINTR)
			;
		command_quarantine_at_close(s);
	}
	for (size_t i = 0; s->cmds && i < s->max; i++)
		if (s->cmds[i].used)
			command_release(s, &s->cmds[i]);
	for (size_t i = 0; s->shims && i < s->n_shims; i++) {
		ab_close_keep_errno(s->shims[i].sock);
		ab_close_keep_errno(s->shims[i].pidfd);
	}
	free(s->shims);
	int fds[] = {s->init_pidfd, s->sync_fd, s->listener, s->epfd, s->timerfd, s->devnull};
	for (size_t i = 0; i < AB_ARRAY_SIZE(fds); i++)
		ab_close_keep_errno(fds[i]);
	if (s->cmds)
		munmap(s->cmds, cmds_size(s->max));
	free(s->drain_buf);
	free(s->stats_denied);
	free(s->denials);
	if (s->death != &death_no_memory)
		free(s->death);
	protect_state_free(&s->seen);
	ab_cleanup_strvp(&s->layer_seen);
	port_set_free(s->ports); /* the relay killed before the sandbox goes */
	sandbox_release(&s->sb);
	free(s);
}

/* ---- net: --net allow= (netproxy.h) ---- */

int ab_session_net(struct ab_session *s, char *const *allow, size_t n_allow, char *const *deny,
		   size_t n_deny, struct ab_error *err)
{
	if (!s->net)
		return ab_error_plain(
			err, EINVAL,
			"the session has no network proxy (start it with --net allow=)");
	return netproc_set_rules(s->net, allow, n_allow, deny, n_deny, err);
}

const struct ab_net_report *ab_session_net_report(const struct ab_session *s)
{
	return s->net ? netproc_total(s->net) : NULL;
}

size_t ab_session_net_rules(const struct ab_session *s, bool deny, const char **out, size_t max)
{
	return s->net ? netproc_rules(s->net, deny, out, max) : 0;
}
