/* The overlay workspace: the layer directory's life (layer.h); its mount
 * in the view is view/overlay.c. Review (changes, commit) is in layer_review.c. */
#include "layer/layer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "layer/layer_review.h"
#include "util/parse.h"
#include "layer/protect.h"
#include "util/util.h"

#define LAYER_MAGIC "agentbox-layer 1"

int layer_parse_option(struct ab_config *cfg, const char *opt, const char *arg,
		       struct ab_error *err)
{
	if (strcmp(opt, "--workspace-mode") == 0) {
		static const struct ab_choice modes[] = {{"direct", AB_WORKSPACE_DIRECT},
							 {"overlay", AB_WORKSPACE_OVERLAY}};
		int r = ab_parse_choice(opt, arg, modes, AB_ARRAY_SIZE(modes), err);
		if (r >= 0)
			cfg->workspace_mode = r;
		return r < 0 ? r : 0;
	}
	if (!*arg)
		return ab_error_plain(err, EINVAL, "%s: empty path", opt);
	char *p = strdup(arg);
	if (!p)
		return ab_error_set(err, ENOMEM, "%s", opt);
	free(cfg->keep_changes);
	cfg->keep_changes = p;
	return 0;
}

/* $XDG_STATE_HOME/agentbox/layers, ~/.local/state/agentbox/layers, or
 * /var/lib/agentbox/layers for root. */
static int state_base(char *buf, size_t n, struct ab_error *err)
{
	if (ab_state_dir("layers", buf, n) < 0)
		return ab_error_plain(err, ENOENT,
				      "--workspace-mode overlay: no home directory for the "
				      "layer; name one with --keep-changes DIR");
	int r = ab_mkdir_p(buf, geteuid() == 0 ? 0711 : 0700);
	if (r < 0)
		return ab_error_set(err, -r, "cannot create the layer directory %s", buf);
	return 0;
}

static int write_info(struct ab_layer *l, struct ab_error *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/layer.info", l->dir);
	cleanup_fd int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
	/* locked while still empty: sweep_stale() takes only a written one;
	 * shared, as the forks standing on its layers hold it (layer_hold) */
	if (fd < 0 || flock(fd, (l->keep ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0)
		return ab_error_set(err, errno, "cannot create %s", path);
	clock_gettime(CLOCK_REALTIME, &l->started);
	char buf[PATH_MAX + 128];
	int n = snprintf(buf, sizeof(buf), LAYER_MAGIC "\nworkspace=%s\nstarted=%lld.%09ld\n%s",
			 l->workspace, (long long)l->started.tv_sec, l->started.tv_nsec,
			 l->keep ? "kept=1\n" : "");
	if (write(fd, buf, (size_t)n) != n)
		return ab_error_set(err, errno ? errno : EIO, "cannot write %s", path);
	for (size_t i = 0; i < l->n_protect; i++) {
		n = snprintf(buf, sizeof(buf), "protect=%s\n", l->protect[i]);
		if (n >= (int)sizeof(buf) || write(fd, buf, (size_t)n) != n)
			return ab_error_set(err, errno ? errno : EIO, "cannot write %s", path);
	}
	/* only a kept layer must outlive a crash */
	if (l->keep && fsync(fd) < 0)
		return ab_error_set(err, errno, "cannot write %s", path);
	l->lock_fd = ab_steal_fd(&fd);
	return 0;
}

static int read_info(struct ab_layer *l, struct ab_error *err)
{
	char path[PATH_MAX], buf[4 * PATH_MAX];
	snprintf(path, sizeof(path), "%s/layer.info", l->dir);
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return ab_error_set(err, errno, "%s is not a layer of agentbox: cannot open %s",
				    l->dir, path);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	for (char *p = strstr(buf, "\nprotect="); p; p = strstr(p + 1, "\nprotect=")) {
		size_t len = strcspn(p + 9, "\n");
		char rel[PATH_MAX];
		snprintf(rel, sizeof(rel), "%.*s", (int)len, p + 9);
		if (ab_strv_push(&l->protect, &l->n_protect, rel) < 0)
			return ab_error_set(err, ENOMEM, "reading %s", path);
	}
	char *ws = strstr(buf, "\nworkspace=");
	char *st = strstr(buf, "\nstarted=");
	long long sec = 0;
	long nsec = 0;
	if (strncmp(buf, LAYER_MAGIC "\n", sizeof(LAYER_MAGIC)) != 0 || !ws || !st ||
	    sscanf(st + 9, "%lld.%ld", &sec, &nsec) != 2)
		return ab_error_plain(err, EINVAL, "%s is not a layer of agentbox (bad %s)", l->dir,
				      path);
	ws += 11;
	ws[strcspn(ws, "\n")] = '\0';
	l->workspace = strdup(ws);
	if (!l->workspace)
		return ab_error_set(err, ENOMEM, "reading %s", path);
	l->started = (struct timespec){.tv_sec = sec, .tv_nsec = nsec};
	return 0;
}

static int lock_layer(struct ab_layer *l, struct ab_error *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/layer.info", l->dir);
	l->lock_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (l->lock_fd < 0)
		return ab_error_set(err, errno, "cannot open %s", path);
	if (flock(l->lock_fd, LOCK_EX | LOCK_NB) < 0)
		return ab_error_set(err, errno == EWOULDBLOCK ? EBUSY : errno,
				    "the layer %s is in use by a running sandbox", l->dir);
	return 0;
}

static struct ab_layer *layer_new(void)
{
	struct ab_layer *l = calloc(1, sizeof(*l));
	if (l) {
		l->lock_fd = l->upper_fd = l->work_fd = l->tree_fd = -1;
		l->view_userns = l->view_mntns = l->ws_tree = l->dir_tree = -1;
		l->own[0].tree = l->own[1].tree = -1;
		l->own[0].from = l->own[1].from = -1;
		l->owner = getpid();
	}
	return l;
}

void layer_free(struct ab_layer *l)
{
	if (!l)
		return;
	ab_close_keep_errno(l->lock_fd);
	ab_close_keep_errno(l->upper_fd);
	ab_close_keep_errno(l->work_fd);
	ab_close_keep_errno(l->tree_fd);
	ab_close_keep_errno(l->view_userns);
	ab_close_keep_errno(l->view_mntns);
	ab_close_keep_errno(l->ws_tree);
	ab_close_keep_errno(l->dir_tree);
	for (size_t i = 0; i < l->n_binds; i++)
		free(l->binds[i].dst);
	for (size_t i = 0; i < AB_ARRAY_SIZE(l->own); i++) {
		ab_close_keep_errno(l->own[i].tree);
		ab_close_keep_errno(l->own[i].from);
		free(l->own[i].dst);
	}
	free(l->binds);
	for (size_t i = 0; i < l->n_held; i++) {
		ab_close_keep_errno(l->held[i].fd);
		free(l->held[i].dir);
	}
	free(l->held);
	for (size_t i = 0; i < l->n_protect; i++)
		free(l->protect[i]);
	free(l->protect);
	free(l->dir);
	free(l->workspace);
	free(l);
}

/* Make DIR/upper and DIR/work, owned by whom the sandbox writes as. */
static int make_layer_dirs(const struct ab_config *cfg, struct ab_layer *l, struct ab_error *err)
{
	static const char *const sub[] = {"upper", "work"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(sub); i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", l->dir, sub[i]);
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return ab_error_set(err, errno, "cannot create %s", path);
		if (geteuid() == 0 && chown(path, cfg->host_uid, cfg->host_gid) < 0)
			return ab_error_set(err, errno, "cannot hand %s to uid %u", path,
					    (unsigned)cfg->host_uid);
	}
	if (geteuid() == 0 && chown(l->dir, cfg->host_uid, cfg->host_gid) < 0)
		return ab_error_set(err, errno, "cannot hand %s to uid %u", l->dir,
				    (unsigned)cfg->host_uid);
	return 0;
}

/* --keep-changes DIR: a new directory, an empty one, or a layer of this
 * workspace to go on with. Not inside the workspace, nor around it. */
static int claim_kept_dir(const struct ab_config *cfg, struct ab_layer *l, bool *reuse,
			  struct ab_error *err)
{
	if (mkdir(cfg->keep_changes, 0700) < 0 && errno != EEXIST)
		return ab_error_set(err, errno, "--keep-changes: cannot create %s",
				    cfg->keep_changes);
	l->dir = realpath(cfg->keep_changes, NULL);
	if (!l->dir)
		return ab_error_set(err, errno, "--keep-changes: %s", cfg->keep_changes);
	if (ab_path_is_under(l->dir, cfg->workspace) || ab_path_is_under(cfg->workspace, l->dir))
		return ab_error_plain(err, EINVAL,
				      "--keep-changes: %s overlaps the workspace %s; the layer "
				      "must live outside it",
				      l->dir, cfg->workspace);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/layer.info", l->dir);
	if (access(path, F_OK) == 0) {
		struct ab_layer old = {.dir = l->dir};
		int r = read_info(&old, err);
		if (r == 0 && strcmp(old.workspace, cfg->workspace) != 0)
			r = ab_error_plain(err, EINVAL,
					   "--keep-changes: %s holds the changes of another "
					   "workspace, %s",
					   l->dir, old.workspace);
		l->started = old.started;
		free(old.workspace);
		/* the protected paths come from this run's configuration */
		for (size_t i = 0; i < old.n_protect; i++)
			free(old.protect[i]);
		free(old.protect);
		*reuse = r == 0;
		return r;
	}
	cleanup_fd int d = open(l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = d < 0 ? NULL : fdopendir(d);
	if (!dp)
		return ab_error_set(err, errno, "--keep-changes: cannot read %s", l->dir);
	d = -1;
	struct dirent *de;
	bool empty = true;
	while ((de = readdir(dp)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
			empty = false;
	closedir(dp);
	if (!empty)
		return ab_error_plain(err, EEXIST,
				      "--keep-changes: %s is neither empty nor a layer of agentbox",
				      l->dir);
	return 0;
}

/* Launcher, as root: a detached mount of DIR for the init, which runs as
 * a sandbox user that may not reach DIR by its path (under a directory
 * only root enters). An fd of the host's own mount would not do: overlayfs
 * takes only layers of the mounter's namespace. */
static int open_layer_tree(struct ab_layer *l, struct ab_error *err)
{
	if (geteuid() != 0)
		return 0; /* the init opens DIR by its path, as the same user */
	l->tree_fd = open_tree(AT_FDCWD, l->dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (l->tree_fd < 0)
		return ab_error_set(err, errno, "cannot open the layer %s", l->dir);
	struct mount_attr a = {.attr_set =
				       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
	if (mount_setattr(l->tree_fd, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
		return ab_error_set(err, errno, "cannot set the flags of the layer %s", l->dir);
	return 0;
}

/* The layers of sandboxes whose launcher was killed before it could
 * remove them: a written layer.info nobody holds locked. Like the cgroups
 * such a launcher leaves, the next agentbox to start removes them. */
static void sweep_stale(const char *base)
{
	/* the lock's reading: only a layer nobody holds, shared or not */
	cleanup_fd int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = bfd < 0 ? NULL : fdopendir(bfd);
	if (!dp)
		return;
	bfd = -1;
	struct dirent *de;
	while ((de = readdir(dp))) {
		if (de->d_name[0] == '.')
			continue;
		char info[NAME_MAX + 16];
		snprintf(info, sizeof(info), "%s/layer.info", de->d_name);
		cleanup_fd int fd = openat(dirfd(dp), info, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		char buf[4 * PATH_MAX];
		if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = '\0';
		/* never a --keep-changes layer someone put here */
		if (n > 0 && !strncmp(buf, LAYER_MAGIC "\n", sizeof(LAYER_MAGIC)) &&
		    !strstr(buf, "\nkept=1\n"))
			layer_remove_tree_at(dirfd(dp), de->d_name);
	}
	closedir(dp);
}

static int create_layer(const struct ab_config *cfg, struct ab_layer *l, struct ab_error *err)
{
	bool reuse = false;
	int r;
	if (strchr(cfg->workspace, '\n'))
		return ab_error_plain(err, EINVAL,
				      "--workspace-mode overlay: the workspace's path has a "
				      "newline");
	l->workspace = strdup(cfg->workspace);
	if (!l->workspace)
		return ab_error_set(err, ENOMEM, "planning the layer");
	l->quota = cfg->layer_quota;
	if (cfg->keep_changes) {
		l->keep = true;
		if ((r = claim_kept_dir(cfg, l, &reuse, err)) < 0)
			return r;
	} else {
		char base[PATH_MAX - 16], tmpl[PATH_MAX];
		if ((r = state_base(base, sizeof(base), err)) < 0)
			return r;
		sweep_stale(base);
		snprintf(tmpl, sizeof(tmpl), "%s/XXXXXX", base);
		if (!mkdtemp(tmpl))
			return ab_error_set(err, errno, "cannot create a layer in %s", base);
		l->dir = strdup(tmpl);
		if (!l->dir) {
			rmdir(tmpl);
			return ab_error_set(err, ENOMEM, "planning the layer");
		}
	}
	r = reuse ? lock_layer(l, err) : write_info(l, err);
	if (r < 0 || (r = make_layer_dirs(cfg, l, err)) < 0)
		return r;
	return open_layer_tree(l, err);
}

int layer_create(const struct ab_config *cfg, const struct protect_state *protect,
		 struct ab_layer **out, struct ab_error *err)
{
	struct ab_layer *l = *out = layer_new();
	if (!l)
		return ab_error_set(err, ENOMEM, "planning the layer");
	for (size_t i = 0; protect && i < protect->n; i++)
		if (ab_strv_push(&l->protect, &l->n_protect, protect->e[i].rel) < 0)
			return ab_error_set(err, ENOMEM, "planning the layer");
	return create_layer(cfg, l, err);
}

/* A directory to empty, made writable on the way (overlayfs leaves
 * work/work mode 0). */
static int open_to_empty(int dfd, const char *name, struct stat *st)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES && fchmodat(dfd, name, 0700, 0) == 0)
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0) {
		ab_close_keep_errno(fd);
		return -errno;
	}
	fchmod(fd, 0700);
	return fd;
}

/* One level of the removal: the directory's name in its parent, its
 * identity (to check ".." against on the way up), and the subdirectories
 * still to remove. */
struct rm_level {
	char *name;
	dev_t dev;
	ino_t ino;
	char **subdirs;
	size_t n, next;
};

static void rm_level_free(struct rm_level *lv)
{
	free(lv->name);
	for (size_t i = lv->next; i < lv->n; i++)
		free(lv->subdirs[i]);
	free(lv->subdirs);
}

/* Unlink what fd holds but directories; those go to lv->subdirs. */
static int rm_files(int fd, struct rm_level *lv)
{
	int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	DIR *dp = dup < 0 ? NULL : fdopendir(dup);
	if (!dp) {
		ab_close_keep_errno(dup);
		return -errno;
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(dp))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(fd, de->d_name, 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR && errno != EPERM) {
			r = -errno;
			break;
		}
		char **p = realloc(lv->subdirs, (lv->n + 1) * sizeof(char *));
		if (!p || !(p[lv->n] = strdup(de->d_name)))
			r = -ENOMEM;
		if (p) {
			lv->subdirs = p;
			lv->n += r == 0;
		}
	}
	closedir(dp);
	return r;
}

static int rm_push(struct rm_level **stack, size_t *depth, size_t *cap, char *name,
		   const struct stat *st, int fd)
{
	if (*depth == *cap) {
		size_t n = *cap ? *cap * 2 : 16;
		void *p = realloc(*stack, n * sizeof(**stack));
		if (!p) {
			free(name);
			return -ENOMEM;
		}
		*stack = p;
		*cap = n;
	}
	struct rm_level *lv = &(*stack)[(*depth)++];
	*lv = (struct rm_level){.name = name, .dev = st->st_dev, .ino = st->st_ino};
	return name ? rm_files(fd, lv) : -ENOMEM;
}

/* Iterative, holding the fd of the directory being emptied only: one level
 * down by name, one up by "..", checked to be the directory it left. */
static int remove_tree(int dfd, const char *name, struct rm_level **stack, size_t *depth)
{
	struct stat st;
	size_t cap = 0;
	cleanup_fd int cur = open_to_empty(dfd, name, &st);
	int r = cur < 0 ? cur : rm_push(stack, depth, &cap, strdup(name), &st, cur);
	while (r == 0) {
		struct rm_level *lv = &(*stack)[*depth - 1];
		if (lv->next < lv->n) { /* down into the next subdirectory */
			char *sub_name = lv->subdirs[lv->next];
			lv->subdirs[lv->next++] = NULL;
			int sub = open_to_empty(cur, sub_name, &st);
			if (sub < 0) {
				free(sub_name);
				r = sub == -ENOENT ? 0 : sub; /* gone meanwhile */
				continue;
			}
			close(cur);
			cur = sub;
			r = rm_push(stack, depth, &cap, sub_name, &st, cur);
			continue;
		}
		if (*depth == 1)
			return unlinkat(dfd, lv->name, AT_REMOVEDIR) < 0 ? -errno : 0;
		int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (up < 0 || fstat(up, &st) < 0) {
			ab_close_keep_errno(up);
			return -errno;
		}
		close(cur);
		cur = up;
		if (st.st_dev != lv[-1].dev || st.st_ino != lv[-1].ino)
			return -ESTALE;
		if (unlinkat(cur, lv->name, AT_REMOVEDIR) < 0)
			return -errno;
		rm_level_free(lv);
		(*depth)--;
	}
	return r;
}

int layer_remove_tree_at(int dfd, const char *name)
{
	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	struct rm_level *stack = NULL;
	size_t depth = 0;
	int r = remove_tree(dfd, name, &stack, &depth);
	for (size_t i = 0; i < depth; i++)
		rm_level_free(&stack[i]);
	free(stack);
	return r;
}

static int remove_layer_dir(const char *dir)
{
	return layer_remove_tree_at(AT_FDCWD, dir);
}

/* Our lock on a layer.info (fd) dropped: whether we were its last user,
 * holding it alone now, and it is still there. Whoever of two last users
 * drops its lock last gets it (the other either got it before, or failed
 * while the first still held it). */
static bool last_user(int fd)
{
	struct stat st;
	if (flock(fd, LOCK_UN) < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
		return false;
	return fstat(fd, &st) == 0 && st.st_nlink > 0;
}

void layer_release(struct ab_layer *l)
{
	if (!l)
		return;
	if (l->owner == getpid() && l->dir && !l->keep && (l->lock_fd < 0 || last_user(l->lock_fd)))
		remove_layer_dir(l->dir);
	for (size_t i = 0; l->owner == getpid() && i < l->n_held; i++)
		if (last_user(l->held[i].fd))
			remove_layer_dir(l->held[i].dir);
	layer_free(l);
}

int layer_hold(struct ab_layer *l, const char *name, struct ab_error *err)
{
	const char *slash = strrchr(l->dir, '/');
	char dir[PATH_MAX], info[PATH_MAX + 16];
	for (size_t i = 0; i < l->n_held; i++)
		if (!strcmp(strrchr(l->held[i].dir, '/') + 1, name))
			return 0;
	snprintf(dir, sizeof(dir), "%.*s/%s", (int)(slash - l->dir), l->dir, name);
	snprintf(info, sizeof(info), "%s/layer.info", dir);
	struct layer_held *h = realloc(l->held, (l->n_held + 1) * sizeof(*h));
	if (!h)
		return ab_error_set(err, ENOMEM, "fork");
	l->held = h;
	h = &h[l->n_held];
	h->fd = open(info, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st = {.st_nlink = 0};
	/* gone, or being removed (its last user went) */
	if (h->fd < 0 || flock(h->fd, LOCK_SH | LOCK_NB) < 0 || fstat(h->fd, &st) < 0 ||
	    st.st_nlink == 0) {
		int e = errno == ENOENT || errno == EWOULDBLOCK || st.st_nlink == 0 ? ENOENT
										    : errno;
		ab_close_keep_errno(h->fd);
		return ab_error_plain(err, e,
				      "fork: the layers %s stand on are gone (their sandbox "
				      "ended)",
				      dir);
	}
	if (!(h->dir = strdup(dir))) {
		close(h->fd);
		return ab_error_set(err, ENOMEM, "fork");
	}
	l->n_held++;
	return 0;
}

void layer_sweep(void)
{
	char base[PATH_MAX];
	if (ab_state_dir("layers", base, sizeof(base)) == 0)
		sweep_stale(base);
}

int layer_open(const char *dir, struct ab_layer **out, struct ab_error *err)
{
	struct ab_layer *l = layer_new();
	if (!l)
		return ab_error_set(err, ENOMEM, "opening the layer %s", dir);
	l->keep = true;
	l->dir = realpath(dir, NULL);
	int r = l->dir ? 0 : ab_error_set(err, errno, "cannot open the layer %s", dir);
	if (r == 0)
		r = read_info(l, err);
	if (r == 0)
		r = lock_layer(l, err);
	if (r < 0) {
		layer_free(l);
		return r;
	}
	*out = l;
	return 0;
}

int layer_discard(struct ab_layer *l, struct ab_error *err)
{
	int r = remove_layer_dir(l->dir);
	if (r < 0)
		return ab_error_set(err, -r, "cannot remove the layer %s", l->dir);
	l->keep = true; /* gone already */
	return 0;
}

bool layer_is_protected(const struct ab_layer *l, const char *rel)
{
	for (size_t i = 0; i < l->n_protect; i++)
		if (ab_path_is_under(rel, l->protect[i]))
			return true;
	return false;
}

char **layer_protected_changes(const struct ab_layer *l)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/upper", l->dir);
	cleanup_fd int up = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	char **out = NULL;
	size_t n = 0;
	for (size_t i = 0; up >= 0 && i < l->n_protect; i++) {
		/* in the layer at all (a symlink on the way counts) */
		int fd = ab_open_beneath(up, l->protect[i]);
		if (fd >= 0)
			close(fd);
		else if (fd != -ELOOP)
			continue;
		if (ab_strv_push(&out, &n, l->protect[i]) < 0)
			break;
	}
	return out;
}

/* ---- sandbox side ---- */

int layer_keep_fds(const struct ab_layer *l, int *fds)
{
	fds[0] = l->tree_fd;
	return l->tree_fd >= 0;
}

void layer_close_dirs(struct ab_layer *l)
{
	ab_close_keep_errno(l->upper_fd);
	ab_close_keep_errno(l->work_fd);
	ab_close_keep_errno(l->tree_fd);
	l->upper_fd = l->work_fd = l->tree_fd = -1;
}

int layer_open_dirs(struct ab_layer *l, struct ab_error *err)
{
	if (l->tree_fd >= 0)
		return 0; /* attached in the new root by overlay_mount_workspace */
	cleanup_fd int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return ab_error_set(err, errno, "cannot open /");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/upper", l->dir + 1);
	l->upper_fd = ab_open_beneath(root, path);
	snprintf(path, sizeof(path), "%s/work", l->dir + 1);
	l->work_fd = l->upper_fd < 0 ? l->upper_fd : ab_open_beneath(root, path);
	if (l->upper_fd < 0 || l->work_fd < 0)
		return ab_error_set(err, -(l->upper_fd < 0 ? l->upper_fd : l->work_fd),
				    "cannot open the layer %s", l->dir);
	return 0;
}
