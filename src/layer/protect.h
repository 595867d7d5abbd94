/* Protected paths in the workspace: files the host user will later run or
 * load (.git/hooks, shell rc files, editor and agent configs). Those that
 * exist when the sandbox starts are bound read-only over themselves; those
 * that do not are left creatable, so `git init` in a fresh workspace works,
 * and every protected path the command created, removed or replaced is
 * reported after the run. No placeholder is ever left on the host. */
#ifndef AB_PROTECT_H
#define AB_PROTECT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"

struct protect_entry {
	const char *rel; /* relative to the workspace, from the config */
	bool exists;
	bool bindable; /* a real directory or regular file, reached without symlinks */
	mode_t mode;
	dev_t dev;
	ino_t ino;
	/* when it does not exist: the first parent that is there but is a
	 * symlink or no directory (a worktree's `.git` file), or odd_len 0 */
	size_t odd_len;
	dev_t odd_dev;
	ino_t odd_ino;
};

/* One walk down rel beneath a directory, following no symlink: where it
 * stops. */
struct protect_walk {
	int dir; /* the directory holding name (owned), or -1 */
	char name[256];
	size_t len;	/* of rel, up to and including name */
	struct stat st; /* of name, not followed */
	bool odd;	/* name is a symlink, or a parent that is no directory */
};

struct protect_state {
	struct protect_entry *e;
	size_t n;
};

/* Open rel beneath dir with O_PATH, following no symlink at all (openat2
 * RESOLVE_NO_SYMLINKS, or one O_NOFOLLOW component at a time): the fd, or
 * -errno (-ELOOP for a symlink on the way). */
int ab_open_beneath(int dir, const char *rel);

/* Walk rel beneath ws one O_NOFOLLOW component at a time, to the leaf or
 * to the first odd component: 0 with w filled (w->dir to close), or -errno
 * (-ENOENT: something on the way is missing). */
int protect_walk(int ws, const char *rel, struct protect_walk *w);
/* Whether the open directory fd holds only regular *.sample files, at most
 * a few dozen (what `git init` makes in .git/hooks); else the first other
 * name in first. Closes fd. */
bool protect_hooks_samples_only(int fd, char *first, size_t len);

/* The protected list a configuration starts with. */
extern const char *const protect_default_paths[];

/* Host side, before the sandbox exists: what each protected path is now. */
int protect_scan(const struct ab_config *cfg, struct protect_state *st, struct ab_error *err);
/* After the run: the paths that were created, removed or replaced, as a
 * NULL-terminated heap array (NULL when none). */
char **protect_changes(const struct ab_config *cfg, const struct protect_state *before);
/* Those of changed that did not exist in before and are as `git init`
 * makes them: a .git/config of [core] defaults, a .git/hooks of samples
 * (NULL-terminated heap array, NULL when none). Read as hostile files. */
char **protect_created(const struct ab_config *cfg, const struct protect_state *before,
		       char *const *changed);
/* The same for an overlay workspace: of the protected paths changed in the
 * layer DIR (layer_protected_changes), those the host workspace does not
 * have and that hold what git init makes. */
char **protect_created_layer(const char *workspace, const char *layer_dir, char *const *changed);
void protect_state_free(struct protect_state *st);

#endif
