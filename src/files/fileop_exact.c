/* File operations, the sandbox's half (fileop_inside.h): exact mode. The
 * runtime's requests of the protocol's operations name the path
 * resolve_path answered (fileop_guard.c), so a symlink on its way was
 * planted after the check: with exact mode on (fo_set_exact, for the
 * request running) fo_open and fo_make_parents reach a path one component
 * at a time and follow none. Only libc below it: fileop_inside.c's helpers
 * call it, and fileop_guard.c. */
#include "files/fileop_inside.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The directory at path, reached from / one component at a time without
 * following a symlink: every component (make false), or all but the last,
 * each made when missing (make true, fo_make_parents_exact). An fd, or
 * -errno. */
static int walk(const char *path, bool make)
{
	int dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || path[0] != '/') {
		if (dfd >= 0)
			close(dfd);
		return dfd < 0 ? -errno : -EINVAL;
	}
	char c[NAME_MAX + 1];
	for (const char *p = path;;) {
		while (*p == '/')
			p++;
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);
		if (n == 0 || (make && !*e)) /* with make, the last component is the file's */
			break;
		if (n > NAME_MAX || (n == 1 && p[0] == '.') || (n == 2 && !memcmp(p, "..", 2))) {
			close(dfd);
			return n > NAME_MAX ? -ENAMETOOLONG : -EINVAL;
		}
		memcpy(c, p, n);
		c[n] = '\0';
		int next = openat(dfd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (make && next < 0 && errno == ENOENT &&
		    (mkdirat(dfd, c, 0755) == 0 || errno == EEXIST))
			next = openat(dfd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int err = errno;
		close(dfd);
		if (next < 0) /* a symlink on the way: ENOTDIR, as for a file */
			return -err;
		dfd = next;
		p = e;
	}
	return dfd;
}

int fo_open_dir_exact(const char *path)
{
	return walk(path, false);
}

static bool exact; /* this request's paths follow no symlink */

void fo_set_exact(bool on)
{
	exact = on;
}

bool fo_exact_on(void)
{
	return exact;
}

int fo_open_parent_exact(const char *path, const char **name)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	if (!slash || !slash[1] || (size_t)(slash - path) >= sizeof(dir))
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	*name = slash + 1;
	return fo_open_dir_exact(dir);
}

int fo_open(const char *path, int flags, mode_t mode)
{
	if (!exact || !strcmp(path, "/"))
		return open(path, flags, mode);
	const char *name;
	int dfd = fo_open_parent_exact(path, &name);
	if (dfd < 0) {
		errno = -dfd;
		return -1;
	}
	int fd = openat(dfd, name, flags | O_NOFOLLOW, mode);
	int e = errno;
	close(dfd);
	errno = e;
	return fd;
}

int fo_make_parents_exact(const char *path)
{
	int dfd = walk(path, true);
	if (dfd < 0)
		return dfd;
	close(dfd);
	return 0;
}
