/* Processes: the caller's pid namespace's from /proc (proc.h), the
 * vfork-like child (vfork.h), the signals that end a front (signals.h). */
#include "util/proc.h"
#include "util/signals.h"
#include "util/vfork.h"

#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The fields of "NSpid:" in /proc/<pid>/status (pid 0: self): the pid in
 * the /proc's pid namespace first, in the process's own last. */
static int nspids(pid_t pid, pid_t *out, int max)
{
	char path[64], buf[2048];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (k <= 0)
		return 0;
	buf[k] = '\0';
	char *p = strstr(buf, "\nNSpid:");
	int n = 0;
	for (p = p ? p + 7 : NULL; p && n < max;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		out[n++] = (pid_t)v;
		p = end;
	}
	return n;
}

/* A listing's buffer: mapped for it and unmapped after, not malloc's (an
 * opendir's 32 KiB, freed, would stay in the heap of the init that lists
 * at each shim's end, where its seccomp filter keeps it from trimming). */
#define PROCS_BUF (8u << 10)

int ab_procs_open(struct ab_procs *it)
{
	*it = (struct ab_procs){.fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
	if (it->fd < 0)
		return -errno;
	void *b = mmap(NULL, PROCS_BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED) {
		int e = errno;
		close(it->fd);
		it->fd = -1;
		return -e;
	}
	it->buf = b;
	/* a /proc of an outer pid namespace (isolation.h, own-proc
	 * missing) numbers processes its way: they are translated into ours */
	pid_t ns[32];
	int n = nspids(0, ns, 32);
	it->depth = n > 1 && ns[n - 1] == getpid() ? n : 0;
	return 0;
}

/* The next entry's name of /proc, or NULL at its end (or an error). */
static const char *procs_entry(struct ab_procs *it)
{
	if (it->pos >= it->len) {
		long k = syscall(SYS_getdents64, it->fd, it->buf, PROCS_BUF);
		if (k <= 0)
			return NULL;
		it->len = (size_t)k;
		it->pos = 0;
	}
	/* struct linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name */
	const char *e = it->buf + it->pos;
	unsigned short reclen;
	memcpy(&reclen, e + 16, sizeof(reclen));
	it->pos += reclen;
	return e + 19;
}

/* pid as /proc numbers it, in our pid namespace; 0 when not in it. */
static pid_t ours(const struct ab_procs *it, pid_t pid)
{
	if (!it->depth || pid <= 0)
		return pid;
	pid_t ns[32];
	int n = nspids(pid, ns, 32);
	return n >= it->depth ? ns[it->depth - 1] : 0;
}

bool ab_procs_next(struct ab_procs *it, pid_t *pid, pid_t *ppid)
{
	const char *name;
	while ((name = procs_entry(it))) {
		char *end;
		long p = strtol(name, &end, 10);
		if (*end || p <= 0)
			continue;
		char path[64], buf[512];
		snprintf(path, sizeof(path), "/proc/%ld/stat", p);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (k <= 0)
			continue;
		buf[k] = '\0';
		/* "pid (comm) state ppid": comm may hold anything but ends at the last ')' */
		char *rp = strrchr(buf, ')');
		int pp;
		if (!rp || sscanf(rp + 1, " %*c %d", &pp) != 1)
			continue;
		*pid = ours(it, (pid_t)p);
		*ppid = ours(it, (pid_t)pp);
		if (*pid <= 0)
			continue; /* not a process of our pid namespace */
		return true;
	}
	return false;
}

void ab_procs_close(struct ab_procs *it)
{
	if (it->buf)
		munmap(it->buf, PROCS_BUF);
	if (it->fd >= 0)
		close(it->fd);
	*it = (struct ab_procs){.fd = -1};
}

/* The name /proc gives pid (ours) under, found by its NSpid when /proc is
 * an outer namespace's; 0 when it is not there. */
static pid_t proc_name_of(pid_t pid)
{
	struct ab_procs it;
	if (ab_procs_open(&it) < 0)
		return 0;
	pid_t found = it.depth ? 0 : pid;
	const char *name;
	while (!found && (name = procs_entry(&it))) {
		char *end;
		long p = strtol(name, &end, 10);
		if (!*end && p > 0 && ours(&it, (pid_t)p) == pid)
			found = (pid_t)p;
	}
	ab_procs_close(&it);
	return found;
}

void ab_proc_comm(pid_t pid, char *out, size_t len)
{
	out[0] = '\0';
	pid_t name = proc_name_of(pid);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)name);
	int fd = name > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	ssize_t k = fd >= 0 ? read(fd, out, len - 1) : -1;
	if (fd >= 0)
		close(fd);
	out[k > 0 ? k : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

int ab_ending_signals_fd(void)
{
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

pid_t ab_vfork_child(int (*fn)(void *), void *arg, unsigned long flags, void *stack, size_t size)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* the stack grows down on every architecture agentbox builds for */
	pid_t pid = clone(fn, (char *)stack + size, CLONE_VM | CLONE_VFORK | SIGCHLD | flags, arg);
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return pid;
}

/* The stack's mapping (ab_stack_note); what ab_stack_trim leaves below its
 * caller's frame: madvise's (a bare system call) and the red zone. A
 * signal's frame (up to an AMX state) comes later, on pages faulted in
 * again as it needs them. */
static uintptr_t stack_lo, stack_hi;
#define STACK_TRIM_MARGIN (1u << 10)

/* Whether the maps line holds here: its range noted. */
static bool stack_line(const char *line, uintptr_t here)
{
	unsigned long lo, hi;
	if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || here < lo || here >= hi)
		return false;
	stack_lo = lo;
	stack_hi = hi;
	return true;
}

/* Read with read(2), not stdio: a FILE and its buffer, freed, would stay
 * in malloc's per-thread cache (which malloc_trim keeps) of every idle
 * launcher and init, 1.5 KiB of each one's heap. */
void ab_stack_note(void)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	char buf[512];
	size_t have = 0;
	bool skip = false; /* in the rest of a line longer than buf */
	ssize_t n;
	while (fd >= 0 && (n = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		have += (size_t)n;
		buf[have] = '\0';
		char *line = buf, *nl;
		for (; (nl = strchr(line, '\n')); line = nl + 1) {
			*nl = '\0';
			if (!skip && stack_line(line, here))
				goto done;
			skip = false;
		}
		have = strlen(line);
		if (have == sizeof(buf) - 1) {
			/* a line longer than buf: its range is at its start */
			if (!skip && stack_line(line, here))
				goto done;
			skip = true;
			have = 0;
		}
		memmove(buf, line, have);
	}
done:
	if (fd >= 0)
		close(fd);
}

void ab_memory_trim(void)
{
	malloc_trim(0);
	ab_stack_trim();
}

__attribute__((noinline)) void ab_stack_trim(void)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	if (!stack_lo || here < stack_lo || here >= stack_hi || here - stack_lo < STACK_TRIM_MARGIN)
		return;
	uintptr_t top = (here - STACK_TRIM_MARGIN) & ~(page - 1);
	if (top > stack_lo)
		madvise((void *)stack_lo, top - stack_lo, MADV_DONTNEED);
}
