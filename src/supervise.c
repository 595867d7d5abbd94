#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "netproxy.h"
#include "sync.h"
#include "util.h"

static void supervision_fail(struct supervision *s, const char *why)
{
	if (!s->have_error) {
		s->have_error = true;
		ab_error_plain(&s->error, EBADMSG, "%s", why);
	}
	/* an init that misbehaves is killed, never believed; once reaped, its
	 * pid may be reused (pid_max can be 32768): the messages it left are
	 * read after that, and a kill then could hit another process */
	if (!s->reaped)
		kill(s->init, SIGKILL);
}

/* One message from the init. Returns false at EOF or on a bad message. */
static bool handle_sync(struct supervision *s)
{
	struct sync_msg m;
	int passed = -1;
	int r = sync_recv(s->sync_fd, &m, &passed);
	if (r < 0)
		supervision_fail(s, "the sandbox sent a malformed message");
	if (r <= 0)
		return false;
	switch (m.type) {
	case SYNC_ERROR:
		if (!s->have_error) {
			s->have_error = true;
			ab_error_plain(&s->error, m.code > 0 ? m.code : EIO, "%s", m.text);
		}
		break;
	case SYNC_READY:
		if (s->ready)
			supervision_fail(s, "the sandbox said READY twice");
		s->ready = true;
		s->landlock_abi = m.status > 0 && m.status < 100 ? m.status : 0;
		break;
	case SYNC_LISTENER:
		if (!s->ready || !s->seccomp || s->n_listeners == AB_MAX_LISTENERS) {
			close(passed);
			supervision_fail(s, "the sandbox passed an unexpected fd");
			break;
		}
		s->listeners[s->n_listeners++] = passed;
		break;
	case SYNC_NET_LISTENER: /* net: --net allow= (netproxy.h) */
		if (s->ready || s->net || !s->cfg || s->cfg->net != AB_NET_PROXY) {
			close(passed);
			supervision_fail(s, "the sandbox passed an unexpected fd");
		} else if (netproxy_new(s->cfg, passed, &s->net, &s->error) < 0) {
			s->have_error = true;
			kill(s->init, SIGKILL);
		}
		break;
	case SYNC_EXIT:
		if (!s->ready || s->have_exit || !(WIFEXITED(m.status) || WIFSIGNALED(m.status)))
			supervision_fail(s, "the sandbox reported an impossible exit");
		s->have_exit = true;
		s->status = m.status;
		break;
	default:
		supervision_fail(s, "the sandbox sent a message out of turn");
	}
	return true;
}

/* Read what is there from a capture pipe into its cap; false at EOF. */
static bool drain_pipe(int fd, struct ab_capture *c)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n > 0) {
			capture_append(c, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 && errno == EAGAIN;
	}
}

static void arm(int tfd, unsigned long long ms)
{
	struct itimerspec its = {
		.it_value = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000},
	};
	if (ms == 0)
		its.it_value.tv_nsec = 1; /* 0 would disarm: fire at once instead */
	timerfd_settime(tfd, 0, &its, NULL);
}

/* The timeout fired: SIGTERM to every process of the command, then,
 * after the grace, SIGKILL to the init, which takes the whole pid
 * namespace with it. */
static void on_timer(struct supervision *s, int tfd)
{
	uint64_t ticks;
	if (read(tfd, &ticks, sizeof(ticks)) != sizeof(ticks))
		return;
	if (!s->timed_out) {
		s->timed_out = true;
		s->timeout_signal = SIGTERM;
		if (s->kill_after_ms > 0 &&
		    sync_send(s->sync_fd, SYNC_SIGNAL_ALL, 0, SIGTERM, NULL) == 0) {
			arm(tfd, s->kill_after_ms);
			return;
		}
	}
	s->timeout_signal = SIGKILL;
	kill(s->init, SIGKILL);
}

int supervise(struct supervision *s)
{
	cleanup_fd int tfd = -1;
	if (s->timeout_ms) {
		tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		if (tfd < 0)
			return -errno;
		arm(tfd, s->timeout_ms);
	}
	int sync_fd = s->sync_fd;
	enum { P_SIG, P_SYNC, P_TIMER, P_OUT, P_ERR, P_NET, P_LISTEN };
	for (;;) {
		struct pollfd pfd[P_LISTEN + AB_MAX_LISTENERS] = {
			[P_SIG] = {.fd = s->sigfd, .events = POLLIN},
			[P_SYNC] = {.fd = sync_fd, .events = POLLIN},
			[P_TIMER] = {.fd = tfd, .events = POLLIN},
			[P_OUT] = {.fd = s->out_rd, .events = POLLIN},
			[P_ERR] = {.fd = s->err_rd, .events = POLLIN},
			[P_NET] = {.fd = s->net ? netproxy_fd(s->net) : -1, .events = POLLIN},
		};
		for (size_t i = 0; i < s->n_listeners; i++)
			pfd[P_LISTEN + i] =
				(struct pollfd){.fd = s->listeners[i], .events = POLLIN};
		if (poll(pfd, P_LISTEN + s->n_listeners, -1) < 0) {
			if (errno == EINTR)
				continue;
			kill(s->init, SIGKILL);
			return -errno;
		}
		for (size_t i = 0; i < s->n_listeners; i++) {
			short ev = pfd[P_LISTEN + i].revents;
			if ((ev & POLLIN) && ab_seccomp_answer(s->seccomp, s->listeners[i],
							       &s->denials, NULL, NULL) >= 0)
				continue;
			if (ev) {
				/* every process under that filter is gone */
				close(s->listeners[i]);
				s->listeners[i] = s->listeners[--s->n_listeners];
				break; /* the poll set changed: rebuild it */
			}
		}
		if (pfd[P_OUT].revents && !drain_pipe(s->out_rd, &s->out)) {
			close(s->out_rd);
			s->out_rd = -1;
		}
		if (pfd[P_ERR].revents && !drain_pipe(s->err_rd, &s->err)) {
			close(s->err_rd);
			s->err_rd = -1;
		}
		if (pfd[P_TIMER].revents)
			on_timer(s, tfd);
		if (pfd[P_NET].revents) /* net */
			netproxy_dispatch(s->net);
		if (pfd[P_SYNC].revents && !handle_sync(s))
			sync_fd = -1; /* EOF: wait for the exit */
		if (!pfd[P_SIG].revents)
			continue;
		struct signalfd_siginfo si;
		if (read(s->sigfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo != SIGCHLD) {
			kill(s->init, (int)si.ssi_signo);
			continue;
		}
		if (wait4(s->init, &s->init_status, WNOHANG, &s->rusage) == s->init) {
			s->reaped = true;
			break;
		}
	}
	/* the init is gone, and with it every process of the sandbox: what
	 * they sent is still queued, and no writer is left to block on */
	while (sync_fd >= 0 && handle_sync(s))
		;
	if (s->out_rd >= 0) {
		fcntl(s->out_rd, F_SETFL, 0);
		drain_pipe(s->out_rd, &s->out);
	}
	if (s->err_rd >= 0) {
		fcntl(s->err_rd, F_SETFL, 0);
		drain_pipe(s->err_rd, &s->err);
	}
	return 0;
}
