/* A helper process confined before it touches what is hostile: the
 * launcher forks it to parse what it must not parse itself (an image
 * layer's tar, docs/security.md), and the child calls confine_self once it
 * has opened all it needs. In a fixed order: every fd but its own closed,
 * a bound on its memory, the identity switched (root's helper becomes an
 * unprivileged uid), every capability dropped from every set,
 * PR_SET_PDEATHSIG, not dumpable, no_new_privs, Landlock (writes only
 * beneath one directory, reads of nothing else, no signals or abstract
 * sockets out), and a seccomp allowlist last. Generic: the caller names
 * its fds, its directory and its system calls. */
#ifndef AB_CONFINE_SPEC_H
#define AB_CONFINE_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"

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

/* Confine the calling process (a single-threaded child) as spec says;
 * -errno with err naming the step that failed. When the kernel has no
 * Landlock, that step is left out and *landlock_abi is 0 (the caller
 * says so); else it is the ABI enforced. */
int confine_self(const struct confine_spec *spec, int *landlock_abi, struct ab_error *err);

/* A Landlock ruleset with no rule yet, handling every file right the
 * kernel's ABI knows (the device ioctls of ABI 5 with CONFINE_LL_IOCTL_DEV),
 * TCP bind and connect with CONFINE_LL_NET (ABI 4), the signal and abstract
 * socket scopes with CONFINE_LL_SCOPE (ABI 6): its fd into *out, the ABI
 * into *abi, the file rights handled into *handled; *out -1 and *abi 0
 * without Landlock. Used by confine_self and by --isolation best without
 * namespaces (sandbox/isolation_bare.c). */
enum {
	CONFINE_LL_NET = 1,
	CONFINE_LL_SCOPE = 2,
	CONFINE_LL_IOCTL_DEV = 4,
};
int confine_landlock_ruleset(unsigned flags, int *out, int *abi, uint64_t *handled,
			     struct ab_error *err);

/* Every capability dropped, from every set (bounding first, while
 * CAP_SETPCAP is held), and no_new_privs: what a sandbox's command runs
 * with (sandbox/caps.c) and each confined helper. */
int confine_caps_drop(struct ab_error *err);

#endif
