#include "sandbox/caps.h"

#include "confine/confine_spec.h"

int caps_drop_all(struct ab_error *err)
{
	return confine_caps_drop(err);
}
