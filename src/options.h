#ifndef AB_OPTIONS_H
#define AB_OPTIONS_H

#include <stdbool.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"
#include "error.h"

/* A uid or gid in decimal; (uid_t)-1 is refused. */
int ab_parse_id(const char *s, uid_t *out);

/* Normalise an absolute path inside the view: collapse '/' runs and '.',
 * drop a trailing '/'. Returns -EINVAL if not absolute and -ELOOP if it
 * contains '..' (refused rather than resolved). */
int ab_path_normalize(const char *in, char **out);

/* True if path equals dir or lies beneath it (both normalised). */
bool ab_path_is_under(const char *path, const char *dir);

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

/* rlimit names as --rlimit spells them ("nofile"): resource, or -1. */
int ab_rlimit_by_name(const char *name);
const char *ab_rlimit_name(int resource);

/* What a long option of run/serve (named without the dashes) takes. */
enum ab_option_kind {
	AB_OPTION_UNKNOWN,
	AB_OPTION_FLAG,	 /* no value */
	AB_OPTION_VALUE, /* one value; given again, the last one wins */
	AB_OPTION_LIST,	 /* repeatable: each value adds to a list */
};
enum ab_option_kind ab_option_kind(const char *name);

/* Apply one option exactly as the command line does: name without the
 * dashes, value NULL for a flag. Errors read as on the command line
 * ("--memory: '12Q' is not a size ..."). --help and --profile are refused. */
int ab_option_apply(struct ab_config *cfg, const char *name, const char *value,
		    struct ab_error *err);

#endif
