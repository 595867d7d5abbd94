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
	bool gone; /* a deletion folded into a rename */
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
/* Open rel beneath dirfd for reading, following no symlink: fd or -errno. */
int layer_open_file(int dirfd, const char *rel);
/* Add "diff" (and "diff_truncated") to j for a text file: a unified diff of
 * at most max bytes, made by diff(1). */
/* rm -rf name beneath dirfd, following no symlink. */
int layer_remove_tree_at(int dirfd, const char *name);
void layer_diff_into(json_object *j, const struct change *c, size_t max, int upfd, int wsfd);

#endif
