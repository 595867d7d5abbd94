/* The warm child of an idle shim (warm.h). */
#include "warm/warm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"
#include "util/vfork.h"
#include "warm/warm_proto.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3: executable even where memfds default to noexec */
#endif

/* How long a request waits for a warm child still starting, at most:
 * ld.so and libc take a millisecond; a shell that never says ready is
 * not one the object loaded into. */
#define WARM_READY_TIMEOUT_MS 2000

/* The size of argv and environment (strings and pointers) up to which
 * execve never says E2BIG: the kernel's floor (ARG_MAX, fs/exec.c), so
 * that the warm shell takes only what a fresh exec would */
#define WARM_EXEC_SURE (128u << 10)

/* agentbox-warm.so, embedded at build time (warm_object.c) */
extern const unsigned char ab_warm_object[], ab_warm_object_end[];

/* An fd moved above the fds the warm child is given (0-4), close-on-exec. */
static int high_fd(int fd)
{
	if (fd < 0 || fd >= 10)
		return fd;
	int moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	close(fd);
	return moved;
}

/* The launcher's environment, read before the clone (the init has none):
 * AGENTBOX_NO_WARM=1, no warm shell; AGENTBOX_WARM_TEST_BROKEN=1, an
 * object ld.so cannot load (tests of the fallback). */
static bool knob_off, knob_broken;

void warm_read_knobs(void)
{
	const char *off = getenv("AGENTBOX_NO_WARM");
	const char *broken = getenv("AGENTBOX_WARM_TEST_BROKEN");
	knob_off = off && strcmp(off, "1") == 0;
	knob_broken = broken && strcmp(broken, "1") == 0;
}

static int object_memfd(void)
{
	unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
	int fd = memfd_create("agentbox-warm", flags | MFD_EXEC);
	if (fd < 0 && errno == EINVAL) /* before Linux 6.3 */
		fd = memfd_create("agentbox-warm", flags);
	if (fd < 0)
		return -1;
	const unsigned char *p = ab_warm_object;
	size_t len = (size_t)(ab_warm_object_end - ab_warm_object);
	if (knob_broken)
		p = (const unsigned char *)"not an ELF object", len = 17;
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, p + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)n;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		close(fd);
		return -1;
	}
	return high_fd(fd);
}

void warm_init(struct warm *w, int layer)
{
	*w = (struct warm){.object = -1, .devnull = -1, .ctl = -1, .layer = layer};
	if (knob_off) {
		w->disabled = true;
		return;
	}
	w->object = object_memfd();
	w->devnull = high_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
	w->disabled = w->object < 0 || w->devnull < 0;
}

struct warm_args {
	int devnull, ctl, object, layer;
	unsigned long long as_limit;
	char **argv, **envp;
	int exec_errno; /* written by the child: memory is shared until it execs */
};

/* The warm child, on its own stack in the shim's memory: what spawn_child
 * (shim.c) does for a command, with the object's fds at their places. */
static int warm_child(void *p)
{
	struct warm_args *a = p;
	sigset_t none;
	sigemptyset(&none);
	struct rlimit as = {a->as_limit, a->as_limit};
	/* in its own Landlock domain before the exec: no window in which a
	 * command could open its /proc/PID/mem or ptrace it */
	if (syscall(SYS_landlock_restrict_self, a->layer, 0) < 0 || setsid() < 0 ||
	    dup2(a->devnull, 0) < 0 || dup2(a->devnull, 1) < 0 || dup2(a->devnull, 2) < 0 ||
	    dup2(a->ctl, WARM_FD_CTL) < 0 || dup2(a->object, WARM_FD_OBJECT) < 0 ||
	    (a->as_limit && setrlimit(RLIMIT_AS, &as) < 0) ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
		a->exec_errno = errno;
		_exit(127);
	}
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(a->argv[0], a->argv, a->envp);
	a->exec_errno = errno;
	_exit(127);
}

void warm_spawn(struct warm *w, unsigned long long as_limit)
{
	enum { STACK = 64 << 10 };
	static char *stack;
	static char placeholder[WARM_ARG_SIZE];
	if (w->disabled || w->pid > 0)
		return;
	if (!stack) {
		stack = mmap(NULL, STACK, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (stack == MAP_FAILED) {
			stack = NULL;
			w->disabled = true;
			return;
		}
		memset(placeholder, ' ', sizeof(placeholder) - 1);
		memcpy(placeholder, WARM_PLACEHOLDER, sizeof(WARM_PLACEHOLDER) - 1);
	}
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return; /* out of fds now: next time, maybe */
	char *argv[] = {"/bin/sh", "-c", "--", placeholder, NULL};
	char *envp[] = {"LD_PRELOAD=/proc/self/fd/4", NULL}; /* WARM_FD_OBJECT */
	struct warm_args a = {.devnull = w->devnull,
			      .ctl = high_fd(sp[1]),
			      .object = w->object,
			      .layer = w->layer,
			      .as_limit = as_limit,
			      .argv = argv,
			      .envp = envp};
	pid_t pid = a.ctl < 0 ? -1 : ab_vfork_child(warm_child, &a, 0, stack, STACK);
	int e = pid < 0 ? 0 : a.exec_errno;
	ab_close_keep_errno(a.ctl);
	if (pid > 0 && e) {
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	if (pid < 0) {
		close(sp[0]);
		/* no /bin/sh to exec: spawn as before from now on; out of
		 * processes or memory (the pids limit, RLIMIT_AS): next time */
		w->disabled = e && e != EAGAIN && e != ENOMEM && e != EMFILE && e != ENFILE;
		return;
	}
	w->pid = pid;
	w->ctl = sp[0];
	w->ready = false;
}

bool warm_fits(char *const *argv, char *const *envp)
{
	if (!argv[0] || strcmp(argv[0], "/bin/sh") != 0 || !argv[1] || strcmp(argv[1], "-c") != 0 ||
	    !argv[2] || strcmp(argv[2], "--") != 0 || !argv[3] || argv[4])
		return false;
	/* what ld.so and libc read before main: the exec-time environment's */
	size_t size = 4 * sizeof(char *) + strlen(argv[3]) + 15; /* "/bin/sh" "-c" "--" */
	for (char *const *e = envp; *e; e++) {
		if (strncmp(*e, "LD_", 3) == 0 || strncmp(*e, "GLIBC_TUNABLES=", 15) == 0 ||
		    strncmp(*e, "MALLOC_", 7) == 0)
			return false;
		size += sizeof(char *) + strlen(*e) + 1;
	}
	/* below ARG_MAX every exec takes it; above, an exec decides (E2BIG
	 * or not) as it does without a warm shell */
	return size < WARM_EXEC_SURE;
}

/* Its wait status (after our SIGKILL, unless it had ended), or -1. */
static int end_child(struct warm *w)
{
	int st = -1;
	if (w->pid > 0) {
		kill(w->pid, SIGKILL);
		while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	ab_close_keep_errno(w->ctl);
	w->ctl = -1;
	w->pid = 0;
	w->ready = false;
	return st;
}

void warm_end(struct warm *w)
{
	end_child(w);
}

/* Wait for WARM_READY: false (and the child ended) when it does not come. */
static bool wait_ready(struct warm *w)
{
	if (w->ready)
		return true;
	char c = 0;
	struct pollfd p = {.fd = w->ctl, .events = POLLIN};
	/* stopped by a command (kill -STOP): it would never say ready */
	kill(w->pid, SIGCONT);
	int r;
	while ((r = poll(&p, 1, WARM_READY_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	ssize_t n = r > 0 ? warm_recv(w->ctl, &c, 1, MSG_DONTWAIT) : -1;
	w->ready = n == 1 && c == WARM_READY;
	if (w->ready)
		return true;
	/* an end of its own without a word: the shell ran the placeholder,
	 * the object did not load (no glibc, a static shell), or it crashed
	 * loading it. Killed (a command's `kill -9 -1`, the OOM killer), or
	 * slow: a new one next time. */
	int st = end_child(w);
	w->disabled = n == 0 && st != -1 &&
		      (WIFEXITED(st) || (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL));
	return false;
}

static int send_request(int ctl, int in, int out, int err, const char *payload, size_t len,
			uint32_t envc)
{
	struct warm_req h = {.magic = WARM_REQ_MAGIC, .envc = envc, .len = len};
	int fds[3] = {in, out, err};
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} u = {0};
	/* the payload's first bytes with the header: one packet, one wake-up
	 * for a command of a usual size */
	size_t off = len < WARM_CHUNK ? len : WARM_CHUNK;
	struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)payload, off}};
	struct msghdr mh = {.msg_iov = iov,
			    .msg_iovlen = 2,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	if (sendmsg(ctl, &mh, MSG_NOSIGNAL) != (ssize_t)(sizeof(h) + off))
		return -1;
	while (off < len) {
		size_t chunk = len - off < WARM_CHUNK ? len - off : WARM_CHUNK;
		ssize_t n = warm_send(ctl, payload + off, chunk, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/* The command, the working directory, the environment: NUL-terminated. */
static char *request_payload(const char *cmd, const char *cwd, char *const *envp, size_t *len,
			     uint32_t *envc)
{
	size_t n = strlen(cmd) + 1 + strlen(cwd) + 1;
	*envc = 0;
	for (char *const *e = envp; *e; e++, (*envc)++)
		n += strlen(*e) + 1;
	if (n > WARM_PAYLOAD_MAX)
		return NULL;
	char *buf = malloc(n), *p = buf;
	if (!buf)
		return NULL;
	p = stpcpy(p, cmd) + 1;
	p = stpcpy(p, cwd) + 1;
	for (char *const *e = envp; *e; e++)
		p = stpcpy(p, *e) + 1;
	*len = n;
	return buf;
}

pid_t warm_take(struct warm *w, int in, int out, int err, const char *cmd, const char *cwd,
		char *const *envp)
{
	if (w->pid <= 0 || !wait_ready(w))
		return 0;
	size_t len;
	uint32_t envc;
	char *payload = request_payload(cmd, cwd, envp, &len, &envc);
	int r = payload ? send_request(w->ctl, in, out, err, payload, len, envc) : -1;
	free(payload);
	if (r < 0) {
		warm_end(w); /* it cannot have run anything of the request */
		return 0;
	}
	/* it is the command now: what goes wrong from here on (a working
	 * directory gone since the shim's chdir) it says as a spawn would;
	 * stopped by an earlier command while it waited, it would never run
	 * (a fresh exec never starts stopped) */
	pid_t pid = w->pid;
	kill(pid, SIGCONT);
	ab_close_keep_errno(w->ctl);
	*w = (struct warm){
		.object = w->object, .devnull = w->devnull, .ctl = -1, .layer = w->layer};
	return pid;
}
