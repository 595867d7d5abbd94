/* Checks of a parsed configuration against the host (config.c): mount
 * sources made canonical, and the identity the sandbox runs as. Runs in
 * the launcher before anything is created. */
#ifndef AB_CONFIG_H
#define AB_CONFIG_H

#include <stdbool.h>

#include "agentbox/agentbox.h"

/* Started by root without --host-uid: the sandbox user is
 * AB_SANDBOX_HOST_ID and the sources the caller named are idmapped to it. */
bool ab_config_idmaps(const struct ab_config *cfg);

/* Root, when the workspace cannot be idmapped: run the sandbox as the
 * workspace's owner (the behaviour before idmapped mounts), unless root
 * owns it (-EPERM). */
int ab_config_run_as_owner(struct ab_config *cfg, struct ab_error *err);

/* A host path given for a mount source (--workspace, --skills, --bind,
 * --ro-bind) made canonical, refusing a symbolic link in its last component
 * unless follow is set, and one swapped in meanwhile in any case; dir_only
 * refuses a file. */
int ab_resolve_mount_source(const char *opt, const char *given, bool follow, bool dir_only,
			    char **out, struct ab_error *err);

#endif
