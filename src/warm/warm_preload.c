/* agentbox-warm.so: preloaded into `/bin/sh -c -- PLACEHOLDER` by an idle
 * shim (src/warm/warm.c), so that the shell's exec, ld.so and libc start-up are
 * done before the request comes. Its constructor (glibc passes argc, argv
 * and envp to constructors) says ready on the inherited socket, blocks
 * until the request comes, then makes the process the request's: stdio,
 * working directory, environment, and the command as the -c argument,
 * before the shell's main() runs. Only plain system call wrappers: the
 * shell's own libc is not set up for anything else of ours. */
#include <errno.h>
#include <link.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "warm/warm_proto.h"

extern char **environ;

/* glibc's, NULL on any other libc (musl): only glibc passes argc, argv
 * and envp to constructors */
extern const char *gnu_get_libc_version(void) __attribute__((weak));

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

/* Whether the request is there (or the shim gone): then what is left of
 * the warming below would only delay it. */
static bool request_waiting(void)
{
	struct pollfd p = {.fd = WARM_FD_CTL, .events = POLLIN};
	return poll(&p, 1, 0) != 0;
}

/* The shell's main() and exit touch pages of the shell and of libc that
 * nothing touched yet: their page faults would be on the request's path.
 * Map every loaded object's segments now, in the caller's think time
 * (page-cache pages: no memory of its own but page tables), a slice at a
 * time, and stop when the request comes: a client that sends its next
 * request at once would wait for the whole of libc's text to be mapped,
 * more pages than the shell and its exit touch. Returns non-zero, which
 * ends dl_iterate_phdr, once the request came. */
#define POPULATE_SLICE (128u << 10)
static int populate_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size, (void)arg;
	long page = 4096;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W))
			continue;
		uintptr_t start = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(page - 1);
		uintptr_t end = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		for (uintptr_t at = start; at < end; at += POPULATE_SLICE) {
			if (request_waiting())
				return 1;
			size_t len = end - at < POPULATE_SLICE ? end - at : POPULATE_SLICE;
			madvise((void *)at, len, MADV_POPULATE_READ);
		}
	}
	return 0;
}

/* The stack the shell's main() grows into, now. */
static __attribute__((noinline)) void touch_stack(void)
{
	volatile char pad[64 << 10];
	for (size_t i = 0; i < sizeof(pad); i += 4096)
		pad[i] = 0;
}

/* The request's stderr, once it came */
static int err_fd = -1;

/* What the shim says when it cannot spawn a command (shim.c), with its
 * statuses (AB_EXIT_NOT_FOUND, AB_EXIT_CANNOT_EXEC): the shim does not
 * wait for a word from here, this process is the command already. */
static _Noreturn void fail(int e)
{
	char msg[256] = "agentbox: cannot run '/bin/sh': ";
	size_t n = strlen(msg);
	const char *why = strerror(e);
	size_t len = strlen(why);
	if (len > sizeof(msg) - n - 2)
		len = sizeof(msg) - n - 2;
	memcpy(msg + n, why, len);
	msg[n + len] = '\n';
	if (err_fd >= 0 && write(err_fd, msg, n + len + 1) < 0)
		e = errno; /* nothing more to say it with */
	_exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
}

/* The request's first packet: a buffer in place, its pages touched while
 * the shell waits; a longer payload's rest goes into a mapping. */
static char first[WARM_CHUNK + 1];
static char *env_first[256];

/* The header, its three fds and the payload's first bytes (at first);
 * 0 at the shim's end of file. */
static size_t recv_first(struct warm_req *h, int fds[3])
{
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov[2] = {{h, sizeof(*h)}, {first, WARM_CHUNK}};
	struct msghdr mh = {.msg_iov = iov,
			    .msg_iovlen = 2,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	ssize_t n;
	do
		n = recvmsg(WARM_FD_CTL, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		_exit(0); /* the shim is gone: nothing of a request may run */
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	if ((size_t)n < sizeof(*h) || h->magic != WARM_REQ_MAGIC || h->len == 0 ||
	    h->len > WARM_PAYLOAD_MAX || (size_t)n - sizeof(*h) > h->len || !c ||
	    c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(3 * sizeof(int)))
		fail(EBADMSG);
	memcpy(fds, CMSG_DATA(c), 3 * sizeof(int));
	err_fd = fds[2];
	return (size_t)n - sizeof(*h);
}

/* The whole payload, NUL-terminated. */
static char *recv_payload(const struct warm_req *h, size_t got)
{
	if (got == h->len) {
		first[got] = '\0';
		return first;
	}
	char *p =
		mmap(NULL, h->len + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fail(ENOMEM);
	memcpy(p, first, got);
	for (uint64_t off = got; off < h->len;) {
		ssize_t n = warm_recv(WARM_FD_CTL, p + off, h->len - off, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		off += (uint64_t)n;
	}
	p[h->len] = '\0';
	return p;
}

__attribute__((constructor)) static void warm_take_request(int argc, char **argv, char **envp)
{
	(void)envp;
	/* elsewhere the arguments are garbage: return, the shell runs the
	 * placeholder (`exit 0`), and the shim spawns as before */
	if (!gnu_get_libc_version)
		return;
	/* only the warm child of a shim: anything else this leaks into runs on */
	if (argc != 4 || strncmp(argv[3], WARM_PLACEHOLDER, sizeof(WARM_PLACEHOLDER) - 1) != 0)
		return;
	char ready = WARM_READY;
	if (warm_send(WARM_FD_CTL, &ready, 1, MSG_NOSIGNAL) != 1)
		_exit(0);
	if (dl_iterate_phdr(populate_object, NULL) == 0) {
		touch_stack();
		memset(first, 0, sizeof(first));
		memset(env_first, 0, sizeof(env_first));
	}
	struct warm_req h;
	int fds[3];
	size_t got = recv_first(&h, fds);
	char *p = recv_payload(&h, got);
	char **env = env_first;
	if (h.envc >= sizeof(env_first) / sizeof(env_first[0])) {
		env = mmap(NULL, (h.envc + 1) * sizeof(char *), PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (env == MAP_FAILED)
			fail(ENOMEM);
	}
	/* the command, the working directory, the environment */
	char *end = p + h.len, *cmd = p, *cwd = cmd + strlen(cmd) + 1, *s = cwd;
	for (uint32_t i = 0; i <= h.envc; i++) {
		if (s >= end)
			fail(EBADMSG);
		if (i > 0)
			env[i - 1] = s;
		s += strlen(s) + 1;
	}
	env[h.envc] = NULL;
	for (int i = 0; i < 3; i++)
		if (dup2(fds[i], i) < 0)
			fail(errno);
	for (int i = 0; i < 3; i++)
		if (fds[i] > 2)
			close(fds[i]);
	err_fd = 2;
	if (chdir(cwd) < 0)
		fail(errno);
	/* as a fresh exec: no parent-death signal (the shim armed one) */
	prctl(PR_SET_PDEATHSIG, 0);
	environ = env; /* glibc gives main() environ as it is now */
	/* ps and pgrep -f read the argument area: the command goes there,
	 * cut to its size; the shell reads the whole of it from argv */
	size_t len = strlen(cmd), fits = len < WARM_ARG_SIZE ? len : WARM_ARG_SIZE - 1;
	memcpy(argv[3], cmd, fits);
	memset(argv[3] + fits, 0, WARM_ARG_SIZE - fits);
	if (fits < len)
		argv[3] = cmd;
	close(WARM_FD_OBJECT);
	close(WARM_FD_CTL);
}
