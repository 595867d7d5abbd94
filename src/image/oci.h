/* An OCI image layout (oci-layout, index.json, blobs/sha256/...): the
 * manifest of a tag, its layers and the image config's Env, WorkingDir and
 * User, every blob read checked against its digest (docs/images.md). */
#ifndef AB_OCI_H
#define AB_OCI_H

#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"

#define OCI_MAX_LAYERS 60 /* per image: overlay stacks up to ~500, docker 127 */

enum oci_compression { OCI_TAR, OCI_GZIP, OCI_ZSTD };

struct oci_layer {
	char hex[65]; /* the blob's sha256, its name in blobs/sha256 */
	enum oci_compression comp;
	unsigned long long size; /* the blob's, from the manifest */
};

struct oci_image {
	char *dir;		  /* the layout's directory */
	char *tag;		  /* the tag asked for, or NULL */
	char manifest_hex[65];	  /* the manifest's sha256 */
	struct oci_layer *layers; /* bottom first */
	size_t n_layers;
	char **env; /* the config's Env, NAME=VALUE */
	size_t n_env;
	char *workdir; /* the config's WorkingDir, or NULL */
	char *user;    /* the config's User, or NULL */
};

/* Read the layout at dir (the manifest tagged tag: the one named by its
 * org.opencontainers.image.ref.name annotation; tag NULL: "latest", or the
 * only manifest), its manifest and config, checked against their digests. */
int oci_open(const char *dir, const char *tag, struct oci_image *img, struct ab_error *err);
void oci_free(struct oci_image *img);

/* Open blobs/sha256/hex of the layout (a regular file, no symbolic link on
 * the way) for reading; -errno. */
int oci_open_blob(const char *dir, const char *hex);

/* Whether s is 64 lowercase hex digits. */
bool oci_is_hex(const char *s);

#endif
