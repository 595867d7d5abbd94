/* The cache of unpacked image layers, shared by every sandbox of a user:
 * $XDG_STATE_HOME/agentbox/images (~/.local/state/agentbox/images), or
 * /var/lib/agentbox/images for root. Each layer is unpacked once, into a
 * temporary directory renamed to layers/HEX (HEX: its blob's sha256) when
 * complete, under the cache's lock; a sandbox holds a shared lock on each
 * layer it uses, so prune leaves those (docs/images.md). */
#ifndef AB_IMAGE_CACHE_H
#define AB_IMAGE_CACHE_H

#include <stdbool.h>
#include <stdio.h>

#include "agentbox/agentbox.h"
#include "image/oci.h"

struct image_use {
	struct oci_image img;
	char *spec;			  /* "oci:DIR[:TAG]" as given */
	char *base;			  /* the cache's directory */
	char *layer_dirs[OCI_MAX_LAYERS]; /* layers/HEX of each layer, bottom first */
	int lock_fds[OCI_MAX_LAYERS];	  /* shared locks, held while it is used */
	char *empty;			  /* an empty directory: the overlays' bottom */
	size_t unpacked;		  /* layers this start unpacked */
};

/* Read the image spec ("oci:DIR[:TAG]"), unpack what the cache lacks of its
 * layers and lock them shared until image_use_free. */
int image_use_open(const char *spec, struct image_use **out, struct ab_error *err);
void image_use_free(struct image_use *u);
/* In a child of the process that opened u, whose fds were closed (a
 * fork's maker: detach_fork.c): lock its layers again, for the sandboxes
 * it starts with u. */
int image_use_relock(struct image_use *u, struct ab_error *err);

/* agentbox images [--json]: the cached images and layers, their sizes and
 * whether a sandbox uses them. */
int image_cache_list(FILE *out, bool json, struct ab_error *err);
/* agentbox images prune: remove every layer no sandbox uses, and the
 * images that named them; says what it removed on out. */
int image_cache_prune(FILE *out, struct ab_error *err);

#endif
