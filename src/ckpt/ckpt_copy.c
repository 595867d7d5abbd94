/* A fork's /tmp and home (docs/checkpoints.md, "Fork"): the layers of its
 * checkpoint, which live in the parent's tmpfs, copied whole into the
 * fork's own tmpfs at its first switch (ckpt_mount.c), so that the fork
 * starts from them and stands on nobody's memory but its own.
 *
 * A layer is copied as it is, whiteouts (0/0 character devices), opaque
 * directories (user.overlay.* attributes) and all: the fork's overlay
 * reads it as the parent's did. Nothing is followed: each entry is opened
 * beneath its directory with O_NOFOLLOW, a symbolic link copied as a link.
 * Bounded by the depth, the entries, and the fork's tmpfs's size (ENOSPC). */
#include "ckpt/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "layer/layer_review.h"
#include "util/error.h"
#include "util/util.h"

#define COPY_MAX_DEPTH	 128
#define COPY_MAX_ENTRIES 200000

/* The user.* attributes of src onto dst (overlayfs's own among them), of
 * any size the kernel takes (64 KiB a value, 64 KiB of names). */
static int copy_xattrs(int src, int dst)
{
	enum { MAX = 65536 };
	char *names = malloc(MAX), *val = malloc(MAX);
	ssize_t n = names && val ? flistxattr(src, names, MAX) : (errno = ENOMEM, -1);
	int r = n < 0 && errno != ENOTSUP ? -errno : 0;
	for (char *k = names; r == 0 && n > 0 && k < names + n; k += strlen(k) + 1) {
		if (strncmp(k, "user.", 5) != 0)
			continue;
		ssize_t v = fgetxattr(src, k, val, MAX);
		if (v < 0 || fsetxattr(dst, k, val, (size_t)v, 0) < 0)
			r = -errno;
	}
	free(names);
	free(val);
	return r;
}

static int copy_meta(int src, int dst, const struct stat *st)
{
	struct timespec t[2] = {st->st_atim, st->st_mtim};
	int r = copy_xattrs(src, dst);
	if (r == 0 && (fchmod(dst, st->st_mode & 07777) < 0 || futimens(dst, t) < 0))
		r = -errno;
	return r;
}

static int copy_file(int sdir, const char *sname, int ddir, const char *dname,
		     const struct stat *st)
{
	/* not blocking: a fifo put there meanwhile is refused, not waited on */
	cleanup_fd int in =
		openat(sdir, sname, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	struct stat now;
	if (in < 0 || fstat(in, &now) < 0)
		return -errno;
	if (!S_ISREG(now.st_mode))
		return -EAGAIN; /* changed beneath the copy */
	cleanup_fd int out =
		openat(ddir, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	/* its data only: a hole stays a hole (a sparse file takes no more room
	 * in the fork's tmpfs than in the parent's) */
	if (ftruncate(out, st->st_size) < 0)
		return -errno;
	for (off_t at = 0; at < st->st_size;) {
		off_t data = lseek(in, at, SEEK_DATA);
		off_t hole = data < 0 ? -1 : lseek(in, data, SEEK_HOLE);
		if (data < 0 && errno == ENXIO)
			break; /* holes to the end */
		if (data < 0 || hole < 0 || lseek(out, data, SEEK_SET) < 0)
			return -errno;
		for (at = data; at < hole;) {
			size_t n = hole - at > (1 << 30) ? (1 << 30) : (size_t)(hole - at);
			ssize_t w = sendfile(out, in, &at, n);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -errno;
			if (w == 0) /* shrank meanwhile: what there was */
				return copy_meta(in, out, st);
		}
	}
	return copy_meta(in, out, st);
}

static int copy_dir(int sdir, int ddir, int depth, size_t *entries);

/* sdir's entry sname as ddir's dname. */
static int copy_entry(int sdir, const char *sname, int ddir, const char *dname, int depth,
		      size_t *entries)
{
	struct stat st;
	if (++*entries > COPY_MAX_ENTRIES)
		return -E2BIG;
	if (fstatat(sdir, sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISREG(st.st_mode))
		return copy_file(sdir, sname, ddir, dname, &st);
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlinkat(sdir, sname, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		return symlinkat(target, ddir, dname) < 0 ? -errno : 0;
	}
	if (S_ISCHR(st.st_mode) && st.st_rdev == 0) /* a whiteout */
		return mknodat(ddir, dname, S_IFCHR | (st.st_mode & 07777), 0) < 0 ? -errno : 0;
	if (S_ISFIFO(st.st_mode))
		return mkfifoat(ddir, dname, st.st_mode & 07777) < 0 ? -errno : 0;
	if (!S_ISDIR(st.st_mode))
		return 0; /* a socket, a device: nothing a layer can take to another tmpfs */
	if (depth >= COPY_MAX_DEPTH)
		return -ELOOP;
	if (mkdirat(ddir, dname, 0700) < 0)
		return -errno;
	cleanup_fd int s = openat(sdir, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cleanup_fd int d = openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s < 0 || d < 0)
		return -errno;
	int r = copy_dir(s, d, depth + 1, entries);
	return r < 0 ? r : copy_meta(s, d, &st);
}

static int copy_dir(int sdir, int ddir, int depth, size_t *entries)
{
	int fd = fcntl(sdir, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		ab_close_keep_errno(fd);
		return -errno;
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (errno = 0, de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			r = copy_entry(sdir, de->d_name, ddir, de->d_name, depth, entries);
	if (r == 0 && errno)
		r = -errno;
	closedir(d);
	return r;
}

int ckpt_copy_layer(int src, const char *from, int dst, const char *to, struct ab_error *err)
{
	const char *slash = strrchr(to, '/');
	size_t entries = 0;
	int r = 0;
	if (slash) { /* "DIR/uN": DIR first */
		char parent[64];
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - to), to);
		if (mkdirat(dst, parent, 0700) < 0 && errno != EEXIST)
			r = -errno;
	}
	if (r == 0)
		r = copy_entry(src, from, dst, to, 0, &entries);
	if (r < 0) {
		layer_remove_tree_at(dst, to);
		return ab_error_set(err, -r,
				    "fork: cannot copy the checkpoint's layer %s of /tmp or home "
				    "into the fork's (whose size limit, --tmpfs-size, holds all of "
				    "its layers)",
				    from);
	}
	return 0;
}
