/* A watch's messages in the JSON-lines protocol (docs/protocol.md,
 * "watch"): each file event the front engine hands on, and the watch's
 * end. */
#include "serve/serve_int.h"

#include <json-c/json.h>

#include "util/error.h"

json_object *serve_watch_event(json_object *id, const struct ab_watch_event *ev)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("event"));
	json_object_object_add(o, "id", json_object_get(id));
	watch_event_fields(o, ev);
	return o;
}

json_object *serve_watch_end(json_object *id, const struct watch_lines *w,
			     const struct ab_result *res)
{
	struct ab_error err = {0};
	if (w && w->failed)
		err = w->err;
	else if (!res->cancelled && !res->timed_out)
		ab_error_proto(&err, AB_ERRC_INTERNAL, "the watch ended (exit status %d%s)",
			       res->exit_code, res->oom_killed ? ", out of memory" : "");
	json_object *o = json_object_new_object();
	if (err.msg[0]) {
		json_object_object_add(o, "type", json_object_new_string("error"));
		json_object_object_add(o, "id", json_object_get(id));
		json_object_object_add(o, "code",
				       json_object_new_string(ab_errc_name(ab_error_errc(&err))));
		json_object_object_add(o, "message", json_object_new_string(err.msg));
		return o;
	}
	json_object_object_add(o, "type", json_object_new_string("result"));
	json_object_object_add(o, "id", json_object_get(id));
	json_object_object_add(o, "op", json_object_new_string("watch"));
	json_object_object_add(o, "events", json_object_new_int64(w ? (int64_t)w->events : 0));
	json_object_object_add(o, "cancelled", json_object_new_boolean(res->cancelled));
	json_object_object_add(o, "timed_out", json_object_new_boolean(res->timed_out));
	return o;
}
