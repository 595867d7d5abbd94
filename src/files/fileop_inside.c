/* File operations, the sandbox's half (fileop_inside.h): the reply
 * helpers, and the file and request-field helpers. */
#include "files/fileop.h"
#include "files/fileop_inside.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"
#include "util/output.h"
#include "util/util.h"

/* ---- inside: replies ---- */

/* where the replies go: an fd (fo_reply_to), or a function (fo_reply_with) */
static int reply_fd = STDOUT_FILENO;
static fileop_put_fn *reply_put;
static void *reply_arg;

void fo_reply_to(int fd)
{
	reply_fd = fd;
	reply_put = NULL;
}

void fo_reply_with(fileop_put_fn *put, void *arg)
{
	reply_fd = -1;
	reply_put = put;
	reply_arg = arg;
}

static int emit(json_object *o)
{
	size_t len;
	const char *s = json_object_to_json_string_length(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	if (s && reply_put)
		reply_put(s, len, reply_arg);
	for (size_t off = 0; s && !reply_put && off < len;) {
		ssize_t n = write(reply_fd, s + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	json_object_put(o);
	return 0;
}

int fo_result(json_object *res)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "result", res);
	return emit(o);
}

static enum ab_errc code_of(int e)
{
	switch (e) {
	case ENOENT:
		return AB_ERRC_FILE_NOT_FOUND;
	case EACCES:
	case EPERM:
	case EBUSY:
		return AB_ERRC_PERMISSION_DENIED;
	case EISDIR:
		return AB_ERRC_IS_DIRECTORY;
	case ENOTDIR:
		return AB_ERRC_NOT_DIRECTORY;
	case EROFS:
		return AB_ERRC_READ_ONLY;
	case EEXIST:
		return AB_ERRC_EXISTS;
	case ENOSPC:
	case EDQUOT:
		return AB_ERRC_NO_SPACE;
	case EFBIG:
		return AB_ERRC_TOO_LARGE;
	case ELOOP:
	case ENAMETOOLONG:
	case ENXIO:
	case ENODEV:
	case EINVAL:
		return AB_ERRC_INVALID_PATH;
	default:
		return AB_ERRC_IO_ERROR;
	}
}

__attribute__((format(printf, 3, 4))) int fo_fail(enum ab_errc code, const char *path,
						  const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	size_t tl;
	char *t = utf8_lossy(text, strlen(text), &tl);
	json_object *er = json_object_new_object();
	json_object_object_add(er, "code", json_object_new_string(ab_errc_name(code)));
	json_object_object_add(er, "message",
			       json_object_new_string_len(t ? t : "", t ? (int)tl : 0));
	if (path)
		json_object_object_add(er, "path", json_object_new_string(path));
	free(t);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "error", er);
	return emit(o);
}

/* The error for errno e while doing what to path. EOVERFLOW: an overlay
 * copies a file (or a directory on its way) into the layer before the
 * first change, keeping its owner and group, which the sandbox's user
 * namespace maps only when they are the sandbox user's own (docs/
 * workspace.md, "Files of other owners"). */
int fileop_replace(const char *tmp, const char *path)
{
	/* a swap, then the old file removed: renaming over an existing file
	 * makes ext4 (auto_da_alloc) write the new one out first, seconds for
	 * a large file; readers still see one file or the other */
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0)
		return unlink(tmp) < 0 && errno != ENOENT ? -errno : 0;
	return rename(tmp, path) < 0 ? -errno : 0; /* none there, or no swap here */
}

enum ab_errc fileop_errc(int e)
{
	return code_of(e);
}

int fo_fail_errno(int e, const char *path, const char *what)
{
	const char *why = e == ENODEV ? "not a regular file" : strerror(e);
	const char *hint = e != EOVERFLOW ? ""
					  : " (its owner or group on the host, or its "
					    "directory's, is not mapped into the sandbox, so the "
					    "overlay cannot copy it into the layer to change it: "
					    "on the host, give it your own user and group, or use "
					    "--workspace-mode direct)";
	return fo_fail(code_of(e), path, "%s %s: %s%s", what, path, why, hint);
}

/* A string for JSON from bytes that may not be UTF-8 (file names). */
json_object *fo_lossy(const char *s, size_t n)
{
	size_t tl;
	char *t = utf8_lossy(s, n, &tl);
	json_object *o = json_object_new_string_len(t ? t : "", t ? (int)tl : 0);
	free(t);
	return o;
}

json_object *fo_iso_time(const struct timespec *t)
{
	struct tm tm;
	char b[96];
	if (!gmtime_r(&t->tv_sec, &tm))
		return NULL;
	snprintf(b, sizeof(b), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (int)(t->tv_nsec / 1000000 % 1000));
	return json_object_new_string(b);
}

/* A file info: the target's for a symlink, or the link's own if the
 * target is missing. */
json_object *fo_file_info(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0 && lstat(path, &st) < 0)
		return NULL;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", fo_lossy(path, strlen(path)));
	json_object_object_add(o, "is_dir", json_object_new_boolean(S_ISDIR(st.st_mode)));
	json_object_object_add(o, "size", json_object_new_int64((int64_t)st.st_size));
	json_object_object_add(o, "modified_at", fo_iso_time(&st.st_mtim));
	return o;
}

/* ---- inside: helpers ---- */

/* Open a regular file; -errno (-EISDIR for a directory, -ENODEV for
 * anything else that is not a regular file: a FIFO would block). */
int fo_open_regular(const char *path, int flags, struct stat *st)
{
	int fd = fo_open(path, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		int e = S_ISDIR(st->st_mode) ? EISDIR : ENODEV;
		close(fd);
		return -e;
	}
	fcntl(fd, F_SETFL, flags & O_ACCMODE);
	return fd;
}

/* The whole of a regular file of at most max bytes; -errno, -EFBIG. */
int fo_read_all(const char *path, size_t max, char **out, size_t *len)
{
	struct stat st;
	cleanup_fd int fd = fo_open_regular(path, O_RDONLY, &st);
	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	size_t cap = (size_t)st.st_size + 1, n = 0;
	cleanup_free char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		/* with the buffer full, one byte more: none at the end of the
		 * file (of exactly max bytes, say), one if it grew while read */
		bool full = n == cap - 1;
		char c;
		ssize_t k = full ? read(fd, &c, 1) : read(fd, buf + n, cap - 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		if (!full) {
			n += (size_t)k;
			continue;
		}
		if (cap - 1 >= max)
			return -EFBIG;
		cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
		char *p = realloc(buf, cap);
		if (!p)
			return -ENOMEM;
		buf = p;
		buf[n++] = c; /* cap grew: there is room */
	}
	buf[n] = '\0';
	*out = ab_steal_pointer(&buf);
	*len = n;
	return 0;
}

int fo_write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Create the missing directories above path (mode 0755 before umask). */
int fo_make_parents(const char *path)
{
	if (fo_exact_on())
		return fo_make_parents_exact(path);
	cleanup_free char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		struct stat st;
		if (stat(p, &st) < 0 && mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return 0;
}

const char *fo_jstr(json_object *q, const char *key, size_t *len)
{
	json_object *v;
	if (!json_object_object_get_ex(q, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	if (len)
		*len = (size_t)json_object_get_string_len(v);
	return json_object_get_string(v);
}

bool fo_jbool(json_object *q, const char *key, bool def)
{
	json_object *v;
	return json_object_object_get_ex(q, key, &v) ? json_object_get_boolean(v) : def;
}

int64_t fo_jint(json_object *q, const char *key, int64_t def)
{
	json_object *v;
	return json_object_object_get_ex(q, key, &v) ? json_object_get_int64(v) : def;
}
