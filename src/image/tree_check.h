/* What the unpack helper made (unpack_proc.h), checked by the launcher
 * before it is sealed and used, whatever the helper said: untar.c's rules
 * enforced from outside it. Walked without following a link, bounded in
 * depth and entries: every entry on the layer's filesystem and the
 * helper's uid's; only directories, regular files, symbolic links, FIFOs
 * and overlay's whiteouts (0/0 character devices); no set-uid or set-gid
 * bit; a hard link only among the tree's own names (every link of an
 * inode found in it); no extended attribute but an opaque directory's
 * user.overlay.opaque ("y") and the security module's labels
 * (security.capability refused). Root's tree is then given to root
 * (docs/images.md). */
#ifndef AB_TREE_CHECK_H
#define AB_TREE_CHECK_H

#include <stdbool.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"

struct tree_check {
	uid_t owner;		  /* every entry's, as the helper made it */
	bool chown;		  /* then lchown'd to the caller's euid and egid */
	unsigned long long bytes; /* out: regular files' sizes, an inode once */
	unsigned long entries;	  /* out */
};

/* Check the tree at root (a directory fd); what ("--image ...: layer N
 * (sha256:...)") and the first entry that breaks a rule in err. */
int tree_check(int root, const char *what, struct tree_check *tc, struct ab_error *err);

#endif
