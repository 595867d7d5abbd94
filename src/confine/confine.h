/* Confining a helper process that parses what is hostile (design.md,
 * invariant 12): the network proxy (net/netproc.c), the image reader.
 * Each step is one call, in the order a helper takes them:
 *
 *   confine_fds          close every fd but the ones it keeps
 *   confine_signals      a session of its own, signals at their defaults
 *   confine_die_with     die (SIGKILL) with the process that started it
 *   confine_identity     as root: an unprivileged uid/gid, no groups; then
 *                        no capability in any set, no_new_privs
 *   confine_memory       RLIMIT_AS, no core dump
 *   confine_landlock     read-only access to the listed paths, or none to
 *                        any (before the helper makes threads: Landlock is
 *                        per thread)
 *   confine_seccomp      an allowlist of syscalls for every thread, last
 *
 * Every function returns 0 or a negative errno and fills err. */
#ifndef AB_CONFINE_H
#define AB_CONFINE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/error.h"

/* Close every fd but keep[0..n) (which stay as they are). */
int confine_fds(const int *keep, size_t n, struct ab_error *err);

/* A session of its own (a terminal's ^C is its parent's to handle, not a
 * death to report); every handler its parent had back to the default,
 * SIGPIPE ignored (a peer that left is an error, not a death), none
 * blocked. */
void confine_signals(void);

/* PDEATHSIG SIGKILL; -ESRCH when parent has already gone. */
int confine_die_with(pid_t parent, struct ab_error *err);

/* The identity an unprivileged helper takes when root starts it: the
 * owner of path when that is not root, else nobody (65534). */
void confine_pick_identity(const char *path, uid_t *uid, gid_t *gid);

/* As root (euid 0): setgroups(0), setresgid(gid), setresuid(uid). Then for
 * anyone: every capability out of the bounding, ambient, effective,
 * permitted and inheritable sets, and no_new_privs. Call it before the
 * helper makes a thread (capabilities are per thread). */
int confine_identity(uid_t uid, gid_t gid, struct ab_error *err);

/* RLIMIT_AS (soft and hard) to bytes; no core dump (RLIMIT_CORE 0): a
 * helper's memory may hold secrets. */
int confine_memory(size_t bytes, struct ab_error *err);

/* Landlock: read access to the files and directories of read_only (NULL
 * ended; a missing one is skipped), nothing else on the filesystem, and
 * (ABI 6) no abstract unix socket or signal outside its own domain. A
 * kernel without Landlock: *applied false, 0. */
int confine_landlock(const char *const *read_only, bool *applied, struct ab_error *err);

/* One syscall of an allowlist: nr, and unless arg is -1 the value its
 * argument number arg must have (socket's domain, ...), masked with mask
 * first when mask is not 0. */
struct confine_syscall {
	int nr;
	int arg;
	unsigned long long value, mask;
};

/* seccomp: these syscalls, everything else failing with EPERM (clone3
 * with ENOSYS, so that glibc's threads fall back to clone, which is
 * checked for CLONE_THREAD). For every thread of the process (TSYNC). */
int confine_seccomp(const struct confine_syscall *allow, size_t n, struct ab_error *err);

/* The syscalls every confined helper needs: memory, threads (clone with
 * CLONE_THREAD only), futexes, time, signals to itself, exit, reading and
 * writing the fds it has, poll and epoll. */
extern const struct confine_syscall confine_base[];
extern const size_t confine_n_base;

#endif
