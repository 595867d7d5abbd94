/* File operations of a session (docs/protocol.md, "File operations"):
 * read, write, edit, ls, glob, grep, delete, upload, download, done inside
 * the sandbox with its view and credentials, so the view is the guard.
 *
 * Three steps, two sides of the trust boundary:
 *   fileop_prepare  launcher: checks a request's fields and paths and
 *                   writes the request the sandbox gets (compact JSON);
 *   fileop_run      inside, in a shim of the sandbox's pool: does the
 *                   operation and writes a JSON reply to the launcher's pipe;
 *   fileop_reply    launcher: validates that reply against the operation's
 *                   schema (it comes from inside, so it is untrusted) and
 *                   builds the protocol message.
 * The launcher's half is fileop_check.c; the inside half is fileop_run.c
 * (the dispatch), fileop_file.c (one file) and fileop_tree.c
 * (directories), on fileop_inside.c's replies and helpers
 * (fileop_inside.h). */
#ifndef AB_FILEOP_H
#define AB_FILEOP_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"

/* file data in one message: 8 MiB of base64 fits in a request line */
#define FILEOP_DATA_MAX	 (6u << 20)
#define FILEOP_CHUNK_MAX (4u << 20)  /* a chunked upload or download (max_chunk) */
#define FILEOP_EDIT_MAX	 (16u << 20) /* files edit rewrites and grep searches */
#define FILEOP_LIST_MAX	 10000	     /* ls and glob entries */
#define FILEOP_WALK_MAX	 100000	     /* directory entries glob and grep look at */
#define FILEOP_REPLY_MAX (64u << 20) /* a reply, JSON escaping included */

/* The file operation op names, as a static string, or NULL if it names
 * none. */
const char *fileop_name(const char *op);

/* Check req (an object with "op" and "id") for op. On success returns 0
 * and sets *inner to the request for fileop_run (a heap string); on a bad
 * field returns a negative errno with err's kind the protocol's code
 * (invalid_request, or invalid_path for a malformed path) and a message
 * naming the field. The request's "timeout" is not checked here (the
 * caller takes it as exec's). */
int fileop_prepare(json_object *req, const char *op, char **inner, struct ab_error *err);

/* fileop_prepare for a client on the caller's own host, as its own user
 * (agentbox serve's; docs/protocol.md, "Host files"): upload may name
 * "from" and download "to", a path of the host; *host is then that file
 * (fileop_host.h), whose pipe becomes the operation's stdin, and the
 * reply is checked as fileop_host_op's. *host is NULL otherwise. */
struct fileop_host;
int fileop_prepare_host(json_object *req, const char *op, char **inner, struct fileop_host **host,
			struct ab_error *err);

/* fileop_prepare for agentbox runtime's file routes (fileop_guard.c): the
 * inner ops no client can send, resolve_path (path: its symlinks resolved
 * in the view, as realpath -m; the reply's path, exists, is_dir, size),
 * place_file (from, a temporary file beside path, given mode and renamed
 * over path; the reply's path) and clear_dir (path: what is in it
 * removed; path, deleted); and the protocol's operations in exact mode,
 * on a path resolve_path answered: no symlink is followed on its way or
 * at its end (one there was planted after the check). Returns the op's
 * name (static, for fileop_reply), or NULL with err set. */
const char *fileop_prepare_inner(json_object *req, const char *op, char **inner,
				 struct ab_error *err);

/* Inside the sandbox: run the request fileop_prepare wrote and write the
 * reply to out; data is the operation's stdin (the bulk path's pipe).
 * Returns 0 when a reply was written. Leaves nothing behind (memory, fds):
 * the shim that calls it goes on to the next command. */
int fileop_run(const char *request, int out, int data);
/* The same with the reply handed to put, in one or more pieces, and no
 * stdin (the shim's file operation on its own socket, SYNC_FILEOP). */
typedef void fileop_put_fn(const char *data, size_t len, void *arg);
int fileop_run_with(const char *request, fileop_put_fn *put, void *arg);

/* tmp renamed to path, replacing what is there at once (both halves). */
int fileop_replace(const char *tmp, const char *path);

/* The protocol's code for a file error errno. */
enum ab_errc fileop_errc(int e);

/* The message for the reply the sandbox wrote (len bytes at data) to the
 * request with id and op: a "result", or an "error" with a file error
 * code. NULL when the reply is malformed (err says how; its kind is
 * internal). */
json_object *fileop_reply(const char *op, json_object *id, const char *data, size_t len,
			  struct ab_error *err);

#endif
