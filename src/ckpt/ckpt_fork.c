/* agentbox fork: the parent's side of a fork request (ckpt.h,
 * docs/checkpoints.md). The parent's launcher checks it and finds the
 * checkpoint's layers (ckpt.c); the sandboxes are made by a child of that
 * launcher with the parent's own configuration (detach/detach_fork.c);
 * each starts from those layers where they are (ckpt_fork_begin). */
#include "ckpt/ckpt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/util.h"

/* a sandbox's id is at most this long (detach.h) */
#define ID_MAX 63

/* A sandbox's id (detach.h): as a checkpoint's name, starting with a
 * letter or digit, room left for "-N". */
static bool fork_name_ok(const char *s, unsigned count)
{
	size_t suffix = count > 1 ? 1 + (count >= 100 ? 3 : count >= 10 ? 2 : 1) : 0;
	return ckpt_name_ok(s) && s[0] != '_' && strlen(s) + suffix <= ID_MAX;
}

int ckpt_fork_prepare(struct ab_layer *l, json_object *req, bool busy, struct ckpt_fork *f,
		      struct ab_error *err)
{
	*f = (struct ckpt_fork){.count = 1};
	json_object *v;
	if (json_object_object_get_ex(req, "count", &v) &&
	    !json_object_is_type(v, json_type_null)) {
		int64_t n = json_object_get_int64(v);
		if (!json_object_is_type(v, json_type_int) || n < 1 || n > CKPT_FORK_MAX)
			return ab_error_plain(err, EINVAL,
					      "fork: 'count' must be a whole number from 1 to %d",
					      CKPT_FORK_MAX);
		f->count = (unsigned)n;
	}
	const char *from = NULL, *name = NULL;
	if (json_object_object_get_ex(req, "from", &v) && !json_object_is_type(v, json_type_null)) {
		if (!json_object_is_type(v, json_type_string) ||
		    !*(from = json_object_get_string(v)))
			return ab_error_plain(err, EINVAL,
					      "fork: 'from' must be a checkpoint's name");
	}
	if (json_object_object_get_ex(req, "name", &v) && !json_object_is_type(v, json_type_null)) {
		name = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
		if (!fork_name_ok(name, f->count))
			return ab_error_plain(err, EINVAL,
					      "fork: 'name' must be 1 to %d letters, digits, '.', "
					      "'_' or '-', starting with a letter or digit (with "
					      "'count', NAME-1 ... NAME-N must fit)",
					      ID_MAX);
		snprintf(f->name, sizeof(f->name), "%s", name);
	}
	int r = ckpt_fork_base(l, from, busy, &f->base, &f->n_base, f->from, sizeof(f->from), err);
	if (r < 0)
		ckpt_fork_free(f);
	return r;
}

void ckpt_fork_free(struct ckpt_fork *f)
{
	ab_cleanup_strvp(&f->base);
	f->n_base = 0;
}
