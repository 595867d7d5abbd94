/* The bodies of agent-sandbox's legacy runtime (rt_reply.h): what its
 * main.py returns, what FastAPI and pydantic v2 say of a bad body, what
 * Python's exceptions print, so that a client parsing either gets the same. */
#include "httpapi/rt_reply.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/rt_server.h"
#include "util/output.h"

#define JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* The object as compact JSON, and the object released. */
static char *dump(json_object *o)
{
	if (!o)
		return NULL;
	const char *s = json_object_to_json_string_ext(o, JSON_FLAGS);
	char *r = s ? strdup(s) : NULL;
	json_object_put(o);
	return r;
}

/* A string of len bytes that may not be UTF-8, lossily, as Python's
 * text=True decoding with errors replaced would give it. */
static json_object *text(const char *s, size_t len)
{
	if (!s)
		return json_object_new_string("");
	if (utf8_valid(s, len))
		return json_object_new_string_len(s, (int)len);
	size_t n = 0;
	char *l = utf8_lossy(s, len, &n);
	json_object *o = l ? json_object_new_string_len(l, (int)n) : json_object_new_string("");
	free(l);
	return o;
}

char *rt_message(const char *msg)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "message", json_object_new_string(msg));
	return dump(o);
}

char *rt_detail(const char *detail)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "detail", json_object_new_string(detail));
	return dump(o);
}

/* FastAPI's 422: {"detail":[{"type","loc":["body",loc...],"msg","input",
 * "ctx"?}]}; input and ctx are taken. */
static char *unprocessable(const char *type, const char *loc, int pos, const char *msg,
			   json_object *input, json_object *ctx)
{
	json_object *e = json_object_new_object();
	json_object_object_add(e, "type", json_object_new_string(type));
	json_object *l = json_object_new_array();
	json_object_array_add(l, json_object_new_string("body"));
	if (loc)
		json_object_array_add(l, json_object_new_string(loc));
	else if (pos >= 0)
		json_object_array_add(l, json_object_new_int(pos));
	json_object_object_add(e, "loc", l);
	json_object_object_add(e, "msg", json_object_new_string(msg));
	json_object_object_add(e, "input", input);
	if (ctx)
		json_object_object_add(e, "ctx", ctx);
	json_object *d = json_object_new_array();
	json_object_array_add(d, e);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "detail", d);
	return dump(o);
}

char *rt_execute_command(const char *body, size_t len, char **err_body)
{
	*err_body = NULL;
	size_t i = 0;
	while (i < len && strchr(" \t\r\n", body[i]))
		i++;
	if (i == len) { /* no body: FastAPI's "Field required" for the body itself */
		*err_body = unprocessable("missing", NULL, -1, "Field required", NULL, NULL);
		return NULL;
	}
	json_tokener *tok = json_tokener_new();
	json_object *o = tok ? json_tokener_parse_ex(tok, body, (int)len) : NULL;
	int off = tok ? (int)json_tokener_get_parse_end(tok) : 0;
	bool whole = tok && json_tokener_get_error(tok) == json_tokener_success;
	json_tokener_free(tok);
	if (o && whole && (size_t)off < len) { /* trailing bytes: "Extra data" */
		size_t j = (size_t)off;
		while (j < len && strchr(" \t\r\n", body[j]))
			j++;
		whole = j == len;
		off = (int)j;
	}
	if (!o || !whole || !utf8_valid(body, len)) {
		json_object_put(o);
		json_object *ctx = json_object_new_object();
		json_object_object_add(
			ctx, "error", json_object_new_string(o ? "Extra data" : "Expecting value"));
		*err_body = unprocessable("json_invalid", NULL, off, "JSON decode error",
					  json_object_new_object(), ctx);
		return NULL;
	}
	if (!json_object_is_type(o, json_type_object)) {
		*err_body = unprocessable(
			"model_attributes_type", NULL, -1,
			"Input should be a valid dictionary or object to extract fields from", o,
			NULL);
		return NULL;
	}
	json_object *c = NULL;
	if (!json_object_object_get_ex(o, "command", &c)) {
		*err_body = unprocessable("missing", "command", -1, "Field required", o, NULL);
		return NULL;
	}
	if (!json_object_is_type(c, json_type_string)) {
		*err_body =
			unprocessable("string_type", "command", -1,
				      "Input should be a valid string", json_object_get(c), NULL);
		json_object_put(o);
		return NULL;
	}
	char *r = strndup(json_object_get_string(c), (size_t)json_object_get_string_len(c));
	json_object_put(o);
	return r;
}

char *rt_execute_body(const char *out, size_t out_len, const char *err, size_t err_len,
		      int exit_code)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "stdout", text(out, out_len));
	json_object_object_add(o, "stderr", text(err, err_len));
	json_object_object_add(o, "exit_code", json_object_new_int(exit_code));
	return dump(o);
}

char *rt_execute_failed(const char *why)
{
	char *msg = NULL;
	if (asprintf(&msg, "Failed to execute command: %s", why) < 0)
		return NULL;
	char *r = rt_execute_body("", 0, msg, strlen(msg), 1);
	free(msg);
	return r;
}

/* Python's repr() of one str (printable ASCII and UTF-8 kept; the
 * quote chosen as Python chooses it), appended to f. */
static void pyrepr_str(FILE *f, const char *s)
{
	char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
	fputc(q, f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '\\' || *p == (unsigned char)q)
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\r')
			fputs("\\r", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
	}
	fputc(q, f);
}

char *rt_pyrepr_list(char *const *argv)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	fputc('[', f);
	for (size_t i = 0; argv && argv[i]; i++) {
		if (i)
			fputs(", ", f);
		pyrepr_str(f, argv[i]);
	}
	fputc(']', f);
	fclose(f);
	return buf;
}

/* Python's repr() of a float: the shortest form that reads back. */
static void pyrepr_float(char *buf, size_t n, double v)
{
	if (v > -1e16 && v < 1e16 && v == (double)(long long)v) { /* no libm */
		snprintf(buf, n, "%.1f", v);
		return;
	}
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, n, "%.*g", p, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

/* "agentbox: cannot run 'NAME': WHY\n", the session's word for a program
 * that could not be executed (in the last line of stderr: a sanitizer build
 * may have warned before it, on that line too), as Python's OSError prints
 * it. */
static char *not_run(const struct ab_result *res)
{
	static const char pre[] = "agentbox: cannot run '";
	size_t len;
	const char *e = rt_cannot_run_line(res, &len);
	if (!e)
		return NULL;
	len++; /* its newline, as before */
	if (len <= sizeof(pre))
		return NULL;
	char *copy = strndup(e, len);
	char *name = copy ? copy + sizeof(pre) - 1 : NULL;
	char *end = name ? strstr(name, "': ") : NULL;
	if (!end) {
		free(copy);
		return NULL;
	}
	*end = '\0';
	char *why = end + 3;
	why[strcspn(why, "\n")] = '\0';
	int num = !strcmp(why, "No such file or directory") ? ENOENT
		  : !strcmp(why, "Permission denied")	    ? EACCES
							    : 0;
	char *buf = NULL;
	size_t blen = 0;
	FILE *f = open_memstream(&buf, &blen);
	if (f) {
		if (num)
			fprintf(f, "[Errno %d] ", num);
		fprintf(f, "%s: ", why);
		pyrepr_str(f, name);
		fclose(f);
	}
	free(copy);
	return buf;
}

char *rt_execute_result(const struct ab_result *res, char *const *argv)
{
	if (res->timed_out) {
		char t[40], *cmd = rt_pyrepr_list(argv), *why = NULL;
		pyrepr_float(t, sizeof(t), (double)res->timeout_ms / 1000.0);
		char *r = NULL;
		if (cmd && asprintf(&why, "Command '%s' timed out after %s seconds", cmd, t) >= 0)
			r = rt_execute_failed(why);
		free(cmd);
		free(why);
		return r;
	}
	if (res->exit_code == AB_EXIT_NOT_FOUND || res->exit_code == AB_EXIT_CANNOT_EXEC) {
		char *why = not_run(res);
		if (why) {
			char *r = rt_execute_failed(why);
			free(why);
			return r;
		}
	}
	int code = res->signal ? -res->signal : res->exit_code;
	return rt_execute_body(res->out.data, res->out.len, res->err.data, res->err.len, code);
}

/* "2026-11-22T10:00:00.123Z" as seconds since the epoch; NAN if malformed */
static double iso_seconds(const char *s)
{
	struct tm tm = {0};
	unsigned ms = 0;
	if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d.%3uZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			 &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
		return NAN;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (double)timegm(&tm) + ms / 1000.0;
}

json_object *rt_list_entry(json_object *e, const char *name)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(name));
	json_object_object_add(
		o, "size",
		json_object_new_int64(json_object_get_int64(json_object_object_get(e, "size"))));
	json_object_object_add(
		o, "type",
		json_object_new_string(json_object_get_boolean(json_object_object_get(e, "is_dir"))
					       ? "directory"
					       : "file"));
	return o;
}

char *rt_list_body(json_object *ls)
{
	json_object *entries = json_object_object_get(ls, "entries");
	if (!json_object_is_type(entries, json_type_array))
		return NULL;
	json_object *out = json_object_new_array();
	for (size_t i = 0; i < json_object_array_length(entries); i++) {
		json_object *e = json_object_array_get_idx(entries, i);
		const char *path = json_object_get_string(json_object_object_get(e, "path"));
		const char *slash = path ? strrchr(path, '/') : NULL;
		double t = iso_seconds(
			json_object_get_string(json_object_object_get(e, "modified_at")));
		if (!slash || isnan(t)) {
			json_object_put(out);
			return NULL;
		}
		json_object *o = rt_list_entry(e, slash + 1);
		char num[40]; /* Python's repr, not json-c's %.17g */
		pyrepr_float(num, sizeof(num), t);
		json_object_object_add(o, "mod_time", json_object_new_double_s(t, num));
		json_object_array_add(out, o);
	}
	return dump(out);
}

char *rt_disposition(const char *name)
{
	/* Starlette: filename="..." when quote(name) == name, else RFC 5987 */
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "0123456789_.-~/";
	bool plain = strspn(name, safe) == strlen(name);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	if (plain) {
		fprintf(f, "attachment; filename=\"%s\"", name);
	} else {
		fputs("attachment; filename*=utf-8''", f);
		for (const unsigned char *p = (const unsigned char *)name; *p; p++)
			if (strchr(safe, *p))
				fputc(*p, f);
			else
				fprintf(f, "%%%02X", *p);
	}
	fclose(f);
	return buf;
}
