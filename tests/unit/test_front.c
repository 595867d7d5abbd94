/* The front engine (front/front.h) over a fake session: the engine's calls
 * into the session (ab_session_*) are wrapped at link time (-Wl,--wrap,
 * tests/CMakeLists.txt), so each test decides what the session does —
 * starts, results, its death — and checks what the engine hands the codec:
 * admission, the queue, cancellation, the signals, the sandbox's death,
 * the end, and a running command's input. */
#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "front/front.h"
#include "util/error.h"

/* ---- the fake session ---- */

#define MAX_TAGS 64

static struct {
	char self; /* what the session pointer points at */
	int efd;   /* ab_session_fd: readable while dispatch has work */
	int opens, closes;
	bool open_fails, start_fails, die;
	unsigned long long started[MAX_TAGS], cancelled[MAX_TAGS], finish[MAX_TAGS];
	size_t n_started, n_cancelled, n_finish, running, max_concurrent;
	int dispatches;
	/* the input calls: which, to what, with what; what they return */
	enum ab_request_op input_kind;
	unsigned long long input_tag;
	const char *input_data;
	size_t input_len;
	bool input_eof;
	unsigned rows, cols;
	int signo, input_rc;
	int input_calls;
} fk = {.efd = -1};

int __wrap_ab_session_open(struct ab_config *cfg, struct ab_session **s, struct ab_error *err)
{
	(void)cfg;
	if (fk.open_fails) { /* what it leaves in *s is not a session */
		*s = (struct ab_session *)&fk.self;
		return ab_error_plain(err, EIO, "the sandbox could not be built");
	}
	if (fk.efd < 0)
		fk.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	fk.opens++;
	*s = (struct ab_session *)&fk.self;
	return 0;
}

void __wrap_ab_session_close(struct ab_session *s)
{
	if (s)
		fk.closes++;
}

int __wrap_ab_session_start(struct ab_session *s, const struct ab_exec *x, unsigned long long tag,
			    struct ab_error *err)
{
	(void)s;
	(void)x;
	if (fk.start_fails)
		return ab_error_plain(err, ENOENT, "no such program");
	if (fk.running >= fk.max_concurrent) /* as the session's own bound */
		return -EBUSY;
	fk.started[fk.n_started++] = tag;
	fk.running++;
	return 0;
}

size_t __wrap_ab_session_running(const struct ab_session *s)
{
	(void)s;
	return fk.running;
}

int __wrap_ab_session_cancel(struct ab_session *s, unsigned long long tag)
{
	(void)s;
	fk.cancelled[fk.n_cancelled++] = tag;
	return 0;
}

int __wrap_ab_session_fd(const struct ab_session *s)
{
	(void)s;
	return fk.efd;
}

struct ab_layer *__wrap_ab_session_layer(struct ab_session *s)
{
	(void)s;
	return NULL;
}

/* Work for dispatch: the fd becomes readable. */
static void kick(void)
{
	uint64_t one = 1;
	cr_assert_eq(write(fk.efd, &one, sizeof(one)), (ssize_t)sizeof(one));
}

/* The command tagged tag ends at the next dispatch. */
static void finish(unsigned long long tag)
{
	fk.finish[fk.n_finish++] = tag;
	kick();
}

int __wrap_ab_session_dispatch(struct ab_session *s, int timeout_ms, ab_event_fn fn, void *arg,
			       struct ab_error *err)
{
	(void)s;
	(void)timeout_ms;
	fk.dispatches++;
	if (fk.die) /* the fd stays readable: a dead sandbox's does */
		return ab_error_plain(err, EIO, "its init died");
	uint64_t n;
	(void)!read(fk.efd, &n, sizeof(n));
	for (size_t i = 0; i < fk.n_finish; i++) {
		struct ab_result res = {.exit_code = 0};
		struct ab_event ev = {.kind = AB_EVENT_RESULT, .tag = fk.finish[i], .result = &res};
		fk.running--;
		fn(&ev, arg);
	}
	fk.n_finish = 0;
	return 0;
}

static int input(enum ab_request_op kind, unsigned long long tag)
{
	fk.input_kind = kind;
	fk.input_tag = tag;
	fk.input_calls++;
	return fk.input_rc;
}

int __wrap_ab_session_stdin(struct ab_session *s, unsigned long long tag, const char *data,
			    size_t len, bool eof, struct ab_error *err)
{
	(void)s;
	fk.input_data = data;
	fk.input_len = len;
	fk.input_eof = eof;
	if (fk.input_rc < 0)
		ab_error_plain(err, -fk.input_rc, "the command's stdin is closed");
	return input(AB_REQUEST_STDIN, tag);
}

int __wrap_ab_session_resize(struct ab_session *s, unsigned long long tag, unsigned rows,
			     unsigned cols, struct ab_error *err)
{
	(void)s;
	(void)err;
	fk.rows = rows;
	fk.cols = cols;
	return input(AB_REQUEST_RESIZE, tag);
}

int __wrap_ab_session_signal(struct ab_session *s, unsigned long long tag, int sig)
{
	(void)s;
	fk.signo = sig;
	return input(AB_REQUEST_SIGNAL, tag);
}

/* ---- the codec ---- */

struct treq {
	struct ab_front_req fr;
	int n; /* its number, for the logs */
};

#define LOG 64

static struct {
	int refused[LOG], results[LOG], freed[LOG];
	enum ab_front_why why[LOG];
	char why_msg[LOG][1024];
	int n_refused, n_results, n_freed;
	int signals, signo, deads, steps;
	bool drain;	 /* signal: true (a drain) */
	bool dead_go_on; /* dead: true (go on without the sandbox) */
	int stop_after;	 /* go_on: false after this many steps (0: never) */
	int resignal_at; /* a second SIGTERM at this step (0: none) */
	int max_seen;	 /* what fds got as max */
	int fill;	 /* fds: how many entries to fill (the last an eventfd) */
	int ready_fd;	 /* that eventfd */
	bool last_ready; /* input: the last entry came readable */
	int input_n;	 /* input: the n it was given */
	char dead_msg[1024];
} tc;

static int t_fds(void *arg, struct pollfd *p, int max, int *wait_ms)
{
	(void)arg;
	tc.max_seen = max;
	*wait_ms = 10; /* never block: each step ends */
	for (int i = 0; i < tc.fill && i < max; i++)
		p[i] = (struct pollfd){.fd = i == tc.fill - 1 ? tc.ready_fd : -1, .events = POLLIN};
	return tc.fill < max ? tc.fill : max;
}

static void t_input(void *arg, struct pollfd *p, int n)
{
	(void)arg;
	tc.input_n = n;
	if (n > 0 && (p[n - 1].revents & POLLIN))
		tc.last_ready = true;
}

static bool t_go_on(void *arg)
{
	(void)arg;
	tc.steps++;
	if (tc.resignal_at && tc.steps == tc.resignal_at)
		raise(SIGTERM);
	return !tc.stop_after || tc.steps < tc.stop_after;
}

static bool t_signal(void *arg, int signo)
{
	(void)arg;
	tc.signals++;
	tc.signo = signo;
	return tc.drain;
}

static bool t_dead(void *arg, const struct ab_error *e)
{
	(void)arg;
	tc.deads++;
	snprintf(tc.dead_msg, sizeof(tc.dead_msg), "%s", e->msg);
	return tc.dead_go_on;
}

static void t_event(void *arg, struct ab_front_req *r, const struct ab_event *ev)
{
	(void)arg;
	if (ev->kind == AB_EVENT_RESULT)
		tc.results[tc.n_results++] = ((struct treq *)r)->n;
}

static void t_layer_reply(void *arg, struct ab_front_req *r, json_object *reply)
{
	(void)arg;
	(void)r;
	json_object_put(reply);
}

static void t_refused(void *arg, struct ab_front_req *r, enum ab_front_why why,
		      const struct ab_error *e)
{
	(void)arg;
	int i = tc.n_refused++;
	tc.refused[i] = ((struct treq *)r)->n;
	tc.why[i] = why;
	snprintf(tc.why_msg[i], sizeof(tc.why_msg[i]), "%s", e ? e->msg : "");
}

static void t_free(void *arg, struct ab_front_req *r)
{
	(void)arg;
	struct treq *t = (struct treq *)r;
	tc.freed[tc.n_freed++] = t->n;
	json_object_put(t->fr.key);
	free(t);
}

static struct ab_front_codec codec = {
	.fds = t_fds,
	.input = t_input,
	.go_on = t_go_on,
	.signal = t_signal,
	.dead = t_dead,
	.event = t_event,
	.layer_reply = t_layer_reply,
	.refused = t_refused,
	.free_req = t_free,
};

static struct ab_config cfg;
static struct ab_front f;

/* An engine over the fake session, max_concurrent commands at once. */
static void open_front(unsigned max_concurrent, const struct ab_front_limits *lim)
{
	cfg.max_concurrent = max_concurrent;
	fk.max_concurrent = max_concurrent;
	struct ab_front_limits none = {0};
	ab_front_init(&f, &cfg, &codec, NULL, lim ? lim : &none);
	struct ab_error err = {0};
	cr_assert_eq(ab_front_open(&f, &err), 0, "%s", err.msg);
}

static void close_front(void)
{
	ab_front_drop_all(&f);
	ab_front_close(&f);
	ab_front_free(&f);
}

/* Request n (an exec whose key is the JSON int n), into the engine. */
static struct treq *submit(int n, bool no_wait)
{
	struct treq *t = calloc(1, sizeof(*t));
	cr_assert_not_null(t);
	t->n = n;
	t->fr.q.kind = AB_REQUEST_EXEC;
	t->fr.key = json_object_new_int(n);
	t->fr.no_wait = no_wait;
	ab_front_submit(&f, &t->fr);
	return t;
}

static int admit(int n)
{
	json_object *key = json_object_new_int(n);
	int rc = ab_front_admit(&f, key);
	json_object_put(key);
	return rc;
}

static int times_freed(int n)
{
	int k = 0;
	for (int i = 0; i < tc.n_freed; i++)
		k += tc.freed[i] == n;
	return k;
}

static bool was_started(unsigned long long tag)
{
	for (size_t i = 0; i < fk.n_started; i++)
		if (fk.started[i] == tag)
			return true;
	return false;
}

TestSuite(front, .timeout = 20);

/* ---- admission ---- */

Test(front, a_duplicate_id_is_refused_while_its_request_is_in)
{
	open_front(1, &(struct ab_front_limits){.max_queue = 8});
	struct treq *a = submit(1, false);
	cr_assert_eq(admit(1), -EEXIST, "a running request's id");
	submit(2, false);
	cr_assert_eq(admit(2), -EEXIST, "a waiting request's id");
	cr_assert_eq(admit(3), 0);
	finish(a->fr.tag);
	tc.stop_after = 1;
	ab_front_run(&f, &(struct ab_error){0});
	cr_assert_eq(times_freed(1), 1);
	cr_assert_eq(admit(1), 0, "its id is free once it left");
	close_front();
}

Test(front, the_queue_bound_counts_the_waiting_requests)
{
	open_front(1, &(struct ab_front_limits){.max_queue = 2});
	submit(1, false); /* runs */
	submit(2, false);
	cr_assert_eq(admit(9), 0, "one waits, room for another");
	submit(3, false);
	cr_assert_eq(f.queued, 2);
	cr_assert_eq(admit(9), -ENOSPC);
	close_front();
}

Test(front, the_queue_bound_may_count_the_running_ones_too)
{
	open_front(1, &(struct ab_front_limits){.max_queue = 2, .queue_counts_running = true});
	submit(1, false); /* runs */
	cr_assert_eq(admit(9), 0);
	submit(2, false);
	cr_assert_eq(f.queued, 1, "one waits only");
	cr_assert_eq(admit(9), -ENOSPC, "one running and one waiting are two");
	close_front();
}

Test(front, no_bound_when_max_queue_is_0)
{
	open_front(1, NULL);
	for (int i = 1; i <= 40; i++)
		submit(i, false);
	cr_assert_eq(admit(99), 0);
	close_front();
}

/* ---- starts and cancellation ---- */

Test(front, requests_start_in_order_as_slots_free)
{
	open_front(2, NULL);
	struct treq *a = submit(1, false), *b = submit(2, false), *c = submit(3, false);
	cr_assert(was_started(a->fr.tag) && was_started(b->fr.tag));
	cr_assert_not(was_started(c->fr.tag), "max_concurrent is 2");
	cr_assert(a->fr.tag && b->fr.tag != a->fr.tag && c->fr.tag != b->fr.tag, "a tag each");
	finish(b->fr.tag);
	tc.stop_after = 1;
	ab_front_run(&f, &(struct ab_error){0});
	cr_assert_eq(tc.n_results, 1);
	cr_assert_eq(tc.results[0], 2);
	cr_assert(was_started(c->fr.tag), "started once a slot freed");
	close_front();
}

Test(front, a_waiting_request_cancelled_is_refused_once_and_freed)
{
	open_front(1, NULL);
	submit(1, false);
	struct treq *b = submit(2, false);
	cr_assert_eq(ab_front_cancel(&f, &b->fr), 0);
	cr_assert_eq(tc.n_refused, 1);
	cr_assert_eq(tc.refused[0], 2);
	cr_assert_eq(tc.why[0], AB_FRONT_CANCELLED);
	cr_assert_eq(times_freed(2), 1);
	cr_assert_eq(fk.n_cancelled, 0, "the session never had it");
	cr_assert_eq(f.n, 1);
	cr_assert_eq(f.queued, 0);
	close_front();
	cr_assert_eq(times_freed(2), 1, "not handed back again at the end");
}

Test(front, a_running_command_cancelled_is_stopped_and_its_result_comes)
{
	open_front(1, NULL);
	struct treq *a = submit(1, false);
	struct treq *b = submit(2, false);
	unsigned long long tag = a->fr.tag;
	cr_assert_eq(ab_front_cancel(&f, &a->fr), 1);
	cr_assert_eq(fk.n_cancelled, 1);
	cr_assert_eq(fk.cancelled[0], tag);
	cr_assert(a->fr.cancelled);
	cr_assert_eq(tc.n_refused, 0, "it ends with its result");
	cr_assert_eq(tc.n_freed, 0);
	finish(tag);
	tc.stop_after = 1;
	ab_front_run(&f, &(struct ab_error){0});
	cr_assert_eq(tc.n_results, 1);
	cr_assert_eq(times_freed(1), 1);
	cr_assert(was_started(b->fr.tag), "the next one starts in its slot");
	close_front();
}

Test(front, no_wait_is_refused_busy_rather_than_queued)
{
	open_front(1, NULL);
	submit(1, false);
	submit(2, true);
	cr_assert_eq(tc.n_refused, 1);
	cr_assert_eq(tc.refused[0], 2);
	cr_assert_eq(tc.why[0], AB_FRONT_START_FAILED);
	cr_assert(strstr(tc.why_msg[0], "1 commands are running"), "%s", tc.why_msg[0]);
	cr_assert_eq(f.n, 1);
	cr_assert_eq(f.queued, 0);
	close_front();
}

Test(front, a_start_the_session_refuses_is_handed_back)
{
	open_front(1, NULL);
	fk.start_fails = true;
	submit(1, false);
	cr_assert_eq(tc.n_refused, 1);
	cr_assert_eq(tc.why[0], AB_FRONT_START_FAILED);
	cr_assert_str_eq(tc.why_msg[0], "no such program");
	cr_assert_eq(f.n, 0);
	cr_assert_eq(f.queued, 0);
	close_front();
}

/* ---- the end ---- */

Test(front, drop_all_hands_each_request_back_once_in_order)
{
	open_front(1, NULL);
	submit(1, false);
	submit(2, false);
	submit(3, false);
	ab_front_drop_all(&f);
	cr_assert_eq(tc.n_refused, 3);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(tc.refused[i], i + 1);
		cr_assert_eq(tc.why[i], AB_FRONT_ENDED);
		cr_assert_eq(times_freed(i + 1), 1);
	}
	cr_assert_null(f.head);
	cr_assert_eq(f.n, 0);
	cr_assert_eq(f.queued, 0);
	ab_front_drop_all(&f);
	cr_assert_eq(tc.n_refused, 3, "nothing is handed back twice");
	cr_assert_eq(tc.n_freed, 3);
	close_front();
}

/* ---- the signals ---- */

Test(front, a_signal_ends_the_run_when_the_codec_says_so)
{
	open_front(1, NULL);
	raise(SIGTERM); /* blocked: it waits on the signalfd */
	cr_assert_eq(ab_front_run(&f, &(struct ab_error){0}), AB_FRONT_SIGNAL);
	cr_assert_eq(tc.signals, 1);
	cr_assert_eq(tc.signo, SIGTERM);
	cr_assert_not(f.draining);
	close_front();
}

Test(front, a_signal_without_a_callback_ends_the_run_and_stays_unread)
{
	codec.signal = NULL;
	open_front(1, NULL);
	raise(SIGHUP);
	cr_assert_eq(ab_front_run(&f, &(struct ab_error){0}), AB_FRONT_SIGNAL);
	struct signalfd_siginfo si;
	cr_assert_eq(read(f.sigfd, &si, sizeof(si)), (ssize_t)sizeof(si), "left for the codec");
	cr_assert_eq(si.ssi_signo, SIGHUP);
	close_front();
}

Test(front, a_drain_goes_on_until_the_codec_ends_it_and_polls_no_more_signals)
{
	tc.drain = true;
	tc.stop_after = 5;
	tc.resignal_at = 2; /* a second signal during the drain */
	open_front(1, NULL);
	struct treq *a = submit(1, false);
	raise(SIGTERM);
	finish(a->fr.tag); /* what runs finishes during the drain */
	cr_assert_eq(ab_front_run(&f, &(struct ab_error){0}), AB_FRONT_DONE);
	cr_assert(f.draining);
	cr_assert_eq(tc.steps, 5, "go_on decided the end");
	cr_assert_eq(tc.signals, 1, "the second signal is not polled");
	cr_assert_eq(tc.n_results, 1);
	close_front();
}

/* ---- the sandbox's death ---- */

Test(front, the_sandbox_dead_ends_the_run_when_the_codec_says_so)
{
	open_front(1, NULL);
	fk.die = true;
	kick();
	struct ab_error err = {0};
	cr_assert_eq(ab_front_run(&f, &err), AB_FRONT_DEAD);
	cr_assert_eq(tc.deads, 1);
	cr_assert_str_eq(err.msg, "its init died");
	cr_assert_not(f.gone);
	close_front();
}

Test(front, the_sandbox_dead_without_a_callback_ends_the_run)
{
	codec.dead = NULL;
	open_front(1, NULL);
	fk.die = true;
	kick();
	cr_assert_eq(ab_front_run(&f, &(struct ab_error){0}), AB_FRONT_DEAD);
	close_front();
}

Test(front, without_the_sandbox_every_request_is_refused_with_why)
{
	tc.dead_go_on = true;
	tc.stop_after = 3;
	open_front(1, NULL);
	submit(1, false); /* runs: its result never comes */
	submit(2, false); /* waits */
	fk.die = true;
	kick();
	cr_assert_eq(ab_front_run(&f, &(struct ab_error){0}), AB_FRONT_DONE);
	cr_assert_eq(tc.deads, 1);
	cr_assert_eq(fk.dispatches, 1, "the session's fd is polled no more");
	cr_assert(f.gone);
	cr_assert_str_eq(f.gone_why, "The sandbox has ended: its init died");
	cr_assert_eq(tc.n_refused, 1, "the waiting one");
	cr_assert_eq(tc.refused[0], 2);
	cr_assert_eq(tc.why[0], AB_FRONT_START_FAILED);
	cr_assert_str_eq(tc.why_msg[0], "The sandbox has ended: its init died");
	submit(3, false);
	cr_assert_eq(tc.n_refused, 2, "a new one too");
	cr_assert_str_eq(tc.why_msg[1], "The sandbox has ended: its init died");
	ab_front_drop_all(&f);
	cr_assert_eq(tc.n_refused, 3);
	cr_assert_eq(tc.refused[2], 1);
	cr_assert_eq(tc.why[2], AB_FRONT_ENDED, "the running one, at the end, once");
	close_front();
	cr_assert_eq(times_freed(1) + times_freed(2) + times_freed(3), 3);
}

Test(front, gone_refuses_with_its_words)
{
	open_front(2, NULL);
	ab_front_gone(&f, "The sandbox has ended: %s (%d)", "replaced", 7);
	cr_assert(f.gone);
	submit(1, false);
	submit(2, true);
	cr_assert_eq(tc.n_refused, 2);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(tc.why[i], AB_FRONT_START_FAILED);
		cr_assert_str_eq(tc.why_msg[i], "The sandbox has ended: replaced (7)");
	}
	cr_assert_eq(fk.n_started, 0, "nothing reached the session");
	close_front();
}

Test(front, replace_session_closes_the_old_and_opens_a_new_one)
{
	open_front(1, NULL);
	struct ab_error err = {0};
	cr_assert_eq(ab_front_replace_session(&f, &err), 0, "%s", err.msg);
	cr_assert_eq(fk.closes, 1);
	cr_assert_eq(fk.opens, 2);
	cr_assert_not_null(f.s);
	submit(1, false);
	cr_assert_eq(fk.n_started, 1, "the new session runs commands");
	close_front();
}

Test(front, replace_session_that_cannot_open_leaves_none)
{
	open_front(1, NULL);
	fk.open_fails = true;
	struct ab_error err = {0};
	cr_assert_eq(ab_front_replace_session(&f, &err), -1);
	cr_assert_str_eq(err.msg, "the sandbox could not be built");
	cr_assert_null(f.s);
	cr_assert_eq(fk.closes, 1);
	ab_front_gone(&f, "The sandbox has ended: %s", err.msg);
	submit(1, false);
	cr_assert_eq(tc.n_refused, 1);
	cr_assert_eq(fk.n_started, 0);
	close_front();
}

/* ---- the codec's fds ---- */

Test(front, the_codec_polls_13_fds_unless_its_limits_say)
{
	tc.stop_after = 1;
	open_front(1, NULL);
	ab_front_run(&f, &(struct ab_error){0});
	cr_assert_eq(tc.max_seen, 13);
	close_front();
}

Test(front, the_codec_polls_as_many_fds_as_max_fds)
{
	tc.stop_after = 1;
	tc.fill = 70;
	tc.ready_fd = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC); /* readable */
	open_front(1, &(struct ab_front_limits){.max_fds = 70});
	ab_front_run(&f, &(struct ab_error){0});
	cr_assert_eq(tc.max_seen, 70);
	cr_assert_eq(tc.input_n, 70);
	cr_assert(tc.last_ready, "the 70th fd is polled");
	cr_assert_geq(malloc_usable_size(f.p), (3 + 70) * sizeof(struct pollfd),
		      "the poll set has room for them");
	close_front();
	close(tc.ready_fd);
}

/* ---- a running command's input ---- */

Test(front, input_reaches_a_running_command_only)
{
	open_front(1, NULL);
	struct treq *a = submit(1, false), *b = submit(2, false);
	struct ab_error e = {0};
	struct ab_request in = {.kind = AB_REQUEST_STDIN, .data = "hi", .data_len = 2, .eof = true};
	cr_assert_eq(ab_front_input(&f, NULL, &in, &e), -ESRCH);
	cr_assert_eq(ab_front_input(&f, &b->fr, &in, &e), -EAGAIN, "it waits");
	cr_assert_eq(fk.input_calls, 0, "neither reached the session");
	fk.input_rc = 0; /* written as the command reads */
	cr_assert_eq(ab_front_input(&f, &a->fr, &in, &e), 0);
	cr_assert_eq(fk.input_tag, a->fr.tag);
	cr_assert_eq(fk.input_len, 2);
	cr_assert(fk.input_eof);
	fk.input_rc = -EPIPE;
	cr_assert_eq(ab_front_input(&f, &a->fr, &in, &e), -EPIPE);
	cr_assert_str_eq(e.msg, "the command's stdin is closed");
	fk.input_rc = 0;
	in = (struct ab_request){.kind = AB_REQUEST_RESIZE, .rows = 40, .cols = 100};
	cr_assert_eq(ab_front_input(&f, &a->fr, &in, &e), 1);
	cr_assert_eq(fk.input_kind, AB_REQUEST_RESIZE);
	cr_assert(fk.rows == 40 && fk.cols == 100);
	in = (struct ab_request){.kind = AB_REQUEST_SIGNAL, .signo = SIGINT};
	cr_assert_eq(ab_front_input(&f, &a->fr, &in, &e), 1);
	cr_assert_eq(fk.signo, SIGINT);
	fk.input_rc = -EINVAL;
	memset(&e, 0, sizeof(e));
	cr_assert_eq(ab_front_input(&f, &a->fr, &in, &e), -EINVAL);
	cr_assert_str_eq(e.msg, strerror(EINVAL), "a signal's failure says why");
	close_front();
}
