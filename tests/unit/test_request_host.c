/* Host paths in file operations (docs/protocol.md, "Host files"): only
 * agentbox serve's parser (ab_request_parse_host) takes upload "from" and
 * download "to"; the parser the MCP server and the runtime use
 * (ab_request_parse) refuses them as unknown fields, so neither a model's
 * tool call nor an HTTP request can name a file of the host. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files/fileop_host.h"
#include "front/request.h"

static int parse(bool host, const char *line, struct ab_request *q, struct ab_error *e)
{
	*e = (struct ab_error){0};
	return host ? ab_request_parse_host(line, strlen(line), q, e)
		    : ab_request_parse(line, strlen(line), q, e);
}

Test(request_host, refused_without_host_files)
{
	static const char *const lines[] = {
		"{\"op\":\"upload\",\"id\":1,\"path\":\"a\",\"from\":\"/etc/passwd\"}",
		"{\"op\":\"download\",\"id\":1,\"path\":\"a\",\"to\":\"/tmp/x\"}",
	};
	for (size_t i = 0; i < 2; i++) {
		struct ab_request q;
		struct ab_error e;
		cr_assert_lt(parse(false, lines[i], &q, &e), 0, "%s", lines[i]);
		cr_assert_eq(e.kind, AB_ERRC_INVALID_REQUEST);
		cr_assert(strstr(e.msg, i ? "unknown field 'to'" : "unknown field 'from'"), "%s",
			  e.msg);
		cr_assert_null(q.host);
		ab_request_clear(&q);
	}
}

Test(request_host, taken_with_host_files)
{
	struct ab_request q;
	struct ab_error e;
	cr_assert_eq(parse(true,
			   "{\"op\":\"upload\",\"id\":1,\"path\":\"a\",\"from\":\"/etc/passwd\"}",
			   &q, &e),
		     0, "%s", e.msg);
	cr_assert_not_null(q.host);
	cr_assert(strstr(q.inner, "\"op\":\"upload_from\""), "%s", q.inner);
	ab_request_clear(&q);
	/* a directory is not a source; a missing directory is no target */
	cr_assert_lt(parse(true, "{\"op\":\"upload\",\"id\":1,\"path\":\"a\",\"from\":\"/etc\"}",
			   &q, &e),
		     0);
	cr_assert_eq(e.kind, AB_ERRC_IS_DIRECTORY, "%s", e.msg);
	ab_request_clear(&q);
	cr_assert_lt(
		parse(true,
		      "{\"op\":\"download\",\"id\":1,\"path\":\"a\",\"to\":\"/nonexistent-dir/x\"}",
		      &q, &e),
		0);
	cr_assert_eq(e.kind, AB_ERRC_FILE_NOT_FOUND, "%s", e.msg);
	cr_assert(strstr(e.msg, "'to'"), "%s", e.msg);
	ab_request_clear(&q);
}
