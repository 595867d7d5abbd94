/* The overlay workspace (--workspace-mode overlay, docs/workspace.md).
 *
 * The host workspace is the read-only lower layer of an overlayfs at
 * /workspace; the upper and work directories live in a layer directory on
 * disk that agentbox owns:
 *
 *   DIR/layer.info   "agentbox-layer 1", the workspace, the start time
 *   DIR/upper/       what the commands wrote (whiteouts for deletions)
 *   DIR/work/        overlayfs's own
 *
 * Host side: layer_create() makes DIR when the view is planned (overlay.c);
 * layer_release() removes DIR unless it is kept. Sandbox side:
 * layer_open_dirs(), then the overlay is mounted where the view is built
 * (overlay.c). Review: layer_changes(), layer_commit(),
 * layer_discard() read DIR on the host side, never inside the sandbox. */
#ifndef AB_LAYER_H
#define AB_LAYER_H

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "agentbox/agentbox.h"

struct protect_state;

struct ab_layer {
	char *dir;	 /* the layer directory */
	char *workspace; /* the host workspace, canonical */
	struct timespec started;
	bool keep;    /* --keep-changes: DIR stays when the sandbox ends */
	pid_t owner;  /* the process that made it; only it removes it */
	int lock_fd;  /* DIR/layer.info, flock'ed while a sandbox uses DIR */
	int upper_fd; /* sandbox side: O_PATH fds of DIR/upper, DIR/work */
	int work_fd;
	int tree_fd;	/* root: a detached mount of DIR the launcher made, or -1 */
	char **protect; /* the protected paths, as layer.info keeps them */
	size_t n_protect;
	/* launcher, for checkpoints (ckpt/): the sandbox's own user namespace
	 * and its commands' mount namespace (SYNC_VIEWNS), detached trees of
	 * the workspace (root's idmapped one) and, a plain user's, of DIR,
	 * the view's binds beneath /workspace; -1: none */
	int view_userns, view_mntns, ws_tree, dir_tree;
	struct layer_bind {
		char *dst;
		bool rw;
	} * binds;
	size_t n_binds;
	/* a fork's (ckpt/ckpt_fork.c): the layer directories beside DIR whose
	 * layers it stands on, each's layer.info held with a shared lock */
	struct layer_held {
		char *dir;
		int fd;
	} * held;
	size_t n_held;
	/* --layer-quota: ckpt/ checks it at each checkpoint; 0: none */
	unsigned long long quota;
	/* the directory of DIR a review reads as its upper: NULL, "upper";
	 * a stack's merged uppers (ckpt/: ckpt_review_prepare) */
	const char *review_upper;
	/* the sandbox's own paths a switch restacks too (/tmp, home:
	 * view/owntmp.h), in the view's order: each its backing tmpfs,
	 * detached (SYNC_VIEWNS 4 + index), or -1 where it is a plain tmpfs */
	struct layer_own {
		char *dst;
		int tree;
		/* a fork's, until its first switch: its maker's tmpfs of this
		 * path (detached), whose layers the fork's base names are copied
		 * from (ckpt/ckpt_copy.c); -1: none */
		int from;
	} own[2];
	size_t n_own;
};

/* --workspace-mode direct|overlay and --keep-changes DIR. */
int layer_parse_option(struct ab_config *cfg, const char *opt, const char *arg,
		       struct ab_error *err);

/* Launcher, planning the view (overlay.c): make (or, for --keep-changes DIR
 * holding a layer of this workspace, reuse) the layer of cfg's workspace
 * with the protected paths, and lock it. *out is set even on failure, for
 * layer_release() to remove what was made. */
int layer_create(const struct ab_config *cfg, const struct protect_state *protect,
		 struct ab_layer **out, struct ab_error *err);
/* Unlock, and remove the layer unless kept or another sandbox still
 * holds it (a fork standing on its layers: the last one to go removes
 * it); the same for each directory held. NULL is fine. */
void layer_release(struct ab_layer *l);
/* A fork's: hold the layer directory name beside l->dir (a shared lock on
 * its layer.info, as its own sandbox holds it) until layer_release. */
int layer_hold(struct ab_layer *l, const char *name, struct ab_error *err);
/* Remove the layers no sandbox holds any more (their launcher was killed):
 * what the next overlay sandbox's start does; agentbox rm of a dead one. */
void layer_sweep(void);

/* Sandbox, while the host tree is visible: check DIR/upper and DIR/work,
 * which the launcher opened (a directory only root may enter can hold
 * the layer of a sandbox user's overlay). */
int layer_open_dirs(struct ab_layer *l, struct ab_error *err);
/* Once the overlay is mounted: close those fds (and the launcher's tree
 * of DIR). Each is a host path: /proc/self/fd/N/.. of a process holding
 * one walks the host's tree, past every mount of the view. */
void layer_close_dirs(struct ab_layer *l);
/* The fds the init must keep open: stored at fds, how many. */
int layer_keep_fds(const struct ab_layer *l, int *fds);

/* Open an existing layer directory for review (agentbox changes/commit/
 * discard DIR): read layer.info; lock it unless a sandbox holds it
 * (-EBUSY). */
int layer_open(const char *dir, struct ab_layer **out, struct ab_error *err);
void layer_free(struct ab_layer *l);

/* What the layer changes against the host workspace as it is now:
 * {"changes": [{"path", "status": added|modified|deleted|renamed, "type",
 * "size", "old_size", "from", "conflict", "diff", "diff_truncated"}],
 * "layer_bytes": N}. diff_max > 0 adds bounded unified diffs of text files. */
struct layer_change_opts {
	bool diff;
	size_t diff_max;      /* bytes of diff per file */
	bool include_ignored; /* list what .gitignore ignores too (layer_ignore.h) */
	const char *since;    /* a sandbox's: what changed after this checkpoint (ckpt/) */
};
int layer_changes(const struct ab_layer *l, const struct layer_change_opts *o, json_object **out,
		  struct ab_error *err);

/* Apply the changes (all, or those at paths and beneath them) to the host
 * workspace, each file atomically; refuse, before writing anything, when a
 * host file changed since the layer started, unless force. *out:
 * {"committed": [paths], "conflicts": [paths]}. */
int layer_commit(const struct ab_layer *l, char *const *paths, size_t n_paths, bool force,
		 json_object **out, struct ab_error *err);

/* Remove the layer directory and everything in it. */
int layer_discard(struct ab_layer *l, struct ab_error *err);

/* The session protocol's ops "changes", "commit", "discard" on the layer
 * of a running session (serve.c dispatches here): *reply gets the reply's
 * fields; *end is set when the session must end (discard). */
int layer_session_op(struct ab_layer *l, const char *op, json_object *req, json_object **reply,
		     bool *end, struct ab_error *err);

/* After a run: the protected paths the layer creates or changes, as
 * protect_changes() reports them for a direct workspace (NULL-terminated,
 * or NULL when none). */
char **layer_protected_changes(const struct ab_layer *l);
/* rel is a protected path or beneath one. */
bool layer_is_protected(const struct ab_layer *l, const char *rel);

/* The fields besides op and id a layer op of the protocol takes, or NULL
 * when op is not one (request.c). */
const char *const *layer_op_fields(const char *op);
/* The session's layer, or NULL in direct mode (session.c). */
struct ab_session;
struct ab_layer *ab_session_layer(struct ab_session *s);
/* The protocol's error code for a failed layer op's errno. */
enum ab_errc layer_error_code(int code);

/* agentbox changes|commit|discard (argv[0]): the exit status. */
/* A detached sandbox's layer: req sent to sandbox id, its answer (a
 * result or an error message) into *reply (detach_request). */
typedef int (*layer_remote_fn)(const char *id, json_object *req, json_object **reply,
			       struct ab_error *err);
/* agentbox changes|commit|discard DIR|ID; remote reaches a sandbox ID (a
 * name that is not a directory). */
int layer_cli(int argc, char **argv, layer_remote_fn remote);

#endif
