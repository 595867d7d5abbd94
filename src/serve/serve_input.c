/* The stdin, resize and signal ops of agentbox serve (serve_input.h): the
 * engine's ab_front_input, its answers in the protocol's words. */
#include "serve/serve_input.h"

#include <errno.h>

#include "util/error.h"

int serve_input(struct ab_front *f, struct ab_front_req *r, const struct ab_request *q,
		struct ab_error *e)
{
	struct ab_error why = {0};
	int rc = ab_front_input(f, r, q, &why);
	if (rc >= 0)
		return rc;
	if (rc == -ESRCH)
		return ab_error_proto(e, AB_ERRC_INVALID_REQUEST,
				      "%s: no command with this target id is running", q->op);
	if (rc == -EAGAIN)
		return ab_error_proto(e, AB_ERRC_BUSY,
				      "%s: the target is queued and has not started yet; send it "
				      "again once the command runs",
				      q->op);
	if (rc == -EBUSY)
		return ab_error_proto(e, AB_ERRC_BUSY, "%s: %s", q->op, why.msg);
	if (q->kind == AB_REQUEST_SIGNAL)
		return ab_error_proto(e, AB_ERRC_INVALID_REQUEST, "signal: cannot send it");
	if (rc == -ENOMEM || rc == -EIO)
		return ab_error_proto(e, AB_ERRC_INTERNAL, "%s: %s", q->op, why.msg);
	return ab_error_proto(e, AB_ERRC_INVALID_REQUEST, "%s: %s", q->op, why.msg);
}

bool serve_input_kind(enum ab_request_op kind)
{
	return kind == AB_REQUEST_STDIN || kind == AB_REQUEST_RESIZE || kind == AB_REQUEST_SIGNAL;
}

json_object *serve_input_ok(json_object *id, const char *op)
{
	json_object *ok = json_object_new_object();
	json_object_object_add(ok, "type", json_object_new_string("ok"));
	json_object_object_add(ok, "id", json_object_get(id));
	json_object_object_add(ok, "op", json_object_new_string(op));
	return ok;
}

json_object *serve_input_answer(json_object **id, const struct ab_error *err)
{
	json_object *o = serve_input_ok(*id, "stdin");
	if (err) {
		json_object_put(o);
		o = json_object_new_object();
		json_object_object_add(o, "type", json_object_new_string("error"));
		json_object_object_add(o, "id", json_object_get(*id));
		json_object_object_add(
			o, "code", json_object_new_string(ab_errc_name(AB_ERRC_INVALID_REQUEST)));
		json_object_object_add(o, "message", json_object_new_string(err->msg));
	}
	json_object_put(*id);
	*id = NULL;
	return o;
}

void serve_input_features(json_object *features)
{
	json_object_array_add(features, json_object_new_string("stdin_stream"));
	json_object_array_add(features, json_object_new_string("pty"));
	json_object_array_add(features, json_object_new_string("signal"));
	json_object_array_add(features, json_object_new_string("watch"));
}
