/* File operations of a session (see fileop.h). The inside half runs as the
 * sandbox's user in a process of its own, under the sandbox's seccomp
 * filter and Landlock ruleset, and never runs a program: every operation
 * is a handful of system calls on paths of the view. Its reply is checked
 * again by the launcher half, which trusts nothing it did not write. */
#include "fileop.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <regex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "options.h"
#include "output.h"
#include "util.h"

#define GREP_TEXT_MAX  2000
#define GREP_MAX_COUNT 100000
#define SNIFF	       8192
#define MAX_DEPTH      256

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
};

/* what a reply's "error" may say: the file codes, and invalid_request for
 * what only the inside can check (a regular expression, base64) */
static const char *const error_codes[] = {
	"file_not_found", "permission_denied", "is_directory",	  "not_directory", "invalid_path",
	"read_only",	  "too_large",	       "exists",	  "not_found",	   "not_unique",
	"no_space",	  "io_error",	       "invalid_request",
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
	return d ? d->op : NULL;
}

/* ---- launcher: the request ---- */

static bool has_nul(json_object *v)
{
	return strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v);
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
static int check_chunk(json_object *req, const char *op, const char **code, char *msg,
		       size_t msglen)
{
	json_object *v;
	bool chunked = json_object_object_get_ex(req, "offset", &v);
	if (strcmp(op, "download") == 0 && json_object_object_get_ex(req, "length", &v)) {
		if (!chunked) {
			snprintf(msg, msglen, "download: 'length' needs 'offset'");
			return -1;
		}
		if (json_object_get_int64(v) > FILEOP_CHUNK_MAX) {
			snprintf(msg, msglen, "download: 'length' must be from 1 to %u (max_chunk)",
				 FILEOP_CHUNK_MAX);
			return -1;
		}
	}
	if (strcmp(op, "upload") == 0 && chunked) {
		json_object_object_get_ex(req, "data", &v);
		const char *d = json_object_get_string(v);
		size_t n = (size_t)json_object_get_string_len(v);
		size_t bytes =
			n / 4 * 3 - (n >= 1 && d[n - 1] == '=') - (n >= 2 && d[n - 2] == '=');
		if (n % 4 == 0 && bytes > FILEOP_CHUNK_MAX) {
			*code = "too_large";
			snprintf(msg, msglen,
				 "upload: 'data' holds %zu bytes; a chunk carries at most %u "
				 "(max_chunk)",
				 bytes, FILEOP_CHUNK_MAX);
			return -1;
		}
	}
	return 0;
}

int fileop_prepare(json_object *req, const char *op, char **inner, const char **code, char *msg,
		   size_t msglen)
{
	const struct opdef *d = opdef_of(op);
	*code = "invalid_request";
	if (!d) {
		snprintf(msg, msglen, "'%s' is not a file operation", op);
		return -1;
	}
	json_object_object_foreach(req, key, val)
	{
		(void)val;
		bool known = strcmp(key, "op") == 0 || strcmp(key, "id") == 0 ||
			     strcmp(key, "timeout") == 0;
		for (const struct field *f = d->in; !known && f->name; f++)
			known = strcmp(key, f->name) == 0;
		if (!known) {
			snprintf(msg, msglen, "%s: unknown field '%.64s'", op, key);
			return -1;
		}
	}
	json_object *out = json_object_new_object();
	json_object_object_add(out, "op", json_object_new_string(op));
	for (const struct field *f = d->in; f->name; f++) {
		json_object *v = NULL;
		if (!json_object_object_get_ex(req, f->name, &v) || !v) {
			if (f->required) {
				snprintf(msg, msglen, "%s: '%s' is required", op, f->name);
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
				*code = "invalid_path";
				break;
			}
			if (strcmp(op, "delete") == 0 && strcmp(p, "/workspace") == 0) {
				*code = "invalid_path";
				why = "is the workspace itself: delete what is in it";
				free(p);
				break;
			}
			json_object_object_add(out, f->name, json_object_new_string(p));
			free(p);
			continue;
		}
		case T_STRING:
			if (!json_object_is_type(v, json_type_string))
				why = "must be a string";
			break;
		case T_TEXT:
			if (!json_object_is_type(v, json_type_string) ||
			    json_object_get_string_len(v) == 0 || has_nul(v))
				why = "must be a non-empty string without NUL bytes";
			break;
		case T_BOOL:
			if (!json_object_is_type(v, json_type_boolean))
				why = "must be true or false";
			break;
		case T_COUNT:
		case T_POSINT: {
			int64_t n = json_object_is_type(v, json_type_int) ? json_object_get_int64(v)
									  : -1;
			if (n < (f->type == T_POSINT ? 1 : 0) || n == INT64_MAX)
				why = f->type == T_POSINT ? "must be an integer of at least 1"
							  : "must be an integer of at least 0";
			break;
		}
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
			snprintf(msg, msglen, "%s: '%s' %s", op, f->name, why);
			goto bad;
		}
		json_object_object_add(out, f->name, json_object_get(v));
	}
	if (strcmp(op, "edit") == 0) {
		json_object *v;
		json_object_object_get_ex(req, "old_string", &v);
		if (json_object_get_string_len(v) == 0) {
			snprintf(msg, msglen, "edit: 'old_string' must not be empty");
			goto bad;
		}
	}
	if (check_chunk(req, op, code, msg, msglen) < 0)
		goto bad;
	*inner = strdup(json_object_to_json_string_ext(
		out, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(out);
	if (!*inner) {
		*code = "internal";
		snprintf(msg, msglen, "%s: out of memory", op);
		return -1;
	}
	return 0;
bad:
	json_object_put(out);
	return -1;
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

json_object *fileop_reply(const char *op, json_object *id, const char *data, size_t len, char *msg,
			  size_t msglen)
{
	const struct opdef *d = opdef_of(op);
	json_tokener *tok = json_tokener_new_ex(8);
	if (!d || !tok) {
		json_tokener_free(tok);
		snprintf(msg, msglen, "%s: cannot read the reply", op);
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
		bool known = false;
		for (size_t i = 0; !known && i < AB_ARRAY_SIZE(error_codes); i++)
			known = strcmp(json_object_get_string(code), error_codes[i]) == 0;
		if (!known)
			goto malformed;
		out = message("error", id);
		json_object_object_add(out, "code", json_object_get(code));
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
	json_object_object_add(out, "op", json_object_new_string(op));
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
	snprintf(msg, msglen, "%s: the sandbox sent a malformed reply", op);
	return NULL;
}

/* ---- inside: replies ---- */

static int reply_fd = STDOUT_FILENO; /* where fileop_run writes */

static int emit(json_object *o)
{
	size_t len;
	const char *s = json_object_to_json_string_length(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	for (size_t off = 0; s && off < len;) {
		ssize_t n = write(reply_fd, s + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	json_object_put(o);
	return 0;
}

static int result(json_object *res)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "result", res);
	return emit(o);
}

static const char *code_of(int e)
{
	switch (e) {
	case ENOENT:
		return "file_not_found";
	case EACCES:
	case EPERM:
	case EBUSY:
		return "permission_denied";
	case EISDIR:
		return "is_directory";
	case ENOTDIR:
		return "not_directory";
	case EROFS:
		return "read_only";
	case EEXIST:
		return "exists";
	case ENOSPC:
	case EDQUOT:
		return "no_space";
	case EFBIG:
		return "too_large";
	case ELOOP:
	case ENAMETOOLONG:
	case ENXIO:
	case ENODEV:
	case EINVAL:
		return "invalid_path";
	default:
		return "io_error";
	}
}

static __attribute__((format(printf, 3, 4))) int fail(const char *code, const char *path,
						      const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	size_t tl;
	char *t = utf8_lossy(text, strlen(text), &tl);
	json_object *er = json_object_new_object();
	json_object_object_add(er, "code", json_object_new_string(code));
	json_object_object_add(er, "message",
			       json_object_new_string_len(t ? t : "", t ? (int)tl : 0));
	if (path)
		json_object_object_add(er, "path", json_object_new_string(path));
	free(t);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "error", er);
	return emit(o);
}

/* The error for errno e while doing what to path. */
static int fail_errno(int e, const char *path, const char *what)
{
	const char *why = e == ENODEV ? "not a regular file" : strerror(e);
	return fail(code_of(e), path, "%s %s: %s", what, path, why);
}

/* A string for JSON from bytes that may not be UTF-8 (file names). */
static json_object *lossy(const char *s, size_t n)
{
	size_t tl;
	char *t = utf8_lossy(s, n, &tl);
	json_object *o = json_object_new_string_len(t ? t : "", t ? (int)tl : 0);
	free(t);
	return o;
}

static json_object *iso_time(const struct timespec *t)
{
	struct tm tm;
	char b[96];
	if (!gmtime_r(&t->tv_sec, &tm))
		return NULL;
	snprintf(b, sizeof(b), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (int)(t->tv_nsec / 1000000 % 1000));
	return json_object_new_string(b);
}

/* A file info: the target's for a symlink, or the link's own if the
 * target is missing. */
static json_object *file_info(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0 && lstat(path, &st) < 0)
		return NULL;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", lossy(path, strlen(path)));
	json_object_object_add(o, "is_dir", json_object_new_boolean(S_ISDIR(st.st_mode)));
	json_object_object_add(o, "size", json_object_new_int64((int64_t)st.st_size));
	json_object_object_add(o, "modified_at", iso_time(&st.st_mtim));
	return o;
}

/* ---- inside: helpers ---- */

/* 1 + the value of each base64 character, 0 for the others: a table, as
 * uploads decode megabytes at a time. */
static const unsigned char b64_values[256] = {
	['A'] = 1,  ['B'] = 2,	['C'] = 3,  ['D'] = 4,	['E'] = 5,  ['F'] = 6,	['G'] = 7,
	['H'] = 8,  ['I'] = 9,	['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14,
	['O'] = 15, ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21,
	['V'] = 22, ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28,
	['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35,
	['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42,
	['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49,
	['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
	['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63,
	['/'] = 64};

static int b64_value(unsigned char c)
{
	return (int)b64_values[c] - 1;
}

/* Strict RFC 4648 base64 with padding. NULL if s is not that. */
static char *base64_decode(const char *s, size_t n, size_t *out_len)
{
	if (n % 4)
		return NULL;
	char *out = malloc(n / 4 * 3 + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i += 4) {
		const unsigned char *q = (const unsigned char *)s + i;
		int pad = i + 4 == n ? (q[3] == '=') + (q[3] == '=' && q[2] == '=') : 0;
		int v0 = b64_value(q[0]), v1 = b64_value(q[1]);
		int v2 = pad == 2 ? 0 : b64_value(q[2]), v3 = pad ? 0 : b64_value(q[3]);
		if ((v0 | v1 | v2 | v3) < 0) {
			free(out);
			return NULL;
		}
		uint32_t w =
			(uint32_t)v0 << 18 | (uint32_t)v1 << 12 | (uint32_t)v2 << 6 | (uint32_t)v3;
		out[o++] = (char)(w >> 16);
		if (pad < 2)
			out[o++] = (char)(w >> 8);
		if (pad < 1)
			out[o++] = (char)w;
	}
	*out_len = o;
	return out;
}

/* Open a regular file; -errno (-EISDIR for a directory, -ENODEV for
 * anything else that is not a regular file: a FIFO would block). */
static int open_regular(const char *path, int flags, struct stat *st)
{
	int fd = open(path, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		int e = S_ISDIR(st->st_mode) ? EISDIR : ENODEV;
		close(fd);
		return -e;
	}
	fcntl(fd, F_SETFL, flags & O_ACCMODE);
	return fd;
}

/* The whole of a regular file of at most max bytes; -errno, -EFBIG. */
static int read_all(const char *path, size_t max, char **out, size_t *len)
{
	struct stat st;
	int fd = open_regular(path, O_RDONLY, &st);
	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return -EFBIG;
	}
	size_t cap = (size_t)st.st_size + 1, n = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (!buf) {
			close(fd);
			return -ENOMEM;
		}
		if (n == cap - 1) {
			/* the file grew while being read */
			if (cap - 1 >= max) {
				free(buf);
				close(fd);
				return -EFBIG;
			}
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			char *p = realloc(buf, cap);
			if (!p)
				free(buf);
			buf = p;
			continue;
		}
		ssize_t k = read(fd, buf + n, cap - 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return -e;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Create the missing directories above path (mode 0755 before umask). */
static int make_parents(const char *path)
{
	cleanup_free char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		struct stat st;
		if (stat(p, &st) < 0 && mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return 0;
}

static const char *jstr(json_object *q, const char *key, size_t *len)
{
	json_object *v;
	if (!json_object_object_get_ex(q, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	if (len)
		*len = (size_t)json_object_get_string_len(v);
	return json_object_get_string(v);
}

static bool jbool(json_object *q, const char *key, bool def)
{
	json_object *v;
	return json_object_object_get_ex(q, key, &v) ? json_object_get_boolean(v) : def;
}

static int64_t jint(json_object *q, const char *key, int64_t def)
{
	json_object *v;
	return json_object_object_get_ex(q, key, &v) ? json_object_get_int64(v) : def;
}

/* ---- inside: read ---- */

struct sbuf {
	char *p;
	size_t len, cap;
};

static bool sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return false;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return true;
}

static json_object *int_or_null(bool have, uint64_t v)
{
	return have ? json_object_new_int64((int64_t)v) : NULL;
}

static int read_binary(const char *path, int64_t size)
{
	char *data;
	size_t len;
	int r = read_all(path, FILEOP_DATA_MAX, &data, &len);
	if (r == -EFBIG)
		return fail("too_large", path,
			    "%s is not UTF-8 text and has %lld bytes: at most %u are sent; "
			    "use exec to look into it",
			    path, (long long)size, FILEOP_DATA_MAX);
	if (r < 0)
		return fail_errno(-r, path, "cannot read");
	char *b = base64_encode(data, len);
	free(data);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "encoding", json_object_new_string("base64"));
	json_object_object_add(o, "content", json_object_new_string(b ? b : ""));
	json_object_object_add(o, "total_lines", NULL);
	json_object_object_add(o, "start_line", NULL);
	json_object_object_add(o, "end_line", NULL);
	json_object_object_add(o, "next_offset", NULL);
	json_object_object_add(o, "size", json_object_new_int64((int64_t)len));
	json_object_object_add(o, "truncated", json_object_new_boolean(false));
	free(b);
	return result(o);
}

static int op_read(json_object *q)
{
	const char *path = jstr(q, "path", NULL);
	uint64_t first = (uint64_t)jint(q, "offset", 0);
	uint64_t limit = (uint64_t)jint(q, "limit", 2000);
	uint64_t stop = first + limit < first ? UINT64_MAX : first + limit;
	struct stat st;
	int fd = open_regular(path, O_RDONLY, &st);
	if (fd < 0)
		return fail_errno(-fd, path, "cannot read");
	static char buf[65536];
	struct sbuf content = {0};
	uint64_t line = 0, n_in = 0; /* lines seen in full, lines in content */
	size_t line_at = 0;	     /* where the current line starts in content */
	bool collecting = true, truncated = false, binary = false, last_nl = true;
	size_t sniffed = 0;
	for (;;) {
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			close(fd);
			free(content.p);
			return fail_errno(e, path, "cannot read");
		}
		if (k == 0)
			break;
		if (sniffed < SNIFF) {
			size_t n = (size_t)k < SNIFF - sniffed ? (size_t)k : SNIFF - sniffed;
			binary |= memchr(buf, '\0', n) != NULL;
			sniffed += n;
		}
		if (binary)
			break;
		last_nl = buf[k - 1] == '\n';
		for (char *p = buf, *e = buf + k; p < e;) {
			char *nl = memchr(p, '\n', (size_t)(e - p));
			char *end = nl ? nl + 1 : e;
			if (collecting && line >= first && line < stop) {
				size_t n = (size_t)(end - p);
				if (content.len + n > FILEOP_DATA_MAX) {
					if (line_at == 0) {
						/* one line over the limit: cut it */
						n = FILEOP_DATA_MAX - content.len;
						while (n > 0 &&
						       ((unsigned char)p[n] & 0xC0) == 0x80)
							n--;
						sb_add(&content, p, n);
						truncated = true;
						n_in = 1;
					} else {
						content.len =
							line_at; /* without the partial line */
					}
					collecting = false;
				} else if (!sb_add(&content, p, n)) {
					close(fd);
					free(content.p);
					return fail("io_error", path, "out of memory reading %s",
						    path);
				}
			}
			if (nl) {
				if (collecting && line >= first && line < stop) {
					n_in++;
					line_at = content.len;
				}
				line++;
			}
			p = end;
		}
	}
	close(fd);
	/* a last line without a newline */
	uint64_t total = line + (!last_nl ? 1 : 0);
	if (!last_nl && collecting && line >= first && line < stop)
		n_in++;
	if (binary || (content.len && !utf8_valid(content.p, content.len))) {
		free(content.p);
		return read_binary(path, (int64_t)st.st_size);
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "encoding", json_object_new_string("utf-8"));
	json_object_object_add(
		o, "content",
		json_object_new_string_len(content.p ? content.p : "", (int)content.len));
	json_object_object_add(o, "total_lines", json_object_new_int64((int64_t)total));
	json_object_object_add(o, "start_line",
			       json_object_new_int64(n_in ? (int64_t)first + 1 : 0));
	json_object_object_add(o, "end_line",
			       json_object_new_int64(n_in ? (int64_t)(first + n_in) : 0));
	json_object_object_add(o, "next_offset",
			       int_or_null(n_in && first + n_in < total, first + n_in));
	json_object_object_add(o, "size", json_object_new_int64((int64_t)st.st_size));
	json_object_object_add(o, "truncated", json_object_new_boolean(truncated));
	free(content.p);
	return result(o);
}

/* ---- inside: write, upload ---- */

/* The reply of write and upload: size, the file's after it, for upload
 * only (-1: none). */
static int put_reply(const char *path, size_t len, bool created, int64_t size)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "bytes", json_object_new_int64((int64_t)len));
	json_object_object_add(o, "created", json_object_new_boolean(created));
	if (size >= 0)
		json_object_object_add(o, "size", json_object_new_int64(size));
	return result(o);
}

/* An upload's chunk at offset > 0: appended to a file of exactly that
 * size, so a chunk lost or sent twice is an error, not a corrupt file. */
static int append_chunk(const char *path, const char *data, size_t len, int64_t offset)
{
	if (len > FILEOP_CHUNK_MAX)
		return fail("too_large", path, "upload: %zu bytes is over max_chunk, %u", len,
			    FILEOP_CHUNK_MAX);
	struct stat st;
	int fd = open_regular(path, O_WRONLY, &st);
	if (fd == -ENOENT)
		return fail("invalid_request", path,
			    "upload: offset %lld, but %s does not exist (size 0): the first "
			    "chunk has offset 0",
			    (long long)offset, path);
	if (fd < 0)
		return fail_errno(-fd, path, "cannot write");
	if (st.st_size != offset) {
		close(fd);
		return fail("invalid_request", path,
			    "upload: offset %lld, but %s has %lld bytes: a chunk goes at the "
			    "file's end",
			    (long long)offset, path, (long long)st.st_size);
	}
	int r = lseek(fd, (off_t)offset, SEEK_SET) < 0 ? -errno : write_all(fd, data, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0)
		return fail_errno(-r, path, "cannot write");
	return put_reply(path, len, false, offset + (int64_t)len);
}

/* write, and upload at offset 0 or without one (chunk: at most a chunk) */
static int put_file(const char *op, const char *path, const char *data, size_t len, bool overwrite,
		    bool chunk)
{
	size_t max = chunk ? FILEOP_CHUNK_MAX : FILEOP_DATA_MAX;
	if (len > max)
		return fail("too_large", path, "%s: %zu bytes is over the limit of %zu", op, len,
			    max);
	int r = make_parents(path);
	if (r < 0)
		return fail_errno(-r, path, "cannot create the directories of");
	bool created = true;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0 && errno == EEXIST) {
		if (!overwrite)
			return fail("exists", path, "%s exists; pass overwrite to replace it",
				    path);
		struct stat st;
		created = false;
		fd = open_regular(path, O_WRONLY, &st);
		if (fd < 0)
			return fail_errno(-fd, path, "cannot write");
		if (ftruncate(fd, 0) < 0) {
			int e = errno;
			close(fd);
			return fail_errno(e, path, "cannot write");
		}
	} else if (fd < 0) {
		return fail_errno(errno, path, "cannot create");
	}
	r = write_all(fd, data, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0)
		return fail_errno(-r, path, "cannot write");
	return put_reply(path, len, created, strcmp(op, "upload") == 0 ? (int64_t)len : -1);
}

static int op_write(json_object *q, bool upload)
{
	const char *path = jstr(q, "path", NULL);
	size_t len;
	const char *data = jstr(q, upload ? "data" : "content", &len);
	const char *enc = jstr(q, "encoding", NULL);
	bool b64 = upload || (enc && strcmp(enc, "base64") == 0);
	if (!b64)
		return put_file("write", path, data, len, jbool(q, "overwrite", false), false);
	size_t n;
	char *raw = base64_decode(data, len, &n);
	if (!raw)
		return fail("invalid_request", path, "%s: '%s' is not valid base64",
			    upload ? "upload" : "write", upload ? "data" : "content");
	int64_t offset = upload ? jint(q, "offset", -1) : -1;
	int r = offset > 0 ? append_chunk(path, raw, n, offset)
			   : put_file(upload ? "upload" : "write", path, raw, n,
				      jbool(q, "overwrite", upload), offset == 0);
	free(raw);
	return r;
}

/* ---- inside: edit ---- */

/* Replace the content of the file at real (resolved, regular) with data:
 * a new file renamed over it, keeping its mode; in place when it has other
 * links (a rename would split them) or the directory is not writable. */
static int replace_content(const char *real, const struct stat *st, const char *data, size_t len)
{
	if (st->st_nlink == 1) {
		cleanup_free char *tmp = NULL;
		const char *slash = strrchr(real, '/');
		if (asprintf(&tmp, "%.*s/.agentbox-edit-XXXXXX", (int)(slash - real), real) < 0)
			return -ENOMEM;
		int fd = mkostemp(tmp, O_CLOEXEC);
		if (fd >= 0) {
			int r = fchmod(fd, st->st_mode & 07777) < 0 ? -errno : 0;
			if (r == 0)
				r = write_all(fd, data, len);
			if (close(fd) < 0 && r == 0)
				r = -errno;
			if (r == 0 && rename(tmp, real) < 0)
				r = -errno;
			if (r < 0)
				unlink(tmp);
			return r;
		}
	}
	int fd = open(real, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, data, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

static int op_edit(json_object *q)
{
	const char *path = jstr(q, "path", NULL);
	size_t olen, nlen;
	const char *old = jstr(q, "old_string", &olen);
	const char *new = jstr(q, "new_string", &nlen);
	bool all = jbool(q, "replace_all", false);
	cleanup_free char *real = realpath(path, NULL);
	if (!real)
		return fail_errno(errno, path, "cannot edit");
	char *data;
	size_t len;
	int r = read_all(real, FILEOP_EDIT_MAX, &data, &len);
	if (r == -EFBIG)
		return fail("too_large", path, "%s is over the %u bytes edit works on", path,
			    FILEOP_EDIT_MAX);
	if (r < 0)
		return fail_errno(-r, path, "cannot edit");
	uint64_t count = 0;
	for (const char *p = data; (p = memmem(p, len - (size_t)(p - data), old, olen)); p += olen)
		count++;
	if (count == 0 || (count > 1 && !all)) {
		free(data);
		if (count == 0)
			return fail("not_found", path, "old_string is not in %s", path);
		return fail("not_unique", path,
			    "old_string occurs %llu times in %s; give more context to make it "
			    "unique, or pass replace_all",
			    (unsigned long long)count, path);
	}
	struct sbuf out = {0};
	bool ok = true;
	const char *p = data;
	for (const char *m; (m = memmem(p, len - (size_t)(p - data), old, olen)); p = m + olen)
		ok = ok && sb_add(&out, p, (size_t)(m - p)) && sb_add(&out, new, nlen);
	ok = ok && sb_add(&out, p, len - (size_t)(p - data));
	free(data);
	if (!ok) {
		free(out.p);
		return fail("io_error", path, "out of memory editing %s", path);
	}
	struct stat st;
	r = stat(real, &st) < 0 ? -errno : replace_content(real, &st, out.p ? out.p : "", out.len);
	free(out.p);
	if (r < 0)
		return fail_errno(-r, path, "cannot write");
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "occurrences", json_object_new_int64((int64_t)count));
	return result(o);
}

/* ---- inside: directories ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in a directory, sorted, without . and ..; NULL and errno on
 * failure. *n set; at most max (then *more). */
static char **dir_names(int dfd, size_t max, size_t *n, bool *more)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return NULL;
	}
	size_t cap = 16;
	char **v = malloc(cap * sizeof(char *));
	*n = 0;
	*more = false;
	struct dirent *de;
	errno = 0;
	while (v && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (*n == max) {
			*more = true;
			break;
		}
		if (*n == cap) {
			char **w = realloc(v, (cap *= 2) * sizeof(char *));
			if (!w)
				break;
			v = w;
		}
		if (!(v[*n] = strdup(de->d_name)))
			break;
		(*n)++;
	}
	closedir(d);
	if (v)
		qsort(v, *n, sizeof(char *), cmp_str);
	return v;
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static char *join(const char *dir, const char *name)
{
	char *p;
	if (asprintf(&p, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name) < 0)
		return NULL;
	return p;
}

static int op_ls(json_object *q)
{
	const char *path = jstr(q, "path", NULL);
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
	if (dfd < 0)
		return fail_errno(errno, path, "cannot list");
	size_t n;
	bool more;
	char **names = dir_names(dfd, FILEOP_LIST_MAX, &n, &more);
	if (!names)
		return fail_errno(errno ? errno : ENOMEM, path, "cannot list");
	json_object *entries = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		cleanup_free char *full = join(path, names[i]);
		json_object *e = full ? file_info(full) : NULL;
		if (e)
			json_object_array_add(entries, e);
	}
	free_names(names, n);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "entries", entries);
	json_object_object_add(o, "truncated", json_object_new_boolean(more));
	return result(o);
}

/* A walk of the tree under a directory, in path order, not following
 * symlinks to directories, at most FILEOP_WALK_MAX entries. */
struct walk {
	size_t seen;
	bool truncated, stop;
	/* called for every entry; rel is the path below the walk's root */
	void (*visit)(struct walk *w, const char *full, const char *rel, const struct stat *lst);
	/* whether to go into the directory rel (at depth, 1 for the root's children) */
	bool (*descend)(struct walk *w, const char *rel, int depth);
};

static void walk_dir(struct walk *w, const char *dir, const char *rel, int depth)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (dfd < 0)
		return;
	size_t n;
	bool more;
	char **names = dir_names(dfd, FILEOP_WALK_MAX, &n, &more);
	if (!names)
		return;
	for (size_t i = 0; i < n && !w->stop; i++) {
		if (++w->seen > FILEOP_WALK_MAX) {
			w->truncated = w->stop = true;
			break;
		}
		cleanup_free char *full = join(dir, names[i]);
		cleanup_free char *r = rel[0] ? join(rel, names[i]) : strdup(names[i]);
		struct stat lst;
		if (!full || !r || lstat(full, &lst) < 0)
			continue;
		w->visit(w, full, r, &lst);
		if (S_ISDIR(lst.st_mode) && depth < MAX_DEPTH && !w->stop &&
		    (!w->descend || w->descend(w, r, depth)))
			walk_dir(w, full, r, depth + 1);
	}
	free_names(names, n);
}

/* Whether the path components of path match those of pat: fnmatch for
 * each, "**" for any number of them. */
static bool match_parts(char **pat, size_t np, char **path, size_t nn)
{
	if (np == 0)
		return nn == 0;
	if (strcmp(pat[0], "**") == 0) {
		for (size_t k = 0; k <= nn; k++)
			if (match_parts(pat + 1, np - 1, path + k, nn - k))
				return true;
		return false;
	}
	return nn > 0 && fnmatch(pat[0], path[0], 0) == 0 &&
	       match_parts(pat + 1, np - 1, path + 1, nn - 1);
}

/* Split s at '/' into parts (at most max), in buf. */
static size_t split(const char *s, char *buf, size_t size, char **parts, size_t max)
{
	snprintf(buf, size, "%s", s);
	size_t n = 0;
	for (char *save, *t = strtok_r(buf, "/", &save); t && n < max;
	     t = strtok_r(NULL, "/", &save))
		if (strcmp(t, "."))
			parts[n++] = t;
	return n;
}

#define MAX_PARTS 128

static bool glob_match(const char *pattern, const char *rel)
{
	char pb[PATH_MAX], rb[PATH_MAX];
	char *pp[MAX_PARTS], *rp[MAX_PARTS];
	size_t np = split(pattern, pb, sizeof(pb), pp, MAX_PARTS);
	size_t nr = split(rel, rb, sizeof(rb), rp, MAX_PARTS);
	return match_parts(pp, np, rp, nr);
}

struct glob_walk {
	struct walk w;
	const char *pattern;
	size_t parts;
	bool deep;	 /* the pattern has "**" */
	bool files_only; /* regular files (or symlinks to them) only */
	struct match {
		char *path;
		json_object *info;
		struct timespec mtime;
	} * m;
	size_t n, cap;
};

static void glob_visit(struct walk *w, const char *full, const char *rel, const struct stat *lst)
{
	struct glob_walk *g = (struct glob_walk *)w;
	if (!glob_match(g->pattern, rel))
		return;
	struct stat st;
	if (stat(full, &st) < 0)
		st = *lst;
	if (g->files_only && !S_ISREG(st.st_mode))
		return;
	if (g->n == FILEOP_LIST_MAX) {
		w->truncated = w->stop = true;
		return;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;
		struct match *m = realloc(g->m, cap * sizeof(*m));
		if (!m) {
			w->stop = true;
			return;
		}
		g->m = m;
		g->cap = cap;
	}
	json_object *info = file_info(full);
	char *p = strdup(full);
	if (!info || !p) {
		json_object_put(info);
		free(p);
		return;
	}
	g->m[g->n++] = (struct match){.path = p, .info = info, .mtime = st.st_mtim};
}

static bool glob_descend(struct walk *w, const char *rel, int depth)
{
	struct glob_walk *g = (struct glob_walk *)w;
	(void)rel;
	return g->deep || (size_t)depth < g->parts;
}

static int newest_first(const void *a, const void *b)
{
	const struct match *x = a, *y = b;
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? 1 : -1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? 1 : -1;
	return strcmp(x->path, y->path);
}

static int op_glob(json_object *q)
{
	const char *pattern = jstr(q, "pattern", NULL);
	const char *base = jstr(q, "path", NULL);
	struct stat st;
	if (stat(base, &st) < 0)
		return fail_errno(errno, base, "cannot search");
	if (!S_ISDIR(st.st_mode))
		return fail("not_directory", base, "%s is not a directory", base);
	/* the walk starts below the pattern's leading components without
	 * wildcards (an absolute pattern's included) */
	char full[PATH_MAX], buf[PATH_MAX], root[PATH_MAX] = "", pat[PATH_MAX] = "";
	if ((size_t)snprintf(full, sizeof(full), "%s/%s", pattern[0] == '/' ? "" : base, pattern) >=
	    sizeof(full))
		return fail("invalid_path", NULL, "glob: the pattern is too long");
	char *parts[MAX_PARTS];
	size_t np = split(full, buf, sizeof(buf), parts, MAX_PARTS), k = 0;
	while (k + 1 < np && !strpbrk(parts[k], "*?[\\"))
		k++;
	for (size_t i = 0; i < k; i++)
		snprintf(root + strlen(root), sizeof(root) - strlen(root), "/%s", parts[i]);
	if (!root[0])
		snprintf(root, sizeof(root), "/");
	for (size_t i = k; i < np; i++)
		snprintf(pat + strlen(pat), sizeof(pat) - strlen(pat), "%s%s", i > k ? "/" : "",
			 parts[i]);
	struct glob_walk g = {
		.w = {.visit = glob_visit, .descend = glob_descend},
		.pattern = pat,
		.parts = np - k,
		.deep = strstr(pat, "**") != NULL,
		.files_only = jbool(q, "files_only", false),
	};
	if (np > 0 && stat(root, &st) == 0 && S_ISDIR(st.st_mode))
		walk_dir(&g.w, root, "", 1);
	if (g.n) /* qsort of NULL, even for 0 items, is undefined (UBSan stops it) */
		qsort(g.m, g.n, sizeof(*g.m), newest_first);
	json_object *matches = json_object_new_array();
	for (size_t i = 0; i < g.n; i++) {
		json_object_array_add(matches, g.m[i].info);
		free(g.m[i].path);
	}
	free(g.m);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "matches", matches);
	json_object_object_add(o, "truncated", json_object_new_boolean(g.w.truncated));
	return result(o);
}

/* ---- inside: grep ---- */

struct grep_walk {
	struct walk w;
	const char *pattern, *glob;
	size_t plen;
	bool regex, icase;
	regex_t re;
	char *lower_pat;
	uint64_t max, count, skip; /* skip: matches passed over first (paging) */
	json_object *matches;
};

static void lower(char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] >= 'A' && s[i] <= 'Z')
			s[i] = (char)(s[i] - 'A' + 'a');
}

static bool line_matches(struct grep_walk *g, char *line, size_t n, char *scratch)
{
	if (g->regex) {
		char saved = line[n];
		line[n] = '\0';
		bool m = regexec(&g->re, line, 0, NULL, 0) == 0;
		line[n] = saved;
		return m;
	}
	if (!g->icase)
		return memmem(line, n, g->pattern, g->plen) != NULL;
	memcpy(scratch, line, n);
	lower(scratch, n);
	return memmem(scratch, n, g->lower_pat, g->plen) != NULL;
}

static void grep_file(struct grep_walk *g, const char *full)
{
	char *data;
	size_t len;
	if (read_all(full, FILEOP_EDIT_MAX, &data, &len) < 0)
		return;
	if (memchr(data, '\0', len < SNIFF ? len : SNIFF)) {
		free(data);
		return;
	}
	char *scratch = g->icase && !g->regex ? malloc(len + 1) : NULL;
	if (g->icase && !g->regex && !scratch) {
		free(data);
		return;
	}
	uint64_t lineno = 0;
	for (char *p = data, *e = data + len; p < e && !g->w.stop;) {
		char *nl = memchr(p, '\n', (size_t)(e - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(e - p);
		lineno++;
		bool hit = line_matches(g, p, n, scratch);
		if (hit && g->skip > 0) {
			g->skip--;
		} else if (hit) {
			if (g->count == g->max) {
				g->w.truncated = g->w.stop = true;
				break;
			}
			g->count++;
			size_t tn = n > GREP_TEXT_MAX ? GREP_TEXT_MAX : n;
			while (tn < n && tn > 0 && ((unsigned char)p[tn] & 0xC0) == 0x80)
				tn--;
			json_object *m = json_object_new_object();
			json_object_object_add(m, "path", lossy(full, strlen(full)));
			json_object_object_add(m, "line", json_object_new_int64((int64_t)lineno));
			json_object_object_add(m, "text", lossy(p, tn));
			json_object_array_add(g->matches, m);
		}
		p = nl ? nl + 1 : e;
	}
	free(scratch);
	free(data);
}

static bool grep_wanted(struct grep_walk *g, const char *rel)
{
	if (!g->glob)
		return true;
	if (strchr(g->glob, '/'))
		return glob_match(g->glob, rel);
	const char *base = strrchr(rel, '/');
	return fnmatch(g->glob, base ? base + 1 : rel, 0) == 0;
}

static void grep_visit(struct walk *w, const char *full, const char *rel, const struct stat *lst)
{
	struct grep_walk *g = (struct grep_walk *)w;
	struct stat st;
	if (S_ISDIR(lst->st_mode) || stat(full, &st) < 0 || !S_ISREG(st.st_mode) ||
	    !grep_wanted(g, rel))
		return;
	grep_file(g, full);
}

static int op_grep(json_object *q)
{
	struct grep_walk g = {
		.w = {.visit = grep_visit},
		.pattern = jstr(q, "pattern", &g.plen),
		.glob = jstr(q, "glob", NULL),
		.regex = jbool(q, "regex", false),
		.icase = jbool(q, "ignore_case", false),
		.max = (uint64_t)jint(q, "max_count", 1000),
		.skip = (uint64_t)jint(q, "skip", 0),
	};
	const char *path = jstr(q, "path", NULL);
	if (g.max > GREP_MAX_COUNT)
		g.max = GREP_MAX_COUNT;
	if (g.regex) {
		int r = regcomp(&g.re, g.pattern,
				REG_EXTENDED | REG_NOSUB | (g.icase ? REG_ICASE : 0));
		if (r) {
			char why[256];
			regerror(r, &g.re, why, sizeof(why));
			return fail("invalid_request", NULL,
				    "grep: 'pattern' is not a valid regular "
				    "expression: %s",
				    why);
		}
	} else if (g.icase) {
		g.lower_pat = strdup(g.pattern);
		if (!g.lower_pat)
			return fail("io_error", path, "out of memory");
		lower(g.lower_pat, g.plen);
	}
	struct stat st;
	if (stat(path, &st) < 0) {
		int e = errno;
		if (g.regex)
			regfree(&g.re);
		free(g.lower_pat);
		return fail_errno(e, path, "cannot search");
	}
	g.matches = json_object_new_array();
	if (S_ISDIR(st.st_mode)) {
		walk_dir(&g.w, path, "", 1);
	} else if (S_ISREG(st.st_mode)) {
		const char *base = strrchr(path, '/');
		if (grep_wanted(&g, base ? base + 1 : path))
			grep_file(&g, path);
	}
	if (g.regex)
		regfree(&g.re);
	free(g.lower_pat);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "matches", g.matches);
	json_object_object_add(o, "truncated", json_object_new_boolean(g.w.truncated));
	return result(o);
}

/* ---- inside: delete, download ---- */

/* Remove name (in the directory dfd) and all below it, without following
 * symlinks. Counts what is removed. */
static int remove_tree(int dfd, const char *name, uint64_t *count, int depth)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dfd, name, 0) < 0)
			return -errno;
		(*count)++;
		return 0;
	}
	if (depth > MAX_DEPTH)
		return -ELOOP;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	int sub = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (sub < 0) {
		close(fd);
		return -errno;
	}
	size_t n;
	bool more;
	char **names = dir_names(fd, SIZE_MAX, &n, &more);
	int r = names ? 0 : -(errno ? errno : ENOMEM);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = remove_tree(sub, names[i], count, depth + 1);
	free_names(names, n);
	close(sub);
	if (r == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		r = -errno;
	if (r == 0)
		(*count)++;
	return r;
}

static int op_delete(json_object *q)
{
	const char *path = jstr(q, "path", NULL);
	bool recursive = jbool(q, "recursive", false);
	const char *slash = strrchr(path, '/');
	cleanup_free char *parent =
		slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	if (!parent)
		return fail("io_error", path, "out of memory");
	int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
	if (dfd < 0)
		return fail_errno(errno, path, "cannot delete");
	struct stat st;
	uint64_t count = 0;
	int r = fstatat(dfd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	if (r == 0 && S_ISDIR(st.st_mode) && !recursive) {
		r = unlinkat(dfd, slash + 1, AT_REMOVEDIR) < 0 ? -errno : 0;
		if (r == -ENOTEMPTY || r == -EEXIST) {
			close(dfd);
			return fail(
				"is_directory", path,
				"%s is a directory that is not empty; pass recursive to delete it "
				"and everything in it",
				path);
		}
		if (r == 0)
			count = 1;
	} else if (r == 0) {
		r = remove_tree(dfd, slash + 1, &count, 0);
	}
	close(dfd);
	if (r < 0)
		return fail_errno(-r, path,
				  count ? "could not delete everything in" : "cannot delete");
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "deleted", json_object_new_int64((int64_t)count));
	return result(o);
}

/* A download's chunk: up to length bytes from offset. */
static int download_chunk(const char *path, int64_t offset, int64_t length)
{
	struct stat st;
	int fd = open_regular(path, O_RDONLY, &st);
	if (fd < 0)
		return fail_errno(-fd, path, "cannot read");
	if (offset > st.st_size) {
		close(fd);
		return fail("invalid_request", path,
			    "download: offset %lld is past the end of %s, which has %lld bytes",
			    (long long)offset, path, (long long)st.st_size);
	}
	size_t want = (size_t)(length < st.st_size - offset ? length : st.st_size - offset), n = 0;
	cleanup_free char *buf = malloc(want + 1);
	if (!buf) {
		close(fd);
		return fail("io_error", path, "out of memory");
	}
	while (n < want) {
		ssize_t k = pread(fd, buf + n, want - n, (off_t)(offset + (int64_t)n));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			close(fd);
			return fail_errno(e, path, "cannot read");
		}
		if (k == 0)
			break; /* the file shrank while being read */
		n += (size_t)k;
	}
	/* whether anything follows: the size now, which may have changed */
	int64_t size = fstat(fd, &st) == 0 ? (int64_t)st.st_size : offset + (int64_t)n;
	close(fd);
	char *b = base64_encode(buf, n);
	if (!b)
		return fail("io_error", path, "out of memory");
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "data", json_object_new_string(b));
	json_object_object_add(o, "size", json_object_new_int64(size));
	json_object_object_add(o, "offset", json_object_new_int64(offset));
	json_object_object_add(o, "eof", json_object_new_boolean(offset + (int64_t)n >= size));
	free(b);
	return result(o);
}

static int op_download(json_object *q)
{
	const char *path = jstr(q, "path", NULL);
	int64_t offset = jint(q, "offset", -1);
	if (offset >= 0)
		return download_chunk(path, offset, jint(q, "length", FILEOP_CHUNK_MAX));
	char *data;
	size_t len;
	int r = read_all(path, FILEOP_DATA_MAX, &data, &len);
	if (r == -EFBIG)
		return fail("too_large", path, "%s is over the %u bytes a download carries", path,
			    FILEOP_DATA_MAX);
	if (r < 0)
		return fail_errno(-r, path, "cannot read");
	char *b = base64_encode(data, len);
	free(data);
	if (!b)
		return fail("io_error", path, "out of memory");
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "data", json_object_new_string(b));
	json_object_object_add(o, "size", json_object_new_int64((int64_t)len));
	free(b);
	return result(o);
}

int fileop_run(const char *request, int out)
{
	reply_fd = out;
	json_object *q = json_tokener_parse(request);
	json_object *opv;
	if (!q || !json_object_object_get_ex(q, "op", &opv)) {
		json_object_put(q);
		return 1;
	}
	const char *op = json_object_get_string(opv);
	int r = 1;
	if (!strcmp(op, "read"))
		r = op_read(q);
	else if (!strcmp(op, "write"))
		r = op_write(q, false);
	else if (!strcmp(op, "upload"))
		r = op_write(q, true);
	else if (!strcmp(op, "edit"))
		r = op_edit(q);
	else if (!strcmp(op, "ls"))
		r = op_ls(q);
	else if (!strcmp(op, "glob"))
		r = op_glob(q);
	else if (!strcmp(op, "grep"))
		r = op_grep(q);
	else if (!strcmp(op, "delete"))
		r = op_delete(q);
	else if (!strcmp(op, "download"))
		r = op_download(q);
	json_object_put(q);
	return r;
}
