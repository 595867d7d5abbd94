/* probe: bound into a sandbox by the integration tests to observe it from
 * inside without relying on the host's tools. One subcommand per question;
 * prints one line and exits 0, or prints the error and exits 1. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static int cmd_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return perror("opendir /proc/self/fd"), 1;
	int fds[256], n = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < 256)
		if (de->d_name[0] != '.' && atoi(de->d_name) != dirfd(d))
			fds[n++] = atoi(de->d_name);
	closedir(d);
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (fds[j] < fds[i]) {
				int t = fds[i];
				fds[i] = fds[j];
				fds[j] = t;
			}
	for (int i = 0; i < n; i++)
		printf("%s%d", i ? " " : "", fds[i]);
	printf("\n");
	return 0;
}

/* The controlling terminal, if any, and whether we lead our session. */
static int cmd_tty(void)
{
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY);
	printf("ctty=%s session_leader=%s\n", fd >= 0 ? "yes" : "none",
	       getsid(0) == getpid() ? "yes" : "no");
	return 0;
}

static int cmd_ifaces(void)
{
	struct if_nameindex *ifs = if_nameindex();
	if (!ifs)
		return perror("if_nameindex"), 1;
	for (struct if_nameindex *i = ifs; i->if_index; i++)
		printf("%s%s", i == ifs ? "" : " ", i->if_name);
	printf("\n");
	if_freenameindex(ifs);
	return 0;
}

/* A TCP connection over 127.0.0.1 works only if loopback is up. */
static int cmd_loopback(void)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) < 0)
		return printf("listen: %s\n", strerror(errno)), 1;
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
		return printf("connect: %s\n", strerror(errno)), 1;
	printf("ok\n");
	return 0;
}

/* Try to create or append to a file; print "ok" or the errno's name. */
static int cmd_write(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0) {
		printf("%s\n", strerrorname_np(errno));
		return 1;
	}
	printf("ok\n");
	return 0;
}

static int cmd_read(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		printf("%s\n", strerrorname_np(errno));
		return 1;
	}
	printf("ok\n");
	return 0;
}

static const char *result(long r)
{
	return r < 0 ? strerrorname_np(errno) : "ok";
}

/* Each escape-relevant syscall once; "name=ERRNO" or "name=ok" per line. */
static int cmd_escapes(void)
{
	long r;
	pid_t child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	r = ptrace(PTRACE_ATTACH, child, 0, 0);
	printf("ptrace=%s\n", result(r));
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	char buf[16];
	struct iovec local = {buf, sizeof(buf)}, remote = {(void *)0x400000, sizeof(buf)};
	r = syscall(SYS_process_vm_readv, 1, &local, 1, &remote, 1, 0);
	printf("process_vm_readv=%s\n", result(r));
	r = mount("none", "/tmp", "tmpfs", 0, NULL);
	printf("mount=%s\n", result(r));
	r = syscall(SYS_unshare, CLONE_NEWUSER);
	printf("unshare=%s\n", result(r));
	r = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
	printf("keyctl=%s\n", result(r));
	r = syscall(SYS_bpf, 0, NULL, 0);
	printf("bpf=%s\n", result(r));
	r = syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
	printf("perf_event_open=%s\n", result(r));
	r = syscall(SYS_userfaultfd, 0);
	printf("userfaultfd=%s\n", result(r));
	r = syscall(SYS_io_uring_setup, 1, NULL);
	printf("io_uring_setup=%s\n", result(r));
	r = syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, 0);
	printf("open_by_handle_at=%s\n", result(r));
	return 0;
}

/* TIOCSTI on a fresh pty, plain and with the upper 32 bits set (flatpak
 * CVE-2019-10063): prints "plain=ERRNO crafted=ERRNO". */
static int cmd_tiocsti(void)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
		return printf("pty: %s\n", strerror(errno)), 1;
	int s = open(ptsname(m), O_RDWR | O_NOCTTY);
	if (s < 0)
		return printf("pts: %s\n", strerror(errno)), 1;
	char c = 'x';
	long r1 = syscall(SYS_ioctl, s, (unsigned long)TIOCSTI, &c);
	const char *plain = result(r1);
	long r2 = syscall(SYS_ioctl, s, (unsigned long)TIOCSTI | (1UL << 32), &c);
	printf("plain=%s crafted=%s\n", plain, result(r2));
	return 0;
}

/* Run try() in a child and say how it went: "getpid-worked" (it returned
 * the pid), "refused" (an error came back) or "killed-by-N" (a filter
 * killed it, or the kernel lacks the ABI and faults). */
static int report_child(long (*try)(void))
{
	pid_t c = fork();
	if (c == 0)
		_exit(try() == getpid() ? 0 : 1);
	int st;
	waitpid(c, &st, 0);
	if (WIFSIGNALED(st))
		printf("killed-by-%d\n", WTERMSIG(st));
	else
		printf("%s\n", WEXITSTATUS(st) == 0 ? "getpid-worked" : "refused");
	return 0;
}

/* getpid through the i386 ABI: int 0x80 with eax=20 */
static long int80_getpid(void)
{
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
	return ret;
}

/* getpid through the x32 ABI: the 0x40000000 bit */
static long x32_getpid(void)
{
	return syscall(39 | 0x40000000L);
}

/* Become root of a new user and mount namespace (full capabilities there),
 * then try to undo a read-only mount at dir: remount it read-write, unmount
 * it, and write file beneath it. One line per try. */
static int cmd_nested_remount(const char *dir, const char *file)
{
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return printf("unshare=%s\n", strerrorname_np(errno)), 1;
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "CapEff:", 7) == 0)
			printf("%s", line);
	if (f)
		fclose(f);
	printf("remount=%s\n", result(mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND, NULL)));
	printf("umount=%s\n", result(umount2(dir, MNT_DETACH)));
	printf("write=%s\n", result(open(file, O_WRONLY | O_APPEND)));
	return 0;
}

/* Attacks on a process given by pid (a host process the sandbox should not
 * even see): "ptrace=ERRNO process_vm_readv=ERRNO kill0=ERRNO". */
static int cmd_ptrace(const char *arg)
{
	pid_t pid = (pid_t)atoi(arg);
	long r = ptrace(PTRACE_ATTACH, pid, 0, 0);
	printf("ptrace=%s", result(r));
	if (r == 0)
		ptrace(PTRACE_DETACH, pid, 0, 0);
	char buf[16];
	struct iovec local = {buf, sizeof(buf)}, remote = {(void *)0x400000, sizeof(buf)};
	r = syscall(SYS_process_vm_readv, pid, &local, 1, &remote, 1, 0);
	printf(" process_vm_readv=%s", result(r));
	printf(" kill0=%s\n", result(kill(pid, 0)));
	return 0;
}

/* clone(CLONE_NEWUSER) by the raw syscall (not unshare): the child, if
 * any, exits at once. */
static long clone_newuser(void)
{
	long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, NULL, NULL, 0);
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid((pid_t)r, NULL, 0);
	return r;
}

/* One escape-relevant syscall, by name: prints "NAME=ERRNO" or "NAME=ok". */
static int cmd_sys(const char *name)
{
	long r;
	if (strcmp(name, "keyctl") == 0)
		r = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 1);
	else if (strcmp(name, "add_key") == 0)
		r = syscall(SYS_add_key, "user", "agentbox-probe", "x", 1,
			    KEY_SPEC_SESSION_KEYRING);
	else if (strcmp(name, "bpf") == 0) {
		/* BPF_MAP_CREATE of a one-entry array */
		unsigned int attr[32] = {2 /* BPF_MAP_TYPE_ARRAY */, 4, 4, 1};
		r = syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, attr, sizeof(attr));
	} else if (strcmp(name, "perf_event_open") == 0) {
		/* a software clock counter of this process */
		unsigned int attr[32] = {1 /* PERF_TYPE_SOFTWARE */, sizeof(attr), 0};
		r = syscall(SYS_perf_event_open, attr, 0, -1, -1, 0);
	} else if (strcmp(name, "userfaultfd") == 0)
		r = syscall(SYS_userfaultfd, O_CLOEXEC);
	else if (strcmp(name, "io_uring_setup") == 0) {
		unsigned int params[30] = {0};
		r = syscall(SYS_io_uring_setup, 4, params);
	} else if (strcmp(name, "clone_newuser") == 0)
		r = clone_newuser();
	else if (strcmp(name, "unshare_newuser") == 0)
		r = syscall(SYS_unshare, CLONE_NEWUSER);
	else if (strcmp(name, "setuid") == 0)
		r = syscall(SYS_setuid, 0);
	else if (strcmp(name, "setresuid") == 0)
		r = syscall(SYS_setresuid, 0, 0, 0);
	else if (strcmp(name, "setgid") == 0)
		r = syscall(SYS_setgid, 0);
	else if (strcmp(name, "setgroups") == 0)
		r = syscall(SYS_setgroups, 1, (gid_t[]){0});
	else
		return fprintf(stderr, "probe: unknown syscall %s\n", name), 2;
	printf("%s=%s\n", name, result(r));
	return 0;
}

static const char *tty_name(int fd)
{
	const char *n = isatty(fd) ? ttyname(fd) : NULL;
	return n ? n : isatty(fd) ? "tty" : "none";
}

/* Push chars into the input of every terminal within reach: fds 0-2 and
 * /dev/tty, after trying to make them our controlling terminal (first
 * line: "setsid=ERRNO sctty0=ERRNO ..."). Per target one line: "fd0 tty=NAME sti=ERRNO sti64=ERRNO
 * linux=ERRNO linux64=ERRNO", where sti64 and linux64 set the upper 32
 * bits of the request, which the kernel ignores (CVE-2019-10063), and
 * linux is TIOCLINUX's paste of the console selection. */
static int cmd_inject(const char *chars)
{
	/* first try to make one of them our controlling terminal: the kernel
	 * lets a process inject into its own */
	printf("setsid=%s", result(setsid()));
	for (int fd = 0; fd <= 2; fd++)
		if (isatty(fd))
			printf(" sctty%d=%s", fd, result(ioctl(fd, TIOCSCTTY, 0)));
	printf("\n");
	int ctty = open("/dev/tty", O_RDWR | O_NOCTTY);
	printf("devtty=%s\n", ctty >= 0 ? "opened" : strerrorname_np(errno));
	int fds[] = {0, 1, 2, ctty};
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		int fd = fds[i];
		if (fd < 0)
			continue;
		printf("%s%d tty=%s", fd == ctty ? "devtty-fd" : "fd", fd, tty_name(fd));
		const char *r[4] = {"none", "none", "none", "none"};
		for (const char *c = chars; *c; c++) {
			r[0] = result(syscall(SYS_ioctl, fd, (unsigned long)TIOCSTI, c));
			r[1] = result(
				syscall(SYS_ioctl, fd, (unsigned long)TIOCSTI | (1UL << 32), c));
		}
		char sub = 3; /* TIOCL_PASTESEL */
		r[2] = result(syscall(SYS_ioctl, fd, (unsigned long)TIOCLINUX, &sub));
		sub = 3;
		r[3] = result(syscall(SYS_ioctl, fd, (unsigned long)TIOCLINUX | (1UL << 32), &sub));
		printf(" sti=%s sti64=%s linux=%s linux64=%s\n", r[0], r[1], r[2], r[3]);
	}
	return 0;
}

/* A tracer that turns its tracee's getppid() into unshare(CLONE_NEWUSER) at
 * the syscall-entry stop: seccomp checks the syscall the tracer left (since
 * Linux 4.8), so a profile that denies unshare still denies it. The tracee
 * prints "rewritten=ERRNO|ok userns=same|new", or "traceme=ERRNO". */
static int cmd_trace_rewrite(void)
{
#ifdef __x86_64__
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		if (ptrace(PTRACE_TRACEME, 0, 0, 0) < 0) {
			printf("traceme=%s\n", strerrorname_np(errno));
			exit(0);
		}
		raise(SIGSTOP);
		char a[64] = "", b[64] = "";
		if (readlink("/proc/self/ns/user", a, sizeof(a) - 1) < 0)
			_exit(1);
		long r = syscall(SYS_getppid); /* the tracer makes it unshare */
		int e = errno;
		if (readlink("/proc/self/ns/user", b, sizeof(b) - 1) < 0)
			_exit(1);
		printf("rewritten=%s userns=%s\n", r < 0 ? strerrorname_np(e) : "ok",
		       strcmp(a, b) != 0 ? "new" : "same");
		exit(0);
	}
	int st;
	if (child < 0 || waitpid(child, &st, 0) != child)
		return perror("fork"), 1;
	if (WIFEXITED(st))
		return 0; /* TRACEME refused: the child said so */
	ptrace(PTRACE_SETOPTIONS, child, 0, PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL);
	int sig = 0;
	for (;;) {
		if (ptrace(PTRACE_SYSCALL, child, 0, sig) < 0)
			return perror("PTRACE_SYSCALL"), 1;
		if (waitpid(child, &st, 0) != child)
			return perror("waitpid"), 1;
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
		sig = WSTOPSIG(st) == (SIGTRAP | 0x80) ? 0 : WSTOPSIG(st);
		struct __ptrace_syscall_info info;
		if (sig || ptrace(PTRACE_GET_SYSCALL_INFO, child, sizeof(info), &info) <= 0 ||
		    info.op != PTRACE_SYSCALL_INFO_ENTRY || info.entry.nr != SYS_getppid)
			continue;
		struct user_regs_struct regs;
		if (ptrace(PTRACE_GETREGS, child, 0, &regs) < 0)
			return perror("PTRACE_GETREGS"), 1;
		regs.orig_rax = SYS_unshare;
		regs.rdi = CLONE_NEWUSER;
		if (ptrace(PTRACE_SETREGS, child, 0, &regs) < 0)
			return perror("PTRACE_SETREGS"), 1;
	}
#else
	printf("unsupported\n");
	return 0;
#endif
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "x32") == 0)
		return report_child(x32_getpid);
	if (argc == 4 && strcmp(argv[1], "nested-remount") == 0)
		return cmd_nested_remount(argv[2], argv[3]);
	if (argc == 2 && strcmp(argv[1], "escapes") == 0)
		return cmd_escapes();
	if (argc == 2 && strcmp(argv[1], "trace-rewrite") == 0)
		return cmd_trace_rewrite();
	if (argc == 2 && strcmp(argv[1], "tiocsti") == 0)
		return cmd_tiocsti();
	if (argc == 2 && strcmp(argv[1], "int80") == 0)
		return report_child(int80_getpid);
	if (argc == 2 && strcmp(argv[1], "fds") == 0)
		return cmd_fds();
	if (argc == 2 && strcmp(argv[1], "tty") == 0)
		return cmd_tty();
	if (argc == 2 && strcmp(argv[1], "ifaces") == 0)
		return cmd_ifaces();
	if (argc == 2 && strcmp(argv[1], "loopback") == 0)
		return cmd_loopback();
	if (argc == 3 && strcmp(argv[1], "write") == 0)
		return cmd_write(argv[2]);
	if (argc == 3 && strcmp(argv[1], "read") == 0)
		return cmd_read(argv[2]);
	if (argc == 3 && strcmp(argv[1], "ptrace") == 0)
		return cmd_ptrace(argv[2]);
	if (argc == 3 && strcmp(argv[1], "sys") == 0)
		return cmd_sys(argv[2]);
	if (argc == 3 && strcmp(argv[1], "inject") == 0)
		return cmd_inject(argv[2]);
	fprintf(stderr,
		"usage: probe "
		"fds|tty|ifaces|loopback|escapes|trace-rewrite|tiocsti|int80|x32|write PATH|"
		"read PATH|ptrace PID|sys NAME|inject CHARS\n");
	return 2;
}
