#include "sandbox/caps.h"

#include "confine/confine.h"

int caps_drop_all(struct ab_error *err)
{
	return confine_caps_drop(err);
}
