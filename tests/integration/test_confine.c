/* Confinement, through the real binary: seccomp profiles and denial reports,
 * the locked view, masked /proc, Landlock and protected workspace paths. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
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

TestSuite(confine, .init = setup, .fini = test_tmp_cleanup, .timeout = 120);

#define PROBE "--ro-bind", AGENTBOX_PROBE ":/probe"

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void write_file(const char *dir, const char *name, const char *content, mode_t mode)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(content, f);
	fclose(f);
	chmod(path, mode);
}

static void make_dir(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	cr_assert_eq(mkdir(path, 0755), 0, "%s: %s", path, strerror(errno));
}

/* ptrace and process_vm_readv are not among them: the default profile
 * allows them (debuggers, strace, LeakSanitizer), strict does not */
static const char *const escapes[] = {
	"mount",	   "unshare",	  "keyctl",	    "bpf",
	"perf_event_open", "userfaultfd", "io_uring_setup", "open_by_handle_at",
};

/* ---- seccomp ---- */

Test(confine, default_profile_denies_every_escape_syscall_and_reports_them)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, PROBE, "--", "/probe", "escapes", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		char want[64];
		snprintf(want, sizeof(want), "%s=EPERM\n", escapes[i]);
		cr_assert(strstr(r.out, want), "%s not denied: %s", escapes[i], r.out);
	}
	/* the summary line after the command names what was denied */
	cr_assert(strstr(r.err, "agentbox: seccomp denied:"), "%s", r.err);
	cr_assert(strstr(r.err, "keyctl (1)"), "%s", r.err);
	cr_assert(strstr(r.err, "bpf (1)"), "%s", r.err);
	cr_assert(strstr(r.err, "io_uring_setup (1)"), "%s", r.err);
}

Test(confine, default_profile_lets_a_command_trace_its_own_processes)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, PROBE, "--", "/bin/sh", "-c",
	       "/probe escapes | grep -E '^(ptrace|process_vm_readv)='", NULL);
	/* the probe's process_vm_readv reads pid 1, the init, which is not
	 * dumpable: allowed by the profile, refused by the kernel */
	cr_assert_str_eq(r.out, "ptrace=ok\nprocess_vm_readv=EPERM\n", "stderr: %s", r.err);
	cr_assert_null(strstr(r.err, "ptrace"), "%s", r.err);
	cr_assert_null(strstr(r.err, "process_vm_readv"), "%s", r.err);
	run_in(ws, &r, NULL, "--seccomp", "strict", PROBE, "--", "/bin/sh", "-c",
	       "/probe escapes | grep -E '^(ptrace|process_vm_readv)='", NULL);
	cr_assert_str_eq(r.out, "ptrace=EPERM\nprocess_vm_readv=EPERM\n", "stderr: %s", r.err);
	cr_assert(strstr(r.err, "ptrace (1)"), "%s", r.err);
	cr_assert(strstr(r.err, "process_vm_readv (1)"), "%s", r.err);
}

Test(confine, a_tracer_cannot_turn_a_syscall_into_a_denied_one)
{
	char *ws = test_tmpdir();
	/* the tracer rewrites getppid() into unshare(CLONE_NEWUSER) at the
	 * syscall-entry stop; seccomp checks the rewritten call */
	run_in(ws, &r, NULL, PROBE, "--", "/probe", "trace-rewrite", NULL);
	if (strcmp(r.out, "unsupported\n") == 0)
		cr_skip_test("the probe rewrites syscalls on x86_64 only");
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "rewritten=EPERM userns=same\n", "%s, stderr: %s", r.out, r.err);
	cr_assert(strstr(r.err, "agentbox: seccomp denied: unshare (1)"), "%s", r.err);
	/* the same tracer without a filter: the rewrite works, so the
	 * assertion above can fail */
	run_in(ws, &r, NULL, "--seccomp", "none", PROBE, "--", "/probe", "trace-rewrite", NULL);
	cr_assert_str_eq(r.out, "rewritten=ok userns=new\n", "stderr: %s", r.err);
	/* strict: no tracing at all */
	run_in(ws, &r, NULL, "--seccomp", "strict", PROBE, "--", "/probe", "trace-rewrite", NULL);
	cr_assert_str_eq(r.out, "traceme=EPERM\n", "stderr: %s", r.err);
}

Test(confine, without_a_filter_the_same_syscalls_get_through)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--seccomp", "none", PROBE, "--", "/probe", "escapes", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	/* proves the battery above can fail: these work when nothing filters */
	cr_assert(strstr(r.out, "ptrace=ok\n"), "%s", r.out);
	cr_assert(strstr(r.out, "keyctl=ok\n"), "%s", r.out);
	cr_assert(strstr(r.out, "unshare=ok\n"), "%s", r.out);
	cr_assert(strstr(r.err, "--seccomp none"), "no warning: %s", r.err);
	cr_assert_null(strstr(r.err, "seccomp denied"), "%s", r.err);
}

Test(confine, tiocsti_is_denied_even_with_a_crafted_argument)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, PROBE, "--", "/probe", "tiocsti", NULL);
	cr_assert_str_eq(r.out, "plain=EPERM crafted=EPERM\n", "stderr: %s", r.err);
	cr_assert(strstr(r.err, "ioctl (2)"), "both attempts reported: %s", r.err);
}

Test(confine, foreign_abi_syscalls_do_not_run)
{
	char *ws = test_tmpdir();
	/* i386 through int 0x80 and x32 through the 0x40000000 bit: the
	 * filter kills (or the kernel lacks the ABI); neither runs getpid */
	run_in(ws, &r, NULL, PROBE, "--", "/bin/sh", "-c", "/probe int80; /probe x32", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_eq(count_lines(r.out), 2, "%s", r.out);
	cr_assert_null(strstr(r.out, "getpid-worked"), "%s", r.out);
	/* with the default filter the x32 call is met by the filter itself */
	cr_assert(strstr(r.out, "killed-by-31") || strstr(r.out, "refused"), "%s", r.out);
}

Test(confine, docker_and_podman_profiles_load_and_run)
{
	char *ws = test_tmpdir();
	/* each as documented: Docker refuses these to a process without
	 * capabilities; Podman allows unshare and keyctl (rootless containers
	 * need them) but not bpf */
	const struct {
		const char *file, *want;
	} profiles[] = {
		{AGENTBOX_TEST_DATA_DIR "/seccomp/docker-default.json",
		 "ok\nunshare=EPERM\nkeyctl=EPERM\nbpf=EPERM\n"},
		{AGENTBOX_TEST_DATA_DIR "/seccomp/podman-default.json", "ok\nbpf=EPERM\n"},
	};
	for (size_t i = 0; i < 2; i++) {
		run_in(ws, &r, NULL, "--seccomp", profiles[i].file, PROBE, "--", "/bin/sh", "-c",
		       i == 0 ? "echo ok; /probe escapes | grep -E '^(keyctl|bpf|unshare)='"
			      : "echo ok; /probe escapes | grep -E '^bpf='",
		       NULL);
		cr_assert_eq(r.exit_code, 0, "%s: %s", profiles[i].file, r.err);
		cr_assert_str_eq(r.out, profiles[i].want, "%s: %s", profiles[i].file, r.out);
	}
}

Test(confine, strict_profile_has_no_sockets_permissive_has)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--seccomp", "strict", PROBE, "--", "/probe", "loopback", NULL);
	cr_assert_neq(r.exit_code, 0);
	cr_assert(strstr(r.out, "EPERM") || strstr(r.out, "Operation not permitted"), "%s", r.out);
	run_in(ws, &r, NULL, "--seccomp", "permissive", PROBE, "--", "/bin/sh", "-c",
	       "/probe loopback; /probe escapes | grep -E '^(ptrace|bpf)='", NULL);
	cr_assert_str_eq(r.out, "ok\nptrace=ok\nbpf=EPERM\n", "stderr: %s", r.err);
}

Test(confine, bad_profiles_are_refused_with_the_file_and_the_problem)
{
	char *ws = test_tmpdir();
	char *dir = test_tmpdir();
	const struct {
		const char *name, *json, *needle;
	} cases[] = {
		{"syntax.json", "{\"defaultAction\": ", "syntax.json"},
		{"action.json", "{\"defaultAction\": \"SCMP_ACT_BOGUS\"}", "SCMP_ACT_BOGUS"},
		{"key.json", "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"surprise\": 1}",
		 "surprise"},
		{"op.json",
		 "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"names\": "
		 "[\"read\"], \"action\": \"SCMP_ACT_ERRNO\", \"args\": [{\"index\": 0, "
		 "\"value\": 1, \"op\": \"SCMP_CMP_NOPE\"}]}]}",
		 "syscalls[0].args[0].op"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_file(dir, cases[i].name, cases[i].json, 0644);
		char path[4200];
		snprintf(path, sizeof(path), "%s/%s", dir, cases[i].name);
		run_in(ws, &r, NULL, "--seccomp", path, "--", "true", NULL);
		cr_assert_eq(r.exit_code, 125, "%s: %s", cases[i].name, r.err);
		cr_assert(strstr(r.err, cases[i].name), "file not named: %s", r.err);
		cr_assert(strstr(r.err, cases[i].needle), "problem not named: %s", r.err);
	}
	run_in(ws, &r, NULL, "--seccomp", "/nonexistent/profile.json", "--", "true", NULL);
	cr_assert_eq(r.exit_code, 125);
	cr_assert(strstr(r.err, "/nonexistent/profile.json"), "%s", r.err);
}

/* ---- workloads the default profile must keep working ---- */

Test(confine, python_threads_subprocess_multiprocessing)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "python3", "-c",
	       "import threading, subprocess, multiprocessing as mp\n"
	       "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
	       "out = subprocess.run(['echo', 'sub'], capture_output=True, text=True).stdout\n"
	       "with mp.Pool(2) as p: sq = p.map(abs, [-1, -2, -3])\n"
	       "print(out.strip(), sq)\n",
	       NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "sub [1, 2, 3]\n");
	cr_assert_null(strstr(r.err, "seccomp denied"), "%s", r.err);
}

Test(confine, git_gcc_make_tar_gzip)
{
	char *ws = test_tmpdir();
	write_file(ws, "hello.c", "#include <stdio.h>\nint main(void){puts(\"built\");}\n", 0644);
	write_file(ws, "Makefile", "hello: hello.c\n\tgcc -O1 -o hello hello.c\n", 0644);
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "set -e; make -s && ./hello; "
	       "git init -q repo && cd repo && git config user.email a@b && "
	       "git config user.name a && echo x > f && git add f && "
	       "git commit -qm first && git log --oneline | wc -l; cd ..; "
	       "tar czf t.tgz hello.c && tar tzf t.tgz && gzip -dc t.tgz | wc -c | tr -d ' '",
	       NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s\nout: %s", r.err, r.out);
	cr_assert(strncmp(r.out, "built\n1\nhello.c\n", 16) == 0, "%s", r.out);
	cr_assert_null(strstr(r.err, "seccomp denied"), "%s", r.err);
}

Test(confine, git_commit_uses_the_callers_identity_and_nothing_else)
{
	char *ws = test_tmpdir();
	char *home = test_tmpdir();
	char *xdg = test_tmpdir();
	/* ~/.gitconfig wins over the XDG file, as in git; the helper, the
	 * alias and the URL with a token stay out */
	make_dir(xdg, "git");
	write_file(xdg, "git/config", "[user]\n\temail = old@example.com\n", 0644);
	write_file(home, ".gitconfig",
		   "[alias]\n\tci = commit\n[user]\n\tname = \"Ann \\\"A\\\" Body\" # comment\n"
		   "[User] email = ann@example.com ; comment\n[credential]\n\thelper = store\n"
		   "[url \"https://tok@example.com/\"]\n\tinsteadOf = https://example.com/\n",
		   0644);
	setenv("HOME", home, 1);
	setenv("XDG_CONFIG_HOME", xdg, 1);
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "git init -q && echo x > f && git add f && git commit -qm first && "
	       "git log --format='%an <%ae>|%cn <%ce>' && git config --global -l && "
	       "git config --global core.editor true && echo global-writable",
	       NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s\nout: %s", r.err, r.out);
	cr_assert_str_eq(r.out,
			 "Ann \"A\" Body <ann@example.com>|Ann \"A\" Body <ann@example.com>\n"
			 "user.name=Ann \"A\" Body\nuser.email=ann@example.com\nglobal-writable\n",
			 "%s", r.out);
	/* without an identity there is no file, and git says so as before */
	write_file(home, ".gitconfig", "[core]\n\teditor = vi\n", 0644);
	char xdg_file[4096];
	snprintf(xdg_file, sizeof(xdg_file), "%s/git/config", xdg);
	cr_assert_eq(unlink(xdg_file), 0);
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "test -e ~/.gitconfig && echo has-file; git -c user.useConfigOnly=true commit "
	       "--allow-empty -qm second 2>&1 | grep -c 'Please tell me who you are'",
	       NULL);
	cr_assert_str_eq(r.out, "1\n", "%s, stderr: %s", r.out, r.err);
}

/* what LeakSanitizer, strace and gdb need: ptrace of the command's own
 * processes (packaging/install-build-deps installs strace and gdb) */
Test(confine, asan_leak_report_strace_and_gdb)
{
	if (access("/usr/bin/strace", X_OK) != 0 || access("/usr/bin/gdb", X_OK) != 0) {
		cr_assert_null(getenv("AGENTBOX_MUST_WORK"), "strace or gdb missing");
		cr_skip_test("strace or gdb missing: packaging/install-build-deps installs them");
	}
	char *ws = test_tmpdir();
	write_file(ws, "leak.c",
		   "#include <stdlib.h>\nvoid *p;\nint main(void){p = malloc(77); p = 0;}\n", 0644);
	write_file(ws, "six.c", "int main(void)\n{\n\tint x = 6;\n\treturn x * 7 - 42;\n}\n", 0644);
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "gcc -g -fsanitize=address -o leak leak.c && ./leak; echo leak=$?; "
	       "gcc -g -O0 -o six six.c && strace -f -o st ./six; echo strace=$?; "
	       "grep -c '^[0-9]* *exit_group(0)' st; "
	       "gdb -q -batch -ex 'set disable-randomization off' -ex 'break six.c:4' -ex run "
	       "-ex 'print x*7' ./six 2>&1 | grep '^\\$1'",
	       NULL);
	cr_assert_str_eq(r.out, "leak=1\nstrace=0\n1\n$1 = 42\n", "%s, stderr: %s", r.out, r.err);
	cr_assert(strstr(r.err, "LeakSanitizer: detected memory leaks"), "%s", r.err);
	cr_assert(strstr(r.err, "77 byte(s) leaked"), "%s", r.err);
	cr_assert_null(strstr(r.err, "fatal error"), "%s", r.err);
	cr_assert_null(strstr(r.err, "seccomp denied"), "%s", r.err);
}

Test(confine, node_if_installed)
{
	if (access("/usr/bin/node", X_OK) != 0)
		return; /* optional workload: nothing to prove without node */
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "/usr/bin/node", "-e",
	       "require('child_process').execSync('true'); console.log(1 + 1)", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "2\n");
}

/* ---- the view ---- */

Test(confine, proc_knobs_are_read_only_and_leaks_masked)
{
	char *ws = test_tmpdir();
	/* the kernel knobs are read-only mounts (DAC alone would already refuse
	 * an unprivileged writer, so the mount table is what proves it) */
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "for p in /proc/sys /proc/irq /proc/bus /proc/fs; do "
	       "grep -E \"^[0-9]+ [0-9]+ [0-9:]+ [^ ]+ $p ro,\" /proc/self/mountinfo >/dev/null "
	       "&& echo $p ro; done; "
	       "wc -c < /proc/kallsyms; test -s /proc/timer_list && echo timer_list-leaks; "
	       "cat /proc/kcore 2>/dev/null | wc -c",
	       NULL);
	cr_assert_str_eq(r.out, "/proc/sys ro\n/proc/irq ro\n/proc/bus ro\n/proc/fs ro\n0\n0\n",
			 "stderr: %s", r.err);
	/* and the sandbox's host name is still its own */
	run_in(ws, &r, NULL, "--", "cat", "/proc/sys/kernel/hostname", NULL);
	cr_assert_str_eq(r.out, "agentbox\n");
}

Test(confine, skills_stay_read_only_after_gaining_caps_in_a_nested_namespace)
{
	char *ws = test_tmpdir();
	char *skills = test_tmpdir();
	write_file(skills, "s.md", "skill\n", 0666);
	/* with the filter and Landlock off, a command may make itself root of a
	 * new user namespace; the view's mounts are locked, so that gains
	 * nothing */
	run_in(ws, &r, NULL, "--seccomp", "none", "--landlock", "off", "--skills", skills, PROBE,
	       "--", "/probe", "nested-remount", "/skills", "/skills/s.md", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s out: %s", r.err, r.out);
	/* it really held capabilities there */
	cr_assert(strncmp(r.out, "CapEff:\t", 8) == 0 &&
			  strncmp(r.out + 8, "0000000000000000", 16) != 0,
		  "%s", r.out);
	const char *rest = strchr(r.out, '\n');
	cr_assert_str_eq(rest + 1, "remount=EPERM\numount=EINVAL\nwrite=EROFS\n", "stderr: %s",
			 r.err);
	char path[4200];
	snprintf(path, sizeof(path), "%s/s.md", skills);
	FILE *f = fopen(path, "r");
	char buf[64] = {0};
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	cr_assert_str_eq(buf, "skill\n");
}

Test(confine, landlock_limits_writes_beyond_the_mounts)
{
	char *ws = test_tmpdir();
	/* /proc is a writable mount; only Landlock stands in the way here */
	run_in(ws, &r, NULL, PROBE, "--", "/probe", "write", "/proc/self/oom_score_adj", NULL);
	cr_assert_str_eq(r.out, "EACCES\n", "stderr: %s", r.err);
	run_in(ws, &r, NULL, PROBE, "--", "/bin/sh", "-c",
	       "/probe write /workspace/a; /probe write /tmp/b; /probe write /dev/null; "
	       "/probe write /home/agent/c; /probe write /dev/shm/d",
	       NULL);
	cr_assert_str_eq(r.out, "ok\nok\nok\nok\nok\n", "stderr: %s", r.err);
}

Test(confine, no_privilege_from_setuid_binaries)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "grep -E ' /usr .*nosuid| /workspace .*nosuid' /proc/self/mountinfo | wc -l", NULL);
	cr_assert_str_eq(r.out, "2\n", "stderr: %s", r.err);
	if (geteuid() != 0)
		return; /* only root can make a setuid-root file to try */
	char *bin = test_tmpdir();
	char path[4200], cmd[8600];
	snprintf(path, sizeof(path), "%s/idprobe", bin);
	snprintf(cmd, sizeof(cmd), "cp /usr/bin/id %s && chmod 4755 %s", path, path);
	cr_assert_eq(system(cmd), 0);
	char bind[4300];
	snprintf(bind, sizeof(bind), "%s:/suid-id", path);
	run_in(ws, &r, NULL, "--ro-bind", bind, "--", "/suid-id", "-u", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	char want[32];
	snprintf(want, sizeof(want), "%u\n", (unsigned)test_host_uid());
	cr_assert_str_eq(r.out, want);
}

/* ---- protected workspace paths ---- */

Test(confine, existing_protected_paths_are_read_only)
{
	char *ws = test_tmpdir();
	make_dir(ws, ".git");
	make_dir(ws, ".git/hooks");
	write_file(ws, ".bashrc", "# rc\n", 0644);
	write_file(ws, ".git/config", "[core]\n", 0644);
	run_in(ws, &r, NULL, PROBE, "--", "/bin/sh", "-c",
	       "/probe write .git/hooks/pre-commit; /probe write .bashrc; "
	       "/probe write .git/config; mv .git/hooks .git/h2 2>/dev/null || echo pinned; "
	       "/probe write .git/description",
	       NULL);
	cr_assert_str_eq(r.out, "EROFS\nEROFS\nEROFS\npinned\nok\n", "stderr: %s", r.err);
	char path[4200];
	snprintf(path, sizeof(path), "%s/.git/hooks/pre-commit", ws);
	cr_assert_eq(access(path, F_OK), -1);
}

Test(confine, created_protected_paths_are_reported_and_git_init_works)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "git init -q . && echo ok > .envrc && echo done", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "done\n");
	/* what git init made is reported (in --report), not warned about, and
	 * stays; the .envrc is moved aside (--protect-created quarantine) */
	const char *want = "agentbox: the command created .envrc, which the host may run or "
			   "load; moved aside to .envrc.agentbox-quarantine-";
	cr_assert(strncmp(r.err, want, strlen(want)) == 0 && !strchr(strchr(r.err, '\n') + 1, '\n'),
		  "%s", r.err);
	char path[4200];
	snprintf(path, sizeof(path), "%s/.envrc", ws);
	cr_assert_eq(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/.git/config", ws);
	cr_assert_eq(access(path, F_OK), 0);
	/* nothing was planted on the host for paths the command did not create */
	snprintf(path, sizeof(path), "%s/.vscode", ws);
	cr_assert_eq(access(path, F_OK), -1);
}

Test(confine, a_refused_write_to_a_protected_file_names_it_and_unprotect)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--unprotect", ".git/config", "--", "git", "init", "-q", NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	/* git writes config.lock and renames it over the bound .git/config */
	run_in(ws, &r, NULL, "--", "/bin/sh", "-c",
	       "git config user.name x; echo rc=$?; git status > /dev/null", NULL);
	cr_assert_str_eq(r.out, "rc=4\n", "stderr: %s", r.err);
	cr_assert(strstr(r.err, "Device or resource busy\n"
				"agentbox: .git/config is protected (read-only in the sandbox), so "
				"the command's write to it failed; --unprotect .git/config lets it "
				"change it\n"),
		  "%s", r.err);
	cr_assert_eq(count_lines(r.err), 2, "one line from git, one from agentbox: %s", r.err);
	run_in(ws, &r, NULL, "--unprotect", ".git/config", "--", "git", "config", "user.name", "x",
	       NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.err, "", "%s", r.err);
}

Test(confine, protect_and_unprotect)
{
	char *ws = test_tmpdir();
	write_file(ws, ".bashrc", "# rc\n", 0644);
	make_dir(ws, "notes");
	write_file(ws, "notes/todo", "x\n", 0644);
	run_in(ws, &r, NULL, "--unprotect", ".bashrc", "--protect", "notes/todo", PROBE, "--",
	       "/bin/sh", "-c", "/probe write .bashrc; /probe write notes/todo", NULL);
	cr_assert_str_eq(r.out, "ok\nEROFS\n", "stderr: %s", r.err);
	run_in(ws, &r, NULL, "--protect", "../x", "--", "true", NULL);
	cr_assert_eq(r.exit_code, 125);
	cr_assert(strstr(r.err, "--protect"), "%s", r.err);
	run_in(ws, &r, NULL, "--protect", "/etc", "--", "true", NULL);
	cr_assert_eq(r.exit_code, 125);
	cr_assert(strstr(r.err, "relative to the workspace"), "%s", r.err);
}

/* ---- the policy built into the binary ---- */

static void copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(in, 0, "%s: %s", from, strerror(errno));
	int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	cr_assert_geq(out, 0, "%s: %s", to, strerror(errno));
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		cr_assert_eq(write(out, buf, (size_t)n), n);
	cr_assert_eq(n, 0);
	close(in);
	cr_assert_eq(close(out), 0);
}

Test(confine, a_copied_binary_has_the_shipped_policy_built_in)
{
	/* outside the build tree and any installation: no policy file on disk
	 * (the binary of the build tree reads the source tree's) */
	char *dir = test_tmpdir(), *ws = test_tmpdir();
	char bin[4200];
	snprintf(bin, sizeof(bin), "%s/agentbox", dir);
	copy_file(AGENTBOX_BIN, bin);
	unsetenv("AGENTBOX_POLICY_DIR");
	const char *def[] = {bin, "run", "--workspace", ws, PROBE, "--", "/probe", "escapes", NULL};
	run_raw(def, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert(strstr(r.out, "keyctl=EPERM\n") && strstr(r.out, "bpf=EPERM\n"), "%s", r.out);
	cr_assert(strstr(r.err, "agentbox: seccomp denied:"), "%s", r.err);
	const char *strict[] = {bin,   "run", "--workspace", ws,    "--seccomp", "strict",
				PROBE, "--",  "/probe",	     "sys", "keyctl",	 NULL};
	run_raw(strict, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "keyctl=EPERM\n", "stderr: %s", r.err);
	/* a sandbox profile, which names the strict seccomp profile (its
	 * memory and cpu limits may have no cgroup here: --limits best) */
	const char *prof[] = {bin,	   "run",      "--workspace", ws,   "--profile",
			      "untrusted", "--limits", "best",	      "--", "/bin/sh",
			      "-c",	   "echo ran", NULL};
	run_raw(prof, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "ran\n");
	/* a directory the caller names is all there is */
	const char *env[] = {"AGENTBOX_POLICY_DIR=/nonexistent", NULL};
	const char *none[] = {bin, "run", "--workspace", ws, "--", "/bin/true", NULL};
	run_raw(none, &r, &(struct run_opts){.env = env});
	cr_assert_eq(r.exit_code, 125);
	cr_assert(strstr(r.err, "/nonexistent/seccomp/default.json: No such file"), "%s", r.err);
}

/* What ordinary tools call harmlessly is not denied, so their users see no
 * denial line: top and ps read the NUMA policy (get_mempolicy). */
Test(confine, ordinary_tools_run_without_denials)
{
	char *ws = test_tmpdir();
	run_in(ws, &r, NULL, "--", "sh", "-c", "top -bn1 >/dev/null && ps -e >/dev/null && echo ok",
	       NULL);
	cr_assert_str_eq(r.out, "ok\n", "stderr: %s", r.err);
	cr_assert_null(strstr(r.err, "seccomp denied"), "%s", r.err);
}
