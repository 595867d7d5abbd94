/* The shipped policy built into the binary: the lookup a load falls back
 * to when the policy directory has no such file (policy_builtin.h). */
#include "seccomp/policy_builtin.h"

#include <stdlib.h>
#include <string.h>

const struct ab_policy_file *ab_policy_builtin(const char *name)
{
	const char *env = getenv("AGENTBOX_POLICY_DIR");
	if (env && *env)
		return NULL;
	for (const struct ab_policy_file *f = ab_policy_builtin_files; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}
