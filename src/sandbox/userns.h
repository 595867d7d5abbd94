/* Namespaces and identity: which namespaces a sandbox gets, the uid/gid
 * maps the launcher writes, and the switch to the sandbox user inside. */
#ifndef AB_USERNS_H
#define AB_USERNS_H

#include <stdbool.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"

/* clone(2) flags for a sandbox with this configuration (the cgroup
 * namespace is made by the init itself; CLONE_NEWNET is left out of the
 * clone where the launcher makes it beside, userns_net_beside). */
unsigned long userns_clone_flags(const struct ab_config *cfg);

/* Launcher: map cfg->uid/gid inside to cfg->host_uid/gid outside, one id
 * each, for the child pid. */
int userns_write_maps(pid_t pid, const struct ab_config *cfg, struct ab_error *err);

/* Sandbox, once the maps exist: become cfg->uid/gid, and drop every
 * supplementary group when the launcher is root (an unprivileged launcher's
 * own groups stay: setgroups is denied to it). Capabilities in the new user
 * namespace are kept for building the view. */
int userns_become_sandbox_user(const struct ab_config *cfg, bool by_root, struct ab_error *err);

/* Sandbox, once the view is built: enter a nested user and mount namespace
 * mapping the sandbox user to itself, so every mount of the view is locked. */
int userns_lock_view(const struct ab_config *cfg, struct ab_error *err);

/* Sandbox, with the capabilities of its user namespace: half of the host's
 * per-user inotify limits for it, so it cannot exhaust the user's own
 * (best effort: where /proc/sys is read-only, nothing changes). */
void userns_limit_inotify(void);

/* Sandbox: host name and a loopback interface that is up (already, where
 * the launcher made the network namespace: net_beside). */
int userns_setup_uts_net(const struct ab_config *cfg, bool net_beside, struct ab_error *err);

/* Whether the launcher makes the sandbox's network namespace beside the
 * clone (userns_make_net) rather than in it: wherever the sandbox has one
 * of its own, unless the launcher runs under a seccomp filter (a
 * container's, which may refuse setns; the clone is what such profiles
 * allow, docs/containers.md). */
bool userns_net_beside(const struct ab_config *cfg);

/* Launcher: a network namespace owned by the sandbox's user namespace
 * (userns, an fd of it), with loopback up, made by a child that enters
 * that namespace while the init builds the view. Returns its fd, or
 * -errno. */
int userns_make_net(int userns, struct ab_error *err);

#endif
