/* A cached layer's seal (seal.h). The listing: a header line, then one
 * record per entry, the root first and every directory before what it
 * holds, the names of a directory in strcmp order (not getdents', which a
 * file system need not keep), and an end record after each directory's
 * entries, so that a name moved into or out of a directory never lists
 * the same. A record is struct rec and the name's bytes, in this machine's
 * byte order (the cache is this machine's). The root's times are left out:
 * renaming it into layers/ moves its change time. A directory agentbox
 * cannot open (mode 0 for a plain user) is listed without what it holds:
 * opening it would take a chmod, which moves its change time.
 *
 * Cost: one getdents64 pass per directory, one fstatat per entry (openat
 * and fstat for a directory), no formatting, one read of the listing;
 * about 10,000 entries a check (docs/images.md, "Cost"). */
#include "image/seal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "image/untar.h"
#include "util/error.h"
#include "util/util.h"

#define SEAL_HEADER	   "agentbox layer seal 2\n"
#define SEAL_MAX_DEPTH	   (UNTAR_MAX_DEPTH + 4)
#define SEAL_MAX_ENTRIES   (2UL * UNTAR_MAX_ENTRIES) /* the tar's and their parents */
#define SEAL_MAX_BYTES	   (512UL << 20)	     /* of a listing read back */
#define SEAL_MAX_DIR_BYTES (64UL << 20)		     /* of one directory's getdents */
#define SEAL_PATH_MAX	   (64 * 1024)

struct rec {
	uint32_t mode, uid, gid, nlink;
	uint64_t size, ino;
	int64_t mtime, ctime;
	uint32_t mtime_ns, ctime_ns;
	uint32_t name_len; /* the name's bytes follow; 0: the end of a directory */
	uint32_t pad;
};

struct walk {
	char path[SEAL_PATH_MAX];
	size_t len;
	unsigned long entries;
	FILE *out;	    /* writing: the listing */
	const char *ref;    /* checking: the listing compared with */
	size_t ref_len, at; /* its length, and how far it matched */
	bool differs;	    /* checking: path is the first entry that differs */
	int error;	    /* -errno of a walk that failed */
};

static bool stopped(const struct walk *w)
{
	return w->error || w->differs;
}

static void put(struct walk *w, const void *p, size_t n)
{
	if (w->out) {
		if (fwrite(p, 1, n, w->out) != n)
			w->error = -EIO;
	} else if (w->ref_len - w->at < n || memcmp(w->ref + w->at, p, n) != 0) {
		w->differs = true;
	} else {
		w->at += n;
	}
}

/* The entry st named name (NULL: the root; "": a directory's end). */
static void entry(struct walk *w, const struct stat *st, const char *name)
{
	struct rec r = {0};
	size_t nl = name ? strlen(name) : 0;
	if (st) {
		r.mode = st->st_mode;
		r.uid = st->st_uid;
		r.gid = st->st_gid;
		r.nlink = (uint32_t)st->st_nlink;
		r.size = (uint64_t)st->st_size;
		r.ino = st->st_ino;
		if (name) {
			r.mtime = st->st_mtim.tv_sec;
			r.mtime_ns = (uint32_t)st->st_mtim.tv_nsec;
			r.ctime = st->st_ctim.tv_sec;
			r.ctime_ns = (uint32_t)st->st_ctim.tv_nsec;
		}
	}
	r.name_len = (uint32_t)nl;
	put(w, &r, sizeof(r));
	if (nl && !stopped(w))
		put(w, name, nl);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Every name in the directory at fd but . and .., sorted: *buf holds
 * them, the result points into it; NULL with w->error set. */
static char **names_of(struct walk *w, int fd, char **buf, size_t *count)
{
	size_t cap = 32 * 1024, used = 0, n = 0;
	char **names = NULL;
	for (;;) {
		if (cap - used < 4096) {
			char *more = cap * 2 > SEAL_MAX_DIR_BYTES ? NULL : realloc(*buf, cap *= 2);
			if (!more) {
				w->error = -E2BIG;
				return NULL;
			}
			*buf = more;
		} else if (!*buf && !(*buf = malloc(cap))) {
			w->error = -ENOMEM;
			return NULL;
		}
		long got = syscall(SYS_getdents64, fd, *buf + used, cap - used);
		if (got < 0) {
			w->error = -errno;
			return NULL;
		}
		if (got == 0)
			break;
		used += (size_t)got;
	}
	for (size_t off = 0; off < used; off += ((struct linux_dirent64 *)(*buf + off))->d_reclen)
		n++;
	names = malloc((n ? n : 1) * sizeof(*names));
	if (!names) {
		w->error = -ENOMEM;
		return NULL;
	}
	n = 0;
	for (size_t off = 0; off < used;) {
		struct linux_dirent64 *d = (struct linux_dirent64 *)(*buf + off);
		off += d->d_reclen;
		if (strcmp(d->d_name, ".") && strcmp(d->d_name, ".."))
			names[n++] = d->d_name;
	}
	if ((w->entries += n) > SEAL_MAX_ENTRIES) {
		free(names);
		w->error = -E2BIG;
		return NULL;
	}
	qsort(names, n, sizeof(*names), by_name);
	*count = n;
	return names;
}

static int open_dir(int fd, const char *name)
{
	return openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
}

/* What the directory at fd holds, depth levels more at most. */
static void walk_dir(struct walk *w, int fd, int depth)
{
	cleanup_free char *buf = NULL;
	size_t n = 0, base = w->len;
	cleanup_free char **names = names_of(w, fd, &buf, &n);
	for (size_t i = 0; i < n && !stopped(w); i++) {
		const char *name = names[i];
		size_t nl = strlen(name);
		if (base + nl + 2 >= sizeof(w->path)) {
			w->error = -ENAMETOOLONG;
			break;
		}
		if (base)
			w->path[w->len++] = '/';
		memcpy(w->path + w->len, name, nl + 1);
		w->len += nl;
		/* a directory is opened without a link followed, then judged on
		 * what fstat says of the opened one: what it lists is what was
		 * checked; getdents' type (the byte before the name) spares the
		 * open of the rest */
		unsigned char type = (unsigned char)name[-1];
		struct stat st;
		cleanup_fd int sub = type == DT_DIR || type == DT_UNKNOWN ? open_dir(fd, name) : -1;
		int r = sub >= 0 ? fstat(sub, &st) : fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW);
		if (r == 0 && sub < 0 && S_ISDIR(st.st_mode) && type != DT_DIR &&
		    type != DT_UNKNOWN && (sub = open_dir(fd, name)) >= 0)
			r = fstat(sub, &st);
		if (r < 0) {
			/* gone since getdents: changed while walked */
			w->differs = w->ref != NULL;
			w->error = w->ref ? 0 : -errno;
		} else {
			entry(w, &st, name);
			if (sub >= 0 && !stopped(w)) {
				if (depth <= 0)
					w->error = -ELOOP;
				else
					walk_dir(w, sub, depth - 1);
			}
		}
		if (!stopped(w))
			w->len = base; /* else path names the entry */
	}
	if (!stopped(w))
		entry(w, NULL, "");
	w->path[w->len] = '\0';
}

/* The whole tree at root into w. */
static void walk_tree(struct walk *w, int root)
{
	cleanup_fd int fd = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		w->error = -errno;
		return;
	}
	w->path[0] = '\0';
	entry(w, &st, NULL);
	if (!stopped(w))
		walk_dir(w, fd, SEAL_MAX_DEPTH);
}

int seal_write(int root, int fd, struct ab_error *err)
{
	cleanup_free struct walk *w = calloc(1, sizeof(*w));
	int out = dup(fd);
	if (!w || out < 0 || !(w->out = fdopen(out, "w"))) {
		ab_close_keep_errno(out);
		return ab_error_set(err, w ? errno : ENOMEM, "cannot write a layer's seal");
	}
	setvbuf(w->out, NULL, _IOFBF, 1 << 20);
	if (fputs(SEAL_HEADER, w->out) < 0)
		w->error = -EIO;
	if (!w->error)
		walk_tree(w, root);
	if (fclose(w->out) != 0 && !w->error)
		w->error = -errno;
	if (w->error)
		return ab_error_set(err, -w->error, "cannot seal the layer at '%s'",
				    w->len ? w->path : ".");
	return 0;
}

/* The listing at fd, whole, bounded; NULL with errno. */
static char *read_listing(int fd, size_t *len)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return NULL;
	if ((unsigned long long)st.st_size > SEAL_MAX_BYTES) {
		errno = EFBIG;
		return NULL;
	}
	char *buf = malloc((size_t)st.st_size + 1);
	size_t got = 0;
	while (buf && got < (size_t)st.st_size) {
		ssize_t r = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
		if (r <= 0) {
			free(buf);
			errno = r < 0 ? errno : EIO;
			return NULL;
		}
		got += (size_t)r;
	}
	*len = got;
	return buf;
}

bool seal_known(int seal)
{
	char head[sizeof(SEAL_HEADER)];
	size_t hl = strlen(SEAL_HEADER);
	return pread(seal, head, hl, 0) == (ssize_t)hl && memcmp(head, SEAL_HEADER, hl) == 0;
}

int seal_check(int root, int seal, const char *what, struct ab_error *err)
{
	cleanup_free struct walk *w = calloc(1, sizeof(*w));
	size_t len = 0;
	cleanup_free char *ref = w ? read_listing(seal, &len) : NULL;
	if (!ref)
		return ab_error_set(err, w ? errno : ENOMEM, "%s: cannot read its seal", what);
	size_t hl = strlen(SEAL_HEADER);
	if (len < hl || memcmp(ref, SEAL_HEADER, hl) != 0)
		return -ENOENT;
	w->ref = ref;
	w->ref_len = len;
	w->at = hl;
	walk_tree(w, root);
	/* more records than the tree: something in it is gone */
	if (!stopped(w) && w->at != len) {
		w->differs = true;
		snprintf(w->path, sizeof(w->path), "(an entry it had is gone)");
	}
	if (w->error)
		return ab_error_set(err, -w->error, "%s: cannot check its unpacked tree at '%s'",
				    what, w->len ? w->path : ".");
	if (w->differs)
		return ab_error_plain(
			err, EBADMSG,
			"%s was changed after it was unpacked: '%.300s' is not what "
			"was unpacked (a content, name, mode or owner changed); "
			"refused: remove it with 'agentbox images prune' and the next "
			"start unpacks it anew from the image",
			what, w->path[0] ? w->path : ".");
	return 0;
}
