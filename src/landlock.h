/* Landlock: a second, independent layer under the mounts. Commands may
 * write only beneath the view's writable places and a few device nodes,
 * and read only what the view holds. Used wherever the kernel offers it. */
#ifndef AB_LANDLOCK_H
#define AB_LANDLOCK_H

#include "agentbox/agentbox.h"
#include "mount.h"

/* Sandbox init, after the view is built: a ruleset for every command.
 * *fd is -1 (and *abi 0) when this kernel has no Landlock. */
int landlock_prepare(const struct view_plan *plan, int *fd, int *abi, struct ab_error *err);

/* Command, after no_new_privs, before seccomp. */
int landlock_enforce(int fd, struct ab_error *err);

#endif
