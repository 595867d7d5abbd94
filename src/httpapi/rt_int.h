/* What the files of agentbox runtime's HTTP API share (http_server.c,
 * rt_req.c, rt_files.c, rt_v1.c, rt_extras.c, rt_auth_http.c): a request
 * on its way through the engine, and the routes. */
#ifndef AB_RT_INT_H
#define AB_RT_INT_H

#include <json-c/json.h>
#include "runtime/rt_mhd.h"
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "agentbox/agentbox.h"
#include "files/fileop.h"
#include "runtime/rt_auth.h"
#include "runtime/rt_server.h"
#include "lex/shlex.h"
#include "front/request.h"
#include "front/front.h"

#define EXEC_BODY_MAX (1u << 20)  /* a POST /execute's JSON */
#define UPLOAD_MAX    (32u << 20) /* an upload's or a download's file, in memory */
#define DOWNLOAD_MAX  UPLOAD_MAX
#define CHUNK	      FILEOP_CHUNK_MAX /* moved in chunks of this, one operation each */
#define MAX_ARGS      65536
#define CONN_LIMIT    256

enum route {
	R_HEALTH,
	R_EXECUTE,
	R_UPLOAD,
	R_DOWNLOAD,
	R_LIST,
	R_EXISTS,
	R_V1_FILE, /* sandboxd's REST API (rt_v1.c) from here on */
	R_V1_HEALTH,
	R_V1_META,
	R_AB_NONE, /* agentbox's extras (rt_extras.c) from here on */
	R_AB_CHANGES,
	R_AB_COMMIT,
	R_AB_DISCARD,
	R_AB_NET,
	R_AB_WATCH,
	R_AB_PORT,
};
enum step { S_NONE, S_GUARD, S_OP, S_FINISH, S_DONE };

struct req {
	struct ab_front_req fr;	      /* its request in the engine (first) */
	const struct rt_proto *proto; /* &rt_http_proto (struct rt_req_head) */
	bool engaged;		      /* fr is in the engine */
	bool again;		      /* fr rebuilt during its event: submitted after it */
	bool suspended;		      /* its connection waits for the engine */
	bool announced;		      /* the body has a Content-Length */
	struct rt *rt;
	struct MHD_Connection *conn; /* NULL once the client is gone */
	enum route route;
	enum step step;
	char *body; /* /execute's JSON, or the upload's file */
	size_t len, cap;
	bool too_large, have_file;
	unsigned parts;	   /* /upload: "file" parts seen */
	size_t off, chunk; /* /upload, /download: where the next chunk starts, its size */
	char *name;	   /* /upload: the part's filename; else the path as decoded */
	char view[4200];   /* the path in the view: /workspace/REL */
	struct MHD_PostProcessor *pp;
	struct ab_shlex sh;
	unsigned status; /* the answer, once there */
	char *answer;
	const char *ctype;
	char *disposition;
	char *data; /* a download's bytes */
	size_t data_len;
	/* sandboxd's routes (rt_v1.c) */
	bool head, put, del, multipart, is_dir;
	bool stat;			      /* GET /v1/stat/{path}: one path's FileEntry */
	const char *mode_arg, *recursive_arg; /* the query's, owned by the connection */
	unsigned mode;			      /* a PUT's */
	int recursive;			      /* a DELETE's */
	unsigned long long size;	      /* a file's, for HEAD */
	char target[4200];		      /* a PUT's file; view is its temp file */
	char *after;			      /* a failed PUT's answer, once cleaned up */
	unsigned after_status;
	/* agentbox's extras (rt_extras.c) */
	bool post;
	/* GET /agentbox/v1/watch's stream (rt_watch.c): lines not yet sent */
	char *wbuf;
	size_t wlen, woff, wcap;
	bool wstream, wended, woverflow; /* begun (200), ended, an overflow said */
};
_Static_assert(offsetof(struct req, proto) == offsetof(struct rt_req_head, proto),
	       "a request of the HTTP API begins as struct rt_req_head");

/* rt_req.c, the floor the routes stand on (it calls none of them). r's
 * answer: status and a heap body (NULL: a 500), which r takes. */
void rt_answer(struct req *r, unsigned status, char *body);
/* r's answer: status and {"message": msg}. */
void rt_answer_msg(struct req *r, unsigned status, const char *msg);
/* Start argv (with /execute's timeout when set_timeout), or the file
 * operation of r's route, in the engine; false when r was answered
 * instead. Started during r's own event, it goes in after it. */
bool rt_start_exec(struct rt *rt, struct req *r, char *const *argv, bool set_timeout);
bool rt_start_op(struct rt *rt, struct req *r);
/* A file operation's request for rt_start_file: {"op","path"}, the rest
 * of its fields added by the caller. */
json_object *rt_file_req(const char *op, const char *path);
/* Start the file operation o (taken) for r, as fileop_prepare_inner writes
 * it: an inner op, or the protocol's in exact mode (r's path is the one
 * resolve_path answered); false when r was answered instead. */
bool rt_start_file(struct rt *rt, struct req *r, json_object *o);
/* A layer op (layer) or a file operation (no timeout) op with its fields
 * (taken), built from C values, into the engine under a new tag; r
 * answered 400 when the values are refused. */
void rt_submit_op(struct rt *rt, struct req *r, bool layer, const char *op, json_object *fields);
/* Free r, once nothing holds it. */
void rt_req_free(struct req *r);
/* r answered (its step S_DONE) while its connection waits: resumed. */
void rt_req_resume(struct req *r);
/* The engine's callbacks for r (rt_http_proto): r ends without a
 * result, r leaves the engine (submitted again when rebuilt meanwhile). */
void rt_req_refused(void *arg, struct ab_front_req *fr, enum ab_front_why why,
		    const struct ab_error *e);
void rt_req_left(void *arg, struct ab_front_req *fr);
/* size bytes more of r's body; -ENOMEM */
int rt_body_append(struct req *r, const char *data, size_t size);
/* o as Go's json.Encoder writes it (compact, a newline after), o put;
 * NULL when out of memory. */
char *rt_json_line(json_object *o);
/* sandboxd's error body: {"code","message"} and a newline. */
char *rt_v1_error(unsigned status, const char *msg);

/* rt_files.c: the path guard's result (resolve_path inside the sandbox) and a
 * file operation's, into r's next step or its answer. */
void rt_guard_done(struct rt *rt, struct req *r, const struct ab_result *res);
void rt_op_done(struct req *r, const struct ab_result *res);
/* The session's checked reply to r's file operation (NULL when there is
 * none: text says why), whether it is a result, its error code, and its
 * message in text. */
json_object *rt_op_reply(struct req *r, const struct ab_result *res, bool *ok, const char **code,
			 char *text, size_t size);
/* A download's chunk appended to r's bytes; the next one started until its
 * end. */
void rt_download_chunk(struct req *r, json_object *reply);

/* rt_v1.c: sandboxd's REST API. rt_v1_route takes a URL under /v1/
 * (true), setting r's route, its rest (the path of /v1/files/) or its
 * answer (404, 405); rt_v1_dispatch starts a request whose body is in,
 * rt_v1_event goes on with the session's answer. */
bool rt_v1_route(const char *url, const char *method, struct req *r, const char **rest);
void rt_v1_dispatch(struct rt *rt, struct req *r, const char *rest);
void rt_v1_event(struct rt *rt, struct req *r, const struct ab_result *res);

/* rt_extras.c: agentbox's own routes under /agentbox/ (true: r's route
 * set, or its answer: 404, 405); rt_ab_allow is a route's Allow;
 * rt_ab_dispatch starts a request whose body is in (changes and commit
 * are the engine's layer ops); rt_ab_layer_reply is the engine's
 * layer_reply. */
bool rt_ab_route(const char *url, const char *method, struct req *r);
const char *rt_ab_allow(enum route route);
void rt_ab_dispatch(struct rt *rt, struct req *r);
void rt_ab_layer_reply(void *arg, struct ab_front_req *fr, json_object *reply);

/* rt_watch.c: GET /agentbox/v1/watch, the engine's watch as NDJSON.
 * rt_watch_start submits it (or answers r); rt_watch_event and
 * rt_watch_ended take the engine's events; rt_watch_response is the
 * streamed answer once it began (r->wstream). */
void rt_watch_start(struct rt *rt, struct req *r);
void rt_watch_event(struct req *r, const struct ab_watch_event *ev);
void rt_watch_ended(struct rt *rt, struct req *r, const struct ab_event *ev);
struct MHD_Response *rt_watch_response(struct req *r);
/* The watches whose client closed its connection while it waited
 * (suspended: the daemon does not look), ended; each turn of the loop.
 * http: the requests' protocol (rt_http_proto), to tell them. */
void rt_watch_sweep(struct rt *rt, const struct rt_proto *http);

/* rt_auth_http.c: the HTTP listener's locks. rt_auth_http_notify is the
 * daemon's connection callback (a connection counted to its client, or
 * shut); rt_auth_http_request tells a request's head came (head_in) or its
 * answer went; rt_auth_http_sweep shuts connections whose head is late;
 * rt_auth_http_refused judges a request whose head is in (Host, Origin,
 * token) and answers it when refused (true); rt_auth_http_json_refused
 * answers 415 a JSON route's body not sent as JSON (text/plain is what a
 * web page may POST to another origin without asking first). */
void rt_auth_http_notify(void *cls, struct MHD_Connection *c, void **ctx,
			 enum MHD_ConnectionNotificationCode toe);
void rt_auth_http_request(struct MHD_Connection *c, bool head_in);
void rt_auth_http_sweep(struct rt *rt);
bool rt_auth_http_refused(struct rt *rt, struct MHD_Connection *c, struct req *r, const char *url);
bool rt_auth_http_json_refused(struct MHD_Connection *c, struct req *r);

#endif
