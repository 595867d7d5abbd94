/* --image oci:DIR[:TAG] in the view (docs/images.md): the image's layers,
 * unpacked in the image cache (image/cache.h), stacked as read-only
 * overlays, one per top-level directory of the image, where the host's
 * system directories were. */
#ifndef AB_VIEW_IMAGE_H
#define AB_VIEW_IMAGE_H

#include <stdint.h>

#include "agentbox/agentbox.h"
#include "view/mount.h"

/* Launcher: the layers merged (an overlay made here as root, in a
 * short-lived user namespace otherwise) are checked as --rootfs checks a
 * tree, then each top-level entry is planned: a directory as an overlay of
 * the layers that have it (made here as root, by the init otherwise), a
 * symbolic link as a link. */
int image_plan(const struct ab_config *cfg, struct view_plan *plan, struct ab_error *err);

/* Sandbox, still seeing the host's tree: open the layers' directories for
 * the entries the launcher did not mount. */
int image_open_layers(struct view_plan *plan, struct ab_error *err);
/* Sandbox: the overlay of entry e (e->image_mask of the layers), detached:
 * a mount fd or the error. */
int image_mount_entry(struct view_plan *plan, const struct view_entry *e, struct ab_error *err);
void image_close_layers(struct view_plan *plan);

/* Apply the image config's Env, WorkingDir and User to cfg where options
 * did not set them (ab_config_finish). */
int image_apply_config(struct ab_config *cfg, struct ab_error *err);

#endif
