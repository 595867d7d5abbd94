/* File events, the sandbox's half (watch.h): inotify on a directory of the
 * view and, recursive, on each directory under it, followed as they are
 * made, moved and removed; each event one line to the launcher through a
 * bounded queue. It runs in a shim (agentbox's own process: no command can
 * signal or trace it, docs/architecture.md), as the sandbox's user, under
 * its seccomp filter and Landlock rules, until it is killed. */
#include "watch/watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/output.h"
#include "util/util.h"

#define MASK                                                                                       \
	(IN_CREATE | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |        \
	 IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
#define MAX_DEPTH    256
#define PAIR_WAIT_MS 2 /* a rename's second half, when a read ended between them */

struct watcher {
	int ifd, out;
	bool recursive;
	char **dirs; /* by watch descriptor: the directory's path, or NULL */
	size_t ndirs, cap, live;
	char *q; /* the queue of lines not written yet */
	size_t qlen;
	bool dropped; /* lines dropped since the last overflow line */
	bool gone;    /* out closed: the launcher no longer reads */
	bool root_gone;
	/* the first half of a rename, waiting for its second */
	uint32_t cookie;
	char *held;
	bool held_dir;
};

static void flush(struct watcher *w)
{
	size_t done = 0;
	while (done < w->qlen && !w->gone) {
		ssize_t n = write(w->out, w->q + done, w->qlen - done);
		if (n > 0)
			done += (size_t)n;
		else if (n < 0 && errno == EINTR)
			continue;
		else if (n < 0 && errno == EAGAIN)
			break;
		else
			w->gone = true;
	}
	memmove(w->q, w->q + done, w->qlen - done);
	w->qlen -= done;
}

static void put_line(struct watcher *w, const char *s, size_t n)
{
	if (w->qlen + n + 1 > WATCH_QUEUE_MAX) {
		w->dropped = true;
		return;
	}
	memcpy(w->q + w->qlen, s, n);
	w->q[w->qlen + n] = '\n';
	w->qlen += n + 1;
}

static void put_overflow(struct watcher *w)
{
	static const char line[] = "{\"e\":\"overflow\"}";
	if (w->qlen + sizeof(line) > WATCH_QUEUE_MAX)
		return;
	w->dropped = false;
	put_line(w, line, sizeof(line) - 1);
}

static void emit(struct watcher *w, const char *kind, const char *path, const char *from, bool dir)
{
	if (w->dropped)
		put_overflow(w); /* before anything that comes after the gap */
	if (w->dropped)
		return;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "e", json_object_new_string(kind));
	if (path) {
		size_t tl = 0;
		char *t = utf8_lossy(path, strlen(path), &tl);
		json_object_object_add(o, "p", json_object_new_string_len(t ? t : "", (int)tl));
		free(t);
	}
	if (from) {
		size_t tl = 0;
		char *t = utf8_lossy(from, strlen(from), &tl);
		json_object_object_add(o, "f", json_object_new_string_len(t ? t : "", (int)tl));
		free(t);
	}
	if (dir)
		json_object_object_add(o, "d", json_object_new_boolean(true));
	size_t n;
	const char *s = json_object_to_json_string_length(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
	if (s && n < WATCH_LINE_MAX)
		put_line(w, s, n);
	json_object_put(o);
}

static char *join(const char *dir, const char *name)
{
	char *p = NULL;
	if (asprintf(&p, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name) < 0)
		return NULL;
	return p;
}

/* A directory followed: its path under its watch descriptor. */
static int add_dir(struct watcher *w, const char *path)
{
	if (w->live >= WATCH_DIRS_MAX)
		return -ENOSPC;
	int wd = inotify_add_watch(w->ifd, path, MASK);
	if (wd < 0)
		return -errno;
	if ((size_t)wd >= w->cap) {
		size_t cap = (size_t)wd * 2 + 16;
		char **d = realloc(w->dirs, cap * sizeof(*d));
		if (!d) {
			inotify_rm_watch(w->ifd, wd);
			return -ENOMEM;
		}
		memset(d + w->cap, 0, (cap - w->cap) * sizeof(*d));
		w->dirs = d;
		w->cap = cap;
	}
	if (w->dirs[wd]) { /* the same directory again (a second name) */
		free(w->dirs[wd]);
		w->live--;
	}
	if (!(w->dirs[wd] = strdup(path)))
		return -ENOMEM;
	w->live++;
	if ((size_t)wd >= w->ndirs)
		w->ndirs = (size_t)wd + 1;
	return wd;
}

/* path followed and, below it, every directory, each entry found reported
 * as created when announce (a directory made or moved in after the watch
 * began: what was made in it before its watch was added is not lost), and
 * a file with content in it as written too. With self, path itself is
 * reported as created once its watch is there, so that a client that saw
 * the event and then writes in the directory has its writes seen. */
static void add_tree(struct watcher *w, const char *path, bool announce, bool self, int depth)
{
	int wd = add_dir(w, path);
	if (self)
		emit(w, "created", path, NULL, true);
	if (wd == -ENOENT || wd == -ENOTDIR)
		return; /* gone already: its removal or rename follows */
	if (wd < 0) {
		w->dropped = true; /* events under it will be missing: say so */
		return;
	}
	if (depth >= MAX_DEPTH)
		return;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		bool dir = e->d_type == DT_DIR;
		struct stat st;
		bool looked = (e->d_type == DT_UNKNOWN || (announce && e->d_type == DT_REG)) &&
			      fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0;
		if (e->d_type == DT_UNKNOWN)
			dir = looked && S_ISDIR(st.st_mode);
		cleanup_free char *p = join(path, e->d_name);
		if (!p)
			continue;
		if (announce && !dir)
			emit(w, "created", p, NULL, false);
		/* written before its directory's watch was added: its close
		 * came before the watch, its content is there */
		if (announce && looked && S_ISREG(st.st_mode) && st.st_size > 0)
			emit(w, "written", p, NULL, false);
		if (dir)
			add_tree(w, p, announce, announce, depth + 1);
	}
	closedir(d);
}

static bool under(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	return !strncmp(p, dir, n) && (p[n] == '/' || p[n] == 0);
}

/* A directory moved within the watch: its followed paths renamed. */
static void moved_dirs(struct watcher *w, const char *from, const char *to)
{
	size_t n = strlen(from);
	for (size_t i = 0; i < w->ndirs; i++) {
		if (!w->dirs[i] || !under(w->dirs[i], from))
			continue;
		char *p = NULL;
		if (asprintf(&p, "%s%s", to, w->dirs[i] + n) < 0)
			continue;
		free(w->dirs[i]);
		w->dirs[i] = p;
	}
}

static bool followed(const struct watcher *w, const char *path)
{
	for (size_t i = 0; i < w->ndirs; i++)
		if (w->dirs[i] && !strcmp(w->dirs[i], path))
			return true;
	return false;
}

/* A directory moved out of the watch: no longer followed. */
static void dropped_dirs(struct watcher *w, const char *from)
{
	for (size_t i = 0; i < w->ndirs; i++)
		if (w->dirs[i] && under(w->dirs[i], from))
			inotify_rm_watch(w->ifd, (int)i); /* its IN_IGNORED frees it */
}

/* The held first half of a rename had no second: moved out. */
static void unpair(struct watcher *w)
{
	if (!w->held)
		return;
	emit(w, "removed", w->held, NULL, w->held_dir);
	if (w->held_dir)
		dropped_dirs(w, w->held);
	free(w->held);
	w->held = NULL;
}

static void one(struct watcher *w, const struct inotify_event *ev)
{
	if (ev->mask & IN_Q_OVERFLOW) {
		unpair(w);
		w->dropped = true;
		return;
	}
	if (ev->wd < 0 || (size_t)ev->wd >= w->ndirs || !w->dirs[ev->wd])
		return;
	if (ev->mask & IN_IGNORED) {
		if (ev->wd == 1)
			w->root_gone = true;
		free(w->dirs[ev->wd]);
		w->dirs[ev->wd] = NULL;
		w->live--;
		return;
	}
	const char *dir = w->dirs[ev->wd];
	bool isdir = ev->mask & IN_ISDIR;
	if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
		if (ev->wd == 1) { /* the root itself: nothing left to watch */
			emit(w, "removed", dir, NULL, true);
			inotify_rm_watch(w->ifd, 1);
		}
		return;
	}
	if (!ev->len)
		return;
	cleanup_free char *p = join(dir, ev->name);
	if (!p)
		return;
	if (!(ev->mask & IN_MOVED_TO) || ev->cookie != w->cookie)
		unpair(w);
	if (ev->mask & IN_CREATE) {
		if (isdir && w->recursive)
			add_tree(w, p, true, true, 0);
		else
			emit(w, "created", p, NULL, isdir);
	} else if (ev->mask & IN_CLOSE_WRITE) {
		emit(w, "written", p, NULL, false);
	} else if (ev->mask & IN_DELETE) {
		emit(w, "removed", p, NULL, isdir);
	} else if (ev->mask & IN_ATTRIB) {
		emit(w, "attributes", p, NULL, isdir);
	} else if (ev->mask & IN_MOVED_FROM) {
		w->held = ab_steal_pointer(&p);
		w->held_dir = isdir;
		w->cookie = ev->cookie;
	} else if (ev->mask & IN_MOVED_TO) {
		if (w->held) { /* both halves: a rename within the watch */
			emit(w, "renamed", p, w->held, isdir);
			if (isdir)
				moved_dirs(w, w->held, p);
			if (isdir && w->recursive && !followed(w, p))
				add_tree(w, p, true, false,
					 0); /* moved before its watch was added */
			free(w->held);
			w->held = NULL;
		} else if (isdir && w->recursive) { /* moved in from outside */
			add_tree(w, p, true, true, 0);
		} else {
			emit(w, "created", p, NULL, isdir);
		}
	}
}

/* What inotify has; false when it has nothing now. */
static bool take(struct watcher *w)
{
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n = read(w->ifd, buf, sizeof(buf));
	if (n <= 0)
		return false;
	for (char *p = buf; p < buf + n;) {
		const struct inotify_event *ev = (const struct inotify_event *)p;
		one(w, ev);
		p += sizeof(*ev) + ev->len;
	}
	return true;
}

static void watcher_free(struct watcher *w)
{
	for (size_t i = 0; i < w->ndirs; i++)
		free(w->dirs[i]);
	free(w->dirs);
	free(w->q);
	free(w->held);
	if (w->ifd >= 0)
		close(w->ifd);
}

/* An error line, the watch's last. */
static int fail(struct watcher *w, enum ab_errc code, const char *path, const char *why)
{
	char msg[4400];
	snprintf(msg, sizeof(msg), "watch %s: %s", path, why);
	json_object *er = json_object_new_object();
	json_object_object_add(er, "code", json_object_new_string(ab_errc_name(code)));
	size_t tl = 0;
	char *t = utf8_lossy(msg, strlen(msg), &tl);
	json_object_object_add(er, "message", json_object_new_string_len(t ? t : "", (int)tl));
	free(t);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "error", er);
	size_t n;
	const char *s = json_object_to_json_string_length(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
	w->dropped = false;
	put_line(w, s, n);
	json_object_put(o);
	int fl = fcntl(w->out, F_GETFL);
	fcntl(w->out, F_SETFL, fl & ~O_NONBLOCK);
	flush(w);
	return 1;
}

static enum ab_errc errc_of(int e)
{
	return e == ENOENT    ? AB_ERRC_FILE_NOT_FOUND
	       : e == ENOTDIR ? AB_ERRC_NOT_DIRECTORY
	       : e == EACCES  ? AB_ERRC_PERMISSION_DENIED
			      : AB_ERRC_INTERNAL;
}

int watch_run(const char *root, bool recursive, int out)
{
	struct watcher w = {.ifd = -1, .out = out, .recursive = recursive};
	int r = 0;
	if (!(w.q = malloc(WATCH_QUEUE_MAX)))
		return 1;
	int fl = fcntl(out, F_GETFL);
	fcntl(out, F_SETFL, fl | O_NONBLOCK); /* the queue, not the pipe, is the bound */
	w.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w.ifd < 0) {
		char why[200];
		snprintf(why, sizeof(why), "cannot make an inotify instance: %s", strerror(errno));
		r = fail(&w, AB_ERRC_INTERNAL, root, why);
		goto out;
	}
	struct stat st;
	int e = lstat(root, &st) < 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : 0;
	if (e) {
		char why[200];
		snprintf(why, sizeof(why), "%s in the sandbox", strerror(e));
		r = fail(&w, errc_of(e), root, why);
		goto out;
	}
	int wd = add_dir(&w, root);
	if (wd != 1) { /* the root's is the instance's first */
		r = fail(&w, errc_of(-wd), root, strerror(wd < 0 ? -wd : EEXIST));
		goto out;
	}
	if (recursive) {
		free(w.dirs[1]);
		w.dirs[1] = NULL;
		w.live--;
		add_tree(&w, root, false, false, 0);
	}
	emit(&w, "ready", root, NULL, true);
	while (!w.gone && !w.root_gone) {
		flush(&w);
		/* a full queue reads no more: inotify's own queue, then its
		 * overflow, which is reported, hold the rest */
		struct pollfd p[2] = {
			{.fd = w.qlen < WATCH_QUEUE_MAX / 2 ? w.ifd : -1, .events = POLLIN},
			{.fd = w.out, .events = w.qlen ? POLLOUT : 0}};
		int wait = w.held ? PAIR_WAIT_MS : -1;
		int n = poll(p, 2, wait);
		if (n < 0 && errno != EINTR)
			break;
		if (n == 0) /* the rename's second half did not come */
			unpair(&w);
		if (p[1].revents & (POLLERR | POLLHUP))
			w.gone = true;
		if (p[0].revents & POLLIN)
			while (take(&w) && w.qlen < WATCH_QUEUE_MAX / 2)
				;
		if (w.dropped && w.qlen + 64 <= WATCH_QUEUE_MAX)
			put_overflow(&w);
	}
	unpair(&w);
	if (w.root_gone && !w.gone)
		r = fail(&w, AB_ERRC_FILE_NOT_FOUND, root, "it was removed or moved away");
out:
	watcher_free(&w);
	return r;
}
