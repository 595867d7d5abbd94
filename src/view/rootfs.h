/* --rootfs DIR: the view's system from a tree of the caller's instead of
 * the host's /usr, /bin, /lib*, /etc (docs/rootfs.md). */
#ifndef AB_ROOTFS_H
#define AB_ROOTFS_H

#include <sys/stat.h>

#include "agentbox/agentbox.h"
#include "view/mount.h"

/* Launcher: check that cfg->rootfs can run what the sandbox will run (the
 * command's interpreter, or /bin/sh for a session: present, of this
 * machine's architecture, with its dynamic loader; an etc/passwd), then
 * plan its top-level entries read-only (symbolic links as links) except
 * where the view puts its own, and the sandbox user's line in its
 * /etc/passwd and /etc/group. */
int rootfs_plan(const struct ab_config *cfg, struct view_plan *plan, struct ab_error *err);

/* What a system tree's planner does with a top-level entry name of the
 * tree at root that is not a symlink (*st: its lstat). */
typedef int rootfs_entry_fn(const struct ab_config *cfg, int root, const char *name,
			    const struct stat *st, struct view_plan *plan, void *arg,
			    struct ab_error *err);

/* The tree at root (an O_PATH fd; an image's layers merged, view/image.c)
 * as the view's system: the checks of rootfs_plan, the sandbox user's
 * account lines, then each top-level entry but where the view mounts its
 * own: a symlink planned as one, the others handed to entry. An error
 * names label (the option) and the entry (in host_dir, when given, else
 * as /name). */
int rootfs_plan_tree(const struct ab_config *cfg, int root, const char *label, const char *host_dir,
		     struct view_plan *plan, rootfs_entry_fn *entry, void *arg,
		     struct ab_error *err);

#endif
