/* The review and commit of a whole stack against the host (ckpt.h): the
 * uppers above the host workspace merged into one directory, DIR/merged,
 * which layer_review.c then reads as it reads a single upper.
 *
 * For each path the topmost layer that has it decides: a whiteout there
 * is a whiteout in merged/ (a 0/0 character device, which needs no
 * privilege since Linux 5.8), a directory is a directory whose entries are
 * merged from it and the directories beneath it down to the first opaque
 * one (merged/'s is opaque then too: the host's entries are hidden), any
 * other entry is a hard link to the layer's: no file data is copied, and
 * what merged/ links is what the layers hold now.
 *
 * What a command wrote is hostile: each directory is opened beneath its
 * layer's root following no symlink, each entry looked at with fstatat
 * and never opened; the walk is bounded in depth and entries and holds
 * one level's directories open at a time. */
#include "ckpt/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "layer/layer_review.h"
#include "layer/protect.h"
#include "util/error.h"
#include "util/util.h"

#define MERGE_DEPTH   128
#define MERGE_ENTRIES 200000

struct merge {
	int roots[64]; /* O_PATH: the layers, top first */
	size_t n;
	int out; /* O_PATH: merged/ */
	size_t entries;
};

/* a subdirectory to merge: its name, the layers that hold it as a
 * directory (a bit each), its mode (set once it is filled) */
struct sub {
	char *name;
	uint64_t layers;
	mode_t mode;
};

static bool xattr_is(int dfd, const char *name, const char *attr, const char *want)
{
	char path[PATH_MAX], val[8];
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dfd, name);
	ssize_t n = lgetxattr(path, attr, val, sizeof(val));
	return n >= 0 &&
	       (!want || ((size_t)n == strlen(want) && memcmp(val, want, (size_t)n) == 0));
}

/* The directory rel beneath root, for reading; -1 when it is not one. */
static int open_dir(int root, const char *rel)
{
	cleanup_fd int p = *rel ? ab_open_beneath(root, rel) : fcntl(root, F_DUPFD_CLOEXEC, 3);
	if (p < 0)
		return -1;
	return openat(p, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
}

static int level(struct merge *m, const char *rel, uint64_t layers, int depth);

/* name, first met in layer i (dir d): decided in out, or queued in subs. */
static int decide(struct merge *m, int *d, size_t i, int out, const char *name, struct sub **subs,
		  size_t *n_subs)
{
	struct stat st;
	if (fstatat(d[i], name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0; /* gone meanwhile: as if never there */
	if (ckpt_whiteout(d[i], name, &st))
		return mknodat(out, name, S_IFCHR | 0600, makedev(0, 0)) < 0 ? -errno : 0;
	if (!S_ISDIR(st.st_mode))
		return linkat(d[i], name, out, name, 0) < 0 ? -errno : 0;
	if (mkdirat(out, name, 0700) < 0)
		return -errno;
	/* the directories beneath, down to an entry that is no directory or
	 * to the first opaque one, hold its entries */
	uint64_t layers = 0;
	bool opaque = false;
	for (size_t j = i; j < m->n && !opaque; j++) {
		struct stat sj;
		if (d[j] < 0 || fstatat(d[j], name, &sj, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (!S_ISDIR(sj.st_mode))
			break;
		layers |= 1ull << j;
		opaque = xattr_is(d[j], name, "user.overlay.opaque", "y");
	}
	if (opaque) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", out, name);
		if (lsetxattr(path, "user.overlay.opaque", "y", 1, 0) < 0)
			return -errno;
	}
	struct sub *s = realloc(*subs, (*n_subs + 1) * sizeof(*s));
	if (!s)
		return -ENOMEM;
	*subs = s;
	s[*n_subs] = (struct sub){.name = strdup(name), .layers = layers, .mode = st.st_mode};
	return s[(*n_subs)++].name ? 0 : -ENOMEM;
}

/* The entries of the layers' directories rel (those in layers), merged
 * into merged/rel, then each subdirectory in turn. */
static int level(struct merge *m, const char *rel, uint64_t layers, int depth)
{
	if (depth > MERGE_DEPTH)
		return -ELOOP;
	int d[64];
	for (size_t i = 0; i < m->n; i++)
		d[i] = layers & (1ull << i) ? open_dir(m->roots[i], rel) : -1;
	cleanup_fd int out = open_dir(m->out, rel);
	struct sub *subs = NULL;
	size_t n_subs = 0;
	int r = out < 0 ? -errno : 0;
	for (size_t i = 0; r == 0 && i < m->n; i++) {
		if (d[i] < 0)
			continue;
		cleanup_fd int dup = fcntl(d[i], F_DUPFD_CLOEXEC, 3);
		DIR *dp = dup < 0 ? NULL : fdopendir(dup);
		if (!dp) {
			r = -errno;
			break;
		}
		dup = -1;
		struct dirent *de;
		while (r == 0 && (de = readdir(dp))) {
			struct stat st;
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (++m->entries > MERGE_ENTRIES)
				r = -E2BIG;
			else if (fstatat(out, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				r = decide(m, d, i, out, de->d_name, &subs, &n_subs);
		}
		closedir(dp);
	}
	for (size_t i = 0; i < m->n; i++)
		ab_close_keep_errno(d[i]);
	for (size_t i = 0; i < n_subs; i++) {
		char path[PATH_MAX];
		int k = snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "", subs[i].name);
		if (r == 0 && (k < 0 || (size_t)k >= sizeof(path)))
			r = -ENAMETOOLONG;
		if (r == 0)
			r = level(m, path, subs[i].layers, depth + 1);
		if (r == 0 && fchmodat(out, subs[i].name, subs[i].mode & 07777, 0) < 0)
			r = -errno;
		free(subs[i].name);
	}
	free(subs);
	return r;
}

void ckpt_merge_remove(const struct ab_layer *l)
{
	cleanup_fd int dfd = open(l->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0)
		layer_remove_tree_at(dfd, CKPT_MERGED);
}

int ckpt_merge(const struct ab_layer *l, char *const *top, size_t n, struct ab_error *err)
{
	if (n == 0 || n > 64) /* a bit each in struct sub */
		return ab_error_plain(err, EINVAL, "changes: %zu layers", n);
	ckpt_merge_remove(l); /* a review killed midway left it */
	cleanup_fd int dfd = open(l->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || mkdirat(dfd, CKPT_MERGED, 0700) < 0)
		return ab_error_set(err, errno, "changes: cannot make %s/" CKPT_MERGED, l->dir);
	struct merge m = {.n = n};
	for (size_t i = 0; i < AB_ARRAY_SIZE(m.roots); i++)
		m.roots[i] = -1;
	int r = (m.out = openat(dfd, CKPT_MERGED, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = m.roots[i] = openat(dfd, top[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	r = r < 0 ? -errno : level(&m, "", n == 64 ? ~0ull : (1ull << n) - 1, 0);
	for (size_t i = 0; i < n; i++)
		ab_close_keep_errno(m.roots[i]);
	ab_close_keep_errno(m.out);
	if (r < 0) {
		ckpt_merge_remove(l);
		return ab_error_set(err, -r, "changes: cannot merge the layers of %s", l->dir);
	}
	return 0;
}
