/* The overlay workspace in the view (--workspace-mode overlay,
 * docs/workspace.md): the layer (layer.h) planned with the view, and the
 * overlay mounted at /workspace when the view is built (mount.c). */
#ifndef AB_OVERLAY_H
#define AB_OVERLAY_H

#include "agentbox/agentbox.h"

struct view_plan;
struct view_entry;
struct protect_state;
struct ab_layer;

/* Launcher, end of view_plan_build(): in overlay mode make (or, for
 * --keep-changes DIR holding a layer of this workspace, reuse) the layer,
 * lock it, and mark the workspace entry and the protected binds beneath
 * it, which then come from the overlay, not from the host. */
int overlay_plan(const struct ab_config *cfg, const struct protect_state *protect,
		 struct view_plan *plan, struct ab_error *err);

/* Sandbox: mount the overlay at root/workspace, the workspace entry e
 * (its src_fd, or the launcher's idmapped tree_fd) as the lower layer. */
int overlay_mount_workspace(int root, struct view_entry *e, struct ab_layer *l,
			    struct ab_error *err);
/* Sandbox: a protected bind beneath /workspace, cloned from the overlay. */
int overlay_bind_from_view(int root, const struct view_entry *e, struct ab_error *err);

/* Launcher, once the init has its copies: keep in plan->layer what
 * checkpoints restack the workspace with (ckpt/): the view's binds beneath
 * /workspace, the paths of /tmp and home where they are overlays too
 * (owntmp.h; their tmpfs the init sends) and, as root, clones of the
 * idmapped tree of the workspace
 * and of the layer directory. Before GO: the
 * init has not used the trees yet. */
int overlay_keep_for_checkpoints(struct view_plan *plan, struct ab_error *err);

/* Sandbox (a plain user's init), while the host tree is visible: detached
 * clones of the layer directory (out[0]) and of the workspace (out[1]),
 * for the launcher to restack /workspace with (ckpt/): owned by the
 * sandbox's user namespace, where the launcher holds every capability. */
int overlay_clone_for_checkpoints(const struct view_plan *plan, int out[2], struct ab_error *err);

#endif
