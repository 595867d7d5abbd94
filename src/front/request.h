/* A request to the front engine (front.h): one request line of the
 * JSON-lines protocol (docs/protocol.md, agentbox serve) parsed and
 * checked, or one built from C values by another front. Checked here is
 * everything the protocol says of a request that does not need the
 * session's state (duplicate ids, the queue, shutdown, cancel targets
 * that are not there), which the engine decides. The line comes from the
 * client, so nothing in it is trusted. */
#ifndef AB_REQUEST_H
#define AB_REQUEST_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"

#define AB_REQUEST_MAX_ID_LEN 256

enum ab_request_op {
	AB_REQUEST_EXEC,
	AB_REQUEST_FILE_OP,
	AB_REQUEST_CANCEL,
	AB_REQUEST_STATS,
	AB_REQUEST_PING,
	AB_REQUEST_SHUTDOWN,
	AB_REQUEST_NET,	  /* src/front/netop.c */
	AB_REQUEST_PORT,  /* session/session_port.h */
	AB_REQUEST_LAYER, /* changes, commit, discard (layer.h) */
	AB_REQUEST_STDIN, /* a running command's input (ab_front_input) */
	AB_REQUEST_RESIZE,
	AB_REQUEST_SIGNAL,
	AB_REQUEST_OUTPUT, /* a running command's kept output from offsets */
	AB_REQUEST_UNKNOWN,
};

struct ab_request {
	json_object *req; /* the whole request; its strings live here; owned */
	json_object *id;  /* in req; NULL until a valid one was found */
	const char *op;	  /* in req; NULL until a string was found */
	enum ab_request_op kind;
	/* exec and the file operations */
	struct ab_exec x;
	char **argv; /* owned array; the strings belong to req */
	char **env;  /* owned "NAME=VALUE" strings */
	bool base64, merged;
	const char *file_op; /* the file operation's name (static), or NULL */
	bool watch;	     /* the file op "watch": its output is events (watch.h) */
	char *inner;	     /* its request for the sandbox (fileop_prepare) */
	/* upload's "from", download's "to" (fileop_host.h), owned; only with
	 * ab_request_parse_host */
	struct fileop_host *host;
	bool host_files;
	json_object *target; /* cancel, stdin, resize, signal: in req */
	/* stdin: the bytes (decoded: data is owned, else in req) */
	const char *data;
	size_t data_len;
	char *data_owned;
	bool eof;
	unsigned rows, cols; /* resize */
	int signo;	     /* signal */
	/* output: from these offsets of stdout (or output) and stderr */
	unsigned long long offsets[2];
};

/* Parse the line of len bytes (without its newline) into q. Returns 1 for a
 * blank line (nothing to answer; q is empty), 0 for a valid request, a
 * negative errno with e filled for a bad one, e->kind its protocol code.
 * After 0 or an error release q with ab_request_clear. With an error,
 * q->op == NULL means the line was not a request at all (e->kind is
 * invalid_json, invalid_request, too_large or internal, q->id is NULL or
 * the valid id); otherwise q->id, q->op and q->kind say what was asked and
 * e says what is wrong with it (unknown_op, or a field's error). */
int ab_request_parse(const char *line, size_t len, struct ab_request *q, struct ab_error *e);
/* The same for a client on the caller's own host as its own user (agentbox
 * serve's): upload and download may name host paths ("from", "to"). */
int ab_request_parse_host(const char *line, size_t len, struct ab_request *q, struct ab_error *e);
/* The same for a request that is a JSON object already (req, taken: q
 * owns it even on error): a front whose wire format is JSON too (MCP's
 * tool calls) checks it without writing a line to parse back. Never 1. */
int ab_request_object(json_object *req, bool host_files, struct ab_request *q, struct ab_error *e);
void ab_request_clear(struct ab_request *q);

/* Typed builders (request_build.c), for fronts whose wire format is not
 * these lines: the request from C values, as the object a line would
 * hold (for the audit log) and checked by the same code, so the same
 * values get the same errors. id is copied; 0 or a negative errno with e,
 * q to be cleared either way. */
struct ab_request_exec_args {
	const char *command;	       /* a shell string (sh -c), or */
	const char *const *argv;       /* the argv, NULL-ended */
	const char *cwd;	       /* NULL: the session's */
	const char *const *env;	       /* "NAME=VALUE", NULL-ended; NULL: none */
	double timeout_s;	       /* < 0: the session's default */
	unsigned long long max_output; /* bytes; 0: the session's */
	bool merge_output, stream, keep_background;
	bool base64; /* the output as base64 */
	const char *stdin_data;
	size_t stdin_len;
	bool stdin_stream;	     /* input comes later (ab_session_stdin) */
	unsigned pty_rows, pty_cols; /* both 0: no pty */
};
int ab_request_exec(struct ab_request *q, json_object *id, const struct ab_request_exec_args *a,
		    struct ab_error *e);
/* A file operation (files/fileop.h: read, write, ls, upload, ...) with
 * its fields (an object, taken; NULL: none) and timeout (< 0: none). */
int ab_request_file_op(struct ab_request *q, json_object *id, const char *op, json_object *fields,
		       double timeout_s, struct ab_error *e);
/* A layer op (changes, commit, discard: layer.h) with its fields (an
 * object, taken; NULL: none). */
int ab_request_layer(struct ab_request *q, json_object *id, const char *op, json_object *fields,
		     struct ab_error *e);

/* The id of a request line too long to parse: the value of the first
 * top-level "id" member found in the n bytes read of it (which need not
 * end the line), if it is a valid id. NULL when none can be found. */
json_object *ab_request_scan_id(const char *p, size_t n);

/* A request's "timeout" in seconds, into *ms (rounded; at least 1 ms for
 * more than 0): 0 when absent (*ms untouched), -EINVAL when it is not a
 * number from 0 (or, without zero_ok, above 0) to 10000000. */
int ab_request_timeout(json_object *req, bool zero_ok, unsigned long long *ms);

#endif
