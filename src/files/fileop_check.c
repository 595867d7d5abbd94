/* File operations, the launcher's half (see fileop.h): the operations'
 * request and reply schemas, the checks of a client's request before it
 * goes inside, and the checks of the reply that comes back from inside,
 * which the launcher trusts no more than it would a client. */
#include "files/fileop.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files/fileop_host.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/util.h"

/* ---- the operations and their schemas ---- */

enum ftype {
	T_PATH,	   /* a path in the view, required */
	T_DIRPATH, /* a path in the view, /workspace by default */
	T_STRING,  /* any string, NUL bytes included */
	T_TEXT,	   /* a non-empty string without NUL bytes */
	T_BOOL,
	T_COUNT,  /* an integer >= 0 */
	T_POSINT, /* an integer >= 1 */
	T_ENC,	  /* "utf-8" or "base64" */
};

struct field {
	const char *name;
	enum ftype type;
	bool required;
};

/* Reply fields: "name:t", t one of s (string), i (integer >= 0), b
 * (boolean), F (array of file infos), G (array of grep matches); a '?'
 * after t allows null, a '*' lets the field be absent (the answer to an
 * optional request field). */
struct opdef {
	const char *op;
	struct field in[8];
	const char *out[10];
};

static const struct opdef ops[] = {
	{"read",
	 {{"path", T_PATH, true}, {"offset", T_COUNT, false}, {"limit", T_POSINT, false}},
	 {"path:s", "encoding:s", "content:s", "total_lines:i?", "start_line:i?", "end_line:i?",
	  "next_offset:i?", "size:i", "truncated:b"}},
	{"write",
	 {{"path", T_PATH, true},
	  {"content", T_STRING, true},
	  {"encoding", T_ENC, false},
	  {"overwrite", T_BOOL, false}},
	 {"path:s", "bytes:i", "created:b"}},
	{"edit",
	 {{"path", T_PATH, true},
	  {"old_string", T_STRING, true},
	  {"new_string", T_STRING, true},
	  {"replace_all", T_BOOL, false}},
	 {"path:s", "occurrences:i"}},
	{"ls", {{"path", T_DIRPATH, false}}, {"path:s", "entries:F", "truncated:b"}},
	{"glob",
	 {{"pattern", T_TEXT, true}, {"path", T_DIRPATH, false}, {"files_only", T_BOOL, false}},
	 {"matches:F", "truncated:b"}},
	{"grep",
	 {{"pattern", T_TEXT, true},
	  {"regex", T_BOOL, false},
	  {"ignore_case", T_BOOL, false},
	  {"path", T_DIRPATH, false},
	  {"glob", T_TEXT, false},
	  {"max_count", T_POSINT, false},
	  {"skip", T_COUNT, false}},
	 {"matches:G", "truncated:b"}},
	{"delete", {{"path", T_PATH, true}, {"recursive", T_BOOL, false}}, {"path:s", "deleted:i"}},
	{"upload",
	 {{"path", T_PATH, true},
	  {"data", T_STRING, true},
	  {"overwrite", T_BOOL, false},
	  {"offset", T_COUNT, false}},
	 {"path:s", "bytes:i", "created:b", "size:i"}},
	{"download",
	 {{"path", T_PATH, true}, {"offset", T_COUNT, false}, {"length", T_POSINT, false}},
	 {"path:s", "data:s", "size:i", "offset:i*", "eof:b*"}},
	/* the bulk path (fileop_host.h): the inner ops of upload with "from"
	 * and download with "to"; the bytes go through the shim's stdin */
	{"upload_from",
	 {{"path", T_PATH, true}, {"overwrite", T_BOOL, false}},
	 {"path:s", "bytes:i", "created:b", "size:i"}},
	{"download_to", {{"path", T_PATH, true}}, {"path:s", "bytes:i", "size:i"}},
	/* agentbox runtime's (fileop_prepare_inner; fileop_guard.c) */
	{"resolve_path",
	 {{"path", T_PATH, true}},
	 {"path:s", "exists:b", "is_dir:b", "size:i", "modified_at:s*", "mode:i*"}},
	{"place_file",
	 {{"from", T_PATH, true}, {"path", T_PATH, true}, {"mode", T_COUNT, true}},
	 {"path:s"}},
	{"clear_dir", {{"path", T_DIRPATH, true}}, {"path:s", "deleted:i"}},
	/* file events (watch/watch.h): its output is lines of events, never a reply */
	{"watch", {{"path", T_DIRPATH, false}, {"recursive", T_BOOL, false}}, {NULL}},
};

static const struct opdef *opdef_of(const char *op)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(ops); i++)
		if (strcmp(ops[i].op, op) == 0)
			return &ops[i];
	return NULL;
}

const char *fileop_name(const char *op)
{
	const struct opdef *d = opdef_of(op);
	return d && !strchr(d->op, '_') ? d->op : NULL; /* not an inner op */
}

/* The protocol's name of an op ("upload" for "upload_from"). */
static const char *public_name(const char *op)
{
	return strcmp(op, "upload_from") == 0	? "upload"
	       : strcmp(op, "download_to") == 0 ? "download"
						: op;
}

/* ---- launcher: the request ---- */

static bool has_nul(json_object *v)
{
	return strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v);
}

/* Why v is not a value of the plain type t (a string, text, a boolean, a
 * count, a positive integer), or NULL. */
static const char *plain_why(enum ftype t, json_object *v)
{
	static const struct {
		json_type json;
		const char *why;
	} plain[] = {
		[T_STRING] = {json_type_string, "must be a string"},
		[T_TEXT] = {json_type_string, "must be a non-empty string without NUL bytes"},
		[T_BOOL] = {json_type_boolean, "must be true or false"},
		[T_COUNT] = {json_type_int, "must be an integer of at least 0"},
		[T_POSINT] = {json_type_int, "must be an integer of at least 1"},
	};
	bool ok = json_object_is_type(v, plain[t].json);
	if (ok && t == T_TEXT)
		ok = json_object_get_string_len(v) > 0 && !has_nul(v);
	if (ok && (t == T_COUNT || t == T_POSINT)) {
		int64_t n = json_object_get_int64(v);
		ok = n >= (t == T_POSINT ? 1 : 0) && n != INT64_MAX;
	}
	return ok ? NULL : plain[t].why;
}

/* A path of the view: absolute, or relative to /workspace; no "..". */
static char *view_path(json_object *v, const char **why)
{
	if (!json_object_is_type(v, json_type_string)) {
		*why = "must be a string";
		return NULL;
	}
	const char *s = json_object_get_string(v);
	size_t n = (size_t)json_object_get_string_len(v);
	if (n == 0 || has_nul(v) || n > 4095) {
		*why = n == 0	  ? "is empty"
		       : n > 4095 ? "is longer than 4095 bytes"
				  : "holds a NUL byte";
		return NULL;
	}
	cleanup_free char *joined = NULL;
	if (s[0] != '/' && asprintf(&joined, "/workspace/%s", s) < 0) {
		*why = "cannot be stored (out of memory)";
		return NULL;
	}
	char *out = NULL;
	int r = ab_path_normalize(joined ? joined : s, &out);
	if (r < 0) {
		*why = r == -ELOOP ? "contains '..'" : "is not a valid path";
		return NULL;
	}
	return out;
}

/* The chunk fields of upload and download (docs/protocol.md, "Files of
 * any size"): a chunk carries at most FILEOP_CHUNK_MAX bytes. */
static int check_chunk(json_object *req, const char *op, struct ab_error *err)
{
	json_object *v;
	bool chunked = json_object_object_get_ex(req, "offset", &v);
	if (strcmp(op, "download") == 0 && json_object_object_get_ex(req, "length", &v)) {
		if (!chunked)
			return ab_error_proto(err, AB_ERRC_INVALID_REQUEST,
					      "download: 'length' needs 'offset'");
		if (json_object_get_int64(v) > FILEOP_CHUNK_MAX)
			return ab_error_proto(err, AB_ERRC_INVALID_REQUEST,
					      "download: 'length' must be from 1 to %u (max_chunk)",
					      FILEOP_CHUNK_MAX);
	}
	if (strcmp(op, "upload") == 0 && chunked) {
		json_object_object_get_ex(req, "data", &v);
		const char *d = json_object_get_string(v);
		size_t n = (size_t)json_object_get_string_len(v);
		size_t bytes =
			n / 4 * 3 - (n >= 1 && d[n - 1] == '=') - (n >= 2 && d[n - 2] == '=');
		if (n % 4 == 0 && bytes > FILEOP_CHUNK_MAX) {
			return ab_error_proto(
				err, AB_ERRC_TOO_LARGE,
				"upload: 'data' holds %zu bytes; a chunk carries at most %u "
				"(max_chunk)",
				bytes, FILEOP_CHUNK_MAX);
		}
	}
	return 0;
}

/* upload's "from", download's "to" when host files are allowed: the
 * field, NULL when the op has none or the request does not name it. */
static const char *host_field(json_object *req, const char *op, struct fileop_host **host)
{
	const char *f = !host			      ? NULL
			: strcmp(op, "upload") == 0   ? "from"
			: strcmp(op, "download") == 0 ? "to"
						      : NULL;
	return f && json_object_object_get_ex(req, f, NULL) ? f : NULL;
}

/* The host file of hf opened; an upload's inner request gets its size. */
static int open_host(json_object *req, const char *op, const char *hf, json_object *out,
		     struct fileop_host **host, struct ab_error *err)
{
	json_object *hv;
	json_object_object_get_ex(req, hf, &hv);
	int r = fileop_host_open(op, hf, hv, host, err);
	if (r == 0 && !(*host)->down)
		json_object_object_add(out, "size", json_object_new_int64((*host)->size));
	return r;
}

static int prepare(json_object *req, const char *op, char **inner, struct fileop_host **host,
		   bool inner_op, struct ab_error *err)
{
	enum ab_errc code = AB_ERRC_INVALID_REQUEST;
	int r;
	const char *hf = host_field(req, op, host);
	const struct opdef *d = fileop_name(op) || inner_op ? opdef_of(op) : NULL;
	if (!d)
		return ab_error_proto(err, code, "'%s' is not a file operation", op);
	if (hf)
		d = opdef_of(hf[0] == 'f' ? "upload_from" : "download_to");
	json_object_object_foreach(req, key, val)
	{
		(void)val;
		bool known = strcmp(key, "op") == 0 || strcmp(key, "id") == 0 ||
			     strcmp(key, "timeout") == 0 || (hf && strcmp(key, hf) == 0);
		for (const struct field *f = d->in; !known && f->name; f++)
			known = strcmp(key, f->name) == 0;
		if (!known && hf)
			return ab_error_proto(err, code, "%s: '%.64s' does not go with '%s'", op,
					      key, hf);
		if (!known) {
			return ab_error_proto(err, code, "%s: unknown field '%.64s'", op, key);
		}
	}
	json_object *out = json_object_new_object();
	json_object_object_add(out, "op", json_object_new_string(d->op));
	if (inner_op) /* the runtime's: a resolved path, no symlink followed */
		json_object_object_add(out, "exact", json_object_new_boolean(true));
	for (const struct field *f = d->in; f->name; f++) {
		json_object *v = NULL;
		if (!json_object_object_get_ex(req, f->name, &v) || !v) {
			if (f->required) {
				r = ab_error_proto(err, code, "%s: '%s' is required", op, f->name);
				goto bad;
			}
			if (f->type == T_DIRPATH)
				json_object_object_add(out, f->name,
						       json_object_new_string("/workspace"));
			continue;
		}
		const char *why = NULL;
		switch (f->type) {
		case T_PATH:
		case T_DIRPATH: {
			char *p = view_path(v, &why);
			if (!p) {
				code = AB_ERRC_INVALID_PATH;
				break;
			}
			if (strcmp(op, "delete") == 0 && strcmp(p, "/workspace") == 0) {
				code = AB_ERRC_INVALID_PATH;
				why = "is the workspace itself: delete what is in it";
				free(p);
				break;
			}
			json_object_object_add(out, f->name, json_object_new_string(p));
			free(p);
			continue;
		}
		case T_STRING:
		case T_TEXT:
		case T_BOOL:
		case T_COUNT:
		case T_POSINT:
			why = plain_why(f->type, v);
			break;
		case T_ENC: {
			const char *e = json_object_is_type(v, json_type_string)
						? json_object_get_string(v)
						: "";
			if (strcmp(e, "utf-8") && strcmp(e, "base64"))
				why = "must be \"utf-8\" or \"base64\"";
			break;
		}
		}
		if (why) {
			r = ab_error_proto(err, code, "%s: '%s' %s", op, f->name, why);
			goto bad;
		}
		json_object_object_add(out, f->name, json_object_get(v));
	}
	if (strcmp(op, "edit") == 0) {
		json_object *v;
		json_object_object_get_ex(req, "old_string", &v);
		if (json_object_get_string_len(v) == 0) {
			r = ab_error_proto(err, code, "edit: 'old_string' must not be empty");
			goto bad;
		}
	}
	if ((r = check_chunk(req, op, err)) < 0)
		goto bad;
	if (hf && (r = open_host(req, op, hf, out, host, err)) < 0)
		goto bad;
	*inner = strdup(json_object_to_json_string_ext(
		out, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(out);
	if (!*inner) {
		if (hf) {
			fileop_host_free(*host);
			*host = NULL;
		}
		return ab_error_proto(err, AB_ERRC_INTERNAL, "%s: out of memory", op);
	}
	return 0;
bad:
	json_object_put(out);
	return r;
}

int fileop_prepare(json_object *req, const char *op, char **inner, struct ab_error *err)
{
	return prepare(req, op, inner, NULL, false, err);
}

const char *fileop_prepare_inner(json_object *req, const char *op, char **inner,
				 struct ab_error *err)
{
	const struct opdef *d = opdef_of(op);
	if (!d || !strcmp(op, "upload_from") || !strcmp(op, "download_to")) {
		ab_error_proto(err, AB_ERRC_INTERNAL, "'%s' is not the runtime's file operation",
			       op);
		return NULL;
	}
	return prepare(req, op, inner, NULL, true, err) < 0 ? NULL : d->op;
}

int fileop_prepare_host(json_object *req, const char *op, char **inner, struct fileop_host **host,
			struct ab_error *err)
{
	*host = NULL;
	return prepare(req, op, inner, host, false, err);
}

/* ---- launcher: the reply ---- */

static bool is_count(json_object *v)
{
	return json_object_is_type(v, json_type_int) && json_object_get_int64(v) >= 0;
}

static bool valid_entries(json_object *a, char kind)
{
	if (!json_object_is_type(a, json_type_array))
		return false;
	size_t n = json_object_array_length(a);
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(a, i), *v;
		if (!json_object_is_type(e, json_type_object) ||
		    json_object_object_length(e) != (kind == 'F' ? 4 : 3) ||
		    !json_object_object_get_ex(e, "path", &v) ||
		    !json_object_is_type(v, json_type_string))
			return false;
		if (kind == 'F') {
			if (!json_object_object_get_ex(e, "is_dir", &v) ||
			    !json_object_is_type(v, json_type_boolean) ||
			    !json_object_object_get_ex(e, "size", &v) || !is_count(v) ||
			    !json_object_object_get_ex(e, "modified_at", &v) ||
			    !(v == NULL || json_object_is_type(v, json_type_string)))
				return false;
		} else if (!json_object_object_get_ex(e, "line", &v) || !is_count(v) ||
			   !json_object_object_get_ex(e, "text", &v) ||
			   !json_object_is_type(v, json_type_string)) {
			return false;
		}
	}
	return true;
}

static bool valid_value(json_object *v, char t, bool nullable)
{
	if (!v)
		return nullable;
	switch (t) {
	case 's':
		return json_object_is_type(v, json_type_string);
	case 'i':
		return is_count(v);
	case 'b':
		return json_object_is_type(v, json_type_boolean);
	default:
		return valid_entries(v, t);
	}
}

static json_object *message(const char *type, json_object *id)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "id", json_object_get(id));
	return o;
}

json_object *fileop_reply(const char *op, json_object *id, const char *data, size_t len,
			  struct ab_error *err)
{
	const struct opdef *d = opdef_of(op);
	json_tokener *tok = json_tokener_new_ex(8);
	if (!d || !tok) {
		json_tokener_free(tok);
		ab_error_proto(err, AB_ERRC_INTERNAL, "%s: cannot read the reply", op);
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	json_object *r = len <= INT_MAX ? json_tokener_parse_ex(tok, data, (int)len) : NULL;
	bool whole = r && json_tokener_get_error(tok) == json_tokener_success &&
		     json_tokener_get_parse_end(tok) == len;
	json_tokener_free(tok);
	json_object *res = NULL, *er = NULL, *out = NULL;
	if (!whole || !json_object_is_type(r, json_type_object) ||
	    json_object_object_length(r) != 1)
		goto malformed;
	if (json_object_object_get_ex(r, "error", &er)) {
		json_object *code, *text, *path = NULL;
		if (!json_object_is_type(er, json_type_object) ||
		    !json_object_object_get_ex(er, "code", &code) ||
		    !json_object_is_type(code, json_type_string) ||
		    !json_object_object_get_ex(er, "message", &text) ||
		    !json_object_is_type(text, json_type_string) ||
		    (json_object_object_get_ex(er, "path", &path) && path &&
		     !json_object_is_type(path, json_type_string)) ||
		    json_object_object_length(er) > 3)
			goto malformed;
		/* what a reply's "error" may say: the file codes, and invalid_request
		 * for what only the inside can check (a regular expression, base64) */
		enum ab_errc c = ab_errc_by_name(json_object_get_string(code));
		if (!(c >= AB_ERRC_FILE_NOT_FOUND && c <= AB_ERRC_IO_ERROR) &&
		    c != AB_ERRC_TOO_LARGE && c != AB_ERRC_INVALID_REQUEST)
			goto malformed;
		out = message("error", id);
		json_object_object_add(out, "code", json_object_new_string(ab_errc_name(c)));
		/* a message cut to a sane length, at a character boundary */
		const char *t = json_object_get_string(text);
		size_t tl = (size_t)json_object_get_string_len(text);
		if (tl > 1024) {
			tl = 1024;
			while (tl > 0 && ((unsigned char)t[tl] & 0xC0) == 0x80)
				tl--;
		}
		json_object_object_add(out, "message", json_object_new_string_len(t, (int)tl));
		if (path)
			json_object_object_add(out, "path", json_object_get(path));
		json_object_put(r);
		return out;
	}
	if (!json_object_object_get_ex(r, "result", &res) ||
	    !json_object_is_type(res, json_type_object))
		goto malformed;
	size_t n_out = 0;
	out = message("result", id);
	json_object_object_add(out, "op", json_object_new_string(public_name(op)));
	for (const char *const *f = d->out; *f; f++, n_out++) {
		const char *colon = strchr(*f, ':');
		char name[32];
		snprintf(name, sizeof(name), "%.*s", (int)(colon - *f), *f);
		json_object *v = NULL;
		if (!json_object_object_get_ex(res, name, &v)) {
			if (colon[2] == '*') {
				n_out--;
				continue;
			}
			goto malformed;
		}
		if (!valid_value(v, colon[1], colon[2] == '?'))
			goto malformed;
		json_object_object_add(out, name, json_object_get(v));
	}
	if ((size_t)json_object_object_length(res) != n_out)
		goto malformed;
	json_object_put(r);
	return out;
malformed:
	json_object_put(out);
	json_object_put(r);
	ab_error_proto(err, AB_ERRC_INTERNAL, "%s: the sandbox sent a malformed reply", op);
	return NULL;
}
