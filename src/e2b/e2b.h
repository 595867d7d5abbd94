/* agentbox e2b (docs/e2b.md): E2B's control API and envd's API on one
 * local port, backed by detached sandboxes (src/detach/). This header is
 * what a service of envd is written against: the Connect methods' table
 * and the per-call API a handler uses, a sandbox's requests in the
 * agentbox/1 protocol (docs/protocol.md), and envd's plain HTTP routes.
 * Everything runs in the server's one poll loop: a handler never blocks,
 * it asks the sandbox and answers from the reply's callback. */
#ifndef AB_E2B_H
#define AB_E2B_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

struct e2b_call; /* one Connect call (e2b_connect.c) */
struct e2b_sbx;	 /* one sandbox (e2b_sbx.c) */
struct e2b_http; /* one plain HTTP request of envd's (/files...) */

/* The envd version the server says it is: the SDK chooses its calls by it
 * (packages/js-sdk/src/envd/versions.ts). 0.6.4: watches with entries and
 * allowNetworkMounts (e2b_fs_watch.c); files' metadata (0.6.2, xattrs) is
 * not kept (docs/e2b.md). */
#define E2B_ENVD_VERSION "0.6.4"

/* agentbox e2b [--listen ADDR] [--port N] [--api-key-file FILE] (e2b_cli.c):
 * its exit status. */
int e2b_cli(int argc, char **argv);

/* ---- the Connect methods ---- */

enum e2b_kind {
	E2B_UNARY,  /* one request, one reply (application/json) */
	E2B_STREAM, /* one request, a stream of messages (application/connect+json) */
};

struct e2b_method {
	const char *service; /* "process.Process", "filesystem.Filesystem" */
	const char *method;  /* "Start" */
	enum e2b_kind kind;
	void (*fn)(struct e2b_call *c);
};

/* The tables, each ended by an entry with service NULL: process.Process
 * (e2b_process.c) and filesystem.Filesystem (e2b_fs.c, its own file);
 * e2b_http.c's list of services names both. A service's file calls
 * e2b.h's functions only (test_no_circles: nothing above it calls back). */
extern const struct e2b_method e2b_process_methods[];
extern const struct e2b_method e2b_fs_methods[];

/* Connect's error codes (connectrpc.com/docs/protocol#error-codes). */
#define E2B_INVALID_ARGUMENT	"invalid_argument"
#define E2B_NOT_FOUND		"not_found"
#define E2B_ALREADY_EXISTS	"already_exists"
#define E2B_PERMISSION_DENIED	"permission_denied"
#define E2B_UNAUTHENTICATED	"unauthenticated"
#define E2B_FAILED_PRECONDITION "failed_precondition"
#define E2B_RESOURCE_EXHAUSTED	"resource_exhausted"
#define E2B_DEADLINE_EXCEEDED	"deadline_exceeded"
#define E2B_UNIMPLEMENTED	"unimplemented"
#define E2B_INTERNAL		"internal"
#define E2B_UNAVAILABLE		"unavailable"
#define E2B_CANCELED		"canceled"

/* The message of a call whose sandbox ended under it (E2B_UNAVAILABLE):
 * the words the SDK's tests look for. */
#define E2B_GONE "the sandbox was killed or reached its end of life"

/* ---- one call (a handler's view) ---- */

/* The request message, decoded (a JSON object; owned by the call). */
json_object *e2b_call_req(struct e2b_call *c);
/* The sandbox the call is for (E2b-Sandbox-Id, its access token checked
 * before the handler runs): never NULL in a handler. */
struct e2b_sbx *e2b_call_sbx(struct e2b_call *c);
/* A request header's value (name case-insensitive), or NULL. */
const char *e2b_call_header(struct e2b_call *c, const char *name);

/* A unary call's reply (msg owned: put, or NULL for {}); ends the call. */
void e2b_call_reply(struct e2b_call *c, json_object *msg);
/* A streaming call's next message (owned: put). */
void e2b_call_send(struct e2b_call *c, json_object *msg);
/* The call's error (either kind); ends it. code: one of E2B_* above. */
void e2b_call_error(struct e2b_call *c, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A streaming call's end without an error. */
void e2b_call_end(struct e2b_call *c);

/* The handler's own state for the call; gone(c, data) runs once when the
 * call ends for any reason (answered, the client went away, the server
 * stops): after it the call must not be used. */
void e2b_call_set_data(struct e2b_call *c, void *data, void (*gone)(struct e2b_call *, void *));
void *e2b_call_data(struct e2b_call *c);
/* tick(c, data) every ms milliseconds while the call lasts (0: none):
 * a stream's keepalives. */
void e2b_call_set_tick(struct e2b_call *c, int ms, void (*tick)(struct e2b_call *, void *));

/* ---- a sandbox ---- */

/* A sandbox ends (killed, timed out, its launcher gone) between two turns
 * of the loop: a handler keeps its pointer only while a request of its own
 * to it is pending (the request's fn is called, with NULL at the latest,
 * before the sandbox is freed). */

/* Its E2B id (the detached sandbox's id). */
const char *e2b_sbx_id(const struct e2b_sbx *s);

/* A message of the sandbox about a request (docs/protocol.md), or NULL
 * when the sandbox's link broke or it ended: then the request is over.
 * last is true for its final message: every type but "output",
 * "output_dropped" and "event" (a watch's, which ends with its
 * "result"), and NULL. */
typedef void (*e2b_sbx_fn)(void *arg, json_object *msg, bool last);
/* Send req (owned, put here; its "id" is set here) on the sandbox's
 * link; fn is called with each message about it. Returns the request's
 * handle (> 0) for e2b_sbx_forget, or -1 when it could not be sent
 * (fn is not called then). */
long e2b_sbx_request(struct e2b_sbx *s, json_object *req, e2b_sbx_fn fn, void *arg);
/* Stop calling fn for request h (its messages are dropped); the request
 * itself goes on in the sandbox unless cancelled. */
void e2b_sbx_forget(struct e2b_sbx *s, long h);
/* The protocol id ("e<h>") of request h, for a cancel's or stdin's target. */
void e2b_sbx_req_id(long h, char *out, size_t size);

/* E2B's user and paths: `user`, its home /home/user, which is agentbox's
 * /workspace, bound at /home/user as well, where commands start
 * (docs/e2b.md). A path of E2B's into the sandbox's /workspace (out,
 * size), or -1 when too long. */
#define E2B_HOME      "/home/user"
#define E2B_WORKSPACE "/workspace"
int e2b_path_in(const char *path, char *out, size_t size);
/* A path of the sandbox back into E2B's. */
int e2b_path_out(const char *path, char *out, size_t size);

/* ---- envd's plain HTTP routes (/files ...) ---- */

struct e2b_route {
	const char *method; /* "GET" */
	const char *path;   /* "/files": the path without the query */
	void (*fn)(struct e2b_http *h);
};
/* envd's routes besides Connect (e2b_fs.c), ended by method NULL. */
extern const struct e2b_route e2b_fs_routes[];

const char *e2b_http_header(struct e2b_http *h, const char *name);
/* A query parameter, decoded (NULL when absent). */
const char *e2b_http_query(struct e2b_http *h, const char *name);
const unsigned char *e2b_http_body(struct e2b_http *h, size_t *len);
struct e2b_sbx *e2b_http_sbx(struct e2b_http *h);
/* The answer (body copied; ctype NULL: application/json); ends the
 * request. A JSON error as envd's: e2b_http_error. */
void e2b_http_reply(struct e2b_http *h, int status, const char *ctype, const void *body,
		    size_t len);
void e2b_http_error(struct e2b_http *h, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* An answer in pieces (a large download): its head (len -1: chunked),
 * its bytes as they come, its end (which ends the request). waiting: the
 * bytes not yet taken by the client, for backpressure (at 32 MiB the
 * client is dropped). */
void e2b_http_begin(struct e2b_http *h, int status, const char *ctype, long long len);
void e2b_http_write(struct e2b_http *h, const void *b, size_t n);
void e2b_http_finish(struct e2b_http *h);
size_t e2b_http_waiting(struct e2b_http *h);
/* As for a call: the handler's state; gone(h, data) runs once when the
 * request ends: answered, or as soon as the client goes away (a handler
 * that set no gone answers it anyway, to nobody). After it h must not be
 * used. */
void e2b_http_set_data(struct e2b_http *h, void *data, void (*gone)(struct e2b_http *, void *));

#endif
