/* Created protected paths put out of effect (protect_quarantine.h). What
 * the command wrote is hostile and may still be written by a command that
 * runs at the same time: each path is reached one O_NOFOLLOW component at
 * a time (protect_walk), judged through an fd opened without following and
 * never blocking, type-checked after open, read within a bound, and
 * renamed aside within the directory fd it was found in (so a swapped
 * parent cannot redirect the rename), under a new name (RENAME_NOREPLACE).
 * The same directory keeps it on the same file system and out of reach of
 * anything that reads the original name: git reads .git/config, never
 * .git/config.agentbox-quarantine-*. A race that writes the path again
 * after the check is caught by the check after that command. */
#include "layer/protect_quarantine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

#define CONFIG_MAX (64 * 1024)

enum kind { KIND_CONFIG, KIND_MODULES, KIND_HOOKS, KIND_OTHER };

static enum kind kind_of(const char *rel)
{
	if (strcmp(rel, ".git/config") == 0 || strcmp(rel, ".git/config.worktree") == 0)
		return KIND_CONFIG;
	if (strcmp(rel, ".gitmodules") == 0)
		return KIND_MODULES;
	if (strcmp(rel, ".git/hooks") == 0)
		return KIND_HOOKS;
	return KIND_OTHER;
}

/* A git config file: safe when protect_gitconfig_safe says so. */
static bool config_safe(int fd, const struct stat *st, bool modules, char *why, size_t len)
{
	if (!S_ISREG(st->st_mode))
		return snprintf(why, len, "is not a regular file"), false;
	if (st->st_size > CONFIG_MAX)
		return snprintf(why, len, "is over %d KiB", CONFIG_MAX / 1024), false;
	cleanup_free char *buf = malloc(CONFIG_MAX + 1);
	if (!buf)
		return snprintf(why, len, "could not be read: out of memory"), false;
	size_t n = 0;
	ssize_t r;
	while (n <= CONFIG_MAX && (r = read(fd, buf + n, CONFIG_MAX + 1 - n)) > 0)
		n += (size_t)r;
	if (n > CONFIG_MAX)
		return snprintf(why, len, "is over %d KiB", CONFIG_MAX / 1024), false;
	return protect_gitconfig_safe(buf, n, modules, why, len);
}

/* Why the path name in w->dir may not stay, or NULL when it may. */
static const char *judge(const char *rel, const struct protect_walk *w, char *why, size_t len)
{
	if (S_ISLNK(w->st.st_mode))
		return "is a symbolic link";
	enum kind k = kind_of(rel);
	if (k == KIND_OTHER)
		return "the host may run or load";
	int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	int fd = openat(w->dir, w->name, flags | (k == KIND_HOOKS ? O_DIRECTORY : 0));
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		snprintf(why, len, "is not a %s", k == KIND_HOOKS ? "directory" : "regular file");
		return why;
	}
	if (k == KIND_HOOKS) {
		char first[256] = "";
		if (protect_hooks_samples_only(fd, first, sizeof(first))) /* closes fd */
			return NULL;
		snprintf(why, len, "holds more than git's sample hooks: %.200s", first);
		return why;
	}
	bool safe = config_safe(fd, &st, k == KIND_MODULES, why, len);
	close(fd);
	return safe ? NULL : why;
}

/* The ancestor w stopped at, when it is no directory now: a `.git` file or
 * symlink points git at a repository elsewhere. */
static const char *judge_parent(const char *rel, const struct protect_walk *w)
{
	bool git = w->len == 4 && strncmp(rel, ".git", 4) == 0;
	if (S_ISLNK(w->st.st_mode))
		return git ? "is a symbolic link: the host's git would use the repository it "
			     "points to"
			   : "is a symbolic link";
	return git ? "is a file: its gitdir line would point the host's git to another "
		     "repository"
		   : "is not a directory";
}

/* A command may leave the directory without write permission (`chmod
 * a-w .git`) so that the rename fails: when it is ours, chmod u+wx it
 * through its fd's magic link (which chmod follows to that very inode; an
 * O_PATH fd has no fchmod), rename, and put the mode back. */
static int move_aside_once(int dir, const char *name, char *to, size_t len);

static int move_aside(int dir, const char *name, char *to, size_t len)
{
	int r = move_aside_once(dir, name, to, len);
	struct stat st;
	if ((r != -EACCES && r != -EPERM) || fstat(dir, &st) < 0 || st.st_uid != geteuid() ||
	    !S_ISDIR(st.st_mode))
		return r;
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", dir);
	if (chmod(self, (st.st_mode & 07777) | S_IWUSR | S_IXUSR) < 0)
		return r;
	r = move_aside_once(dir, name, to, len);
	chmod(self, st.st_mode & 07777);
	return r;
}

/* Rename name in dir to name.agentbox-quarantine-STAMP[-N], new. */
static int move_aside_once(int dir, const char *name, char *to, size_t len)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", gmtime_r(&now, &tm));
	for (int i = 1; i <= 20; i++) {
		char suffix[8] = "";
		if (i > 1)
			snprintf(suffix, sizeof(suffix), "-%d", i);
		if (snprintf(to, len, "%s" PROTECT_QUARANTINE_SUFFIX "%s%s", name, stamp, suffix) >=
		    (int)len)
			return -ENAMETOOLONG;
		if (renameat2(dir, name, dir, to, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno == EINVAL || errno == ENOSYS) {
			/* a file system without RENAME_NOREPLACE: the name is
			 * fresh (a stamp of now), checked just before */
			struct stat st;
			if (fstatat(dir, to, &st, AT_SYMLINK_NOFOLLOW) == 0)
				continue;
			if (renameat(dir, name, dir, to) == 0)
				return 0;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

static int add(struct ab_quarantined **out, size_t *n, const char *rel, size_t rel_len,
	       const char *reason, const char *moved, int error)
{
	struct ab_quarantined *grown = realloc(*out, (*n + 1) * sizeof(**out));
	if (!grown)
		return -ENOMEM;
	*out = grown;
	struct ab_quarantined *q = &grown[*n];
	memset(q, 0, sizeof(*q));
	q->path = strndup(rel, rel_len);
	q->reason = strdup(reason);
	if (moved) {
		const char *slash = memrchr(rel, '/', rel_len);
		int dir = slash ? (int)(slash - rel) + 1 : 0;
		if (asprintf(&q->moved_to, "%.*s%s", dir, rel, moved) < 0)
			q->moved_to = NULL;
	} else if (asprintf(&q->error, "%s", strerror(-error)) < 0) {
		q->error = NULL;
	}
	(*n)++;
	if (!q->path || !q->reason || (moved ? !q->moved_to : !q->error))
		return -ENOMEM;
	return 0;
}

int protect_quarantine(const struct ab_config *cfg, const struct protect_state *start,
		       struct ab_quarantined **out, size_t *n, char ***kept)
{
	size_t n_kept = 0;
	*kept = NULL;
	if (cfg->protect_created != AB_PROTECT_CREATED_QUARANTINE || start->n == 0)
		return 0;
	cleanup_fd int ws = open(cfg->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ws < 0)
		return 0;
	for (size_t i = 0; i < start->n; i++) {
		const struct protect_entry *e = &start->e[i];
		if (e->exists)
			continue; /* bound read-only in the sandbox, or reached by a symlink */
		/* most are simply not there: one syscall (a .git file or
		 * symlink on the way answers ENOTDIR, or the path it leads to) */
		struct stat there;
		if (fstatat(ws, e->rel, &there, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
			continue;
		struct protect_walk w;
		int walked = protect_walk(ws, e->rel, &w);
		if (walked == -EACCES) {
			/* a parent the command made unsearchable: the host's git
			 * cannot read it either, but say so */
			if (add(out, n, e->rel, strlen(e->rel), "could not be looked at", NULL,
				walked) < 0)
				return -ENOMEM;
			continue;
		}
		if (walked < 0)
			continue; /* not there */
		cleanup_fd int dir = w.dir;
		char why[256];
		const char *reason;
		if (w.odd && w.len < strlen(e->rel)) {
			if (w.len == e->odd_len && w.st.st_dev == e->odd_dev &&
			    w.st.st_ino == e->odd_ino)
				continue; /* there at the start: a worktree's .git */
			reason = judge_parent(e->rel, &w);
		} else if (!(reason = judge(e->rel, &w, why, sizeof(why)))) {
			(void)ab_strv_push(kept, &n_kept, e->rel);
			continue;
		}
		char to[256 + sizeof(PROTECT_QUARANTINE_SUFFIX) + 32];
		int r = move_aside(dir, w.name, to, sizeof(to));
		if (add(out, n, e->rel, w.len, reason, r == 0 ? to : NULL, r) < 0)
			return -ENOMEM;
	}
	return 0;
}

void protect_quarantined_free(struct ab_quarantined *q, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(q[i].path);
		free(q[i].reason);
		free(q[i].moved_to);
		free(q[i].error);
	}
	free(q);
}
