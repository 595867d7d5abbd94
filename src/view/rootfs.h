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

#endif
