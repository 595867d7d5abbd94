/* The image cache's directory, trusted only when no one but its owner can
 * change it (cache_dir.h). Every component is opened O_PATH|O_NOFOLLOW from
 * the one before it and judged on what fstat says of the opened one. A
 * symbolic link on the way (/home -> /var/home) is followed only from a
 * directory no one else can write and when it is the caller's or root's:
 * then only they could have made it point elsewhere. ".." and links start
 * the walk again from / with the path rewritten, so the path that comes
 * out names directories only, each of them judged. */
#include "image/cache_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/util.h"

#define MAX_HOPS 40 /* links and ".." followed, as the kernel's MAXSYMLINKS */

static const char *owner_name(uid_t uid, char *buf, size_t n)
{
	struct passwd *pw = getpwuid(uid);
	if (pw)
		snprintf(buf, n, "%s (uid %u)", pw->pw_name, (unsigned)uid);
	else
		snprintf(buf, n, "uid %u", (unsigned)uid);
	return buf;
}

/* Whether the directory st, at path, may be (on_way: hold) the cache. */
static int judge(const struct stat *st, const char *path, const char *cache, bool on_way,
		 struct ab_error *err)
{
	uid_t me = geteuid();
	char who[300], where[2 * PATH_MAX + 64];
	if (on_way)
		snprintf(where, sizeof(where), "the image cache %s lies in %s, which", cache, path);
	else
		snprintf(where, sizeof(where), "the image cache%s %s",
			 strcmp(path, cache) ? "'s directory" : "", path);
	if (!S_ISDIR(st->st_mode))
		return ab_error_plain(err, ENOTDIR, "%s is not a directory", where);
	if (st->st_uid != me && st->st_uid != 0)
		return ab_error_plain(err, EPERM,
				      "%s is owned by %s, not by you (uid %u) or root: that user "
				      "could change what your sandboxes run; use a directory you "
				      "own (AGENTBOX_IMAGE_CACHE=DIR)",
				      where, owner_name(st->st_uid, who, sizeof(who)),
				      (unsigned)me);
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(on_way && (st->st_mode & S_ISVTX)))
		return ab_error_plain(err, EPERM,
				      "%s is writable by %s (mode %04o, owner %s): they could "
				      "change what your sandboxes run; chmod go-w %s, or use a "
				      "directory only you can write (AGENTBOX_IMAGE_CACHE=DIR)",
				      where, st->st_mode & S_IWOTH ? "others" : "its group",
				      (unsigned)(st->st_mode & 07777),
				      owner_name(st->st_uid, who, sizeof(who)), path);
	return 0;
}

/* Whether rest names no directory further: only "/" and "." in it. */
static bool only_dots(const char *rest)
{
	for (rest += strspn(rest, "/"); *rest; rest += strspn(rest, "/")) {
		size_t cl = strcspn(rest, "/");
		if (cl != 1 || rest[0] != '.')
			return false;
		rest += cl;
	}
	return true;
}

/* todo = head + "/" + tail (tail may be empty or start with '/'). */
static int rewrite(char *todo, size_t n, const char *head, const char *tail)
{
	char next[PATH_MAX];
	int len = snprintf(next, sizeof(next), "%s/%s", head, tail);
	if (len < 0 || (size_t)len >= sizeof(next) || (size_t)len >= n)
		return -ENAMETOOLONG;
	memcpy(todo, next, (size_t)len + 1);
	return 0;
}

/* One pass from / over todo: the cache's fd, 0 when todo was rewritten
 * (a link or ".." met: walk again), or -errno with err set. */
static int walk_once(char *todo, size_t n, const char *cache, char *done, struct ab_error *err)
{
	uid_t me = geteuid();
	cleanup_fd int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat pst, st;
	if (fd < 0 || fstat(fd, &pst) < 0)
		return ab_error_set(err, errno, "cannot open /");
	int r = judge(&pst, "/", cache, true, err);
	if (r < 0)
		return r;
	done[0] = '\0';
	for (const char *rest = todo;;) {
		rest += strspn(rest, "/");
		size_t cl = strcspn(rest, "/");
		if (cl == 0)
			break;
		char comp[NAME_MAX + 1];
		if (cl > NAME_MAX)
			return ab_error_set(err, ENAMETOOLONG, "the image cache %s", cache);
		memcpy(comp, rest, cl);
		comp[cl] = '\0';
		rest += cl;
		bool last = only_dots(rest);
		if (strcmp(comp, ".") == 0)
			continue;
		size_t dl = strlen(done);
		if (strcmp(comp, "..") == 0) {
			*(strrchr(done, '/') ?: done) = '\0'; /* done names directories only */
			r = rewrite(todo, n, done, rest);
			return r < 0 ? ab_error_set(err, -r, "the image cache %s", cache) : 0;
		}
		if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT || (mkdirat(fd, comp, 0700) < 0 && errno != EEXIST) ||
			    fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0)
				return ab_error_set(err, errno, "cannot create the image cache %s",
						    cache);
		}
		if (dl + cl + 2 > PATH_MAX)
			return ab_error_set(err, ENAMETOOLONG, "the image cache %s", cache);
		snprintf(done + dl, PATH_MAX - dl, "/%s", comp);
		if (S_ISLNK(st.st_mode)) {
			if ((pst.st_mode & (S_IWGRP | S_IWOTH)) ||
			    (st.st_uid != me && st.st_uid != 0))
				return ab_error_plain(
					err, ELOOP,
					"the image cache %s: %s is a symbolic link in "
					"a directory others can write, or not yours: "
					"name the cache by its real path "
					"(AGENTBOX_IMAGE_CACHE=DIR)",
					cache, done);
			char target[PATH_MAX];
			ssize_t tl = readlinkat(fd, comp, target, sizeof(target) - 1);
			if (tl <= 0)
				return ab_error_set(err, tl < 0 ? errno : ENOENT, "cannot read %s",
						    done);
			target[tl] = '\0';
			done[dl] = '\0';
			char head[PATH_MAX + 2];
			snprintf(head, sizeof(head), "%s/%s", target[0] == '/' ? "" : done, target);
			r = rewrite(todo, n, head, rest);
			return r < 0 ? ab_error_set(err, -r, "the image cache %s", cache) : 0;
		}
		int next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0)
			return ab_error_set(err, errno, "the image cache %s: cannot open %s", cache,
					    done);
		close(fd);
		fd = next;
		if (fstat(fd, &st) < 0)
			return ab_error_set(err, errno, "cannot stat %s", done);
		if ((r = judge(&st, done, last ? done : cache, !last, err)) < 0)
			return r;
		pst = st;
	}
	if (!done[0])
		return ab_error_plain(err, EINVAL, "the image cache %s: / cannot be it", cache);
	/* judged again as the cache itself: a trailing "." made the last
	 * directory look like one on the way */
	if (fstat(fd, &st) < 0)
		return ab_error_set(err, errno, "cannot stat %s", done);
	if ((r = judge(&st, done, done, false, err)) < 0)
		return r;
	return ab_steal_fd(&fd);
}

static int cache_path(char *buf, size_t n, struct ab_error *err)
{
	const char *own = getenv("AGENTBOX_IMAGE_CACHE");
	if (own && own[0] == '/')
		snprintf(buf, n, "%s", own);
	else if (ab_state_dir("images", buf, n) < 0)
		return ab_error_plain(err, ENOENT,
				      "--image: no home directory for the image cache; set "
				      "XDG_STATE_HOME");
	return 0;
}

int cache_dir_open(char *buf, size_t n, struct ab_error *err)
{
	char cache[PATH_MAX], todo[PATH_MAX], done[PATH_MAX];
	int r = cache_path(cache, sizeof(cache), err);
	if (r < 0)
		return r;
	snprintf(todo, sizeof(todo), "%s", cache);
	int fd = 0;
	for (int hops = 0; fd == 0; hops++) {
		if (hops > MAX_HOPS)
			return ab_error_plain(err, ELOOP,
					      "the image cache %s: more than %d links or '..' on "
					      "the way",
					      cache, MAX_HOPS);
		fd = walk_once(todo, sizeof(todo), cache, done, err);
	}
	if (fd < 0)
		return fd;
	cleanup_fd int base = fd;
	if (strlen(done) >= n)
		return ab_error_set(err, ENAMETOOLONG, "the image cache %s", cache);
	const char *subs[] = {"layers", "images", "tmp", "empty"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(subs); i++) {
		char p[PATH_MAX + 16];
		snprintf(p, sizeof(p), "%s/%s", done, subs[i]);
		struct stat st;
		if (mkdirat(base, subs[i], 0755) < 0 && errno != EEXIST)
			return ab_error_set(err, errno, "cannot create the image cache %s", p);
		cleanup_fd int sub =
			openat(base, subs[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 || fstat(sub, &st) < 0)
			return ab_error_set(err, errno, "cannot open the image cache %s", p);
		if ((r = judge(&st, p, done, false, err)) < 0)
			return r;
	}
	snprintf(buf, n, "%s", done);
	return ab_steal_fd(&base);
}
