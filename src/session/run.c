/* `agentbox run`: a session of one command (design.md, "One lifecycle, not
 * two"). Open a session whose init is the command's shim itself, start the
 * command with the caller's own stdin, stdout and stderr passed into the
 * sandbox (a terminal stays a terminal, and output that is not captured
 * never passes through agentbox), forward the signals a wrapper passes on,
 * and close. Timeout, escalation, output, denials, OOM, protected paths
 * and the result are the session's (command.c, command_result.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "util/error.h"
#include "sandbox/init.h"
#include "sandbox/isolation.h"
#include "session/session.h"
#include "util/util.h"

#define RUN_TAG 1

struct run_wait {
	bool done;
	struct ab_result *res;
	struct ab_error *err;
	int r;
};

static void run_event(const struct ab_event *ev, void *arg)
{
	struct run_wait *w = arg;
	if (ev->kind != AB_EVENT_RESULT || ev->tag != RUN_TAG)
		return;
	w->done = true;
	if (ev->error) {
		*w->err = *ev->error;
		w->r = -(ev->error->code ? ev->error->code : EIO);
		return;
	}
	ab_result_free(w->res);
	*w->res = *ev->result;
	memset(ev->result, 0, sizeof(*ev->result)); /* ownership moves to the caller */
}

/* Each signal that came, to the command's process group. */
static void forward_signals(struct ab_session *s, int sigfd)
{
	struct signalfd_siginfo si;
	while (read(sigfd, &si, sizeof(si)) == sizeof(si))
		ab_session_signal(s, RUN_TAG, (int)si.ssi_signo);
}

/* The caller's fd n for the command: itself when open, else /dev/null
 * (opened into *null), as a closed fd of the caller would read or write
 * nothing. */
static int caller_fd(int n, int *null)
{
	if (fcntl(n, F_GETFD) >= 0)
		return n;
	*null = open("/dev/null", (n == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
	return *null;
}

/* The one command to its end, forwarding signals meanwhile. */
static int run_command(struct ab_session *s, const struct ab_config *cfg, int sigfd,
		       struct ab_result *res, struct ab_error *err)
{
	cleanup_fd int null0 = -1;
	cleanup_fd int null1 = -1;
	cleanup_fd int null2 = -1;
	/* captured output goes to the session's pipes (-1) */
	int fds[3] = {
		caller_fd(0, &null0),
		cfg->capture ? -1 : caller_fd(1, &null1),
		cfg->capture ? -1 : caller_fd(2, &null2),
	};
	struct ab_exec x = {
		.argv = cfg->argv,
		.merge_output = cfg->merge_output,
		.fds = fds,
	};
	struct run_wait w = {.res = res, .err = err};
	/* given to the init while it builds the view: it runs the command as
	 * soon as it is ready, and says why not when it cannot be */
	int r = ab_session_start(s, &x, RUN_TAG, err);
	struct ab_error why = {0};
	/* why the sandbox could not be built comes first: the start may
	 * have failed only because its init was gone */
	int ready = session_ready(s, &why);
	if (ready < 0) {
		*err = why;
		return ready;
	}
	/* the first round arms the timer of the deadline */
	if (r == 0)
		r = ab_session_dispatch(s, 0, run_event, &w, err);
	while (r == 0 && !w.done) {
		struct pollfd p[2] = {
			{.fd = ab_session_fd(s), .events = POLLIN},
			{.fd = sigfd, .events = POLLIN},
		};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return ab_error_set(err, errno, "supervising the command");
		if (p[1].revents)
			forward_signals(s, sigfd);
		r = ab_session_dispatch(s, 0, run_event, &w, err);
	}
	/* a result that came as the sandbox ended is still the result */
	return w.done ? w.r : r;
}

int ab_run(struct ab_config *cfg, struct ab_result *res, struct ab_error *err)
{
	sigset_t mask, old;
	sigemptyset(&mask);
	for (size_t i = 0; i < AB_ARRAY_SIZE(ab_forwarded_signals); i++)
		sigaddset(&mask, ab_forwarded_signals[i]);
	/* blocked before the init is cloned: none is lost, none kills us */
	if (sigprocmask(SIG_BLOCK, &mask, &old) < 0)
		return ab_error_set(err, errno, "cannot block signals");
	cleanup_fd int sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	struct ab_session *s = NULL;
	int r = sigfd < 0 ? ab_error_set(err, errno, "cannot watch signals")
			  : session_open(cfg, true, res, &s, err);
	if (r == 0)
		r = run_command(s, cfg, sigfd, res, err);
	if (r < 0)
		ab_isolation_explain(cfg, ~0u, err); /* name what a container refuses */
	ab_session_close(s);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}
