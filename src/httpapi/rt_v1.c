/* agentbox runtime's sandboxd REST API (agent-sandbox's KEP-539.2,
 * packages/sandboxd/spec/filesystem/v1/filesystem.yaml): /v1/files/{path}
 * (GET a file's bytes or a directory's listing, HEAD, PUT with a temp file
 * and a rename, DELETE), /v1/stat/{path} (sandboxd v1.0.12's single-path
 * stat, its form assumed: docs/kubernetes.md), /v1/health and /v1/metadata,
 * beside the legacy
 * routes on the same listener. As sandboxd resolves them, a path is taken
 * below /workspace (an absolute one under it as it is, any other rerooted),
 * then its symlinks are resolved inside the sandbox (resolve_path, as
 * realpath): what lands outside /workspace is 403. Every operation runs in
 * the sandbox, whose view is the guard: the protocol's file operations and
 * the runtime's inner ones (place_file, clear_dir; fileop_guard.c), no
 * shell. */
#include <errno.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lex/rtpath.h"
#include "httpapi/rt_int.h"
#include "httpapi/rt_reply.h"

extern char **environ;

static void answer_text(struct req *r, unsigned status, const char *text)
{
	rt_answer(r, status, strdup(text));
	r->ctype = "text/plain; charset=utf-8";
}

/* ---- routes ---- */

bool rt_v1_route(const char *url, const char *method, struct req *r, const char **rest)
{
	if (strncmp(url, "/v1/", 4))
		return false;
	*rest = "";
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	r->head = !strcmp(method, "HEAD");
	if (!strncmp(url, "/v1/files/", 10)) {
		r->route = R_V1_FILE;
		*rest = url + 10;
		r->put = !strcmp(method, "PUT");
		r->del = !strcmp(method, "DELETE");
		if (!get && !r->put && !r->del)
			answer_text(r, MHD_HTTP_METHOD_NOT_ALLOWED, "Method Not Allowed\n");
	} else if (!strncmp(url, "/v1/stat/", 9)) { /* sandboxd v1.0.12's stat (assumed form) */
		r->route = R_V1_FILE;
		r->stat = true;
		*rest = url + 9;
		if (!get)
			answer_text(r, MHD_HTTP_METHOD_NOT_ALLOWED, "Method Not Allowed\n");
	} else if (!strcmp(url, "/v1/health") || !strcmp(url, "/v1/metadata")) {
		r->route = url[4] == 'h' ? R_V1_HEALTH : R_V1_META;
		*rest = "";
		if (!get)
			answer_text(r, MHD_HTTP_METHOD_NOT_ALLOWED, "Method Not Allowed\n");
	} else {
		r->route = R_V1_HEALTH;
		answer_text(r, MHD_HTTP_NOT_FOUND, "404 page not found\n");
	}
	return true;
}

static bool mode_of(const char *s, unsigned *mode)
{
	if (!s || !*s) {
		*mode = 0644;
		return true;
	}
	if (strlen(s) != 4 || s[0] != '0')
		return false;
	for (int i = 1; i < 4; i++)
		if (s[i] < '0' || s[i] > '7')
			return false;
	*mode = (unsigned)strtoul(s, NULL, 8);
	return true;
}

/* strconv.ParseBool */
static int bool_of(const char *s)
{
	static const char *yes[] = {"1", "t", "T", "TRUE", "true", "True"};
	static const char *no[] = {"0", "f", "F", "FALSE", "false", "False"};
	if (!s || !*s)
		return 0;
	for (size_t i = 0; i < 6; i++) {
		if (!strcmp(s, yes[i]))
			return 1;
		if (!strcmp(s, no[i]))
			return 0;
	}
	return -1;
}

static void health(struct rt *rt, struct req *r)
{
	if (rt->f.gone) {
		rt_answer_msg(r, MHD_HTTP_SERVICE_UNAVAILABLE, rt->f.gone_why);
		return;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "status", json_object_new_string("ok"));
	json_object_object_add(o, "uptime_seconds",
			       json_object_new_int64((int64_t)(time(NULL) - rt->started)));
	rt_answer(r, MHD_HTTP_OK, rt_json_line(o));
}

/* the runtime's own environment variables of the prefix SANDBOX_, as
 * sandboxd serves what the orchestrator injected */
static void metadata(struct req *r)
{
	json_object *env = json_object_new_object();
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq || strncmp(*e, "SANDBOX_", 8))
			continue;
		char key[256];
		snprintf(key, sizeof(key), "%.*s", (int)(eq - *e), *e);
		json_object_object_add(env, key, json_object_new_string(eq + 1));
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "env", env);
	rt_answer(r, MHD_HTTP_OK, rt_json_line(o));
}

void rt_v1_dispatch(struct rt *rt, struct req *r, const char *rest)
{
	if (r->too_large) {
		char m[128];
		snprintf(m, sizeof(m), "request body too large (at most %u bytes)", UPLOAD_MAX);
		rt_answer_msg(r, MHD_HTTP_CONTENT_TOO_LARGE, m);
		return;
	}
	if (r->route == R_V1_HEALTH) {
		health(rt, r);
		return;
	}
	if (r->route == R_V1_META) {
		metadata(r);
		return;
	}
	if (r->put && !mode_of(r->mode_arg, &r->mode)) {
		char m[200];
		snprintf(m, sizeof(m), "mode \"%.100s\" must match ^0[0-7]{3}$", r->mode_arg);
		rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, m);
		return;
	}
	if (r->del && (r->recursive = bool_of(r->recursive_arg)) < 0) {
		char m[200];
		snprintf(m, sizeof(m), "recursive \"%.100s\" must be a boolean", r->recursive_arg);
		rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, m);
		return;
	}
	if (r->put && r->multipart && !r->have_file) {
		rt_answer_msg(r, MHD_HTTP_BAD_REQUEST,
			      "multipart body is missing the required \"file\" part");
		return;
	}
	if (rt->f.gone) {
		rt_answer_msg(r, MHD_HTTP_SERVICE_UNAVAILABLE, rt->f.gone_why);
		return;
	}
	/* sandboxd's SanitizePath, its lexical half: a path under /workspace
	 * as it is, any other joined to it */
	char rel[sizeof(r->view) - sizeof(BASE)];
	if (ab_rtpath_within(BASE, rest, AB_RTPATH_BASE_ABS, rel, sizeof(rel)) < 0) {
		rt_answer_msg(r, MHD_HTTP_FORBIDDEN,
			      "path traversal outside sandbox root is forbidden");
		return;
	}
	snprintf(r->view, sizeof(r->view), "%s%s%s", BASE, rel[0] ? "/" : "", rel);
	r->step = S_GUARD;
	rt_start_file(rt, r, rt_file_req("resolve_path", r->view));
}

/* ---- the session's answers ---- */

static void start_op(struct rt *rt, struct req *r, const char *op)
{
	json_object *o = rt_file_req(op, r->view);
	if (r->del)
		json_object_object_add(o, "recursive", json_object_new_boolean(r->recursive));
	r->step = S_OP;
	rt_start_file(rt, r, o);
}

/* RFC 3339 in seconds, as Go's time.RFC3339 writes UTC, of the session's
 * "...T12:00:00.123Z" */
static json_object *go_time(json_object *iso)
{
	const char *m = json_object_get_string(iso);
	char when[32];
	snprintf(when, sizeof(when), "%.19sZ", m ? m : "1970-01-01T00:00:00");
	return json_object_new_string(when);
}

/* The path as the request named it, with a leading '/' (sandboxd's
 * DirectoryListing.path). */
static json_object *path_as_asked(const struct req *r)
{
	char path[4300];
	snprintf(path, sizeof(path), "%s%s", r->name && r->name[0] == '/' ? "" : "/",
		 r->name ? r->name : "");
	return json_object_new_string(path);
}

/* GET /v1/stat/{path}: the path's FileEntry (its target's, through a
 * symlink, as sandboxd's os.Stat), with its path and octal mode. */
static char *stat_entry(struct req *r, json_object *reply)
{
	json_object *o = json_object_new_object();
	const char *slash = strrchr(r->view, '/');
	json_object_object_add(o, "path", path_as_asked(r));
	json_object_object_add(o, "name", json_object_new_string(slash ? slash + 1 : r->view));
	json_object_object_add(o, "size", json_object_new_int64((int64_t)r->size));
	json_object_object_add(o, "type", json_object_new_string(r->is_dir ? "directory" : "file"));
	json_object_object_add(o, "modified_at",
			       go_time(json_object_object_get(reply, "modified_at")));
	char mode[8];
	snprintf(mode, sizeof(mode), "%04o",
		 (unsigned)json_object_get_int64(json_object_object_get(reply, "mode")) & 0777);
	json_object_object_add(o, "mode", json_object_new_string(mode));
	return rt_json_line(o);
}

/* The guard's verdict (resolve_path): where the path resolves, and what is
 * there. */
static void guard_done(struct rt *rt, struct req *r, const struct ab_result *res)
{
	bool ok;
	const char *code;
	char text[600];
	json_object *reply = rt_op_reply(r, res, &ok, &code, text, sizeof(text));
	const char *p = ok ? json_object_get_string(json_object_object_get(reply, "path")) : NULL;
	size_t b = strlen(BASE);
	if (!p || strlen(p) >= sizeof(r->view)) {
		json_object_put(reply);
		rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "the path could not be resolved");
		return;
	}
	if (strncmp(p, BASE, b) || (p[b] && p[b] != '/')) {
		json_object_put(reply);
		rt_answer_msg(r, MHD_HTTP_FORBIDDEN,
			      "path traversal outside sandbox root is forbidden");
		return;
	}
	bool exists = json_object_get_boolean(json_object_object_get(reply, "exists"));
	r->is_dir = json_object_get_boolean(json_object_object_get(reply, "is_dir"));
	r->size = (unsigned long long)json_object_get_int64(json_object_object_get(reply, "size"));
	snprintf(r->view, sizeof(r->view), "%s", p);
	bool root = !strcmp(r->view, BASE);
	if (!r->stat || !exists)
		json_object_put(reply);
	if (r->put) {
		if (r->is_dir) {
			rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, "target path is a directory");
			return;
		}
		/* the bytes into a temp file beside it, then renamed */
		snprintf(r->target, sizeof(r->target), "%s", r->view);
		char *slash = strrchr(r->view, '/');
		snprintf(slash + 1, sizeof(r->view) - (size_t)(slash + 1 - r->view),
			 ".agentbox-put-%llu", r->fr.tag);
		r->off = 0;
		rt_start_op(rt, r);
		return;
	}
	if (!exists) {
		rt_answer_msg(r, MHD_HTTP_NOT_FOUND, "path does not exist within the sandbox");
		return;
	}
	if (r->stat) {
		rt_answer(r, MHD_HTTP_OK, stat_entry(r, reply));
		json_object_put(reply);
		return;
	}
	if (r->del && root) {
		if (!r->recursive) {
			rt_answer_msg(
				r, MHD_HTTP_CONFLICT,
				"cannot delete the sandbox root; pass recursive=true to clear "
				"its contents");
			return;
		}
		r->step = S_FINISH;
		rt_start_file(rt, r, rt_file_req("clear_dir", BASE));
		return;
	}
	if (r->del) {
		start_op(rt, r, "delete");
		return;
	}
	if (r->head) { /* what GET would answer, without the body */
		rt_answer(r, MHD_HTTP_OK, strdup(""));
		r->ctype = r->is_dir ? "application/json" : "application/octet-stream";
		return;
	}
	if (r->is_dir) {
		start_op(rt, r, "ls");
		return;
	}
	r->off = 0;
	rt_start_op(rt, r);
}

/* An "ls" result into sandboxd's DirectoryListing. */
static char *listing(struct req *r, json_object *reply)
{
	json_object *entries = json_object_new_array();
	json_object *in = json_object_object_get(reply, "entries");
	for (size_t i = 0; i < json_object_array_length(in); i++) {
		json_object *e = json_object_array_get_idx(in, i);
		const char *path = json_object_get_string(json_object_object_get(e, "path"));
		const char *slash = path ? strrchr(path, '/') : NULL;
		json_object *o = rt_list_entry(e, slash ? slash + 1 : "");
		json_object_object_add(o, "modified_at",
				       go_time(json_object_object_get(e, "modified_at")));
		json_object_array_add(entries, o);
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", path_as_asked(r));
	json_object_object_add(o, "entries", entries);
	return rt_json_line(o);
}

/* A file operation's reply: its code, into the route's next step or answer. */
static void op_done(struct rt *rt, struct req *r, const struct ab_result *res)
{
	bool ok;
	const char *code;
	char text[600];
	json_object *reply = rt_op_reply(r, res, &ok, &code, text, sizeof(text));
	unsigned st = MHD_HTTP_INTERNAL_SERVER_ERROR;
	if (code && !strcmp(code, "permission_denied"))
		st = MHD_HTTP_FORBIDDEN;
	else if (code && !strcmp(code, "file_not_found"))
		st = MHD_HTTP_NOT_FOUND;
	else if (code && !strcmp(code, "too_large"))
		st = MHD_HTTP_CONTENT_TOO_LARGE;
	if (r->put && ok && r->off + r->chunk < r->len) { /* the next chunk */
		r->off += r->chunk;
		rt_start_op(rt, r);
	} else if (r->put && ok) {
		r->step = S_FINISH; /* its mode, then renamed over the target */
		json_object *o = rt_file_req("place_file", r->target);
		json_object_object_add(o, "from", json_object_new_string(r->view));
		json_object_object_add(o, "mode", json_object_new_int64(r->mode));
		rt_start_file(rt, r, o);
	} else if (r->put) { /* what was written goes, then the answer */
		rt_answer_msg(r, st, text);
		r->after = r->answer;
		r->after_status = r->status;
		r->answer = NULL;
		r->step = S_FINISH;
		rt_start_file(rt, r, rt_file_req("delete", r->view));
	} else if (r->del && ok) {
		rt_answer(r, MHD_HTTP_NO_CONTENT, strdup(""));
	} else if (r->del && code && !strcmp(code, "is_directory")) {
		rt_answer_msg(r, MHD_HTTP_CONFLICT,
			      "directory is not empty; pass recursive=true to remove it");
	} else if (!ok) {
		rt_answer_msg(r, st, text);
	} else if (r->is_dir) {
		rt_answer(r, MHD_HTTP_OK, listing(r, reply));
	} else {
		rt_download_chunk(r, reply);
	}
	json_object_put(reply);
}

void rt_v1_event(struct rt *rt, struct req *r, const struct ab_result *res)
{
	if (r->step == S_GUARD) {
		guard_done(rt, r, res);
	} else if (r->step == S_OP) {
		op_done(rt, r, res);
	} else if (r->after) { /* a failed PUT's temp file removed: its answer */
		rt_answer(r, r->after_status, r->after);
		r->after = NULL;
	} else { /* place_file's or clear_dir's reply */
		bool ok;
		const char *code;
		char text[600];
		json_object_put(rt_op_reply(r, res, &ok, &code, text, sizeof(text)));
		if (ok)
			rt_answer(r, MHD_HTTP_NO_CONTENT, strdup(""));
		else
			rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR,
				      r->put ? "failed to move file into place"
					     : "failed to clear the sandbox root");
	}
}
