/* envd's filesystem service (filesystem.Filesystem) and its plain HTTP
 * routes (/files): the registration point of e2b.h's tables. Empty here:
 * a method not in them is answered "unimplemented", a route not in them
 * 404. */
#include "e2b/e2b.h"

#include <stddef.h>

const struct e2b_method e2b_fs_methods[] = {
	{NULL, NULL, E2B_UNARY, NULL},
};

const struct e2b_route e2b_fs_routes[] = {
	{NULL, NULL, NULL},
};
