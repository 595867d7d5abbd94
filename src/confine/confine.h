/* Confining a helper process that parses what is hostile (design.md,
 * invariant 12): the network proxy (net/netproc.c), the image reader.
 * Each step is one call, in the order a helper takes them:
 *
 *   confine_fds          close every fd but the ones it keeps (0-2 not
 *                        kept onto /dev/null)
 *   confine_signals      a session of its own, signals at their defaults
 *   confine_die_with     die (SIGKILL) with the process that started it
 *   confine_identity     as root: an unprivileged uid/gid, no groups; then
 *                        no capability in any set, no_new_privs
 *   confine_memory       RLIMIT_AS, no core dump
 *   confine_landlock     read-only access to the listed paths and every
 *                        right beneath one directory, or nothing (before the
 *                        helper makes threads: Landlock is per thread)
 *   confine_seccomp      an allowlist of syscalls for every thread, last
 *
 * confine_self takes the whole sequence from one struct confine_spec, for
 * a single-threaded helper that opened all it needs first (the image's).
 * Every function returns 0 or a negative errno and fills err. */
#ifndef AB_CONFINE_H
#define AB_CONFINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

/* Close every fd but keep[0..n) (which stay as they are; at most 64);
 * 0, 1 and 2 when not kept go onto /dev/null, so that a stray write
 * reaches nothing and no file opened later takes their numbers. */
int confine_fds(const int *keep, size_t n, struct ab_error *err);

/* A session of its own (a terminal's ^C is its parent's to handle, not a
 * death to report); every handler its parent had back to the default,
 * SIGPIPE ignored (a peer that left is an error, not a death), none
 * blocked. */
void confine_signals(void);

/* The fds open in this process, ascending, up to max (from /proc/self/fd):
 * how many, or -1 with errno. */
int confine_open_fds(int *fds, size_t max);

/* PDEATHSIG SIGKILL; -ESRCH when parent has already gone. */
int confine_die_with(pid_t parent, struct ab_error *err);

/* As root (euid 0): setgroups(0), setresgid(gid), setresuid(uid). Then for
 * anyone: every capability out of the bounding, ambient, effective,
 * permitted and inheritable sets, and no_new_privs. Call it before the
 * helper makes a thread (capabilities are per thread). A parent-death
 * signal set before is set again (a change of uid clears it). */
int confine_identity(uid_t uid, gid_t gid, struct ab_error *err);

/* Every capability dropped, from every set (bounding first, while
 * CAP_SETPCAP is held; a plain user outside a user namespace of its own
 * has none to drop there), and no_new_privs: what a sandbox's command
 * runs with (sandbox/caps.c), and a helper that keeps its uid. */
int confine_caps_drop(struct ab_error *err);

/* RLIMIT_AS (soft and hard) to bytes; no core dump (RLIMIT_CORE 0): a
 * helper's memory may hold secrets. */
int confine_memory(size_t bytes, struct ab_error *err);

/* A Landlock ruleset with no rule yet, handling every file right the
 * kernel's ABI knows (the device ioctls of ABI 5 with CONFINE_LL_IOCTL_DEV),
 * TCP bind and connect with CONFINE_LL_NET (ABI 4), the signal and abstract
 * socket scopes with CONFINE_LL_SCOPE (ABI 6): its fd into *out, the ABI
 * into *abi, the file rights handled into *handled; *out -1 and *abi 0
 * without Landlock. Also what --isolation best without namespaces starts
 * from (sandbox/isolation_bare.c). */
enum {
	CONFINE_LL_NET = 1,
	CONFINE_LL_SCOPE = 2,
	CONFINE_LL_IOCTL_DEV = 4,
};
int confine_landlock_ruleset(unsigned flags, int *out, int *abi, uint64_t *handled,
			     struct ab_error *err);

/* Landlock (with no_new_privs): read access to the files and directories
 * of read_only (NULL ended; a missing one is skipped), every right beneath
 * the directory write_dir (an fd; -1: none), nothing else; flags as above.
 * *abi the ABI enforced; a kernel without Landlock: *abi 0, and 0. */
int confine_landlock(const char *const *read_only, int write_dir, unsigned flags, int *abi,
		     struct ab_error *err);

/* One syscall of an allowlist: nr, and unless arg is -1 the value its
 * argument number arg must have (socket's domain, ...), masked with mask
 * first when mask is not 0. */
struct confine_syscall {
	int nr;
	int arg;
	unsigned long long value, mask;
	int arg_b; /* and, unless 0, argument number arg_b (1-5) equal to value_b */
	unsigned long long value_b;
};

/* seccomp: these syscalls, everything else failing with EPERM, or killing
 * the process (SIGSYS) when kill (clone3 fails with ENOSYS either way, so
 * that glibc's threads fall back to clone, which is checked for
 * CLONE_THREAD). For every thread of the process (TSYNC). */
int confine_seccomp(const struct confine_syscall *allow, size_t n, bool kill, struct ab_error *err);

/* confine_seccomp (EPERM) of confine_base and extra[0..n). */
int confine_seccomp_base(const struct confine_syscall *extra, size_t n, struct ab_error *err);
/* The same with confine_inet too. */
int confine_seccomp_inet(const struct confine_syscall *extra, size_t n, struct ab_error *err);

/* The syscalls every confined helper needs: memory, threads (clone with
 * CLONE_THREAD only), futexes, time, signals to itself, exit, reading and
 * writing the fds it has, poll and epoll. */
extern const struct confine_syscall confine_base[];
extern const size_t confine_n_base;
/* What a helper that relays TCP connections does with its sockets (the
 * network proxy, the port relay): connect, accept4, socket options and
 * names, shutdown, send and receive. Not socket(2): each says which. */
extern const struct confine_syscall confine_inet[];
extern const size_t confine_n_inet;

/* The whole sequence for a single-threaded helper: its fds (0-2 on
 * /dev/null), RLIMIT_AS, the identity (switch_id: root's helper becomes
 * uid/gid; else every capability dropped), death with its parent, not
 * dumpable, no_new_privs, Landlock (every right beneath write_dir only, no
 * TCP, the scopes), and a seccomp allowlist last (anything else kills it). */
struct confine_spec {
	const int *keep_fds; /* the fds left open; every other is closed */
	size_t n_keep;
	bool switch_id; /* setgroups({}), setresgid(gid), setresuid(uid) */
	uid_t uid;
	gid_t gid;
	unsigned long long mem_bytes; /* RLIMIT_AS; 0: none (the sanitizers') */
	int write_dir;		      /* an fd: writes and reads only beneath it; -1: none */
	pid_t parent;		      /* killed (SIGKILL) when it dies; 0: not */
	const int *syscalls;	      /* the allowlist (libseccomp's numbers) */
	size_t n_syscalls;
};

/* Confine the calling process as spec says; -errno with err naming the
 * step that failed. *landlock_abi the ABI enforced, 0 when the kernel has
 * no Landlock (that step left out: the caller says so). */
int confine_self(const struct confine_spec *spec, int *landlock_abi, struct ab_error *err);

#endif
