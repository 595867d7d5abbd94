/* Timeouts, captured output, rlimits, tmpfs sizes and the JSON report,
 * through the real binary. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static struct proc_result r;

static void setup(void)
{
	require_sandbox();
}

TestSuite(report, .init = setup, .fini = test_tmp_cleanup, .timeout = 120);

static json_object *run_report(const char *ws, const char *const *args)
{
	return run_with_report(ws, args, &r);
}

#define get report_get

static long long get_int(json_object *o, const char *key)
{
	return json_object_get_int64(get(o, key));
}

static const char *get_str(json_object *o, const char *key)
{
	json_object *v = get(o, key);
	return v ? json_object_get_string(v) : NULL;
}

Test(report, fields_of_a_plain_run)
{
	char *ws = test_tmpdir();
	const char *args[] = {"--capture",
			      "--",
			      "/bin/sh",
			      "-c",
			      "echo out; echo err >&2; printf '\\377\\n'; exit 3",
			      NULL};
	json_object *j = run_report(ws, args);
	cr_assert_eq(r.exit_code, 3, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "", "captured output must not pass through");
	cr_assert_eq(get_int(j, "exit_code"), 3);
	cr_assert_null(get(j, "signal"));
	cr_assert_not(json_object_get_boolean(get(j, "timed_out")));
	cr_assert_str_eq(get_str(j, "stdout"), "out\n\xEF\xBF\xBD\n");
	cr_assert_str_eq(get_str(j, "stderr"), "err\n");
	cr_assert_eq(get_int(j, "stdout_bytes"), 6);
	cr_assert_eq(get_int(j, "stderr_bytes"), 4);
	cr_assert_not(json_object_get_boolean(get(j, "truncated")));
	cr_assert_null(get(j, "error"));
	cr_assert_geq(get_int(j, "duration_ms"), 0);
	cr_assert_gt(get_int(j, "max_rss_kb"), 0);
	json_object *limits = get(j, "limits");
	cr_assert_eq(get_int(get(limits, "rlimits"), "core"), 0);
	cr_assert_str_eq(get_str(limits, "seccomp"), "default");
	json_object_put(j);
}

Test(report, signal_merge_and_base64)
{
	char *ws = test_tmpdir();
	const char *a1[] = {"--", "/bin/sh", "-c", "kill -KILL $$", NULL};
	json_object *j = run_report(ws, a1);
	cr_assert_eq(get_int(j, "exit_code"), 128 + SIGKILL);
	cr_assert_str_eq(get_str(j, "signal"), "SIGKILL");
	/* passed-through output is not counted */
	cr_assert_null(get(j, "stdout_bytes"));
	json_object_put(j);

	const char *a2[] = {"--capture", "--merge-output",
			    "--",	 "/bin/sh",
			    "-c",	 "echo one; echo two >&2; echo three",
			    NULL};
	j = run_report(ws, a2);
	cr_assert_str_eq(get_str(j, "output"), "one\ntwo\nthree\n");
	json_object_put(j);

	const char *a3[] = {"--capture", "--output-encoding", "base64", "--",
			    "printf",	 "\\001\\377",	      NULL};
	j = run_report(ws, a3);
	cr_assert_str_eq(get_str(j, "stdout"), "Af8=");
	cr_assert_str_eq(get_str(j, "encoding"), "base64");
	json_object_put(j);
}

Test(report, huge_output_keeps_head_and_tail_with_bounded_memory)
{
	char *ws = test_tmpdir();
	char report[4200];
	snprintf(report, sizeof(report), "%s/.report.json", ws);
	pid_t p = fork();
	if (p == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		execl(AGENTBOX_BIN, AGENTBOX_BIN, "run", "--workspace", ws, "--report", report,
		      "--capture", "--max-output", "64K", "--", "/bin/sh", "-c",
		      "echo HEAD-MARK; head -c 2G /dev/zero; echo; echo TAIL-MARK", (char *)NULL);
		_exit(99);
	}
	int st;
	struct rusage ru;
	cr_assert_eq(wait4(p, &st, 0, &ru), p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	/* agentbox itself (and anything it reaped) stayed small: 2 GiB went
	 * through a 64 KiB cap. AddressSanitizer's shadow memory and allocator
	 * alone take agentbox to ~26 MiB (3.5 MiB without), hence its bound. */
#ifdef AGENTBOX_SANITIZED
	const long bound_kib = 48 * 1024;
#else
	const long bound_kib = 16 * 1024;
#endif
	cr_assert_lt(ru.ru_maxrss, bound_kib, "max RSS %ld KiB", ru.ru_maxrss);
	json_object *j = json_object_from_file(report);
	cr_assert_not_null(j);
	const char *out = get_str(j, "stdout");
	size_t len = (size_t)json_object_get_string_len(get(j, "stdout"));
	cr_assert(json_object_get_boolean(get(j, "truncated")));
	cr_assert_eq(get_int(j, "stdout_bytes"), 10 + (2LL << 30) + 1 + 10);
	cr_assert(strncmp(out, "HEAD-MARK\n", 10) == 0);
	cr_assert(len > 10 && memcmp(out + len - 10, "TAIL-MARK\n", 10) == 0, "tail lost");
	char marker[80];
	snprintf(marker, sizeof(marker), "[... %lld bytes truncated ...]",
		 10 + (2LL << 30) + 1 + 10 - 65536);
	cr_assert(memmem(out, len, marker, strlen(marker)), "no exact marker %s", marker);
	json_object_put(j);
}

Test(report, timeout_gives_124_and_keeps_output)
{
	char *ws = test_tmpdir();
	const char *args[] = {
		"--timeout", "1s", "--capture", "--", "/bin/sh", "-c", "echo before; sleep 100",
		NULL};
	json_object *j = run_report(ws, args);
	cr_assert_eq(r.exit_code, 124);
	cr_assert_eq(get_int(j, "exit_code"), 124);
	cr_assert(json_object_get_boolean(get(j, "timed_out")));
	cr_assert_str_eq(get_str(j, "signal"), "SIGTERM");
	cr_assert_str_eq(get_str(j, "stdout"), "before\n");
	cr_assert_geq(get_int(j, "duration_ms"), 1000);
	cr_assert_lt(get_int(j, "duration_ms"), 30000);
	json_object_put(j);
}

Test(report, timeout_kills_what_ignores_sigterm_and_double_forks)
{
	char *ws = test_tmpdir();
	char marker[64], script[512];
	snprintf(marker, sizeof(marker), "sleep 3000.%d", getpid());
	snprintf(script, sizeof(script),
		 "trap '' TERM; (setsid sh -c 'trap \"\" TERM; %s' &) ; "
		 "sh -c 'trap \"\" TERM; %s' & %s",
		 marker, marker, marker);
	const char *args[] = {"--timeout", "500ms", "--kill-after", "500ms", "--",
			      "/bin/sh",   "-c",    script,	    NULL};
	json_object *j = run_report(ws, args);
	cr_assert_eq(r.exit_code, 124, "stderr: %s", r.err);
	cr_assert(json_object_get_boolean(get(j, "timed_out")));
	cr_assert_eq(count_procs_with(marker), 0, "a process outlived the timeout");
	json_object_put(j);
}

Test(report, max_timeout_clamps)
{
	char *ws = test_tmpdir();
	const char *args[] = {"--timeout", "1h", "--max-timeout", "500ms", "--kill-after",
			      "0",	   "--", "sleep",	  "100",   NULL};
	json_object *j = run_report(ws, args);
	cr_assert_eq(r.exit_code, 124);
	cr_assert_eq(get_int(get(j, "limits"), "timeout_ms"), 500);
	cr_assert_str_eq(get_str(j, "signal"), "SIGKILL");
	cr_assert(strstr(r.err, "clamped"), "%s", r.err);
	json_object_put(j);
}

Test(report, tmpfs_size_and_rlimits)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--tmpfs-size", "1M", "--rlimit", "nofile=64", "--", "/bin/sh", "-c",
	       "head -c 2M /dev/zero > /tmp/fill 2>/dev/null || echo full; "
	       "wc -c < /tmp/fill; ulimit -n; ulimit -c",
	       NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "full\n1048576\n64\n0\n");
	run_in(ws, &r, NULL, "--tmpfs-size", "1M", "--", "/bin/sh", "-c",
	       "head -c 2M /dev/zero > /tmp/fill", NULL);
	cr_assert(strstr(r.err, "No space left on device"), "%s", r.err);
}

Test(report, bad_limits_and_report_options)
{
	char *ws = test_tmpdir();
	const struct {
		const char *opt, *val, *needle;
	} cases[] = {
		{"--timeout", "soon", "--timeout"},
		{"--timeout", "5x", "--timeout"},
		{"--kill-after", "-1", "--kill-after"},
		{"--max-output", "1", "--max-output"},
		{"--max-output", "lots", "--max-output"},
		{"--tmpfs-size", "1T5", "--tmpfs-size"},
		{"--rlimit", "bogus=1", "bogus"},
		{"--rlimit", "nofile", "--rlimit"},
		{"--rlimit", "nofile=99999999999", "hard limit"},
		{"--report", "fd:999", "fd:999"},
		{"--report", "/nonexistent/dir/r.json", "/nonexistent/dir/r.json"},
		{"--output-encoding", "hex", "--output-encoding"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_in(ws, &r, NULL, cases[i].opt, cases[i].val, "--", "true", NULL);
		cr_assert_eq(r.exit_code, 125, "%s %s: %d %s", cases[i].opt, cases[i].val,
			     r.exit_code, r.err);
		cr_assert(strstr(r.err, cases[i].needle), "%s", r.err);
	}
	run_in(ws, &r, NULL, "--capture", "--", "true", NULL);
	cr_assert_eq(r.exit_code, 125);
	cr_assert(strstr(r.err, "--report"), "%s", r.err);
}

Test(report, a_failed_sandbox_writes_its_error)
{
	char *ws = test_tmpdir();
	const char *args[] = {"--cwd", "/nowhere", "--", "true", NULL};
	json_object *j = run_report(ws, args);
	cr_assert_eq(r.exit_code, 125);
	cr_assert_eq(get_int(j, "exit_code"), 125);
	json_object *e = get(j, "error");
	cr_assert_not_null(e);
	cr_assert(strstr(get_str(e, "message"), "/nowhere"));
	cr_assert_str_eq(get_str(e, "code"), "ENOENT");
	json_object_put(j);
}
