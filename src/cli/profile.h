#ifndef AB_PROFILE_H
#define AB_PROFILE_H

#include <stddef.h>

#include "agentbox/agentbox.h"

/* Largest profile file read. */
#define AB_PROFILE_MAX_BYTES (1 << 20)

/* --profile SPEC: a NAME (no '/', not ending in ".json") from the policy
 * directory's sandbox/ folder, else a FILE. Applies its options to cfg;
 * see docs/profiles.md. */
int ab_profile_load(struct ab_config *cfg, const char *spec, struct ab_error *err);

/* A profile file: at most AB_PROFILE_MAX_BYTES, relative paths in it taken
 * relative to the file's directory. */
int ab_profile_load_file(struct ab_config *cfg, const char *path, struct ab_error *err);

/* A profile held in memory (any bytes; it need not be NUL-terminated).
 * source names it in errors and, when it holds a '/', its directory is
 * where relative paths are resolved; without one they stay relative (to the
 * current directory). Nothing but cfg is touched. */
int ab_profile_load_buffer(struct ab_config *cfg, const char *buf, size_t len, const char *source,
			   struct ab_error *err);

#endif
