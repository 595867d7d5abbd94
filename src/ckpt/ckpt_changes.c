/* What changed after a checkpoint (ckpt.h): the uppers stacked above it,
 * walked on the host. What a command wrote is hostile: every directory is
 * opened without following, each entry looked at with fstatat, never
 * opened; the walk is bounded in depth and in entries. */
#include "ckpt/ckpt.h"

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
#include "util/util.h"

#define WALK_DEPTH   128
#define WALK_ENTRIES 100000

struct walk {
	json_object *seen; /* path -> true, the topmost layer's word wins */
	json_object *arr;
	long long bytes;
	size_t entries;
	bool list;
};

static const char *type_of(mode_t m)
{
	return S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "symlink" : S_ISREG(m) ? "file" : "other";
}

bool ckpt_whiteout(int dfd, const char *name, const struct stat *st)
{
	if (S_ISCHR(st->st_mode) && st->st_rdev == 0)
		return true;
	if (!S_ISREG(st->st_mode) || st->st_size != 0)
		return false;
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "/proc/self/fd/%d/%s", dfd, name);
	return lgetxattr(p, "user.overlay.whiteout", NULL, 0) >= 0;
}

static void note(struct walk *w, const char *rel, const char *status, const struct stat *st)
{
	if (!w->list || json_object_object_get_ex(w->seen, rel, NULL))
		return;
	json_object_object_add(w->seen, rel, json_object_new_boolean(1));
	json_object *e = json_object_new_object();
	json_object_object_add(e, "path", json_object_new_string(rel));
	json_object_object_add(e, "status", json_object_new_string(status));
	if (strcmp(status, "deleted") != 0) {
		json_object_object_add(e, "type", json_object_new_string(type_of(st->st_mode)));
		if (S_ISREG(st->st_mode))
			json_object_object_add(e, "size", json_object_new_int64(st->st_size));
	}
	json_object_array_add(w->arr, e);
}

/* dfd is owned and closed here. */
static int walk(struct walk *w, int dfd, const char *rel, int depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++w->entries > WALK_ENTRIES) {
			r = -E2BIG;
			break;
		}
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "", de->d_name) >=
		    (int)sizeof(path))
			continue;
		if (ckpt_whiteout(dirfd(d), de->d_name, &st)) {
			note(w, path, "deleted", &st);
			continue;
		}
		if (S_ISREG(st.st_mode))
			w->bytes += st.st_size;
		if (!S_ISDIR(st.st_mode)) {
			note(w, path, "written", &st);
			continue;
		}
		if (depth >= WALK_DEPTH) {
			r = -ELOOP;
			break;
		}
		int sub = openat(dirfd(d), de->d_name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (sub >= 0)
			r = walk(w, sub, path, depth + 1);
	}
	closedir(d);
	return r;
}

static int walk_layer(struct walk *w, const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : walk(w, fd, "", 0);
}

long long ckpt_tree_bytes(const char *path)
{
	struct walk w = {0};
	walk_layer(&w, path);
	return w.bytes;
}

int ckpt_tree_bytes_all(const char *path, long long *bytes)
{
	struct walk w = {0};
	int r = walk_layer(&w, path);
	*bytes = w.bytes;
	return r;
}

int ckpt_changes(const struct ab_layer *l, char *const *top, size_t n_top, char *const *c,
		 size_t n_c, json_object *o, struct ab_error *err)
{
	if (n_c > n_top)
		return ab_error_plain(err, EINVAL,
				      "changes: the workspace was restored to before that "
				      "checkpoint");
	size_t above = n_top - n_c;
	for (size_t i = 0; i < n_c; i++)
		if (strcmp(top[above + i], c[i]) != 0)
			return ab_error_plain(err, EINVAL,
					      "changes: the workspace was restored to another "
					      "checkpoint since; that one is not beneath it");
	struct walk w = {
		.seen = json_object_new_object(), .arr = json_object_new_array(), .list = true};
	int r = 0;
	for (size_t i = 0; i < above && r == 0; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", l->dir, top[i]);
		r = walk_layer(&w, path);
	}
	json_object_put(w.seen);
	if (r < 0) {
		json_object_put(w.arr);
		return ab_error_set(err, -r, "changes: cannot read the layers of %s", l->dir);
	}
	json_object_object_add(o, "changes", w.arr);
	json_object_object_add(o, "layer_bytes", json_object_new_int64(w.bytes));
	return 0;
}
