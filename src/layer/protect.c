#include "layer/protect.h"

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

const char *const protect_default_paths[] = {
	".git/hooks", ".git/config", ".gitmodules", ".bashrc", ".bash_profile", ".profile",
	".zshrc",     ".envrc",	     ".mcp.json",   ".vscode", ".idea",		NULL,
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

static void entry_probe(int ws, struct protect_entry *e)
{
	e->exists = e->bindable = false;
	struct stat st;
	if (fstatat(ws, e->rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
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
	for (size_t i = 0; i < st->n; i++) {
		st->e[i].rel = cfg->protect[i];
		entry_probe(ws, &st->e[i]);
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
	for (size_t i = 0; i < before->n; i++) {
		struct protect_entry now = {.rel = before->e[i].rel};
		entry_probe(ws, &now);
		const struct protect_entry *b = &before->e[i];
		if (now.exists == b->exists &&
		    (!now.exists || (now.dev == b->dev && now.ino == b->ino &&
				     (now.mode & S_IFMT) == (b->mode & S_IFMT))))
			continue;
		char **grown = realloc(out, (n + 2) * sizeof(char *));
		if (!grown)
			break;
		out = grown;
		if (!(out[n] = strdup(now.rel)))
			break;
		out[++n] = NULL;
	}
	return out;
}

void protect_state_free(struct protect_state *st)
{
	free(st->e);
	memset(st, 0, sizeof(*st));
}
