/* {"op":"net"} (netop.h). */
#include "front/netop.h"

#include <errno.h>
#include <stdlib.h>

#include "util/error.h"
#include "net/netreport.h"

#define NET_OP_MAX_PATTERNS 256

/* req[key]: absent (*out NULL), or an array of strings. */
static int patterns(json_object *req, const char *key, const char ***out, size_t *n,
		    struct ab_error *err)
{
	json_object *v;
	*out = NULL;
	*n = 0;
	if (!json_object_object_get_ex(req, key, &v))
		return 0;
	size_t len = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
	if (!json_object_is_type(v, json_type_array) || len > NET_OP_MAX_PATTERNS)
		return ab_error_plain(err, EINVAL,
				      "net: '%s' must be an array of at most %d patterns", key,
				      NET_OP_MAX_PATTERNS);
	*out = calloc(len + 1, sizeof(char *));
	if (!*out)
		return ab_error_set(err, ENOMEM, "net");
	for (size_t i = 0; i < len; i++) {
		json_object *s = json_object_array_get_idx(v, i);
		if (!json_object_is_type(s, json_type_string))
			return ab_error_plain(err, EINVAL, "net: '%s'[%zu] must be a string", key,
					      i);
		(*out)[i] = json_object_get_string(s);
	}
	*n = len;
	return 0;
}

static json_object *rules_json(struct ab_session *s, bool deny)
{
	const char *v[NET_OP_MAX_PATTERNS * 4];
	size_t n = ab_session_net_rules(s, deny, v, sizeof(v) / sizeof(v[0]));
	json_object *a = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_string(v[i]));
	return a;
}

json_object *ab_net_op(struct ab_session *s, json_object *req, struct ab_error *err)
{
	const char **allow = NULL, **deny = NULL;
	size_t na = 0, nd = 0;
	json_object *o = NULL;
	if (patterns(req, "allow", &allow, &na, err) == 0 &&
	    patterns(req, "deny", &deny, &nd, err) == 0 &&
	    (allow || deny || ab_session_net_report(s) ||
	     ab_error_plain(err, EINVAL,
			    "the session has no network proxy (start it with --net allow=)") ==
		     0) &&
	    ((!allow && !deny) ||
	     ab_session_net(s, (char *const *)allow, na, (char *const *)deny, nd, err) == 0)) {
		o = json_object_new_object();
		json_object_object_add(o, "type", json_object_new_string("net"));
		json_object_object_add(o, "allow", rules_json(s, false));
		json_object_object_add(o, "deny", rules_json(s, true));
		json_object_object_add(o, "network", ab_net_report_json(ab_session_net_report(s)));
	}
	free(allow);
	free(deny);
	return o;
}
