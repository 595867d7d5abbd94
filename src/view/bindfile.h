/* A read-write --bind of a regular file whose destination lies on one of
 * the view's own tmpfs ($HOME, /tmp, a --tmpfs): not a mount point, which
 * rename(2) over it refuses with EBUSY (an atomic save), but a file of the
 * view seeded with the host file's content, and synced back when the
 * session ends (README.md, "Bound files").
 *
 *   bindfile_plan        launcher: which binds are copies; their seeds read
 *   bindfile_seed        inside, while the view is built: the seed written
 *   bindfile_write_back  launcher: the sandbox's content onto the host file,
 *                        atomically, or beside it when the host changed it */
#ifndef AB_BINDFILE_H
#define AB_BINDFILE_H

#include <stddef.h>

#include "util/error.h"
#include "view/mount.h"

/* The most a bound file may hold to be copied in, and synced back. */
#define BINDFILE_MAX (64u << 20)

/* Launcher, once every mount is planned: mark the copies and read each
 * source (no symlink followed, a regular file of at most BINDFILE_MAX
 * bytes) into e->seed. */
int bindfile_plan(struct view_plan *plan, struct ab_error *err);

/* Whether the plan has such a file (then `agentbox run` keeps its init
 * alive past the command, as a session of many does, to read it back). */
bool view_plan_has_copies(const struct view_plan *plan);

/* Sandbox, in view_build: write e's seed into target (the file made at its
 * destination), with the source's permission bits. */
int bindfile_seed(int target, const struct view_entry *e, struct ab_error *err);

/* Launcher: data (what the sandbox has at e->dst) onto e->src. Nothing when
 * it equals the seed; the host file replaced atomically (a temporary file
 * beside it, renamed over it, its mode kept) when the host's is still the
 * seed; otherwise written to e->src.agentbox-conflict and the host file
 * left alone. *note: what was done, for the caller to say (empty when
 * nothing was). 0 or -errno with err filled. */
int bindfile_write_back(const struct view_entry *e, const char *data, size_t len, char *note,
			size_t note_size, struct ab_error *err);

#endif
