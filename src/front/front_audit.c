/* The audit log of agentbox serve (--audit-log, docs/protocol.md "Audit
 * log"): one JSON line for each request, result and error, saying what was
 * asked but never the data. */
#include "front/front_audit.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "util/output.h"
#include "session/result.h"

static json_object *id_copy(json_object *id)
{
	return id ? json_object_get(id) : NULL;
}

json_object *front_audit_entry(const char *event)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char when[64];
	snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "time", json_object_new_string(when));
	json_object_object_add(o, "event", json_object_new_string(event));
	return o;
}

void front_audit_write(int *fd, json_object *o)
{
	struct ab_error err;
	if (*fd >= 0 && ab_json_write_line(o, *fd, &err) < 0) {
		fprintf(stderr, "agentbox: --audit-log: %s\n", err.msg);
		close(*fd);
		*fd = -1;
	}
	json_object_put(o);
}

void front_audit_error(int *fd, json_object *id, const char *code)
{
	if (*fd < 0)
		return;
	json_object *o = front_audit_entry("error");
	json_object_object_add(o, "id", id_copy(id));
	json_object_object_add(o, "code", json_object_new_string(code));
	front_audit_write(fd, o);
}

void front_audit_request(int *fd, json_object *req, const char *op)
{
	if (*fd < 0)
		return;
	json_object *o = front_audit_entry("request");
	json_object *v;
	json_object_object_add(o, "id", id_copy(json_object_object_get(req, "id")));
	json_object_object_add(o, "op", json_object_new_string(op));
	/* what was asked, not the data: no file content, no stdin */
	const char *keep[] = {"command",	 "argv", "cwd",	    "timeout",	 "target",
			      "keep_background", "path", "pattern", "recursive", "overwrite",
			      "allow",		 "deny"}; /* op net */
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		if (json_object_object_get_ex(req, keep[i], &v))
			json_object_object_add(o, keep[i], json_object_get(v));
	if (json_object_object_get_ex(req, "env", &v) && json_object_is_type(v, json_type_object)) {
		/* names only: values may be secrets */
		json_object *names = json_object_new_array();
		json_object_object_foreach(v, k, val)
		{
			(void)val;
			json_object_array_add(names, json_object_new_string(k));
		}
		json_object_object_add(o, "env", names);
	}
	if (json_object_object_get_ex(req, "stdin", &v))
		json_object_object_add(o, "stdin_bytes",
				       json_object_new_int(json_object_get_string_len(v)));
	front_audit_write(fd, o);
}

void front_audit_result(int *fd, json_object *id, const struct ab_result *res, const char *code)
{
	if (*fd < 0)
		return;
	json_object *o = front_audit_entry("result");
	json_object_object_add(o, "id", id_copy(id));
	if (res) {
		json_object *f = ab_result_fields_json(res, true, false, false, false);
		const char *keep[] = {"exit_code", "signal",	      "duration_ms",
				      "timed_out", "denied_syscalls", "network"};
		for (size_t i = 0; f && i < sizeof(keep) / sizeof(keep[0]); i++) {
			json_object *v;
			if (json_object_object_get_ex(f, keep[i], &v))
				json_object_object_add(o, keep[i], json_object_get(v));
		}
		json_object_put(f);
		json_object_object_add(
			o, "truncated",
			json_object_new_boolean(res->out.truncated || res->err.truncated));
		json_object_object_add(o, "cancelled", json_object_new_boolean(res->cancelled));
	}
	json_object_object_add(o, "error", code ? json_object_new_string(code) : NULL);
	front_audit_write(fd, o);
}
