/* The session C API (ab_session_*), as a program embedding agentbox uses
 * it: one sandbox, commands started with tags, events from dispatch. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentbox/agentbox.h"
#include "harness.h"

static struct ab_config cfg;
static struct ab_session *s;
static char *ws;

/* A session on a fresh workspace, as `agentbox serve` would build it. */
static void open_session(const char *const *extra)
{
	require_sandbox();
	ws = test_tmpdir();
	/* as root, no --host-uid: the workspace is idmapped */
	char *argv[16] = {"serve", "--workspace", ws};
	int argc = 3;
	for (; extra && *extra; extra++)
		argv[argc++] = (char *)*extra;
	argv[argc] = NULL;
	struct ab_error err = {0};
	bool help = false;
	ab_config_init(&cfg);
	cr_assert_eq(ab_config_parse_serve(&cfg, argc, argv, &help, &err), 0, "%s", err.msg);
	cr_assert_eq(ab_session_open(&cfg, &s, &err), 0, "%s", err.msg);
}

static void close_session(void)
{
	if (s)
		ab_session_close(s);
	s = NULL;
	ab_config_free(&cfg);
}

static void setup(void)
{
	open_session(NULL);
}

static struct ab_result run(const char *cmd, const struct ab_exec *base)
{
	char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
	struct ab_exec x = base ? *base : (struct ab_exec){0};
	x.argv = argv;
	struct ab_result res = {0};
	struct ab_error err = {0};
	cr_assert_eq(ab_session_exec(s, &x, &res, &err), 0, "%s: %s", cmd, err.msg);
	return res;
}

static const char *out(const struct ab_result *r)
{
	return r->out.data ? r->out.data : "";
}

TestSuite(session, .init = setup, .fini = close_session, .timeout = 60);

Test(session, opens_with_an_id_and_limits)
{
	cr_assert(strncmp(ab_session_id(s), "ab-", 3) == 0, "%s", ab_session_id(s));
	const struct ab_result *lim = ab_session_limits(s);
	cr_assert_not_null(lim->pids.how);
	cr_assert_eq(lim->timeout_ms, 120000);
	cr_assert_eq(ab_session_running(s), 0);
}

Test(session, exec_reports_status_output_and_time)
{
	struct ab_result r = run("echo out; echo err >&2; exit 3", NULL);
	cr_assert_eq(r.exit_code, 3);
	cr_assert_str_eq(out(&r), "out\n");
	cr_assert_str_eq(r.err.data, "err\n");
	cr_assert_lt(r.duration_ms, 30000);
	ab_result_free(&r);
}

Test(session, files_persist_between_commands)
{
	struct ab_result r = run("echo kept > f", NULL);
	ab_result_free(&r);
	r = run("cat f", NULL);
	cr_assert_str_eq(out(&r), "kept\n");
	ab_result_free(&r);
	char path[4200];
	snprintf(path, sizeof(path), "%s/f", ws);
	cr_assert_eq(access(path, F_OK), 0, "the workspace file is on the host");
}

Test(session, stdin_env_and_cwd)
{
	char *env[] = {"GREETING=hello", NULL};
	struct ab_exec x = {.stdin_data = "in\n", .stdin_len = 3, .env = env, .cwd = "/tmp"};
	struct ab_result r = run("cat; echo $GREETING; pwd", &x);
	cr_assert_str_eq(out(&r), "in\nhello\n/tmp\n");
	ab_result_free(&r);
	x = (struct ab_exec){.cwd = "/workspace/missing"};
	char *argv[] = {"true", NULL};
	x.argv = argv;
	struct ab_result res = {0};
	struct ab_error err = {0};
	int rc = ab_session_exec(s, &x, &res, &err);
	cr_assert(rc < 0 || res.exit_code != 0, "a missing cwd is refused");
	ab_result_free(&res);
}

Test(session, timeout)
{
	struct ab_exec x = {.timeout_ms = 300};
	struct ab_result r = run("echo partial; sleep 30", &x);
	cr_assert(r.timed_out);
	cr_assert_eq(r.exit_code, AB_EXIT_TIMEOUT);
	cr_assert_str_eq(out(&r), "partial\n");
	ab_result_free(&r);
}

struct events {
	int results;
	unsigned long long tags[8];
	int exit_codes[8];
	bool cancelled[8];
	char streamed[256];
	bool output_after_result;
};

static void on_event(const struct ab_event *ev, void *arg)
{
	struct events *e = arg;
	if (ev->kind == AB_EVENT_OUTPUT) {
		e->output_after_result |= e->results > 0;
		strncat(e->streamed, ev->data, ev->len < 64 ? ev->len : 64);
		return;
	}
	cr_assert_null(ev->error, "%s", ev->error ? ev->error->msg : "");
	e->tags[e->results] = ev->tag;
	e->exit_codes[e->results] = ev->result->exit_code;
	e->cancelled[e->results] = ev->result->cancelled;
	e->results++;
}

static void dispatch_until(struct events *e, int n)
{
	struct ab_error err = {0};
	while (e->results < n)
		cr_assert_eq(ab_session_dispatch(s, 1000, on_event, e, &err), 0, "%s", err.msg);
}

Test(session, concurrent_commands_are_matched_by_tag)
{
	struct ab_error err = {0};
	char *slow[] = {"/bin/sh", "-c", "sleep 0.4; exit 1", NULL};
	char *mid[] = {"/bin/sh", "-c", "sleep 0.2; exit 2", NULL};
	char *fast[] = {"/bin/sh", "-c", "exit 3", NULL};
	cr_assert_eq(ab_session_start(s, &(struct ab_exec){.argv = slow}, 11, &err), 0);
	cr_assert_eq(ab_session_start(s, &(struct ab_exec){.argv = mid}, 22, &err), 0);
	cr_assert_eq(ab_session_start(s, &(struct ab_exec){.argv = fast}, 33, &err), 0);
	cr_assert_eq(ab_session_running(s), 3);
	cr_assert_eq(ab_session_start(s, &(struct ab_exec){.argv = fast}, 33, &err), -EEXIST,
		     "a tag in use is refused");
	struct events e = {0};
	dispatch_until(&e, 3);
	cr_assert_eq(e.tags[0], 33);
	cr_assert_eq(e.tags[1], 22);
	cr_assert_eq(e.tags[2], 11);
	cr_assert_eq(e.exit_codes[0], 3);
	cr_assert_eq(e.exit_codes[1], 2);
	cr_assert_eq(e.exit_codes[2], 1);
	cr_assert_eq(ab_session_running(s), 0);
}

Test(session, streamed_output_comes_before_the_result)
{
	struct ab_error err = {0};
	char *argv[] = {"/bin/sh", "-c", "echo one; sleep 0.1; echo two", NULL};
	cr_assert_eq(ab_session_start(s, &(struct ab_exec){.argv = argv, .stream = true}, 1, &err),
		     0);
	struct events e = {0};
	dispatch_until(&e, 1);
	cr_assert_str_eq(e.streamed, "one\ntwo\n");
	cr_assert_not(e.output_after_result);
}

Test(session, cancel)
{
	struct ab_error err = {0};
	char *argv[] = {"sleep", "30", NULL};
	cr_assert_eq(ab_session_start(s, &(struct ab_exec){.argv = argv}, 7, &err), 0);
	cr_assert_eq(ab_session_cancel(s, 8), -ESRCH);
	struct events e = {0};
	ab_session_dispatch(s, 200, on_event, &e, &err);
	cr_assert_eq(ab_session_cancel(s, 7), 0);
	dispatch_until(&e, 1);
	cr_assert(e.cancelled[0]);
	cr_assert_eq(e.exit_codes[0], 128 + 15);
}

Test(session, stats_count_commands)
{
	struct ab_session_stats st;
	cr_assert_eq(ab_session_stats(s, &st), 0);
	unsigned long long before = st.commands_run;
	struct ab_result r = run("true", NULL);
	ab_result_free(&r);
	cr_assert_eq(ab_session_stats(s, &st), 0);
	cr_assert_eq(st.commands_run, before + 1);
	cr_assert_eq(st.running, 0);
}

Test(session, close_with_a_running_command_leaves_nothing)
{
	struct ab_error err = {0};
	char marker[64];
	snprintf(marker, sizeof(marker), "agentbox-session-marker-%d", (int)getpid());
	char script[128];
	/* quoted apart: only the exec'd sleep, never bash before it, names it */
	snprintf(script, sizeof(script), "exec -a agentbox-session-''marker-%d sleep 30",
		 (int)getpid());
	char *argv[] = {"/bin/bash", "-c", script, NULL};
	cr_assert_eq(ab_session_start(s, &(struct ab_exec){.argv = argv}, 1, &err), 0);
	struct events e = {0};
	for (int i = 0; i < 50 && count_procs_with(marker) == 0; i++)
		ab_session_dispatch(s, 20, on_event, &e, &err);
	cr_assert_eq(count_procs_with(marker), 1, "the command runs");
	char cg[600] = "";
	const struct ab_result *lim = ab_session_limits(s);
	if (lim->cgroup_path[0] && strcmp(lim->cgroup_version, "v1") == 0)
		snprintf(cg, sizeof(cg), "/sys/fs/cgroup/pids%s", lim->cgroup_path);
	ab_session_close(s);
	s = NULL;
	cr_assert_eq(count_procs_with(marker), 0, "closing the session killed it");
	if (cg[0])
		cr_assert_neq(access(cg, F_OK), 0, "%s is gone", cg);
}

/* One lifecycle for run and serve: what `agentbox run` relies on is the
 * session's, and a session's commands get it too. */

Test(session, protected_paths_a_command_creates_are_reported_once)
{
	struct ab_result r = run("echo x > /workspace/.bashrc", NULL);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_not_null(r.protected_changed, "the change is reported");
	cr_assert_str_eq(r.protected_changed[0], ".bashrc");
	cr_assert_null(r.protected_changed[1]);
	ab_result_free(&r);
	r = run("true", NULL);
	cr_assert_null(r.protected_changed, "by the command that made it only");
	ab_result_free(&r);
}

Test(session, the_callers_fds_are_the_commands_own)
{
	int in[2], outp[2];
	cr_assert_eq(pipe(in), 0);
	cr_assert_eq(pipe(outp), 0);
	cr_assert_eq(write(in[1], "from the caller\n", 16), 16);
	close(in[1]);
	int fds[3] = {in[0], outp[1], -1};
	struct ab_result r = run("cat; echo err >&2", &(struct ab_exec){.fds = fds});
	close(in[0]);
	close(outp[1]);
	char buf[64] = "";
	cr_assert_eq(read(outp[0], buf, sizeof(buf) - 1), 16, "stdout went to the caller's fd");
	close(outp[0]);
	cr_assert_str_eq(buf, "from the caller\n");
	cr_assert_eq(r.exit_code, 0);
	cr_assert_null(r.out.data, "passed through, not captured");
	cr_assert_str_eq(r.err.data, "err\n", "the stream not passed is captured");
	ab_result_free(&r);
}

static void keep_result(const struct ab_event *ev, void *arg)
{
	if (ev->kind == AB_EVENT_RESULT && !ev->error) {
		*(struct ab_result *)arg = *ev->result;
		memset(ev->result, 0, sizeof(*ev->result));
	}
}

Test(session, a_signal_reaches_the_commands_group)
{
	char *argv[] = {"/bin/sh", "-c", "sleep 30 & wait", NULL};
	struct ab_error err = {0};
	cr_assert_eq(ab_session_start(s, &(struct ab_exec){.argv = argv}, 5, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(ab_session_signal(s, 5, SIGTERM), 0);
	cr_assert_eq(ab_session_signal(s, 6, SIGTERM), -ESRCH);
	struct ab_result r = {0};
	for (int i = 0; i < 500 && ab_session_running(s); i++)
		ab_session_dispatch(s, 20, keep_result, &r, &err);
	cr_assert_eq(ab_session_running(s), 0, "the command ended");
	cr_assert_eq(r.signal, SIGTERM);
	cr_assert_eq(r.exit_code, 128 + SIGTERM);
	cr_assert_not(r.timed_out);
	ab_result_free(&r);
}

/* Two sessions, each used from a thread of its own (agentbox.h allows
 * it): each command's output is its own, whatever the other reads at the
 * same time. */
struct thread_run {
	struct ab_session *s;
	char letter;
	size_t bad; /* bytes of the output that are not the letter */
	struct ab_result res;
	struct ab_error err;
	int r;
};

#define THREAD_OUTPUT (16u << 20)

static void *run_in_thread(void *arg)
{
	struct thread_run *t = arg;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "head -c %u /dev/zero | tr '\\0' %c", THREAD_OUTPUT, t->letter);
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	struct ab_exec x = {.argv = argv, .max_output = THREAD_OUTPUT};
	t->r = ab_session_exec(t->s, &x, &t->res, &t->err);
	for (size_t i = 0; t->r == 0 && i < t->res.out.len; i++)
		t->bad += t->res.out.data[i] != t->letter;
	return NULL;
}

Test(session, two_sessions_in_two_threads_keep_their_own_output)
{
	struct ab_session *other = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_session_open(&cfg, &other, &err), 0, "%s", err.msg);
	struct thread_run t[2] = {{.s = s, .letter = 'A'}, {.s = other, .letter = 'B'}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, run_in_thread, &t[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ab_session_close(other);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(t[i].r, 0, "%s", t[i].err.msg);
		cr_assert_eq(t[i].res.out.len, THREAD_OUTPUT);
		cr_assert_eq(t[i].bad, 0, "%zu bytes of %c's output are another's", t[i].bad,
			     t[i].letter);
		ab_result_free(&t[i].res);
	}
}
