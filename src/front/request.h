/* A request to the front engine (front.h): one request line of the
 * JSON-lines protocol (docs/protocol.md, agentbox serve) parsed and
 * checked, or a JSON object another front built. Checked here is
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
	AB_REQUEST_LAYER, /* changes, commit, discard (layer.h) */
	AB_REQUEST_STDIN, /* a running command's input (serve_input.c) */
	AB_REQUEST_RESIZE,
	AB_REQUEST_SIGNAL,
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

/* The id of a request line too long to parse: the value of the first
 * top-level "id" member found in the n bytes read of it (which need not
 * end the line), if it is a valid id. NULL when none can be found. */
json_object *ab_request_scan_id(const char *p, size_t n);

#endif
