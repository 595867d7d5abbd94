/* A layer's tar unpacked (untar.h). Every path is walked from the layer's
 * root one component at a time with O_NOFOLLOW|O_DIRECTORY, so neither a
 * symbolic link the tar made nor ".." leads out of it; a hard link may name
 * only what the same layer holds. */
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
#include <zlib.h>

#include "image/sha256.h"
#include "util/error.h"
#include "util/util.h"

#define BUF	(64 * 1024)
#define MAX_PAX (1 << 20)

struct src {
	int fd;
	bool gz, raw_eof, z_end;
	z_stream z;
	struct sha256 h;
	unsigned char in[BUF];
};

static ssize_t raw_read(struct src *s, void *buf, size_t n)
{
	ssize_t got;
	do
		got = read(s->fd, buf, n);
	while (got < 0 && errno == EINTR);
	if (got > 0)
		sha256_update(&s->h, buf, (size_t)got);
	if (got == 0)
		s->raw_eof = true;
	return got < 0 ? -errno : got;
}

/* Up to n bytes of the tar; 0 at its end, -errno, or -EBADMSG for a
 * gzip stream that is not one. */
static ssize_t src_read(struct src *s, void *buf, size_t n)
{
	if (!s->gz)
		return raw_read(s, buf, n);
	s->z.next_out = buf;
	s->z.avail_out = (uInt)n;
	while (s->z.avail_out == n) {
		if (s->z.avail_in == 0) {
			if (s->raw_eof)
				return s->z_end ? 0 : -EBADMSG; /* cut short */
			ssize_t got = raw_read(s, s->in, sizeof(s->in));
			if (got < 0)
				return got;
			s->z.next_in = s->in;
			s->z.avail_in = (uInt)got;
			continue;
		}
		if (s->z_end) {
			/* gzip members may follow each other (RFC 1952) */
			if (inflateReset(&s->z) != Z_OK)
				return -EBADMSG;
			s->z_end = false;
		}
		int r = inflate(&s->z, Z_NO_FLUSH);
		if (r == Z_STREAM_END)
			s->z_end = true;
		else if (r != Z_OK && r != Z_BUF_ERROR)
			return -EBADMSG;
	}
	return (ssize_t)(n - s->z.avail_out);
}

struct ctx {
	struct src *s;
	int root;
	const char *what; /* "layer N" */
	struct untar_stats *st;
	struct ab_error *err;
	char *buf;
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

static int bad(struct ctx *c, int code, const char *entry, const char *why)
{
	return ab_error_plain(c->err, code, "%s: entry '%.300s' %s", c->what, entry, why);
}

static int read_full(struct ctx *c, void *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = src_read(c->s, (char *)buf + got, n - got);
		if (r == 0)
			return ab_error_plain(c->err, EBADMSG, "%s: the tar ends in the middle",
					      c->what);
		if (r < 0)
			return ab_error_set(c->err, -r, "%s: cannot read the tar%s", c->what,
					    r == -EBADMSG ? " (bad gzip data)" : "");
		got += (size_t)r;
	}
	return 0;
}

static int skip(struct ctx *c, unsigned long long n)
{
	while (n) {
		size_t k = n < BUF ? (size_t)n : BUF;
		int r = read_full(c, c->buf, k);
		if (r < 0)
			return r;
		n -= k;
	}
	return 0;
}

/* An octal or base-256 (GNU) number field. */
static bool number(const char *f, size_t len, unsigned long long *out)
{
	unsigned long long v = 0;
	if ((unsigned char)f[0] & 0x80) {
		for (size_t i = 1; i < len; i++) {
			if (v >> 55)
				return false;
			v = v << 8 | (unsigned char)f[i];
		}
		*out = v;
		return !((unsigned char)f[0] & 0x40); /* negative */
	}
	size_t i = 0;
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return false;
		v = v * 8 + (unsigned)(f[i] - '0');
	}
	*out = v;
	return true;
}

static bool checksum_ok(const unsigned char *h)
{
	unsigned long long want;
	if (!number((const char *)h + 148, 8, &want))
		return false;
	unsigned long sum = 0;
	for (int i = 0; i < 512; i++)
		sum += (i >= 148 && i < 156) ? ' ' : h[i];
	return sum == want;
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
	if ((c->st->bytes += size) > UNTAR_MAX_BYTES)
		return bad(c, EFBIG, entry, "takes the layer over 64 GiB unpacked");
	cleanup_fd int fd =
		openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return ab_error_set(c->err, errno, "%s: cannot create '%.300s'", c->what, entry);
	while (size) {
		size_t k = size < BUF ? (size_t)size : BUF;
		int r = read_full(c, c->buf, k);
		if (r < 0)
			return r;
		for (size_t off = 0; off < k;) {
			ssize_t w = write(fd, c->buf + off, k - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return ab_error_set(c->err, w < 0 ? errno : EIO,
						    "%s: cannot write '%.300s'", c->what, entry);
			off += (size_t)w;
		}
		size -= k;
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

struct entry {
	char *path, *link;
	char type;
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

/* One entry of the tar, its data (e->size bytes) read unless skipped. */
static int unpack_entry(struct ctx *c, struct entry *e)
{
	char shown[PATH_MAX];
	snprintf(shown, sizeof(shown), "%s", e->path);
	char *comps[UNTAR_MAX_DEPTH];
	int n = split(c, e->path, comps, shown);
	if (n < 0)
		return -c->err->code;
	bool has_data = e->type == '0' || e->type == '\0' || e->type == '7';
	if (n == 0) /* the root itself */
		return skip(c, has_data ? e->size : 0);
	cleanup_fd int dir = walk(c, comps, n - 1, true, shown);
	if (dir < 0)
		return -c->err->code;
	const char *name = comps[n - 1];
	if (strncmp(name, ".wh.", 4) == 0)
		return whiteout(c, dir, name, shown) < 0 ? -c->err->code
							 : skip(c, has_data ? e->size : 0);
	bool is_dir = e->type == '5';
	int r = make_room(c, dir, name, is_dir, shown);
	if (r < 0)
		return r;
	switch (e->type) {
	case '0':
	case '\0':
	case '7':
		return write_file(c, dir, name, e->mode, e->size, shown);
	case '5':
		if (r == 0 && mkdirat(dir, name, 0700) < 0)
			return ab_error_set(c->err, errno, "%s: cannot make '%.300s'", c->what,
					    shown);
		return remember_dir(c, comps, n, e->mode);
	case '2':
		if (symlinkat(e->link, dir, name) < 0)
			return ab_error_set(c->err, errno, "%s: cannot make the link '%.300s'",
					    c->what, shown);
		return 0;
	case '1':
		return hard_link(c, dir, name, e->link, shown);
	case '3':
		if (e->dev_major == 0 && e->dev_minor == 0 &&
		    mknodat(dir, name, S_IFCHR | 0, makedev(0, 0)) == 0)
			return 0; /* overlay's own whiteout, as an overlay export has it */
		c->st->devices++;
		return 0;
	case '4':
		c->st->devices++; /* device nodes are left out (docs/images.md) */
		return 0;
	case '6':
		if (mkfifoat(dir, name, e->mode & 0777) < 0)
			return ab_error_set(c->err, errno, "%s: cannot make '%.300s'", c->what,
					    shown);
		return 0;
	}
	return bad(c, ENOTSUP, shown, "has a tar entry type agentbox does not unpack: refused");
}

/* A pax header's records: path, linkpath, size. */
static int pax_parse(struct ctx *c, char *p, size_t len, struct entry *e)
{
	char *end = p + len;
	while (p < end) {
		char *sp;
		unsigned long rl = strtoul(p, &sp, 10);
		if (*sp != ' ' || rl == 0 || rl > (unsigned long)(end - p) || p[rl - 1] != '\n')
			return ab_error_plain(c->err, EBADMSG, "%s: a bad pax header", c->what);
		char *kv = sp + 1, *eq = memchr(kv, '=', (size_t)(p + rl - 1 - kv));
		if (eq) {
			*eq = '\0';
			p[rl - 1] = '\0';
			char **slot = strcmp(kv, "path") == 0	    ? &e->path
				      : strcmp(kv, "linkpath") == 0 ? &e->link
								    : NULL;
			if (slot) {
				free(*slot);
				if (!(*slot = strdup(eq + 1)))
					return ab_error_set(c->err, ENOMEM, "unpacking");
			} else if (strcmp(kv, "size") == 0) {
				e->size = strtoull(eq + 1, NULL, 10);
				e->type = 'S'; /* marks "size given" until the header */
			}
		}
		p += rl;
	}
	return 0;
}

/* The data of a pax or GNU long-name header, NUL-terminated. */
static char *read_meta(struct ctx *c, unsigned long long size)
{
	if (size > MAX_PAX) {
		ab_error_plain(c->err, E2BIG, "%s: a tar header over 1 MiB", c->what);
		return NULL;
	}
	char *b = malloc((size_t)size + 1);
	if (!b) {
		ab_error_set(c->err, ENOMEM, "unpacking %s", c->what);
		return NULL;
	}
	if (read_full(c, b, (size_t)size) < 0 || skip(c, (512 - size % 512) % 512) < 0) {
		free(b);
		return NULL;
	}
	b[size] = '\0';
	return b;
}

static char *header_name(const unsigned char *h)
{
	char name[101], prefix[156], full[260];
	memcpy(name, h, 100);
	name[100] = '\0';
	memcpy(prefix, h + 345, 155);
	prefix[155] = '\0';
	if (memcmp(h + 257, "ustar", 5) == 0 && prefix[0])
		snprintf(full, sizeof(full), "%s/%s", prefix, name);
	else
		snprintf(full, sizeof(full), "%s", name);
	return strdup(full);
}

static int next_header(struct ctx *c, struct entry *e, bool *done)
{
	unsigned char h[512];
	int zeros = 0;
	struct entry meta = {0};
	for (;;) {
		ssize_t got = src_read(c->s, h, 1);
		if (got == 0) {
			*done = true; /* no end blocks: a tar may stop here */
			break;
		}
		if (got < 0 || read_full(c, h + 1, 511) < 0)
			return got < 0 ? ab_error_set(c->err, (int)-got, "%s: cannot read the tar",
						      c->what)
				       : -c->err->code;
		static const unsigned char zero[512];
		if (memcmp(h, zero, 512) == 0) {
			if (++zeros == 2) {
				*done = true;
				break;
			}
			continue;
		}
		if (!checksum_ok(h))
			return ab_error_plain(c->err, EBADMSG,
					      "%s: not a tar (a header's checksum is wrong)",
					      c->what);
		if (++c->st->entries > UNTAR_MAX_ENTRIES)
			return ab_error_plain(c->err, E2BIG, "%s: over %d entries", c->what,
					      UNTAR_MAX_ENTRIES);
		unsigned long long size, mode, maj = 0, min = 0;
		if (!number((char *)h + 124, 12, &size) || !number((char *)h + 100, 8, &mode))
			return ab_error_plain(c->err, EBADMSG, "%s: a bad tar header", c->what);
		number((char *)h + 329, 8, &maj);
		number((char *)h + 337, 8, &min);
		char type = (char)h[156];
		if (type == 'x' || type == 'L' || type == 'K') {
			cleanup_free char *b = read_meta(c, size);
			if (!b)
				return -c->err->code;
			if (type == 'x' && pax_parse(c, b, (size_t)size, &meta) < 0)
				return -c->err->code;
			char **slot = type == 'L' ? &meta.path : type == 'K' ? &meta.link : NULL;
			if (slot) {
				free(*slot);
				*slot = ab_steal_pointer(&b);
			}
			continue;
		}
		if (type == 'g') {
			if (skip(c, (size + 511) / 512 * 512) < 0)
				return -c->err->code;
			continue;
		}
		e->path = meta.path ? meta.path : header_name(h);
		if (meta.link)
			e->link = meta.link;
		else {
			char l[101];
			memcpy(l, h + 157, 100);
			l[100] = '\0';
			e->link = strdup(l);
		}
		meta.path = meta.link = NULL;
		e->size = meta.type == 'S' ? meta.size : size;
		e->type = type;
		e->mode = (mode_t)mode;
		e->dev_major = (unsigned)maj;
		e->dev_minor = (unsigned)min;
		if (!e->path || !e->link)
			return ab_error_set(c->err, ENOMEM, "unpacking %s", c->what);
		return 0;
	}
	free(meta.path);
	free(meta.link);
	return 0;
}

static int unpack_all(struct ctx *c)
{
	for (;;) {
		struct entry e = {0};
		bool done = false;
		int r = next_header(c, &e, &done);
		if (r == 0 && !done) {
			/* a file's data is read by unpack_entry; what other entries
			 * carry is skipped */
			bool data = e.type == '0' || e.type == '\0' || e.type == '7';
			unsigned long long rest =
				data ? (512 - e.size % 512) % 512 : (e.size + 511) / 512 * 512;
			r = unpack_entry(c, &e);
			if (r == 0)
				r = skip(c, rest);
		}
		free(e.path);
		free(e.link);
		if (r < 0 || done)
			return r;
	}
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

int untar_layer(int fd, const struct oci_layer *l, const char *what, int root,
		struct untar_stats *st, struct ab_error *err)
{
	struct src *s = calloc(1, sizeof(*s));
	cleanup_free char *buf = malloc(BUF);
	if (!s || !buf) {
		free(s);
		return ab_error_set(err, ENOMEM, "unpacking %s", what);
	}
	s->fd = fd;
	s->gz = l->comp == OCI_GZIP;
	int rh = sha256_init(&s->h, err);
	if (rh < 0) {
		free(s);
		return rh;
	}
	/* 15 + 16: gzip framing only */
	if (s->gz && inflateInit2(&s->z, 15 + 16) != Z_OK) {
		sha256_free(&s->h);
		free(s);
		return ab_error_set(err, ENOMEM, "unpacking %s", what);
	}
	struct ctx c = {.s = s,
			.root = root,
			.what = what,
			.st = st,
			.err = err,
			.buf = buf,
			.last_fd = -1};
	int r = unpack_all(&c);
	/* every byte of the blob is hashed, what follows the tar too */
	while (r == 0 && !s->raw_eof) {
		ssize_t got = raw_read(s, s->in, sizeof(s->in));
		if (got < 0)
			r = ab_error_set(err, (int)-got, "%s: cannot read the blob", what);
	}
	char hex[65];
	sha256_hex(&s->h, hex);
	if (r == 0 && strcmp(hex, l->hex) != 0)
		r = ab_error_plain(err, EBADMSG,
				   "%s: the blob sha256:%s does not match its digest (its content "
				   "hashes to sha256:%s): the layout is corrupt",
				   what, l->hex, hex);
	if (r == 0)
		r = set_dir_modes(&c);
	ab_close_keep_errno(c.last_fd);
	for (size_t i = 0; i < c.n_dirs; i++)
		free(c.dirs[i].path);
	free(c.dirs);
	if (s->gz)
		inflateEnd(&s->z);
	free(s);
	return r;
}
