/* A helper process confined before it touches hostile input (issue 49):
 * the identity of nobody when it runs as root, no capability in any set
 * (nor in the bounding set), no_new_privs, not dumpable, a bound on its
 * memory, only the fds it was given, death with its parent (if asked), and a seccomp
 * allowlist of its own. One call, in this order, in the child right after
 * fork; a failure of any step is an error (never a weaker helper). */
#ifndef AB_CONFINE_H
#define AB_CONFINE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"

struct ab_confine {
	/* When the process is root (euid 0): the uid and gid to become, no
	 * supplementary groups (0: 65534, nobody). A plain user stays itself. */
	uid_t uid;
	gid_t gid;
	/* The fds it keeps (0, 1 and 2 always stay); every other is closed. */
	const int *keep;
	size_t n_keep;
	unsigned long long max_as; /* RLIMIT_AS in bytes (0: none) */
	int parent_death_signal;   /* sent when the parent dies (0: none) */
	/* The system calls allowed (names as libseccomp knows them, NULL
	 * ended); every other fails with EPERM. NULL: no filter. */
	const char *const *syscalls;
	/* Also socket(AF_NETLINK, *, NETLINK_SOCK_DIAG): a peer's uid looked
	 * up as ss(8) does; no other socket can be made. */
	bool sock_diag;
};

/* Confine the calling process as c says; 0, or -1 with err (the process
 * is then half confined: it must exit). */
int ab_confine(const struct ab_confine *c, struct ab_error *err);

/* The fds open in this process (up to max, ascending, from /proc/self/fd);
 * how many, or -1 with errno. */
int ab_confine_open_fds(int *fds, size_t max);

#endif
