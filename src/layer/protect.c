#include "layer/protect.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/error.h"
#include "util/util.h"

/* .git/commondir and .git/config.worktree point git at another config (a
 * commondir's, or one extensions.worktreeConfig loads) */
const char *const protect_default_paths[] = {
	".git/hooks",  ".git/config", ".git/commondir", ".git/config.worktree",
	".gitmodules", ".bashrc",     ".bash_profile",	".profile",
	".zshrc",      ".envrc",      ".mcp.json",	".vscode",
	".idea",       NULL,
};

static int open_beneath_walk(int dir, const char *rel)
{
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	cleanup_fd int cur = fcntl(dir, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return -errno;
	char *save = NULL;
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, "..") == 0)
			return -EXDEV;
		int fd = openat(cur, c, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		struct stat st;
		if (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode)) {
			close(fd);
			return -ELOOP;
		}
		close(cur);
		cur = fd;
	}
	return ab_steal_fd(&cur);
}

/* Open rel beneath dir following no symlink at all: openat2 where the
 * kernel has it (5.6), else one O_NOFOLLOW component at a time. Tests force
 * the fallback with AGENTBOX_TEST_NO_OPENAT2. */
int ab_open_beneath(int dir, const char *rel)
{
	static bool no_openat2;
	if (!no_openat2 && !getenv("AGENTBOX_TEST_NO_OPENAT2")) {
		struct open_how how = {
			.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};
		int fd = (int)syscall(SYS_openat2, dir, rel, &how, sizeof(how));
		if (fd >= 0)
			return fd;
		if (errno != ENOSYS && errno != EPERM)
			return -errno;
		no_openat2 = true; /* older kernel, or a filter that refuses it */
	}
	return open_beneath_walk(dir, rel);
}

int protect_walk(int ws, const char *rel, struct protect_walk *w)
{
	char buf[4096];
	memset(w, 0, sizeof(*w));
	w->dir = -1;
	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	cleanup_fd int cur = -1; /* the directory below ws reached so far, or ws */
	char *save = NULL;
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, "..") == 0 || strcmp(c, ".") == 0 || strlen(c) >= sizeof(w->name))
			return -EXDEV;
		int at = cur >= 0 ? cur : ws;
		cleanup_fd int fd = openat(at, c, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0)
			return -errno;
		bool last = !save || !*save;
		if (last || S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
			if (cur < 0 && (cur = fcntl(ws, F_DUPFD_CLOEXEC, 3)) < 0)
				return -errno;
			snprintf(w->name, sizeof(w->name), "%s", c);
			w->len = (size_t)(c - buf) + strlen(c);
			w->st = st;
			w->odd = S_ISLNK(st.st_mode) || !last;
			w->dir = ab_steal_fd(&cur);
			return 0;
		}
		if (cur >= 0)
			close(cur);
		cur = ab_steal_fd(&fd);
	}
	return -ENOENT;
}

/* A first component a walk of one scan found odd (a worktree's .git file,
 * a symlink): every path below it stops there, so it is walked once. */
struct probe_memo {
	char first[256]; /* "" until found */
	struct protect_entry odd;
};

static void entry_probe(int ws, struct protect_entry *e, struct probe_memo *memo)
{
	e->exists = e->bindable = false;
	e->odd_len = 0;
	struct stat st;
	if (fstatat(ws, e->rel, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		/* the walk looks for a symlink or a file on the way: a name
		 * of one component that is not there has no way (the walk's
		 * O_NOFOLLOW open of it would fail as the lstat did) */
		const char *slash = strchr(e->rel, '/');
		if (errno == ENOENT && !slash)
			return;
		/* the walk opens the first component without following it and
		 * stops there when it is a symlink or no directory: the same
		 * stop for every path through it */
		size_t first = slash ? (size_t)(slash - e->rel) : 0;
		if (first && first == strlen(memo->first) &&
		    strncmp(e->rel, memo->first, first) == 0) {
			e->odd_len = memo->odd.odd_len;
			e->odd_dev = memo->odd.odd_dev;
			e->odd_ino = memo->odd.odd_ino;
			return;
		}
		struct protect_walk w;
		if (protect_walk(ws, e->rel, &w) == 0 && w.odd) {
			e->odd_len = w.len;
			e->odd_dev = w.st.st_dev;
			e->odd_ino = w.st.st_ino;
			if (first && w.len == first && first < sizeof(memo->first)) {
				memcpy(memo->first, e->rel, first);
				memo->first[first] = '\0';
				memo->odd = *e;
			}
		}
		if (w.dir >= 0)
			close(w.dir);
		return;
	}
	e->exists = true;
	e->mode = st.st_mode;
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	int fd = ab_open_beneath(ws, e->rel);
	if (fd < 0)
		return; /* reached through a symlink: watched, not bound */
	struct stat real;
	if (fstat(fd, &real) == 0 && real.st_dev == st.st_dev && real.st_ino == st.st_ino &&
	    (S_ISDIR(real.st_mode) || S_ISREG(real.st_mode)))
		e->bindable = true;
	close(fd);
}

int protect_scan(const struct ab_config *cfg, struct protect_state *st, struct ab_error *err)
{
	memset(st, 0, sizeof(*st));
	if (cfg->n_protect == 0)
		return 0;
	cleanup_fd int ws = open(cfg->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ws < 0)
		return ab_error_set(err, errno, "cannot open the workspace '%s'", cfg->workspace);
	st->e = calloc(cfg->n_protect, sizeof(*st->e));
	if (!st->e)
		return ab_error_set(err, ENOMEM, "scanning protected paths");
	st->n = cfg->n_protect;
	struct probe_memo memo = {.first = ""};
	for (size_t i = 0; i < st->n; i++) {
		st->e[i].rel = cfg->protect[i];
		entry_probe(ws, &st->e[i], &memo);
	}
	return 0;
}

char **protect_changes(const struct ab_config *cfg, const struct protect_state *before)
{
	cleanup_fd int ws = open(cfg->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ws < 0 || before->n == 0)
		return NULL;
	char **out = NULL;
	size_t n = 0;
	struct probe_memo memo = {.first = ""};
	for (size_t i = 0; i < before->n; i++) {
		struct protect_entry now = {.rel = before->e[i].rel};
		entry_probe(ws, &now, &memo);
		const struct protect_entry *b = &before->e[i];
		if (now.exists == b->exists &&
		    (!now.exists || (now.dev == b->dev && now.ino == b->ino &&
				     (now.mode & S_IFMT) == (b->mode & S_IFMT))))
			continue;
		if (ab_strv_push(&out, &n, now.rel) < 0)
			break;
	}
	return out;
}

/* The command wrote these: found without following a symlink (an O_PATH
 * fd, reopened through its magic link, which names that very inode), never
 * blocking, type-checked after open, bounded in size and entries. */
static int reopen(int path_fd, int flags)
{
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", path_fd);
	return open(self, flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
}

/* A .git/config as `git init` writes it: [core] with its usual keys only
 * (core.fsmonitor, core.hooksPath, an alias would run on the host). */
static bool git_init_config(int fd)
{
	char buf[1024];
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size >= (off_t)sizeof(buf))
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n != st.st_size)
		return false;
	buf[n] = '\0';
	static const char *const keys[] = {
		"repositoryformatversion", "filemode", "bare", "logallrefupdates", "ignorecase",
		"precomposeunicode",	   "symlinks", NULL};
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (strcmp(line, "[core]") == 0)
			continue;
		size_t k = 0;
		while (isalpha((unsigned char)line[k]))
			k++;
		bool known = false;
		for (size_t i = 0; keys[i] && !known; i++)
			known = strlen(keys[i]) == k && strncmp(line, keys[i], k) == 0;
		if (!known || strncmp(line + k, " = ", 3) != 0)
			return false;
		for (const char *v = line + k + 3; *v; v++)
			if (!isalnum((unsigned char)*v))
				return false;
	}
	return true;
}

/* A .git/hooks of `git init`: at most a few dozen regular *.sample files. */
bool protect_hooks_samples_only(int fd, char *first, size_t len)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	bool ok = true;
	int n = 0;
	struct dirent *de;
	while (ok && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		size_t l = strlen(de->d_name);
		ok = ++n <= 64 && de->d_type == DT_REG && l > 7 &&
		     strcmp(de->d_name + l - 7, ".sample") == 0;
		if (!ok && first)
			snprintf(first, len, "%s", n > 64 ? "more than 64 entries" : de->d_name);
	}
	closedir(d);
	return ok;
}

static bool as_git_init_made_it(int ws, const char *rel)
{
	bool config = strcmp(rel, ".git/config") == 0;
	if (!config && strcmp(rel, ".git/hooks") != 0)
		return false;
	cleanup_fd int path_fd = ab_open_beneath(ws, rel);
	if (path_fd < 0)
		return false;
	int fd = reopen(path_fd, config ? O_RDONLY : O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return false;
	if (!config)
		return protect_hooks_samples_only(fd, NULL, 0); /* closes fd */
	bool ok = git_init_config(fd);
	close(fd);
	return ok;
}

char **protect_created(const struct ab_config *cfg, const struct protect_state *before,
		       char *const *changed)
{
	cleanup_fd int ws = open(cfg->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ws < 0)
		return NULL;
	char **out = NULL;
	size_t n = 0;
	for (size_t i = 0; i < before->n; i++) {
		bool listed = false;
		for (char *const *p = changed; p && *p && !listed; p++)
			listed = strcmp(*p, before->e[i].rel) == 0;
		if (!listed || before->e[i].exists || !as_git_init_made_it(ws, before->e[i].rel))
			continue;
		if (ab_strv_push(&out, &n, before->e[i].rel) < 0)
			break;
	}
	return out;
}

char **protect_created_layer(const char *workspace, const char *layer_dir, char *const *changed)
{
	char upper[PATH_MAX];
	if (snprintf(upper, sizeof(upper), "%s/upper", layer_dir) >= (int)sizeof(upper))
		return NULL;
	cleanup_fd int ws = open(workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cleanup_fd int up = open(upper, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ws < 0 || up < 0)
		return NULL;
	char **out = NULL;
	size_t n = 0;
	for (char *const *p = changed; p && *p; p++) {
		/* absent from the host workspace, the layer's lower */
		int fd = ab_open_beneath(ws, *p);
		if (fd >= 0)
			close(fd);
		if (fd != -ENOENT || !as_git_init_made_it(up, *p))
			continue;
		if (ab_strv_push(&out, &n, *p) < 0)
			break;
	}
	return out;
}

void protect_state_free(struct protect_state *st)
{
	free(st->e);
	memset(st, 0, sizeof(*st));
}
