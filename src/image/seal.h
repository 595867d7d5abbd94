/* A cached layer's seal: the listing of its unpacked tree (every entry's
 * path, type, mode, owner, size, inode, link count, modification and change
 * times), written once the tree is unpacked and compared at every use, so
 * that a tree changed since (a file's content, a file added, removed or
 * replaced, a mode) is found before a sandbox runs it. The change time is
 * the key: every write, chmod, chown, link, rename or xattr change moves it,
 * and no unprivileged process can set it back. Separate from unpacking
 * (untar.c): it reads a finished tree, whoever unpacked it
 * (docs/images.md). */
#ifndef AB_SEAL_H
#define AB_SEAL_H

#include <stdbool.h>

#include "agentbox/agentbox.h"

/* Walk the tree at root (a directory fd) and write its listing to fd. */
int seal_write(int root, int fd, struct ab_error *err);

/* Whether seal (an fd) is a listing this version writes. */
bool seal_known(int seal);

/* Walk the tree at root and compare it with the listing at seal (an fd
 * on it): 0 when it is the same; -ENOENT when seal is not a listing this
 * version writes (err unset: the caller unpacks the layer anew);
 * -EBADMSG, with what (a "layer N (sha256:...)" phrase) and the first
 * entry that differs in err, when the tree changed. */
int seal_check(int root, int seal, const char *what, struct ab_error *err);

#endif
