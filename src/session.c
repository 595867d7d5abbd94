/* The launcher side of a session (design.md, "Processes and trust"): one
 * sandbox, many commands. For each command the launcher makes the pipes
 * and the control socket, hands them to the init (which passes them to a shim, see
 * shim.h), reads the output itself, enforces caps and timeouts from
 * outside, answers seccomp notifications, and assembles the result.
 * Everything runs from one epoll set so a caller can fold the session into
 * its own poll loop (ab_session_fd). Nothing the sandbox sends is trusted
 * beyond its validated form: a malformed message from the init ends the
 * session, one from a shim ends that command. */
#include <errno.h>
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
#include "cgroup.h"
#include "error.h"
#include "fileop.h"
#include "layer.h"
#include "options.h"
#include "output.h"
#include "sandbox.h"
#include "seccomp_profile.h"
#include "shim.h"
#include "sync.h"
#include "util.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* After the main process exits, how long processes it left behind may
 * keep the output pipes open before they are killed. */
#define BACKGROUND_GRACE_MS 200
/* After a shim is gone, how long others may still hold the pipes. */
#define ORPHAN_PIPE_GRACE_MS 1000
#define SETUP_TIMEOUT_MS     30000

enum { K_SYNC = 1, K_INIT, K_LISTENER, K_TIMER, K_CTL, K_OUT, K_ERR, K_SHIM };

struct cmd {
	bool used;
	unsigned long long tag, seq;
	int ctl, out_rd, err_rd;
	int shim_pidfd, cmd_pidfd;
	pid_t shim_pid; /* on the host, once looked up; 0: not yet, -1: unknown */
	struct ab_capture out, err;
	bool merged, stream, keep_bg;
	bool file_op; /* done by the shim itself: its process is the shim */
	bool exited, failed, ctl_eof, term_sent, kill_sent, timed_out, cancelled;
	int timeout_signal;
	struct shim_msg msg; /* EXITED, or FAILED */
	unsigned long long started_ms;
	unsigned long long timeout_ms; /* this command's own, as applied; 0: none */
	unsigned long long deadline_ms, kill_at_ms, grace_at_ms; /* 0: none */
	unsigned long long oom_before;
	struct ab_denials denials;
};

struct ab_session {
	struct sandbox sb;
	pid_t init;
	bool init_reaped; /* its pid may be another process's now */
	bool sync_eof;	  /* the init's end of the sync socket closed: it is dying */
	int init_pidfd, sync_fd, listener;
	int epfd, timerfd, devnull;
	struct cmd *cmds;
	size_t max, running;
	unsigned long long seq, started_ms, commands_run;
	struct ab_denials denials;
	struct ab_result limits;
	char id[64];
	bool dead;
	struct ab_error death;
	struct ab_denied_syscall *stats_denied;
	/* the command shims the init started (sock -1: a free slot); a
	 * command goes to an idle one straight from here */
	struct {
		int sock;
		bool idle;
		pid_t pid; /* on the host; 0: unknown */
	} * shims;
	size_t n_shims; /* slots: commands running, shims still cleaning up after
			 * theirs, and a spare */
	unsigned asked; /* SYNC_NEW_SHIM sent and not answered yet */
	int shim_error; /* why the init could not start the last one asked */
};

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

static uint64_t ev_data(size_t slot, int kind)
{
	return ((uint64_t)(slot + 1) << 8) | (uint64_t)kind;
}

static int watch(struct ab_session *s, int fd, size_t slot, int kind)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = ev_data(slot, kind)};
	return epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static void close_watched(struct ab_session *s, int *fd)
{
	if (*fd < 0)
		return;
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, *fd, NULL);
	close(*fd);
	*fd = -1;
}

/* ---- setup ---- */

/* The init's messages until it is ready: errors, and the seccomp listener
 * it installed on itself, passed over the sync socket. */
static int await_ready(struct ab_session *s, struct ab_error *err)
{
	unsigned long long deadline = now_ms() + SETUP_TIMEOUT_MS;
	for (;;) {
		struct pollfd p[2] = {
			{.fd = s->sync_fd, .events = POLLIN},
			{.fd = s->init_pidfd, .events = POLLIN},
		};
		unsigned long long now = now_ms();
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
		case SYNC_READY:
			s->limits.landlock_abi = m.status > 0 && m.status < 100 ? m.status : 0;
			return 0;
		default:
			return ab_error_plain(err, EBADMSG,
					      "the sandbox sent a message out of turn");
		}
	}
}

int ab_session_open(struct ab_config *cfg, struct ab_session **out, struct ab_error *err)
{
	*out = NULL;
	struct ab_session *s = calloc(1, sizeof(*s));
	if (!s)
		return ab_error_set(err, ENOMEM, "opening the session");
	s->init_pidfd = s->sync_fd = s->listener = s->epfd = s->timerfd = s->devnull = -1;
	s->max = cfg->max_concurrent ? cfg->max_concurrent : 8;
	int r = sandbox_prepare(cfg, &s->sb, err);
	if (r < 0) {
		free(s);
		return r;
	}
	sandbox_limits_into(&s->sb, &s->limits);
	s->started_ms = now_ms();
	s->cmds = calloc(s->max, sizeof(*s->cmds));
	s->n_shims = 2 * s->max + 1;
	s->shims = calloc(s->n_shims, sizeof(*s->shims));
	for (size_t i = 0; s->shims && i < s->n_shims; i++)
		s->shims[i].sock = -1;
	s->asked = 1; /* the init starts the first one unasked */
	s->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (!s->cmds || !s->shims || s->devnull < 0 || s->epfd < 0 || s->timerfd < 0) {
		r = ab_error_set(err, errno ? errno : ENOMEM, "opening the session");
		goto fail;
	}
	struct init_args a = {.out_fd = -1, .err_fd = -1, .session = true};
	pid_t pid = sandbox_clone(&s->sb, &a, &s->sync_fd, err);
	if (pid < 0) {
		r = pid;
		goto fail;
	}
	s->init = pid;
	s->init_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (s->init_pidfd < 0) {
		r = ab_error_set(err, errno,
				 "cannot watch the sandbox (pidfd_open needs Linux 5.3)");
		goto fail;
	}
	r = await_ready(s, err);
	/* from now on read when epoll says so, or in idle_shim: never block */
	if (r == 0)
		fcntl(s->sync_fd, F_SETFL, O_NONBLOCK);
	if (r == 0 &&
	    ((r = watch(s, s->sync_fd, (size_t)-1, K_SYNC)) < 0 ||
	     (r = watch(s, s->init_pidfd, (size_t)-1, K_INIT)) < 0 ||
	     (s->listener >= 0 && (r = watch(s, s->listener, (size_t)-1, K_LISTENER)) < 0) ||
	     (r = watch(s, s->timerfd, (size_t)-1, K_TIMER)) < 0))
		ab_error_set(err, -r, "opening the session");
	if (r < 0)
		goto fail;
	snprintf(s->id, sizeof(s->id), "ab-%d-%d-%llu", (int)getpid(), (int)pid,
		 (unsigned long long)s->started_ms);
	*out = s;
	return 0;
fail:
	ab_session_close(s);
	return r;
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

/* ---- starting a command ---- */

static int sealed_memfd(const char *name, const void *data, size_t len)
{
	int fd = (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, (const char *)data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			close(fd);
			return -e;
		}
		off += (size_t)n;
	}
	lseek(fd, 0, SEEK_SET);
	fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
	return fd;
}

struct buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void buf_add(struct buf *b, const void *data, size_t len)
{
	if (b->oom)
		return;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->len + len)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

static void buf_str(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s) + 1);
}

static bool env_valid_name(const char *s, size_t n)
{
	if (n == 0 ||
	    !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

static bool name_in(char *const *env, const char *name, size_t n)
{
	for (; env && *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return true;
	return false;
}

/* The spec a shim reads: header, argv, the session's environment with
 * the request's additions, the working directory. */
static int build_spec(struct ab_session *s, const struct ab_exec *x, const char *cwd,
		      uint32_t flags, struct buf *b, struct ab_error *err)
{
	struct shim_spec hdr = {.magic = SHIM_SPEC_MAGIC, .flags = flags, .seq = s->seq};
	for (char *const *a = x->argv; *a; a++)
		hdr.argc++;
	buf_add(b, &hdr, sizeof(hdr));
	for (char *const *a = x->argv; *a; a++)
		buf_str(b, *a);
	uint32_t envc = 0;
	for (char *const *e = s->sb.envp; e && *e; e++) {
		size_t n = strcspn(*e, "=");
		if (name_in(x->env, *e, n))
			continue; /* the request sets it */
		buf_str(b, *e);
		envc++;
	}
	for (char *const *e = x->env; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
		if (!eq || !env_valid_name(*e, n))
			return ab_error_plain(err, EINVAL,
					      "env: '%.*s' is not a valid variable name",
					      (int)(n > 64 ? 64 : n), *e);
		bool passed = false;
		for (size_t i = 0; i < s->sb.cfg.n_pass_env; i++)
			passed |= strlen(s->sb.cfg.pass_env[i]) == n &&
				  strncmp(s->sb.cfg.pass_env[i], *e, n) == 0;
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)(n < 255 ? n : 255), *e);
		if (ab_env_name_is_secret(name) && !passed)
			return ab_error_plain(err, EPERM,
					      "env: %s looks like a secret; start the session "
					      "with --pass-env %s to allow it",
					      name, name);
		buf_str(b, *e);
		envc++;
	}
	buf_str(b, cwd);
	memcpy(b->p ? b->p + offsetof(struct shim_spec, envc) : (char *)&hdr, &envc, sizeof(envc));
	if (b->oom)
		return ab_error_set(err, ENOMEM, "starting the command");
	return 0;
}

static void cmd_clear(struct cmd *c)
{
	capture_free(&c->out);
	capture_free(&c->err);
	memset(c, 0, sizeof(*c));
	c->ctl = c->out_rd = c->err_rd = c->shim_pidfd = c->cmd_pidfd = -1;
}

static void cmd_release(struct ab_session *s, struct cmd *c)
{
	close_watched(s, &c->ctl);
	close_watched(s, &c->out_rd);
	close_watched(s, &c->err_rd);
	if (c->shim_pidfd >= 0)
		close(c->shim_pidfd);
	if (c->cmd_pidfd >= 0)
		close(c->cmd_pidfd);
	cmd_clear(c);
	s->running--;
}

static unsigned long long oom_kills(struct ab_session *s)
{
	return ab_cgroup_oom_kills(s->sb.cg);
}

/* ---- the shims ---- */

/* The pid a pidfd refers to, in our pid namespace; -1 when it cannot be
 * read (0 would be a process gone). */
static pid_t pidfd_host_pid(int pidfd)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *p = strstr(buf, "\nPid:");
	pid_t pid = p ? (pid_t)atoi(p + 5) : -1;
	return pid > 0 ? pid : -1;
}

static void shim_add(struct ab_session *s, int sock, pid_t pid)
{
	for (size_t i = 0; i < s->n_shims; i++) {
		if (s->shims[i].sock >= 0)
			continue;
		/* ours may not block: READY is read when it is there */
		fcntl(sock, F_SETFL, O_NONBLOCK);
		if (watch(s, sock, i, K_SHIM) < 0)
			break;
		s->shims[i].sock = sock;
		s->shims[i].idle = true;
		s->shims[i].pid = pid;
		return;
	}
	close(sock); /* more than can be used at once */
}

/* A shim's socket: READY after its command, or its end (it died, or a
 * command killed it); anything else and it is dropped. */
static void on_shim(struct ab_session *s, size_t i)
{
	struct sync_msg m;
	int r = sync_recv(s->shims[i].sock, &m, NULL);
	if (r == -EAGAIN)
		return;
	if (r == 1 && m.type == SYNC_READY && !s->shims[i].idle) {
		s->shims[i].idle = true;
		return;
	}
	close_watched(s, &s->shims[i].sock);
	s->shims[i].idle = false;
}

/* A message of the init after setup: a shim asked for, or why there is
 * none. False for anything else (the session ends). */
static bool on_sync(struct ab_session *s)
{
	struct sync_msg m;
	int fds[2];
	size_t n = 0;
	int r = sync_recv_fds(s->sync_fd, &m, fds, 2, &n);
	if (r == -EAGAIN)
		return true; /* idle_shim took it meanwhile */
	s->sync_eof = r == 0;
	bool ok = r == 1 && s->asked > 0;
	if (ok && m.type == SYNC_SHIM) {
		s->asked--;
		pid_t pid = n == 2 ? pidfd_host_pid(fds[1]) : -1;
		if (n == 2)
			close(fds[1]);
		shim_add(s, fds[0], pid > 0 ? pid : 0);
		return true;
	}
	if (ok && m.type == SYNC_NO_SHIM) {
		s->asked--;
		s->shim_error = m.status > 0 && m.status < 4096 ? m.status : EAGAIN;
		return true;
	}
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	return false;
}

static int ask_for_shim(struct ab_session *s)
{
	if (s->asked)
		return 0;
	if (sync_send(s->sync_fd, SYNC_NEW_SHIM, 0, 0, NULL) < 0)
		return -EPIPE;
	s->asked++;
	return 0;
}

static struct ab_denials *route_denial(pid_t pid, void *arg);

/* An idle shim's slot: one that said READY (read now if it did not yet
 * get read), else a new one from the init, waited for. */
static int idle_shim(struct ab_session *s, struct ab_error *err)
{
	unsigned long long deadline = now_ms() + SETUP_TIMEOUT_MS;
	for (;;) {
		for (size_t i = 0; i < s->n_shims; i++)
			if (s->shims[i].sock >= 0 && !s->shims[i].idle)
				on_shim(s, i);
		bool room = false;
		for (size_t i = 0; i < s->n_shims; i++) {
			if (s->shims[i].sock >= 0 && s->shims[i].idle)
				return (int)i;
			room |= s->shims[i].sock < 0;
		}
		if (!room) {
			/* every one is busy cleaning up: the first READY will do */
			poll(NULL, 0, 1);
			if (now_ms() >= deadline)
				return ab_error_plain(err, ETIMEDOUT,
						      "no command supervisor got free");
			continue;
		}
		if (ask_for_shim(s) < 0)
			return ab_error_plain(err, EPIPE,
					      "the sandbox does not take commands any more");
		/* the init forks one: wait for its answer, and answer the
		 * seccomp listener meanwhile: a system call the profile denies
		 * (pidfd_open, say) holds the init until it is answered */
		unsigned long long now = now_ms();
		struct pollfd p[2] = {{.fd = s->sync_fd, .events = POLLIN},
				      {.fd = s->listener, .events = POLLIN}};
		int n = now < deadline ? poll(p, 2, (int)(deadline - now)) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return ab_error_plain(err, ETIMEDOUT,
					      "the sandbox did not start a command supervisor");
		if (p[1].revents &&
		    ab_seccomp_answer(s->sb.seccomp, s->listener, &s->denials, route_denial, s) < 0)
			close_watched(s, &s->listener);
		if (!p[0].revents)
			continue;
		if (!on_sync(s))
			return ab_error_plain(err, EPIPE,
					      "the sandbox does not take commands any more");
		if (s->shim_error) {
			int e = s->shim_error;
			s->shim_error = 0;
			return ab_error_set(err, e,
					    "cannot start the command's supervisor in the sandbox");
		}
	}
}

/* The command's fds to an idle shim; then a spare is asked for when none
 * is left idle, so the fork is not on the next command's path. Returns the
 * shim's slot. */
static int give_to_shim(struct ab_session *s, int fds[SYNC_EXEC_FDS], struct ab_error *err)
{
	for (;;) {
		int i = idle_shim(s, err);
		if (i < 0)
			return i;
		if (sync_send_fds(s->shims[i].sock, SYNC_EXEC, fds, SYNC_EXEC_FDS) < 0) {
			close_watched(s, &s->shims[i].sock); /* it died while idle */
			s->shims[i].idle = false;
			continue;
		}
		s->shims[i].idle = false;
		bool spare = false;
		for (size_t k = 0; k < s->n_shims && !spare; k++)
			spare = s->shims[k].sock >= 0 && s->shims[k].idle;
		if (!spare)
			ask_for_shim(s);
		return i;
	}
}

int ab_session_start(struct ab_session *s, const struct ab_exec *x, unsigned long long tag,
		     struct ab_error *err)
{
	if (s->dead) {
		*err = s->death;
		return -EPIPE;
	}
	struct ab_exec fop;
	char *fop_argv[2] = {(char *)x->file_op, NULL};
	if (x->file_op) {
		fop = (struct ab_exec){
			.argv = fop_argv,
			.cwd = "/", /* whatever commands did to the session's */
			.timeout_ms = x->timeout_ms,
			.max_output = FILEOP_REPLY_MAX,
		};
		x = &fop;
	}
	if (!x->argv || !x->argv[0] || !x->argv[0][0])
		return ab_error_plain(err, EINVAL, "no command given");
	size_t slot = 0;
	for (; slot < s->max && s->cmds[slot].used; slot++)
		if (s->cmds[slot].tag == tag)
			return ab_error_plain(err, EEXIST, "a command with this tag is running");
	for (size_t i = slot; i < s->max; i++)
		if (s->cmds[i].used && s->cmds[i].tag == tag)
			return ab_error_plain(err, EEXIST, "a command with this tag is running");
	if (slot == s->max)
		return ab_error_plain(err, EBUSY, "%zu commands are running already", s->max);

	/* the working directory: absolute, or under /workspace */
	cleanup_free char *cwd = NULL;
	const char *want = x->cwd ? x->cwd : s->sb.cfg.cwd;
	cleanup_free char *joined = NULL;
	if (want[0] != '/' && asprintf(&joined, "/workspace/%s", want) < 0)
		return ab_error_set(err, ENOMEM, "starting the command");
	int r = ab_path_normalize(joined ? joined : want, &cwd);
	if (r < 0)
		return ab_error_plain(err, EINVAL, "cwd: '%s' %s", want,
				      r == -ELOOP ? "contains '..'" : "is not a valid path");

	struct cmd *c = &s->cmds[slot];
	cmd_clear(c);
	c->merged = x->merge_output;
	c->stream = x->stream;
	c->keep_bg = x->keep_background;
	c->file_op = x == &fop;
	uint32_t flags = (c->keep_bg ? SHIM_KEEP_BACKGROUND : 0) | (c->merged ? SHIM_MERGED : 0) |
			 (x == &fop ? SHIM_FILEOP : 0);
	struct buf spec = {0};
	int fds[SYNC_EXEC_FDS] = {-1, -1, -1, -1, -1};
	int pipes[2][2] = {{-1, -1}, {-1, -1}};
	int ctl[2] = {-1, -1};
	s->seq++;
	r = build_spec(s, x, cwd, flags, &spec, err);
	if (r < 0)
		goto out;
	size_t max = x->max_output ? x->max_output : s->sb.cfg.max_output;
	capture_init(&c->out, max);
	if (!c->merged)
		capture_init(&c->err, max);
	fds[EXEC_FD_SPEC] = sealed_memfd("agentbox-spec", spec.p, spec.len);
	fds[EXEC_FD_STDIN] = x->stdin_data
				     ? sealed_memfd("agentbox-stdin", x->stdin_data, x->stdin_len)
				     : fcntl(s->devnull, F_DUPFD_CLOEXEC, 3);
	if (fds[EXEC_FD_SPEC] < 0 || fds[EXEC_FD_STDIN] < 0) {
		r = ab_error_set(err, errno, "starting the command");
		goto out;
	}
	for (int i = 0; i < (c->merged ? 1 : 2); i++)
		if (pipe2(pipes[i], O_CLOEXEC) < 0) {
			r = ab_error_set(err, errno, "cannot create the output pipes");
			goto out;
		}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0) {
		r = ab_error_set(err, errno, "cannot create the command's control channel");
		goto out;
	}
	fds[EXEC_FD_CTL] = ctl[1];
	fds[EXEC_FD_STDOUT] = pipes[0][1];
	fds[EXEC_FD_STDERR] = c->merged ? pipes[0][1] : pipes[1][1];
	c->used = true;
	c->tag = tag;
	c->seq = s->seq;
	c->started_ms = now_ms();
	c->ctl = ctl[0];
	c->out_rd = pipes[0][0];
	c->err_rd = pipes[1][0];
	ctl[0] = pipes[0][0] = pipes[1][0] = -1;
	s->running++;
	fcntl(c->ctl, F_SETFL, O_NONBLOCK);
	fcntl(c->out_rd, F_SETFL, O_NONBLOCK);
	if (c->err_rd >= 0)
		fcntl(c->err_rd, F_SETFL, O_NONBLOCK);
	unsigned long long t = x->timeout_ms ? x->timeout_ms : s->sb.cfg.timeout_ms;
	if (s->sb.cfg.max_timeout_ms && (t == 0 || t > s->sb.cfg.max_timeout_ms))
		t = s->sb.cfg.max_timeout_ms;
	c->timeout_ms = t;
	c->deadline_ms = t ? c->started_ms + t : 0;
	c->oom_before = oom_kills(s);
	if ((r = watch(s, c->ctl, slot, K_CTL)) < 0 || (r = watch(s, c->out_rd, slot, K_OUT)) < 0 ||
	    (c->err_rd >= 0 && (r = watch(s, c->err_rd, slot, K_ERR)) < 0)) {
		ab_error_set(err, -r, "starting the command");
		cmd_release(s, c);
		goto out;
	}
	r = give_to_shim(s, fds, err);
	if (r < 0) {
		cmd_release(s, c);
	} else {
		c->shim_pid = s->shims[r].pid;
		r = 0;
	}
out:
	for (int i = 0; i < SYNC_EXEC_FDS; i++)
		if (i != EXEC_FD_STDERR || fds[i] != fds[EXEC_FD_STDOUT])
			ab_close_keep_errno(fds[i]);
	for (int i = 0; i < 2; i++)
		ab_close_keep_errno(pipes[i][0]);
	ab_close_keep_errno(ctl[0]);
	free(spec.p);
	if (r < 0 && !c->used)
		cmd_clear(c);
	return r;
}

/* ---- supervision ---- */

static void ctl_send(struct cmd *c, char what)
{
	if (c->ctl >= 0 && !c->ctl_eof)
		send(c->ctl, &what, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (what == SHIM_KILL)
		c->kill_sent = true;
	else
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
			cmd_stop(s, c, now_ms());
		}
		return 0;
	}
	return -ESRCH;
}

static void drain(struct ab_session *s, struct cmd *c, int *fd, int stream, ab_event_fn fn,
		  void *arg)
{
	char buf[65536];
	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t n = read(*fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close_watched(s, fd);
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

/* Forget every idle shim: a live one sees its socket close and exits; the
 * next command gets a new one from the init. */
static void drop_idle_shims(struct ab_session *s)
{
	for (size_t i = 0; i < s->n_shims; i++)
		if (s->shims[i].sock >= 0 && s->shims[i].idle) {
			close_watched(s, &s->shims[i].sock);
			s->shims[i].idle = false;
		}
}

static void on_ctl(struct ab_session *s, struct cmd *c)
{
	for (;;) {
		struct shim_msg m;
		int fds[2];
		size_t nfds;
		ssize_t n = packet_recv(c->ctl, &m, sizeof(m), fds, 2, &nfds);
		if (n == -EAGAIN)
			return;
		if (n == 0 || (n < 0 && n != -EBADMSG)) {
			c->ctl_eof = true;
			close_watched(s, &c->ctl);
			if (!c->exited && !c->failed && c->file_op &&
			    (c->timed_out || c->cancelled)) {
				/* the operation's process was the shim: ended as asked */
				c->exited = true;
				c->msg = (struct shim_msg){.type = SHIM_EXITED, .status = SIGKILL};
			} else if (!c->exited && !c->failed) {
				/* the shim died: the command may have killed it, and
				 * with it (kill -9 -1) the idle ones, which may not have
				 * exited yet: none of them gets the next command */
				drop_idle_shims(s);
				c->failed = true;
				c->msg.status = EIO;
				snprintf(c->msg.text, sizeof(c->msg.text),
					 "the command's supervisor in the sandbox was killed (did "
					 "the command kill every process, e.g. kill -9 -1?); the "
					 "command was killed");
				cmd_kill(c);
			}
			/* the shim reaped every process it had: the pipes are at
			 * their end, unless others hold them */
			c->grace_at_ms = now_ms() + ORPHAN_PIPE_GRACE_MS;
			return;
		}
		if (n < 0) {
			shim_broke(c, "the command's supervisor sent a malformed message");
			return;
		}
		if (m.type == SHIM_STARTED && nfds == 2 && c->shim_pidfd < 0) {
			c->shim_pidfd = fds[0];
			c->cmd_pidfd = fds[1];
		} else if (m.type == SHIM_STARTED && nfds == 0 && c->shim_pidfd < 0) {
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
				 * tells the shim to make sure of it) */
				c->ctl_eof = c->kill_sent = true;
				close_watched(s, &c->ctl);
				c->grace_at_ms = now_ms() + ORPHAN_PIPE_GRACE_MS;
				return;
			}
			if (!c->keep_bg) {
				/* what it left behind: killed once the pipes are
				 * closed, or after a short grace */
				c->grace_at_ms = now_ms() + BACKGROUND_GRACE_MS;
			}
		} else {
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
			shim_broke(c, "the command's supervisor sent a message out of turn");
			return;
		}
	}
}

/* The host pid of a command's shim: known from the init when it made the
 * shim, else from the pidfd STARTED brought; -1 while neither is known. */
static pid_t shim_host_pid(struct cmd *c)
{
	if (!c->shim_pid && c->shim_pidfd >= 0)
		c->shim_pid = pidfd_host_pid(c->shim_pidfd);
	return c->shim_pid ? c->shim_pid : -1;
}

static pid_t parent_of(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *p = strstr(buf, "\nPPid:");
	return p ? (pid_t)atoi(p + 6) : 0;
}

/* Which command a denied process belongs to: the one whose shim is its
 * ancestor (the shim is the subreaper of everything the command starts).
 * The init and the shims themselves are agentbox, not a command: what a
 * profile denies them (pidfd_open, say) counts for the session only. */
static struct ab_denials *route_denial(pid_t pid, void *arg)
{
	struct ab_session *s = arg;
	if (pid == s->init)
		return NULL;
	struct cmd *only = NULL;
	size_t n = 0;
	for (size_t i = 0; i < s->max; i++)
		if (s->cmds[i].used) {
			only = &s->cmds[i];
			n++;
			if (shim_host_pid(only) == pid)
				return NULL;
		}
	if (n == 1)
		return &only->denials;
	for (int depth = 0; pid > 1 && depth < 64; depth++) {
		pid = parent_of(pid);
		for (size_t i = 0; i < s->max; i++)
			if (s->cmds[i].used && shim_host_pid(&s->cmds[i]) == pid)
				return &s->cmds[i].denials;
	}
	return NULL;
}

static int collect_denials(const struct ab_denials *d, struct ab_denied_syscall **out, size_t *nout)
{
	size_t n = d->n + (d->other ? 1 : 0);
	*out = NULL;
	*nout = 0;
	if (n == 0)
		return 0;
	struct ab_denied_syscall *v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < d->n; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "%s", d->e[i].name);
		v[i].count = d->e[i].count;
	}
	if (d->other) {
		snprintf(v[d->n].name, sizeof(v[d->n].name), "other");
		v[d->n].count = d->other;
	}
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && v[j].count > v[j - 1].count; j--) {
			struct ab_denied_syscall t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	*out = v;
	*nout = n;
	return 0;
}

static void finish(struct ab_session *s, struct cmd *c, ab_event_fn fn, void *arg)
{
	struct ab_result res = {0};
	struct ab_error error = {0};
	const struct ab_error *failure = NULL;
	sandbox_limits_into(&s->sb, &res);
	res.timeout_ms = c->timeout_ms;
	res.landlock_abi = s->limits.landlock_abi;
	res.duration_ms = now_ms() - c->started_ms;
	if (c->failed || !c->exited) {
		ab_error_plain(&error, c->failed ? c->msg.status : EIO, "%s",
			       c->failed ? c->msg.text : "the command's supervisor ended early");
		failure = &error;
	} else {
		int st = c->msg.status;
		res.cancelled = c->cancelled;
		res.cpu_user_ms = c->msg.utime_us / 1000;
		res.cpu_system_ms = c->msg.stime_us / 1000;
		res.max_rss_kb = c->msg.maxrss_kb;
		if (WIFSIGNALED(st)) {
			res.signal = WTERMSIG(st);
			res.exit_code = AB_EXIT_SIGNAL_BASE + res.signal;
		} else {
			res.exit_code = WEXITSTATUS(st);
		}
		if (c->timed_out) {
			res.timed_out = true;
			res.exit_code = AB_EXIT_TIMEOUT;
			if (!res.signal)
				res.signal = c->timeout_signal;
		}
		res.oom_killed = res.signal == SIGKILL && oom_kills(s) > c->oom_before;
		if (c->keep_bg && c->msg.n_background) {
			res.background = calloc(c->msg.n_background, sizeof(*res.background));
			for (uint32_t i = 0; res.background && i < c->msg.n_background; i++) {
				res.background[i].pid = c->msg.background[i].pid;
				snprintf(res.background[i].command,
					 sizeof(res.background[i].command), "%s",
					 c->msg.background[i].comm);
			}
			res.n_background = res.background ? c->msg.n_background : 0;
			snprintf(res.background_log, sizeof(res.background_log), "%.63s",
				 c->msg.text);
		}
		if (collect_denials(&c->denials, &res.denied, &res.n_denied) < 0 ||
		    capture_take(&c->out, &res.out) < 0 || capture_take(&c->err, &res.err) < 0) {
			ab_error_set(&error, ENOMEM, "collecting the result");
			failure = &error;
		}
	}
	unsigned long long tag = c->tag;
	cmd_release(s, c);
	s->commands_run++;
	if (fn) {
		struct ab_event ev = {
			.kind = AB_EVENT_RESULT,
			.tag = tag,
			.result = &res,
			.error = failure,
		};
		fn(&ev, arg);
	}
	ab_result_free(&res);
}

/* Deadlines, and whether a command is complete. */
static void check(struct ab_session *s, struct cmd *c, unsigned long long now, ab_event_fn fn,
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
	if (c->exited && !c->keep_bg && !c->kill_sent &&
	    (!pipes_open || (c->grace_at_ms && now >= c->grace_at_ms))) {
		ctl_send(c, SHIM_KILL);
		c->grace_at_ms = 0;
	}
	if (c->ctl_eof && pipes_open && c->grace_at_ms && now >= c->grace_at_ms) {
		/* the shim is gone, someone else still holds the pipes: keep
		 * what is there, stop waiting for more */
		if (c->out_rd >= 0)
			drain(s, c, &c->out_rd, 1, fn, arg);
		if (c->err_rd >= 0)
			drain(s, c, &c->err_rd, 2, fn, arg);
		close_watched(s, &c->out_rd);
		close_watched(s, &c->err_rd);
		pipes_open = false;
	}
	if (c->ctl_eof && !pipes_open)
		finish(s, c, fn, arg);
}

static void arm_timer(struct ab_session *s)
{
	unsigned long long next = 0;
	for (size_t i = 0; i < s->max; i++) {
		struct cmd *c = &s->cmds[i];
		if (!c->used)
			continue;
		unsigned long long d[] = {c->deadline_ms, c->kill_at_ms, c->grace_at_ms};
		for (size_t k = 0; k < AB_ARRAY_SIZE(d); k++)
			if (d[k] && (!next || d[k] < next))
				next = d[k];
	}
	struct itimerspec its = {0};
	if (next) {
		/* absolute CLOCK_MONOTONIC, at least 1 ns so it stays armed */
		its.it_value.tv_sec = (time_t)(next / 1000);
		its.it_value.tv_nsec = (long)(next % 1000) * 1000000 + 1;
	}
	timerfd_settime(s->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
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

/* The sandbox is gone or hostile: every command fails, nothing runs on. */
static void die(struct ab_session *s, const char *why, ab_event_fn fn, void *arg)
{
	if (!s->dead) {
		s->dead = true;
		ab_error_plain(&s->death, EIO, "%s", why);
	}
	kill_init(s);
	for (size_t i = 0; i < s->max; i++) {
		struct cmd *c = &s->cmds[i];
		if (!c->used)
			continue;
		unsigned long long tag = c->tag;
		cmd_release(s, c);
		if (fn) {
			struct ab_event ev = {
				.kind = AB_EVENT_RESULT, .tag = tag, .error = &s->death};
			fn(&ev, arg);
		}
	}
}

int ab_session_dispatch(struct ab_session *s, int timeout_ms, ab_event_fn fn, void *arg,
			struct ab_error *err)
{
	if (s->dead) {
		*err = s->death;
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
		case K_SHIM:
			if (slot < s->n_shims && s->shims[slot].sock >= 0)
				on_shim(s, slot);
			break;
		case K_SYNC:
			if (on_sync(s))
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
			if (ab_seccomp_answer(s->sb.seccomp, s->listener, &s->denials, route_denial,
					      s) < 0)
				close_watched(s, &s->listener);
			break;
		case K_TIMER: {
			uint64_t ticks;
			(void)!read(s->timerfd, &ticks, sizeof(ticks));
			break;
		}
		case K_CTL:
			if (c && c->used && c->ctl >= 0)
				on_ctl(s, c);
			break;
		case K_OUT:
			if (c && c->used && c->out_rd >= 0)
				drain(s, c, &c->out_rd, 1, fn, arg);
			break;
		case K_ERR:
			if (c && c->used && c->err_rd >= 0)
				drain(s, c, &c->err_rd, 2, fn, arg);
			break;
		}
	}
	if (s->dead) {
		*err = s->death;
		return -EPIPE;
	}
	unsigned long long now = now_ms();
	for (size_t i = 0; i < s->max; i++)
		if (s->cmds[i].used)
			check(s, &s->cmds[i], now, fn, arg);
	arm_timer(s);
	return 0;
}

struct exec_wait {
	unsigned long long tag;
	bool done;
	struct ab_result *res;
	struct ab_error *err;
	int r;
};

static void exec_event(const struct ab_event *ev, void *arg)
{
	struct exec_wait *w = arg;
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
	struct exec_wait w = {.tag = ~0ULL - s->seq, .res = res, .err = err};
	int r = ab_session_start(s, x, w.tag, err);
	while (r == 0 && !w.done)
		r = ab_session_dispatch(s, -1, exec_event, &w, err);
	return r < 0 ? r : w.r;
}

int ab_session_stats(struct ab_session *s, struct ab_session_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->uptime_ms = now_ms() - s->started_ms;
	st->commands_run = s->commands_run;
	st->running = s->running;
	free(s->stats_denied);
	s->stats_denied = NULL;
	if (collect_denials(&s->denials, &s->stats_denied, &st->n_denied) < 0)
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

void ab_session_close(struct ab_session *s)
{
	if (!s)
		return;
	if (s->init > 0) {
		/* pid 1 going takes every process of the sandbox with it */
		kill_init(s);
		while (!s->init_reaped && waitpid(s->init, NULL, 0) < 0 && errno == EINTR)
			;
	}
	for (size_t i = 0; s->cmds && i < s->max; i++)
		if (s->cmds[i].used)
			cmd_release(s, &s->cmds[i]);
	for (size_t i = 0; s->shims && i < s->n_shims; i++)
		ab_close_keep_errno(s->shims[i].sock);
	free(s->shims);
	int fds[] = {s->init_pidfd, s->sync_fd, s->listener, s->epfd, s->timerfd, s->devnull};
	for (size_t i = 0; i < AB_ARRAY_SIZE(fds); i++)
		ab_close_keep_errno(fds[i]);
	free(s->cmds);
	free(s->stats_denied);
	sandbox_release(&s->sb);
	free(s);
}
