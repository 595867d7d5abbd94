/* A layer's tar unpacked (untar.h). libarchive reads it (archive_lib.h);
 * what it says lands on the disk through this file alone: every path is
 * walked from the layer's root one component at a time with
 * O_NOFOLLOW|O_DIRECTORY, so neither a symbolic link the tar made nor ".."
 * leads out of it; a hard link may name only what the same layer holds. */
#include "image/untar.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image/archive_lib.h"
#include "image/sha256.h"
#include "util/error.h"
#include "util/util.h"

#define BUF (64 * 1024)

/* The reader's side: libarchive pulls the blob through feed(), which hashes
 * every byte it reads. */
struct ctx {
	const struct archive_lib *la;
	struct archive *a;
	int fd;
	bool raw_eof;
	unsigned long long raw_bytes;
	bool hashing; /* l->hex given: checked here */
	struct sha256 h;
	unsigned char *in; /* what feed() hands libarchive */
	char *buf;	   /* a file's data on its way to the disk */
	int root;
	const char *what; /* "layer N" */
	struct untar_stats *st;
	struct ab_error *err;
	/* the parent directory the last entry was in, kept open */
	char last_dir[PATH_MAX];
	int last_fd;
	/* directories made, whose modes are set at the end */
	struct dir_mode {
		char *path;
		mode_t mode;
	} * dirs;
	size_t n_dirs, dir_bytes;
};

/* Up to BUF bytes of the blob, hashed: 0 at its end, -errno. */
static ssize_t raw_read(struct ctx *c)
{
	ssize_t got;
	do
		got = read(c->fd, c->in, BUF);
	while (got < 0 && errno == EINTR);
	if (got > 0) {
		if (c->hashing)
			sha256_update(&c->h, c->in, (size_t)got);
		c->raw_bytes += (size_t)got;
	}
	if (got == 0)
		c->raw_eof = true;
	return got < 0 ? -errno : got;
}

static la_ssize_t feed(struct archive *a, void *p, const void **out)
{
	struct ctx *c = p;
	ssize_t got = raw_read(c);
	if (got < 0)
		c->la->archive_set_error(a, (int)-got, "cannot read the blob: %s",
					 strerror((int)-got));
	*out = c->in;
	return got < 0 ? -1 : got;
}

static int bad(struct ctx *c, int code, const char *entry, const char *why)
{
	return ab_error_plain(c->err, code, "%s: entry '%.300s' %s", c->what, entry, why);
}

/* What libarchive said when it failed. */
static int read_error(struct ctx *c)
{
	const char *msg = c->la->archive_error_string(c->a);
	return ab_error_plain(c->err, EBADMSG, "%s: cannot read the tar: %s", c->what,
			      msg ? msg : "unknown error");
}

/* path's components (no "", ".") into comps; refuses absolute paths and
 * "..". Returns how many, or -1 with the error set. */
static int split(struct ctx *c, char *path, char **comps, const char *entry)
{
	if (path[0] == '/')
		return bad(c, EPERM, entry, "is an absolute path: refused"), -1;
	int n = 0;
	for (char *save, *t = strtok_r(path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		if (strcmp(t, ".") == 0)
			continue;
		if (strcmp(t, "..") == 0)
			return bad(c, EPERM, entry, "has a '..' component: refused"), -1;
		if (n == UNTAR_MAX_DEPTH)
			return bad(c, E2BIG, entry, "is over 128 levels deep"), -1;
		comps[n++] = t;
	}
	return n;
}

/* The directory of comps[0..n) beneath the root (made when create), no
 * link followed: O_PATH fd owned by the caller, or -1 with the error set. */
static int walk(struct ctx *c, char **comps, int n, bool create, const char *entry)
{
	char key[PATH_MAX] = "";
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(key + len, sizeof(key) - len, "/%s", comps[i]);
	if (c->last_fd >= 0 && strcmp(key, c->last_dir) == 0)
		return fcntl(c->last_fd, F_DUPFD_CLOEXEC, 3);
	int fd = fcntl(c->root, F_DUPFD_CLOEXEC, 3);
	for (int i = 0; i < n && fd >= 0; i++) {
		int next = openat(fd, comps[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		/* a directory the tar did not list: 0755 whatever the umask */
		if (next < 0 && errno == ENOENT && create &&
		    ((mkdirat(fd, comps[i], 0755) == 0 && fchmodat(fd, comps[i], 0755, 0) == 0) ||
		     errno == EEXIST))
			next = openat(fd, comps[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		close(fd);
		fd = next;
		if (fd < 0) {
			if (!create)
				return -1;
			char why[400];
			snprintf(why, sizeof(why),
				 "goes through '%.200s', which is not a directory of this layer "
				 "(a symbolic link?): refused",
				 comps[i]);
			return bad(c, e == ENOENT ? ENOENT : ELOOP, entry, why), -1;
		}
	}
	if (fd >= 0) {
		ab_close_keep_errno(c->last_fd);
		c->last_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		snprintf(c->last_dir, sizeof(c->last_dir), "%s", key);
	}
	return fd;
}

int untar_digest_error(struct ab_error *err, const char *what, const char *want, const char *got)
{
	return ab_error_plain(err, EBADMSG,
			      "%s: the blob sha256:%s does not match its digest (its content "
			      "hashes to sha256:%s): the layout is corrupt",
			      what, want, got);
}

int untar_remove(int dir, const char *name, int depth)
{
	struct stat st;
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dir, name, 0) < 0 ? -errno : 0;
	if (depth <= 0)
		return -ELOOP;
	int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES && fchmodat(dir, name, 0700, 0) == 0)
		fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		ab_close_keep_errno(fd);
		return -errno;
	}
	if (!(st.st_mode & S_IWUSR))
		fchmod(fd, 0700);
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			r = untar_remove(fd, de->d_name, depth - 1);
	closedir(d);
	if (r == 0 && unlinkat(dir, name, AT_REMOVEDIR) < 0)
		r = -errno;
	return r;
}

/* What name in dir becomes: removed first unless both are directories
 * (keep: 1). */
static int make_room(struct ctx *c, int dir, const char *name, bool is_dir, const char *entry)
{
	struct stat st;
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (is_dir && S_ISDIR(st.st_mode))
		return 1;
	int r = untar_remove(dir, name, UNTAR_MAX_DEPTH);
	if (r < 0)
		return ab_error_set(c->err, -r, "%s: cannot replace '%.300s'", c->what, entry);
	return 0;
}

static int whiteout(struct ctx *c, int dir, const char *name, const char *entry)
{
	if (strcmp(name, ".wh..wh..opq") == 0) {
		/* overlay mounted with userxattr reads user.overlay.opaque */
		cleanup_fd int d = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (d < 0 || fsetxattr(d, "user.overlay.opaque", "y", 1, 0) < 0)
			return ab_error_set(c->err, errno,
					    "%s: cannot mark the directory of '%.300s' opaque "
					    "(user.overlay.opaque)",
					    c->what, entry);
		return 0;
	}
	const char *target = name + 4;
	if (!*target || strcmp(target, ".") == 0 || strcmp(target, "..") == 0)
		return bad(c, EINVAL, entry, "is a whiteout of nothing");
	int r = make_room(c, dir, target, false, entry);
	if (r < 0)
		return r;
	/* a 0/0 character device is overlay's whiteout; any user may make
	 * one since Linux 5.8 */
	if (mknodat(dir, target, S_IFCHR | 0, makedev(0, 0)) < 0)
		return ab_error_set(c->err, errno, "%s: cannot make the whiteout of '%.300s'",
				    c->what, entry);
	return 0;
}

static int write_file(struct ctx *c, int dir, const char *name, mode_t mode,
		      unsigned long long size, const char *entry)
{
	if (size > UNTAR_MAX_BYTES - c->st->bytes)
		return bad(c, EFBIG, entry, "takes the layer over 64 GiB unpacked");
	c->st->bytes += size;
	cleanup_fd int fd =
		openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return ab_error_set(c->err, errno, "%s: cannot create '%.300s'", c->what, entry);
	for (unsigned long long left = size; left;) {
		la_ssize_t k = c->la->archive_read_data(c->a, c->buf, BUF);
		if (k < 0)
			return read_error(c);
		if (k == 0 || (unsigned long long)k > left)
			return ab_error_plain(c->err, EBADMSG,
					      "%s: '%.300s' is not the %llu bytes its header says",
					      c->what, entry, size);
		for (la_ssize_t off = 0; off < k;) {
			ssize_t w = write(fd, c->buf + off, (size_t)(k - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return ab_error_set(c->err, w < 0 ? errno : EIO,
						    "%s: cannot write '%.300s'", c->what, entry);
			off += w;
		}
		left -= (unsigned long long)k;
	}
	/* no set-id bits: the view mounts it nosuid anyway */
	if (fchmod(fd, mode & 01777) < 0)
		return ab_error_set(c->err, errno, "%s: cannot set the mode of '%.300s'", c->what,
				    entry);
	return 0;
}

static int hard_link(struct ctx *c, int dir, const char *name, char *link, const char *entry)
{
	char *comps[UNTAR_MAX_DEPTH];
	int n = split(c, link, comps, entry);
	if (n < 0)
		return -c->err->code;
	cleanup_fd int tdir = n > 0 ? walk(c, comps, n - 1, false, entry) : -1;
	if (n == 0 || tdir < 0 || linkat(tdir, comps[n - 1], dir, name, 0) < 0)
		return bad(c, ENOENT, entry,
			   "is a hard link to what this layer does not have: refused");
	return 0;
}

/* An entry as libarchive read it; path and link are copies split() may
 * cut up. */
struct entry {
	char path[PATH_MAX], link[PATH_MAX];
	bool hard;     /* link names what it is (a hard link) */
	unsigned type; /* AE_IFREG, AE_IFDIR... */
	bool sparse;
	mode_t mode;
	unsigned long long size;
	unsigned dev_major, dev_minor;
};

static int remember_dir(struct ctx *c, char **comps, int n, mode_t mode)
{
	char path[PATH_MAX] = "";
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(path + len, sizeof(path) - len, "%s%s", i ? "/" : "",
					comps[i]);
	if ((c->dir_bytes += len + 1 + sizeof(struct dir_mode)) > UNTAR_MAX_DIR_BYTES)
		return ab_error_plain(c->err, E2BIG, "%s: over 64 MiB of directory names", c->what);
	struct dir_mode *d = realloc(c->dirs, (c->n_dirs + 1) * sizeof(*d));
	if (!d || !(d[c->n_dirs].path = strdup(path))) {
		if (d)
			c->dirs = d;
		return ab_error_set(c->err, ENOMEM, "unpacking %s", c->what);
	}
	c->dirs = d;
	d[c->n_dirs++].mode = mode & 01777;
	return 0;
}

/* One entry of the tar; what data it has and is not read here, libarchive
 * skips. */
static int unpack_entry(struct ctx *c, struct entry *e)
{
	char shown[PATH_MAX];
	snprintf(shown, sizeof(shown), "%s", e->path);
	char *comps[UNTAR_MAX_DEPTH];
	int n = split(c, e->path, comps, shown);
	if (n < 0)
		return -c->err->code;
	if (n == 0) /* the root itself */
		return 0;
	cleanup_fd int dir = walk(c, comps, n - 1, true, shown);
	if (dir < 0)
		return -c->err->code;
	const char *name = comps[n - 1];
	if (strncmp(name, ".wh.", 4) == 0)
		return whiteout(c, dir, name, shown) < 0 ? -c->err->code : 0;
	bool is_dir = !e->hard && e->type == AE_IFDIR;
	int r = make_room(c, dir, name, is_dir, shown);
	if (r < 0)
		return r;
	if (e->hard)
		return hard_link(c, dir, name, e->link, shown);
	switch (e->type) {
	case AE_IFREG:
		if (e->sparse) /* GNU sparse files */
			break;
		return write_file(c, dir, name, e->mode, e->size, shown);
	case AE_IFDIR:
		if (r == 0 && mkdirat(dir, name, 0700) < 0)
			return ab_error_set(c->err, errno, "%s: cannot make '%.300s'", c->what,
					    shown);
		return remember_dir(c, comps, n, e->mode);
	case AE_IFLNK:
		if (symlinkat(e->link, dir, name) < 0)
			return ab_error_set(c->err, errno, "%s: cannot make the link '%.300s'",
					    c->what, shown);
		return 0;
	case AE_IFCHR:
		if (e->dev_major == 0 && e->dev_minor == 0 &&
		    mknodat(dir, name, S_IFCHR | 0, makedev(0, 0)) == 0)
			return 0; /* overlay's own whiteout, as an overlay export has it */
		c->st->devices++;
		return 0;
	case AE_IFBLK:
		c->st->devices++; /* device nodes are left out (docs/images.md) */
		return 0;
	case AE_IFIFO:
		if (mkfifoat(dir, name, e->mode & 0777) < 0)
			return ab_error_set(c->err, errno, "%s: cannot make '%.300s'", c->what,
					    shown);
		return 0;
	}
	return bad(c, ENOTSUP, shown, "has a tar entry type agentbox does not unpack: refused");
}

/* A name of the entry copied into out, which has PATH_MAX bytes: with room
 * for a '/' before it, so that walk() and remember_dir() never cut it. */
static int copy_name(struct ctx *c, char *out, const char *name, const char *entry)
{
	size_t len = strlen(name ? name : "");
	if (len > PATH_MAX - 2)
		return bad(c, ENAMETOOLONG, entry, "has a name over 4094 bytes: refused");
	memcpy(out, name ? name : "", len + 1);
	return 0;
}

/* The next entry's header into e; *done at the tar's end. */
static int next_entry(struct ctx *c, struct entry *e, bool *done)
{
	const struct archive_lib *la = c->la;
	struct archive_entry *ae;
	int r = la->archive_read_next_header(c->a, &ae);
	if (r == ARCHIVE_EOF) {
		*done = true; /* two zero blocks, one, or none: a tar may stop anywhere */
		return 0;
	}
	if (r == ARCHIVE_RETRY) /* libarchive's "Damaged tar archive" */
		return ab_error_plain(c->err, EBADMSG,
				      "%s: not a tar (a header's checksum is wrong)", c->what);
	const char *msg = la->archive_error_string(c->a);
	/* a name that is not valid in the locale's charset is kept as its
	 * bytes, as a tar has it; any other warning (a malformed pax record,
	 * too many extension headers) refuses the layer */
	if (r == ARCHIVE_WARN && !(msg && strstr(msg, "can't be converted from")))
		return ab_error_plain(c->err, EBADMSG, "%s: a bad tar header (%s)", c->what,
				      msg ? msg : "a warning");
	if (r < ARCHIVE_WARN)
		return read_error(c);
	if (++c->st->entries > UNTAR_MAX_ENTRIES)
		return ab_error_plain(c->err, E2BIG, "%s: over %d entries", c->what,
				      UNTAR_MAX_ENTRIES);
	const char *path = la->archive_entry_pathname(ae);
	if (copy_name(c, e->path, path, path ? path : "") < 0)
		return -c->err->code;
	const char *hard = la->archive_entry_hardlink(ae);
	const char *link = hard ? hard : la->archive_entry_symlink(ae);
	if (copy_name(c, e->link, link, e->path) < 0)
		return -c->err->code;
	e->hard = hard != NULL;
	e->type = la->archive_entry_filetype(ae);
	e->sparse = la->archive_entry_sparse_count(ae) > 0;
	e->mode = la->archive_entry_perm(ae);
	la_int64_t size = la->archive_entry_size(ae);
	e->size = size > 0 ? (unsigned long long)size : 0;
	e->dev_major = (unsigned)la->archive_entry_rdevmajor(ae);
	e->dev_minor = (unsigned)la->archive_entry_rdevminor(ae);
	return 0;
}

static int unpack_all(struct ctx *c)
{
	struct entry *e = malloc(sizeof(*e));
	if (!e)
		return ab_error_set(c->err, ENOMEM, "unpacking %s", c->what);
	int r;
	bool done = false;
	while ((r = next_entry(c, e, &done)) == 0 && !done)
		if ((r = unpack_entry(c, e)) < 0)
			break;
	free(e);
	return r;
}

/* The directories' own modes, set now that nothing more goes in them
 * (a directory without write permission could not be filled). */
static int set_dir_modes(struct ctx *c)
{
	for (size_t i = c->n_dirs; i-- > 0;) {
		char *comps[UNTAR_MAX_DEPTH], *p = c->dirs[i].path;
		int n = split(c, p, comps, p);
		cleanup_fd int dir = n > 0 ? walk(c, comps, n - 1, false, "") : -1;
		if (dir >= 0 && fchmodat(dir, comps[n - 1], c->dirs[i].mode, 0) < 0 &&
		    errno != ENOENT)
			return ab_error_set(c->err, errno, "%s: cannot set the mode of a directory",
					    c->what);
	}
	return 0;
}

/* libarchive reading the blob through feed(): the tar formats only,
 * through the gzip filter when the manifest says gzip, no filter else, none
 * chosen by what the bytes look like. *done: an empty plain blob, an empty
 * tar. (libarchive's "empty" format is not used: it would also take a gzip
 * stream that yields nothing, not gzip or cut short, for an empty tar.) */
static int open_reader(struct ctx *c, const struct oci_layer *l, bool *done)
{
	const struct archive_lib *la = c->la;
	if (la->archive_read_support_format_tar(c->a) != ARCHIVE_OK)
		return read_error(c);
	/* not ARCHIVE_OK (ARCHIVE_WARN) also when this libarchive was built
	 * without zlib and would run an external gzip program */
	if (l->comp == OCI_GZIP &&
	    la->archive_read_append_filter(c->a, ARCHIVE_FILTER_GZIP) != ARCHIVE_OK)
		return ab_error_plain(c->err, ENOTSUP, "%s: %s cannot read gzip itself (%s)",
				      c->what, ARCHIVE_LIB_SONAME, la->archive_error_string(c->a));
	if (la->archive_read_open(c->a, c, NULL, feed, NULL) != ARCHIVE_OK) {
		if (l->comp == OCI_TAR && c->raw_eof && c->raw_bytes == 0) {
			*done = true;
			return 0;
		}
		const char *msg = la->archive_error_string(c->a);
		return ab_error_plain(c->err, EBADMSG, "%s: not a %s (%s)", c->what,
				      l->comp == OCI_GZIP ? "gzip'd tar" : "tar",
				      msg ? msg : "unknown error");
	}
	return 0;
}

int untar_layer(int fd, const struct oci_layer *l, const char *what, int root,
		struct untar_stats *st, struct ab_error *err)
{
	char why[300];
	const struct archive_lib *la = archive_lib_load(why, sizeof(why));
	if (!la)
		return ab_error_plain(err, ENOPKG, "%s: %s", what, why);
	struct ctx c = {.la = la,
			.fd = fd,
			.in = malloc(BUF),
			.buf = malloc(BUF),
			.root = root,
			.what = what,
			.st = st,
			.err = err,
			.last_fd = -1,
			.hashing = l->hex[0] != '\0'};
	int r = c.hashing ? sha256_init(&c.h, err) : 0;
	if (r < 0) {
		free(c.in);
		free(c.buf);
		return r;
	}
	if (!c.in || !c.buf || !(c.a = la->archive_read_new()))
		r = ab_error_set(err, ENOMEM, "unpacking %s", what);
	bool empty = false;
	if (r == 0)
		r = open_reader(&c, l, &empty);
	if (r == 0 && !empty)
		r = unpack_all(&c);
	/* every byte of the blob is hashed: what follows the tar too, and
	 * what a refused entry left unread */
	ssize_t got = 0;
	while (got >= 0 && !c.raw_eof)
		got = raw_read(&c);
	if (got < 0 && r == 0)
		r = ab_error_set(err, (int)-got, "%s: cannot read the blob", what);
	char hex[65];
	if (c.hashing)
		sha256_hex(&c.h, hex);
	/* a blob that is not the one its digest names says so, whatever else
	 * was wrong with its bytes */
	if (c.hashing && got >= 0 && strcmp(hex, l->hex) != 0)
		r = untar_digest_error(err, what, l->hex, hex);
	if (r == 0)
		r = set_dir_modes(&c);
	if (c.a)
		la->archive_read_free(c.a);
	ab_close_keep_errno(c.last_fd);
	for (size_t i = 0; i < c.n_dirs; i++)
		free(c.dirs[i].path);
	free(c.dirs);
	free(c.in);
	free(c.buf);
	return r;
}
