/* `agentbox run`: a session of one command (design.md, "One lifecycle, not
 * two"). Open a session whose init is the command's shim itself, start the
 * command with the caller's own stdin, stdout and stderr passed into the
 * sandbox (a terminal stays a terminal, and output that is not captured
 * never passes through agentbox), forward the signals a wrapper passes on,
 * and close; a terminal among those fds gets back the modes and size it
 * had (term.h). Timeout, escalation, output, denials, OOM, protected paths
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
#include "util/term.h"
#include "util/util.h"

#define RUN_TAG 1

struct run_wait {
	bool done;
	struct ab_result *res;
	struct ab_error *err;
	int r;
	bool tty;	 /* -t: output events to our stdout */
	bool stdin_busy; /* -t: a write to the terminal waits for room */
};

static void run_event(const struct ab_event *ev, void *arg)
{
	struct run_wait *w = arg;
	if (ev->tag != RUN_TAG)
		return;
	if (ev->kind == AB_EVENT_OUTPUT && w->tty)
		ab_term_write_out(ev->data, ev->len);
	if (ev->kind == AB_EVENT_STDIN)
		w->stdin_busy = false;
	if (ev->kind != AB_EVENT_RESULT)
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

/* Each signal that came, to the command's process group; with -t a
 * SIGWINCH is the caller's terminal resized: the command's follows. */
static void forward_signals(struct ab_session *s, int sigfd)
{
	struct signalfd_siginfo si;
	while (read(sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo != SIGWINCH) {
			ab_session_signal(s, RUN_TAG, (int)si.ssi_signo);
			continue;
		}
		struct winsize ws = ab_term_size();
		struct ab_error ignored;
		ab_session_resize(s, RUN_TAG, ws.ws_row, ws.ws_col, &ignored);
	}
}

/* -t: what the caller typed, to the command's terminal; one write at a
 * time (run_wait.stdin_busy until it is read), so memory stays bounded. */
static void relay_stdin(struct ab_session *s, struct run_wait *w, bool *open)
{
	char buf[4096];
	ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	struct ab_error ignored;
	int r = n > 0 ? ab_session_stdin(s, RUN_TAG, buf, (size_t)n, false, &ignored) : -1;
	if (r < 0)
		*open = false; /* the caller's end, or the command's terminal closed */
	w->stdin_busy = r == 0;
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
	struct winsize ws = ab_term_size();
	if (cfg->tty) {
		/* a new terminal inside: the caller's is never passed in */
		x = (struct ab_exec){.argv = cfg->argv, .stream = true, .pty = true};
		x.pty_rows = ws.ws_row;
		x.pty_cols = ws.ws_col;
	}
	struct run_wait w = {.res = res, .err = err, .tty = cfg->tty};
	ab_cleanup_raw_tty struct ab_raw_tty raw = {0};
	bool stdin_open = cfg->tty;
	/* given to the init while it builds the view: it runs the command as
	 * soon as it is ready, and says why not when it cannot be */
	int r = ab_session_start(s, &x, RUN_TAG, err);
	struct ab_error why = {0};
	/* why the sandbox could not be built comes first: the start may
	 * have failed only because its init was gone */
	int ready = s->one_command ? session_ready(s, &why) : 0;
	if (ready < 0) {
		*err = why;
		return ready;
	}
	if (r == 0 && cfg->tty)
		r = ab_term_raw_enter(&raw, err);
	/* the first round arms the timer of the deadline */
	if (r == 0)
		r = ab_session_dispatch(s, 0, run_event, &w, err);
	while (r == 0 && !w.done) {
		struct pollfd p[3] = {
			{.fd = ab_session_fd(s), .events = POLLIN},
			{.fd = sigfd, .events = POLLIN},
			{.fd = stdin_open && !w.stdin_busy ? STDIN_FILENO : -1, .events = POLLIN},
		};
		if (poll(p, 3, -1) < 0 && errno != EINTR)
			return ab_error_set(err, errno, "supervising the command");
		if (p[1].revents)
			forward_signals(s, sigfd);
		if (p[2].revents)
			relay_stdin(s, &w, &stdin_open);
		r = ab_session_dispatch(s, 0, run_event, &w, err);
	}
	/* a result that came as the sandbox ended is still the result */
	return w.done ? w.r : r;
}

int ab_run(struct ab_config *cfg, struct ab_result *res, struct ab_error *err)
{
	if (cfg->tty && ab_term_check(err) < 0)
		return -ENOTTY;
	sigset_t old;
	sigprocmask(SIG_BLOCK, NULL, &old); /* restored at the end, whatever fails */
	/* blocked before the init is cloned: none is lost, none kills us */
	cleanup_fd int sigfd = ab_forwarded_signals_fd(cfg->tty ? SIGWINCH : 0, &old);
	/* without -t the command gets the caller's terminal itself: its
	 * modes and size come back once the sandbox is gone (restored last) */
	ab_cleanup_term_keep struct ab_term_keep keep = {0};
	if (!cfg->tty)
		ab_term_keep_save(&keep, (int[]){0, cfg->capture ? -1 : 1, cfg->capture ? -1 : 2},
				  3);
	struct ab_session *s = NULL;
	int r = sigfd < 0 ? ab_error_set(err, errno, "cannot watch signals")
			  : session_open(cfg, true, res, &s, err);
	if (r == 0)
		r = run_command(s, cfg, sigfd, res, err);
	if (r < 0)
		ab_isolation_explain(cfg, ~0u, err); /* name what a container refuses */
	ab_session_close(s);
	ab_term_keep_restore(&keep);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}
