/* The shipped policy (the JSON files of policy/seccomp and policy/sandbox) built
 * into the binary (tools/embed-policy.cmake), so a copy of the binary
 * outside its installation or build tree still has its profiles. A file of
 * the policy directory (ab_policy_dir) overrides its built-in copy; the
 * built-in one is used only when the file is not there and
 * AGENTBOX_POLICY_DIR does not name the directory. */
#ifndef AB_POLICY_BUILTIN_H
#define AB_POLICY_BUILTIN_H

#include <stddef.h>

struct ab_policy_file {
	const char *name; /* relative to the policy directory: "seccomp/default.json" */
	const char *data; /* the file's bytes, then a NUL */
	size_t size;
};
/* The table, ended by an entry whose name is NULL. */
extern const struct ab_policy_file ab_policy_builtin_files[];

/* The built-in copy of the policy directory's file NAME ("sandbox/agent.json")
 * for a load that did not find it on disk: NULL when there is none or when
 * AGENTBOX_POLICY_DIR is set (a directory the caller chose is all there is). */
const struct ab_policy_file *ab_policy_builtin(const char *name);

#endif
