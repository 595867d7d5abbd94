/* What envd's filesystem calls share (e2b_fs_int.h): agentbox's error
 * codes as Connect's, and a request's path as the sandbox's. */
#include <string.h>

#include "e2b/e2b_fs_int.h"

const char *e2b_fs_code(const char *agentbox_code)
{
	static const struct {
		const char *ab, *e2b;
	} map[] = {
		{"file_not_found", E2B_NOT_FOUND},
		{"not_directory", E2B_INVALID_ARGUMENT},
		{"is_directory", E2B_INVALID_ARGUMENT},
		{"invalid_path", E2B_INVALID_ARGUMENT},
		{"invalid_request", E2B_INVALID_ARGUMENT},
		{"permission_denied", E2B_PERMISSION_DENIED},
		{"read_only", E2B_PERMISSION_DENIED},
		{"exists", E2B_ALREADY_EXISTS},
		{"too_large", E2B_RESOURCE_EXHAUSTED},
		{"no_space", E2B_RESOURCE_EXHAUSTED},
		{"busy", E2B_RESOURCE_EXHAUSTED},
		{"timeout", E2B_DEADLINE_EXCEEDED},
		{"cancelled", E2B_CANCELED},
		{"shutdown", E2B_UNAVAILABLE},
	};
	for (size_t i = 0; agentbox_code && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(map[i].ab, agentbox_code))
			return map[i].e2b;
	return E2B_INTERNAL;
}

/* The request's string field name as a path of the sandbox (out), or
 * false with the call's error sent. */
bool e2b_fs_path(struct e2b_call *c, json_object *req, const char *name, char *out, size_t size)
{
	json_object *v;
	const char *p = json_object_object_get_ex(req, name, &v) ? json_object_get_string(v) : NULL;
	if (!p || !*p) {
		e2b_call_error(c, E2B_INVALID_ARGUMENT, "%s is required", name);
		return false;
	}
	if (strlen(p) != (size_t)json_object_get_string_len(v) || e2b_path_in(p, out, size) < 0 ||
	    out[0] != '/') {
		e2b_call_error(c, E2B_INVALID_ARGUMENT, "invalid %s", name);
		return false;
	}
	return true;
}
