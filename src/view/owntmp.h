/* The sandbox's own writable paths (/tmp, the home directory) as overlays
 * whose uppers stack as the workspace's do, so that a checkpoint takes them
 * too (docs/checkpoints.md). Each is an overlay over one tmpfs of its own,
 * of the size the plain tmpfs had, which holds every layer:
 *   base/      the empty lowest layer
 *   upper/     the first upper (work/ its work directory)
 *   uN/, wN/   the upper of the Nth switch (ckpt/ckpt_mount.c), named as
 *              the workspace's layer of the same switch
 * The tmpfs is in the sandbox's memory and goes with it. */
#ifndef AB_OWNTMP_H
#define AB_OWNTMP_H

#include "agentbox/agentbox.h"

struct view_plan;
struct view_entry;

#define OWNTMP_BASE "base"

/* Launcher, planning an overlay workspace's view (overlay.c): mark /tmp
 * and the home directory own_layer, unless a mount of the view lies
 * beneath one (a restacked overlay would cover it: that path stays a
 * plain tmpfs, which a checkpoint does not take). */
void owntmp_plan(struct view_plan *plan);

/* Sandbox, building the view (mount.c): the layers' directories in fs, e's
 * new tmpfs (detached), and the overlay over them, detached, into *mnt;
 * e->own_fd a clone of the tmpfs for the launcher. *mnt is -1 (and nothing made) when this kernel's
 * tmpfs keeps no user.* xattrs (before Linux 6.6), which overlayfs in a user namespace needs: e is
 * then a plain tmpfs. */
int owntmp_overlay(int root, struct view_entry *e, int fs, int *mnt, struct ab_error *err);

#endif
