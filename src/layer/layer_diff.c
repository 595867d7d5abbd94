/* Bounded unified diffs of a change's text files, made by diff(1) on the
 * host side (layer_review.h), and opening a workspace file for them. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layer/layer_review.h"
#include "layer/protect.h"
#include "util/util.h"

#define TEXT_PROBE     8192
#define DIFF_MAX_INPUT (4 << 20) /* bigger files get no diff */

extern char **environ;

/* A regular file, or -ESTALE: what a command wrote may be swapped for a
 * fifo or a device between the walk that listed it and this open. */
static int regular_or_stale(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	return S_ISREG(st.st_mode) ? 0 : -ESTALE;
}

int layer_open_file(int dirfd, const char *rel)
{
	cleanup_fd int p = ab_open_beneath(dirfd, rel);
	if (p < 0)
		return p;
	int r = regular_or_stale(p);
	if (r < 0)
		return r;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p);
	/* reopen the O_PATH fd: it is the file already checked (and never
	 * waited on, were it not) */
	cleanup_fd int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if ((r = regular_or_stale(fd)) < 0)
		return r;
	return ab_steal_fd(&fd);
}

int layer_open_at(int dirfd, const char *name)
{
	cleanup_fd int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = regular_or_stale(fd);
	return r < 0 ? r : ab_steal_fd(&fd);
}

/* Text: no NUL in the first TEXT_PROBE bytes. The fd is rewound. */
static bool looks_text(int fd)
{
	char buf[TEXT_PROBE];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	return n >= 0 && !memchr(buf, '\0', (size_t)n);
}

static int open_side(int dirfd, const char *rel, bool present)
{
	if (!present)
		return open("/dev/null", O_RDONLY | O_CLOEXEC);
	return layer_open_file(dirfd, rel);
}

/* Run diff -u on fds 3 and 4 of the child; read at most max bytes. */
static char *run_diff(int old_fd, int new_fd, const char *old_label, const char *new_label,
		      size_t max, bool *truncated)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, old_fd, 3);
	posix_spawn_file_actions_adddup2(&fa, new_fd, 4);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	char *argv[] = {"diff",	     "-u",
			"--label",   (char *)old_label,
			"--label",   (char *)new_label,
			"/dev/fd/3", "/dev/fd/4",
			NULL};
	pid_t pid;
	int r = posix_spawnp(&pid, "diff", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (r != 0) {
		close(pipefd[0]);
		return NULL;
	}
	char *buf = malloc(max + 1);
	size_t len = 0;
	while (buf && len < max) {
		ssize_t n = read(pipefd[0], buf + len, max - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	char extra;
	*truncated = len == max && read(pipefd[0], &extra, 1) == 1;
	close(pipefd[0]);
	kill(pid, SIGKILL); /* done reading, whatever it had left */
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (buf)
		buf[len] = '\0';
	return buf;
}

void layer_diff_into(json_object *j, const struct change *c, size_t max, int upfd, int wsfd)
{
	const char *old_path = c->from ? c->from : c->path;
	bool has_new = c->has_up && S_ISREG(c->up.st_mode);
	bool has_old = c->has_host && S_ISREG(c->host.st_mode);
	if ((!has_new && !has_old) || (c->has_up && !has_new) || (c->has_host && !has_old) ||
	    (has_new && c->up.st_size > DIFF_MAX_INPUT) ||
	    (has_old && c->host.st_size > DIFF_MAX_INPUT))
		return json_object_object_add(j, "diff", NULL), (void)0;
	cleanup_fd int nfd = open_side(upfd, c->path, has_new);
	cleanup_fd int ofd = open_side(wsfd, old_path, has_old);
	/* above 4: the child's dup2s to 3 and 4 cannot clobber them */
	cleanup_fd int n10 = nfd < 0 ? -1 : fcntl(nfd, F_DUPFD_CLOEXEC, 10);
	cleanup_fd int o10 = ofd < 0 ? -1 : fcntl(ofd, F_DUPFD_CLOEXEC, 10);
	if (n10 < 0 || o10 < 0 || !looks_text(n10) || !looks_text(o10))
		return json_object_object_add(j, "diff", NULL), (void)0;
	char ol[PATH_MAX + 8], nl[PATH_MAX + 8];
	snprintf(ol, sizeof(ol), has_old ? "a/%s" : "/dev/null", old_path);
	snprintf(nl, sizeof(nl), has_new ? "b/%s" : "/dev/null", c->path);
	bool truncated = false;
	cleanup_free char *out = run_diff(o10, n10, ol, nl, max ? max : 65536, &truncated);
	json_object_object_add(j, "diff", out ? json_object_new_string(out) : NULL);
	json_object_object_add(j, "diff_truncated", json_object_new_boolean(truncated));
}
