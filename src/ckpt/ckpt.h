/* Checkpoints of a sandbox whose workspace is an overlay (docs/checkpoints.md).
 *
 * The layer directory (layer.h) holds a stack of uppers: DIR/upper (the
 * first), then DIR/uN with its work directory DIR/wN, one per switch.
 * A checkpoint makes the current upper read-only for good: a new overlay,
 * a fresh upper over the old stack, is mounted on top of /workspace
 * (ckpt_mount.c); the checkpoint is the list of layers it stands on. A
 * restore mounts a fresh upper over a checkpoint's list. No file data is
 * copied: the time is that of a mount, whatever the tree holds.
 *
 * DIR/ckpt.stack says what is where, replaced atomically (rename) once the
 * new overlay is in place:
 *   next N               the next layer's number
 *   top uN ... upper     the layers of /workspace now, its upper first
 *   ckpt NAME uK ... upper   a checkpoint's layers, in the order taken
 * A launcher killed mid-switch takes its sandbox with it (its init dies
 * with it) and `agentbox rm` removes DIR, every layer in it. */
#ifndef AB_CKPT_H
#define AB_CKPT_H

#include <json-c/json.h>
#include <stdbool.h>

#include "layer/layer.h"

/* overlayfs takes at most 500 lower layers; a stack this deep is refused */
#define CKPT_MAX_DEPTH 64
/* the mounts a sandbox's switches leave beneath /workspace */
#define CKPT_MAX_SWITCHES 256

/* The fields besides op and id an op of ours takes, or NULL when op is not
 * one (checkpoint, checkpoints, restore). */
const char *const *ckpt_op_fields(const char *op);
/* op switches /workspace: no command may run meanwhile. */
bool ckpt_op_switches(const char *op);
/* Answer op (or a changes with "since") on the session's layer l (NULL in
 * direct mode: refused, saying why): *reply gets the result's fields. */
int ckpt_session_op(struct ab_layer *l, const char *op, json_object *req, json_object **reply,
		    struct ab_error *err);
/* /workspace stands on a stack (a checkpoint was taken): the review of the
 * first upper alone (changes, commit) would not be the workspace's. */
bool ckpt_stacked(const struct ab_layer *l);
/* A "changes" request that asks for what changed after a checkpoint. */
bool ckpt_is_changes_since(const char *op, json_object *req);

/* ---- fork (ckpt_fork.c): new sandboxes whose workspace starts at a
 * checkpoint, standing on its layers where they are ---- */

/* forks a request makes at most (E2B's bound) */
#define CKPT_FORK_MAX 100

/* A fork request, checked: its checkpoint's layers as "DIR/uN" (DIR the
 * parent's layer directory, or one beside it it stands on), top first. */
/* The parent's /tmp and home: dst, and its tmpfs (detached) that holds the
 * checkpoint's layers of it, which each fork copies into its own at its
 * first switch (ckpt_copy.c). */
struct ckpt_fork_own {
	const char *dst;
	int tree;
};
struct ckpt_fork {
	char from[64];
	unsigned count;
	char name[64]; /* "": ids made; else NAME, or NAME-1 ... NAME-count */
	char **base;
	size_t n_base;
	/* set in the child that makes the forks (front/front_layer.c) */
	struct ckpt_fork_own own[2];
	size_t n_own;
};
/* Makes the sandboxes (a detached sandbox's launcher: detach/); ids gets
 * their ids. Runs in a child of the launcher. */
typedef int (*ckpt_fork_fn)(void *arg, const struct ckpt_fork *f, json_object *ids,
			    struct ab_error *err);
/* The parent's launcher: check req ("from", "count", "name"); no "from":
 * the state now is checkpointed first (refused while commands run). */
int ckpt_fork_prepare(struct ab_layer *l, json_object *req, bool busy, struct ckpt_fork *f,
		      struct ab_error *err);
void ckpt_fork_free(struct ckpt_fork *f);
/* ckpt.c: checkpoint from's layers (the state now, checkpointed, when
 * NULL; its name into name) as a fork's base; a fork's base layer's name. */
int ckpt_fork_base(struct ab_layer *l, const char *from, bool busy, char ***base, size_t *n_base,
		   char *name, size_t size, struct ab_error *err);
bool ckpt_base_name_ok(const char *s);
/* A checkpoint's name: 1 to 63 of A-Za-z0-9._-, not starting with . or -. */
bool ckpt_name_ok(const char *s);
/* The fork's launcher, its sandbox ready, before anything runs in it: hold
 * base's layer directories, and mount a fresh upper over base; its /tmp
 * and home over base's layers of them, copied from own[] (the maker's
 * trees, closed here). */
int ckpt_fork_begin(struct ab_layer *l, char *const *base, size_t n,
		    const struct ckpt_fork_own *own, size_t n_own, struct ab_error *err);
/* ckpt_copy.c: src's layer from (a path beneath it, nothing followed)
 * copied whole into dst as to ("DIR/uN": DIR made), whiteouts, opaque
 * directories and modes kept; what was copied is removed on a failure. */
int ckpt_copy_layer(int src, const char *from, int dst, const char *to, struct ab_error *err);

/* ckpt_mount.c: mount the overlay of l->dir/names[0] (upper, work
 * l->dir/work) over names[1..n-1] and the workspace at the sandbox's
 * /workspace (and its own paths' at theirs). A failure leaves the sandbox's
 * mounts as they were, or, when they could not be taken off again, is
 * ESTALE: names[0] is still mounted. */
int ckpt_mount(const struct ab_layer *l, char *const *names, size_t n, const char *work,
	       struct ab_error *err);

/* ckpt_changes.c: what the layers of top above those of c hold, as
 * "changes": [{"path", "status": written|deleted, "type", "size"}]; c must
 * lie beneath top (not restored past). */
int ckpt_changes(const struct ab_layer *l, char *const *top, size_t n_top, char *const *c,
		 size_t n_c, json_object *o, struct ab_error *err);
/* name in dfd (st its lstat) is an overlay whiteout: a 0/0 character
 * device, or an empty file with user.overlay.whiteout. */
struct stat;
bool ckpt_whiteout(int dfd, const char *name, const struct stat *st);
/* The bytes of the regular files in the tree at path (0 when unreadable). */
long long ckpt_tree_bytes(const char *path);
/* The same, or -errno when the walk could not count them all (-E2BIG past
 * its bound of entries); *bytes what it counted. */
int ckpt_tree_bytes_all(const char *path, long long *bytes);

/* A review (changes, commit) of a workspace that stands on checkpoints:
 * the stack's merged uppers made in l->dir/merged, which l->review_upper
 * then names for layer_review.c; undone with ckpt_merge_remove(). */
int ckpt_review_prepare(struct ab_layer *l, struct ab_error *err);
/* ckpt_review.c: the uppers top[0..n-1] (top first) merged into
 * l->dir/merged: hard links, whiteouts and opaque directories, no data
 * copied; the review reads it as one upper. */
#define CKPT_MERGED "merged"
int ckpt_merge(const struct ab_layer *l, char *const *top, size_t n, struct ab_error *err);
void ckpt_merge_remove(const struct ab_layer *l);

#endif
