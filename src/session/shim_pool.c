/* The pool of command shims (shim.h): the init starts them when the
 * launcher asks and hands their sockets over; a command goes to an idle
 * one, and a spare is asked for at once so that the fork is not on the
 * next command's path. In a one-command session (`agentbox run`) the init
 * itself is the only shim and no spare is ever asked for. Each command's
 * shim is the ancestor of its processes: what the seccomp listener denies a
 * process is routed to its command by it. A shim a command stopped (kill
 * -STOP, where Landlock does not scope its signals) is killed by the init
 * (init.c): its socket's end drops it from the pool as a dead one's does,
 * so no work waits on it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "session/session.h"
#include "util/sync.h"
#include "util/util.h"

struct ab_denials *session_denials(struct ab_session *s)
{
	if (!s->denials)
		s->denials = calloc(1, sizeof(*s->denials));
	return s->denials;
}

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
struct ab_denials *command_route_denial(pid_t pid, void *arg)
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

/* A shim's turn to idle, stamped: the next command goes to the one idle
 * longest, whose warm shell (warm.h) had the most time to get ready. */
static void set_idle(struct ab_session *s, size_t i)
{
	if (!s->shims[i].idle)
		s->shims[i].idle_since = ++s->idle_ticks;
	s->shims[i].idle = true;
}

void pool_add(struct ab_session *s, int sock, pid_t pid, int pidfd)
{
	if (pidfd < 0)
		s->shim_no_pidfd = true;
	for (size_t i = 0; i < s->n_shims; i++) {
		if (s->shims[i].sock >= 0)
			continue;
		/* ours may not block: READY is read when it is there */
		fcntl(sock, F_SETFL, O_NONBLOCK);
		if (session_watch(s, sock, i, K_SHIM) < 0)
			break;
		s->shims[i].sock = sock;
		set_idle(s, i);
		s->shims[i].pid = pid;
		/* (a slot's pidfd is of its last shim, alive or not) */
		ab_close_keep_errno(s->shims[i].pidfd);
		s->shims[i].pidfd = pidfd;
		s->shims[i].gen = ++s->shim_gens;
		return;
	}
	close(sock); /* more than can be used at once */
	ab_close_keep_errno(pidfd);
}

struct cmd *pool_inline_cmd(struct ab_session *s, size_t i)
{
	for (size_t k = 0; k < s->max; k++) {
		struct cmd *c = &s->cmds[k];
		if (c->used && c->inline_op && !c->ctl_eof && c->shim_slot == i &&
		    c->shim_gen == s->shims[i].gen)
			return c;
	}
	return NULL;
}

void pool_set_idle(struct ab_session *s, size_t i)
{
	set_idle(s, i);
}

void pool_forget(struct ab_session *s, size_t i)
{
	session_unwatch(s, &s->shims[i].sock);
	s->shims[i].idle = false;
}

/* A shim's socket: READY after its command, or its end (it died, or a
 * command killed it); anything else and it is dropped. A file operation's
 * packets on it are its command's (command_on_shim): left there. */
void pool_on_shim(struct ab_session *s, size_t i)
{
	if (pool_inline_cmd(s, i))
		return;
	struct sync_msg m;
	int r = sync_recv(s->shims[i].sock, &m, NULL);
	if (r == -EAGAIN)
		return;
	if (r == 1 && m.type == SYNC_READY && !s->shims[i].idle) {
		set_idle(s, i);
		return;
	}
	pool_forget(s, i);
}

/* A message of the init after setup: a shim asked for, or why there is
 * none. False for anything else (the session ends). */
bool pool_on_sync(struct ab_session *s)
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
		if (n == 2 && pid <= 0)
			close(fds[1]);
		pool_add(s, fds[0], pid > 0 ? pid : 0, pid > 0 ? fds[1] : -1);
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
	if (s->one_command)
		return -EPIPE; /* its one shim is gone */
	if (sync_send(s->sync_fd, SYNC_NEW_SHIM, 0, 0, NULL) < 0)
		return -EPIPE;
	s->asked++;
	return 0;
}

/* An idle shim's slot: of those that said READY (read now if it did not
 * yet get read), the one idle longest; else a new one from the init,
 * waited for. Not the first idle one: back to back, that is the shim of
 * the command just ended, whose warm shell is still in its exec, while
 * the spare's waits ready. */
static int idle_shim(struct ab_session *s, struct ab_error *err)
{
	unsigned long long deadline = session_now_ms() + SETUP_TIMEOUT_MS;
	for (;;) {
		for (size_t i = 0; i < s->n_shims; i++)
			if (s->shims[i].sock >= 0 && !s->shims[i].idle)
				pool_on_shim(s, i);
		bool room = false;
		int best = -1;
		for (size_t i = 0; i < s->n_shims; i++) {
			if (s->shims[i].sock >= 0 && s->shims[i].idle &&
			    (best < 0 || s->shims[i].idle_since < s->shims[best].idle_since))
				best = (int)i;
			room |= s->shims[i].sock < 0;
		}
		if (best >= 0)
			return best;
		if (!room) {
			/* every one is busy cleaning up: the first READY will do */
			poll(NULL, 0, 1);
			if (session_now_ms() >= deadline)
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
		unsigned long long now = session_now_ms();
		struct pollfd p[2] = {{.fd = s->sync_fd, .events = POLLIN},
				      {.fd = s->listener, .events = POLLIN}};
		int n = now < deadline ? poll(p, 2, (int)(deadline - now)) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return ab_error_plain(err, ETIMEDOUT,
					      "the sandbox did not start a command supervisor");
		if (p[1].revents &&
		    ab_seccomp_answer(s->sb.seccomp, s->listener, session_denials(s),
				      command_route_denial, s) < 0)
			session_unwatch(s, &s->listener);
		if (!p[0].revents)
			continue;
		if (!pool_on_sync(s))
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

/* A command to an idle shim (send: its packet on the shim's socket); then
 * a spare is asked for when none is left idle, so the fork is not on the
 * next command's path. Returns the shim's slot, or -EMSGSIZE when send
 * says (> 0) that the socket cannot take its packet (nothing given). */
static int give(struct ab_session *s, int (*send)(int sock, const void *arg), const void *arg,
		struct ab_error *err)
{
	for (;;) {
		int i = idle_shim(s, err);
		if (i < 0)
			return i;
		int r = send(s->shims[i].sock, arg);
		if (r > 0)
			return -EMSGSIZE; /* too big for this socket: the shim stays idle */
		if (r < 0) {
			session_unwatch(s, &s->shims[i].sock); /* it died while idle */
			s->shims[i].idle = false;
			continue;
		}
		s->shims[i].idle = false;
		bool spare = false;
		for (size_t k = 0; k < s->n_shims && !spare; k++)
			spare = s->shims[k].sock >= 0 && s->shims[k].idle;
		if (!spare && !s->one_command)
			ask_for_shim(s);
		return i;
	}
}

static int send_exec(int sock, const void *fds)
{
	return sync_send_fds(sock, SYNC_EXEC, fds, SYNC_EXEC_FDS);
}

int pool_give(struct ab_session *s, int fds[SYNC_EXEC_FDS], struct ab_error *err)
{
	int r = give(s, send_exec, fds, err);
	return r == -EMSGSIZE ? ab_error_plain(err, EIO, "cannot hand the command over") : r;
}

static int send_fileop(int sock, const void *request)
{
	int r = fileop_pkt_send(sock, SYNC_FILEOP, 0, request, strlen(request));
	/* a send buffer smaller than the packet: not the shim's fault */
	return r == -EMSGSIZE || r == -ENOBUFS || r == -EAGAIN ? 1 : r;
}

int pool_give_fileop(struct ab_session *s, const char *request, struct ab_error *err)
{
	return give(s, send_fileop, request, err);
}

void pool_idle_at_final(struct ab_session *s, const struct cmd *c)
{
	if (c->shim_slot < s->n_shims && s->shims[c->shim_slot].sock >= 0 &&
	    s->shims[c->shim_slot].gen == c->shim_gen)
		set_idle(s, c->shim_slot);
}

/* Forget every idle shim: a live one sees its socket close and exits; the
 * next command gets a new one from the init. */
void pool_drop_idle(struct ab_session *s)
{
	for (size_t i = 0; i < s->n_shims; i++)
		if (s->shims[i].sock >= 0 && s->shims[i].idle) {
			session_unwatch(s, &s->shims[i].sock);
			s->shims[i].idle = false;
		}
}
