/* What the workspace's .gitignore files ignore, for a layer's review
 * (layer_review.c): `changes` leaves those paths out unless asked. The
 * files are read from the layer's merged view (the upper directory over
 * the host workspace) as untrusted input: no symlink followed, no FIFO
 * opened, at most AB_IGNORE_MAX_FILE bytes each and AB_IGNORE_MAX_DIRS
 * directories' files in all; past a bound, nothing more is ignored. */
#ifndef AB_LAYER_IGNORE_H
#define AB_LAYER_IGNORE_H

#include <stdbool.h>

#define AB_IGNORE_MAX_FILE (1 << 20)
#define AB_IGNORE_MAX_DIRS 4096
/* .gitignore files deeper than this many directories are not read, and
 * directories deeper are not matched as such (a path there is still judged
 * by the files above): the cost of a path stays bounded however deep a
 * command nests, and a bound only ever shows more, never hides. */
#define AB_IGNORE_MAX_DEPTH 64

struct layer_ignore;

/* upfd, wsfd: O_PATH fds of the upper directory and the host workspace,
 * borrowed (they must outlive it). NULL when out of memory. */
struct layer_ignore *layer_ignore_new(int upfd, int wsfd);
void layer_ignore_free(struct layer_ignore *ig);

/* Whether git would ignore rel (relative to the workspace; is_dir: it is
 * a directory): the last matching pattern of the deepest .gitignore wins,
 * and everything beneath an ignored directory is ignored. */
bool layer_ignored(struct layer_ignore *ig, const char *rel, bool is_dir);

/* The wildmatch of one pattern against a path (git's rules for *, ?,
 * [...], \ and **), for tests. */
bool layer_ignore_wildmatch(const char *pattern, const char *path);

#endif
