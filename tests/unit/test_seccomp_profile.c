/* The seccomp profile loader: what loads, what is refused and how the
 * refusal reads, and the installed filter's behaviour in a child. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/seccomp.h>

#include "seccomp/policy_builtin.h"
#include "seccomp/seccomp_guard.h"
#include "seccomp/seccomp_bpf.h"
#include "seccomp/seccomp_profile.h"
#include "util/sync.h"
#include "util/util.h"

static char dir[64];

static void setup(void)
{
	setenv("AGENTBOX_POLICY_DIR", AGENTBOX_TEST_POLICY_DIR, 1);
	snprintf(dir, sizeof(dir), "/tmp/agentbox-sc.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(seccomp, .init = setup, .fini = teardown);

static const char *write_profile(const char *name, const char *json)
{
	static char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(json, f);
	fclose(f);
	return path;
}

static void expect_refused(const char *name, const char *json, const char *needle)
{
	struct ab_seccomp_profile *p = NULL;
	struct ab_error err = {0};
	const char *path = write_profile(name, json);
	int r = ab_seccomp_load(path, &p, NULL, &err);
	cr_assert_lt(r, 0, "%s loaded", name);
	cr_assert_null(p);
	cr_assert(strstr(err.msg, path), "file not named: %s", err.msg);
	cr_assert(strstr(err.msg, needle), "'%s' not in: %s", needle, err.msg);
}

Test(seccomp, shipped_and_third_party_profiles_load)
{
	const char *specs[] = {"default", "strict", "permissive",
			       AGENTBOX_TEST_DATA_DIR "/seccomp/docker-default.json",
			       AGENTBOX_TEST_DATA_DIR "/seccomp/podman-default.json"};
	for (size_t i = 0; i < 5; i++) {
		struct ab_seccomp_profile *p = NULL;
		struct ab_error err = {0};
		char *notices = NULL;
		cr_assert_eq(ab_seccomp_load(specs[i], &p, &notices, &err), 0, "%s: %s", specs[i],
			     err.msg);
		cr_assert_not_null(p, "%s", specs[i]);
		/* ours name only syscalls this libseccomp knows: no noise */
		if (i < 3)
			cr_assert_null(notices, "%s: %s", specs[i], notices);
		free(notices);
		ab_seccomp_free(p);
	}
}

Test(seccomp, none_means_no_filter)
{
	struct ab_seccomp_profile *p = (void *)1;
	struct ab_error err = {0};
	cr_assert_eq(ab_seccomp_load("none", &p, NULL, &err), 0);
	cr_assert_null(p);
}

Test(seccomp, bad_profiles_name_file_path_and_problem)
{
	expect_refused("syntax.json", "{\"defaultAction\": \"SCMP_ACT_ALLOW\",", "invalid JSON");
	expect_refused("trailing.json", "{\"defaultAction\": \"SCMP_ACT_ALLOW\"} x",
		       "invalid JSON");
	expect_refused("top.json", "[]", "expected an object");
	expect_refused("nodefault.json", "{}", "defaultAction");
	expect_refused("key.json", "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"bogus\": 1}",
		       "unknown key \"bogus\"");
	expect_refused("action.json", "{\"defaultAction\": \"SCMP_ACT_NOPE\"}",
		       "defaultAction: unknown action \"SCMP_ACT_NOPE\"");
	expect_refused("trace.json", "{\"defaultAction\": \"SCMP_ACT_TRACE\"}", "not supported");
	expect_refused("names.json",
		       "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"names\": "
		       "\"read\", \"action\": \"SCMP_ACT_ERRNO\"}]}",
		       "syscalls[0].names: expected an array");
	expect_refused("op.json",
		       "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"names\": "
		       "[\"read\"], \"action\": \"SCMP_ACT_ERRNO\", \"args\": [{\"index\": 0, "
		       "\"value\": 1, \"op\": \"SCMP_CMP_FOO\"}]}]}",
		       "syscalls[0].args[0].op: unknown operator \"SCMP_CMP_FOO\"");
	expect_refused("index.json",
		       "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"names\": "
		       "[\"read\"], \"action\": \"SCMP_ACT_ERRNO\", \"args\": [{\"index\": 7, "
		       "\"value\": 1, \"op\": \"SCMP_CMP_EQ\"}]}]}",
		       "syscalls[0].args[0].index: 7 is out of range");
	expect_refused("errno.json",
		       "{\"defaultAction\": \"SCMP_ACT_ERRNO\", \"defaultErrnoRet\": -1}",
		       "defaultErrnoRet: expected a number >= 0");
	expect_refused("arch.json",
		       "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"architectures\": [\"X86\"]}",
		       "architectures[0]: unknown architecture \"X86\"");
	expect_refused("agent.json",
		       "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"listenerPath\": \"/x\"}",
		       "not supported");
	struct ab_seccomp_profile *p = NULL;
	struct ab_error err = {0};
	cr_assert_lt(ab_seccomp_load("/nonexistent/x.json", &p, NULL, &err), 0);
	cr_assert(strstr(err.msg, "/nonexistent/x.json"), "%s", err.msg);
}

Test(seccomp, unknown_syscall_names_are_skipped_with_a_notice)
{
	const char *path = write_profile(
		"unknown.json", "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": "
				"[{\"names\": [\"not_a_syscall\", \"getppid\"], "
				"\"action\": \"SCMP_ACT_ERRNO\", \"errno\": \"EACCES\"}]}");
	struct ab_seccomp_profile *p = NULL;
	struct ab_error err = {0};
	char *notices = NULL;
	cr_assert_eq(ab_seccomp_load(path, &p, &notices, &err), 0, "%s", err.msg);
	cr_assert_not_null(notices);
	cr_assert(strstr(notices, "not_a_syscall"), "%s", notices);
	free(notices);
	ab_seccomp_free(p);
}

/* Install p in a child that runs probe(); answer its notifications here;
 * return the child's exit status and the denials seen. */
static int run_filtered(struct ab_seccomp_profile *p, int (*probe)(void), struct ab_denials *d)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	pid_t c = fork();
	if (c == 0) {
		struct ab_error err;
		int listener = -1;
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		if (ab_seccomp_install(p, &listener, &err) < 0)
			_exit(100);
		/* hand the listener over, as the sandbox's init does */
		if (listener >= 0 && sync_send_fd(sv[1], SYNC_LISTENER, listener) < 0)
			_exit(101);
		_exit(probe());
	}
	close(sv[1]);
	int listener = -1;
	struct sync_msg m;
	cr_assert_eq(sync_recv(sv[0], &m, &listener), 1);
	close(sv[0]);
	memset(d, 0, sizeof(*d));
	int st;
	while (waitpid(c, &st, WNOHANG) == 0) {
		struct pollfd pfd = {.fd = listener, .events = POLLIN};
		if (listener >= 0 && poll(&pfd, 1, 10) > 0 && (pfd.revents & POLLIN))
			ab_seccomp_answer(p, listener, d, NULL, NULL);
		else if (listener < 0)
			usleep(1000);
	}
	if (listener >= 0)
		close(listener);
	return st;
}

static unsigned long count_of(const struct ab_denials *d, const char *name)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->e[i].name, name) == 0)
			return d->e[i].count;
	return 0;
}

static int probe_errnos(void)
{
	/* exit code encodes: keyctl EPERM (1), getppid works (2), clone3 ENOSYS (4),
	 * personality(0xffffffff) works (8), personality(ADDR_NO_RANDOMIZE) EPERM (16) */
	int code = 0;
	if (syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, 0, 0, 0) < 0 && errno == EPERM)
		code |= 1;
	if (syscall(SYS_getppid) > 0)
		code |= 2;
	if (syscall(SYS_clone3, NULL, 0) < 0 && errno == ENOSYS)
		code |= 4;
	if (syscall(SYS_personality, 0xffffffffUL) >= 0)
		code |= 8;
	if (syscall(SYS_personality, 0x0040000UL) < 0 && errno == EPERM)
		code |= 16;
	return code;
}

Test(seccomp, default_profile_answers_and_counts_denials)
{
	struct ab_seccomp_profile *p = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_seccomp_load("default", &p, NULL, &err), 0, "%s", err.msg);
	struct ab_denials d;
	int st = run_filtered(p, probe_errnos, &d);
	cr_assert(WIFEXITED(st), "status %#x", st);
	cr_assert_eq(WEXITSTATUS(st), 31, "probe result %d", WEXITSTATUS(st));
	cr_assert_eq(count_of(&d, "keyctl"), 1);
	cr_assert_eq(count_of(&d, "personality"), 1);
	/* ENOSYS for clone3 is a compatibility answer, not a denial */
	cr_assert_eq(count_of(&d, "clone3"), 0);
	ab_seccomp_free(p);
}

static int probe_errno_names(void)
{
	return syscall(SYS_getppid) < 0 && errno == EACCES ? 0 : 1;
}

Test(seccomp, the_profile_errno_is_what_the_command_sees)
{
	const char *path = write_profile("eacces.json",
					 "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": "
					 "[{\"names\": [\"getppid\"], \"action\": "
					 "\"SCMP_ACT_ERRNO\", \"errnoRet\": 13}]}");
	struct ab_seccomp_profile *p = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_seccomp_load(path, &p, NULL, &err), 0, "%s", err.msg);
	struct ab_denials d;
	int st = run_filtered(p, probe_errno_names, &d);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	cr_assert_eq(count_of(&d, "getppid"), 1);
	ab_seccomp_free(p);
}

static int probe_personality(void)
{
	/* exit code: 0x0 works (1), PER_LINUX32 works (2), ADDR_NO_RANDOMIZE
	 * EPERM (4), READ_IMPLIES_EXEC EPERM (8) */
	int code = 0;
	if (syscall(SYS_personality, 0x0UL) >= 0)
		code |= 1;
	if (syscall(SYS_personality, 0x8UL) >= 0)
		code |= 2;
	if (syscall(SYS_personality, 0x0040000UL) < 0 && errno == EPERM)
		code |= 4;
	if (syscall(SYS_personality, 0x0400000UL) < 0 && errno == EPERM)
		code |= 8;
	syscall(SYS_personality, 0x0UL);
	return code;
}

Test(seccomp, permissive_refuses_personality_flags_that_weaken_the_address_space)
{
	struct ab_seccomp_profile *p = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_seccomp_load("permissive", &p, NULL, &err), 0, "%s", err.msg);
	struct ab_denials d;
	int st = run_filtered(p, probe_personality, &d);
	cr_assert(WIFEXITED(st), "status %#x", st);
	cr_assert_eq(WEXITSTATUS(st), 15, "probe result %d", WEXITSTATUS(st));
	cr_assert_eq(count_of(&d, "personality"), 2);
	ab_seccomp_free(p);
}

Test(seccomp, a_rule_errno_other_than_the_default_one_reaches_the_command)
{
	/* both errno actions are notified: the answer must still be the rule's;
	 * sigaltstack because AddressSanitizer calls it before _exit (a
	 * noreturn call), and dies when it fails */
	const char *path = write_profile(
		"two-errnos.json", "{\"defaultAction\": \"SCMP_ACT_ERRNO\", "
				   "\"defaultErrnoRet\": 1, \"syscalls\": ["
				   "{\"names\": [\"exit_group\", \"exit\", \"sendmsg\", "
				   "\"close\", \"write\", \"brk\", \"mmap\", \"munmap\", "
				   "\"sigaltstack\"], "
				   "\"action\": \"SCMP_ACT_ALLOW\"}, "
				   "{\"names\": [\"getppid\"], \"action\": \"SCMP_ACT_ERRNO\", "
				   "\"errnoRet\": 13}]}");
	struct ab_seccomp_profile *p = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_seccomp_load(path, &p, NULL, &err), 0, "%s", err.msg);
	struct ab_denials d;
	int st = run_filtered(p, probe_errno_names, &d);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	cr_assert_eq(count_of(&d, "getppid"), 1);
	ab_seccomp_free(p);
}

/* ---- the shipped profiles, compiled at build time ---- */

/* A classic-BPF interpreter for what libseccomp emits: the verdict of
 * prog for one struct seccomp_data. */
static uint32_t bpf_run(const struct sock_fprog *prog, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
	for (unsigned pc = 0; pc < prog->len; pc++) {
		const struct sock_filter *f = &prog->filter[pc];
		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			cr_assert_leq(f->k + 4, sizeof(*d), "load beyond seccomp_data at %u", pc);
			memcpy(&a, (const char *)d + f->k, 4);
			break;
		case BPF_LD | BPF_MEM:
			a = mem[f->k];
			break;
		case BPF_LDX | BPF_MEM:
			x = mem[f->k];
			break;
		case BPF_ST:
			mem[f->k] = a;
			break;
		case BPF_STX:
			mem[f->k] = x;
			break;
		case BPF_ALU | BPF_AND | BPF_K:
			a &= f->k;
			break;
		case BPF_ALU | BPF_OR | BPF_K:
			a |= f->k;
			break;
		case BPF_JMP | BPF_JA:
			pc += f->k;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += a == f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGT | BPF_K:
			pc += a > f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			pc += a >= f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JSET | BPF_K:
			pc += a & f->k ? f->jt : f->jf;
			break;
		case BPF_RET | BPF_K:
			return f->k;
		default:
			cr_assert_fail("opcode %#x at %u is not interpreted here", f->code, pc);
		}
	}
	cr_assert_fail("the program ran off its end");
	return 0;
}

/* Both programs give the same verdict for every syscall number, on the
 * native and a foreign ABI, with each argument set to values the shipped
 * rules compare against. */
static void expect_same_verdicts(const char *what, const struct sock_fprog *a,
				 const struct sock_fprog *b)
{
	static const uint64_t values[] = {0,
					  1,
					  2,
					  10,
					  0x5412,
					  0x5413,
					  0x541c,
					  0x100005412ULL,
					  0x10000000,
					  0x20000000,
					  0x7e020000,
					  0xffffffff,
					  0x0008,
					  0x0400000,
					  0xffffffffffffffffULL};
	static const uint32_t arches[] = {AUDIT_ARCH_X86_64, AUDIT_ARCH_I386};
	unsigned checked = 0;
	for (size_t ar = 0; ar < AB_ARRAY_SIZE(arches); ar++)
		for (int nr = 0; nr < 460; nr++)
			for (size_t i = 0; i < 2 * 6 * AB_ARRAY_SIZE(values); i++) {
				size_t x32 = i % 2, arg = i / 2 % 6, v = i / 12;
				struct seccomp_data d = {.nr = nr | (x32 ? 0x40000000 : 0),
							 .arch = arches[ar]};
				d.args[arg] = values[v];
				uint32_t ra = bpf_run(a, &d), rb = bpf_run(b, &d);
				cr_assert_eq(ra, rb,
					     "%s: syscall %d (arch %#x) args[%zu]=%#llx: %#x "
					     "precompiled, %#x compiled",
					     what, d.nr, d.arch, arg, (unsigned long long)values[v],
					     ra, rb);
				checked++;
			}
	cr_assert_gt(checked, 100000);
}

/* The build-time program of each shipped profile decides every syscall
 * exactly as the same profile compiled at run time: a copy of the file with
 * one more byte is not in the table, so it is compiled here. */
Test(seccomp, shipped_profiles_are_precompiled_and_decide_as_a_runtime_compile)
{
	static const char *const names[] = {"default", "strict", "permissive"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(names); i++) {
		char src[512], copy[256], cmd[1200];
		snprintf(src, sizeof(src), "%s/seccomp/%s.json", AGENTBOX_TEST_POLICY_DIR,
			 names[i]);
		snprintf(copy, sizeof(copy), "%s/%s.json", dir, names[i]);
		snprintf(cmd, sizeof(cmd), "cp %s %s && echo >>%s", src, copy, copy);
		cr_assert_eq(system(cmd), 0);
		struct ab_seccomp_profile *pre = NULL, *rt = NULL;
		struct ab_error err = {0};
		cr_assert_eq(ab_seccomp_load(names[i], &pre, NULL, &err), 0, "%s", err.msg);
		cr_assert_eq(ab_seccomp_load(copy, &rt, NULL, &err), 0, "%s", err.msg);
		cr_assert(ab_seccomp_is_precompiled(pre), "%s is not precompiled", names[i]);
		cr_assert_not(ab_seccomp_is_precompiled(rt), "an edited %s was not compiled",
			      names[i]);
		expect_same_verdicts(names[i], ab_seccomp_program(pre), ab_seccomp_program(rt));
		ab_seccomp_free(pre);
		ab_seccomp_free(rt);
	}
}

/* Every shipped policy file is built into the library with exactly its
 * bytes, for a binary with no policy on disk; a policy directory the caller
 * names (AGENTBOX_POLICY_DIR) turns them off. */
Test(seccomp, the_shipped_policy_is_built_in_byte_for_byte)
{
	static const char *const names[] = {
		"seccomp/default.json", "seccomp/strict.json",	  "seccomp/permissive.json",
		"sandbox/agent.json",	"sandbox/untrusted.json", "sandbox/offline-build.json"};
	cr_assert_null(ab_policy_builtin("seccomp/default.json"));
	unsetenv("AGENTBOX_POLICY_DIR");
	for (size_t i = 0; i < AB_ARRAY_SIZE(names); i++) {
		char src[512];
		snprintf(src, sizeof(src), "%s/%s", AGENTBOX_TEST_POLICY_DIR, names[i]);
		FILE *f = fopen(src, "r");
		cr_assert_not_null(f, "%s", src);
		static char buf[1 << 20];
		size_t n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		const struct ab_policy_file *b = ab_policy_builtin(names[i]);
		cr_assert_not_null(b, "%s is not built in", names[i]);
		cr_assert_eq(b->size, n, "%s", names[i]);
		cr_assert_eq(memcmp(b->data, buf, n), 0, "%s differs", names[i]);
	}
	cr_assert_null(ab_policy_builtin("seccomp/nope.json"));
}

/* The setid guard of root's idmapped runs comes from the build: the same
 * instructions libseccomp compiles at run time. A libseccomp that does not
 * know every syscall the guard names (fchmodat2 before 2.5.5) leaves it to
 * be compiled at run time: then the build must have shipped none. */
Test(seccomp, setid_guard_is_precompiled_as_a_runtime_compile)
{
	struct sock_fprog *rt = NULL;
	bool complete = false;
	struct ab_error err = {0};
	cr_assert_eq(seccomp_setid_guard_compile(&rt, &complete, &err), 0, "%s", err.msg);
	if (!complete) {
		cr_assert_eq(ab_setid_guard_len, 0, "a guard without every rule was precompiled");
		free(rt->filter);
		free(rt);
		return;
	}
	cr_assert_eq(ab_setid_guard_len, rt->len, "precompiled %u instructions, compiled %u",
		     ab_setid_guard_len, rt->len);
	cr_assert_eq(memcmp(ab_setid_guard_compiled, rt->filter, rt->len * sizeof(*rt->filter)), 0);
	free(rt->filter);
	free(rt);
}
