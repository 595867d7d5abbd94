/* --image in the view (image.h). Each top-level directory of the image is
 * its own read-only overlay of the layers that have it (top first, to the
 * first that hides what is below: a whiteout, a non-directory, an opaque
 * directory), with the cache's empty directory at the bottom so that an
 * overlay always has two lowers. overlayfs is mounted with userxattr: in a
 * user namespace it reads the opaque marks untar.c wrote as
 * user.overlay.opaque (Linux 5.11); whiteouts are 0/0 character devices.
 * Lower layers are named as /proc/self/fd/N paths: short, whatever the
 * cache's path, and opened without following a link. */
#include "view/image.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image/cache.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/util.h"
#include "view/rootfs.h"

#define ALL_LAYERS UINT64_MAX

/* The overlay of name in the layers of mask (fds: the layers bottom first,
 * then empty/), detached and read-only: a mount fd, or -errno. */
static int overlay_of(const int *fds, size_t n, uint64_t mask, const char *name)
{
	char lower[4096];
	size_t len = 0;
	for (size_t i = n; i-- > 0;)
		if (mask & (1ULL << i))
			len += (size_t)snprintf(lower + len, sizeof(lower) - len,
						"/proc/self/fd/%d%s%s:", fds[i], *name ? "/" : "",
						name);
	snprintf(lower + len, sizeof(lower) - len, "/proc/self/fd/%d", fds[n]);
	if (len >= sizeof(lower) - 32)
		return -ENAMETOOLONG;
	cleanup_fd int fs = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", lower, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	int mnt = fsmount(fs, FSMOUNT_CLOEXEC,
			  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	return mnt < 0 ? -errno : mnt;
}

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ab_close_keep_errno(fds[i]);
}

/* The layers' directories and empty/ (n + 1 fds). */
static int open_layers(const struct image_use *u, int *fds, struct ab_error *err)
{
	size_t n = u->img.n_layers;
	for (size_t i = 0; i <= n; i++) {
		const char *p = i < n ? u->layer_dirs[i] : u->empty;
		fds[i] = open(p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fds[i] < 0) {
			int e = errno;
			close_fds(fds, i);
			return ab_error_set(err, e, "--image: cannot open the cached layer %s", p);
		}
	}
	return 0;
}

/* Which layers the overlay of the top-level directory name stacks. */
static uint64_t layers_of(const int *fds, size_t n, const char *name)
{
	uint64_t mask = 0;
	for (size_t i = n; i-- > 0;) {
		struct stat st;
		if (fstatat(fds[i], name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (!S_ISDIR(st.st_mode))
			break; /* a whiteout or a file hides what is below */
		mask |= 1ULL << i;
		char p[300], v[4];
		snprintf(p, sizeof(p), "/proc/self/fd/%d/%s", fds[i], name);
		if (lgetxattr(p, "user.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y')
			break;
	}
	return mask;
}

/* Not root: a child in a user and mount namespace of its own mounts the
 * merged layers and passes the mount back. It opens the layers itself:
 * overlayfs clones its lowers, which must be mounts of the mounter's
 * namespace, not of the one it left. */
static int merged_unprivileged(const struct image_use *u)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	char maps[2][32];
	snprintf(maps[0], sizeof(maps[0]), "%u %u 1", (unsigned)geteuid(), (unsigned)geteuid());
	snprintf(maps[1], sizeof(maps[1]), "%u %u 1", (unsigned)getegid(), (unsigned)getegid());
	pid_t pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -errno;
	}
	if (pid == 0) {
		int r = unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0 ? -errno : 0;
		const char *files[] = {"/proc/self/uid_map", "/proc/self/setgroups",
				       "/proc/self/gid_map"};
		const char *texts[] = {maps[0], "deny", maps[1]};
		for (int i = 0; i < 3 && r == 0; i++) {
			int fd = open(files[i], O_WRONLY | O_CLOEXEC);
			if (fd < 0 || write(fd, texts[i], strlen(texts[i])) < 0)
				r = -errno;
			if (fd >= 0)
				close(fd);
		}
		int fds[OCI_MAX_LAYERS + 1];
		struct ab_error err = {0};
		if (r == 0 && open_layers(u, fds, &err) < 0)
			r = -err.code;
		int mnt = r < 0 ? r : overlay_of(fds, u->img.n_layers, ALL_LAYERS, "");
		char cbuf[CMSG_SPACE(sizeof(int))] = {0};
		struct iovec iov = {&mnt, sizeof(mnt)};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		if (mnt >= 0) {
			m.msg_control = cbuf;
			m.msg_controllen = sizeof(cbuf);
			struct cmsghdr *c = CMSG_FIRSTHDR(&m);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &mnt, sizeof(int));
		}
		_exit(sendmsg(sv[1], &m, 0) < 0);
	}
	close(sv[1]);
	int got = -EIO;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&got, sizeof(got)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = cbuf,
			   .msg_controllen = sizeof(cbuf)};
	ssize_t r;
	while ((r = recvmsg(sv[0], &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	close(sv[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	struct cmsghdr *c = r > 0 ? CMSG_FIRSTHDR(&m) : NULL;
	if (got >= 0 && c && c->cmsg_type == SCM_RIGHTS) {
		memcpy(&got, CMSG_DATA(c), sizeof(int));
		return got;
	}
	return got >= 0 ? -EIO : got;
}

/* The image's layers: fds, n of them (image_plan). */
struct layers {
	const int *fds;
	size_t n;
};

static int plan_entry(const struct ab_config *cfg, int merged, const char *name,
		      const struct stat *st, struct view_plan *plan, void *arg,
		      struct ab_error *err)
{
	(void)merged;
	const int *fds = ((const struct layers *)arg)->fds;
	size_t n = ((const struct layers *)arg)->n;
	char dst[300];
	snprintf(dst, sizeof(dst), "/%s", name);
	/* a file, a device at the top: not part of a system (docs/images.md) */
	if (!S_ISDIR(st->st_mode))
		return 0;
	struct view_entry *e = view_plan_add(plan, VIEW_BIND, name, dst);
	if (!e)
		return ab_error_set(err, ENOMEM, "planning the view");
	e->is_dir = true;
	e->image_mask = layers_of(fds, n, name);
	if (!e->image_mask)
		return ab_error_plain(err, ENOENT, "--image %s: no layer has /%s", cfg->image,
				      name);
	/* root mounts it here: the sandbox's init, an unprivileged host uid,
	 * may not enter root's cache */
	if (geteuid() == 0 && (e->tree_fd = overlay_of(fds, n, e->image_mask, name)) < 0) {
		int code = -e->tree_fd;
		e->tree_fd = -1;
		return ab_error_set(err, code, "--image %s: cannot mount the layers' /%s",
				    cfg->image, name);
	}
	return 0;
}

int image_plan(const struct ab_config *cfg, struct view_plan *plan, struct ab_error *err)
{
	const struct image_use *u = cfg->image_use;
	size_t n = u->img.n_layers;
	int fds[OCI_MAX_LAYERS + 1];
	int r = open_layers(u, fds, err);
	if (r < 0)
		return r;
	int merged = geteuid() == 0 ? overlay_of(fds, n, ALL_LAYERS, "") : merged_unprivileged(u);
	if (merged < 0) {
		close_fds(fds, n + 1);
		return ab_error_set(err, -merged,
				    "--image %s: cannot mount its layers as an overlay (it needs "
				    "overlayfs in a user namespace: Linux 5.11)",
				    cfg->image);
	}
	char label[4200];
	snprintf(label, sizeof(label), "--image %s", cfg->image);
	r = rootfs_plan_tree(cfg, merged, label, NULL, plan, plan_entry,
			     &(struct layers){.fds = fds, .n = n}, err);
	close(merged);
	close_fds(fds, n + 1);
	plan->image = u;
	return r;
}

int image_open_layers(struct view_plan *plan, struct ab_error *err)
{
	bool needed = false;
	for (size_t i = 0; i < plan->n; i++)
		needed |= plan->e[i].image_mask && plan->e[i].tree_fd < 0;
	if (!plan->image || !needed)
		return 0;
	int r = open_layers(plan->image, plan->image_fds, err);
	if (r == 0)
		plan->n_image_fds = plan->image->img.n_layers + 1;
	return r;
}

int image_mount_entry(struct view_plan *plan, const struct view_entry *e, struct ab_error *err)
{
	if (!plan->n_image_fds)
		return ab_error_plain(err, EBADF, "internal: the image's layers are not open");
	int mnt = overlay_of(plan->image_fds, plan->n_image_fds - 1, e->image_mask, e->src);
	if (mnt < 0)
		return ab_error_set(err, -mnt, "--image: cannot mount the layers' %s", e->dst);
	return mnt;
}

void image_close_layers(struct view_plan *plan)
{
	close_fds(plan->image_fds, plan->n_image_fds);
	plan->n_image_fds = 0;
}

/* ---- the image config ---- */

/* The uid and gid of name in the image's etc/passwd (the topmost layer
 * that has it as a file); -ENOENT when none. */
static int passwd_lookup(const struct image_use *u, const char *name, uid_t *uid, gid_t *gid)
{
	for (size_t i = u->img.n_layers; i-- > 0;) {
		cleanup_fd int root = open(u->layer_dirs[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		cleanup_fd int etc =
			root < 0 ? -1
				 : openat(root, "etc",
					  O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (etc < 0 || fstatat(etc, "passwd", &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (!S_ISREG(st.st_mode) || st.st_size > (4 << 20))
			return -ENOENT; /* a whiteout, or not a file */
		cleanup_fd int fd =
			openat(etc, "passwd", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
		if (!f)
			return -ENOENT;
		fd = -1;
		char line[1024];
		size_t nl = strlen(name);
		int r = -ENOENT;
		while (r < 0 && fgets(line, sizeof(line), f)) {
			unsigned a, b;
			if (strncmp(line, name, nl) == 0 && line[nl] == ':' &&
			    sscanf(line + nl, ":%*[^:]:%u:%u:", &a, &b) == 2) {
				*uid = a;
				*gid = b;
				r = 0;
			}
		}
		fclose(f);
		return r;
	}
	return -ENOENT;
}

/* "--image IMAGE: its User 'USER' " and why it is not taken. */
static int user_refused(const struct ab_config *cfg, const struct image_use *u, int code,
			const char *why, struct ab_error *err)
{
	return ab_error_plain(err, code, "--image %s: its User '%s' %s", cfg->image, u->img.user,
			      why);
}

/* User: "name", "uid", "name:group" or "uid:gid" (a group by number). */
static int apply_user(struct ab_config *cfg, const struct image_use *u, struct ab_error *err)
{
	char user[256];
	snprintf(user, sizeof(user), "%s", u->img.user);
	char *grp = strchr(user, ':');
	if (grp)
		*grp++ = '\0';
	uid_t uid;
	gid_t gid = 0;
	bool have_gid = false;
	if (ab_parse_id(user, &uid) < 0) {
		if (passwd_lookup(u, user, &uid, &gid) < 0)
			return user_refused(cfg, u, ENOENT,
					    "has no line in the image's /etc/passwd; give --uid "
					    "(and --gid)",
					    err);
		have_gid = true;
	}
	if (grp) {
		if (ab_parse_id(grp, &gid) < 0)
			return user_refused(cfg, u, EINVAL,
					    "names a group by name, which agentbox does not look "
					    "up; give --gid",
					    err);
		have_gid = true;
	}
	if (!cfg->uid_set) {
		cfg->uid = uid;
		cfg->uid_set = true;
	}
	if (!cfg->gid_set && have_gid) {
		cfg->gid = gid;
		cfg->gid_set = true;
	}
	return 0;
}

int image_apply_config(struct ab_config *cfg, struct ab_error *err)
{
	const struct image_use *u = cfg->image_use;
	for (size_t i = 0; i < u->img.n_env; i++) {
		const char *kv = u->img.env[i];
		size_t nl = (size_t)(strchr(kv, '=') - kv);
		bool set = false;
		for (size_t j = 0; j < cfg->n_set_env && !set; j++)
			set = strncmp(cfg->set_env[j], kv, nl + 1) == 0;
		if (set)
			continue; /* --env NAME=VALUE wins */
		if (ab_strv_push(&cfg->set_env, &cfg->n_set_env, kv) < 0)
			return ab_error_set(err, ENOMEM, "--image");
	}
	if (u->img.workdir && !cfg->cwd) {
		if (u->img.workdir[0] != '/')
			return ab_error_plain(err, EINVAL,
					      "--image %s: its WorkingDir '%s' is not absolute",
					      cfg->image, u->img.workdir);
		if (!(cfg->cwd = strdup(u->img.workdir)))
			return ab_error_set(err, ENOMEM, "--image");
	}
	return u->img.user ? apply_user(cfg, u, err) : 0;
}
