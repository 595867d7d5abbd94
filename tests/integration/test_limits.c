/* cgroup limits through the real binary: memory (OOM reported from the
 * cgroup's events), pids, CPU quota, honest fallbacks, and no cgroup left
 * behind. Every test that could hurt the host if isolation broke first
 * proves, in the same command, that it runs inside a sandbox. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static struct proc_result r;

static void setup(void)
{
	require_sandbox();
}

TestSuite(limits, .init = setup, .fini = test_tmp_cleanup, .timeout = 120);

/* Refuse to go on unless pid 1 is agentbox's init and / is not the host's:
 * printed by the command before anything heavy, checked by the test. */
#define IN_SANDBOX                                                                                 \
	"[ \"$$\" -lt 10 ] && grep -q agentbox /proc/1/cmdline && [ ! -e /root ] || "              \
	"{ echo NOT-IN-SANDBOX; exit 99; }; "

static json_object *run_report(const char *ws, const char *const *args)
{
	json_object *j = run_with_report(ws, args, &r);
	cr_assert_null(strstr(r.out, "NOT-IN-SANDBOX"), "not in a sandbox: refusing");
	return j;
}

#define get report_get

static const char *how(json_object *j, const char *limit)
{
	return json_object_get_string(get(get(get(j, "limits"), limit), "how"));
}

/* Root has real cgroups on this machine, and so does a user given a
 * delegated subtree; otherwise the fallbacks must say what they are. */
static bool expect_cgroups(void)
{
	return geteuid() == 0 || getenv("AGENTBOX_TEST_DELEGATED_PARENT");
}

static void assert_cgroup_gone(json_object *j)
{
	json_object *p = get(get(j, "limits"), "cgroup_path");
	if (!p)
		return;
	const char *path = json_object_get_string(p);
	const char *roots[] = {"/sys/fs/cgroup",	 "/sys/fs/cgroup/memory",
			       "/sys/fs/cgroup/pids",	 "/sys/fs/cgroup/cpu",
			       "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/unified"};
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		char full[1024];
		struct stat st;
		snprintf(full, sizeof(full), "%s%s", roots[i], path);
		cr_assert(stat(full, &st) < 0, "cgroup %s left behind", full);
	}
}

Test(limits, memory_bomb_is_oom_killed_and_reported)
{
	char *ws = test_tmpdir();
	/* at most 512 MiB in 8 MiB steps: bounded even if no limit held;
	 * best: where no cgroup can be had, the per-process fallback */
	const char *args[] = {"--limits",
			      "best",
			      "--memory",
			      "64M",
			      "--",
			      "/bin/sh",
			      "-c",
			      IN_SANDBOX "exec python3 -c \""
					 "b = []\n"
					 "for i in range(64): b.append(bytearray(8 << 20))\n"
					 "print('survived')\"",
			      NULL};
	json_object *j = run_report(ws, args);
	if (expect_cgroups()) {
		cr_assert_str_eq(how(j, "memory"), "cgroup");
		cr_assert(json_object_get_boolean(get(j, "oom_killed")), "stderr: %s", r.err);
		cr_assert_eq(r.exit_code, 128 + SIGKILL, "exit %d", r.exit_code);
		cr_assert_null(strstr(r.out, "survived"));
		/* and said, not left for the user to guess from 137 */
		cr_assert(strstr(r.err, "agentbox: killed for running out of memory: the "
					"sandbox's limit is 64 MiB (--memory)\n"),
			  "%s", r.err);
	} else {
		/* the rlimit fallback: allocation fails, no OOM kill is claimed */
		cr_assert_str_eq(how(j, "memory"), "rlimit");
		cr_assert_not(json_object_get_boolean(get(j, "oom_killed")));
		cr_assert_neq(r.exit_code, 0);
		cr_assert(strstr(r.err, "MemoryError"), "%s", r.err);
		/* what best weakened, said once, and not called dropped */
		cr_assert(strstr(r.err, "agentbox: --limits best: --memory 64M only as a "
					"per-process RLIMIT_AS, not the sandbox's total: "),
			  "%s", r.err);
		cr_assert_null(strstr(r.err, "running without"), "%s", r.err);
	}
	assert_cgroup_gone(j);
	json_object_put(j);
}

Test(limits, fork_bomb_stops_at_the_pids_limit)
{
	char *ws = test_tmpdir();
	/* 200 sleeping children at most; count how many could start */
	const char *args[] = {"--pids",
			      "64",
			      "--",
			      "/bin/sh",
			      "-c",
			      IN_SANDBOX "exec python3 -c \""
					 "import os, signal\n"
					 "kids = []\n"
					 "for i in range(200):\n"
					 "    try: pid = os.fork()\n"
					 "    except OSError: break\n"
					 "    if pid == 0: signal.pause()\n"
					 "    kids.append(pid)\n"
					 "for k in kids: os.kill(k, 9)\n"
					 "print(len(kids))\"",
			      NULL};
	json_object *j = run_report(ws, args);
	/* a cgroup's, or RLIMIT_NPROC in the sandbox's user namespace where
	 * there is none: either way the init, sh-turned-python and its
	 * children share 64 */
	int forked = atoi(r.out);
	cr_assert(forked > 10 && forked <= 62, "%d children under --pids 64: %s", forked, r.err);
	if (expect_cgroups()) {
		cr_assert_str_eq(how(j, "pids"), "cgroup");
		/* the kernel's pids events count the refused fork, and run says so */
		cr_assert(strstr(r.err, "agentbox: the pids limit (--pids 64) refused "), "%s",
			  r.err);
	} else {
		cr_assert_str_eq(how(j, "pids"), "rlimit");
		cr_assert(strstr(json_object_get_string(get(get(get(j, "limits"), "pids"), "why")),
				 "RLIMIT_NPROC in the sandbox's user namespace"));
	}
	assert_cgroup_gone(j);
	json_object_put(j);
}

Test(limits, cpu_quota_holds_a_hog_to_half_a_core)
{
	char *ws = test_tmpdir();
	/* the command ends itself after 3 s, so every process is reaped and
	 * counted even where only rusage can count */
	const char *args[] = {"--limits", "best", "--cpus",  "0.5", "--",
			      "timeout",  "3",	  "/bin/sh", "-c",  "while :; do :; done",
			      NULL};
	json_object *j = run_report(ws, args);
	cr_assert_eq(r.exit_code, 124, "stderr: %s", r.err);
	long long cpu = json_object_get_int64(get(j, "cpu_user_ms")) +
			json_object_get_int64(get(j, "cpu_system_ms"));
	if (expect_cgroups()) {
		cr_assert_str_eq(how(j, "cpus"), "cgroup");
		/* the quota is the ceiling; below it, other load on a shared
		 * machine may take the hog's share, so only "it ran" is asked */
		cr_assert(cpu >= 300 && cpu <= 1800, "%lld ms of CPU in 3 s at 0.5 cores", cpu);
	} else {
		/* said so, and not silently held: what it got beyond that
		 * depends on the machine's other load (ctest runs tests side
		 * by side), so it is not asked */
		cr_assert_str_eq(how(j, "cpus"), "unavailable");
		cr_assert_geq(cpu, 300, "%lld ms of CPU in 3 s with no quota", cpu);
	}
	assert_cgroup_gone(j);
	json_object_put(j);
}

/* The launcher's child that is pid 1 of the sandbox (its NSpid ends in 1),
 * or -1: not merely its first child, which may be the exited helper that
 * made an idmapping's user namespace, a zombie until the run ends. */
static pid_t sandbox_init(pid_t pid)
{
	char path[64], list[256] = "";
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	bool got = fgets(list, sizeof(list), f) != NULL;
	fclose(f);
	char *save = NULL;
	for (char *t = got ? strtok_r(list, " \n", &save) : NULL; t;
	     t = strtok_r(NULL, " \n", &save)) {
		char line[256];
		snprintf(path, sizeof(path), "/proc/%s/status", t);
		FILE *st = fopen(path, "r");
		bool init = false;
		while (st && fgets(line, sizeof(line), st))
			if (strncmp(line, "NSpid:", 6) == 0) {
				char *last = strrchr(line, '\t');
				init = last && strchr(line, '\t') != last && atoi(last + 1) == 1;
			}
		if (st)
			fclose(st);
		if (init)
			return (pid_t)atoi(t);
	}
	return -1;
}

static bool wait_for_file(const char *path, int seconds)
{
	struct stat st;
	for (int i = 0; i < seconds * 20; i++) {
		if (stat(path, &st) == 0)
			return true;
		usleep(50000);
	}
	return false;
}

/* Many small processes in a small cgroup, and the OOM killer takes the
 * init: that is the sandbox killed for memory (137, oom_killed), not
 * agentbox's own error (125 "the sandbox's init was killed by signal 9"),
 * which it said before. The init is no larger than a sleep, so which one
 * the OOM killer picks is left to chance unless told: once the command
 * runs (its own score stays 0), root gives the init oom_score_adj 1000.
 * A user may not (the init is not dumpable, its /proc files are root's, and
 * the command may not lower its own score inside): then some process is
 * killed, and the result must still be an OOM; the init's case is asserted
 * as root, as CI runs it. Nothing here fails before "go" is made and the
 * run waited for, so a failure leaves no sandbox looping behind. */
Test(limits, an_init_the_oom_killer_takes_is_an_oom_result)
{
	if (!expect_cgroups())
		return; /* RLIMIT_AS per process: no OOM killer in a cgroup */
	char *ws = test_tmpdir();
	char report[4200], ready[4200], go[4200];
	snprintf(report, sizeof(report), "%s/.report.json", ws);
	snprintf(ready, sizeof(ready), "%s/ready", ws);
	snprintf(go, sizeof(go), "%s/go", ws);
	int out;
	pid_t pid =
		spawn_in(ws, &out, "--report", report, "--memory", "8M", "--pids", "1000",
			 "--timeout", "60s", "--", "/bin/sh", "-c",
			 IN_SANDBOX "touch ready; while [ ! -e go ]; do sleep 0.05; done; "
				    "i=0; while [ $i -lt 300 ]; do sleep 50 & i=$((i + 1)); done; "
				    "wait",
			 NULL);
	bool up = wait_for_file(ready, 30);
	pid_t init = sandbox_init(pid);
	char why[300] = "the command never started";
	bool aimed = false;
	if (up && init < 0)
		snprintf(why, sizeof(why), "no init found below agentbox (pid %d)", (int)pid);
	else if (up) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)init);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		aimed = fd >= 0 && write(fd, "1000", 4) == 4;
		snprintf(why, sizeof(why), "cannot write 1000 to %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	FILE *g = fopen(go, "w");
	if (g)
		fclose(g);
	char text[4096];
	ssize_t n = read(out, text, sizeof(text) - 1);
	text[n > 0 ? n : 0] = '\0';
	close(out);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(up, "the command never started");
	cr_assert_null(strstr(text, "NOT-IN-SANDBOX"), "not in a sandbox: refusing");
	cr_assert(aimed || geteuid() != 0, "root could not aim the OOM killer: %s", why);
	cr_assert(WIFEXITED(st));
	int code = WEXITSTATUS(st);
	json_object *j = json_object_from_file(report);
	cr_assert_not_null(j, "no report; exit %d", code);
	cr_assert_neq(code, 125, "agentbox's own error, not an OOM result");
	cr_assert(json_object_get_boolean(get(j, "oom_killed")), "exit %d", code);
	if (aimed)
		cr_assert_eq(code, 128 + SIGKILL, "exit %d with the init the OOM killer's aim",
			     code);
	assert_cgroup_gone(j);
	json_object_put(j);
}

/* --limits full, the default: a limit asked for that cannot hold as
 * asked refuses the run with one message naming each, why and the fix;
 * pids hold without a cgroup too (RLIMIT_NPROC), so they are not named.
 * --require-limits is its old name. */
Test(limits, full_refuses_what_cannot_hold_as_asked)
{
	char *ws = test_tmpdir();
	const char *modes[] = {NULL, "--require-limits"};
	for (size_t i = 0; i < 2; i++) {
		if (modes[i])
			run_in(ws, &r, NULL, modes[i], "--memory", "256M", "--pids", "64", "--cpus",
			       "0.5", "--", "true", NULL);
		else
			run_in(ws, &r, NULL, "--memory", "256M", "--pids", "64", "--cpus", "0.5",
			       "--", "true", NULL);
		if (expect_cgroups()) {
			cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
			cr_assert_str_eq(r.err, "");
			continue;
		}
		cr_assert_eq(r.exit_code, 125, "stderr: %s", r.err);
		/* one line, with the reason, which lives in the cgroup's status:
		 * the message is made before that is freed (caught under ASan) */
		cr_assert(strstr(r.err, "agentbox: --memory 256M (a per-process RLIMIT_AS at most, "
					"not the sandbox's total) and --cpus 0.5 (no cpu "
					"controller) cannot hold as asked: cannot create a cgroup"),
			  "%s", r.err);
		cr_assert(strstr(r.err, "docs/install.md") && strstr(r.err, "--limits best"), "%s",
			  r.err);
		cr_assert_null(strstr(r.err, "--pids"), "%s", r.err);
		cr_assert_eq(strchr(r.err, '\n') - r.err + 1, (long)strlen(r.err), "%s", r.err);
	}
}

/* --limits best runs, and says once what it dropped; --quiet silences it. */
Test(limits, best_runs_and_says_what_it_dropped)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--limits", "best", "--memory", "256M", "--cpus", "0.5", "--", "true",
	       NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	if (expect_cgroups())
		cr_assert_str_eq(r.err, "");
	else
		cr_assert(strstr(r.err,
				 "agentbox: --limits best: --memory 256M only as a per-process "
				 "RLIMIT_AS, not the sandbox's total; running without --cpus 0.5 "
				 "(no cpu controller): "),
			  "%s", r.err);
	run_in(ws, &r, NULL, "--quiet", "--limits", "best", "--memory", "256M", "--cpus", "0.5",
	       "--", "true", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.err, "");
	run_in(ws, &r, NULL, "--limits", "some", "--", "true", NULL);
	cr_assert_eq(r.exit_code, 125);
	cr_assert(strstr(r.err, "--limits: 'some' is not full or best"), "%s", r.err);
}

/* The default --pids 512 holds for every user, with a cgroup or without
 * (RLIMIT_NPROC in the sandbox's user namespace): a bounded probe of at
 * most 700 sleeping children stops at 512 with the init and the probe. */
Test(limits, the_default_pids_limit_holds_without_a_cgroup)
{
	char *ws = test_tmpdir();
	const char *args[] = {"--timeout",
			      "60s",
			      "--",
			      "/bin/sh",
			      "-c",
			      IN_SANDBOX "exec python3 -c \""
					 "import os, signal\n"
					 "kids = []\n"
					 "for i in range(700):\n"
					 "    try: pid = os.fork()\n"
					 "    except OSError: break\n"
					 "    if pid == 0: signal.pause()\n"
					 "    kids.append(pid)\n"
					 "for k in kids: os.kill(k, 9)\n"
					 "print(len(kids))\"",
			      NULL};
	json_object *j = run_report(ws, args);
	int forked = atoi(r.out);
	cr_assert(forked > 400 && forked <= 510, "%d children under the default --pids 512: %s",
		  forked, r.err);
	cr_assert_str_eq(how(j, "pids"), expect_cgroups() ? "cgroup" : "rlimit");
	assert_cgroup_gone(j);
	json_object_put(j);
}

/* A timeout is said on stderr (124 alone reads as the command's failure),
 * unless --quiet. */
Test(limits, a_timeout_is_said)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--timeout", "300ms", "--kill-after", "1s", "--", "sleep", "5", NULL);
	cr_assert_eq(r.exit_code, 124, "stderr: %s", r.err);
	cr_assert_str_eq(r.err, "agentbox: timed out after 300ms (--timeout): SIGTERM to every "
				"process of the command, SIGKILL 1s later to what was left "
				"(--kill-after)\n");
	run_in(ws, &r, NULL, "--quiet", "--timeout", "300ms", "--", "sleep", "5", NULL);
	cr_assert_eq(r.exit_code, 124, "stderr: %s", r.err);
	cr_assert_str_eq(r.err, "");
}

Test(limits, no_cgroup_outlives_a_killed_agentbox)
{
	if (!expect_cgroups())
		return; /* no cgroup is made: nothing that could be left */
	char *ws = test_tmpdir();
	char report[4200];
	snprintf(report, sizeof(report), "%s/.r.json", ws);
	int out;
	pid_t p = spawn_in(ws, &out, "--report", report, "--", "/bin/sh", "-c",
			   "echo started; sleep 100", NULL);
	char buf[64] = {0};
	cr_assert_gt(read(out, buf, sizeof(buf) - 1), 0);
	/* the cgroup is named after the launcher's pid: find it, as deep as a
	 * user's systemd scope puts it (7 levels), but not the leaf the
	 * launcher may have moved itself into, nor a scope made for it */
	char cmd[400];
	snprintf(cmd, sizeof(cmd),
		 "find /sys/fs/cgroup -maxdepth 10 -type d -name 'agentbox-ns*-%d-*' "
		 "! -name '*-launcher' ! -name '*.scope' 2>/dev/null | head -1",
		 p);
	FILE *f = popen(cmd, "r");
	char dir[512] = {0};
	cr_assert_not_null(fgets(dir, sizeof(dir), f), "no cgroup named after agentbox %d", p);
	pclose(f);
	chomp(dir);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	close(out);
	struct stat st;
	cr_assert_eq(stat(dir, &st), 0, "the cgroup should outlive SIGKILL until reaped");
	/* the next run reaps what the killed one left, and only that */
	run_in(ws, &r, NULL, "--", "true", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	time_t deadline = time(NULL) + 5;
	while (stat(dir, &st) == 0 && time(NULL) < deadline)
		usleep(10000);
	cr_assert_neq(stat(dir, &st), 0, "%s was not reaped", dir);
}

/* The inode of this process's pid namespace: the tag of a cgroup name. */
static unsigned long long own_pidns(void)
{
	struct stat st;
	cr_assert_eq(stat("/proc/self/ns/pid", &st), 0);
	return (unsigned long long)st.st_ino;
}

/* A v1 controller's cgroup has no cgroup.kill: the reaper kills what its
 * cgroup.procs lists, each through a pidfd after checking the process is
 * still in that cgroup. A stale cgroup (its owner's pid 999999 has no
 * such start time in our pid namespace, and nobody holds its lock) with a
 * live process in it: both are gone after a run. */
Test(limits, a_stale_v1_cgroup_is_emptied_and_removed)
{
	const char *parent = "/sys/fs/cgroup/pids/agentbox";
	struct stat st;
	if (geteuid() != 0 || stat("/sys/fs/cgroup/pids", &st) < 0)
		return; /* root's v1 pids hierarchy only: where the reaper works unaided */
	char dir[256], tmp[256];
	snprintf(dir, sizeof(dir), "%s/agentbox-ns%llu-999999-1-%d", parent, own_pidns(),
		 (int)getpid());
	/* made and filled under a name no reaper takes (a launcher of the
	 * other tests, running beside this one, would remove it empty), then
	 * renamed stale, as v1 allows within a parent */
	snprintf(tmp, sizeof(tmp), "%s/test-stale-%d", parent, (int)getpid());
	/* another run may remove the shared parent between the two mkdirs */
	for (int i = 0; i < 3 && mkdir(tmp, 0755) < 0 && errno == ENOENT; i++)
		mkdir(parent, 0755);
	cr_assert_eq(stat(tmp, &st), 0, "cannot make %s", tmp);
	pid_t p = fork();
	if (p == 0) {
		execlp("sleep", "sleep", "100", (char *)NULL);
		_exit(127);
	}
	char path[300], v[32];
	snprintf(path, sizeof(path), "%s/cgroup.procs", tmp);
	FILE *f = fopen(path, "w");
	snprintf(v, sizeof(v), "%d", (int)p);
	bool moved = f && fputs(v, f) >= 0 && fclose(f) == 0;
	if (!moved || rename(tmp, dir) < 0) {
		kill(p, SIGKILL);
		waitpid(p, NULL, 0);
		rmdir(tmp);
		cr_assert_fail("cannot move %d into %s, named %s", (int)p, tmp, dir);
	}
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "true", NULL);
	int status = 0;
	pid_t got = 0;
	for (int i = 0; i < 500 && (got = waitpid(p, &status, WNOHANG)) == 0; i++)
		usleep(10000);
	if (got == 0) {
		kill(p, SIGKILL);
		waitpid(p, NULL, 0);
	}
	for (int i = 0; i < 500 && stat(dir, &st) == 0; i++)
		usleep(10000);
	bool left = stat(dir, &st) == 0 && rmdir(dir) == 0;
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert(got == p && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		  "the process in the stale cgroup was not killed");
	cr_assert_not(left, "%s was not removed", dir);
}

/* A cgroup named after a launcher in another pid namespace (tag ns1: no
 * namespace has that inode; its pid is this test's, alive here, which a
 * reaper must not go by): kept while someone holds the lock on its
 * directory, as every live launcher does on its own, and reaped once
 * nobody does. */
Test(limits, another_pid_namespaces_cgroup_goes_only_when_unlocked)
{
	const char *parent = "/sys/fs/cgroup/pids/agentbox";
	struct stat st;
	if (geteuid() != 0 || stat("/sys/fs/cgroup/pids", &st) < 0)
		return; /* root's v1 pids hierarchy only */
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/agentbox-ns1-%d-1-0", parent, (int)getpid());
	for (int i = 0; i < 3 && mkdir(dir, 0755) < 0 && errno == ENOENT; i++)
		mkdir(parent, 0755);
	int lock = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
	cr_assert(lock >= 0 && fcntl(lock, F_OFD_SETLK, &fl) == 0, "cannot lock %s", dir);
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "true", NULL);
	bool kept = stat(dir, &st) == 0;
	close(lock);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	if (!kept)
		cr_assert_fail("%s was reaped while its lock was held", dir);
	run_in(ws, &r, NULL, "--", "true", NULL);
	for (int i = 0; i < 500 && stat(dir, &st) == 0; i++)
		usleep(10000);
	bool left = stat(dir, &st) == 0 && rmdir(dir) == 0;
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_not(left, "%s was not reaped once unlocked", dir);
}

/* A launcher in a pid namespace of its own (a container beside the host,
 * sharing its cgroupfs) whose sandbox runs while the host's launchers
 * start theirs: they cannot see its pid, and must leave its cgroup be
 * (issue 33: they took it for stale and removed it under it). */
Test(limits, a_launcher_in_another_pid_namespace_keeps_its_cgroup)
{
	struct stat st;
	if (geteuid() != 0 || stat("/sys/fs/cgroup/pids", &st) < 0)
		return; /* root's shared group, as in a container beside the host */
	char *ws = test_tmpdir();
	int out[2];
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	pid_t p = fork();
	cr_assert_geq(p, 0);
	if (p == 0) {
		dup2(out[1], 1);
		execlp("unshare", "unshare", "--pid", "--fork", "--mount-proc", AGENTBOX_BIN, "run",
		       "--workspace", ws, "--pids", "64", "--", "/bin/sh", "-c",
		       "echo started; sleep 2; echo done", (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	char buf[64] = {0};
	ssize_t n = read(out[0], buf, sizeof(buf) - 1);
	if (n <= 0 || !strstr(buf, "started")) {
		kill(p, SIGKILL);
		waitpid(p, NULL, 0);
		cr_assert_fail("the sandbox in its own pid namespace did not start");
	}
	/* the host's launchers start and reap meanwhile */
	for (int i = 0; i < 3; i++) {
		run_in(ws, &r, NULL, "--", "true", NULL);
		cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	}
	int status;
	for (size_t got = strlen(buf); got < sizeof(buf) - 1; got += (size_t)n)
		if ((n = read(out[0], buf + got, sizeof(buf) - 1 - got)) <= 0)
			break;
	close(out[0]);
	waitpid(p, &status, 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(buf, "done"),
		  "the sandbox in its own pid namespace was broken (status %#x, output %s)", status,
		  buf);
}

/* Root's sandboxes share the hierarchy's agentbox group: each run's own
 * cgroup goes at its end, the shared group stays for the next run (made
 * and removed per run, it cost each start a mkdir per hierarchy). */
Test(limits, roots_shared_group_stays_and_its_runs_cgroups_go)
{
	struct stat st;
	if (geteuid() != 0 || stat("/sys/fs/cgroup/pids", &st) < 0)
		return; /* root's v1 pids hierarchy only */
	char *ws = test_tmpdir();
	const char *args[] = {"--", "true", NULL};
	for (int i = 0; i < 2; i++) {
		json_object *j = run_report(ws, args);
		cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
		const char *path = json_object_get_string(get(get(j, "limits"), "cgroup_path"));
		cr_assert(path && strncmp(path, "/agentbox/agentbox-", 19) == 0, "%s", path);
		assert_cgroup_gone(j);
		json_object_put(j);
		cr_assert_eq(stat("/sys/fs/cgroup/pids/agentbox", &st), 0,
			     "the shared group went with run %d", i);
	}
}

Test(limits, a_cgroup_parent_that_does_not_work_is_an_error)
{
	char *ws = test_tmpdir();
	/* a file where the parent directory would have to be made */
	run_in(ws, &r, NULL, "--cgroup-parent", "/memory.limit_in_bytes/x", "--", "true", NULL);
	cr_assert_eq(r.exit_code, 125, "stderr: %s", r.err);
	cr_assert(strstr(r.err, "--cgroup-parent /memory.limit_in_bytes/x"), "%s", r.err);
}

Test(limits, bad_limit_values)
{
	char *ws = test_tmpdir();
	const struct {
		const char *opt, *val;
	} cases[] = {
		{"--memory", "lots"}, {"--memory", "10"},
		{"--cpus", "0"},      {"--cpus", "-1"},
		{"--cpus", "1.5x"},   {"--pids", "0"},
		{"--pids", "many"},   {"--cgroup-parent", "relative/path"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_in(ws, &r, NULL, cases[i].opt, cases[i].val, "--", "true", NULL);
		cr_assert_eq(r.exit_code, 125, "%s %s: %s", cases[i].opt, cases[i].val, r.err);
		cr_assert(strstr(r.err, cases[i].opt), "%s", r.err);
	}
}

Test(limits, the_sandbox_cgroup_is_the_root_of_its_cgroup_namespace)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--limits", "best", "--memory", "256M", "--", "/bin/sh", "-c",
	       "grep -E '^[0-9]+:(memory|pids)?:' /proc/self/cgroup | cut -d: -f3 | sort -u", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	/* nothing of the host's cgroup tree shows, with or without a cgroup */
	cr_assert_str_eq(r.out, "/\n");
}
