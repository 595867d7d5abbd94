/* Reviewing a layer on the host side (layer.h): what it changes against
 * the host workspace, and applying that to the workspace.
 *
 * The upper directory is walked, never the overlay: a whiteout (a 0/0
 * character device, or an empty file with user.overlay.whiteout) and the
 * host entries an opaque directory (user.overlay.opaque) hides are
 * deletions; an upper entry equal to the host's is no change (so what a
 * session committed drops out of the list). Workspace paths are opened with
 * ab_open_beneath (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or a walk
 * with O_NOFOLLOW): no symlink, the agent's or anyone's, is followed. */
#include "layer/layer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/error.h"
#include "layer/layer_ignore.h"
#include "layer/layer_review.h"
#include "layer/protect.h"
#include "util/util.h"

static const char *const status_names[] = {"added", "modified", "deleted", "renamed"};

static int push(struct change_list *cl, const char *rel, enum change_status status,
		const struct stat *up, const struct stat *host)
{
	if (cl->n == cl->cap) {
		size_t cap = cl->cap ? cl->cap * 2 : 64;
		struct change *c = realloc(cl->c, cap * sizeof(*c));
		if (!c)
			return -ENOMEM;
		cl->c = c;
		cl->cap = cap;
	}
	struct change *c = &cl->c[cl->n];
	*c = (struct change){.status = status, .path = strdup(rel)};
	if (!c->path)
		return -ENOMEM;
	if (up)
		c->up = *up;
	if (host)
		c->host = *host;
	c->has_up = up != NULL;
	c->has_host = host != NULL;
	cl->n++;
	return 0;
}

void change_list_free(struct change_list *cl)
{
	for (size_t i = 0; i < cl->n; i++) {
		free(cl->c[i].path);
		free(cl->c[i].from);
	}
	free(cl->c);
	free(cl->committed);
	memset(cl, 0, sizeof(*cl));
}

static bool xattr_is(int dirfd, const char *name, const char *attr, const char *want)
{
	char path[64], val[8];
	cleanup_fd int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = getxattr(path, attr, val, sizeof(val));
	return n >= 0 &&
	       (!want || ((size_t)n == strlen(want) && memcmp(val, want, (size_t)n) == 0));
}

static bool is_whiteout(int dirfd, const char *name, const struct stat *st)
{
	if (S_ISCHR(st->st_mode) && st->st_rdev == 0)
		return true;
	/* Linux 6.7's xattr whiteouts, for overlays nested in overlays */
	return S_ISREG(st->st_mode) && st->st_size == 0 &&
	       xattr_is(dirfd, name, "user.overlay.whiteout", NULL);
}

static int same_bytes(int afd, int bfd)
{
	char a[16384], b[16384];
	for (;;) {
		ssize_t n = read(afd, a, sizeof(a));
		if (n < 0)
			return -errno;
		ssize_t got = 0;
		while (got < n) {
			ssize_t k = read(bfd, b + got, (size_t)(n - got));
			if (k <= 0)
				return 0;
			got += k;
		}
		if (n == 0)
			return read(bfd, b, 1) == 0;
		if (memcmp(a, b, (size_t)n) != 0)
			return 0;
	}
}

/* Same type, mode and content (or link target). */
static bool same_entry(int updir, int hostdir, const char *name, const struct stat *up,
		       const struct stat *host)
{
	if ((up->st_mode & S_IFMT) != (host->st_mode & S_IFMT) ||
	    (up->st_mode & 07777) != (host->st_mode & 07777))
		return false;
	if (S_ISLNK(up->st_mode)) {
		char a[PATH_MAX], b[PATH_MAX];
		ssize_t n = readlinkat(updir, name, a, sizeof(a));
		ssize_t m = readlinkat(hostdir, name, b, sizeof(b));
		return n >= 0 && n == m && memcmp(a, b, (size_t)n) == 0;
	}
	if (!S_ISREG(up->st_mode))
		return S_ISDIR(up->st_mode);
	if (up->st_size != host->st_size)
		return false;
	cleanup_fd int a = layer_open_at(updir, name);
	cleanup_fd int b = layer_open_at(hostdir, name);
	return a >= 0 && b >= 0 && same_bytes(a, b) == 1;
}

static void join(char *out, size_t n, const char *rel, const char *name)
{
	int k = snprintf(out, n, "%s%s", rel, *rel ? "/" : "");
	if (k >= 0 && (size_t)k < n)
		snprintf(out + k, n - (size_t)k, "%s", name);
}

/* Every host entry beneath hostdir/name, as deleted (an opaque directory's
 * hidden ones are reported one level deep: deleting a directory deletes
 * what is in it). */
static int hidden_by_opaque(struct change_list *cl, int upfd, int hostfd, const char *rel)
{
	cleanup_fd int d = openat(hostfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = d < 0 ? NULL : fdopendir(d);
	if (!dp)
		return 0; /* nothing readable there to lose */
	d = -1;
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(dp))) {
		struct stat st, hs;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(upfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			continue; /* the walk of the upper directory sees it */
		if (fstatat(hostfd, de->d_name, &hs, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		char path[PATH_MAX];
		join(path, sizeof(path), rel, de->d_name);
		r = push(cl, path, CHANGE_DELETED, NULL, &hs);
	}
	closedir(dp);
	return r;
}

/* The review walks trees of any depth in bounded fds: the levels below
 * WALK_HELD keep their directories open; a deeper one closes its
 * parent's while it walks a subdirectory, and opens it again (beneath
 * the roots, no symlink followed) when it is back. Its depth is bounded
 * by PATH_MAX: a directory whose entries no path can name is reported
 * too_deep, and commit refuses it. */
#define WALK_HELD 32

struct walker {
	struct change_list *cl;
	int uproot, wsroot;
};

static int walk(struct walker *w, int *upfd, int *hostfd, const char *rel, int depth);

static int reopen(int root, const char *rel)
{
	int fd = *rel ? ab_open_beneath(root, rel) : fcntl(root, F_DUPFD_CLOEXEC, 3);
	return fd < 0 ? (fd < -1 ? fd : -errno) : fd;
}

/* rel has an entry no path can name: rel's change says so. */
static int too_deep(struct walker *w, int upfd, int hostfd, const char *rel)
{
	struct change_list *cl = w->cl;
	for (size_t i = cl->n; i-- > 0;)
		if (strcmp(cl->c[i].path, rel) == 0) {
			cl->c[i].too_deep = true;
			return 0;
		}
	struct stat up, host;
	bool on_host = hostfd >= 0 && fstat(hostfd, &host) == 0;
	if (fstat(upfd, &up) < 0)
		return -errno;
	int r = push(cl, rel, on_host ? CHANGE_MODIFIED : CHANGE_ADDED, &up,
		     on_host ? &host : NULL);
	if (r == 0)
		cl->c[cl->n - 1].too_deep = true;
	return r;
}

static int walk_sub(struct walker *w, int *upfd, int *hostfd, const char *rel, const char *name,
		    const char *path, bool host_dir, int depth)
{
	cleanup_fd int sub = openat(*upfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cleanup_fd int hsub = host_dir ? ab_open_beneath(*hostfd, name) : -1;
	if (sub < 0)
		return -errno;
	if (hsub < -1)
		hsub = -1;
	int r;
	if (hsub >= 0 && xattr_is(*upfd, name, "user.overlay.opaque", "y") &&
	    (r = hidden_by_opaque(w->cl, sub, hsub, path)) < 0)
		return r;
	bool had_host = *hostfd >= 0;
	if (depth >= WALK_HELD) {
		ab_close_keep_errno(*upfd);
		ab_close_keep_errno(*hostfd);
		*upfd = *hostfd = -1;
	}
	r = walk(w, &sub, &hsub, path, depth + 1);
	if (*upfd < 0) {
		*upfd = reopen(w->uproot, rel);
		*hostfd = had_host ? reopen(w->wsroot, rel) : -1;
		if (*hostfd < -1)
			*hostfd = -1;
		if (r == 0 && *upfd < 0)
			r = *upfd;
	}
	return r;
}

static int walk_entry(struct walker *w, int *upfd, int *hostfd, const char *rel, const char *name,
		      int depth)
{
	struct change_list *cl = w->cl;
	struct stat up, host;
	cleanup_free char *path = NULL;
	if (asprintf(&path, "%s%s%s", rel, *rel ? "/" : "", name) < 0)
		return -ENOMEM;
	if (strlen(path) >= PATH_MAX)
		return too_deep(w, *upfd, *hostfd, rel);
	if (fstatat(*upfd, name, &up, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	bool on_host = *hostfd >= 0 && fstatat(*hostfd, name, &host, AT_SYMLINK_NOFOLLOW) == 0;
	if (is_whiteout(*upfd, name, &up))
		return on_host ? push(cl, path, CHANGE_DELETED, NULL, &host) : 0;
	cl->layer_bytes += (unsigned long long)up.st_blocks * 512;
	if (!S_ISDIR(up.st_mode)) {
		if (on_host && same_entry(*upfd, *hostfd, name, &up, &host))
			return 0;
		return push(cl, path, on_host ? CHANGE_MODIFIED : CHANGE_ADDED, &up,
			    on_host ? &host : NULL);
	}
	bool host_dir = on_host && S_ISDIR(host.st_mode);
	int r = 0;
	if (!host_dir)
		r = push(cl, path, on_host ? CHANGE_MODIFIED : CHANGE_ADDED, &up,
			 on_host ? &host : NULL);
	else if ((up.st_mode & 07777) != (host.st_mode & 07777))
		r = push(cl, path, CHANGE_MODIFIED, &up, &host);
	if (r < 0)
		return r;
	return walk_sub(w, upfd, hostfd, rel, name, path, host_dir, depth);
}

/* Borrows *upfd and *hostfd (-1: nothing on the host), which a deep walk
 * closes and opens again: the caller's to close. */
static int walk(struct walker *w, int *upfd, int *hostfd, const char *rel, int depth)
{
	cleanup_fd int d = openat(*upfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = d < 0 ? NULL : fdopendir(d);
	if (!dp)
		return -errno;
	d = -1;
	/* sorted, so the output is stable and parents come first */
	struct dirent **names = NULL;
	struct dirent *de;
	size_t n = 0, cap = 0;
	int r = 0;
	while ((de = readdir(dp))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			void *p = realloc(names, cap * sizeof(*names));
			if (!p) {
				r = -ENOMEM;
				break;
			}
			names = p;
		}
		size_t len = offsetof(struct dirent, d_name) + strlen(de->d_name) + 1;
		if (!(names[n] = malloc(len))) {
			r = -ENOMEM;
			break;
		}
		memcpy(names[n++], de, len);
	}
	closedir(dp);
	if (n > 1)
		qsort(names, n, sizeof(*names), (int (*)(const void *, const void *))alphasort);
	for (size_t i = 0; i < n; i++) {
		if (r == 0)
			r = walk_entry(w, upfd, hostfd, rel, names[i]->d_name, depth);
		free(names[i]);
	}
	free(names);
	return r;
}

/* An added file with the content of a deleted one is a rename. */
static void find_renames(struct change_list *cl, int upfd, int wsfd)
{
	for (size_t i = 0; i < cl->n; i++) {
		struct change *a = &cl->c[i];
		if (a->status != CHANGE_ADDED || !S_ISREG(a->up.st_mode))
			continue;
		for (size_t j = 0; j < cl->n; j++) {
			struct change *d = &cl->c[j];
			if (d->status != CHANGE_DELETED || d->gone || !S_ISREG(d->host.st_mode) ||
			    d->host.st_size != a->up.st_size)
				continue;
			cleanup_fd int x = layer_open_file(upfd, a->path);
			cleanup_fd int y = layer_open_file(wsfd, d->path);
			if (x < 0 || y < 0 || same_bytes(x, y) != 1)
				continue;
			a->status = CHANGE_RENAMED;
			a->from = strdup(d->path);
			a->host = d->host;
			a->has_host = true;
			d->gone = true; /* folded into the rename */
			break;
		}
	}
}

/* DIR/committed: "ctime_sec ctime_nsec ino path" for each file a commit
 * wrote, so that its own writes are not taken for the host's. */
static void read_committed(const struct ab_layer *l, struct change_list *cl)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/committed", l->dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char line[PATH_MAX + 64];
	while (fgets(line, sizeof(line), f)) {
		struct committed c;
		int off = 0;
		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "%lld %ld %llu %n", &c.sec, &c.nsec, &c.ino, &off) != 3)
			continue;
		void *p = realloc(cl->committed, (cl->n_committed + 1) * sizeof(c));
		if (!p)
			break;
		cl->committed = p;
		snprintf(c.path, sizeof(c.path), "%s", line + off);
		cl->committed[cl->n_committed++] = c;
	}
	fclose(f);
}

bool change_conflicts(const struct ab_layer *l, const struct change_list *cl,
		      const struct change *c)
{
	if (!c->has_host)
		return false;
	const struct timespec *t = &c->host.st_ctim;
	if (t->tv_sec < l->started.tv_sec ||
	    (t->tv_sec == l->started.tv_sec && t->tv_nsec <= l->started.tv_nsec))
		return false;
	for (size_t i = cl->n_committed; i-- > 0;)
		if (strcmp(cl->committed[i].path, c->path) == 0)
			return !(cl->committed[i].sec == t->tv_sec &&
				 cl->committed[i].nsec == t->tv_nsec &&
				 cl->committed[i].ino == (unsigned long long)c->host.st_ino);
	return true;
}

int change_list_build(const struct ab_layer *l, struct change_list *cl, int *upfd, int *wsfd,
		      struct ab_error *err)
{
	char path[PATH_MAX];
	memset(cl, 0, sizeof(*cl));
	snprintf(path, sizeof(path), "%s/%s", l->dir, l->review_upper ? l->review_upper : "upper");
	*upfd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*upfd < 0)
		return ab_error_set(err, errno, "cannot open the layer %s", path);
	*wsfd = open(l->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*wsfd < 0)
		return ab_error_set(err, errno, "cannot open the workspace %s", l->workspace);
	read_committed(l, cl);
	struct walker w = {.cl = cl, .uproot = *upfd, .wsroot = *wsfd};
	cleanup_fd int up = fcntl(*upfd, F_DUPFD_CLOEXEC, 3);
	cleanup_fd int ws = fcntl(*wsfd, F_DUPFD_CLOEXEC, 3);
	if (up < 0 || ws < 0)
		return ab_error_set(err, errno, "cannot read the layer %s", path);
	int r = walk(&w, &up, &ws, "", 0);
	if (r < 0)
		return ab_error_set(err, -r, "cannot read the layer %s", path);
	find_renames(cl, *upfd, *wsfd);
	return 0;
}

int layer_read_link(int dirfd, const char *rel, char *buf, size_t n)
{
	cleanup_fd int fd = ab_open_beneath(dirfd, rel);
	if (fd < 0)
		return fd < -1 ? fd : -errno;
	ssize_t k = readlinkat(fd, "", buf, n - 1);
	if (k < 0)
		return -errno;
	buf[k] = '\0';
	return 0;
}

/* A link at rel whose target, read as a path from rel's directory, is not
 * beneath the workspace: absolute (the host's own root), or climbing
 * above it with "..". Read as written: a symlink on the way is not
 * resolved (commit never follows one, and neither does anything here). */
static bool target_outside(const char *rel, const char *target)
{
	if (target[0] == '/')
		return true;
	long depth = 0;
	for (const char *s = rel; (s = strchr(s, '/')); s++)
		depth++;
	for (const char *s = target; *s;) {
		size_t len = strcspn(s, "/");
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			if (--depth < 0)
				return true;
		} else if (len > 0 && !(len == 1 && s[0] == '.')) {
			depth++;
		}
		s += len;
		s += *s == '/';
	}
	return false;
}

static void link_fields(json_object *j, const struct change *c, int upfd)
{
	char target[PATH_MAX];
	if (!c->has_up || !S_ISLNK(c->up.st_mode) ||
	    layer_read_link(upfd, c->path, target, sizeof(target)) < 0)
		return;
	json_object_object_add(j, "target", json_object_new_string(target));
	json_object_object_add(j, "target_outside",
			       json_object_new_boolean(target_outside(c->path, target)));
}

static const char *type_name(mode_t m)
{
	return S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "symlink" : S_ISREG(m) ? "file" : "other";
}

static json_object *change_json(const struct ab_layer *l, const struct change_list *cl,
				const struct change *c, const struct layer_change_opts *o, int upfd,
				int wsfd)
{
	json_object *j = json_object_new_object();
	json_object_object_add(j, "path", json_object_new_string(c->path));
	json_object_object_add(j, "status", json_object_new_string(status_names[c->status]));
	if (c->from)
		json_object_object_add(j, "from", json_object_new_string(c->from));
	mode_t m = c->has_up ? c->up.st_mode : c->host.st_mode;
	json_object_object_add(j, "type", json_object_new_string(type_name(m)));
	if (c->has_up)
		json_object_object_add(j, "size", json_object_new_int64(c->up.st_size));
	if (c->has_host)
		json_object_object_add(j, "old_size", json_object_new_int64(c->host.st_size));
	json_object_object_add(j, "conflict", json_object_new_boolean(change_conflicts(l, cl, c)));
	json_object_object_add(j, "protected",
			       json_object_new_boolean(layer_is_protected(l, c->path)));
	link_fields(j, c, upfd);
	if (c->too_deep)
		json_object_object_add(j, "too_deep", json_object_new_boolean(true));
	if (o && o->diff && !S_ISDIR(m))
		layer_diff_into(j, c, o->diff_max, upfd, wsfd);
	return j;
}

/* What .gitignore ignores, but never a protected path nor a .gitignore
 * itself: the files are the command's to write, and a review must show it
 * hiding something. */
static bool change_ignored(const struct ab_layer *l, struct layer_ignore *ig,
			   const struct change *c)
{
	const char *base = strrchr(c->path, '/');
	base = base ? base + 1 : c->path;
	if (strcmp(base, ".gitignore") == 0 || layer_is_protected(l, c->path))
		return false;
	mode_t m = c->has_up ? c->up.st_mode : c->host.st_mode;
	return layer_ignored(ig, c->path, S_ISDIR(m));
}

int layer_changes(const struct ab_layer *l, const struct layer_change_opts *o, json_object **out,
		  struct ab_error *err)
{
	struct change_list cl;
	cleanup_fd int upfd = -1;
	cleanup_fd int wsfd = -1;
	int r = change_list_build(l, &cl, &upfd, &wsfd, err);
	if (r < 0) {
		change_list_free(&cl);
		return r;
	}
	json_object *arr = json_object_new_array();
	struct layer_ignore *ig = layer_ignore_new(upfd, wsfd);
	int64_t n_ignored = 0;
	for (size_t i = 0; i < cl.n; i++) {
		if (cl.c[i].gone)
			continue;
		bool ignored = change_ignored(l, ig, &cl.c[i]);
		n_ignored += ignored;
		if (ignored && !(o && o->include_ignored))
			continue;
		json_object *j = change_json(l, &cl, &cl.c[i], o, upfd, wsfd);
		json_object_object_add(j, "ignored", json_object_new_boolean(ignored));
		json_object_array_add(arr, j);
	}
	layer_ignore_free(ig);
	*out = json_object_new_object();
	json_object_object_add(*out, "changes", arr);
	json_object_object_add(*out, "ignored_count", json_object_new_int64(n_ignored));
	json_object_object_add(*out, "layer_bytes", json_object_new_int64((int64_t)cl.layer_bytes));
	json_object_object_add(*out, "layer", json_object_new_string(l->dir));
	change_list_free(&cl);
	return 0;
}
