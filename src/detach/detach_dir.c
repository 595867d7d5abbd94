/* Where the caller's detached sandboxes live, and how to reach one. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "detach/detach.h"
#include "util/error.h"
#include "util/util.h"

/* A control request's reply is this quick: a pause may take
 * the freezer's whole wait before its answer, so more than that. */
#define CTL_TIMEOUT_MS (AB_FREEZE_WAIT_MS + 5000)

/* $XDG_RUNTIME_DIR when it is what the XDG Base Directory specification
 * says it is: an absolute path to a directory of the user's, 0700. */
static const char *xdg_runtime_dir(void)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	if (!xdg || *xdg != '/' || stat(xdg, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 0777) != 0700)
		return NULL;
	return xdg;
}

/* The one place the sandboxes' directory is chosen: $AGENTBOX_RUNTIME_DIR,
 * /run/agentbox for root, $XDG_RUNTIME_DIR/agentbox, /tmp/agentbox-UID
 * (last: in /tmp anyone can make it first). */
static int root_of(char *root, size_t size, struct ab_error *err)
{
	const char *env = getenv("AGENTBOX_RUNTIME_DIR");
	const char *xdg = NULL;
	int n;
	if (env && *env)
		n = snprintf(root, size, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(root, size, "/run/agentbox");
	else if ((xdg = xdg_runtime_dir()))
		n = snprintf(root, size, "%s/agentbox", xdg);
	else
		n = snprintf(root, size, "/tmp/agentbox-%u", (unsigned)geteuid());
	if (n < 0 || (size_t)n >= size || root[0] != '/')
		return ab_error_plain(err, EINVAL,
				      "the sandboxes' directory '%s' is not an absolute path of "
				      "at most %zu bytes (AGENTBOX_RUNTIME_DIR)",
				      root, size - 1);
	return 0;
}

/* root is another user's (made first in /tmp, say): who, and the way out. */
static int squatted(const char *root, const struct stat *st, struct ab_error *err)
{
	struct passwd *pw = getpwuid(st->st_uid);
	return ab_error_plain(err, EPERM,
			      "the sandboxes' directory %s is not yours: user %s (uid %u) made "
			      "it%s, and agentbox will not use it. Set AGENTBOX_RUNTIME_DIR to a "
			      "directory of yours (mkdir -m 700 ~/.agentbox-run), or run where "
			      "XDG_RUNTIME_DIR is your own 0700 directory (a login session's); "
			      "and ask root or its owner to remove it",
			      root, pw ? pw->pw_name : "without a name", (unsigned)st->st_uid,
			      S_ISDIR(st->st_mode) ? "" : " (and it is not a directory)");
}

int detach_root(char *root, size_t size, bool create, struct ab_error *err)
{
	int r = root_of(root, size, err);
	if (r < 0)
		return r;
	if (create && mkdir(root, 0700) < 0 && errno != EEXIST)
		return ab_error_set(err, errno, "cannot make the sandboxes' directory %s", root);
	cleanup_fd int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && !create)
		return -ENOENT; /* no sandbox made yet */
	struct stat st;
	if (fd < 0) {
		int e = errno; /* a 0700 directory of another user, a symlink, a file */
		if (lstat(root, &st) == 0 && st.st_uid != geteuid())
			return squatted(root, &st, err);
		return ab_error_set(err, e, "cannot open the sandboxes' directory %s", root);
	}
	if (fstat(fd, &st) < 0)
		return ab_error_set(err, errno, "cannot stat %s", root);
	if (st.st_uid != geteuid())
		return squatted(root, &st, err);
	if (st.st_mode & 077)
		return ab_error_plain(err, EPERM,
				      "the sandboxes' directory %s is not private (mode %03o; it "
				      "must be 0700): chmod 700 it, or set AGENTBOX_RUNTIME_DIR to "
				      "another directory of yours",
				      root, (unsigned)(st.st_mode & 0777));
	return 0;
}

bool detach_id_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > DETACH_ID_MAX ||
	    !strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", id[0]))
		return false;
	return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

int detach_path(char *out, size_t size, const char *root, const char *id, const char *leaf,
		struct ab_error *err)
{
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path);
	int n = leaf ? snprintf(out, size, "%s/%s/%s", root, id, leaf)
		     : snprintf(out, size, "%s/%s", root, id);
	/* root/id/sock must fit a socket's address, whichever leaf */
	if (n < 0 || (size_t)n >= size || strlen(root) + strlen(id) + 6 >= max)
		return ab_error_plain(err, ENAMETOOLONG,
				      "the path of sandbox %s's socket in %s is longer than a "
				      "unix socket's %zu bytes: use a shorter name or "
				      "AGENTBOX_RUNTIME_DIR",
				      id, root, max - 1);
	return 0;
}

int detach_dial(const char *root, const char *id, const char *leaf, struct ab_error *err)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int r = detach_path(a.sun_path, sizeof(a.sun_path), root, id, leaf, err);
	if (r < 0)
		return r;
	cleanup_fd int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ab_error_set(err, errno, "socket");
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return ab_steal_fd(&fd);
	int e = errno;
	char dir[sizeof(a.sun_path)];
	detach_path(dir, sizeof(dir), root, id, NULL, err);
	struct stat st;
	if (e == ENOENT && lstat(dir, &st) < 0)
		return ab_error_plain(err, ENOENT, "no sandbox %s (agentbox ls lists them)", id);
	if (e == ENOENT || e == ECONNREFUSED)
		return ab_error_plain(err, ECONNREFUSED,
				      "sandbox %s is dead: its launcher is gone (agentbox rm %s "
				      "removes what is left)",
				      id, id);
	return ab_error_set(err, e, "cannot connect to sandbox %s at %s", id, a.sun_path);
}

int detach_read_reply(int fd, char *buf, size_t size, int timeout_ms, bool line)
{
	size_t n = 0;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	while (n < size - 1 && !(line && memchr(buf, '\n', n))) {
		if (poll(&p, 1, timeout_ms) <= 0) {
			buf[n] = 0;
			return -ETIMEDOUT;
		}
		ssize_t r = read(fd, buf + n, size - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
	return n ? 0 : -EPIPE;
}

int detach_ctl_send(const char *root, const char *id, const char *word, struct ab_error *err)
{
	cleanup_fd int fd = detach_dial(root, id, "ctl", err);
	if (fd < 0)
		return fd;
	char line[64];
	snprintf(line, sizeof(line), "%s\n", word);
	if (write(fd, line, strlen(line)) < 0)
		return ab_error_set(err, errno, "sandbox %s: control request", id);
	return ab_steal_fd(&fd);
}

int detach_ctl_parse(const char *id, const char *word, const char *line, int r, json_object **reply,
		     struct ab_error *err)
{
	*reply = r == 0 ? json_tokener_parse(line) : NULL;
	if (!*reply || !json_object_is_type(*reply, json_type_object)) {
		json_object_put(*reply);
		*reply = NULL;
		return ab_error_plain(err, EPROTO,
				      "sandbox %s did not answer its control request '%s'%s", id,
				      word, r == -ETIMEDOUT ? " in time" : "");
	}
	return 0;
}

int detach_ctl(const char *root, const char *id, const char *word, json_object **reply,
	       struct ab_error *err)
{
	*reply = NULL;
	cleanup_fd int fd = detach_ctl_send(root, id, word, err);
	if (fd < 0)
		return fd;
	char line[DETACH_CTL_REPLY_MAX];
	int r = detach_read_reply(fd, line, sizeof(line), CTL_TIMEOUT_MS, true);
	return detach_ctl_parse(id, word, line, r, reply, err);
}

json_object *detach_state_read(const char *root, const char *id)
{
	return detach_json_read(root, id, "state.json");
}

json_object *detach_json_read(const char *root, const char *id, const char *leaf)
{
	char path[PATH_MAX];
	struct ab_error err;
	if (detach_path(path, sizeof(path), root, id, leaf, &err) < 0)
		return NULL;
	cleanup_fd int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > 65536)
		return NULL;
	char buf[65537];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	json_object *o = json_tokener_parse(buf);
	if (o && !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		o = NULL;
	}
	return o;
}

int detach_state_write(const char *root, const char *id, json_object *state, struct ab_error *err)
{
	return detach_json_write(root, id, "state.json", state, err);
}

int detach_json_write(const char *root, const char *id, const char *leaf, json_object *state,
		      struct ab_error *err)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	int r = detach_path(path, sizeof(path), root, id, leaf, err);
	if (r < 0)
		return r;
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	cleanup_fd int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return ab_error_set(err, errno, "cannot write %s", tmp);
	const char *s = json_object_to_json_string_ext(state, JSON_C_TO_STRING_PLAIN);
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s) || write(fd, "\n", 1) != 1 ||
	    rename(tmp, path) < 0) {
		unlink(tmp);
		return ab_error_set(err, errno, "cannot write %s", path);
	}
	return 0;
}

void detach_remove(const char *root, const char *id)
{
	static const char *const leaves[] = {"sock",	       "ctl",  "exec",	   "state.json",
					     "state.json.new", "idle", "idle.new", "log"};
	char path[PATH_MAX];
	struct ab_error err;
	for (size_t i = 0; i < AB_ARRAY_SIZE(leaves); i++)
		if (detach_path(path, sizeof(path), root, id, leaves[i], &err) == 0)
			unlink(path);
	if (detach_path(path, sizeof(path), root, id, NULL, &err) == 0)
		rmdir(path);
}

long long detach_pid_start(pid_t pid)
{
	char path[64], buf[1024];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* after the name: state (field 3) ... starttime (field 22) */
	char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoll(p + 1, NULL, 10) : -1;
}
