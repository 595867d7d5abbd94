/* The bulk path of upload and download, the launcher's half (see
 * fileop_host.h): the caller's host file, the pipe, the copier thread. */
#include "files/fileop_host.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "files/fileop.h"
#include "util/error.h"
#include "util/util.h"

#define STEP (1u << 20) /* bytes one splice asks for */

static struct fileop_host *host_new(bool down)
{
	struct fileop_host *h = calloc(1, sizeof(*h));
	if (h) {
		h->down = down;
		h->file = h->pipe_end = h->abort_fd = h->done_fd = -1;
	}
	return h;
}

/* An absolute host path: a string without NUL bytes, at most PATH_MAX. */
static const char *host_path(json_object *v, const char **why)
{
	const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
	size_t n = s ? (size_t)json_object_get_string_len(v) : 0;
	if (!s)
		*why = "must be a string";
	else if (n == 0 || strlen(s) != n || n >= PATH_MAX)
		*why = "must be a path without NUL bytes, shorter than PATH_MAX";
	else if (s[0] != '/')
		*why = "must be an absolute path (the caller's own, on its host)";
	else
		return s;
	return NULL;
}

/* A symlink as the last component of "from" or "to" is refused, never
 * followed: the caller may name a path in its workspace, where a command
 * of the sandbox could have made one that points at a file of the
 * caller's (~/.ssh/id_rsa to read, ~/.bashrc to write). */
static int refuse_symlink(const struct fileop_host *h, const char *field, struct ab_error *err)
{
	return ab_error_proto(err, AB_ERRC_INVALID_PATH,
			      "%s: '%s' %s is a symbolic link, which is not followed (a command "
			      "in the sandbox may have made it); name the file itself",
			      h->down ? "download" : "upload", field, h->path);
}

static int open_from(struct fileop_host *h, const char *field, struct ab_error *err)
{
	h->file = open(h->path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (h->file < 0 && errno == ELOOP && lstat(h->path, &st) == 0 && S_ISLNK(st.st_mode))
		return refuse_symlink(h, field, err);
	if (h->file < 0)
		return ab_error_proto(err, fileop_errc(errno), "upload: '%s' %s: %s", field,
				      h->path, strerror(errno));
	if (fstat(h->file, &st) < 0)
		return ab_error_proto(err, AB_ERRC_IO_ERROR, "upload: '%s' %s: %s", field, h->path,
				      strerror(errno));
	if (!S_ISREG(st.st_mode))
		return ab_error_proto(
			err, S_ISDIR(st.st_mode) ? AB_ERRC_IS_DIRECTORY : AB_ERRC_INVALID_REQUEST,
			"upload: '%s' %s is not a regular file", field, h->path);
	fcntl(h->file, F_SETFL, O_RDONLY); /* a regular file: blocking reads */
	h->size = (int64_t)st.st_size;
	return 0;
}

/* The temporary file beside "to", created 0600 (mkostemp: O_EXCL), renamed
 * over "to" at the end: "to" itself is never opened, and a rename replaces
 * a symlink rather than follow it. */
static int open_to(struct fileop_host *h, const char *field, struct ab_error *err)
{
	const char *slash = strrchr(h->path, '/');
	const char *base = slash + 1;
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return ab_error_proto(err, AB_ERRC_INVALID_PATH,
				      "download: '%s' %s does not name a file", field, h->path);
	cleanup_free char *dir =
		slash == h->path ? strdup("/") : strndup(h->path, (size_t)(slash - h->path));
	if (!dir)
		return ab_error_proto(err, AB_ERRC_INTERNAL, "download: out of memory");
	struct stat st;
	bool missing = stat(dir, &st) < 0; /* errno is stat's only when it failed */
	if (missing || !S_ISDIR(st.st_mode)) {
		bool gone = missing && errno == ENOENT;
		return ab_error_proto(err, gone ? AB_ERRC_FILE_NOT_FOUND : AB_ERRC_NOT_DIRECTORY,
				      "download: '%s' %s: its directory %s %s", field, h->path, dir,
				      gone	? "does not exist"
				      : missing ? strerror(errno)
						: "is not a directory");
	}
	if (lstat(h->path, &st) == 0 && S_ISLNK(st.st_mode))
		return refuse_symlink(h, field, err);
	if (lstat(h->path, &st) == 0 && S_ISDIR(st.st_mode))
		return ab_error_proto(err, AB_ERRC_IS_DIRECTORY, "download: '%s' %s is a directory",
				      field, h->path);
	if (asprintf(&h->tmp, "%s/.%s.agentbox-XXXXXX", slash == h->path ? "" : dir, base) < 0) {
		h->tmp = NULL;
		return ab_error_proto(err, AB_ERRC_INTERNAL, "download: out of memory");
	}
	h->file = mkostemp(h->tmp, O_CLOEXEC);
	if (h->file < 0) {
		int e = errno;
		free(h->tmp);
		h->tmp = NULL;
		return ab_error_proto(err, fileop_errc(e),
				      "download: '%s' %s: cannot create a file in %s: %s", field,
				      h->path, dir, strerror(e));
	}
	return 0;
}

int fileop_host_open(const char *op, const char *field, json_object *v, struct fileop_host **out,
		     struct ab_error *err)
{
	const char *why = NULL;
	const char *p = host_path(v, &why);
	if (!p)
		return ab_error_proto(err, AB_ERRC_INVALID_PATH, "%s: '%s' %s", op, field, why);
	struct fileop_host *h = host_new(strcmp(op, "download") == 0);
	if (!h || !(h->path = strdup(p))) {
		fileop_host_free(h);
		return ab_error_proto(err, AB_ERRC_INTERNAL, "%s: out of memory", op);
	}
	int r = h->down ? open_to(h, field, err) : open_from(h, field, err);
	if (r < 0) {
		fileop_host_free(h);
		return r;
	}
	*out = h;
	return 0;
}

const char *fileop_host_op(const struct fileop_host *h)
{
	return h->down ? "download_to" : "upload_from";
}

/* ---- the copier ---- */

/* Until fd is ready for ev; false when told to stop. */
static bool await(struct fileop_host *h, int fd, short ev)
{
	struct pollfd p[2] = {{.fd = fd, .events = ev}, {.fd = h->abort_fd, .events = POLLIN}};
	while (poll(p, 2, -1) < 0)
		if (errno != EINTR)
			return false;
	return !p[1].revents;
}

/* read(2)/write(2) instead of splice(2), which some filesystems refuse
 * (EINVAL): one buffer's worth; the count, 0 at the end, or -errno. */
static ssize_t copy_step(struct fileop_host *h, int in, int out, size_t want, char *buf)
{
	ssize_t n;
	while ((n = read(in, buf, want)) < 0 && (errno == EINTR || errno == EAGAIN))
		if (errno == EAGAIN && !await(h, in, POLLIN))
			return -ECANCELED;
	if (n <= 0)
		return n < 0 ? -errno : 0;
	for (ssize_t off = 0; off < n;) {
		ssize_t k = write(out, buf + off, (size_t)(n - off));
		if (k < 0 && errno == EAGAIN && !await(h, out, POLLOUT))
			return -ECANCELED;
		if (k < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
		if (k > 0)
			off += k;
	}
	return n;
}

/* What a download may still write to fd's file system: its free space
 * beyond the reserve (5 % of it, at most 1 GiB), which a sandbox never
 * takes: the shim says how many bytes it sends, but a command can take
 * the shim over, and "to" may be on a disk the sandbox has no other way
 * to fill. Sets h->reserve. */
static uint64_t room_left(struct fileop_host *h, int fd)
{
	struct statvfs v;
	if (fstatvfs(fd, &v) < 0)
		return UINT64_MAX; /* the write's own error, if any, says why */
	uint64_t total = (uint64_t)v.f_blocks * v.f_frsize;
	uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
	h->reserve = total / 20 < (1ull << 30) ? total / 20 : 1ull << 30;
	return avail > h->reserve ? avail - h->reserve : 0;
}

/* A download past its reserve: the rest of the shim's bytes read and
 * dropped until its end (or the operation's), so that it finishes as it
 * would and the reply can say why nothing was kept; closing the pipe
 * instead would kill the shim with SIGPIPE. */
static void drain(struct fileop_host *h, int in)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EAGAIN && await(h, in, POLLIN))
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
	}
}

static void *copier(void *arg)
{
	struct fileop_host *h = arg;
	int in = h->down ? h->pipe_end : h->file, out = h->down ? h->file : h->pipe_end;
	uint64_t left = h->down ? UINT64_MAX : (uint64_t)h->size;
	uint64_t room = 0; /* download: moved may grow to this, as last seen */
	bool spliced = true;
	char *buf = NULL;
	while (left > 0) {
		size_t want = left < STEP ? (size_t)left : STEP;
		if (h->down && h->moved + want > room) {
			uint64_t r = room_left(h, out);
			room = r > UINT64_MAX - h->moved ? UINT64_MAX : h->moved + r;
			if (room <= h->moved) {
				h->error = ENOSPC;
				h->reserve_hit = true;
				drain(h, in);
				break;
			}
			if (h->moved + want > room)
				want = (size_t)(room - h->moved);
		}
		ssize_t n;
		if (spliced) {
			n = splice(in, NULL, out, NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n < 0 && errno == EINVAL) {
				spliced = false;
				continue;
			}
			if (n < 0 && errno == EAGAIN) {
				if (!await(h, h->pipe_end, h->down ? POLLIN : POLLOUT)) {
					h->error = ECANCELED;
					break;
				}
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				n = -errno;
		} else {
			if (!buf && !(buf = malloc(STEP))) {
				h->error = ENOMEM;
				break;
			}
			n = copy_step(h, in, out, want, buf);
		}
		if (n < 0) {
			h->error = (int)-n;
			break;
		}
		if (n == 0)
			break; /* end of file */
		h->moved += (uint64_t)n;
		left -= (uint64_t)n;
	}
	free(buf);
	ab_cleanup_fdp(&h->pipe_end); /* upload: the shim sees the end */
	eventfd_write(h->done_fd, 1);
	return NULL;
}

int fileop_host_start(struct fileop_host *h, int *child, struct ab_error *err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return ab_error_set(err, errno, "%s: a pipe", fileop_host_op(h));
	/* a larger pipe is fewer wake-ups of both ends: as large as allowed
	 * (past /proc/sys/fs/pipe-max-size only with CAP_SYS_RESOURCE) */
	for (unsigned sz = FILEOP_HOST_PIPE_MAX; sz >= 65536; sz /= 4)
		if (fcntl(p[0], F_SETPIPE_SZ, sz) >= 0)
			break;
	h->pipe_end = h->down ? p[0] : p[1];
	*child = h->down ? p[1] : p[0];
	fcntl(h->pipe_end, F_SETFL, O_NONBLOCK);
	h->abort_fd = eventfd(0, EFD_CLOEXEC);
	h->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	/* the copier takes no signal: SIGPIPE is its EPIPE */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = h->abort_fd < 0 || h->done_fd < 0 ? errno
						  : pthread_create(&h->thread, NULL, copier, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		ab_cleanup_fdp(child);
		return ab_error_set(err, r, "%s: the copier", fileop_host_op(h));
	}
	h->running = true;
	return 0;
}

/* ---- the end ---- */

static void stop(struct fileop_host *h, bool wait)
{
	if (!h->running)
		return;
	if (!wait || poll(&(struct pollfd){.fd = h->done_fd, .events = POLLIN}, 1,
			  FILEOP_HOST_DRAIN_MS) <= 0)
		eventfd_write(h->abort_fd, 1);
	pthread_join(h->thread, NULL);
	h->running = false;
}

static void fail(json_object **msg, const char *code, const char *text)
{
	json_object *id = NULL;
	json_object_object_get_ex(*msg, "id", &id);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("error"));
	json_object_object_add(o, "id", json_object_get(id));
	json_object_object_add(o, "code", json_object_new_string(code));
	json_object_object_add(o, "message", json_object_new_string(text));
	json_object_put(*msg);
	*msg = o;
}

void fileop_host_finish(struct fileop_host *h, json_object **msg)
{
	json_object *t, *b;
	bool ok = json_object_object_get_ex(*msg, "type", &t) &&
		  strcmp(json_object_get_string(t), "result") == 0;
	stop(h, ok);
	const char *op = h->down ? "download" : "upload", *field = h->down ? "to" : "from";
	char text[PATH_MAX + 256];
	/* the cause, whatever the shim made of its pipe's end */
	if (h->reserve_hit) {
		snprintf(text, sizeof(text),
			 "download: '%s' %s: stopped after %llu bytes: its file system would have "
			 "had less than %llu MiB free (a download leaves 5%% of it, at most 1 GiB, "
			 "free)",
			 field, h->path, (unsigned long long)h->moved,
			 (unsigned long long)(h->reserve >> 20));
		fail(msg, ab_errc_name(AB_ERRC_NO_SPACE), text);
		return;
	}
	if (!ok)
		return;
	int64_t bytes =
		json_object_object_get_ex(*msg, "bytes", &b) ? json_object_get_int64(b) : -1;
	if (h->error) {
		snprintf(text, sizeof(text), "%s: '%s' %s: %s after %llu bytes", op, field, h->path,
			 strerror(h->error), (unsigned long long)h->moved);
	} else if ((int64_t)h->moved != bytes) {
		snprintf(text, sizeof(text),
			 "%s: %llu bytes of %lld went through for '%s' %s (the sandbox's end "
			 "closed early)",
			 op, (unsigned long long)h->moved, (long long)bytes, field, h->path);
	} else if (h->down) {
		mode_t mask = umask(0);
		umask(mask);
		int r = fchmod(h->file, 0666 & ~mask) < 0 || close(h->file) < 0 ? -errno : 0;
		h->file = -1;
		struct stat st;
		if (r == 0 && lstat(h->path, &st) == 0 && S_ISLNK(st.st_mode)) {
			/* made while the bytes moved: refused as at the start */
			struct ab_error e = {0};
			refuse_symlink(h, field, &e);
			fail(msg, ab_errc_name(AB_ERRC_INVALID_PATH), e.msg);
			return;
		}
		if (r == 0)
			r = fileop_replace(h->tmp, h->path);
		if (r == 0) {
			free(h->tmp);
			h->tmp = NULL;
			return;
		}
		snprintf(text, sizeof(text), "download: '%s' %s: %s", field, h->path, strerror(-r));
		fail(msg, ab_errc_name(fileop_errc(-r)), text);
		return;
	} else {
		return;
	}
	fail(msg, "io_error", text);
}

void fileop_host_free(struct fileop_host *h)
{
	if (!h)
		return;
	stop(h, false);
	ab_cleanup_fdp(&h->file);
	ab_cleanup_fdp(&h->pipe_end);
	ab_cleanup_fdp(&h->abort_fd);
	ab_cleanup_fdp(&h->done_fd);
	if (h->tmp)
		unlink(h->tmp);
	free(h->tmp);
	free(h->path);
	free(h);
}
