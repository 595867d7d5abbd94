/* The typed request builders (front/request.h): a request built from C
 * values is the one the same values in a line make, checked by the same
 * code (the same errors), and a builder asked for one kind of op gives
 * no other. */
#include <criterion/criterion.h>
#include <string.h>

#include "front/request.h"

/* The line for the same values, parsed. */
static void parse(const char *line, struct ab_request *q)
{
	struct ab_error e = {0};
	cr_assert_eq(ab_request_parse(line, strlen(line), q, &e), 0, "%s: %s", line, e.msg);
}

Test(request_build, exec_as_its_line)
{
	const char *argv[] = {"/bin/echo", "hi", NULL};
	const char *env[] = {"A=1", "B=x=y", NULL};
	struct ab_request_exec_args a = {.argv = argv,
					 .cwd = "/workspace/sub",
					 .env = env,
					 .timeout_s = 1.5,
					 .merge_output = true,
					 .stream = true,
					 .base64 = true};
	json_object *id = json_object_new_string("x1");
	struct ab_request q, l;
	struct ab_error e = {0};
	cr_assert_eq(ab_request_exec(&q, id, &a, &e), 0, "%s", e.msg);
	parse("{\"op\":\"exec\",\"id\":\"x1\",\"argv\":[\"/bin/echo\",\"hi\"],\"cwd\":"
	      "\"/workspace/sub\",\"env\":{\"A\":\"1\",\"B\":\"x=y\"},\"timeout\":1.5,"
	      "\"merge_output\":true,\"stream\":true,\"encoding\":\"base64\"}",
	      &l);
	cr_assert_eq(q.kind, AB_REQUEST_EXEC);
	cr_assert(json_object_equal(q.id, l.id));
	cr_assert_str_eq(q.x.argv[0], "/bin/echo");
	cr_assert_str_eq(q.x.argv[1], "hi");
	cr_assert_null(q.x.argv[2]);
	cr_assert_str_eq(q.x.cwd, l.x.cwd);
	cr_assert_str_eq(q.env[0], "A=1");
	cr_assert_str_eq(q.env[1], "B=x=y");
	cr_assert_eq(q.x.timeout_ms, 1500);
	cr_assert_eq(q.x.timeout_ms, l.x.timeout_ms);
	cr_assert(q.x.merge_output && q.merged && q.x.stream && q.base64);
	cr_assert(json_object_equal(q.req, l.req), "%s", json_object_to_json_string(q.req));
	ab_request_clear(&q);
	ab_request_clear(&l);
	json_object_put(id);
}

Test(request_build, exec_errors_as_a_line)
{
	const char *argv[] = {"/bin/true", NULL};
	struct ab_request q;
	struct ab_error e = {0};
	struct ab_request_exec_args both = {.command = "true", .argv = argv, .timeout_s = -1};
	cr_assert_lt(ab_request_exec(&q, NULL, &both, &e), 0);
	cr_assert_eq(e.kind, AB_ERRC_INVALID_REQUEST); /* the id first, as a line's */
	ab_request_clear(&q);
	json_object *id = json_object_new_int(7);
	e = (struct ab_error){0};
	cr_assert_lt(ab_request_exec(&q, id, &both, &e), 0);
	cr_assert(strstr(e.msg, "exactly one of 'command'"), "%s", e.msg);
	ab_request_clear(&q);
	struct ab_request_exec_args late = {.command = "true", .timeout_s = 2e7};
	e = (struct ab_error){0};
	cr_assert_lt(ab_request_exec(&q, id, &late, &e), 0);
	cr_assert(strstr(e.msg, "'timeout' must be a number of seconds"), "%s", e.msg);
	ab_request_clear(&q);
	const char *bad_env[] = {"NOVALUE", NULL};
	struct ab_request_exec_args env = {.command = "true", .env = bad_env, .timeout_s = -1};
	e = (struct ab_error){0};
	cr_assert_lt(ab_request_exec(&q, id, &env, &e), 0);
	cr_assert(strstr(e.msg, "NAME=VALUE"), "%s", e.msg);
	ab_request_clear(&q);
	json_object_put(id);
}

Test(request_build, file_op_and_layer)
{
	json_object *id = json_object_new_int(3);
	struct ab_request q;
	struct ab_error e = {0};
	json_object *f = json_object_new_object();
	json_object_object_add(f, "path", json_object_new_string("/workspace/a"));
	cr_assert_eq(ab_request_file_op(&q, id, "read", f, 5, &e), 0, "%s", e.msg);
	cr_assert_eq(q.kind, AB_REQUEST_FILE_OP);
	cr_assert_str_eq(q.file_op, "read");
	cr_assert_eq(q.x.timeout_ms, 5000);
	cr_assert_not_null(q.x.file_op);
	ab_request_clear(&q);
	/* a field the op does not have: the line's error */
	f = json_object_new_object();
	json_object_object_add(f, "nope", json_object_new_int(1));
	e = (struct ab_error){0};
	cr_assert_lt(ab_request_file_op(&q, id, "ls", f, -1, &e), 0);
	cr_assert_eq(e.kind, AB_ERRC_INVALID_REQUEST);
	ab_request_clear(&q);
	/* fields cannot rename the op, nor a builder make another kind */
	f = json_object_new_object();
	json_object_object_add(f, "op", json_object_new_string("exec"));
	e = (struct ab_error){0};
	cr_assert_lt(ab_request_file_op(&q, id, "ls", f, -1, &e), 0);
	ab_request_clear(&q);
	f = json_object_new_object();
	json_object_object_add(f, "command", json_object_new_string("true"));
	e = (struct ab_error){0};
	cr_assert_lt(ab_request_file_op(&q, id, "exec", f, -1, &e), 0);
	cr_assert_eq(e.kind, AB_ERRC_UNKNOWN_OP);
	ab_request_clear(&q);
	e = (struct ab_error){0};
	cr_assert_eq(ab_request_layer(&q, id, "changes", NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(q.kind, AB_REQUEST_LAYER);
	cr_assert_str_eq(q.op, "changes");
	ab_request_clear(&q);
	e = (struct ab_error){0};
	cr_assert_lt(ab_request_layer(&q, id, "ping", NULL, &e), 0);
	ab_request_clear(&q);
	json_object_put(id);
}

/* A request object (MCP's) is checked as the line it would be. */
Test(request_build, object_as_its_line)
{
	const char *line = "{\"op\":\"exec\",\"id\":9,\"command\":\"echo a\",\"timeout\":2}";
	struct ab_request q, l;
	struct ab_error e = {0};
	cr_assert_eq(ab_request_object(json_tokener_parse(line), false, &q, &e), 0, "%s", e.msg);
	parse(line, &l);
	cr_assert_str_eq(q.x.argv[3], "echo a");
	cr_assert_str_eq(q.x.argv[0], l.x.argv[0]);
	cr_assert_eq(q.x.timeout_ms, l.x.timeout_ms);
	ab_request_clear(&q);
	ab_request_clear(&l);
	e = (struct ab_error){0};
	cr_assert_lt(ab_request_object(json_object_new_array(), false, &q, &e), 0);
	cr_assert_eq(e.kind, AB_ERRC_INVALID_JSON);
	ab_request_clear(&q);
}
