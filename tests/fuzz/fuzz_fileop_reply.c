/* The launcher's half of the file operations (src/files/fileop_check.c):
 * fileop_reply() reads the JSON reply a process inside the sandbox wrote
 * (untrusted), fileop_prepare() checks a request object from the client.
 *
 * Input: one byte, then the data. The byte's low bits choose the
 * operation; its high bit chooses fileop_prepare (the data is a request
 * object) over fileop_reply (the data is the reply). Whatever either
 * returns must serialise to one line of strict, valid UTF-8 JSON: the
 * protocol's own framing. */
#include <string.h>

#include <json-c/json.h>

#include "files/fileop.h"
#include "fuzz.h"

static const char *const ops[] = {"read",     "write",	      "edit",	    "ls",
				  "glob",     "grep",	      "delete",	    "upload",
				  "download", "resolve_path", "place_file", "clear_dir"};

/* s must be one object of strict JSON in valid UTF-8, on one line. */
static void check_line(const char *s, size_t n)
{
	FUZZ_CHECK(!memchr(s, '\n', n));
	json_tokener *tok = json_tokener_new();
	FUZZ_CHECK(tok);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	json_object *o = json_tokener_parse_ex(tok, s, (int)n);
	FUZZ_CHECK(o && json_tokener_get_error(tok) == json_tokener_success &&
		   json_tokener_get_parse_end(tok) == n);
	FUZZ_CHECK(json_object_is_type(o, json_type_object));
	json_tokener_free(tok);
	json_object_put(o);
}

static void reply(const char *op, const char *data, size_t n)
{
	json_object *id = json_object_new_int(7);
	struct ab_error err = {0};
	json_object *o = fileop_reply(op, id, data, n, &err);
	json_object_put(id);
	if (!o) {
		FUZZ_CHECK(err.msg[0]);
		return;
	}
	json_object *type;
	FUZZ_CHECK(json_object_object_get_ex(o, "type", &type));
	size_t len;
	const char *s = json_object_to_json_string_length(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	check_line(s, len);
	json_object_put(o);
}

static void prepare(const char *op, const char *data, size_t n)
{
	json_tokener *tok = json_tokener_new();
	FUZZ_CHECK(tok);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	json_object *req = json_tokener_parse_ex(tok, data, (int)n);
	json_tokener_free(tok);
	if (!json_object_is_type(req, json_type_object)) {
		json_object_put(req);
		return;
	}
	char *inner = NULL;
	struct ab_error err = {0};
	if (fileop_prepare(req, op, &inner, &err) == 0) {
		FUZZ_CHECK(inner);
		check_line(inner, strlen(inner));
		free(inner);
	} else {
		FUZZ_CHECK(!inner && err.kind != AB_ERRC_NONE && err.msg[0]);
	}
	json_object_put(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > (64u << 20))
		return 0;
	const char *op = ops[(data[0] & 0x7f) % (sizeof(ops) / sizeof(ops[0]))];
	if (data[0] & 0x80)
		prepare(op, (const char *)data + 1, size - 1);
	else
		reply(op, (const char *)data + 1, size - 1);
	return 0;
}
