/* The sandbox's filesystem view: planned and checked on the host side
 * (view_plan_build), then built inside the new mount namespace
 * (view_open_sources, view_build). */
#ifndef AB_MOUNT_H
#define AB_MOUNT_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/filter.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"
#include "layer/protect.h"

enum view_kind {
	VIEW_BIND,    /* host path bound at dst */
	VIEW_TMPFS,   /* fresh tmpfs at dst */
	VIEW_SYMLINK, /* symlink dst -> src, as the host has it (merged /usr) */
	VIEW_PROC,    /* procfs of the sandbox's pid namespace */
	VIEW_DEV,     /* minimal /dev */
};

struct view_entry {
	enum view_kind kind;
	char *src; /* canonical host path (bind) or link target (symlink) */
	char *dst; /* normalised absolute path in the view */
	bool rw;
	bool is_dir;
	bool user; /* from --bind/--ro-bind/--tmpfs (for messages) */
	dev_t dev; /* what the launcher checked, re-checked in the sandbox */
	ino_t ino;
	unsigned long long size; /* tmpfs size in bytes */
	unsigned mode;		 /* tmpfs root mode */
	int src_fd;		 /* O_PATH fd of src, opened in the sandbox */
	bool host_open;		 /* named by the caller: the launcher may open it (idmap.h) */
	uid_t owner_uid;	 /* src's owner, what an idmapping maps */
	gid_t owner_gid;
	int tree_fd;	     /* detached mount the launcher made of src (idmap.h), or -1 */
	bool overlay;	     /* the workspace, mounted as an overlay (layer.h) */
	bool from_view;	     /* bound from the view's overlay /workspace, not the host */
	uint64_t image_mask; /* --image: an overlay of these layers' src (view/image.h) */
	bool copy;	     /* a --bind file copied in and synced back (view/bindfile.h) */
	char *seed;	     /* copy: src's bytes as the launcher read them */
	size_t seed_len;
	bool own_layer; /* /tmp, home: an overlay checkpoints restack (view/owntmp.h) */
	int own_fd;	/* own_layer: its backing tmpfs, detached, for the launcher */
};

struct view_plan {
	struct view_entry *e;
	size_t n;
	int dev_fds[8];			/* host device nodes bound into /dev, -1 if absent */
	struct sock_fprog *setid_guard; /* idmap.h: installed before the command's filter */
	char *passwd, *group;		/* idmap.h: bound read-only over /etc/passwd, /etc/group */
	pid_t idmap_helpers[16];	/* idmap.c: exited children, reaped by view_plan_free */
	size_t n_idmap_helpers;
	bool bind_proc;		       /* --isolation best without own-proc */
	struct ab_layer *layer;	       /* layer.h: the overlay workspace's, or NULL */
	const struct image_use *image; /* --image's layers (view/image.h), or NULL */
	int image_fds[64];	       /* image.c: the layers' directories, then empty/ */
	size_t n_image_fds;
	bool restack; /* init: the overlay workspace may be restacked (ckpt/) */
};

/* Launcher: turn the configuration into the list of mounts, in the order they
 * are made, checking every source on the host and every destination for
 * collisions; protected workspace paths that exist become read-only binds.
 * Nothing is created. */
int view_plan_build(const struct ab_config *cfg, const struct protect_state *protect,
		    struct view_plan *plan, struct ab_error *err);
/* An empty plan that view_plan_free() may release. */
void view_plan_init(struct view_plan *plan);
void view_plan_free(struct view_plan *plan);
/* Launcher, once the init is cloned: close the detached mounts it made. */
void view_plan_close_trees(struct view_plan *plan);
/* Reap the children that made the idmappings' user namespaces (idmap.c):
 * all of them, or (!wait) those that have exited. */
void view_plan_reap_helpers(struct view_plan *plan, bool wait);

/* Launcher, for the plan's makers (plan.c): one more entry, or NULL
 * when out of memory; a bind of a host path checked with stat(2). */
struct view_entry *view_plan_add(struct view_plan *plan, enum view_kind kind, const char *src,
				 const char *dst);
int view_plan_add_bind(struct view_plan *plan, const char *opt, const char *src, const char *dst,
		       bool rw, bool user, struct ab_error *err);
/* plan->passwd and plan->group: these texts (NULL: no such file) with a
 * line "agent" more each, where they have no line for uid, gid (plan.c). */
int view_plan_id_texts(struct view_plan *plan, const char *passwd, const char *group, uid_t uid,
		       gid_t gid, const char *home, struct ab_error *err);

/* Open e->src beneath root (O_PATH, no symlink followed) into e->src_fd and
 * check it is the file the plan checked. */
int view_open_source(int root, struct view_entry *e, struct ab_error *err);

/* Sandbox, still seeing the host's mount tree: open every source with
 * O_PATH and check it is the file the launcher checked (except those the
 * launcher made a detached mount of already). */
int view_open_sources(struct view_plan *plan, struct ab_error *err);

/* Sandbox: build the view on a fresh tmpfs, pivot into it, detach the host's
 * root and make the root read-only. */
int view_build(struct view_plan *plan, struct ab_error *err);
/* Sandbox init, once the view is locked (and its own maps written through
 * /proc): the view's /proc read-only, where Landlock's write rule is the
 * root's (an overlay workspace a checkpoint restacks, landlock.h): no rule
 * ever let a command write /proc's files, and no mount flag then would. */
int view_proc_read_only(struct ab_error *err);

#endif
