/* agentbox runtime's file routes after their path is known (rt_int.h):
 * the guard's verdict (a path that resolves out of /workspace is main.py's
 * 403; resolve_path, fileop_guard.c), then /upload, /download and /list from the session's file
 * operations, a file moved in chunks of one operation each. */
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "httpapi/rt_int.h"
#include "httpapi/rt_reply.h"

/* The guard's verdict (resolve_path: the path's symlinks resolved in the
 * view): what it resolves to, inside /workspace, or 403. The operation
 * then uses the resolved path. */
void rt_guard_done(struct rt *rt, struct req *r, const struct ab_result *res)
{
	bool ok, exists = false;
	const char *code;
	char text[600];
	json_object *reply = rt_op_reply(r, res, &ok, &code, text, sizeof(text));
	const char *p = ok ? json_object_get_string(json_object_object_get(reply, "path")) : NULL;
	size_t n = p ? strlen(p) : 0, b = strlen(BASE);
	bool inside = n >= b && !memcmp(p, BASE, b) && (n == b || p[b] == '/');
	if (!p || n >= sizeof(r->view)) {
		char msg[800];
		snprintf(msg, sizeof(msg), "%s failed: the path could not be resolved (%s)",
			 r->route == R_UPLOAD ? "File upload" : "Path check", text);
		json_object_put(reply);
		rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR, msg);
		return;
	}
	if (inside) {
		snprintf(r->view, sizeof(r->view), "%s", p);
		exists = json_object_get_boolean(json_object_object_get(reply, "exists"));
	}
	json_object_put(reply);
	if (!inside) {
		rt_answer_msg(r, MHD_HTTP_FORBIDDEN, "Access denied");
		return;
	}
	if (r->route == R_EXISTS) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "path", json_object_new_string(r->name));
		json_object_object_add(o, "exists", json_object_new_boolean(exists));
		rt_answer(r, MHD_HTTP_OK,
			  strdup(json_object_to_json_string_ext(
				  o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)));
		json_object_put(o);
		return;
	}
	if (!exists && r->route == R_DOWNLOAD) {
		rt_answer_msg(r, MHD_HTTP_NOT_FOUND, "File not found");
		return;
	}
	if (!exists && r->route == R_LIST) {
		rt_answer_msg(r, MHD_HTTP_NOT_FOUND, "Path is not a directory");
		return;
	}
	rt_start_op(rt, r);
}

void rt_download_chunk(struct req *r, json_object *reply)
{
	const char *b64 = json_object_get_string(json_object_object_get(reply, "data"));
	int64_t size = json_object_get_int64(json_object_object_get(reply, "size"));
	bool eof = json_object_get_boolean(json_object_object_get(reply, "eof"));
	size_t n = 0;
	char *bytes = b64 ? base64_decode(b64, strlen(b64), &n, NULL) : NULL;
	if (size > (int64_t)DOWNLOAD_MAX || r->data_len + n > DOWNLOAD_MAX) {
		free(bytes);
		rt_answer_msg(r, MHD_HTTP_CONTENT_TOO_LARGE,
			      "File too large to download (at most 32 MiB)");
		return;
	}
	char *d = bytes ? realloc(r->data, r->data_len + n + 1) : NULL;
	if (!d) {
		free(bytes);
		rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "Download failed: a bad reply");
		return;
	}
	memcpy(d + r->data_len, bytes, n);
	free(bytes);
	r->data = d;
	r->data_len += n;
	r->off += n;
	if (!eof && n) {
		rt_start_op(r->rt, r);
		return;
	}
	r->status = MHD_HTTP_OK;
	r->step = S_DONE;
	if (r->route != R_V1_FILE)
		r->disposition = rt_disposition(r->name);
}

json_object *rt_op_reply(struct req *r, const struct ab_result *res, bool *ok, const char **code,
			 char *text, size_t size)
{
	struct ab_error e = {0};
	json_object *reply = NULL;
	if (!res->timed_out && res->exit_code == 0 && !res->out.truncated)
		reply = fileop_reply(r->fr.q.file_op, r->fr.q.id,
				     res->out.data ? res->out.data : "", res->out.len, &e);
	const char *type = json_object_get_string(json_object_object_get(reply, "type"));
	const char *msg = json_object_get_string(json_object_object_get(reply, "message"));
	*code = json_object_get_string(json_object_object_get(reply, "code"));
	*ok = type && !strcmp(type, "result");
	if (!reply)
		snprintf(text, size, "%.500s",
			 res->timed_out ? "the operation timed out"
			 : e.msg[0]	? e.msg
					: "the operation failed");
	else
		snprintf(text, size, "%.500s", msg ? msg : "");
	return reply;
}

/* The file operation's reply into the route's answer. */
void rt_op_done(struct req *r, const struct ab_result *res)
{
	bool ok;
	const char *code;
	char text[600];
	json_object *reply = rt_op_reply(r, res, &ok, &code, text, sizeof(text));
	if (r->route == R_UPLOAD) {
		char m[800];
		if (ok && r->off + r->chunk < r->len) { /* the next chunk */
			r->off += r->chunk;
			json_object_put(reply);
			rt_start_op(r->rt, r);
			return;
		}
		if (ok)
			snprintf(m, sizeof(m), "File '%s' uploaded successfully.", r->name);
		else
			snprintf(m, sizeof(m), "File upload failed: %s", text);
		rt_answer_msg(r, ok ? MHD_HTTP_OK : MHD_HTTP_INTERNAL_SERVER_ERROR, m);
	} else if (r->route == R_LIST) {
		if (ok) {
			rt_answer(r, MHD_HTTP_OK, rt_list_body(reply));
		} else if (code &&
			   (!strcmp(code, "not_directory") || !strcmp(code, "file_not_found"))) {
			rt_answer_msg(r, MHD_HTTP_NOT_FOUND, "Path is not a directory");
		} else {
			char m[700];
			snprintf(m, sizeof(m), "List files failed: %s", text);
			rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR, m);
		}
	} else if (ok) {
		rt_download_chunk(r, reply);
	} else if (code && !strcmp(code, "too_large")) {
		rt_answer_msg(r, MHD_HTTP_CONTENT_TOO_LARGE,
			      "File too large to download (at most 32 MiB)");
	} else if (code && (!strcmp(code, "is_directory") || !strcmp(code, "file_not_found") ||
			    !strcmp(code, "not_directory") || !strcmp(code, "invalid_path"))) {
		rt_answer_msg(r, MHD_HTTP_NOT_FOUND, "File not found");
	} else {
		char m[700];
		snprintf(m, sizeof(m), "Download failed: %s", text);
		rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR, m);
	}
	json_object_put(reply);
}
