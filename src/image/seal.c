/* A cached layer's seal (seal.h). The listing: a header line, then one line
 * per entry, the root first and every directory before what it holds, the
 * names of a directory in strcmp order (not readdir's, which a file system
 * need not keep):
 *   LEN:PATH MODE UID GID SIZE INODE LINKS MTIME CTIME
 * PATH relative to the root ("" for it), LEN its length, so that a name
 * with a space or a newline is still one field. The root's times are left
 * out: renaming it into layers/ moves its change time. A directory agentbox
 * cannot open (mode 0 for a plain user) is listed without what it holds:
 * opening it would take a chmod, which moves its change time. */
#include "image/seal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/untar.h"
#include "util/error.h"
#include "util/util.h"

#define SEAL_HEADER	 "agentbox layer seal 1\n"
#define SEAL_MAX_DEPTH	 (UNTAR_MAX_DEPTH + 4)
#define SEAL_MAX_ENTRIES (2UL * UNTAR_MAX_ENTRIES) /* the tar's and their parents */
#define SEAL_PATH_MAX	 (64 * 1024)
#define SEAL_LINE_MAX	 (SEAL_PATH_MAX + 256)

struct walk {
	char path[SEAL_PATH_MAX];
	size_t len;
	unsigned long entries;
	FILE *out; /* writing: the listing */
	FILE *ref; /* checking: the listing compared with */
	char line[SEAL_LINE_MAX], old[SEAL_LINE_MAX];
	bool differs; /* checking: path is the first entry that differs */
	int error;    /* -errno of a walk that failed */
};

static void entry(struct walk *w, const struct stat *st, bool root)
{
	int n = snprintf(
		w->line, sizeof(w->line), "%zu:%.*s %o %u %u %lld %llu %lu %lld.%09ld %lld.%09ld\n",
		w->len, (int)w->len, w->path, (unsigned)st->st_mode, (unsigned)st->st_uid,
		(unsigned)st->st_gid, (long long)st->st_size, (unsigned long long)st->st_ino,
		(unsigned long)st->st_nlink, root ? 0LL : (long long)st->st_mtim.tv_sec,
		root ? 0L : st->st_mtim.tv_nsec, root ? 0LL : (long long)st->st_ctim.tv_sec,
		root ? 0L : st->st_ctim.tv_nsec);
	size_t len = (size_t)n;
	if (w->out) {
		if (fwrite(w->line, 1, len, w->out) != len)
			w->error = -EIO;
	} else if (fread(w->old, 1, len, w->ref) != len || memcmp(w->old, w->line, len) != 0) {
		w->differs = true;
	}
}

static bool stopped(const struct walk *w)
{
	return w->error || w->differs;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in d but . and .., sorted; NULL with w->error set. */
static char **names_of(struct walk *w, DIR *d, size_t *count)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (++w->entries > SEAL_MAX_ENTRIES) {
			w->error = -E2BIG;
			break;
		}
		if (n == cap) {
			char **more = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof(*names));
			if (!more) {
				w->error = -ENOMEM;
				break;
			}
			names = more;
		}
		if (!(names[n] = strdup(de->d_name))) {
			w->error = -ENOMEM;
			break;
		}
		n++;
		errno = 0;
	}
	if (!w->error && errno)
		w->error = -errno;
	if (w->error) {
		while (n)
			free(names[--n]);
		free(names);
		return NULL;
	}
	qsort(names, n, sizeof(*names), by_name);
	*count = n;
	return names;
}

/* What the directory at fd (owned: closed here) holds, depth levels more
 * at most. */
static void walk_dir(struct walk *w, int fd, int depth)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		w->error = -errno;
		close(fd);
		return;
	}
	size_t n = 0, base = w->len;
	char **names = names_of(w, d, &n);
	for (size_t i = 0; i < n && !stopped(w); i++) {
		size_t nl = strlen(names[i]);
		if (base + nl + 2 >= sizeof(w->path)) {
			w->error = -ENAMETOOLONG;
			break;
		}
		if (base)
			w->path[w->len++] = '/';
		memcpy(w->path + w->len, names[i], nl + 1);
		w->len += nl;
		struct stat st, sub_st;
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			/* gone between readdir and now: changed while walked */
			w->differs = w->ref != NULL;
			w->error = w->ref ? 0 : -errno;
		} else if (!S_ISDIR(st.st_mode)) {
			entry(w, &st, false);
		} else {
			int sub = openat(dirfd(d), names[i],
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
						 O_CLOEXEC);
			if (sub < 0 && errno == EACCES) {
				entry(w, &st, false);
			} else if (sub < 0 || fstat(sub, &sub_st) < 0) {
				w->differs = w->ref != NULL; /* replaced while walked */
				w->error = w->ref ? 0 : -errno;
				ab_close_keep_errno(sub);
			} else if (sub_st.st_dev != st.st_dev || sub_st.st_ino != st.st_ino) {
				w->differs = true;
				close(sub);
			} else if (depth <= 0) {
				w->error = -ELOOP;
				close(sub);
			} else {
				entry(w, &sub_st, false);
				if (stopped(w))
					close(sub);
				else
					walk_dir(w, sub, depth - 1);
			}
		}
		if (!stopped(w))
			w->len = base; /* else path names the entry */
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	w->path[w->len] = '\0';
}

/* The whole tree at root into w. */
static void walk_tree(struct walk *w, int root)
{
	int fd = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		w->error = -errno;
		ab_close_keep_errno(fd);
		return;
	}
	w->path[0] = '\0';
	entry(w, &st, true);
	if (stopped(w))
		close(fd);
	else
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

int seal_check(int root, int seal, const char *what, struct ab_error *err)
{
	cleanup_free struct walk *w = calloc(1, sizeof(*w));
	int in = dup(seal);
	if (!w || in < 0 || !(w->ref = fdopen(in, "r"))) {
		ab_close_keep_errno(in);
		return ab_error_set(err, w ? errno : ENOMEM, "%s: cannot read its seal", what);
	}
	char head[sizeof(SEAL_HEADER)] = "";
	bool known = fread(head, 1, strlen(SEAL_HEADER), w->ref) == strlen(SEAL_HEADER) &&
		     memcmp(head, SEAL_HEADER, strlen(SEAL_HEADER)) == 0;
	if (known)
		walk_tree(w, root);
	/* more lines than the tree: something in it is gone */
	if (known && !stopped(w) && fgetc(w->ref) != EOF) {
		w->differs = true;
		snprintf(w->path, sizeof(w->path), "(an entry it had is gone)");
	}
	fclose(w->ref);
	if (!known)
		return -ENOENT;
	if (w->error)
		return ab_error_set(err, -w->error, "%s: cannot check its unpacked tree at '%s'",
				    what, w->len ? w->path : ".");
	if (w->differs)
		return ab_error_plain(err, EBADMSG,
				      "%s was changed after it was unpacked: "
				      "'%.300s' is not what was unpacked (a content, name, mode or "
				      "owner changed); refused: remove it with 'agentbox images "
				      "prune' and the next start unpacks it anew from the image",
				      what, w->path[0] ? w->path : ".");
	return 0;
}
