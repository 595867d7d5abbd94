/* agentbox serve's request parser (src/front/request.c): one line from the
 * client, any bytes. It must answer every line with a parsed request or
 * an error code and message, never crash, never leak; and find the id at
 * the start of a line too long to parse, or none. */
#include <string.h>

#include "util/error.h"
#include "fuzz.h"
#include "front/request.h"

static const char *const codes[] = {"invalid_json", "invalid_request", "invalid_path",
				    "unknown_op",   "internal",	       "too_large"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ab_request q;
	struct ab_error e = {0};
	int rc = ab_request_parse((const char *)data, size, &q, &e);
	FUZZ_CHECK(rc == 1 || rc == 0 || (rc < 0 && rc == -e.code));
	if (rc == 1) {
		/* blank: only whitespace, which a NUL byte is not */
		FUZZ_CHECK(!q.req && !q.id && !q.op);
		for (size_t i = 0; i < size; i++)
			FUZZ_CHECK(data[i] == ' ' || data[i] == '\t' || data[i] == '\r');
		return 0;
	}
	if (rc < 0) {
		bool known = false;
		for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
			known = known || strcmp(ab_errc_name(e.kind), codes[i]) == 0;
		FUZZ_CHECK(known);
		FUZZ_CHECK(memchr(e.msg, '\0', sizeof(e.msg)) && e.msg[0]);
		FUZZ_CHECK(!q.op || q.id);
	} else {
		FUZZ_CHECK(q.req && q.id && q.op && q.kind != AB_REQUEST_UNKNOWN);
		/* the op is the whole string, and the line is the object */
		json_object *opv;
		FUZZ_CHECK(json_object_object_get_ex(q.req, "op", &opv) &&
			   strlen(q.op) == (size_t)json_object_get_string_len(opv));
		FUZZ_CHECK(!memchr(data, '\0', size));
		/* what the session would get: walk it all */
		size_t total = 0;
		for (char *const *a = q.x.argv; a && *a; a++)
			total += strlen(*a);
		for (char *const *v = q.x.env; v && *v; v++)
			FUZZ_CHECK(strchr(*v, '='));
		if (q.kind == AB_REQUEST_EXEC)
			FUZZ_CHECK(q.x.argv && q.x.argv[0][0] && !q.x.file_op);
		if (q.kind == AB_REQUEST_FILE_OP) {
			FUZZ_CHECK(q.x.file_op && q.file_op && !q.x.argv);
			/* the request the sandbox gets is one JSON object */
			json_object *inner = json_tokener_parse(q.x.file_op);
			FUZZ_CHECK(json_object_is_type(inner, json_type_object));
			json_object_put(inner);
		}
		if (q.kind == AB_REQUEST_CANCEL)
			FUZZ_CHECK(q.target);
		if (q.x.stdin_data)
			total += q.x.stdin_len;
		(void)total;
	}
	ab_request_clear(&q);
	/* the same bytes as the start of a line too long to parse: an id
	 * found there is a valid one (a string of 1 to 256 bytes, or an
	 * integer) */
	json_object *id = ab_request_scan_id((const char *)data, size);
	if (id) {
		int n = json_object_get_string_len(id);
		FUZZ_CHECK(json_object_is_type(id, json_type_int) ||
			   (json_object_is_type(id, json_type_string) && n >= 1 &&
			    n <= AB_REQUEST_MAX_ID_LEN));
	}
	json_object_put(id);
	return 0;
}
