/* Shared by layer_review.c, layer_commit.c and layer_diff.c: the list of
 * a layer's changes against the host workspace. */
#ifndef AB_LAYER_REVIEW_H
#define AB_LAYER_REVIEW_H

#include <json-c/json.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "layer/layer.h"

enum change_status { CHANGE_ADDED, CHANGE_MODIFIED, CHANGE_DELETED, CHANGE_RENAMED };

struct change {
	enum change_status status;
	char *path; /* relative to the workspace */
	char *from; /* renamed: the old path */
	struct stat up, host;
	bool has_up, has_host;
	bool gone;     /* a deletion folded into a rename */
	bool too_deep; /* a directory holding entries no path can name */
};

struct committed {
	long long sec;
	long nsec;
	unsigned long long ino;
	char path[PATH_MAX];
};

struct change_list {
	struct change *c;
	size_t n, cap;
	unsigned long long layer_bytes;
	struct committed *committed;
	size_t n_committed;
};

/* Walk DIR/upper against the workspace; *upfd and *wsfd are O_PATH fds of
 * both, the caller's to close. */
int change_list_build(const struct ab_layer *l, struct change_list *cl, int *upfd, int *wsfd,
		      struct ab_error *err);
void change_list_free(struct change_list *cl);
/* The host file changed since the layer started, and not by a commit. */
bool change_conflicts(const struct ab_layer *l, const struct change_list *cl,
		      const struct change *c);
/* Open rel beneath dirfd for reading, following no symlink, without
 * blocking: fd or -errno; -ESTALE when it is not a regular file (anymore:
 * a command may have swapped it for a fifo since it was listed). */
int layer_open_file(int dirfd, const char *rel);
/* The same for name in dirfd itself. */
int layer_open_at(int dirfd, const char *name);
/* The target of the symlink rel beneath dirfd, into buf (n bytes). */
int layer_read_link(int dirfd, const char *rel, char *buf, size_t n);
/* rm -rf name beneath dirfd, following no symlink, at any depth in two
 * fds (a directory moved away meanwhile stops it: -ESTALE). */
int layer_remove_tree_at(int dirfd, const char *name);
/* Add "diff" (and "diff_truncated") to j for a text file: a unified diff of
 * at most max bytes, made by diff(1). */
void layer_diff_into(json_object *j, const struct change *c, size_t max, int upfd, int wsfd);

#endif
