/* The unpack helper's tree checked from the launcher (tree_check.h). */
#include "image/tree_check.h"

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

#include "image/untar.h"
#include "util/error.h"
#include "util/util.h"

#define MAX_DEPTH   (UNTAR_MAX_DEPTH + 4)
#define MAX_ENTRIES (2UL * UNTAR_MAX_ENTRIES) /* the tar's and their parents */

struct link {
	ino_t ino;
	nlink_t nlink;
	off_t size;
};

struct walk {
	const char *what;
	struct tree_check *tc;
	struct ab_error *err;
	dev_t dev;
	bool giving;	    /* the second walk: each entry given to the caller */
	struct link *links; /* an entry for each name of an inode of several */
	size_t n_links, cap_links;
	char path[PATH_MAX];
	char xattrs[4096];
};

static int refuse(struct walk *w, const char *why)
{
	return ab_error_plain(w->err, EPERM,
			      "%s: the unpack helper made '%.300s', which %s: refused", w->what,
			      w->path[0] ? w->path : ".", why);
}

/* The names of st's extended attributes (listed into w->xattrs, n bytes)
 * that untar.c makes or the security module sets; at is the entry (the
 * kernel allows user.* only on files and directories). */
static int check_xattrs(struct walk *w, const char *at, const struct stat *st)
{
	ssize_t n = llistxattr(at, w->xattrs, sizeof(w->xattrs));
	if (n < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP))
		return 0;
	if (n < 0 && errno == ERANGE)
		return refuse(w, "has over 4 KiB of extended attribute names");
	if (n < 0)
		return ab_error_set(w->err, errno, "%s: cannot list the attributes of '%.300s'",
				    w->what, w->path);
	for (char *x = w->xattrs; x < w->xattrs + n; x += strlen(x) + 1) {
		char v[2];
		if (strncmp(x, "security.", 9) == 0 && strcmp(x, "security.capability") != 0)
			continue;
		if (strcmp(x, "user.overlay.opaque") == 0 && S_ISDIR(st->st_mode) &&
		    lgetxattr(at, x, v, sizeof(v)) == 1 && v[0] == 'y')
			continue;
		char why[300];
		snprintf(why, sizeof(why), "has the extended attribute '%.100s'", x);
		return refuse(w, why);
	}
	return 0;
}

/* One entry (name in dir, at: a path to it through /proc): the rules;
 * on the second walk, given to the caller. */
static int check_entry(struct walk *w, int dir, const char *name, const char *at,
		       const struct stat *st)
{
	/* after the whole tree passed: not as it goes, or the second name of
	 * an inode given already would be found owned by another uid */
	if (w->giving) {
		if (fchownat(dir, name, geteuid(), getegid(), AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) <
		    0)
			return ab_error_set(w->err, errno, "%s: cannot give '%.300s' to its owner",
					    w->what, w->path);
		return 0;
	}
	if (st->st_dev != w->dev)
		return refuse(w, "is on another filesystem");
	if (st->st_uid != w->tc->owner) {
		char why[80];
		snprintf(why, sizeof(why), "is owned by uid %u, not the helper's",
			 (unsigned)st->st_uid);
		return refuse(w, why);
	}
	mode_t t = st->st_mode & S_IFMT;
	if (t == S_IFCHR && st->st_rdev != 0)
		return refuse(w, "is a device node (they are left out)");
	if (t != S_IFDIR && t != S_IFREG && t != S_IFLNK && t != S_IFIFO && t != S_IFCHR)
		return refuse(w, "is a device node or a socket");
	if (t != S_IFLNK && (st->st_mode & (S_ISUID | S_ISGID)))
		return refuse(w, "has a set-uid or set-gid bit (they are left out)");
	if ((t == S_IFDIR || t == S_IFREG) && check_xattrs(w, at, st) < 0)
		return -w->err->code;
	if (t != S_IFDIR && st->st_nlink > 1) {
		if (w->n_links == w->cap_links) {
			size_t cap = w->cap_links ? 2 * w->cap_links : 256;
			struct link *l = realloc(w->links, cap * sizeof(*l));
			if (!l)
				return ab_error_set(w->err, ENOMEM, "%s", w->what);
			w->links = l;
			w->cap_links = cap;
		}
		w->links[w->n_links++] = (struct link){st->st_ino, st->st_nlink, st->st_size};
	} else if (t == S_IFREG) {
		w->tc->bytes += (unsigned long long)st->st_size;
	}
	return 0;
}

static int walk_dir(struct walk *w, int fd, int depth);

/* The entry name in dir, the path's component at len. */
static int visit(struct walk *w, int dir, const char *name, size_t len, int depth)
{
	size_t nl = strlen(name);
	if (len + nl + 2 >= sizeof(w->path))
		return refuse(w, "has a path over 4 KiB");
	snprintf(w->path + len, sizeof(w->path) - len, "%s%s", len ? "/" : "", name);
	if (++w->tc->entries > MAX_ENTRIES)
		return refuse(w, "is past 2000000 entries");
	struct stat st;
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return ab_error_set(w->err, errno, "%s: cannot stat '%.300s'", w->what, w->path);
	char at[64 + NAME_MAX];
	snprintf(at, sizeof(at), "/proc/self/fd/%d/%s", dir, name);
	int r = check_entry(w, dir, name, at, &st);
	if (r < 0 || !S_ISDIR(st.st_mode))
		return r;
	if (depth <= 0)
		return refuse(w, "is over 128 levels deep");
	cleanup_fd int sub =
		openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (sub < 0)
		return ab_error_set(w->err, errno, "%s: cannot open '%.300s'", w->what, w->path);
	return walk_dir(w, sub, depth - 1);
}

static int walk_dir(struct walk *w, int fd, int depth)
{
	size_t len = strlen(w->path);
	int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
	if (!d) {
		ab_close_keep_errno(dup_fd);
		return ab_error_set(w->err, errno, "%s: cannot read '%.300s'", w->what,
				    len ? w->path : ".");
	}
	rewinddir(d); /* the dup shares its offset: walked before, the root is at its end */
	struct dirent *de;
	int r = 0;
	while (r == 0 && (errno = 0, de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			r = visit(w, fd, de->d_name, len, depth);
	if (r == 0 && errno)
		r = ab_error_set(w->err, errno, "%s: cannot read '%.300s'", w->what, w->path);
	closedir(d);
	if (r == 0)
		w->path[len] = '\0';
	return r;
}

static int by_ino(const void *a, const void *b)
{
	ino_t x = ((const struct link *)a)->ino, y = ((const struct link *)b)->ino;
	return x < y ? -1 : x > y;
}

/* Every inode of several names has all of them in the tree: none is
 * a link to a file outside it. */
static int check_links(struct walk *w)
{
	if (w->n_links)
		qsort(w->links, w->n_links, sizeof(*w->links), by_ino);
	for (size_t i = 0, j; i < w->n_links; i = j) {
		for (j = i; j < w->n_links && w->links[j].ino == w->links[i].ino; j++)
			;
		if (j - i != w->links[i].nlink) {
			snprintf(w->path, sizeof(w->path), "inode %llu",
				 (unsigned long long)w->links[i].ino);
			return refuse(w, "has links outside the layer");
		}
		w->tc->bytes += (unsigned long long)w->links[i].size;
	}
	return 0;
}

int tree_check(int root, const char *what, struct tree_check *tc, struct ab_error *err)
{
	cleanup_free struct walk *w = calloc(1, sizeof(*w));
	if (!w)
		return ab_error_set(err, ENOMEM, "%s", what);
	*w = (struct walk){.what = what, .tc = tc, .err = err};
	tc->bytes = 0;
	tc->entries = 0;
	struct stat st;
	if (fstat(root, &st) < 0)
		return ab_error_set(err, errno, "%s: cannot stat the unpacked layer", what);
	w->dev = st.st_dev;
	char at[64];
	snprintf(at, sizeof(at), "/proc/self/fd/%d", root);
	int r = check_entry(w, root, "", at, &st);
	if (r == 0)
		r = walk_dir(w, root, MAX_DEPTH);
	if (r == 0)
		r = check_links(w);
	free(w->links);
	if (r < 0 || !tc->chown)
		return r;
	/* the tree is the launcher's alone now (in a 0700 directory of its
	 * own, the helper gone): a second walk gives every entry to it */
	unsigned long entries = tc->entries;
	w->giving = true;
	w->path[0] = '\0';
	tc->entries = 0;
	r = check_entry(w, root, "", at, &st);
	if (r == 0)
		r = walk_dir(w, root, MAX_DEPTH);
	tc->entries = entries;
	return r;
}
