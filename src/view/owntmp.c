/* /tmp and the home directory as overlays a checkpoint restacks
 * (owntmp.h). */
#include "view/owntmp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/error.h"
#include "util/parse.h"
#include "util/util.h"
#include "view/mount.h"

#define OWN_STAGE ".agentbox-own"

void owntmp_plan(struct view_plan *plan)
{
	for (size_t i = 0; i < plan->n; i++) {
		struct view_entry *e = &plan->e[i];
		if (e->kind != VIEW_TMPFS || e->user)
			continue;
		e->own_layer = true;
		/* a file copied in (bindfile.h) is no mount: it is written
		 * through the overlay like any other */
		for (size_t j = 0; j < plan->n; j++)
			if (j != i && !plan->e[j].copy && strcmp(plan->e[j].dst, e->dst) != 0 &&
			    ab_path_is_under(plan->e[j].dst, e->dst))
				e->own_layer = false;
	}
}

/* base, upper (e's mode) and work in the new tmpfs; false when its
 * directories keep no user.* xattrs (tmpfs before Linux 6.6). */
static int make_dirs(int fs, const struct view_entry *e, bool *xattrs, struct ab_error *err)
{
	if (mkdirat(fs, OWNTMP_BASE, 0755) < 0 || mkdirat(fs, "upper", 0700) < 0 ||
	    fchmodat(fs, "upper", e->mode, 0) < 0 || mkdirat(fs, "work", 0700) < 0)
		return ab_error_set(err, errno, "cannot make the layers of %s", e->dst);
	cleanup_fd int up = openat(fs, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (up < 0)
		return ab_error_set(err, errno, "cannot open the layer of %s", e->dst);
	*xattrs = fsetxattr(up, "user.agentbox", "1", 1, 0) == 0;
	if (*xattrs)
		fremovexattr(up, "user.agentbox");
	return 0;
}

static int new_overlay(int root, const struct view_entry *e, struct ab_error *err)
{
	char lower[96], upper[96], work[96];
	snprintf(lower, sizeof(lower), "/proc/self/fd/%d/" OWN_STAGE "/" OWNTMP_BASE, root);
	snprintf(upper, sizeof(upper), "/proc/self/fd/%d/" OWN_STAGE "/upper", root);
	snprintf(work, sizeof(work), "/proc/self/fd/%d/" OWN_STAGE "/work", root);
	cleanup_fd int fs = fsopen("overlay", FSOPEN_CLOEXEC);
	/* userxattr: whiteouts and opaque marks in user.overlay.* (Linux 5.11);
	 * volatile: the tmpfs has nothing to sync */
	if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", lower, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", upper, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "workdir", work, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FLAG, "volatile", NULL, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return ab_error_set(err, errno, "cannot mount the overlay of %s", e->dst);
	int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mnt < 0)
		return ab_error_set(err, errno, "cannot mount the overlay of %s", e->dst);
	return mnt;
}

/* overlayfs takes its layers by path and clones them, and open_tree clones,
 * only from mounts attached in the caller's namespace before Linux 6.15:
 * the tmpfs is staged in the new root (attached at /tmp) meanwhile. */
int owntmp_overlay(int root, struct view_entry *e, int fs, int *mnt, struct ab_error *err)
{
	*mnt = -1;
	bool xattrs = false;
	int r = make_dirs(fs, e, &xattrs, err);
	if (r < 0 || !xattrs)
		return r;
	if (mkdirat(root, OWN_STAGE, 0700) < 0 ||
	    move_mount(fs, "", root, OWN_STAGE, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return ab_error_set(err, errno, "cannot stage the layers of %s", e->dst);
	e->own_fd = open_tree(root, OWN_STAGE, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (e->own_fd < 0)
		r = ab_error_set(err, errno, "cannot keep the layers of %s", e->dst);
	else
		r = *mnt = new_overlay(root, e, err);
	/* the overlay and the launcher's clone hold the tmpfs */
	if (umount2("/tmp/" OWN_STAGE, MNT_DETACH) < 0 && r >= 0)
		r = ab_error_set(err, errno, "cannot detach the staged layers of %s", e->dst);
	if (unlinkat(root, OWN_STAGE, AT_REMOVEDIR) < 0 && r >= 0)
		r = ab_error_set(err, errno, "cannot remove the staged layers of %s", e->dst);
	if (r < 0 && *mnt >= 0) {
		close(*mnt);
		*mnt = -1;
	}
	return r < 0 ? r : 0;
}
