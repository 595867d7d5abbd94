/* envd's process service (spec/envd/process/process.proto). */
#include "e2b/e2b_int.h"

#include <stddef.h>

static void unimplemented(struct e2b_call *c)
{
	e2b_call_error(c, E2B_UNIMPLEMENTED, "not yet");
}

const struct e2b_method e2b_process_methods[] = {
	{"process.Process", "Start", E2B_STREAM, unimplemented},
	{NULL, NULL, E2B_UNARY, NULL},
};

void e2b_process_free(struct e2b_sbx *s)
{
	(void)s;
}
