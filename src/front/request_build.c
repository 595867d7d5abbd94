/* Requests from C values (request.h): each is built as the object a line
 * would hold, in the order a client writes it (op and id first), and
 * checked by request.c as a line is, so a front that is not JSON lines
 * gets the same checks and the same messages without writing JSON to
 * parse it back. */
#include "front/request.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static json_object *request_head(const char *op, json_object *id)
{
	json_object *o = json_object_new_object();
	if (!o)
		return NULL;
	json_object_object_add(o, "op", json_object_new_string(op));
	json_object_object_add(o, "id", id ? json_object_get(id) : NULL);
	return o;
}

/* A number of seconds, as an integer when it is one. */
static json_object *seconds(double s)
{
	if (s == (double)(int64_t)s)
		return json_object_new_int64((int64_t)s);
	return json_object_new_double(s);
}

/* fields' members (fields taken) after op and id; -1 when one would
 * replace them. */
static int add_fields(json_object *o, json_object *fields)
{
	int rc = 0;
	json_object_object_foreach(fields, k, v)
	{
		if (!strcmp(k, "op") || !strcmp(k, "id"))
			rc = -1;
		else
			json_object_object_add(o, k, json_object_get(v));
	}
	json_object_put(fields);
	return rc;
}

/* o (taken) checked as a request of kind. */
static int check(struct ab_request *q, json_object *o, const char *op, enum ab_request_op kind,
		 struct ab_error *e)
{
	int rc = ab_request_object(o, false, q, e);
	if (rc == 0 && q->kind != kind)
		rc = ab_error_proto(e, AB_ERRC_UNKNOWN_OP, "'%.64s' is not an op of this kind", op);
	return rc;
}

/* "NAME=VALUE" strings into env's members (a name given twice: the last
 * value, as os/exec takes it); -1 for one without '=' or out of memory. */
static int add_env(json_object *env, const char *const *vars)
{
	for (size_t i = 0; vars[i]; i++) {
		const char *eq = strchr(vars[i], '=');
		if (!eq || eq == vars[i])
			return -1;
		char *name = strndup(vars[i], (size_t)(eq - vars[i]));
		if (!name)
			return -1;
		json_object_object_add(env, name, json_object_new_string(eq + 1));
		free(name);
	}
	return 0;
}

static void exec_stdin_pty(json_object *o, const struct ab_request_exec_args *a)
{
	if (a->stdin_stream) {
		json_object *st = json_object_new_object();
		json_object_object_add(st, "stream", json_object_new_boolean(true));
		json_object_object_add(o, "stdin", st);
	} else if (a->stdin_data) {
		json_object_object_add(
			o, "stdin", json_object_new_string_len(a->stdin_data, (int)a->stdin_len));
	}
	if (a->pty_rows || a->pty_cols) {
		json_object *p = json_object_new_object();
		json_object_object_add(p, "rows", json_object_new_int64(a->pty_rows));
		json_object_object_add(p, "cols", json_object_new_int64(a->pty_cols));
		json_object_object_add(o, "pty", p);
	}
}

int ab_request_exec(struct ab_request *q, json_object *id, const struct ab_request_exec_args *a,
		    struct ab_error *e)
{
	*q = (struct ab_request){.kind = AB_REQUEST_UNKNOWN};
	json_object *o = request_head("exec", id);
	if (!o)
		return ab_error_proto(e, AB_ERRC_INTERNAL, "out of memory");
	if (a->command)
		json_object_object_add(o, "command", json_object_new_string(a->command));
	if (a->argv) {
		json_object *v = json_object_new_array();
		for (size_t i = 0; a->argv[i]; i++)
			json_object_array_add(v, json_object_new_string(a->argv[i]));
		json_object_object_add(o, "argv", v);
	}
	if (a->cwd)
		json_object_object_add(o, "cwd", json_object_new_string(a->cwd));
	if (a->env) {
		json_object *env = json_object_new_object();
		json_object_object_add(o, "env", env);
		if (add_env(env, a->env) < 0) {
			json_object_put(o);
			return ab_error_proto(e, AB_ERRC_INVALID_REQUEST,
					      "exec: each env entry must be NAME=VALUE");
		}
	}
	if (a->timeout_s >= 0)
		json_object_object_add(o, "timeout", seconds(a->timeout_s));
	exec_stdin_pty(o, a);
	if (a->max_output)
		json_object_object_add(o, "max_output",
				       json_object_new_int64((int64_t)a->max_output));
	const struct {
		const char *name;
		bool on;
	} flags[] = {{"merge_output", a->merge_output},
		     {"stream", a->stream},
		     {"keep_background", a->keep_background}};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (flags[i].on)
			json_object_object_add(o, flags[i].name, json_object_new_boolean(true));
	if (a->base64)
		json_object_object_add(o, "encoding", json_object_new_string("base64"));
	return check(q, o, "exec", AB_REQUEST_EXEC, e);
}

/* op and id, then fields (taken), then the timeout (< 0: none). */
static int build(struct ab_request *q, json_object *id, const char *op, json_object *fields,
		 double timeout_s, enum ab_request_op kind, struct ab_error *e)
{
	*q = (struct ab_request){.kind = AB_REQUEST_UNKNOWN};
	json_object *o = request_head(op, id);
	if (!o) {
		json_object_put(fields);
		return ab_error_proto(e, AB_ERRC_INTERNAL, "out of memory");
	}
	if (fields && add_fields(o, fields) < 0) {
		json_object_put(o);
		return ab_error_proto(e, AB_ERRC_INVALID_REQUEST,
				      "%.64s: 'op' and 'id' are not fields of an op", op);
	}
	if (timeout_s >= 0)
		json_object_object_add(o, "timeout", seconds(timeout_s));
	return check(q, o, op, kind, e);
}

int ab_request_file_op(struct ab_request *q, json_object *id, const char *op, json_object *fields,
		       double timeout_s, struct ab_error *e)
{
	return build(q, id, op, fields, timeout_s, AB_REQUEST_FILE_OP, e);
}

int ab_request_layer(struct ab_request *q, json_object *id, const char *op, json_object *fields,
		     struct ab_error *e)
{
	return build(q, id, op, fields, -1, AB_REQUEST_LAYER, e);
}
