/* File operations, the sandbox's half (fileop_inside.h): the bulk path of
 * upload and download (fileop_host.h). The bytes come and go on data, a
 * pipe whose other end is the launcher's copier: no host fd is ever here.
 * An upload goes to a temporary file beside its path, renamed over it only
 * once all its bytes arrived; a download sends the file as it was at open,
 * cut at that size. */
#include "files/fileop.h"
#include "files/fileop_inside.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util/util.h"

#define STEP (1u << 20) /* bytes one splice asks for */

/* Up to want bytes from in to out: splice(2), or read(2)/write(2) where a
 * filesystem refuses it (*spliced turns false); the count, 0 at the end,
 * or -errno. */
static ssize_t move(int in, int out, size_t want, bool *spliced, char **buf)
{
	if (*spliced) {
		ssize_t n;
		while ((n = splice(in, NULL, out, NULL, want, SPLICE_F_MOVE)) < 0 && errno == EINTR)
			;
		if (n >= 0 || errno != EINVAL)
			return n < 0 ? -errno : n;
		*spliced = false;
	}
	if (!*buf && !(*buf = malloc(STEP)))
		return -ENOMEM;
	ssize_t n;
	while ((n = read(in, *buf, want < STEP ? want : STEP)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		return n < 0 ? -errno : 0;
	int r = fo_write_all(out, *buf, (size_t)n);
	return r < 0 ? r : n;
}

/* Copy size bytes from in to out; the count moved (less at an early end),
 * or -errno. */
static int64_t move_all(int in, int out, int64_t size)
{
	bool spliced = true;
	char *buf = NULL;
	int64_t done = 0;
	while (done < size) {
		int64_t left = size - done;
		ssize_t n = move(in, out, left < STEP ? (size_t)left : STEP, &spliced, &buf);
		if (n < 0) {
			free(buf);
			return n;
		}
		if (n == 0)
			break;
		done += n;
	}
	free(buf);
	return done;
}

/* Whether size bytes may be written here: the file size limit (a write
 * past it is SIGXFSZ) and the free space; false once the reply says why. */
static bool room_for(int fd, const char *path, int64_t size)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)size > rl.rlim_cur) {
		fo_fail(AB_ERRC_TOO_LARGE, path,
			"upload: %lld bytes is over the sandbox's file size limit, %llu",
			(long long)size, (unsigned long long)rl.rlim_cur);
		return false;
	}
	struct statvfs vs;
	if (fstatvfs(fd, &vs) == 0 && (uint64_t)vs.f_bavail * vs.f_frsize < (uint64_t)size) {
		fo_fail(AB_ERRC_NO_SPACE, path,
			"upload: %lld bytes do not fit where %s goes (%llu bytes free)",
			(long long)size, path, (unsigned long long)vs.f_bavail * vs.f_frsize);
		return false;
	}
	return true;
}

/* An unnamed file in path's directory (O_TMPFILE): a shim killed while
 * it fills it (a cancel, a timeout) leaves nothing behind. -1 with errno
 * where the filesystem has none: then a named one (*named true). */
static int open_unnamed(const char *path, mode_t mode)
{
	const char *slash = strrchr(path, '/');
	cleanup_free char *dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
	if (!dir)
		return -1;
	return open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
}

/* The unnamed file fd, complete, given the name tmp (a fresh one beside
 * path, made in *tmp) so that it can be swapped in. */
static int name_unnamed(int fd, const char *path, char **tmp)
{
	const char *slash = strrchr(path, '/');
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	for (int i = 0; i < 100; i++) {
		unsigned long long rnd = 0;
		if (getrandom(&rnd, sizeof(rnd), 0) < 0)
			return -errno;
		free(*tmp);
		if (asprintf(tmp, "%.*s/.%s.agentbox-%06llx", (int)(slash - path), path, slash + 1,
			     rnd & 0xffffff) < 0) {
			*tmp = NULL;
			return -ENOMEM;
		}
		if (linkat(AT_FDCWD, proc, AT_FDCWD, *tmp, AT_SYMLINK_FOLLOW) == 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	int e = errno;
	free(*tmp); /* names nothing of ours */
	*tmp = NULL;
	return -e;
}

/* The temporary file is complete: it becomes path (with !overwrite only
 * if path is still not there). */
static int put_in_place(const char *tmp, const char *path, bool overwrite)
{
	if (overwrite)
		return fileop_replace(tmp, path);
	int r = link(tmp, path) < 0 ? -errno : 0;
	unlink(tmp);
	return r;
}

int fo_upload_from(json_object *q, int data)
{
	const char *path = fo_jstr(q, "path", NULL);
	int64_t size = fo_jint(q, "size", -1);
	bool overwrite = fo_jbool(q, "overwrite", true);
	if (data < 0 || size < 0)
		return fo_fail(AB_ERRC_INVALID_REQUEST, path, "upload: no data came with 'from'");
	int r = fo_make_parents(path);
	if (r < 0)
		return fo_fail_errno(-r, path, "cannot create the directories of");
	mode_t mask = umask(0);
	umask(mask);
	mode_t mode = 0644 & ~mask;
	bool created = true;
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!overwrite)
			return fo_fail(AB_ERRC_EXISTS, path,
				       "%s exists; pass overwrite to replace it", path);
		if (S_ISDIR(st.st_mode))
			return fo_fail_errno(EISDIR, path, "cannot write");
		created = false;
		if (S_ISREG(st.st_mode))
			mode = st.st_mode & 07777;
	} else if (errno != ENOENT) {
		return fo_fail_errno(errno, path, "cannot write");
	}
	const char *slash = strrchr(path, '/');
	cleanup_free char *tmp = NULL;
	int fd = open_unnamed(path, mode);
	bool named = fd < 0;
	if (named) { /* no O_TMPFILE here: a named file, which a kill leaves */
		if (asprintf(&tmp, "%.*s/.%s.agentbox-XXXXXX", (int)(slash - path), path,
			     slash + 1) < 0)
			return fo_fail(AB_ERRC_IO_ERROR, path, "out of memory");
		fd = mkostemp(tmp, O_CLOEXEC);
	}
	if (fd < 0)
		return fo_fail_errno(errno, path, "cannot create a file beside");
	if (!room_for(fd, path, size)) {
		close(fd);
		if (named)
			unlink(tmp);
		return 0; /* the reply says why */
	}
	int64_t got = fchmod(fd, mode) < 0 ? -errno : move_all(data, fd, size);
	int nr = !named && got == size ? name_unnamed(fd, path, &tmp) : 0;
	if (nr < 0)
		got = nr;
	if (close(fd) < 0 && got >= 0)
		got = -errno;
	if (got >= 0 && got < size) {
		if (named)
			unlink(tmp);
		return fo_fail(AB_ERRC_IO_ERROR, path,
			       "upload: the source ended after %lld of its %lld bytes; %s is left "
			       "as it was",
			       (long long)got, (long long)size, path);
	}
	r = got < 0 ? (int)got : put_in_place(tmp, path, overwrite);
	if (got < 0 && tmp)
		unlink(tmp);
	if (r == -EEXIST)
		return fo_fail(AB_ERRC_EXISTS, path, "%s exists; pass overwrite to replace it",
			       path);
	if (r < 0)
		return fo_fail_errno(-r, path, "cannot write");
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "bytes", json_object_new_int64(size));
	json_object_object_add(o, "created", json_object_new_boolean(created));
	json_object_object_add(o, "size", json_object_new_int64(size));
	return fo_result(o);
}

int fo_download_to(json_object *q, int data)
{
	const char *path = fo_jstr(q, "path", NULL);
	if (data < 0)
		return fo_fail(AB_ERRC_INVALID_REQUEST, path, "download: no pipe came with 'to'");
	/* as the JSON path's, but the last component is not followed either */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return fo_fail_errno(errno, path, "cannot read");
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = S_ISDIR(st.st_mode) ? EISDIR : ENODEV;
		close(fd);
		return fo_fail_errno(e, path, "cannot read");
	}
	fcntl(fd, F_SETFL, O_RDONLY);
	int64_t sent = move_all(fd, data, (int64_t)st.st_size);
	close(fd);
	if (sent < 0)
		return fo_fail_errno((int)-sent, path, "cannot read");
	if (sent != (int64_t)st.st_size)
		return fo_fail(AB_ERRC_IO_ERROR, path,
			       "download: %s shrank while it was read (%lld of %lld bytes)", path,
			       (long long)sent, (long long)st.st_size);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "bytes", json_object_new_int64(sent));
	json_object_object_add(o, "size", json_object_new_int64(sent));
	return fo_result(o);
}
