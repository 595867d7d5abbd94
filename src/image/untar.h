/* One layer's tar (plain or gzip), read by libarchive (archive_lib.h) and
 * unpacked by agentbox beneath a directory as overlay wants a lower layer:
 * whiteouts as 0/0 character devices, opaque directories marked
 * user.overlay.opaque. The tar is hostile: no entry reaches outside the
 * directory, no link is followed, sizes and counts are bounded, device
 * nodes are skipped (docs/images.md). */
#ifndef AB_UNTAR_H
#define AB_UNTAR_H

#include "agentbox/agentbox.h"
#include "image/oci.h"

#define UNTAR_MAX_ENTRIES   1000000
#define UNTAR_MAX_BYTES	    (64ULL << 30) /* a layer's files, unpacked */
#define UNTAR_MAX_DEPTH	    128
#define UNTAR_MAX_DIR_BYTES (64 << 20) /* directory names kept to set their modes */

struct untar_stats {
	unsigned long long bytes; /* of the regular files written */
	unsigned long entries;
	unsigned long devices; /* device nodes left out */
};

/* Unpack the blob at fd (what: "layer N", for messages) beneath root, while
 * hashing every byte of it: it must hash to l->hex (l->hex "": not hashed
 * here, the caller checks it: unpack_proc.c). On error what was unpacked
 * stays for the caller to remove. */
int untar_layer(int fd, const struct oci_layer *l, const char *what, int root,
		struct untar_stats *st, struct ab_error *err);

/* The error of a blob whose content hashes to got, not to want. */
int untar_digest_error(struct ab_error *err, const char *what, const char *want, const char *got);

/* Remove name beneath dir and all it holds, links not followed, at most
 * depth levels deep; -errno. */
int untar_remove(int dir, const char *name, int depth);

#endif
