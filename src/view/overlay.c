/* The overlay workspace in the view (overlay.h): the layer (layer.h) made
 * when the view is planned, and mounted at /workspace when it is built. */
#include "view/overlay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/parse.h"
#include "layer/layer.h"
#include "view/mount.h"
#include "view/owntmp.h"
#include "layer/protect.h"
#include "util/util.h"

#define LOWER_STAGE ".agentbox-lower"
#define LAYER_STAGE ".agentbox-layer"

int overlay_plan(const struct ab_config *cfg, const struct protect_state *protect,
		 struct view_plan *plan, struct ab_error *err)
{
	if (cfg->workspace_mode != AB_WORKSPACE_OVERLAY) {
		if (cfg->keep_changes)
			return ab_error_plain(err, EINVAL,
					      "--keep-changes: only with --workspace-mode overlay");
		return 0;
	}
	/* on failure view_plan_free() removes what was made, never a
	 * directory the user named (keep) */
	int r = layer_create(cfg, protect, &plan->layer, err);
	if (r < 0)
		return r;
	const struct view_entry *ws = NULL;
	for (size_t i = 0; i < plan->n; i++) {
		struct view_entry *e = &plan->e[i];
		if (e->kind != VIEW_BIND || e->user)
			continue;
		if (strcmp(e->dst, "/workspace") == 0) {
			e->overlay = true;
			ws = e;
		} else if (ab_path_is_under(e->dst, "/workspace")) {
			e->from_view = true;
			e->host_open = false; /* nothing for idmap.c to open */
		}
	}
	/* a --bind of the workspace itself elsewhere (agentbox e2b's
	 * /home/user): a link to /workspace, which names the overlay of the
	 * moment; a bind would write beneath the overlay, into its lower
	 * layer, and keep the first overlay after a checkpoint's switch */
	for (size_t i = 0; ws && i < plan->n; i++) {
		struct view_entry *e = &plan->e[i];
		if (e->kind != VIEW_BIND || !e->user || !e->rw || !e->is_dir || e->dev != ws->dev ||
		    e->ino != ws->ino)
			continue;
		char *to = strdup("/workspace");
		if (!to)
			return ab_error_set(err, ENOMEM, "planning the view");
		free(e->src);
		e->src = to;
		e->kind = VIEW_SYMLINK;
		e->host_open = false;
	}
	owntmp_plan(plan); /* /tmp and home stack with it (owntmp.h) */
	return 0;
}

static int new_overlay(int root, const struct ab_layer *l, struct ab_error *err)
{
	char lower[64], upper[80], work[80];
	snprintf(lower, sizeof(lower), "/proc/self/fd/%d/" LOWER_STAGE, root);
	if (l->tree_fd >= 0) {
		snprintf(upper, sizeof(upper), "/proc/self/fd/%d/" LAYER_STAGE "/upper", root);
		snprintf(work, sizeof(work), "/proc/self/fd/%d/" LAYER_STAGE "/work", root);
	} else {
		snprintf(upper, sizeof(upper), "/proc/self/fd/%d", l->upper_fd);
		snprintf(work, sizeof(work), "/proc/self/fd/%d", l->work_fd);
	}
	cleanup_fd int fs = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return ab_error_set(err, errno,
				    "--workspace-mode overlay: this kernel has no overlayfs");
	/* userxattr: overlayfs mounted in a user namespace keeps its whiteouts
	 * and opaque marks in user.overlay.* (Linux 5.11) */
	if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", lower, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", upper, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "workdir", work, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
	    /* a layer that goes with the sandbox need not survive a crash:
	     * no syncs of its filesystem (the overlay's unmount synced all of
	     * it, tens of ms per run; Linux 5.10) */
	    (!l->keep && fsconfig(fs, FSCONFIG_SET_FLAG, "volatile", NULL, 0) < 0) ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return ab_error_set(err, errno,
				    "--workspace-mode overlay: cannot mount the overlay of %s "
				    "with the layer %s",
				    l->workspace, l->dir);
	int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mnt < 0)
		return ab_error_set(err, errno, "cannot mount the overlay of %s", l->workspace);
	return mnt;
}

/* overlayfs takes its layers by path and clones them, which Linux before
 * 6.15 does only for mounts attached in the caller's namespace: the lower
 * tree is staged in the new root (attached at /tmp) while the overlay is
 * made, then detached. */
int overlay_mount_workspace(int root, struct view_entry *e, struct ab_layer *l,
			    struct ab_error *err)
{
	cleanup_fd int tree = e->tree_fd >= 0 ? fcntl(e->tree_fd, F_DUPFD_CLOEXEC, 3)
					      : open_tree(e->src_fd, "",
							  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
								  AT_EMPTY_PATH | AT_RECURSIVE);
	if (tree < 0)
		return ab_error_set(err, errno, "cannot bind the workspace %s", e->src);
	struct mount_attr ro = {.attr_set =
					MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
	if (e->tree_fd < 0 &&
	    mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &ro, sizeof(ro)) < 0)
		return ab_error_set(err, errno,
				    "cannot make the workspace's lower layer read-only");
	if (mkdirat(root, LOWER_STAGE, 0700) < 0 ||
	    move_mount(tree, "", root, LOWER_STAGE, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return ab_error_set(err, errno, "cannot stage the workspace's lower layer");
	if (l->tree_fd >= 0 &&
	    (mkdirat(root, LAYER_STAGE, 0700) < 0 ||
	     move_mount(l->tree_fd, "", root, LAYER_STAGE, MOVE_MOUNT_F_EMPTY_PATH) < 0))
		return ab_error_set(err, errno, "cannot stage the layer %s", l->dir);
	cleanup_fd int ovl = new_overlay(root, l, err);
	int r = ovl;
	if (ovl >= 0) {
		r = 0;
		if (mkdirat(root, "workspace", 0755) < 0 && errno != EEXIST)
			r = ab_error_set(err, errno, "cannot create mount point /workspace");
		else if (move_mount(ovl, "", root, "workspace", MOVE_MOUNT_F_EMPTY_PATH) < 0)
			r = ab_error_set(err, errno, "cannot mount the overlay at /workspace");
	}
	/* the overlay holds its own clone of the lower tree */
	if (umount2("/tmp/" LOWER_STAGE, MNT_DETACH) < 0 && r == 0)
		r = ab_error_set(err, errno, "cannot detach the staged lower layer");
	if (unlinkat(root, LOWER_STAGE, AT_REMOVEDIR) < 0 && r == 0)
		r = ab_error_set(err, errno, "cannot remove the staged lower layer");
	if (l->tree_fd >= 0 && umount2("/tmp/" LAYER_STAGE, MNT_DETACH) < 0 && r == 0)
		r = ab_error_set(err, errno, "cannot detach the staged layer");
	if (l->tree_fd >= 0 && unlinkat(root, LAYER_STAGE, AT_REMOVEDIR) < 0 && r == 0)
		r = ab_error_set(err, errno, "cannot remove the staged layer");
	return r;
}

int overlay_bind_from_view(int root, const struct view_entry *e, struct ab_error *err)
{
	uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (e->rw ? 0 : MOUNT_ATTR_RDONLY);
	cleanup_fd int tree =
		open_tree(root, e->dst + 1,
			  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
	if (tree < 0)
		return ab_error_set(err, errno, "cannot bind %s of the overlay", e->dst);
	struct mount_attr attr = {.attr_set = attrs};
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		return ab_error_set(err, errno, "cannot set the flags of %s", e->dst);
	cleanup_fd int target = openat(root, e->dst + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (target < 0)
		return ab_error_set(err, errno, "cannot open %s in the overlay", e->dst);
	if (move_mount(tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return ab_error_set(err, errno, "cannot mount at %s", e->dst);
	return 0;
}

int overlay_keep_for_checkpoints(struct view_plan *plan, struct ab_error *err)
{
	struct ab_layer *l = plan->layer;
	for (size_t i = 0; i < plan->n; i++) {
		const struct view_entry *e = &plan->e[i];
		/* /tmp and home: their tmpfs comes from the init (owntmp.h) */
		if (e->own_layer && l->n_own < AB_ARRAY_SIZE(l->own) &&
		    !(l->own[l->n_own++].dst = strdup(e->dst)))
			return ab_error_set(err, ENOMEM, "planning the checkpoints");
		/* as root: clones of its own (a plain user's come from the
		 * init: overlay_clone_for_checkpoints); the init attaches the
		 * tree it was given and detaches it again, which a copy of the
		 * fd would follow */
		bool root = geteuid() == 0 && e->overlay;
		if (root && l->ws_tree < 0) {
			l->ws_tree = e->tree_fd >= 0
					     ? open_tree(e->tree_fd, "",
							 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
								 AT_EMPTY_PATH)
					     : open_tree(AT_FDCWD, e->src,
							 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
								 AT_SYMLINK_NOFOLLOW);
			if (l->ws_tree < 0)
				return ab_error_set(err, errno, "cannot keep the workspace's tree");
		}
		if (root && l->dir_tree < 0 &&
		    (l->dir_tree = open_tree(AT_FDCWD, l->dir,
					     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
						     AT_SYMLINK_NOFOLLOW)) < 0)
			return ab_error_set(err, errno, "cannot keep the layer %s", l->dir);
		if (!e->from_view)
			continue;
		struct layer_bind *b = realloc(l->binds, (l->n_binds + 1) * sizeof(*b));
		if (!b)
			return ab_error_set(err, ENOMEM, "planning the checkpoints");
		l->binds = b;
		if (!(b[l->n_binds].dst = strdup(e->dst)))
			return ab_error_set(err, ENOMEM, "planning the checkpoints");
		b[l->n_binds++].rw = e->rw;
	}
	return 0;
}

int overlay_clone_for_checkpoints(const struct view_plan *plan, int out[2], struct ab_error *err)
{
	out[0] = out[1] = -1;
	for (size_t i = 0; i < plan->n; i++)
		if (plan->e[i].overlay && plan->e[i].src_fd >= 0)
			out[1] = open_tree(plan->e[i].src_fd, "",
					   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	out[0] = open_tree(AT_FDCWD, plan->layer->dir,
			   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (out[0] >= 0 && out[1] >= 0)
		return 0;
	int e = errno;
	ab_close_keep_errno(out[0]);
	ab_close_keep_errno(out[1]);
	out[0] = out[1] = -1;
	return ab_error_set(err, e, "cannot open the layer %s for checkpoints", plan->layer->dir);
}
