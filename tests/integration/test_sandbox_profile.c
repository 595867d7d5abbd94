/* Sandbox profiles through the real binary (agentbox run --profile): a
 * profile's limits, mounts and environment really apply, the command line
 * overrides it, a bad one stops everything, and each shipped profile runs
 * a command. agentbox serve --profile: tests/protocol/test_sandbox_profile.py. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static struct proc_result r;

static void setup(void)
{
	require_sandbox();
}

TestSuite(sandbox_profile, .init = setup, .fini = test_tmp_cleanup, .timeout = 120);

/* Write text to dir/name; returns the path (static storage). */
static const char *write_file(const char *dir, const char *name, const char *text)
{
	static char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "fopen %s", path);
	fputs(text, f);
	fclose(f);
	return path;
}

static json_object *limit(json_object *report, const char *name)
{
	return report_get(report_get(report, "limits"), name);
}

Test(sandbox_profile, the_profiles_limits_are_in_force)
{
	char *ws = test_tmpdir();
	char *conf = test_tmpdir();
	const char *p = write_file(conf, "p.json",
				   "{\"memory\": \"96M\", \"pids\": 33, \"timeout\": \"7s\", "
				   "\"seccomp\": \"strict\", \"tmpfs-size\": \"3M\"}");
	/* without a cgroup the profile's memory cannot hold: refused, as
	 * from the command line (--limits full) */
	if (geteuid() != 0) {
		run_in(ws, &r, NULL, "--profile", p, "--", "true", NULL);
		cr_assert(r.exit_code == 125 ? strstr(r.err, "--memory 96M (") != NULL
					     : r.exit_code == 0,
			  "exit %d, stderr: %s", r.exit_code, r.err);
	}
	/* the /tmp tmpfs is 3M: df from inside says so */
	json_object *j = run_with_report(ws,
					 (const char *[]){"--profile", p, "--limits", "best", "--",
							  "sh", "-c", "df -k /tmp", NULL},
					 &r);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_eq(json_object_get_int64(report_get(limit(j, "memory"), "value")), 96 << 20);
	cr_assert_eq(json_object_get_int64(report_get(limit(j, "pids"), "value")), 33);
	cr_assert_eq(json_object_get_int64(limit(j, "timeout_ms")), 7000);
	cr_assert_str_eq(json_object_get_string(limit(j, "seccomp")), "strict");
	if (geteuid() == 0)
		cr_assert_str_eq(json_object_get_string(report_get(limit(j, "memory"), "how")),
				 "cgroup");
	cr_assert_not_null(strstr(r.out, " 3072 "), "/tmp is not 3M: %s", r.out);
	json_object_put(j);
}

Test(sandbox_profile, a_timeout_from_the_profile_ends_the_command)
{
	char *ws = test_tmpdir();
	char *conf = test_tmpdir();
	const char *p = write_file(conf, "p.json", "{\"timeout\": \"1s\", \"kill-after\": \"1s\"}");
	run_in(ws, &r, NULL, "--profile", p, "--", "sleep", "30", NULL);
	cr_assert_eq(r.exit_code, 124, "stderr: %s", r.err);
}

Test(sandbox_profile, a_relative_ro_bind_is_the_profiles_neighbour_and_read_only)
{
	char *ws = test_tmpdir();
	char *conf = test_tmpdir();
	char data[4200];
	snprintf(data, sizeof(data), "%s/data", conf);
	cr_assert_eq(mkdir(data, 0755), 0);
	write_file(data, "f", "from the profile\n");
	const char *p = write_file(conf, "p.json", "{\"ro-bind\": [\"data:/data\"]}");
	/* started elsewhere: the path is relative to the profile, not the cwd */
	struct run_opts o = {.cwd = "/"};
	run_in(ws, &r, &o, "--profile", p, "--", "sh", "-c",
	       "cat /data/f; touch /data/new 2>/dev/null && echo WRITABLE; "
	       "rm -f /data/f 2>/dev/null; cat /data/f",
	       NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "from the profile\nfrom the profile\n");
	char new[4300];
	snprintf(new, sizeof(new), "%s/new", data);
	cr_assert_neq(access(new, F_OK), 0, "the sandbox wrote into the profile's ro-bind");
}

Test(sandbox_profile, the_command_line_overrides_and_adds)
{
	char *ws = test_tmpdir();
	char *conf = test_tmpdir();
	const char *p = write_file(conf, "p.json",
				   "{\"hostname\": \"from-profile\", \"env\": [\"A=profile\"], "
				   "\"timeout\": \"1s\"}");
	/* --timeout 60s lifts the profile's 1s; --env adds to its list */
	run_in(ws, &r, NULL, "--hostname", "from-cli", "--profile", p, "--timeout", "60s", "--env",
	       "B=cli", "--", "sh", "-c", "sleep 2; hostname; echo $A $B", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "from-cli\nprofile cli\n");
	/* without the command line's word, the profile's holds */
	run_in(ws, &r, NULL, "--profile", p, "--", "hostname", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "from-profile\n");
}

Test(sandbox_profile, a_bad_profile_stops_before_anything_runs)
{
	char *ws = test_tmpdir();
	char *conf = test_tmpdir();
	const char *bad[] = {
		"{\"memory\": \"12Q\"}",
		"{\"memry\": \"1G\"}",
		"{\"net\": true}",
		"[\"--net\"]",
		"{\"net\": \"none\", \"net\": \"host\"}",
		"{\"net\":",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *p = write_file(conf, "bad.json", bad[i]);
		run_in(ws, &r, NULL, "--profile", p, "--", "touch", "/workspace/ran", NULL);
		cr_assert_eq(r.exit_code, 125, "%s: exit %d", bad[i], r.exit_code);
		char want[4300];
		snprintf(want, sizeof(want), "agentbox: profile %s: ", p);
		cr_assert_eq(strncmp(r.err, want, strlen(want)), 0, "%s: stderr %s", bad[i], r.err);
		cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "not one line: %s",
			     r.err);
		cr_assert_str_eq(r.out, "");
	}
	char ran[4300];
	snprintf(ran, sizeof(ran), "%s/ran", ws);
	cr_assert_neq(access(ran, F_OK), 0, "the command ran despite a bad profile");
	run_in(ws, &r, NULL, "--profile", "no-such-profile", "--", "true", NULL);
	cr_assert_eq(r.exit_code, 125);
	cr_assert_not_null(strstr(r.err, "no profile named 'no-such-profile'"), "%s", r.err);
}

Test(sandbox_profile, every_shipped_profile_runs_a_command)
{
	static const struct {
		const char *name, *seccomp, *lang;
	} shipped[] = {
		{"agent", "default", "C.UTF-8"},
		{"offline-build", "default", "C.UTF-8"},
		{"untrusted", "strict", ""}, /* env-policy none */
	};
	char *ws = test_tmpdir();
	const char *env[] = {"LANG=C.UTF-8", NULL};
	for (size_t i = 0; i < sizeof(shipped) / sizeof(shipped[0]); i++) {
		char report[4200];
		snprintf(report, sizeof(report), "%s/.report.json", ws);
		const char *argv[16] = {AGENTBOX_BIN, "run",	       "--workspace", ws,
					"--profile",  shipped[i].name, "--report",    report};
		int n = 8;
		/* CI gives the unprivileged user a delegated cgroup subtree */
		const char *parent = getenv("AGENTBOX_TEST_DELEGATED_PARENT");
		if (parent && *parent) {
			argv[n++] = "--cgroup-parent";
			argv[n++] = parent;
		} else if (geteuid() != 0) {
			/* no cgroup: the profiles' memory and cpus cannot hold */
			argv[n++] = "--limits";
			argv[n++] = "best";
		}
		const char *cmd[] = {"--", "sh", "-c", "echo ok; echo \"lang=$LANG\"", NULL};
		for (size_t k = 0; cmd[k]; k++)
			argv[n++] = cmd[k];
		struct run_opts o = {.env = env};
		run_raw(argv, &r, &o);
		cr_assert_eq(r.exit_code, 0, "%s: exit %d, stderr %s", shipped[i].name, r.exit_code,
			     r.err);
		char want[100];
		snprintf(want, sizeof(want), "ok\nlang=%s\n", shipped[i].lang);
		cr_assert_str_eq(r.out, want, "%s", shipped[i].name);
		json_object *j = json_object_from_file(report);
		cr_assert_not_null(j);
		cr_assert_str_eq(json_object_get_string(limit(j, "seccomp")), shipped[i].seccomp,
				 "%s", shipped[i].name);
		json_object_put(j);
		unlink(report);
	}
}
