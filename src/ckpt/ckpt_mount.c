/* The switch of a checkpoint or a restore (ckpt.h): a new overlay of the
 * layers asked for mounted on top of the sandbox's /workspace, from a child
 * of the launcher that enters the sandbox's namespaces.
 *
 * The child: as a plain user, enters the sandbox's first user namespace
 * (the launcher made it, so it holds every capability there), which owns
 * the detached clones of the layer directory and the workspace the init
 * made for this (SYNC_VIEWNS); as root it stays where it is (the launcher
 * made the clones). It enters the commands' mount namespace, builds the overlay
 * there (fsconfig takes the layers by fd, opened in the detached clones,
 * which overlayfs takes from Linux 6.15) and puts it on top of /workspace in one move_mount: a
 * command resolving a path sees the old tree or the new, never a mix. The view's protected binds
 * beneath /workspace are bound again, read-only, from the new tree. */
#include "ckpt/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layer/layer_review.h"
#include "layer/protect.h"
#include "view/owntmp.h"
#include "util/error.h"
#include "util/util.h"

/* A layer by fd (FSCONFIG_SET_FD: overlayfs takes them from Linux 6.13;
 * detached ones from 6.15): the child is in the sandbox's mount namespace
 * then, where /proc/self is not its own. */
static int set_layer(int fs, const char *key, int dir, const char *name, struct ab_error *err)
{
	cleanup_fd int fd =
		openat(dir, name ? name : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fsconfig(fs, FSCONFIG_SET_FD, key, NULL, fd) < 0)
		return ab_error_set(err, errno,
				    "checkpoint: the overlay refuses its %s %s (Linux 6.15 or "
				    "later takes detached layers by fd)",
				    key, name ? name : "workspace");
	return 0;
}

/* A fork's layers in other layer directories ("DIR/uN": ckpt_fork.c):
 * a detached clone of each DIR beside l->dir, made where the child may
 * clone (a plain user's: a mount namespace of its own, in the sandbox's
 * user namespace). */
struct base_trees {
	char name[40];
	int fd;
};

static int open_bases(const struct ab_layer *l, char *const *names, size_t n, struct base_trees *t,
		      size_t *n_t, struct ab_error *err)
{
	const char *slash = strrchr(l->dir, '/');
	bool unshared = geteuid() == 0;
	for (size_t i = 1; i < n; i++) {
		const char *sep = strchr(names[i], '/');
		size_t k = 0, len = sep ? (size_t)(sep - names[i]) : 0;
		while (k < *n_t && (strlen(t[k].name) != len || strncmp(t[k].name, names[i], len)))
			k++;
		if (!sep || k < *n_t)
			continue;
		if (!unshared && unshare(CLONE_NEWNS) < 0)
			return ab_error_set(err, errno, "fork: cannot clone the layers");
		unshared = true;
		char path[4096];
		snprintf(t[k].name, sizeof(t[k].name), "%.*s", (int)len, names[i]);
		snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - l->dir), l->dir, t[k].name);
		t[k].fd = open_tree(AT_FDCWD, path,
				    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
		if (t[k].fd < 0)
			return ab_error_set(err, errno, "fork: cannot open the layers %s", path);
		(*n_t)++;
	}
	return 0;
}

/* The overlay of dir/names[0] (upper, with its work directory work) over
 * names[1..n-1] and base/base_name (base itself when NULL), detached: the
 * workspace's, with one clone of the layer directory holding its layers
 * (overlayfs wants the upper and the work directory on one mount) and a
 * fork's lower layers of other directories from their clones (t), or one
 * of the sandbox's own paths, whose tmpfs holds them all (view/owntmp.h). */
static int build(int dir, char *const *names, size_t n, const struct base_trees *t, size_t n_t,
		 int base, const char *base_name, const char *work, bool keep, const char *what,
		 struct ab_error *err)
{
	cleanup_fd int fs = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return ab_error_set(err, errno, "checkpoint: this kernel has no overlayfs");
	int r = 0;
	for (size_t i = 1; r >= 0 && i < n; i++) {
		/* "DIR/uN" is another directory's (t), or in dir when t is NULL */
		const char *sep = t ? strchr(names[i], '/') : NULL;
		size_t k = 0, len = sep ? (size_t)(sep - names[i]) : 0;
		while (sep && k < n_t &&
		       (strlen(t[k].name) != len || strncmp(t[k].name, names[i], len)))
			k++;
		if (sep && k == n_t)
			return ab_error_plain(err, ENOENT, "checkpoint: no layer %s", names[i]);
		r = set_layer(fs, "lowerdir+", sep ? t[k].fd : dir, sep ? sep + 1 : names[i], err);
	}
	if (r >= 0)
		r = set_layer(fs, "lowerdir+", base, base_name, err);
	if (r >= 0)
		r = set_layer(fs, "upperdir", dir, names[0], err);
	if (r >= 0)
		r = set_layer(fs, "workdir", dir, work, err);
	if (r < 0)
		return r;
	if (fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
	    (!keep && fsconfig(fs, FSCONFIG_SET_FLAG, "volatile", NULL, 0) < 0) ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return ab_error_set(err, errno, "checkpoint: cannot mount the overlay of %s", what);
	int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mnt < 0)
		return ab_error_set(err, errno, "checkpoint: cannot mount the overlay of %s", what);
	/* overlayfs that cannot make its work directory mounts read-only */
	struct statvfs sv;
	if (fstatvfs(mnt, &sv) < 0 || (sv.f_flag & ST_RDONLY)) {
		close(mnt);
		return ab_error_plain(err, EROFS,
				      "checkpoint: the overlay of %s would be read-only", what);
	}
	return mnt;
}

/* One of the sandbox's own paths (/tmp, home): a fresh upper names[0] and
 * work on its tmpfs, made and mounted as the owner of its first upper (host
 * root is not mapped in the sandbox, whose tmpfs that is: the overlay acts
 * with its maker's credentials), then the overlay over names[1..]. */
static int build_own(const struct layer_own *o, char *const *names, size_t n, const char *work,
		     struct ab_error *err)
{
	struct stat st;
	if (fstatat(o->tree, "upper", &st, AT_SYMLINK_NOFOLLOW) < 0)
		return ab_error_set(err, errno, "checkpoint: cannot read the layers of %s", o->dst);
	uid_t uid = (uid_t)setfsuid((uid_t)-1);
	gid_t gid = (gid_t)setfsgid((gid_t)-1);
	setfsgid(st.st_gid);
	setfsuid(st.st_uid);
	int r = 0;
	if (mkdirat(o->tree, names[0], 0700) < 0 ||
	    fchmodat(o->tree, names[0], st.st_mode & 07777, 0) < 0 ||
	    mkdirat(o->tree, work, 0700) < 0)
		r = ab_error_set(err, errno, "checkpoint: cannot make a layer of %s", o->dst);
	/* a fork's first switch: its base's layers ("DIR/uN", top first; the
	 * parent's own first) copied from its maker's tmpfs, where the
	 * parent's are "uN" and those it stands on "DIR/uN" as here */
	const char *parent = n > 1 ? names[1] : NULL;
	size_t plen = parent && strchr(parent, '/') ? (size_t)(strchr(parent, '/') - parent) : 0;
	struct stat x;
	for (size_t i = 1; r >= 0 && o->from >= 0 && plen && i < n; i++) {
		const char *from = names[i];
		if (!strchr(from, '/') || fstatat(o->tree, from, &x, AT_SYMLINK_NOFOLLOW) == 0)
			continue;
		if (!strncmp(from, parent, plen + 1))
			from += plen + 1;
		if (fstatat(o->from, from, &x, AT_SYMLINK_NOFOLLOW) == 0)
			r = ckpt_copy_layer(o->from, from, o->tree, names[i], err);
	}
	/* a layer of the stack this tmpfs does not have (the parent's tmpfs
	 * had none: a plain tmpfs there) adds nothing here */
	char *have[CKPT_MAX_DEPTH + 1];
	size_t k = 0;
	for (size_t i = 0; i < n && i < AB_ARRAY_SIZE(have); i++)
		if (i == 0 || fstatat(o->tree, names[i], &x, AT_SYMLINK_NOFOLLOW) == 0)
			have[k++] = names[i];
	if (r >= 0)
		r = build(o->tree, have, k, NULL, 0, o->tree, OWNTMP_BASE, work, false, o->dst,
			  err);
	setfsuid(uid);
	setfsgid(gid);
	return r;
}

/* A protected path beneath /workspace, bound again from the new tree (ws)
 * with the view's flags. What a command wrote is in that tree: the path is
 * opened once, following no symlink at all, and that fd is both the bind's
 * source and its target; one the layer lacks now, or reaches only through
 * a symlink, is skipped (nothing of the view's is there to hold). */
static int rebind(int ws, const struct layer_bind *b, struct ab_error *err)
{
	static const char top[] = "/workspace/";
	if (strncmp(b->dst, top, sizeof(top) - 1) != 0)
		return 0; /* not in the restacked tree: its bind stands */
	int fd = ab_open_beneath(ws, b->dst + sizeof(top) - 1);
	if (fd == -ENOENT || fd == -ELOOP)
		return 0;
	if (fd < 0)
		return ab_error_set(err, -fd, "checkpoint: cannot open %s", b->dst);
	cleanup_fd int at = fd;
	cleanup_fd int tree = open_tree(
		at, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
	struct mount_attr a = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
					   (b->rw ? 0 : MOUNT_ATTR_RDONLY)};
	if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0 ||
	    move_mount(tree, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return ab_error_set(err, errno, "checkpoint: cannot bind %s again", b->dst);
	return 0;
}

static int child(const struct ab_layer *l, char *const *names, size_t n, const char *work,
		 struct ab_error *err)
{
	if (geteuid() != 0 && setns(l->view_userns, CLONE_NEWUSER) < 0)
		return ab_error_set(err, errno,
				    "checkpoint: cannot enter the sandbox's user namespace");
	struct base_trees t[CKPT_MAX_DEPTH];
	size_t n_t = 0;
	if (open_bases(l, names, n, t, &n_t, err) < 0)
		return -1; /* the child's end closes them */
	/* there first: fsopen wants a mount namespace the child may mount in */
	if (setns(l->view_mntns, CLONE_NEWNS) < 0)
		return ab_error_set(err, errno,
				    "checkpoint: cannot enter the sandbox's mount namespace");
	cleanup_fd int mnt = build(l->dir_tree, names, n, t, n_t, l->ws_tree, NULL, work, l->keep,
				   l->workspace, err);
	if (mnt < 0)
		return mnt;
	/* as the sandbox's own user now: its tmpfs, where host root is not
	 * mapped, takes files only from a user it maps (and the overlay acts
	 * with its maker's credentials) */
	if (geteuid() == 0 && l->n_own && setns(l->view_userns, CLONE_NEWUSER) < 0)
		return ab_error_set(err, errno,
				    "checkpoint: cannot enter the sandbox's user namespace");
	/* every overlay made before any is attached: a failure leaves all as
	 * they were */
	int own[AB_ARRAY_SIZE(l->own)] = {-1, -1};
	int r = 0;
	for (size_t i = 0; r >= 0 && i < l->n_own; i++)
		if (l->own[i].tree >= 0 &&
		    (r = own[i] = build_own(&l->own[i], names, n, work, err)) < 0)
			own[i] = -1;
	bool ws_moved =
		r >= 0 && move_mount(mnt, "", AT_FDCWD, "/workspace", MOVE_MOUNT_F_EMPTY_PATH) == 0;
	if (r >= 0 && !ws_moved)
		r = ab_error_set(err, errno, "checkpoint: cannot mount the layers at /workspace");
	bool moved[AB_ARRAY_SIZE(l->own)] = {false, false};
	for (size_t i = 0; r >= 0 && i < l->n_own; i++)
		if (own[i] >= 0 && !(moved[i] = move_mount(own[i], "", AT_FDCWD, l->own[i].dst,
							   MOVE_MOUNT_F_EMPTY_PATH) == 0))
			r = ab_error_set(err, errno, "checkpoint: cannot mount the layers at %s",
					 l->own[i].dst);
	if (r >= 0) {
		int ws = open("/workspace", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (ws < 0)
			r = ab_error_set(err, errno, "checkpoint: cannot open the new /workspace");
		for (size_t i = 0; r >= 0 && i < l->n_binds; i++)
			r = rebind(ws, &l->binds[i], err);
		ab_close_keep_errno(ws);
	}
	/* a step failed after an attach: each new mount taken off again (the
	 * protected paths' binds with /workspace's), latest first, so the
	 * sandbox stands where it stood and its new uppers, no longer mounted
	 * where a command resolves a path, may go */
	for (size_t i = l->n_own; r < 0 && i-- > 0;)
		if (moved[i] && umount2(l->own[i].dst, MNT_DETACH) < 0)
			_exit(3); /* still there: the launcher keeps its upper */
	if (r < 0 && ws_moved && umount2("/workspace", MNT_DETACH) < 0)
		_exit(3);
	for (size_t i = 0; i < l->n_own; i++) {
		ab_close_keep_errno(own[i]);
		if (r < 0 && l->own[i].tree >= 0) { /* the next try makes them again */
			layer_remove_tree_at(l->own[i].tree, names[0]);
			layer_remove_tree_at(l->own[i].tree, work);
		}
	}
	return r < 0 ? r : 0;
}

int ckpt_mount(const struct ab_layer *l, char *const *names, size_t n, const char *work,
	       struct ab_error *err)
{
	if (l->view_mntns < 0 || l->dir_tree < 0 || l->ws_tree < 0 ||
	    (geteuid() != 0 && l->view_userns < 0))
		return ab_error_plain(err, ENOTSUP,
				      "checkpoint: this sandbox's namespaces were not kept "
				      "(made by an older agentbox?)");
	if (n == 0 || n > CKPT_MAX_DEPTH + 1)
		return ab_error_plain(err, EINVAL, "checkpoint: %zu layers", n);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return ab_error_set(err, errno, "checkpoint: pipe");
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return ab_error_set(err, e, "checkpoint: fork");
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		struct ab_error e = {0};
		int r = child(l, names, n, work, &e);
		if (r < 0 && write(p[1], &e, sizeof(e)) != (ssize_t)sizeof(e))
			_exit(2);
		_exit(r < 0);
	}
	close(p[1]);
	struct ab_error e = {0};
	ssize_t got;
	do
		got = read(p[0], &e, sizeof(e));
	while (got < 0 && errno == EINTR);
	close(p[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (got == (ssize_t)sizeof(e)) {
		e.msg[sizeof(e.msg) - 1] = '\0';
		return ab_error_plain(err, e.code ? e.code : EIO, "%s", e.msg);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
		return ab_error_plain(err, ESTALE,
				      "checkpoint: the switch failed after its mounts were made, "
				      "and they could not be taken off: remove this sandbox "
				      "(agentbox rm)");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return ab_error_plain(err, EIO, "checkpoint: the mount helper failed");
	return 0;
}
