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

/* The layout at dir is read in two halves (docs/security.md): the
 * launcher reads its files (no link followed, at most 4 MiB each, every
 * blob hashed and checked against its digest), the layout helper
 * (layout_proc.h) parses them. The image's manifest is the one tagged tag
 * (its org.opencontainers.image.ref.name annotation; tag NULL: "latest",
 * or the only manifest).
 *
 * The launcher's half: index.json's text (oci-layout there too), a blob's
 * text checked against hex (what: "manifest", "config"); NULL with err set. */
char *oci_read_index(const char *dir, struct ab_error *err);
char *oci_read_blob_text(const char *dir, const char *hex, const char *what, struct ab_error *err);

/* The parser's half: index.json's manifest for tag into hex; a manifest's
 * config digest into hex and its layers into img (or, may_be_index and
 * the manifest an image index, *is_index and the digest of this
 * platform's manifest into hex); a config's Env, WorkingDir and User into
 * img (img->dir names the layout in messages). 0 or -errno with err. */
int oci_parse_index(const char *dir, const char *text, const char *tag, char hex[65],
		    struct ab_error *err);
int oci_parse_manifest(const char *dir, const char *text, bool may_be_index, bool *is_index,
		       char hex[65], struct oci_image *img, struct ab_error *err);
int oci_parse_config(const char *dir, const char *text, struct oci_image *img,
		     struct ab_error *err);
void oci_free(struct oci_image *img);
/* What parsing put in img (layers, Env, WorkingDir, User) let go. */
void oci_forget_parsed(struct oci_image *img);

/* Open blobs/sha256/hex of the layout (a regular file, no symbolic link on
 * the way) for reading; -errno. */
int oci_open_blob(const char *dir, const char *hex);

/* Whether s is 64 lowercase hex digits. */
bool oci_is_hex(const char *s);

#endif
