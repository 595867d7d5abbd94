/* A request line of agentbox serve into a checked request (request.h).
 * Every field is checked here, before anything runs; the first problem
 * found is the error, with the protocol's code and a message naming the
 * field. */
#include "front/request.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "files/fileop.h"
#include "files/fileop_host.h"
#include "util/base64.h"
#include "layer/layer.h"
#include "ckpt/ckpt.h"

#define BAD(...) return ab_error_proto(e, AB_ERRC_INVALID_REQUEST, __VA_ARGS__)

static bool valid_id(json_object *id)
{
	if (json_object_is_type(id, json_type_int))
		return true;
	if (!json_object_is_type(id, json_type_string))
		return false;
	int n = json_object_get_string_len(id);
	return n >= 1 && n <= AB_REQUEST_MAX_ID_LEN;
}

/* A string field without NUL bytes. */
static bool plain_string(json_object *v)
{
	return json_object_is_type(v, json_type_string) &&
	       strlen(json_object_get_string(v)) == (size_t)json_object_get_string_len(v);
}

static int only_fields(json_object *req, const char *op, const char *const *allowed,
		       struct ab_error *e)
{
	json_object_object_foreach(req, key, val)
	{
		(void)val;
		bool ok = strcmp(key, "op") == 0 || strcmp(key, "id") == 0;
		for (const char *const *a = allowed; !ok && *a; a++)
			ok = strcmp(key, *a) == 0;
		if (!ok)
			BAD("%s: unknown field '%.64s'", op, key);
	}
	return 0;
}

int ab_request_timeout(json_object *req, bool zero_ok, unsigned long long *ms)
{
	json_object *v;
	if (!json_object_object_get_ex(req, "timeout", &v))
		return 0;
	double t = json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)
			   ? json_object_get_double(v)
			   : -1;
	if (!(zero_ok ? t >= 0 : t > 0) || t > 1e7)
		return -EINVAL;
	*ms = (unsigned long long)(t * 1000 + 0.5);
	if (t > 0 && *ms == 0)
		*ms = 1;
	return 0;
}

/* A request's "timeout" in seconds, into *ms (0 when absent). */
static int parse_timeout(json_object *req, const char *op, unsigned long long *ms,
			 struct ab_error *e)
{
	if (ab_request_timeout(req, true, ms) < 0)
		BAD("%s: 'timeout' must be a number of seconds from 0 to 10000000", op);
	return 0;
}

/* An integer field from lo to hi, into *out. */
static bool int_field(json_object *o, const char *name, int64_t lo, int64_t hi, int64_t *out)
{
	json_object *v;
	if (!json_object_object_get_ex(o, name, &v) || !json_object_is_type(v, json_type_int))
		return false;
	*out = json_object_get_int64(v);
	return *out >= lo && *out <= hi;
}

/* exec's "stdin": a string of data, or {"stream": true}; and "pty":
 * {"rows": R, "cols": C}, whose input is always streamed. */
static int parse_stdin_pty(struct ab_request *q, struct ab_error *e)
{
	json_object *v;
	if (json_object_object_get_ex(q->req, "stdin", &v)) {
		json_object *st;
		if (json_object_is_type(v, json_type_object)) {
			if (json_object_object_length(v) != 1 ||
			    !json_object_object_get_ex(v, "stream", &st) ||
			    !json_object_is_type(st, json_type_boolean) ||
			    !json_object_get_boolean(st))
				BAD("exec: 'stdin' must be a string or {\"stream\": true}");
			q->x.stdin_stream = true;
		} else if (json_object_is_type(v, json_type_string)) {
			q->x.stdin_data = json_object_get_string(v);
			q->x.stdin_len = (size_t)json_object_get_string_len(v);
		} else {
			BAD("exec: 'stdin' must be a string or {\"stream\": true}");
		}
	}
	if (!json_object_object_get_ex(q->req, "pty", &v))
		return 0;
	int64_t rows, cols;
	if (!json_object_is_type(v, json_type_object) || json_object_object_length(v) != 2 ||
	    !int_field(v, "rows", 1, 65535, &rows) || !int_field(v, "cols", 1, 65535, &cols))
		BAD("exec: 'pty' must be {\"rows\": R, \"cols\": C}, each from 1 to 65535");
	if (q->x.stdin_data)
		BAD("exec: a 'pty' command's input comes in 'stdin' ops: give no 'stdin' data");
	if (json_object_object_get_ex(q->req, "keep_background", &v) && json_object_get_boolean(v))
		BAD("exec: 'keep_background' does not apply to a 'pty' command");
	q->x.pty = true;
	q->x.pty_rows = (unsigned short)rows;
	q->x.pty_cols = (unsigned short)cols;
	q->x.stdin_stream = false; /* the terminal is its stdin */
	return 0;
}

static int parse_exec(struct ab_request *q, struct ab_error *e)
{
	static const char *const fields[] = {
		"command",  "argv",	  "cwd",	  "env",    "timeout",
		"stdin",    "max_output", "merge_output", "stream", "keep_background",
		"encoding", "pty",	  NULL,
	};
	json_object *req = q->req;
	if (only_fields(req, "exec", fields, e) < 0)
		return -e->code;
	json_object *v, *cmd = NULL, *argv = NULL;
	json_object_object_get_ex(req, "command", &cmd);
	json_object_object_get_ex(req, "argv", &argv);
	if (!cmd == !argv)
		BAD("exec: give exactly one of 'command' (a shell string) and 'argv' (an array)");
	if (cmd) {
		if (!plain_string(cmd) || json_object_get_string_len(cmd) == 0)
			BAD("exec: 'command' must be a non-empty string without NUL bytes");
		q->argv = calloc(5, sizeof(char *));
		if (!q->argv)
			BAD("exec: out of memory");
		/* "--": a command starting with '-' is not sh's options */
		q->argv[0] = "/bin/sh";
		q->argv[1] = "-c";
		q->argv[2] = "--";
		q->argv[3] = (char *)json_object_get_string(cmd);
	} else {
		size_t n = json_object_is_type(argv, json_type_array)
				   ? json_object_array_length(argv)
				   : 0;
		if (n == 0)
			BAD("exec: 'argv' must be a non-empty array of strings");
		q->argv = calloc(n + 1, sizeof(char *));
		if (!q->argv)
			BAD("exec: out of memory");
		for (size_t i = 0; i < n; i++) {
			json_object *a = json_object_array_get_idx(argv, i);
			if (!plain_string(a))
				BAD("exec: argv[%zu] must be a string without NUL bytes", i);
			q->argv[i] = (char *)json_object_get_string(a);
		}
		if (!q->argv[0][0])
			BAD("exec: argv[0] is empty");
	}
	q->x.argv = q->argv;
	if (json_object_object_get_ex(req, "cwd", &v)) {
		if (!plain_string(v) || json_object_get_string_len(v) == 0 ||
		    json_object_get_string_len(v) > 4095)
			BAD("exec: 'cwd' must be a non-empty path");
		q->x.cwd = json_object_get_string(v);
	}
	if (json_object_object_get_ex(req, "env", &v)) {
		if (!json_object_is_type(v, json_type_object))
			BAD("exec: 'env' must be an object of strings");
		size_t n = (size_t)json_object_object_length(v), i = 0;
		q->env = calloc(n + 1, sizeof(char *));
		if (!q->env)
			BAD("exec: out of memory");
		json_object_object_foreach(v, k, val)
		{
			if (!plain_string(val))
				BAD("exec: env.%.64s must be a string without NUL bytes", k);
			if (asprintf(&q->env[i], "%s=%s", k, json_object_get_string(val)) < 0) {
				q->env[i] = NULL;
				BAD("exec: out of memory");
			}
			i++;
		}
		q->x.env = q->env;
	}
	if (parse_timeout(req, "exec", &q->x.timeout_ms, e) < 0)
		return -e->code;
	if (parse_stdin_pty(q, e) < 0)
		return -e->code;
	if (json_object_object_get_ex(req, "max_output", &v)) {
		int64_t m = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
		if (m < 1024 || m > (1LL << 30))
			BAD("exec: 'max_output' must be an integer from 1024 to 1073741824 bytes");
		q->x.max_output = (unsigned long long)m;
	}
	const struct {
		const char *name;
		bool *out;
	} flags[] = {
		{"merge_output", &q->x.merge_output},
		{"stream", &q->x.stream},
		{"keep_background", &q->x.keep_background},
	};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (!json_object_object_get_ex(req, flags[i].name, &v))
			continue;
		if (!json_object_is_type(v, json_type_boolean))
			BAD("exec: '%s' must be true or false", flags[i].name);
		*flags[i].out = json_object_get_boolean(v);
	}
	q->merged = q->x.merge_output;
	if (json_object_object_get_ex(req, "encoding", &v)) {
		const char *enc =
			json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
		if (strcmp(enc, "base64") == 0)
			q->base64 = true;
		else if (strcmp(enc, "utf-8") != 0 && strcmp(enc, "utf8") != 0)
			BAD("exec: 'encoding' must be \"utf-8\" or \"base64\"");
	}
	return 0;
}

/* A file operation: checked here, done inside (fileop.h). */
static int parse_file_op(struct ab_request *q, struct ab_error *e)
{
	int r = q->host_files ? fileop_prepare_host(q->req, q->op, &q->inner, &q->host, e)
			      : fileop_prepare(q->req, q->op, &q->inner, e);
	if (r < 0)
		return r;
	if ((r = parse_timeout(q->req, q->op, &q->x.timeout_ms, e)) < 0)
		return r;
	q->file_op = fileop_name(q->op); /* req's string goes with req */
	q->x.file_op = q->inner;
	if (strcmp(q->op, "watch") == 0) { /* its events streamed until cancelled */
		q->watch = true;
		q->x.stream = true;
		q->x.no_timeout = !q->x.timeout_ms;
		q->x.max_output = 4096; /* the events go out as they come */
	}
	return 0;
}

static int parse_cancel(struct ab_request *q, struct ab_error *e)
{
	static const char *const fields[] = {"target", NULL};
	if (only_fields(q->req, "cancel", fields, e) < 0)
		return -e->code;
	if (!json_object_object_get_ex(q->req, "target", &q->target) || !valid_id(q->target)) {
		q->target = NULL;
		BAD("cancel: 'target' must be the id of a running or queued command");
	}
	return 0;
}

/* output: {"target": ID, "offsets": {"stdout": N, "stderr": N}} (or
 * "output" for a merged stream; a stream not named: from 0). */
static int parse_output(struct ab_request *q, struct ab_error *e)
{
	static const char *const fields[] = {"target", "offsets", NULL};
	static const char *const streams[] = {"stdout", "stderr", "output", NULL};
	if (only_fields(q->req, "output", fields, e) < 0)
		return -e->code;
	if (!json_object_object_get_ex(q->req, "target", &q->target) || !valid_id(q->target)) {
		q->target = NULL;
		BAD("output: 'target' must be the id of a running command");
	}
	json_object *offs;
	if (!json_object_object_get_ex(q->req, "offsets", &offs))
		return 0;
	if (!json_object_is_type(offs, json_type_object) ||
	    only_fields(offs, "output: offsets", streams, e) < 0)
		BAD("output: 'offsets' must be an object of stdout, stderr or output to offsets");
	for (int k = 0; streams[k]; k++) {
		int64_t n = 0;
		json_object *v;
		if (json_object_object_get_ex(offs, streams[k], &v) &&
		    !int_field(offs, streams[k], 0, INT64_MAX, &n))
			BAD("output: offsets.%s must be an integer of 0 or more", streams[k]);
		q->offsets[k == 1] = (unsigned long long)n > q->offsets[k == 1]
					     ? (unsigned long long)n
					     : q->offsets[k == 1];
	}
	return 0;
}

/* stdin, resize, signal: a running command's input (docs/protocol.md,
 * "Terminals and streamed stdin"); its target is looked up by serve.c. */
static int parse_input(struct ab_request *q, struct ab_error *e)
{
	static const char *const stdin_f[] = {"target", "data", "encoding", "eof", NULL};
	static const char *const resize_f[] = {"target", "rows", "cols", NULL};
	static const char *const signal_f[] = {"target", "signal", NULL};
	static const struct {
		const char *name;
		int n;
	} sigs[] = {{"INT", SIGINT},   {"TERM", SIGTERM}, {"KILL", SIGKILL}, {"HUP", SIGHUP},
		    {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"WINCH", SIGWINCH},
		    {"CONT", SIGCONT}, {"STOP", SIGSTOP}};
	const char *op = q->op;
	const char *const *fields = q->kind == AB_REQUEST_STDIN	   ? stdin_f
				    : q->kind == AB_REQUEST_RESIZE ? resize_f
								   : signal_f;
	if (only_fields(q->req, op, fields, e) < 0)
		return -e->code;
	if (!json_object_object_get_ex(q->req, "target", &q->target) || !valid_id(q->target)) {
		q->target = NULL;
		BAD("%s: 'target' must be the id of a running command", op);
	}
	json_object *v;
	if (q->kind == AB_REQUEST_RESIZE) {
		int64_t rows, cols;
		if (!int_field(q->req, "rows", 1, 65535, &rows) ||
		    !int_field(q->req, "cols", 1, 65535, &cols))
			BAD("resize: 'rows' and 'cols' must be integers from 1 to 65535");
		q->rows = (unsigned)rows;
		q->cols = (unsigned)cols;
	} else if (q->kind == AB_REQUEST_SIGNAL) {
		const char *name = json_object_object_get_ex(q->req, "signal", &v) &&
						   json_object_is_type(v, json_type_string)
					   ? json_object_get_string(v)
					   : "";
		if (strncmp(name, "SIG", 3) == 0)
			name += 3;
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]) && !q->signo; i++)
			if (strcmp(name, sigs[i].name) == 0)
				q->signo = sigs[i].n;
		if (!q->signo)
			BAD("signal: 'signal' must be one of INT, TERM, KILL, HUP, QUIT, USR1, "
			    "USR2, "
			    "WINCH, CONT, STOP");
	} else {
		bool base64 = false;
		if (json_object_object_get_ex(q->req, "encoding", &v)) {
			const char *enc = json_object_is_type(v, json_type_string)
						  ? json_object_get_string(v)
						  : "";
			base64 = strcmp(enc, "base64") == 0;
			if (!base64 && strcmp(enc, "utf-8") != 0 && strcmp(enc, "utf8") != 0)
				BAD("stdin: 'encoding' must be \"utf-8\" or \"base64\"");
		}
		if (json_object_object_get_ex(q->req, "eof", &v)) {
			if (!json_object_is_type(v, json_type_boolean))
				BAD("stdin: 'eof' must be true or false");
			q->eof = json_object_get_boolean(v);
		}
		if (!json_object_object_get_ex(q->req, "data", &v)) {
			if (!q->eof)
				BAD("stdin: give 'data', 'eof': true, or both");
			return 0;
		}
		if (!json_object_is_type(v, json_type_string))
			BAD("stdin: 'data' must be a string");
		q->data = json_object_get_string(v);
		q->data_len = (size_t)json_object_get_string_len(v);
		if (base64) {
			const char *why;
			q->data = q->data_owned =
				base64_decode(q->data, q->data_len, &q->data_len, &why);
			if (!q->data)
				BAD("stdin: 'data' is not valid base64 (%s)", why);
		}
	}
	return 0;
}

/* Whitespace around the object (docs/protocol.md); a NUL byte is not. */
static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

static int parse_line(const char *line, size_t len, bool host_files, struct ab_request *q,
		      struct ab_error *e);
static int check_object(struct ab_request *q, struct ab_error *e);

int ab_request_parse(const char *line, size_t len, struct ab_request *q, struct ab_error *e)
{
	return parse_line(line, len, false, q, e);
}

int ab_request_parse_host(const char *line, size_t len, struct ab_request *q, struct ab_error *e)
{
	return parse_line(line, len, true, q, e);
}

static int parse_line(const char *line, size_t len, bool host_files, struct ab_request *q,
		      struct ab_error *e)
{
	*q = (struct ab_request){.kind = AB_REQUEST_UNKNOWN, .host_files = host_files};
	size_t a = 0;
	while (a < len && is_blank(line[a]))
		a++;
	if (a == len)
		return 1; /* blank */
	if (len > INT_MAX)
		return ab_error_proto(e, AB_ERRC_TOO_LARGE,
				      "a request line is longer than %d bytes", INT_MAX);
	json_tokener *tok = json_tokener_new_ex(64);
	if (!tok)
		return ab_error_proto(e, AB_ERRC_INTERNAL, "out of memory");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	q->req = json_tokener_parse_ex(tok, line, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	while (q->req && end < len && is_blank(line[end]))
		end++;
	if (!q->req || jerr != json_tokener_success || end != len)
		return ab_error_proto(e, AB_ERRC_INVALID_JSON,
				      "not a JSON object on one line of UTF-8: %s",
				      jerr != json_tokener_success ? json_tokener_error_desc(jerr)
								   : "trailing characters");
	return check_object(q, e);
}

/* q->req, an object or not, checked as a request: everything after the
 * JSON itself. */
static int check_object(struct ab_request *q, struct ab_error *e)
{
	if (!json_object_is_type(q->req, json_type_object))
		return ab_error_proto(e, AB_ERRC_INVALID_JSON, "a request must be a JSON object");
	json_object *id = NULL, *opv = NULL;
	json_object_object_get_ex(q->req, "id", &id);
	if (!id || !valid_id(id))
		BAD("'id' must be a string of 1 to %d bytes or an integer", AB_REQUEST_MAX_ID_LEN);
	q->id = id;
	if (!json_object_object_get_ex(q->req, "op", &opv) ||
	    !json_object_is_type(opv, json_type_string))
		BAD("'op' must be a string");
	const char *op = q->op = json_object_get_string(opv);
	static const char *const none[] = {NULL};
	if (!plain_string(opv)) /* "exec\u0000..." is not exec */
		return ab_error_proto(e, AB_ERRC_UNKNOWN_OP, "unknown op '%.64s' (with a NUL byte)",
				      op);
	if (strcmp(op, "exec") == 0) {
		q->kind = AB_REQUEST_EXEC;
		return parse_exec(q, e);
	}
	if (fileop_name(op)) {
		q->kind = AB_REQUEST_FILE_OP;
		return parse_file_op(q, e);
	}
	if (strcmp(op, "cancel") == 0) {
		q->kind = AB_REQUEST_CANCEL;
		return parse_cancel(q, e);
	}
	if (strcmp(op, "output") == 0) {
		q->kind = AB_REQUEST_OUTPUT;
		return parse_output(q, e);
	}
	static const struct {
		const char *name;
		enum ab_request_op kind;
	} input_ops[] = {{"stdin", AB_REQUEST_STDIN},
			 {"resize", AB_REQUEST_RESIZE},
			 {"signal", AB_REQUEST_SIGNAL}};
	for (size_t i = 0; i < sizeof(input_ops) / sizeof(input_ops[0]); i++)
		if (strcmp(op, input_ops[i].name) == 0) {
			q->kind = input_ops[i].kind;
			return parse_input(q, e);
		}
	if (strcmp(op, "stats") == 0)
		q->kind = AB_REQUEST_STATS;
	else if (strcmp(op, "ping") == 0)
		q->kind = AB_REQUEST_PING;
	else if (strcmp(op, "shutdown") == 0)
		q->kind = AB_REQUEST_SHUTDOWN;
	else if (strcmp(op, "net") == 0) { /* src/front/netop.c checks the values */
		static const char *const net_fields[] = {"allow", "deny", NULL};
		q->kind = AB_REQUEST_NET;
		return only_fields(q->req, op, net_fields, e);
	} else if (strcmp(op, "port") == 0) { /* port/port.c checks the values */
		static const char *const port_fields[] = {"port",  "host",  "public",
							  "close", "token", NULL};
		q->kind = AB_REQUEST_PORT;
		return only_fields(q->req, op, port_fields, e);
	} else if (layer_op_fields(op)) {
		q->kind = AB_REQUEST_LAYER;
		return only_fields(q->req, op, layer_op_fields(op), e);
	} else if (ckpt_op_fields(op)) { /* checkpoints: src/ckpt/ */
		q->kind = AB_REQUEST_LAYER;
		return only_fields(q->req, op, ckpt_op_fields(op), e);
	} else
		return ab_error_proto(e, AB_ERRC_UNKNOWN_OP, "unknown op '%.64s'", op);
	return only_fields(q->req, op, none, e);
}

int ab_request_object(json_object *req, bool host_files, struct ab_request *q, struct ab_error *e)
{
	*q = (struct ab_request){.kind = AB_REQUEST_UNKNOWN, .host_files = host_files, .req = req};
	if (!req)
		return ab_error_proto(e, AB_ERRC_INTERNAL, "out of memory");
	return check_object(q, e);
}

void ab_request_clear(struct ab_request *q)
{
	json_object_put(q->req);
	free(q->argv);
	for (char **v = q->env; v && *v; v++)
		free(*v);
	free(q->env);
	free(q->inner);
	fileop_host_free(q->host);
	free(q->data_owned);
	*q = (struct ab_request){.kind = AB_REQUEST_UNKNOWN};
}

/* ---- the id of a line too long to parse ---- */

static size_t skip_blank(const char *p, size_t n, size_t i)
{
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
		i++;
	return i;
}

/* The end of the string starting at p[i] == '"' (just past its closing
 * quote), or 0 when it is not closed within n. */
static size_t string_end(const char *p, size_t n, size_t i)
{
	for (i++; i < n; i++) {
		if (p[i] == '\\')
			i++;
		else if (p[i] == '"')
			return i + 1;
	}
	return 0;
}

/* The end of the value starting at p[i], or 0 when it does not end
 * within n: strings, nested objects and arrays skipped by their brackets
 * (their validity is not checked: only the top-level members matter). */
static size_t value_end(const char *p, size_t n, size_t i)
{
	size_t depth = 0;
	while (i < n) {
		char c = p[i];
		if (c == '"') {
			i = string_end(p, n, i);
			if (!i)
				return 0;
		} else if (c == '{' || c == '[') {
			depth++;
			i++;
		} else if (c == '}' || c == ']') {
			if (depth == 0)
				return i;
			depth--;
			i++;
		} else if (c == ',' && depth == 0) {
			return i;
		} else {
			i++;
		}
		if (depth == 0 && i < n &&
		    (p[i] == ',' || p[i] == '}' || p[i] == ' ' || p[i] == '\t' || p[i] == '\r'))
			return i;
	}
	return 0;
}

json_object *ab_request_scan_id(const char *p, size_t n)
{
	size_t i = skip_blank(p, n, 0);
	if (i >= n || p[i] != '{')
		return NULL;
	for (i++;;) {
		i = skip_blank(p, n, i);
		if (i >= n || p[i] != '"')
			return NULL;
		size_t key = i, key_end = string_end(p, n, i);
		if (!key_end)
			return NULL;
		i = skip_blank(p, n, key_end);
		if (i >= n || p[i] != ':')
			return NULL;
		i = skip_blank(p, n, i + 1);
		size_t end = value_end(p, n, i);
		if (!end)
			return NULL;
		if (key_end - key == 4 && memcmp(p + key, "\"id\"", 4) == 0) {
			/* an id's own text is short: a string of at most 256 bytes,
			 * each at most a 12-byte escape pair, or an integer */
			if (end - i > 4096)
				return NULL;
			char text[4097];
			size_t len = end - i;
			while (len > 0 && is_blank(p[i + len - 1]))
				len--;
			memcpy(text, p + i, len);
			text[len] = '\0';
			json_tokener *tok = json_tokener_new_ex(2);
			if (!tok)
				return NULL;
			json_tokener_set_flags(tok,
					       JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
			/* with its NUL: a number needs the end of its text to end */
			json_object *id = json_tokener_parse_ex(tok, text, (int)len + 1);
			bool whole = json_tokener_get_error(tok) == json_tokener_success &&
				     json_tokener_get_parse_end(tok) >= len;
			json_tokener_free(tok);
			if (!whole || !id || !valid_id(id)) {
				json_object_put(id);
				return NULL;
			}
			return id;
		}
		i = skip_blank(p, n, end);
		if (i >= n || p[i] != ',')
			return NULL;
		i++;
	}
}
