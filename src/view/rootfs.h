/* --rootfs DIR: the view's system from a tree of the caller's instead of
 * the host's /usr, /bin, /lib*, /etc (docs/rootfs.md). */
#ifndef AB_ROOTFS_H
#define AB_ROOTFS_H

#include "agentbox/agentbox.h"
#include "view/mount.h"

/* Launcher: check that cfg->rootfs can run what the sandbox will run (the
 * command's interpreter, or /bin/sh for a session: present, of this
 * machine's architecture, with its dynamic loader; an etc/passwd), then
 * plan its top-level entries read-only (symbolic links as links) except
 * where the view puts its own, and the sandbox user's line in its
 * /etc/passwd and /etc/group. */
int rootfs_plan(const struct ab_config *cfg, struct view_plan *plan, struct ab_error *err);

/* The checks of rootfs_plan on the tree at root (an O_PATH fd; an image's
 * layers merged, view/image.c), and the sandbox user's account lines. */
int rootfs_check_tree(const struct ab_config *cfg, int root, struct view_plan *plan,
		      struct ab_error *err);
/* Whether the tree's top-level entry name stays out of the view (*skip):
 * where the view mounts its own. */
int rootfs_top_level_skipped(const struct ab_config *cfg, int root, const char *name, bool *skip,
			     struct ab_error *err);
/* The tree's top-level names, sorted (at most 512). */
int rootfs_read_top_level(const struct ab_config *cfg, int root, char ***names, size_t *n,
			  struct ab_error *err);

#endif
