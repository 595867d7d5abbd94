/* agentbox run, through the real binary: what a user observes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "view/idmap.h"

static struct proc_result r;

static void setup(void)
{
	require_sandbox();
}

TestSuite(run, .init = setup, .fini = test_tmp_cleanup, .timeout = 60);

static char *read_host_file(const char *dir, const char *name)
{
	static char buf[4096];
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static bool host_exists(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* ---- processes and identity ---- */

Test(run, pid1_is_agentbox_init_and_command_pid_is_small)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c", "echo $$; tr '\\0' ' ' </proc/1/cmdline", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	int pid = atoi(r.out);
	cr_assert(pid >= 2 && pid <= 3, "command pid %d", pid);
	cr_assert(strstr(r.out, "agentbox run"), "pid 1 is not agentbox's init: %s", r.out);
}

Test(run, only_sandbox_processes_are_visible)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c", "ls /proc | grep -c '^[0-9]'", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	/* init, sh, ls, grep at most */
	cr_assert_leq(atoi(r.out), 4, "processes visible: %s", r.out);
}

Test(run, identity_inside_and_file_ownership_on_host)
{
	char *ws = test_tmpdir();
	char expect[64];
	snprintf(expect, sizeof(expect), "%u %u\n", (unsigned)test_host_uid(),
		 (unsigned)test_host_gid());
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "echo \"$(id -u) $(id -g)\"; echo data > /workspace/owned", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, expect);
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/owned", ws);
	cr_assert_eq(stat(path, &st), 0);
	/* the workspace's owner's, the test's own (root's, through the idmapping) */
	cr_assert_eq(st.st_uid, geteuid());
	cr_assert_eq(st.st_gid, getegid());
	cr_assert_str_eq(read_host_file(ws, "owned"), "data\n");
}

Test(run, uid_option_changes_inside_id_not_host_owner)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--uid", "0", "--gid", "0", "--", "/bin/sh", "-c",
	       "id -u; id -g; touch /workspace/f; grep CapEff /proc/self/status", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert(strncmp(r.out, "0\n0\n", 4) == 0, "%s", r.out);
	/* root inside the sandbox holds no capability */
	cr_assert(strstr(r.out, "CapEff:\t0000000000000000"), "%s", r.out);
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/f", ws);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_uid, geteuid());
}

Test(run, root_supplementary_groups_are_dropped)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "grep", "^Groups:", "/proc/self/status", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	if (geteuid() == 0)
		/* none of root's groups may follow the sandbox user */
		cr_assert(strcmp(r.out, "Groups:\t\n") == 0 || strcmp(r.out, "Groups:\t \n") == 0,
			  "%s", r.out);
	else {
		/* an unprivileged caller keeps its own groups (setgroups is denied
		 * to it); anything not mapped shows as the overflow gid */
		cr_assert(strncmp(r.out, "Groups:", 7) == 0, "%s", r.out);
		char *end;
		for (const char *p = r.out + 7; *p && *p != '\n'; p = end) {
			long g = strtol(p, &end, 10);
			if (end == p) {
				end++;
				continue;
			}
			cr_assert(g == (long)getegid() || g == 65534, "group %ld inside: %s", g,
				  r.out);
		}
	}
}

Test(run, no_capabilities_and_no_new_privs)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c", "grep -E '^(Cap|NoNewPrivs)' /proc/self/status",
	       NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	const char *sets[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
	for (size_t i = 0; i < 5; i++) {
		char want[64];
		snprintf(want, sizeof(want), "%s:\t0000000000000000", sets[i]);
		cr_assert(strstr(r.out, want), "%s not empty: %s", sets[i], r.out);
	}
	cr_assert(strstr(r.out, "NoNewPrivs:\t1"), "%s", r.out);
}

/* ---- the view ---- */

Test(run, workspace_is_cwd_and_writable)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c", "pwd; echo hello > new.txt", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "/workspace\n");
	cr_assert_str_eq(read_host_file(ws, "new.txt"), "hello\n");
}

Test(run, default_workspace_is_current_directory)
{
	char *ws = test_tmpdir();
	struct run_opts o = {.cwd = ws};
	run_in(NULL, &r, &o, "--", "/bin/sh", "-c", "echo x > /workspace/here", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert(host_exists(ws, "here"));
}

Test(run, skills_are_read_only)
{
	char *ws = test_tmpdir();
	char *skills = test_tmpdir();
	char skill[4096];
	snprintf(skill, sizeof(skill), "%s/skill.md", skills);
	FILE *f = fopen(skill, "w");
	cr_assert_not_null(f);
	fputs("how to\n", f);
	fclose(f);
	/* writable by anyone on the host: only the mount can refuse the write */
	chmod(skill, 0666);
	run_in(ws, &r, NULL, "--skills", skills, "--ro-bind", AGENTBOX_PROBE ":/probe", "--",
	       "/bin/sh", "-c",
	       "cat /skills/skill.md; /probe write /skills/new; /probe write /skills/skill.md; "
	       "rm -f /skills/skill.md 2>&1 | grep -c 'Read-only'",
	       NULL);
	cr_assert_str_eq(r.out, "how to\nEROFS\nEROFS\n1\n", "out: %s stderr: %s", r.out, r.err);
	cr_assert_not(host_exists(skills, "new"));
	cr_assert(host_exists(skills, "skill.md"));
}

Test(run, system_dirs_and_root_are_read_only)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--ro-bind", AGENTBOX_PROBE ":/probe", "--", "/bin/sh", "-c",
	       "for p in /usr/agentbox-x /etc/agentbox-x /newfile /bin/agentbox-x; do "
	       "/probe write $p; done",
	       NULL);
	cr_assert_str_eq(r.out, "EROFS\nEROFS\nEROFS\nEROFS\n", "stderr: %s", r.err);
}

Test(run, host_private_paths_are_absent)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "for p in /root /run /var /srv /mnt /opt /media /sys; do "
	       "test -e $p && echo present $p; done; ls /home; cat /etc/shadow >/dev/null 2>&1 "
	       "&& echo shadow readable; true",
	       NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "agent\n");
}

Test(run, callers_home_is_not_visible)
{
	char *ws = test_tmpdir();
	/* the caller's home as the password database has it, and $HOME: a
	 * systemd service has no HOME, and HOME may point elsewhere */
	const struct passwd *pw = getpwuid(getuid());
	cr_assert_not_null(pw);
	const char *homes[] = {pw->pw_dir, getenv("HOME")};
	for (size_t i = 0; i < sizeof(homes) / sizeof(homes[0]); i++) {
		const char *home = homes[i];
		if (!home || strcmp(home, "/") == 0 || strcmp(home, "/home/agent") == 0)
			continue; /* no home, or one the view has of its own */
		run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
		       "test -e \"$1\" && echo visible; echo done", "sh", home, NULL);
		cr_assert_str_eq(r.out, "done\n", "%s is visible", home);
	}
}

Test(run, tmp_and_home_are_writable_tmpfs_and_vanish)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "echo a > /tmp/t && echo b > $HOME/h && cat /tmp/t $HOME/h; echo $HOME", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "a\nb\n/home/agent\n");
	/* a caller with no git identity: nothing in $HOME (else its .gitconfig) */
	setenv("HOME", test_tmpdir(), 1);
	setenv("XDG_CONFIG_HOME", test_tmpdir(), 1);
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c", "ls -A /tmp $HOME", NULL);
	cr_assert_str_eq(r.out, "/home/agent:\n\n/tmp:\n");
}

Test(run, dev_is_minimal)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "ls /dev | tr '\\n' ' '; echo x > /dev/null && head -c 4 /dev/zero | wc -c", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "fd full null ptmx pts random shm stderr stdin stdout tty urandom "
				"zero 4\n");
}

Test(run, extra_binds_and_tmpfs)
{
	char *ws = test_tmpdir();
	char *data = test_tmpdir();
	char *rw = test_tmpdir();
	char file[4096];
	snprintf(file, sizeof(file), "%s/input", data);
	FILE *f = fopen(file, "w");
	fputs("ro-data\n", f);
	fclose(f);
	chmod(file, 0666);
	char ro_arg[4200], rw_arg[4200];
	snprintf(ro_arg, sizeof(ro_arg), "%s:/data/input", file);
	snprintf(rw_arg, sizeof(rw_arg), "%s:/data/rw", rw);
	run_in(ws, &r, NULL, "--ro-bind", ro_arg, "--bind", rw_arg, "--tmpfs", "/scratch",
	       "--ro-bind", AGENTBOX_PROBE ":/probe", "--", "/bin/sh", "-c",
	       "cat /data/input; /probe write /data/input; echo out > /data/rw/o; "
	       "echo s > /scratch/s && cat /scratch/s",
	       NULL);
	cr_assert_str_eq(r.out, "ro-data\nEROFS\ns\n", "out: %s stderr: %s", r.out, r.err);
	cr_assert_str_eq(read_host_file(rw, "o"), "out\n");
}

Test(run, ro_bind_without_dst_appears_at_its_host_path)
{
	char *ws = test_tmpdir();
	char *data = test_tmpdir();
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "test -d %s && echo there", data);
	run_in(ws, &r, NULL, "--ro-bind", data, "--", "/bin/sh", "-c", cmd, NULL);
	cr_assert_str_eq(r.out, "there\n", "stderr: %s", r.err);
}

Test(run, cwd_option)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--cwd", "/tmp", "--", "pwd", NULL);
	cr_assert_str_eq(r.out, "/tmp\n", "stderr: %s", r.err);
	run_in(ws, &r, NULL, "--cwd", "/nonexistent", "--", "pwd", NULL);
	cr_assert_eq(r.exit_code, 125);
	cr_assert(strstr(r.err, "--cwd") && strstr(r.err, "/nonexistent"), "%s", r.err);
}

Test(run, hostname)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "cat", "/proc/sys/kernel/hostname", NULL);
	cr_assert_str_eq(r.out, "agentbox\n", "stderr: %s", r.err);
	run_in(ws, &r, NULL, "--hostname", "box-7", "--", "cat", "/proc/sys/kernel/hostname", NULL);
	cr_assert_str_eq(r.out, "box-7\n", "stderr: %s", r.err);
}

/* ---- network ---- */

Test(run, network_none_has_only_loopback_and_it_is_up)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--ro-bind", AGENTBOX_PROBE ":/probe", "--", "/bin/sh", "-c",
	       "/probe ifaces; /probe loopback", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s out: %s", r.err, r.out);
	cr_assert_str_eq(r.out, "lo\nok\n");
}

Test(run, network_host_shares_interfaces_and_says_so)
{
	char *ws = test_tmpdir();
	char host_ifaces[4096];
	FILE *p = popen(AGENTBOX_PROBE " ifaces", "r");
	cr_assert_not_null(p);
	cr_assert_not_null(fgets(host_ifaces, sizeof(host_ifaces), p));
	pclose(p);
	run_in(ws, &r, NULL, "--net", "host", "--ro-bind", AGENTBOX_PROBE ":/probe", "--", "/probe",
	       "ifaces", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, host_ifaces);
	cr_assert(strstr(r.err, "shares the host's network"), "%s", r.err);
}

/* ---- exit status ---- */

Test(run, exit_status_table)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c", "exit 3", NULL);
	cr_assert_eq(r.exit_code, 3);
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c", "kill -TERM $$", NULL);
	cr_assert_eq(r.exit_code, 128 + SIGTERM);
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c", "kill -KILL $$", NULL);
	cr_assert_eq(r.exit_code, 128 + SIGKILL);
	run_in(ws, &r, NULL, "--", "no-such-command-agentbox", NULL);
	cr_assert_eq(r.exit_code, 127);
	cr_assert(strstr(r.err, "no-such-command-agentbox"), "%s", r.err);
	char path[4096];
	snprintf(path, sizeof(path), "%s/script", ws);
	FILE *f = fopen(path, "w");
	fputs("#!/bin/sh\necho hi\n", f);
	fclose(f);
	chmod(path, 0644);
	run_in(ws, &r, NULL, "--", "/workspace/script", NULL);
	cr_assert_eq(r.exit_code, 126, "%s", r.err);
	run_in(ws, &r, NULL, "--", "/workspace", NULL);
	cr_assert_eq(r.exit_code, 126, "%s", r.err);
}

Test(run, shell_string_and_stdin_pass_through)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "-c", "echo $((40 + 2))", NULL);
	cr_assert_str_eq(r.out, "42\n", "stderr: %s", r.err);
	struct run_opts o = {.stdin_data = "from stdin\n"};
	run_in(ws, &r, &o, "--", "cat", NULL);
	cr_assert_str_eq(r.out, "from stdin\n", "stderr: %s", r.err);
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c", "echo to-stderr >&2", NULL);
	cr_assert_str_eq(r.err, "to-stderr\n");
}

Test(run, arguments_after_the_command_are_not_options)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "echo", "--workspace", "/", "--net", "host", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "--workspace / --net host\n");
}

/* ---- environment ---- */

Test(run, environment_policy)
{
	char *ws = test_tmpdir();
	const char *env[] = {"FOO_API_KEY=sekrit", "PLAIN_VAR=plain", "LC_TIME=C", NULL};
	struct run_opts o = {.env = env};
	run_in(ws, &r, &o, "--", "env", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_null(strstr(r.out, "FOO_API_KEY"), "%s", r.out);
	cr_assert_null(strstr(r.out, "PLAIN_VAR"), "%s", r.out);
	cr_assert(strstr(r.out, "LC_TIME=C\n"), "%s", r.out);
	cr_assert(strstr(r.out, "HOME=/home/agent\n"), "%s", r.out);
	cr_assert(strstr(r.out, "PATH=/usr/local/bin:/usr/bin:/bin:"), "%s", r.out);

	run_in(ws, &r, &o, "--pass-env", "FOO_API_KEY", "--env", "SET_ME=1", "--", "env", NULL);
	cr_assert(strstr(r.out, "FOO_API_KEY=sekrit\n"), "%s", r.out);
	cr_assert(strstr(r.out, "SET_ME=1\n"), "%s", r.out);

	run_in(ws, &r, &o, "--env-policy", "all", "--", "env", NULL);
	cr_assert(strstr(r.out, "PLAIN_VAR=plain\n"), "%s", r.out);
	cr_assert_null(strstr(r.out, "FOO_API_KEY"), "%s", r.out);

	run_in(ws, &r, &o, "--env-policy", "none", "--", "env", NULL);
	cr_assert_null(strstr(r.out, "LC_TIME"), "%s", r.out);
	cr_assert(strstr(r.out, "HOME=/home/agent\n"), "%s", r.out);
}

/* ---- process hygiene ---- */

Test(run, fds_above_two_are_closed)
{
	char *ws = test_tmpdir();
	struct run_opts o = {.leak_fd = 7};
	run_in(ws, &r, &o, "--ro-bind", AGENTBOX_PROBE ":/probe", "--", "/probe", "fds", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "0 1 2\n");
}

Test(run, no_controlling_terminal)
{
	char *ws = test_tmpdir();
	struct run_opts o = {.with_pty = true};
	run_in(ws, &r, &o, "--ro-bind", AGENTBOX_PROBE ":/probe", "--", "/probe", "tty", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "ctty=none session_leader=yes\n");
}

static void wait_for_line(int fd, const char *want)
{
	char buf[256] = {0};
	size_t len = 0;
	time_t deadline = time(NULL) + 20;
	while (!strstr(buf, want) && time(NULL) < deadline && len < sizeof(buf) - 1) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		cr_assert_gt(n, 0, "agentbox ended before printing '%s'", want);
		len += (size_t)n;
	}
	cr_assert(strstr(buf, want), "never saw '%s'", want);
}

Test(run, sigkill_of_agentbox_leaves_no_process)
{
	char *ws = test_tmpdir();
	char marker[64], script[256];
	/* a unique sleep length marks this test's processes on the host */
	snprintf(marker, sizeof(marker), "sleep 1000.%d", getpid());
	snprintf(script, sizeof(script), "setsid %s & %s & echo started; wait", marker, marker);
	int out;
	pid_t p = spawn_in(ws, &out, "--", "/bin/sh", "-c", script, NULL);
	wait_for_line(out, "started");
	time_t deadline = time(NULL) + 10;
	while (count_procs_with(marker) < 2 + 2 && time(NULL) < deadline)
		usleep(10000);
	/* the launcher, the init (same command line) and two sleeps */
	cr_assert_geq(count_procs_with(marker), 4);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	close(out);
	deadline = time(NULL) + 10;
	while (count_procs_with(marker) > 0 && time(NULL) < deadline)
		usleep(10000);
	cr_assert_eq(count_procs_with(marker), 0, "processes outlived agentbox");
}

Test(run, signals_are_forwarded_to_the_command)
{
	char *ws = test_tmpdir();
	int out;
	pid_t p = spawn_in(ws, &out, "--", "/bin/sh", "-c",
			   "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done", NULL);
	wait_for_line(out, "ready");
	kill(p, SIGTERM);
	int st;
	waitpid(p, &st, 0);
	close(out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 42, "status %#x", st);
}

Test(run, command_processes_end_with_the_command)
{
	char *ws = test_tmpdir();
	char marker[64], script[256];
	snprintf(marker, sizeof(marker), "sleep 2000.%d", getpid());
	snprintf(script, sizeof(script), "setsid %s >/dev/null 2>&1 & exit 0", marker);
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c", script, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_eq(count_procs_with(marker), 0, "a background process outlived the run");
}

/* ---- bad input ---- */

static void expect_bad(const char *const *argv, const char *needle)
{
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 125, "%s: exit %d, stderr: %s", needle, r.exit_code, r.err);
	cr_assert(strstr(r.err, needle), "message does not name '%s': %s", needle, r.err);
	cr_assert_eq(count_lines(r.err), 1, "not one line: %s", r.err);
	cr_assert(strncmp(r.err, "agentbox: ", 10) == 0, "%s", r.err);
	cr_assert_str_eq(r.out, "");
}

Test(run, bad_input_is_refused_with_one_line_and_nothing_created)
{
	char *ws = test_tmpdir();
	char file[4096], link[4096], missing[4096];
	snprintf(file, sizeof(file), "%s/file", ws);
	snprintf(link, sizeof(link), "%s/link", ws);
	snprintf(missing, sizeof(missing), "%s/missing", ws);
	close(open(file, O_CREAT | O_WRONLY, 0644));
	cr_assert_eq(symlink(ws, link), 0);
	const char *B = AGENTBOX_BIN;
	const struct {
		const char *argv[12];
		const char *needle;
	} cases[] = {
		{{B, "run", "--bogus", "--", "true"}, "--bogus"},
		{{B, "run", "--workspace"}, "--workspace"},
		{{B, "run", "--workspace", missing, "--", "true"}, missing},
		{{B, "run", "--workspace", file, "--", "true"}, "not a directory"},
		{{B, "run", "--workspace", link, "--", "true"}, "symbolic link"},
		{{B, "run", "--workspace", ws, "--skills", missing, "--", "true"}, "--skills"},
		{{B, "run", "--workspace", ws, "--ro-bind", "/etc:relative", "--", "true"},
		 "'relative' is not an absolute path"},
		{{B, "run", "--workspace", ws, "--ro-bind", "/etc:/proc/x", "--", "true"}, "/proc"},
		{{B, "run", "--workspace", ws, "--bind", "/etc:/workspace", "--", "true"},
		 "collides"},
		{{B, "run", "--workspace", ws, "--tmpfs", "/dev", "--", "true"}, "collides"},
		{{B, "run", "--workspace", ws, "--tmpfs", "/", "--", "true"}, "--tmpfs"},
		{{B, "run", "--workspace", ws, "--ro-bind", missing, "--", "true"}, missing},
		{{B, "run", "--workspace", ws, "--bind", "/etc:/a/../b", "--", "true"}, ".."},
		{{B, "run", "--workspace", ws, "--uid", "-5", "--", "true"}, "--uid"},
		{{B, "run", "--workspace", ws, "--uid", "4294967295", "--", "true"}, "--uid"},
		{{B, "run", "--workspace", ws, "--net", "bridge", "--", "true"}, "--net"},
		{{B, "run", "--workspace", ws, "--env-policy", "most", "--", "true"},
		 "--env-policy"},
		{{B, "run", "--workspace", ws, "--env", "NOVALUE", "--", "true"}, "--env"},
		{{B, "run", "--workspace", ws, "--hostname", "bad name", "--", "true"},
		 "--hostname"},
		{{B, "run", "--workspace", ws}, "no command"},
		{{B, "run", "--workspace", ws, "-c", "true", "extra"}, "-c"},
		{{B, "frobnicate"}, "frobnicate"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_bad(cases[i].argv, cases[i].needle);
	/* nothing was created in the workspace by any of them */
	struct stat st;
	cr_assert_eq(lstat(missing, &st), -1);
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "ls -A %s | tr '\\n' ' '", ws);
	FILE *p = popen(cmd, "r");
	char listing[256] = {0};
	cr_assert_not_null(fgets(listing, sizeof(listing), p));
	pclose(p);
	cr_assert_str_eq(listing, "file link ");
}

Test(run, host_root_is_never_mapped)
{
	char *ws = test_tmpdir();
	if (geteuid() == 0) {
		/* a root-owned workspace runs as agentbox's own unprivileged
		 * user, whose single mapping is not host root */
		cr_assert_eq(chown(ws, 0, 0), 0);
		const char *a1[] = {AGENTBOX_BIN,  "run",
				    "--workspace", ws,
				    "--",	   "/bin/sh",
				    "-c",	   "cat /proc/self/uid_map /proc/self/gid_map",
				    NULL};
		run_raw(a1, &r, NULL);
		cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
		char want[128];
		snprintf(want, sizeof(want), "%10u %10u %10u\n%10u %10u %10u\n", AB_SANDBOX_HOST_ID,
			 AB_SANDBOX_HOST_ID, 1, AB_SANDBOX_HOST_ID, AB_SANDBOX_HOST_ID, 1);
		cr_assert_str_eq(r.out, want);
		const char *a2[] = {AGENTBOX_BIN, "run", "--workspace", ws,  "--host-uid",
				    "0",	  "--",	 "true",	NULL};
		expect_bad(a2, "never maps host root");
		/* with an unprivileged host uid it runs, as that uid */
		const char *a3[] = {
			AGENTBOX_BIN, "run", "--workspace", ws,	  "--host-uid",
			"4242",	      "--",  "/bin/sh",	    "-c", "cat /proc/self/uid_map",
			NULL};
		run_raw(a3, &r, NULL);
		cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
		cr_assert(strstr(r.out, "4242") && strstr(r.out, "1\n"), "%s", r.out);
	} else {
		const char *a1[] = {AGENTBOX_BIN, "run", "--workspace", ws,  "--host-uid",
				    "0",	  "--",	 "true",	NULL};
		expect_bad(a1, "needs root");
	}
}

Test(run, help_and_version)
{
	const char *h[] = {AGENTBOX_BIN, "--help", NULL};
	run_raw(h, &r, NULL);
	cr_assert_eq(r.exit_code, 0);
	cr_assert(strstr(r.out, "agentbox run --help"));
	const char *rh[] = {AGENTBOX_BIN, "run", "--help", NULL};
	run_raw(rh, &r, NULL);
	cr_assert_eq(r.exit_code, 0);
	cr_assert(strstr(r.out, "--workspace DIR"));
	const char *v[] = {AGENTBOX_BIN, "--version", NULL};
	run_raw(v, &r, NULL);
	cr_assert_eq(r.exit_code, 0);
	cr_assert(strncmp(r.out, "agentbox ", 9) == 0, "%s", r.out);
	const char *none[] = {AGENTBOX_BIN, NULL};
	run_raw(none, &r, NULL);
	cr_assert_eq(r.exit_code, 125);
}

/* The workspace guard: /, a top-level system directory and the caller's
 * home (or an ancestor of it) are refused as workspaces, the current
 * directory as named; a named one runs with --allow-broad-workspace; a
 * project directory inside the home runs as the default. */
Test(run, a_broad_workspace_is_refused_unless_named_and_allowed)
{
	char *home = test_tmpdir();
	char project[4200], env_home[4300];
	snprintf(project, sizeof(project), "%s/project", home);
	cr_assert_eq(mkdir(project, 0777), 0);
	cr_assert_eq(chmod(project, 0777), 0);
	snprintf(env_home, sizeof(env_home), "HOME=%s", home);
	const char *env[] = {env_home, NULL};
	const char *cur[] = {AGENTBOX_BIN, "run", "--", "true", NULL};
	const struct {
		const char *cwd, *words;
	} refused[] = {
		{"/", "the current directory, /, which is the host's root directory"},
		{"/etc", "the current directory, /etc, which is a top-level system directory"},
		{home, "which is your home directory"},
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		struct run_opts o = {.env = env, .cwd = refused[i].cwd};
		run_raw(cur, &r, &o);
		cr_assert_eq(r.exit_code, 125, "%s: %s", refused[i].cwd, r.err);
		cr_assert(strstr(r.err, refused[i].words) && strstr(r.err, "--workspace DIR"), "%s",
			  r.err);
	}
	/* a system directory's real path (/bin's is /usr/bin with a merged
	 * /usr), which only the real path of /bin tells apart */
	char bin[PATH_MAX];
	if (realpath("/bin", bin) && strcmp(bin, "/bin") != 0) {
		struct run_opts b = {.env = env, .cwd = bin};
		run_raw(cur, &r, &b);
		cr_assert_eq(r.exit_code, 125, "%s: %s", bin, r.err);
		cr_assert(strstr(r.err, "which is a top-level system directory"), "%s", r.err);
	}
	struct run_opts o = {.env = env, .cwd = project};
	run_raw(cur, &r, &o);
	cr_assert_eq(r.exit_code, 0, "a project directory: %s", r.err);
	/* named: refused with the override's name, which then lets it run */
	const char *named[] = {AGENTBOX_BIN, "run", "--workspace", "/usr", "--", "true", NULL};
	run_raw(named, &r, &o);
	cr_assert_eq(r.exit_code, 125, "%s", r.err);
	cr_assert(strstr(r.err, "--workspace /usr is a top-level system directory") &&
			  strstr(r.err, "--allow-broad-workspace"),
		  "%s", r.err);
	const char *allowed[] = {
		AGENTBOX_BIN, "run",  "--workspace", home, "--allow-broad-workspace",
		"--",	      "true", NULL};
	run_raw(allowed, &r, &o);
	cr_assert_eq(r.exit_code, 0, "%s", r.err);
}

/* ---- what a run loads ---- */

/* How many lines of pid's maps name a library of OpenSSL; -1 when they
 * cannot be read (the sandbox's init is not dumpable). */
static int openssl_maps(pid_t pid)
{
	char path[64], line[4096];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "libssl") || strstr(line, "libcrypto");
	fclose(f);
	return n;
}

/* The launcher of a run whose proxy terminates TLS (net/netproc.h) maps
 * no OpenSSL; its one network helper does. */
static void expect_openssl_in_the_helper_only(const char *net, const char *net2)
{
	char *ws = test_tmpdir();
	int out;
	setenv("AB_TEST_TOKEN", "not-a-real-token", 1);
	pid_t p = spawn_in(ws, &out, "--net", net, "--net", net2, "--", "/bin/sh", "-c",
			   "echo ready; sleep 5", NULL);
	wait_for_line(out, "ready");
	cr_expect_eq(openssl_maps(p), 0, "the launcher maps OpenSSL (--net %s), or unreadable",
		     net2);
	char path[80];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)p, (int)p);
	FILE *f = fopen(path, "re");
	cr_assert_not_null(f);
	int helpers = 0;
	for (int c; fscanf(f, "%d", &c) == 1;)
		helpers += openssl_maps(c) > 0;
	fclose(f);
	cr_expect_eq(helpers, 1, "no child of the launcher maps OpenSSL (--net %s)", net2);
	kill(p, SIGTERM);
	waitpid(p, NULL, 0);
	close(out);
}

Test(run, a_secret_run_maps_openssl_in_the_helper_only)
{
	expect_openssl_in_the_helper_only("allow=127.0.0.1",
					  "secret=AB_TEST_TOKEN@example.invalid");
}

Test(run, a_rules_run_maps_openssl_in_the_helper_only)
{
	expect_openssl_in_the_helper_only("allow=127.0.0.1", "allow=GET:example.invalid/x");
}

/* OpenSSL is loaded only by the features that need it (src/crypto/ossl.c):
 * a plain run maps neither library, nor carries it linked in statically
 * (libcrypto's assembler names "<appro@openssl.org>" in its text). */
Test(run, a_plain_run_maps_no_openssl)
{
	char *ws = test_tmpdir();
	int out;
	pid_t p = spawn_in(ws, &out, "--", "/bin/sh", "-c", "echo ready; sleep 5", NULL);
	wait_for_line(out, "ready");
	char path[64], line[4096];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)p);
	FILE *f = fopen(path, "re");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	int mapped = 0;
	while (fgets(line, sizeof(line), f)) {
		mapped++;
		cr_expect_null(strstr(line, "libssl"), "agentbox run maps %s", line);
		cr_expect_null(strstr(line, "libcrypto"), "agentbox run maps %s", line);
	}
	fclose(f);
	cr_assert_gt(mapped, 0);
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)p);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	char *bin = malloc((size_t)st.st_size);
	cr_assert(bin && read(fd, bin, (size_t)st.st_size) == st.st_size);
	close(fd);
	cr_expect_null(memmem(bin, (size_t)st.st_size, "@openssl.org>", 13),
		       "OpenSSL is linked into the agentbox binary");
	free(bin);
	kill(p, SIGTERM);
	waitpid(p, NULL, 0);
	close(out);
}
