/* Internal to the cgroup code (cgroup.c): where an unprivileged launcher's
 * cgroup v2 parent comes from (a delegated cgroup it divides, or a scope
 * systemd makes for it), and the controllers handed down to children.
 * Nothing outside cgroup.c includes this. */
#ifndef AB_CGROUP_DELEGATE_H
#define AB_CGROUP_DELEGATE_H

#include <stdbool.h>
#include <stddef.h>

/* The shared leaf other processes of a delegated cgroup move into; not
 * "agentbox-...", so never taken for a dead launcher's leftovers. */
#define AB_CG_OTHERS_LEAF "agentbox.others"

/* A cgroup path without the leaf agentbox put this process in. */
void ab_cg_strip_leaf(char *rel);

/* memory, pids and cpu (those offered) for dir's children, in one write;
 * -EBUSY: dir has processes of its own. */
int ab_cg_enable_controllers(const char *dir);

/* Make dir a parent the sandbox's cgroup can take every controller from,
 * moving this launcher (when mine: it is in dir) and, in a delegated
 * cgroup, the other processes there into leaves. */
int ab_cg_v2_prepare(const char *dir, const char *name, bool mine);

/* The cgroup an unprivileged launcher divides: its own, else a
 * Delegate=yes scope systemd makes for it (named after name). rel gets its
 * path below root; why says what failed when neither works. */
int ab_cg_v2_user_parent(const char *root, const char *name, char *rel, size_t len, char *why,
			 size_t why_len);

#endif
