/* Applying a layer's changes to the host workspace (layer.h).
 *
 * Each file is written to a temporary name beside its target, with the
 * layer's mode and times, synced, then renamed over the target: a crash
 * leaves every file either old or new (and at worst a temporary
 * ".NAME.agentbox-*" beside it). Directories are opened beneath the
 * workspace without following any symlink (ab_open_beneath); files the
 * layer holds as hard links of one another stay linked. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "layer/layer_review.h"
#include "layer/protect.h"
#include "util/util.h"

struct commit_ctx {
	const struct ab_layer *l;
	int upfd, wsfd;
	struct stat ws_st; /* new files as root: the workspace owner's */
	struct link {
		dev_t dev;
		ino_t ino;
		char *path;
	} * links;
	size_t n_links;
	unsigned counter;
};

static bool is_root(void)
{
	return geteuid() == 0;
}

static void split(const char *rel, char *parent, size_t n, const char **name)
{
	const char *slash = strrchr(rel, '/');
	*name = slash ? slash + 1 : rel;
	snprintf(parent, n, "%.*s", slash ? (int)(slash - rel) : 0, rel);
}

static int open_dir_fd(int dirfd, const char *rel)
{
	int fd = *rel ? ab_open_beneath(dirfd, rel) : fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return fd < -1 ? fd : -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		close(fd);
		return -ENOTDIR;
	}
	return fd;
}

/* The directory rel of the workspace, made (with the layer's modes) where
 * missing when create. */
static int open_parent(struct commit_ctx *x, const char *rel, bool create)
{
	int fd = open_dir_fd(x->wsfd, rel);
	if (fd != -ENOENT || !create)
		return fd;
	cleanup_fd int cur = fcntl(x->wsfd, F_DUPFD_CLOEXEC, 3);
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", rel);
	for (char *comp = buf, *next; comp; comp = next) {
		next = strchr(comp, '/');
		if (next)
			*next++ = '\0';
		struct stat up;
		mode_t mode = 0755;
		if (fstatat(x->upfd, buf, &up, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(up.st_mode))
			mode = up.st_mode & 07777;
		if (mkdirat(cur, comp, mode) == 0 && is_root() &&
		    fchownat(cur, comp, x->ws_st.st_uid, x->ws_st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		int sub = open_dir_fd(cur, comp);
		if (sub < 0)
			return sub;
		close(cur);
		cur = sub;
		if (next)
			next[-1] = '/';
	}
	return ab_steal_fd(&cur);
}

static int copy_fd(int in, int out)
{
	char buf[65536];
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n == 0)
			return 0;
		if (n > 0)
			continue;
		if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
			return -errno;
		break;
	}
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n == 0)
			return 0;
		if (n < 0)
			return -errno;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0)
				return -errno;
			off += w;
		}
	}
}

static void owner_for(const struct commit_ctx *x, const struct change *c, uid_t *uid, gid_t *gid)
{
	bool keep = c->has_host && c->status == CHANGE_MODIFIED;
	*uid = keep ? c->host.st_uid : x->ws_st.st_uid;
	*gid = keep ? c->host.st_gid : x->ws_st.st_gid;
}

static struct link *find_link(struct commit_ctx *x, const struct stat *st)
{
	for (size_t i = 0; i < x->n_links; i++)
		if (x->links[i].dev == st->st_dev && x->links[i].ino == st->st_ino)
			return &x->links[i];
	return NULL;
}

static int write_regular(struct commit_ctx *x, const struct change *c, int parent, const char *tmp)
{
	struct link *ln = c->up.st_nlink > 1 ? find_link(x, &c->up) : NULL;
	if (ln)
		return linkat(x->wsfd, ln->path, parent, tmp, 0) < 0 ? -errno : 0;
	cleanup_fd int in = layer_open_file(x->upfd, c->path);
	if (in < 0)
		return in;
	cleanup_fd int out =
		openat(parent, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	int r = copy_fd(in, out);
	uid_t uid;
	gid_t gid;
	owner_for(x, c, &uid, &gid);
	struct timespec times[2] = {c->up.st_atim, c->up.st_mtim};
	if (r == 0 && is_root() && fchown(out, uid, gid) < 0)
		r = -errno;
	if (r == 0 &&
	    (fchmod(out, c->up.st_mode & 01777) < 0 || futimens(out, times) < 0 || fsync(out) < 0))
		r = -errno;
	if (r == 0 && c->up.st_nlink > 1) {
		void *p = realloc(x->links, (x->n_links + 1) * sizeof(*x->links));
		if (p) {
			x->links = p;
			x->links[x->n_links++] =
				(struct link){c->up.st_dev, c->up.st_ino, strdup(c->path)};
		}
	}
	return r;
}

static int write_symlink(struct commit_ctx *x, const struct change *c, int parent, const char *tmp)
{
	char target[PATH_MAX];
	cleanup_fd int fd = ab_open_beneath(x->upfd, c->path);
	if (fd < 0)
		return fd;
	ssize_t n = readlinkat(fd, "", target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	if (symlinkat(target, parent, tmp) < 0)
		return -errno;
	uid_t uid;
	gid_t gid;
	owner_for(x, c, &uid, &gid);
	struct timespec times[2] = {c->up.st_atim, c->up.st_mtim};
	if ((is_root() && fchownat(parent, tmp, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) ||
	    utimensat(parent, tmp, times, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

static int record(struct commit_ctx *x, int parent, const char *name, const char *rel)
{
	struct stat st;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	char path[PATH_MAX], line[PATH_MAX + 80];
	snprintf(path, sizeof(path), "%s/committed", x->l->dir);
	cleanup_fd int fd =
		open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	int n = snprintf(line, sizeof(line), "%lld %ld %llu %s\n", (long long)st.st_ctim.tv_sec,
			 st.st_ctim.tv_nsec, (unsigned long long)st.st_ino, rel);
	if (fd < 0 || write(fd, line, (size_t)n) != n)
		return -errno;
	return 0;
}

static int commit_dir(struct commit_ctx *x, const struct change *c, int parent, const char *name)
{
	struct stat st;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
		int r = layer_remove_tree_at(parent, name);
		if (r < 0)
			return r;
	}
	if (mkdirat(parent, name, c->up.st_mode & 07777) == 0) {
		if (is_root() && fchownat(parent, name, x->ws_st.st_uid, x->ws_st.st_gid,
					  AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	} else if (errno != EEXIST) {
		return -errno;
	}
	/* a directory we never follow out of: opened beneath, changed by fd */
	cleanup_fd int fd = open_dir_fd(parent, name);
	if (fd < 0)
		return fd;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return chmod(path, c->up.st_mode & 07777) < 0 ? -errno : 0;
}

/* Write the layer's version of c->path into the workspace. */
static int commit_one(struct commit_ctx *x, const struct change *c)
{
	char pdir[PATH_MAX], tmp[NAME_MAX + 1];
	const char *name;
	split(c->path, pdir, sizeof(pdir), &name);
	cleanup_fd int parent = open_parent(x, pdir, true);
	if (parent < 0)
		return parent;
	if (S_ISDIR(c->up.st_mode))
		return commit_dir(x, c, parent, name);
	/* write_regular() keeps mode & 01777: setuid and setgid bits of the
	 * layer never reach the host */
	if (!S_ISREG(c->up.st_mode) && !S_ISLNK(c->up.st_mode))
		return -EOPNOTSUPP; /* fifos, sockets, devices stay in the layer */
	snprintf(tmp, sizeof(tmp), ".%.200s.agentbox-%d-%u", name, (int)getpid(), x->counter++);
	int r = S_ISREG(c->up.st_mode) ? write_regular(x, c, parent, tmp)
				       : write_symlink(x, c, parent, tmp);
	struct stat st;
	if (r == 0 && fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		r = layer_remove_tree_at(parent, name);
	if (r == 0 && renameat(parent, tmp, parent, name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(parent, tmp, 0);
		return r;
	}
	return record(x, parent, name, c->path);
}

static int delete_one(struct commit_ctx *x, const char *rel)
{
	char pdir[PATH_MAX];
	const char *name;
	split(rel, pdir, sizeof(pdir), &name);
	cleanup_fd int parent = open_parent(x, pdir, false);
	if (parent == -ENOENT)
		return 0;
	if (parent < 0)
		return parent;
	return layer_remove_tree_at(parent, name);
}

/* A requested path, made relative to the workspace: "/workspace/a/b",
 * "./a/b/" and "a/b" are all "a/b"; "" is the whole workspace. */
static int normalize_request(const char *p, char *out, size_t n)
{
	if (strncmp(p, "/workspace", 10) == 0 && (p[10] == '/' || !p[10]))
		p += 10;
	else if (p[0] == '/')
		return -EINVAL;
	size_t len = 0;
	for (const char *s = p; *s;) {
		while (*s == '/')
			s++;
		const char *e = s + strcspn(s, "/");
		size_t cl = (size_t)(e - s);
		if (cl == 0)
			break;
		if (cl == 2 && !strncmp(s, "..", 2))
			return -EINVAL;
		if (!(cl == 1 && *s == '.')) {
			if (len + cl + 2 > n)
				return -ENAMETOOLONG;
			if (len)
				out[len++] = '/';
			memcpy(out + len, s, cl);
			len += cl;
		}
		s = e;
	}
	out[len] = '\0';
	return 0;
}

static bool under(const char *path, const char *req)
{
	size_t n = strlen(req);
	return !n || (!strncmp(path, req, n) && (path[n] == '/' || !path[n]));
}

/* What a selection takes of a change: a selection commits exactly the
 * paths beneath it, so of a rename with one end outside it, a source
 * outside is not deleted (PICK_WRITE) and a destination outside is not
 * written (PICK_OUTSIDE: nothing is applied); both are reported. */
enum pick { PICK_NONE, PICK_ALL, PICK_WRITE, PICK_OUTSIDE };

static bool under_any(const char *path, char **req, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (under(path, req[i]))
			return true;
	return false;
}

static enum pick selected(const struct change *c, char **req, size_t n)
{
	if (c->gone)
		return PICK_NONE;
	if (n == 0)
		return PICK_ALL;
	bool to = under_any(c->path, req, n), from = c->from && under_any(c->from, req, n);
	if (to)
		return !c->from || from ? PICK_ALL : PICK_WRITE;
	return from ? PICK_OUTSIDE : PICK_NONE;
}

/* A protected path is committed only with force and a requested path
 * naming it: one it is beneath that is itself protected (or beneath a
 * protected one). Returns the path refused, or NULL. */
static const char *protected_refused(const struct ab_layer *l, const struct change *c, enum pick p,
				     char **req, size_t n, bool force)
{
	const char *paths[2] = {c->path, p == PICK_ALL ? c->from : NULL};
	for (int k = 0; k < 2; k++) {
		if (!paths[k] || !layer_is_protected(l, paths[k]))
			continue;
		bool named = false;
		for (size_t i = 0; i < n && !named; i++)
			named = under(paths[k], req[i]) && layer_is_protected(l, req[i]);
		if (!force || !named)
			return paths[k];
	}
	return NULL;
}

/* Before anything is written: a selected change commit must not apply. */
static int refused(const struct commit_ctx *x, const struct change_list *cl, char **req, size_t n,
		   bool force, struct ab_error *err)
{
	for (size_t i = 0; i < cl->n; i++) {
		const struct change *c = &cl->c[i];
		enum pick p = selected(c, req, n);
		if (p != PICK_ALL && p != PICK_WRITE)
			continue;
		const char *prot = protected_refused(x->l, c, p, req, n, force);
		if (prot)
			return ab_error_plain(
				err, EINVAL,
				"commit: '%s' is a protected path (where a command can "
				"plant hooks or startup files): nothing was committed; "
				"review it, then commit it by naming it (or the "
				"protected path it is in) with force",
				prot);
		if (c->too_deep)
			return ab_error_plain(err, EINVAL,
					      "commit: directories nested deeper than a path can "
					      "name (%d bytes) are in '%.64s%s': nothing was "
					      "committed; commit other paths, or discard the layer",
					      PATH_MAX - 1, c->path,
					      strlen(c->path) > 64 ? "..." : "");
	}
	return 0;
}

static int apply(struct commit_ctx *x, const struct change *c, enum pick p)
{
	if (c->status == CHANGE_DELETED)
		return delete_one(x, c->path);
	int r = commit_one(x, c);
	if (r == 0 && c->status == CHANGE_RENAMED && p == PICK_ALL)
		r = delete_one(x, c->from);
	return r;
}

static int commit_selected(struct commit_ctx *x, struct change_list *cl, char **req, size_t n_req,
			   bool force, json_object *out, struct ab_error *err)
{
	int r = refused(x, cl, req, n_req, force, err);
	if (r < 0)
		return r;
	json_object *done = json_object_new_array(), *conflicts = json_object_new_array();
	json_object *outside = json_object_new_array();
	json_object_object_add(out, "committed", done);
	json_object_object_add(out, "conflicts", conflicts);
	json_object_object_add(out, "outside_selection", outside);
	for (size_t i = 0; i < cl->n; i++) {
		enum pick p = selected(&cl->c[i], req, n_req);
		if ((p == PICK_ALL || p == PICK_WRITE) && change_conflicts(x->l, cl, &cl->c[i]))
			json_object_array_add(conflicts, json_object_new_string(cl->c[i].path));
		if (p == PICK_OUTSIDE || p == PICK_WRITE)
			json_object_array_add(
				outside, json_object_new_string(p == PICK_OUTSIDE ? cl->c[i].path
										  : cl->c[i].from));
	}
	if (json_object_array_length(conflicts) > 0 && !force)
		return 0; /* nothing written: the caller decides */
	for (size_t i = 0; i < cl->n; i++) {
		const struct change *c = &cl->c[i];
		enum pick p = selected(c, req, n_req);
		if (p != PICK_ALL && p != PICK_WRITE)
			continue;
		r = apply(x, c, p);
		if (r == -ESTALE)
			return ab_error_plain(
				err, ESTALE,
				"cannot commit '%s' to %s: it changed while it was "
				"committed (a command still writing the layer?); what "
				"was committed before it stays",
				c->path, x->l->workspace);
		if (r < 0)
			return ab_error_set(err, -r, "cannot commit '%s' to %s", c->path,
					    x->l->workspace);
		json_object_array_add(done, json_object_new_string(c->path));
	}
	return 0;
}

int layer_commit(const struct ab_layer *l, char *const *paths, size_t n_paths, bool force,
		 json_object **out, struct ab_error *err)
{
	struct change_list cl;
	struct commit_ctx x = {.l = l, .upfd = -1, .wsfd = -1};
	cleanup_strv char **req = calloc(n_paths + 1, sizeof(char *));
	if (!req)
		return ab_error_set(err, ENOMEM, "commit");
	for (size_t i = 0; i < n_paths; i++) {
		char buf[PATH_MAX];
		if (normalize_request(paths[i], buf, sizeof(buf)) < 0)
			return ab_error_plain(err, EINVAL,
					      "commit: '%s' is not a path in the workspace "
					      "(relative, or beneath /workspace, without '..')",
					      paths[i]);
		if (!(req[i] = strdup(buf)))
			return ab_error_set(err, ENOMEM, "commit");
	}
	int r = change_list_build(l, &cl, &x.upfd, &x.wsfd, err);
	if (r == 0 && fstat(x.wsfd, &x.ws_st) < 0)
		r = ab_error_set(err, errno, "cannot stat the workspace %s", l->workspace);
	for (size_t i = 0; r == 0 && i < n_paths; i++) {
		bool any = false;
		for (size_t j = 0; j < cl.n && !any; j++)
			any = selected(&cl.c[j], &req[i], 1) != PICK_NONE;
		if (!any)
			r = ab_error_plain(err, ENOENT, "commit: no change at '%s'", paths[i]);
	}
	if (r == 0) {
		*out = json_object_new_object();
		r = commit_selected(&x, &cl, req, n_paths, force, *out, err);
		if (r < 0) {
			json_object_put(*out);
			*out = NULL;
		}
	}
	for (size_t i = 0; i < x.n_links; i++)
		free(x.links[i].path);
	free(x.links);
	ab_close_keep_errno(x.upfd);
	ab_close_keep_errno(x.wsfd);
	change_list_free(&cl);
	return r;
}

/* ---- the session protocol's ops ---- */

const char *const *layer_op_fields(const char *op)
{
	/* timeout: the watchdog's bound (front/front_layer.c) */
	/* since: a checkpoint's name (src/ckpt/) */
	static const char *const changes[] = {"diff",	 "max_diff_bytes", "include_ignored",
					      "timeout", "since",	   NULL};
	static const char *const commit[] = {"paths", "force", "timeout", NULL};
	static const char *const discard[] = {NULL};
	return !strcmp(op, "changes")	? changes
	       : !strcmp(op, "commit")	? commit
	       : !strcmp(op, "discard") ? discard
					: NULL;
}

enum ab_errc layer_error_code(int code)
{
	return code == EINVAL || code == ENOENT ? AB_ERRC_INVALID_REQUEST : AB_ERRC_INTERNAL;
}

static int paths_of(json_object *req, char ***out, size_t *n, struct ab_error *err)
{
	json_object *v;
	*out = NULL;
	*n = 0;
	if (!json_object_object_get_ex(req, "paths", &v) || json_object_is_type(v, json_type_null))
		return 0;
	if (!json_object_is_type(v, json_type_array))
		return ab_error_plain(err, EINVAL, "commit: \"paths\" must be an array of strings");
	size_t len = json_object_array_length(v);
	*out = calloc(len + 1, sizeof(char *));
	if (!*out)
		return ab_error_set(err, ENOMEM, "commit");
	for (size_t i = 0; i < len; i++) {
		json_object *s = json_object_array_get_idx(v, i);
		if (!json_object_is_type(s, json_type_string))
			return ab_error_plain(err, EINVAL,
					      "commit: \"paths\" must be an array of strings");
		(*out)[(*n)++] = strdup(json_object_get_string(s));
	}
	return 0;
}

static int flag(json_object *req, const char *op, const char *key, bool *out, struct ab_error *err)
{
	json_object *v;
	*out = false;
	if (!json_object_object_get_ex(req, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return ab_error_plain(err, EINVAL, "%s: \"%s\" must be true or false", op, key);
	*out = json_object_get_boolean(v);
	return 0;
}

int layer_session_op(struct ab_layer *l, const char *op, json_object *req, json_object **reply,
		     bool *end, struct ab_error *err)
{
	*reply = NULL;
	*end = false;
	if (!l)
		return ab_error_plain(err, EINVAL,
				      "%s: the session's workspace is not an overlay (start it "
				      "with --workspace-mode overlay)",
				      op);
	if (strcmp(op, "changes") == 0) {
		json_object *v;
		struct layer_change_opts o = {.diff_max = 65536};
		if (flag(req, op, "diff", &o.diff, err) < 0 ||
		    flag(req, op, "include_ignored", &o.include_ignored, err) < 0)
			return -EINVAL;
		if (json_object_object_get_ex(req, "max_diff_bytes", &v)) {
			int64_t m = json_object_is_type(v, json_type_int) ? json_object_get_int64(v)
									  : 0;
			if (m < 1 || m > (16 << 20))
				return ab_error_plain(err, EINVAL,
						      "changes: \"max_diff_bytes\" must be 1 to "
						      "16777216");
			o.diff_max = (size_t)m;
		}
		return layer_changes(l, &o, reply, err);
	}
	if (strcmp(op, "commit") == 0) {
		cleanup_strv char **paths = NULL;
		size_t n = 0;
		bool force;
		int r = paths_of(req, &paths, &n, err);
		if (r == 0)
			r = flag(req, op, "force", &force, err);
		return r < 0 ? r : layer_commit(l, paths, n, force, reply, err);
	}
	if (strcmp(op, "discard") == 0) {
		/* the overlay caches what it looked up: its layer cannot be
		 * emptied under it, so the sandbox ends and the layer goes */
		l->keep = false;
		*end = true;
		*reply = json_object_new_object();
		json_object_object_add(*reply, "discarded", json_object_new_boolean(true));
		return 0;
	}
	return ab_error_plain(err, EINVAL, "unknown layer op '%s'", op);
}
