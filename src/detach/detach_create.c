/* agentbox create: the sandbox's directory and sockets are made here, in
 * the caller's process, so that what is wrong is said at once; then the
 * launcher runs detached (its own session, stdin and stdout on /dev/null,
 * stderr in the log) and the caller waits for READY. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "detach/detach.h"
#include "serve/serve.h"
#include "util/error.h"
#include "util/util.h"

/* How long create waits for the sandbox: its start takes milliseconds;
 * this only bounds a launcher that hangs. */
#define READY_TIMEOUT_MS 60000

struct launch {
	struct ab_config *cfg;
	const struct detach_opts *o;
	const char *root, *id;
	int ready_fd, log_fd;
};

static int listen_at(const char *root, const char *id, const char *leaf, struct ab_error *err)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int r = detach_path(a.sun_path, sizeof(a.sun_path), root, id, leaf, err);
	if (r < 0)
		return r;
	cleanup_fd int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    chmod(a.sun_path, 0600) < 0 || listen(fd, 16) < 0)
		return ab_error_set(err, errno, "cannot listen on %s", a.sun_path);
	return ab_steal_fd(&fd);
}

/* The sandbox is built (rc 0) or not: the state file, then a word to
 * the caller waiting in detach_create. */
static void on_ready(void *arg, int rc, const char *msg)
{
	struct launch *l = arg;
	struct ab_error err = {0};
	char line[sizeof(err.msg) + 8];
	if (rc == 0) {
		json_object *st = json_object_new_object();
		json_object_object_add(st, "id", json_object_new_string(l->id));
		json_object_object_add(st, "name",
				       l->o->name ? json_object_new_string(l->o->name) : NULL);
		json_object_object_add(st, "pid", json_object_new_int((int)getpid()));
		json_object_object_add(st, "created", json_object_new_int64((int64_t)time(NULL)));
		json_object_object_add(
			st, "workspace",
			json_object_new_string(l->cfg->workspace ? l->cfg->workspace : ""));
		json_object_object_add(st, "idle_timeout_ms",
				       json_object_new_int64((int64_t)l->o->idle_timeout_ms));
		json_object_object_add(st, "ttl_ms", json_object_new_int64((int64_t)l->o->ttl_ms));
		/* msg: the overlay workspace's layer directory (ls: its size) */
		json_object_object_add(st, "layer", msg ? json_object_new_string(msg) : NULL);
		json_object_object_add(st, "cgroup_parent",
				       l->cfg->cgroup_parent
					       ? json_object_new_string(l->cfg->cgroup_parent)
					       : NULL);
		rc = detach_state_write(l->root, l->id, st, &err);
		json_object_put(st);
		msg = err.msg;
	}
	snprintf(line, sizeof(line), "%s%s", rc == 0 ? "ok" : "error ", rc == 0 ? "" : msg);
	(void)!write(l->ready_fd, line, strlen(line));
	close(l->ready_fd);
	l->ready_fd = -1;
	if (rc < 0)
		raise(SIGTERM); /* no state file: the sandbox cannot be found, so it ends */
}

/* Released while idle: the file ls reads instead of asking (detach.h);
 * busy again: gone first. */
static void on_idle(void *arg, bool idle, unsigned long long idle_ms, const char *memory_file)
{
	struct launch *l = arg;
	char path[PATH_MAX];
	struct ab_error err = {0};
	if (!idle) {
		if (detach_path(path, sizeof(path), l->root, l->id, "idle", &err) == 0)
			unlink(path);
		return;
	}
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	long long now = (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "since_ms", json_object_new_int64(now - (long long)idle_ms));
	json_object_object_add(o, "start", json_object_new_int64(detach_pid_start(0)));
	json_object_object_add(o, "memory_file",
			       memory_file ? json_object_new_string(memory_file) : NULL);
	detach_json_write(l->root, l->id, "idle", o, &err); /* else ls asks */
	json_object_put(o);
}

/* In the detached launcher: serve until stopped, then leave nothing. */
/* The protocol's "fork" (ckpt.h): in a child of this launcher. */
static int on_fork(void *arg, const struct ckpt_fork *f, json_object *ids, struct ab_error *err)
{
	struct launch *l = arg;
	return l->o->fork(l->cfg, l->o, f, ids, err);
}

static _Noreturn void launcher(struct launch *l, int sock, int ctl, int exec)
{
	if (l->o->close_fd > 2) /* a fork's maker's reply pipe */
		close(l->o->close_fd);
	/* nothing of the caller's: the sandbox's processes inherit these */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
	}
	dup2(l->log_fd, STDERR_FILENO);
	struct ab_serve_listen L = {.id = l->id,
				    .sock_fd = sock,
				    .ctl_fd = ctl,
				    .exec_fd = exec,
				    .idle_timeout_ms = l->o->idle_timeout_ms,
				    .ttl_ms = l->o->ttl_ms,
				    .idle_pause = l->o->idle_pause,
				    .keep_output = (size_t)l->o->keep_output,
				    .keep_total = (size_t)l->o->keep_total,
				    .idle_release_ms = l->o->idle_release_ms,
				    .idle = on_idle,
				    .ready = on_ready,
				    .arg = l,
				    .fork = l->o->fork ? on_fork : NULL,
				    .base = l->o->base,
				    .n_base = l->o->n_base,
				    .base_own = l->o->base_own,
				    .n_base_own = l->o->n_base_own};
	int status = ab_serve_listen(l->cfg, &L);
	detach_remove(l->root, l->id);
	_exit(status);
}

/* What the launcher said on its way (notices: what --isolation best
 * dropped, say) from its log to our stderr. Not inlined, nor is
 * wait_ready: their buffers would deepen detach_create's frame, below
 * which the launcher serves (detach_create). */
static __attribute__((noinline)) void copy_log(const char *log)
{
	cleanup_fd int fd = open(log, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	char buf[4096];
	ssize_t n;
	size_t total = 0;
	while (fd >= 0 && total < (64u << 10) && (n = read(fd, buf, sizeof(buf))) > 0) {
		(void)!write(STDERR_FILENO, buf, (size_t)n);
		total += (size_t)n;
	}
}

/* The caller's side: READY or why not, from the launcher's pipe. */
static __attribute__((noinline)) int wait_ready(int fd, const char *id, struct ab_error *err)
{
	char buf[sizeof(err->msg) + 8];
	if (detach_read_reply(fd, buf, sizeof(buf), READY_TIMEOUT_MS, false) == -ETIMEDOUT)
		return ab_error_plain(err, ETIMEDOUT, "sandbox %s was not ready within %d s", id,
				      READY_TIMEOUT_MS / 1000);
	if (!strcmp(buf, "ok"))
		return 0;
	if (!strncmp(buf, "error ", 6))
		return ab_error_plain(err, EIO, "%s", buf + 6);
	return ab_error_plain(err, EIO, "the launcher of sandbox %s ended before it was ready", id);
}

static void make_id(char *id, size_t size)
{
	unsigned char b[5] = {0};
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		unsigned long long t =
			(unsigned long long)time(NULL) ^ (unsigned long long)getpid();
		memcpy(b, &t, sizeof(b));
	}
	snprintf(id, size, "ab-%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4]);
}

int detach_create(struct ab_config *cfg, const struct detach_opts *o, char *id, size_t size,
		  struct ab_error *err)
{
	/* on the heap, not in this frame: the launcher serves in frames
	 * below it, and every page of them down to its idle poll is an idle
	 * sandbox's memory (twice over where its init, cloned from there,
	 * and it both write one) */
	cleanup_free char *paths = malloc(3 * PATH_MAX);
	if (!paths)
		return ab_error_set(err, ENOMEM, "making the sandbox");
	char *root = paths, *dir = paths + PATH_MAX, *log = paths + 2 * PATH_MAX;
	int r = detach_root(root, PATH_MAX, true, err);
	if (r < 0)
		return r;
	if (o->name && !detach_id_valid(o->name))
		return ab_error_plain(err, EINVAL,
				      "--name '%s': a name is 1 to %d letters, digits, '.', '_' "
				      "or '-', starting with a letter or digit",
				      o->name, DETACH_ID_MAX);
	if (o->name)
		snprintf(id, size, "%s", o->name);
	else
		make_id(id, size);
	if ((r = detach_path(dir, PATH_MAX, root, id, NULL, err)) < 0 ||
	    (r = detach_path(log, PATH_MAX, root, id, "log", err)) < 0)
		return r;
	if (mkdir(dir, 0700) < 0)
		return errno == EEXIST ? ab_error_plain(err, EEXIST,
							"a sandbox named %s exists already "
							"(agentbox ls; agentbox rm %s)",
							id, id)
				       : ab_error_set(err, errno, "cannot make %s", dir);
	int sock = listen_at(root, id, "sock", err), ctl = -1, exec = -1, pfd[2] = {-1, -1};
	if (sock >= 0)
		ctl = listen_at(root, id, "ctl", err);
	if (ctl >= 0)
		exec = listen_at(root, id, "exec", err);
	struct launch l = {.cfg = cfg, .o = o, .root = root, .id = id};
	l.log_fd =
		exec < 0 ? -1 : open(log, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
	if (exec >= 0 && l.log_fd < 0)
		ab_error_set(err, errno, "cannot make %s", log);
	r = l.log_fd < 0 ? -EIO : pipe2(pfd, O_CLOEXEC) < 0 ? ab_error_set(err, errno, "pipe") : 0;
	pid_t pid = r < 0 ? -1 : fork();
	if (r == 0 && pid < 0)
		r = ab_error_set(err, errno, "fork");
	if (pid == 0) {
		close(pfd[0]);
		l.ready_fd = pfd[1];
		setsid();
		pid_t again = fork(); /* not a session leader: no terminal can be acquired */
		if (again != 0)
			_exit(again < 0);
		/* the launcher's own files are the caller's alone; the
		 * sandbox's processes get the caller's umask, as with run */
		mode_t caller = umask(077);
		if (!cfg->umask_set) {
			cfg->umask = caller;
			cfg->umask_set = true;
		}
		/* the launcher keeps the root alone (it never returns to
		 * free the rest) */
		char *keep = strdup(root);
		if (keep) {
			l.root = keep;
			free(paths);
			paths = NULL;
		}
		launcher(&l, sock, ctl, exec);
	}
	ab_close_keep_errno(pfd[1]);
	ab_close_keep_errno(sock);
	ab_close_keep_errno(ctl);
	ab_close_keep_errno(exec);
	ab_close_keep_errno(l.log_fd);
	if (pid > 0) {
		waitpid(pid, NULL, 0);
		r = wait_ready(pfd[0], id, err);
		if (r == 0)
			copy_log(log);
	}
	ab_close_keep_errno(pfd[0]);
	if (r < 0)
		detach_remove(root, id);
	return r;
}
