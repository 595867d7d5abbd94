/* A delegated cgroup from systemd, for unprivileged users on cgroup v2 hosts
 * whose own cgroup is not theirs to divide: the user's service manager is
 * asked over D-Bus (StartTransientUnit) for a transient scope with
 * Delegate=yes holding the calling process, as crun's and Podman's systemd
 * cgroup managers do. libsystemd is loaded only then (dlopen), so runs
 * that need no scope (root, an existing delegation, v1) never pay for it. */
#ifndef AB_SYSTEMD_SCOPE_H
#define AB_SYSTEMD_SCOPE_H

#include <stddef.h>

/* Move the calling process into a new transient scope named unit (ending
 * in ".scope") with Delegate=yes, on the user manager's bus, and wait for
 * systemd to finish the job. 0 when done; a negative errno and why (one
 * line a user can act on) otherwise. */
int ab_systemd_scope(const char *unit, char *why, size_t why_len);

/* Is the systemd unit this process belongs to (a scope or service of the
 * user's manager) one with Delegate=yes? 1 or 0; a negative errno when
 * systemd cannot say (no libsystemd, no user manager, not its unit). The
 * user manager marks its delegated cgroups with no xattr to read instead. */
int ab_systemd_delegated(void);

#endif
