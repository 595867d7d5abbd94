/* File operations, the sandbox's half (fileop_inside.h): what agentbox
 * runtime's file routes need besides the protocol's operations. They are
 * inner ops (a '_' in the name): fileop_prepare_inner writes them, a
 * client of the protocol cannot send them.
 *
 *   resolve_path  a path's symlinks resolved in the view as `realpath -m`
 *                 resolves them (the runtime answers 403 when the result
 *                 leaves /workspace), and what is there: whether it exists,
 *                 is a directory, its size;
 *   place_file    an upload's temporary file given its mode and renamed
 *                 over its target beside it; the directory reached without
 *                 following any symlink, the file checked after it is
 *                 opened, removed when anything fails.
 *
 * The protocol's operations the runtime sends run in exact mode
 * (fileop_exact.c) on the path resolve_path answered.
 *
 * Every walk is bounded: PATH_MAX bytes, FO_MAX_LINKS symlinks. */
#include "files/fileop.h"
#include "files/fileop_inside.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FO_MAX_LINKS 40 /* symlinks a resolution follows, as the kernel does */

/* The component c (n bytes) appended to the resolved path res (*rn bytes). */
static int push(char *res, size_t *rn, const char *c, size_t n)
{
	if (*rn + 1 + n >= PATH_MAX)
		return -ENAMETOOLONG;
	res[(*rn)++] = '/';
	memcpy(res + *rn, c, n);
	*rn += n;
	res[*rn] = '\0';
	return 0;
}

/* path (absolute) with its symlinks resolved into res (PATH_MAX bytes) as
 * `realpath -m` resolves them: each component looked at without following
 * it, a symlink's target walked in its place (FO_MAX_LINKS at most), ".."
 * taken from what is resolved so far; a component that is not there (or
 * not reachable) is kept as it is. 0 or -errno. */
static int resolve(const char *path, char *res)
{
	char todo[2 * PATH_MAX], target[PATH_MAX];
	size_t rn = 0;
	int links = 0;
	res[0] = '\0';
	if (strlen(path) >= sizeof(todo))
		return -ENAMETOOLONG;
	strcpy(todo, path);
	for (char *p = todo; *p;) {
		while (*p == '/')
			p++;
		char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p), at = rn;
		if (n == 0 || (n == 1 && p[0] == '.')) {
			p = e;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			char *slash = memrchr(res, '/', rn);
			rn = slash ? (size_t)(slash - res) : 0;
			res[rn] = '\0';
			p = e;
			continue;
		}
		int r = push(res, &rn, p, n);
		if (r < 0)
			return r;
		p = e;
		struct stat st;
		if (fstatat(AT_FDCWD, res, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT && errno != ENOTDIR && errno != EACCES)
				return -errno;
			continue; /* not there: kept as it is */
		}
		if (!S_ISLNK(st.st_mode))
			continue;
		if (++links > FO_MAX_LINKS)
			return -ELOOP;
		ssize_t k = readlinkat(AT_FDCWD, res, target, sizeof(target));
		if (k < 0)
			return -errno;
		size_t left = strlen(p);
		if ((size_t)k >= sizeof(target) || (size_t)k + left + 1 > sizeof(todo))
			return -ENAMETOOLONG;
		/* the target, then what was left after the link */
		memmove(todo + k, p, left + 1);
		memcpy(todo, target, (size_t)k);
		p = todo;
		rn = target[0] == '/' ? 0 : at;
		res[rn] = '\0';
	}
	if (rn == 0)
		strcpy(res, "/");
	return 0;
}

int fo_resolve_path(json_object *q)
{
	const char *path = fo_jstr(q, "path", NULL);
	char res[PATH_MAX];
	int r = resolve(path, res);
	if (r < 0)
		return fo_fail_errno(-r, path, "cannot resolve");
	/* what is there, looked at through an fd of the resolved path itself:
	 * a symlink there now was planted after the walk */
	struct stat st;
	bool exists = false;
	int fd = open(res, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT && errno != ENOTDIR && errno != EACCES) /* as test -e */
		return fo_fail_errno(errno, path, "cannot resolve");
	if (fd >= 0) {
		r = fstat(fd, &st) < 0 ? -errno : S_ISLNK(st.st_mode) ? -ELOOP : 0;
		close(fd);
		if (r < 0)
			return fo_fail(fileop_errc(-r), path,
				       "cannot resolve %s: it changed while it was resolved", path);
		exists = true;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(res));
	json_object_object_add(o, "exists", json_object_new_boolean(exists));
	json_object_object_add(o, "is_dir", json_object_new_boolean(exists && S_ISDIR(st.st_mode)));
	json_object_object_add(o, "size", json_object_new_int64(exists ? (int64_t)st.st_size : 0));
	if (exists) { /* sandboxd's stat (the runtime's GET /v1/stat/) */
		json_object_object_add(o, "modified_at", fo_iso_time(&st.st_mtim));
		json_object_object_add(o, "mode", json_object_new_int64(st.st_mode & 07777));
	}
	return fo_result(o);
}

int fo_place_file(json_object *q)
{
	const char *from = fo_jstr(q, "from", NULL), *path = fo_jstr(q, "path", NULL);
	mode_t mode = (mode_t)fo_jint(q, "mode", 0644) & 07777;
	const char *tmp, *name;
	int dfd = fo_open_parent_exact(from, &tmp);
	if (dfd < 0)
		return fo_fail_errno(-dfd, path, "cannot place");
	int pfd = fo_open_parent_exact(path, &name), r = 0;
	struct stat a, b, st;
	if (pfd < 0 || fstat(dfd, &a) < 0 || fstat(pfd, &b) < 0)
		r = pfd < 0 ? pfd : -errno;
	else if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		r = -EXDEV; /* the temporary file is beside its target, or nothing */
	if (pfd >= 0)
		close(pfd);
	int fd = r ? -1
		   : openat(dfd, tmp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (!r && fd < 0)
		r = -errno;
	else if (!r && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1))
		r = -ENODEV; /* not the regular file the upload made (nor a link to another) */
	if (!r && fchmod(fd, mode) < 0)
		r = -errno;
	if (!r && renameat(dfd, tmp, dfd, name) < 0)
		r = -errno;
	if (fd >= 0)
		close(fd);
	if (r < 0)
		unlinkat(dfd, tmp, 0); /* what the upload wrote goes */
	close(dfd);
	if (r < 0)
		return fo_fail_errno(-r, path, "cannot place");
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	return fo_result(o);
}
