/* Bound files that survive atomic saves (bindfile.h).
 *
 * A program that saves by writing a temporary file and renaming it over
 * the old one (editors, most CLIs, Claude Code's ~/.claude.json) fails
 * with EBUSY when the old one is a mount point. So a read-write --bind of
 * a regular file onto the view's own tmpfs is no mount: the launcher reads
 * the host file once into memory (no host fd ever reaches the sandbox;
 * the init, a fork of it, has the same bytes), the init writes them into a
 * file of the view, and when the
 * session ends the launcher reads the file back through a file operation
 * (session/bindsync.c) and writes it here, treating it as what a command
 * wrote: only ever to the source's own name, by a temporary file beside
 * it, never following a link on the host. */
#include "view/bindfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/parse.h"
#include "util/util.h"

/* The tmpfs entry the destination lies on, when the nearest mount above
 * it (planned before it) is one. */
static bool on_view_tmpfs(const struct view_plan *plan, size_t i)
{
	const struct view_entry *e = &plan->e[i], *best = NULL;
	for (size_t j = 0; j < i; j++) {
		const struct view_entry *m = &plan->e[j];
		if (strcmp(m->dst, e->dst) == 0 || !ab_path_is_under(e->dst, m->dst))
			continue;
		if (!best || strlen(m->dst) > strlen(best->dst))
			best = m;
	}
	return best && best->kind == VIEW_TMPFS;
}

static int plan_seed(struct view_entry *e, struct ab_error *err)
{
	cleanup_fd int src =
		open(e->src, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	if (src < 0 || fstat(src, &st) < 0)
		return ab_error_set(err, errno, "--bind: cannot read '%s' to bind at %s", e->src,
				    e->dst);
	if (!S_ISREG(st.st_mode) || st.st_dev != e->dev || st.st_ino != e->ino)
		return ab_error_plain(err, EAGAIN,
				      "--bind: '%s' changed while the sandbox was being built; "
				      "refusing to bind it at %s",
				      e->src, e->dst);
	if ((unsigned long long)st.st_size > BINDFILE_MAX)
		return ab_error_plain(err, EFBIG,
				      "--bind: '%s' is over %u MiB, the most a bound file is "
				      "copied into the sandbox and back; bind its directory "
				      "instead",
				      e->src, BINDFILE_MAX >> 20);
	/* one byte more than its size: a file that grew is read to its end */
	size_t cap = (size_t)st.st_size + 1, n = 0;
	cleanup_free char *buf = malloc(cap);
	while (buf) {
		if (n == cap) {
			char *grown = cap < BINDFILE_MAX ? realloc(buf, cap * 2) : NULL;
			if (!grown)
				return ab_error_plain(err, EFBIG,
						      "--bind: '%s' grew over %u MiB while read",
						      e->src, BINDFILE_MAX >> 20);
			buf = grown;
			cap *= 2;
		}
		ssize_t k = read(src, buf + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return ab_error_set(err, errno, "--bind: cannot read '%s'", e->src);
		if (k == 0)
			break;
		n += (size_t)k;
	}
	if (!buf)
		return ab_error_set(err, ENOMEM, "--bind: cannot copy '%s'", e->src);
	if (n > BINDFILE_MAX)
		return ab_error_plain(err, EFBIG, "--bind: '%s' grew over %u MiB while read",
				      e->src, BINDFILE_MAX >> 20);
	e->mode = st.st_mode & 0777;
	e->seed = buf;
	e->seed_len = n;
	buf = NULL;
	return 0;
}

int bindfile_plan(struct view_plan *plan, struct ab_error *err)
{
	for (size_t i = 0; i < plan->n; i++) {
		struct view_entry *e = &plan->e[i];
		if (e->kind != VIEW_BIND || !e->user || !e->rw || e->is_dir || e->overlay ||
		    e->from_view || e->image_mask || !on_view_tmpfs(plan, i))
			continue;
		e->copy = true;
		e->host_open = false; /* nothing for idmap.c to open */
		int r = plan_seed(e, err);
		if (r < 0)
			return r;
	}
	return 0;
}

bool view_plan_has_copies(const struct view_plan *plan)
{
	for (size_t i = 0; i < plan->n; i++)
		if (plan->e[i].copy)
			return true;
	return false;
}

int bindfile_seed(int target, const struct view_entry *e, struct ab_error *err)
{
	for (size_t off = 0; off < e->seed_len;) {
		ssize_t w = write(target, e->seed + off, e->seed_len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return ab_error_set(err, errno, "cannot copy '%s' to %s", e->src, e->dst);
		off += (size_t)w;
	}
	if (fchmod(target, e->mode) < 0)
		return ab_error_set(err, errno, "cannot copy '%s' to %s", e->src, e->dst);
	return 0;
}

/* Whether fd (from its start) holds exactly these bytes. */
static bool same_content(int fd, const char *data, size_t len)
{
	char buf[65536];
	size_t off = 0;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return false;
		if (n == 0)
			return off == len;
		if ((size_t)n > len - off || memcmp(buf, data + off, (size_t)n) != 0)
			return false;
		off += (size_t)n;
	}
}

/* name in dir replaced by data: a new file beside it, renamed over it. */
static int write_atomic(int dir, const char *name, const char *data, size_t len,
			const struct stat *like)
{
	char tmp[300];
	unsigned long long rnd = 0;
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -errno;
	snprintf(tmp, sizeof(tmp), ".%.200s.agentbox-%016llx", name, rnd);
	cleanup_fd int fd =
		openat(dir, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int r = 0;
	for (size_t off = 0; r == 0 && off < len;) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno != EINTR)
			r = -errno;
		else if (w > 0)
			off += (size_t)w;
	}
	/* the owner kept where we may (root binding another's file) */
	if (r == 0 && geteuid() == 0 && fchown(fd, like->st_uid, like->st_gid) < 0)
		r = -errno;
	if (r == 0 && (fchmod(fd, like->st_mode & 07777) < 0 || fsync(fd) < 0))
		r = -errno;
	if (r == 0 && renameat(dir, tmp, dir, name) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(dir, tmp, 0);
	return r;
}

int bindfile_write_back(const struct view_entry *e, const char *data, size_t len, char *note,
			size_t note_size, struct ab_error *err)
{
	note[0] = '\0';
	if (e->seed_len == len && (len == 0 || memcmp(e->seed, data, len) == 0))
		return 0; /* unchanged inside */
	const char *slash = strrchr(e->src, '/');
	cleanup_free char *dir_path =
		strndup(e->src, slash == e->src ? 1 : (size_t)(slash - e->src));
	const char *name = slash + 1;
	cleanup_fd int dir =
		dir_path ? open(dir_path, O_PATH | O_DIRECTORY | O_CLOEXEC) : (errno = ENOMEM, -1);
	if (dir < 0)
		return ab_error_set(err, errno, "cannot sync %s back to '%s'", e->dst, e->src);
	/* the host's file as it is now: still what was copied in? */
	cleanup_fd int cur =
		openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	bool host_same = cur >= 0 && fstat(cur, &st) == 0 && S_ISREG(st.st_mode) &&
			 (size_t)st.st_size == e->seed_len &&
			 same_content(cur, e->seed, e->seed_len);
	if (host_same) {
		int r = write_atomic(dir, name, data, len, &st);
		if (r < 0)
			return ab_error_set(err, -r, "cannot write %s back to '%s'", e->dst,
					    e->src);
		return 0;
	}
	char conflict[320];
	if (snprintf(conflict, sizeof(conflict), "%s.agentbox-conflict", name) > 255)
		return ab_error_plain(err, ENAMETOOLONG,
				      "'%s' changed on the host while the sandbox ran, and its "
				      "name is too long for a conflict file beside it: %s is not "
				      "synced back",
				      e->src, e->dst);
	struct stat like = {.st_uid = geteuid(), .st_gid = getegid(), .st_mode = e->mode};
	int r = write_atomic(dir, conflict, data, len, &like);
	if (r < 0)
		return ab_error_set(err, -r, "cannot write %s beside '%s' as %s", e->dst, e->src,
				    conflict);
	snprintf(note, note_size,
		 "'%s' changed on the host while the sandbox ran: left as it is; the "
		 "sandbox's %s is in '%s.agentbox-conflict'",
		 e->src, e->dst, e->src);
	return 0;
}
