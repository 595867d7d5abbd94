/* The filesystem view (design.md, "Filesystem view").
 *
 * Host side: view_plan_build() lists every mount in the order it is made and
 * checks sources and destinations, so bad input fails before anything exists.
 *
 * Sandbox side, in the new mount namespace: view_open_sources() opens every
 * source while the host tree is still visible, then view_build() makes the
 * mounts with the fd-based mount API (open_tree, mount_setattr, fsopen,
 * move_mount; Linux 5.12), so no path string a planted symlink could
 * redirect is ever resolved on the host side of the view. Mount targets are
 * created inside the fresh root by walking components with O_NOFOLLOW. */
#include "view/mount.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "view/config.h"
#include "util/error.h"
#include "layer/layer.h"
#include "view/overlay.h"
#include "view/image.h"
#include "view/bindfile.h"
#include "view/rootfs.h"
#include "view/owntmp.h"
#include "util/parse.h"
#include "util/util.h"

static const char *const system_dirs[] = {
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
};

static const char *const dev_nodes[] = {
	"null", "zero", "full", "random", "urandom", "tty",
};

/* ---- host side: the plan ---- */

static int plan_add_tmpfs(struct view_plan *plan, const char *dst, unsigned mode, bool user,
			  unsigned long long size, struct ab_error *err)
{
	struct view_entry *e = view_plan_add(plan, VIEW_TMPFS, NULL, dst);
	if (!e)
		return ab_error_set(err, ENOMEM, "planning the view");
	e->rw = true;
	e->is_dir = true;
	e->user = user;
	e->size = size;
	e->mode = mode;
	return 0;
}

static int plan_add_system(struct view_plan *plan, struct ab_error *err)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(system_dirs); i++) {
		const char *d = system_dirs[i];
		struct stat st;
		if (lstat(d, &st) < 0)
			continue; /* the host has no such directory */
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlink(d, target, sizeof(target) - 1);
			if (n < 0)
				return ab_error_set(err, errno, "cannot read the link %s", d);
			target[n] = '\0';
			if (!view_plan_add(plan, VIEW_SYMLINK, target, d))
				return ab_error_set(err, ENOMEM, "planning the view");
		} else if (S_ISDIR(st.st_mode)) {
			int r = view_plan_add_bind(plan, "system directory", d, d, false, false,
						   err);
			if (r < 0)
				return r;
			/* the host's own, readable by anyone: bound as they are */
			plan->e[plan->n - 1].host_open = false;
		}
	}
	return 0;
}

/* Where a user mount may not go: the view's own mount points, and anything
 * beneath /proc, /dev or a symbolic link of the view. */
static int check_user_dst(const struct view_plan *plan, const char *opt, const char *dst,
			  struct ab_error *err)
{
	if (strcmp(dst, "/") == 0)
		return ab_error_plain(err, EINVAL, "%s: cannot mount over / of the view", opt);
	for (size_t i = 0; i < plan->n; i++) {
		const struct view_entry *e = &plan->e[i];
		bool beneath_only =
			e->kind == VIEW_PROC || e->kind == VIEW_DEV || e->kind == VIEW_SYMLINK;
		if (strcmp(dst, e->dst) == 0)
			return ab_error_plain(err, EEXIST,
					      "%s: %s collides with the view's own %s mount", opt,
					      dst, e->dst);
		if (beneath_only && ab_path_is_under(dst, e->dst))
			return ab_error_plain(err, EINVAL,
					      "%s: %s is beneath %s, where nothing can be mounted",
					      opt, dst, e->dst);
	}
	return 0;
}

static bool plan_has_dst(const struct view_plan *plan, const char *dst)
{
	for (size_t i = 0; i < plan->n; i++)
		if (strcmp(plan->e[i].dst, dst) == 0)
			return true;
	return false;
}

static bool protect_binds(const struct protect_state *protect, const char *rel)
{
	for (size_t i = 0; i < protect->n; i++)
		if (protect->e[i].bindable && strcmp(protect->e[i].rel, rel) == 0)
			return true;
	return false;
}

/* A read-only bind keeps a protected path from being changed, but not its
 * parent from being renamed away and rebuilt (mv .git .old; mkdir -p
 * .git/hooks): bind each parent read-write over itself, so that it is a
 * mount point, which rename(2) and rmdir(2) refuse with EBUSY. The scan
 * found the whole path free of symlinks. */
static int plan_protect_parents(struct view_plan *plan, const char *ws,
				const struct protect_state *protect, const char *rel,
				struct ab_error *err)
{
	for (const char *slash = strchr(rel, '/'); slash; slash = strchr(slash + 1, '/')) {
		char parent[4096], src[8192], dst[4200];
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - rel), rel);
		snprintf(dst, sizeof(dst), "/workspace/%s", parent);
		if (plan_has_dst(plan, dst) || protect_binds(protect, parent))
			continue;
		snprintf(src, sizeof(src), "%s/%s", ws, parent);
		int r = view_plan_add_bind(plan, "--protect", src, dst, true, false, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int view_plan_build(const struct ab_config *cfg, const struct protect_state *protect,
		    struct view_plan *plan, struct ab_error *err)
{
	int r;
	view_plan_init(plan);
	plan->bind_proc = cfg->isolation_missing & AB_MISSING_OWN_PROC;

	/* --rootfs: its tree instead of the host's system directories */
	if ((r = cfg->rootfs  ? rootfs_plan(cfg, plan, err)
		 : cfg->image ? image_plan(cfg, plan, err)
			      : plan_add_system(plan, err)) < 0)
		return r;
	if ((r = view_plan_add_bind(plan, "--workspace", cfg->workspace, "/workspace", true, false,
				    err)) < 0)
		return r;
	for (size_t i = 0; protect && i < protect->n; i++) {
		const struct protect_entry *p = &protect->e[i];
		if (!p->bindable)
			continue;
		if ((r = plan_protect_parents(plan, cfg->workspace, protect, p->rel, err)) < 0)
			return r;
		char src[8192], dst[4200];
		snprintf(src, sizeof(src), "%s/%s", cfg->workspace, p->rel);
		snprintf(dst, sizeof(dst), "/workspace/%s", p->rel);
		if ((r = view_plan_add_bind(plan, "--protect", src, dst, false, false, err)) < 0)
			return r;
	}
	if (cfg->skills && (r = view_plan_add_bind(plan, "--skills", cfg->skills, "/skills", false,
						   false, err)) < 0)
		return r;
	if ((r = check_user_dst(plan, "--home", cfg->home, err)) < 0)
		return r;
	if ((r = plan_add_tmpfs(plan, "/tmp", 01777, false, cfg->tmpfs_size, err)) < 0)
		return r;
	if (strcmp(cfg->home, "/tmp") != 0 &&
	    (r = plan_add_tmpfs(plan, cfg->home, 0755, false, cfg->tmpfs_size, err)) < 0)
		return r;
	if (!view_plan_add(plan, VIEW_PROC, NULL, "/proc") ||
	    !view_plan_add(plan, VIEW_DEV, NULL, "/dev"))
		return ab_error_set(err, ENOMEM, "planning the view");

	for (size_t i = 0; i < cfg->n_mounts; i++) {
		const struct ab_mount *m = &cfg->mounts[i];
		const char *opt = m->kind == AB_MOUNT_TMPFS  ? "--tmpfs"
				  : m->kind == AB_MOUNT_BIND ? "--bind"
							     : "--ro-bind";
		if (m->kind == AB_MOUNT_TMPFS) {
			if ((r = check_user_dst(plan, opt, m->dst, err)) < 0)
				return r;
			if ((r = plan_add_tmpfs(plan, m->dst, 0755, true, cfg->tmpfs_size, err)) <
			    0)
				return r;
			continue;
		}
		cleanup_free char *real = NULL;
		if ((r = ab_resolve_mount_source(opt, m->src, false, false, &real, err)) < 0)
			return r;
		const char *dst = m->dst ? m->dst : real;
		if ((r = check_user_dst(plan, opt, dst, err)) < 0)
			return r;
		if ((r = view_plan_add_bind(plan, opt, real, dst, m->kind == AB_MOUNT_BIND, true,
					    err)) < 0)
			return r;
	}
	if ((r = bindfile_plan(plan, err)) < 0)
		return r;
	return overlay_plan(cfg, protect, plan, err);
}

void view_plan_init(struct view_plan *plan)
{
	memset(plan, 0, sizeof(*plan));
	for (size_t i = 0; i < AB_ARRAY_SIZE(plan->dev_fds); i++)
		plan->dev_fds[i] = -1;
}

void view_plan_reap_helpers(struct view_plan *plan, bool wait)
{
	size_t left = 0;
	for (size_t i = 0; i < plan->n_idmap_helpers; i++) {
		pid_t p;
		while ((p = waitpid(plan->idmap_helpers[i], NULL, wait ? 0 : WNOHANG)) < 0 &&
		       errno == EINTR)
			;
		if (p == 0)
			plan->idmap_helpers[left++] = plan->idmap_helpers[i];
	}
	plan->n_idmap_helpers = left;
}

void view_plan_close_trees(struct view_plan *plan)
{
	for (size_t i = 0; i < plan->n; i++) {
		ab_close_keep_errno(plan->e[i].tree_fd);
		plan->e[i].tree_fd = -1;
	}
}

void view_plan_free(struct view_plan *plan)
{
	for (size_t i = 0; i < plan->n; i++) {
		free(plan->e[i].src);
		free(plan->e[i].dst);
		ab_close_keep_errno(plan->e[i].src_fd);
		ab_close_keep_errno(plan->e[i].tree_fd);
		ab_close_keep_errno(plan->e[i].own_fd);
		free(plan->e[i].seed);
	}
	free(plan->e);
	if (plan->setid_guard)
		free(plan->setid_guard->filter);
	free(plan->setid_guard);
	free(plan->passwd);
	free(plan->group);
	view_plan_reap_helpers(plan, true);
	for (size_t i = 0; i < AB_ARRAY_SIZE(plan->dev_fds); i++)
		ab_close_keep_errno(plan->dev_fds[i]);
	layer_release(plan->layer);
	image_close_layers(plan);
	view_plan_init(plan);
}

/* ---- sandbox side ---- */

int view_open_source(int root, struct view_entry *e, struct ab_error *err)
{
	/* the launcher resolved src to a canonical path: no component of it
	 * is a symlink unless one was swapped in since */
	e->src_fd = ab_open_beneath(root, e->src[1] ? e->src + 1 : ".");
	if (e->src_fd == -ELOOP)
		return ab_error_plain(err, ESTALE,
				      "'%s' was replaced by a symbolic link while the sandbox was "
				      "being built; refusing to bind it at %s",
				      e->src, e->dst);
	if (e->src_fd < 0)
		return ab_error_set(err, -e->src_fd, "cannot open '%s' to bind at %s", e->src,
				    e->dst);
	struct stat st;
	if (fstat(e->src_fd, &st) < 0)
		return ab_error_set(err, errno, "cannot stat '%s'", e->src);
	if (st.st_dev != e->dev || st.st_ino != e->ino)
		return ab_error_plain(err, ESTALE,
				      "'%s' was replaced while the sandbox was being built; "
				      "refusing to bind it at %s",
				      e->src, e->dst);
	return 0;
}

int view_open_sources(struct view_plan *plan, struct ab_error *err)
{
	cleanup_fd int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return ab_error_set(err, errno, "cannot open /");
	for (size_t i = 0; i < plan->n; i++) {
		struct view_entry *e = &plan->e[i];
		if (e->kind != VIEW_BIND || e->tree_fd >= 0 || e->from_view || e->image_mask ||
		    e->copy)
			continue;
		int r = view_open_source(root, e, err);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(dev_nodes); i++) {
		char path[32];
		snprintf(path, sizeof(path), "/dev/%s", dev_nodes[i]);
		plan->dev_fds[i] = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		/* a missing node (a minimal container) is left out of the view */
		if (plan->dev_fds[i] >= 0) {
			struct stat st;
			if (fstat(plan->dev_fds[i], &st) < 0 || !S_ISCHR(st.st_mode)) {
				close(plan->dev_fds[i]);
				plan->dev_fds[i] = -1;
			}
		}
	}
	int r = image_open_layers(plan, err);
	if (r < 0)
		return r;
	return plan->layer ? layer_open_dirs(plan->layer, err) : 0;
}

/* Open dst (absolute, normalised) beneath root, creating what is missing:
 * directories on the way, and the last component as a directory or an
 * empty file. No symlink is followed, not even one the view has itself. */
static int make_target(int root, const char *dst, bool is_dir, struct ab_error *err)
{
	cleanup_fd int dir = fcntl(root, F_DUPFD_CLOEXEC, 3);
	if (dir < 0)
		return ab_error_set(err, errno, "cannot create mount point %s", dst);
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", dst + 1);
	char *save = NULL;
	char *comp = strtok_r(buf, "/", &save);
	while (comp) {
		char *next = strtok_r(NULL, "/", &save);
		bool last = next == NULL;
		int fd;
		if (!last || is_dir) {
			if (mkdirat(dir, comp, 0755) < 0 && errno != EEXIST)
				return ab_error_set(err, errno, "cannot create mount point %s",
						    dst);
			fd = openat(dir, comp, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		} else {
			fd = openat(dir, comp, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (fd < 0 && (errno == EISDIR || errno == EACCES || errno == EROFS ||
				       errno == EPERM))
				fd = openat(dir, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd < 0) {
			if (errno == ENOTDIR || errno == ELOOP)
				return ab_error_plain(err, ELOOP,
						      "cannot mount at %s: '%s' is not a "
						      "directory or is a symbolic link",
						      dst, comp);
			return ab_error_set(err, errno, "cannot create mount point %s", dst);
		}
		close(dir);
		dir = fd;
		comp = next;
	}
	struct stat st;
	if (fstat(dir, &st) < 0)
		return ab_error_set(err, errno, "cannot stat mount point %s", dst);
	if (S_ISDIR(st.st_mode) != is_dir)
		return ab_error_plain(err, is_dir ? ENOTDIR : EISDIR,
				      "cannot mount a %s at %s: the view has a %s there",
				      is_dir ? "directory" : "file", dst,
				      is_dir ? "file" : "directory");
	return ab_steal_fd(&dir);
}

static int attach(int mnt, int target, const char *dst, struct ab_error *err)
{
	if (move_mount(mnt, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return ab_error_set(err, errno, "cannot mount at %s", dst);
	return 0;
}

/* Clone the tree at src_fd (with its submounts), set the flags on every
 * mount of the clone, attach it at dst. */
static int bind_tree(int root, int src_fd, const char *dst, bool is_dir, uint64_t attrs,
		     const char *what, struct ab_error *err)
{
	cleanup_fd int tree = open_tree(
		src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (tree < 0) {
		if (errno == ENOSYS)
			return ab_error_plain(err, ENOSYS,
					      "cannot bind %s: this kernel lacks open_tree(2) "
					      "(agentbox needs Linux 5.12 or later)",
					      what);
		return ab_error_set(err, errno, "cannot bind %s at %s", what, dst);
	}
	struct mount_attr attr = {.attr_set = attrs};
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		return ab_error_set(err, errno, "cannot set the flags of %s", dst);
	cleanup_fd int target = make_target(root, dst, is_dir, err);
	if (target < 0)
		return target;
	return attach(tree, target, dst, err);
}

static int new_fs(const char *type, const char *const *opts, uint64_t attrs, const char *dst,
		  struct ab_error *err)
{
	cleanup_fd int fs = fsopen(type, FSOPEN_CLOEXEC);
	if (fs < 0)
		return ab_error_set(err, errno, "cannot create a %s for %s", type, dst);
	for (const char *const *o = opts; o && o[0]; o += 2) {
		int r = o[1] ? fsconfig(fs, FSCONFIG_SET_STRING, o[0], o[1], 0)
			     : fsconfig(fs, FSCONFIG_SET_FLAG, o[0], NULL, 0);
		if (r < 0)
			return ab_error_set(err, errno, "cannot set %s=%s on the %s for %s", o[0],
					    o[1] ? o[1] : "", type, dst);
	}
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return ab_error_set(err, errno, "cannot create a %s for %s", type, dst);
	int mnt = fsmount(fs, FSMOUNT_CLOEXEC, (unsigned)attrs);
	if (mnt < 0)
		return ab_error_set(err, errno, "cannot mount a %s for %s", type, dst);
	return mnt;
}

static int mount_new_fs(int root, const char *type, const char *const *opts, uint64_t attrs,
			const char *dst, struct ab_error *err)
{
	cleanup_fd int mnt = new_fs(type, opts, attrs, dst, err);
	if (mnt < 0)
		return mnt;
	cleanup_fd int target = make_target(root, dst, true, err);
	if (target < 0)
		return target;
	return attach(mnt, target, dst, err);
}

static int mount_tmpfs(int root, const struct view_entry *e, struct ab_error *err)
{
	char size[32], mode[16];
	snprintf(size, sizeof(size), "%llu", e->size);
	snprintf(mode, sizeof(mode), "%o", e->mode);
	const char *opts[] = {"size", size, "mode", mode, NULL};
	return mount_new_fs(root, "tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, e->dst, err);
}

/* /tmp, home: an overlay a checkpoint restacks, over a tmpfs of the
 * size the plain one had (view/owntmp.h) */
static int mount_own(int root, struct view_entry *e, struct ab_error *err)
{
	char size[32];
	snprintf(size, sizeof(size), "%llu", e->size);
	const char *opts[] = {"size", size, "mode", "700", NULL};
	cleanup_fd int fs =
		new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, e->dst, err);
	cleanup_fd int mnt = -1;
	int r = fs < 0 ? fs : owntmp_overlay(root, e, fs, &mnt, err);
	if (r < 0 || mnt < 0)
		return r < 0 ? r : mount_tmpfs(root, e, err);
	cleanup_fd int target = make_target(root, e->dst, true, err);
	return target < 0 ? target : attach(mnt, target, e->dst, err);
}

static int mount_dev(int root, struct view_plan *plan, struct ab_error *err)
{
	const char *opts[] = {"size", "65536", "mode", "755", NULL};
	int r = mount_new_fs(root, "tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, "/dev",
			     err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < AB_ARRAY_SIZE(dev_nodes); i++) {
		if (plan->dev_fds[i] < 0)
			continue;
		char dst[32];
		snprintf(dst, sizeof(dst), "/dev/%s", dev_nodes[i]);
		r = bind_tree(root, plan->dev_fds[i], dst, false,
			      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, dst, err);
		if (r < 0)
			return r;
	}
	const char *pts_opts[] = {"newinstance", NULL, "ptmxmode", "0666", "mode", "620", NULL};
	if ((r = mount_new_fs(root, "devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
			      "/dev/pts", err)) < 0)
		return r;
	const char *shm_opts[] = {"size", "67108864", "mode", "1777", NULL};
	if ((r = mount_new_fs(root, "tmpfs", shm_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
			      "/dev/shm", err)) < 0)
		return r;
	static const char *const links[][2] = {
		{"pts/ptmx", "dev/ptmx"},	   {"/proc/self/fd", "dev/fd"},
		{"/proc/self/fd/0", "dev/stdin"},  {"/proc/self/fd/1", "dev/stdout"},
		{"/proc/self/fd/2", "dev/stderr"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(links); i++)
		if (symlinkat(links[i][0], root, links[i][1]) < 0)
			return ab_error_set(err, errno, "cannot create /%s", links[i][1]);
	/* filled: read-only, as / is (its nodes, pts and shm are mounts of
	 * their own). Landlock's write rule may be the root's in a session
	 * whose workspace is restacked (landlock.h): the flags hold /dev */
	cleanup_fd int dev = openat(root, "dev", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
	if (dev < 0 || mount_setattr(dev, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0)
		return ab_error_set(err, errno, "cannot make /dev read-only");
	return 0;
}

/* /proc as OCI runtimes leave it: kernel knobs read-only, leaks masked. */
static const char *const proc_read_only[] = {
	"proc/sys", "proc/sysrq-trigger", "proc/irq", "proc/bus", "proc/fs",
};
static const char *const proc_masked_files[] = {
	"proc/kcore",	   "proc/keys",		 "proc/timer_list",  "proc/sched_debug",
	"proc/kallsyms",   "proc/latency_stats", "proc/timer_stats", "proc/kpagecount",
	"proc/kpageflags", "proc/kpagecgroup",	 "proc/config.gz",   "proc/vmallocinfo",
};
static const char *const proc_masked_dirs[] = {
	"proc/acpi",
	"proc/asound",
	"proc/scsi",
	"proc/driver",
};

/* Bind what is at path (beneath root) over itself with extra flags. */
static int remount_beneath(int root, const char *path, uint64_t attrs, struct ab_error *err)
{
	cleanup_fd int tree =
		open_tree(root, path,
			  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
	if (tree < 0) {
		if (errno == ENOENT)
			return 0;
		return ab_error_set(err, errno, "cannot bind /%s", path);
	}
	struct mount_attr attr = {.attr_set = attrs};
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		return ab_error_set(err, errno, "cannot make /%s read-only", path);
	cleanup_fd int target = openat(root, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (target < 0)
		return ab_error_set(err, errno, "cannot open /%s", path);
	char dst[64];
	snprintf(dst, sizeof(dst), "/%s", path);
	return attach(tree, target, dst, err);
}

static int mount_proc(int root, const struct view_plan *plan, struct ab_error *err)
{
	int r = mount_new_fs(root, "proc", NULL,
			     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, "/proc",
			     err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < AB_ARRAY_SIZE(proc_read_only); i++)
		if ((r = remount_beneath(root, proc_read_only[i],
					 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
						 MOUNT_ATTR_NOEXEC,
					 err)) < 0)
			return r;
	for (size_t i = 0; i < AB_ARRAY_SIZE(proc_masked_files); i++) {
		cleanup_fd int target =
			openat(root, proc_masked_files[i], O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (target < 0)
			continue; /* this kernel has no such file */
		/* /dev/null over the file: reads give nothing, writes vanish */
		cleanup_fd int null = open_tree(
			plan->dev_fds[0], "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (null < 0)
			return ab_error_set(err, errno, "cannot mask /%s", proc_masked_files[i]);
		struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
						    MOUNT_ATTR_NOEXEC};
		if (mount_setattr(null, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0 ||
		    move_mount(null, "", target, "",
			       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
			return ab_error_set(err, errno, "cannot mask /%s", proc_masked_files[i]);
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(proc_masked_dirs); i++) {
		cleanup_fd int target = openat(root, proc_masked_dirs[i],
					       O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		if (target < 0)
			continue;
		const char *opts[] = {"size", "0", "mode", "555", NULL};
		cleanup_fd int empty = new_fs("tmpfs", opts,
					      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
						      MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
					      proc_masked_dirs[i], err);
		if (empty < 0)
			return empty;
		if ((r = attach(empty, target, proc_masked_dirs[i], err)) < 0)
			return r;
	}
	return 0;
}

/* Bind the container's /proc (with its masks, recursively) at /proc beneath
 * root, for AB_MISSING_OWN_PROC (docs/containers.md). */
static int bind_container_proc(int root, struct ab_error *err)
{
	/* recursively: the container runtime's masks over /proc come along,
	 * and the sandbox's own user namespace locks them */
	cleanup_fd int tree =
		open_tree(AT_FDCWD, "/proc", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (tree < 0)
		return ab_error_set(err, errno, "cannot bind the container's /proc");
	if (mkdirat(root, "proc", 0555) < 0 && errno != EEXIST)
		return ab_error_set(err, errno, "cannot make /proc in the view");
	if (move_mount(tree, "", root, "proc", MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return ab_error_set(err, errno, "cannot bind the container's /proc at /proc");
	return 0;
}

static int build_entry(int root, struct view_plan *plan, struct view_entry *e, struct ab_error *err)
{
	switch (e->kind) {
	case VIEW_BIND: {
		uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
		if (!e->rw)
			attrs |= MOUNT_ATTR_RDONLY;
		if (e->overlay)
			return overlay_mount_workspace(root, e, plan->layer, err);
		if (e->copy) {
			/* a file of the view's own, seeded with the host's copy */
			cleanup_fd int target = make_target(root, e->dst, false, err);
			return target < 0 ? target : bindfile_seed(target, e, err);
		}
		if (e->from_view)
			return overlay_bind_from_view(root, e, err);
		if (e->image_mask && e->tree_fd < 0) {
			/* made here: the layers' overlay (image.h) */
			cleanup_fd int mnt = image_mount_entry(plan, e, err);
			if (mnt < 0)
				return mnt;
			cleanup_fd int target = make_target(root, e->dst, true, err);
			if (target < 0)
				return target;
			return attach(mnt, target, e->dst, err);
		}
		if (e->tree_fd >= 0) {
			/* made by the launcher with these flags (idmap.c) */
			cleanup_fd int target = make_target(root, e->dst, e->is_dir, err);
			if (target < 0)
				return target;
			return attach(e->tree_fd, target, e->dst, err);
		}
		return bind_tree(root, e->src_fd, e->dst, e->is_dir, attrs, e->src, err);
	}
	case VIEW_TMPFS:
		return e->own_layer && plan->restack ? mount_own(root, e, err)
						     : mount_tmpfs(root, e, err);
	case VIEW_SYMLINK: {
		/* a user's (overlay.c) may stand deeper than the top level */
		char parent[PATH_MAX];
		snprintf(parent, sizeof(parent), "%s", e->dst);
		char *slash = strrchr(parent, '/');
		cleanup_fd int dir = -1;
		if (slash && slash != parent) {
			*slash = 0;
			if ((dir = make_target(root, parent, true, err)) < 0)
				return dir;
		}
		if (symlinkat(e->src, dir >= 0 ? dir : root,
			      e->dst + 1 + (dir >= 0 ? slash - parent : 0)) < 0)
			return ab_error_set(err, errno, "cannot create the link %s", e->dst);
		return 0;
	}
	case VIEW_PROC:
		if (plan->bind_proc)
			return bind_container_proc(root, err);
		return mount_proc(root, plan, err);
	case VIEW_DEV:
		return mount_dev(root, plan, err);
	}
	return ab_error_plain(err, EINVAL, "internal: unknown view entry");
}

/* The plan's own /etc/passwd and /etc/group (idmap.h), read-only over the
 * host's: written into a directory of the new root's tmpfs (which sits at
 * /tmp now), cloned from there, then unlinked: a bind mount keeps its file
 * when the name goes. No tmpfs of their own: each superblock costs the
 * start its making and the end its teardown. open_tree clones only from
 * mounts of the caller's namespace before Linux 6.15 (EINVAL on Debian
 * 12's 6.1), which the attached root is. */
#define ID_STAGE ".agentbox-ids"
static int mount_id_files(int root, const struct view_plan *plan, struct ab_error *err)
{
	const char *files[][2] = {{"passwd", plan->passwd}, {"group", plan->group}};
	if (!plan->passwd && !plan->group)
		return 0;
	if (mkdirat(root, ID_STAGE, 0700) < 0)
		return ab_error_set(err, errno, "cannot stage the view's /etc/passwd");
	int r = 0;
	for (size_t i = 0; i < AB_ARRAY_SIZE(files) && r == 0; i++) {
		if (!files[i][1])
			continue;
		char src[64], dst[32];
		snprintf(src, sizeof(src), ID_STAGE "/%s", files[i][0]);
		snprintf(dst, sizeof(dst), "/etc/%s", files[i][0]);
		cleanup_fd int fd =
			openat(root, src, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		size_t len = strlen(files[i][1]);
		ssize_t n = fd < 0 ? -1 : write(fd, files[i][1], len);
		if (n != (ssize_t)len) {
			r = ab_error_set(err, n < 0 ? errno : EIO, "cannot write %s", dst);
			break;
		}
		cleanup_fd int tree = open_tree(root, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
						    MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
		if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0) {
			r = ab_error_set(err, errno, "cannot bind %s", dst);
			break;
		}
		cleanup_fd int target = make_target(root, dst, false, err);
		r = target < 0 ? target : attach(tree, target, dst, err);
	}
	/* the clones hold the files; their names and the directory go */
	for (size_t i = 0; i < AB_ARRAY_SIZE(files); i++) {
		char src[64];
		snprintf(src, sizeof(src), ID_STAGE "/%s", files[i][0]);
		if (unlinkat(root, src, 0) < 0 && errno != ENOENT && r == 0)
			r = ab_error_set(err, errno, "cannot remove the staged /etc/%s",
					 files[i][0]);
	}
	if (unlinkat(root, ID_STAGE, AT_REMOVEDIR) < 0 && r == 0)
		r = ab_error_set(err, errno, "cannot remove the staged /etc/passwd");
	return r;
}

int view_proc_read_only(struct ab_error *err)
{
	struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
	if (mount_setattr(AT_FDCWD, "/proc", AT_SYMLINK_NOFOLLOW, &ro, sizeof(ro)) < 0)
		return ab_error_set(err, errno, "cannot make /proc read-only");
	return 0;
}

int view_build(struct view_plan *plan, struct ab_error *err)
{
	/* nothing we mount may propagate back to the host */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return ab_error_set(err, errno, "cannot make the mount namespace private");

	const char *root_opts[] = {"size", "1048576", "mode", "755", NULL};
	cleanup_fd int root =
		new_fs("tmpfs", root_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, "/", err);
	if (root < 0)
		return root;
	/* pivot_root needs the new root attached; /tmp of this namespace's copy
	 * of the host tree is a place that exists and nobody else sees */
	if (move_mount(root, "", AT_FDCWD, "/tmp", MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return ab_error_set(err, errno, "cannot attach the new root");

	for (size_t i = 0; i < plan->n; i++) {
		int r = build_entry(root, plan, &plan->e[i], err);
		ab_close_keep_errno(plan->e[i].src_fd);
		ab_close_keep_errno(plan->e[i].tree_fd);
		plan->e[i].src_fd = plan->e[i].tree_fd = -1;
		/* the launcher keeps its copy of the seed; the init needs none */
		free(plan->e[i].seed);
		plan->e[i].seed = NULL;
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(plan->dev_fds); i++) {
		ab_close_keep_errno(plan->dev_fds[i]);
		plan->dev_fds[i] = -1;
	}
	/* no host path stays open in the init, nor in a shim it forks */
	image_close_layers(plan);
	if (plan->layer)
		layer_close_dirs(plan->layer);
	int r = mount_id_files(root, plan, err);
	if (r < 0)
		return r;

	if (fchdir(root) < 0)
		return ab_error_set(err, errno, "cannot enter the new root");
	/* pivot_root(".", ".") stacks the old root on the new one; detaching
	 * it leaves no path back to the host's tree (pivot_root(2), NOTES) */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return ab_error_set(err, errno, "cannot pivot into the new root");
	if (umount2(".", MNT_DETACH) < 0)
		return ab_error_set(err, errno, "cannot detach the host's root");
	if (chdir("/") < 0)
		return ab_error_set(err, errno, "cannot enter the new root");
	struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
	if (mount_setattr(AT_FDCWD, "/", 0, &ro, sizeof(ro)) < 0)
		return ab_error_set(err, errno, "cannot make the root read-only");
	return 0;
}
