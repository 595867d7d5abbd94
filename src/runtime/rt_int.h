/* What runtime.c and rt_files.c share: a request of agentbox runtime on
 * its way through the session, and the server. */
#ifndef AB_RT_INT_H
#define AB_RT_INT_H

#include <json-c/json.h>
#include "runtime/rt_mhd.h"
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"
#include "files/fileop.h"
#include "runtime/runtime.h"
#include "runtime/shlex.h"
#include "serve/request.h"

#define BASE	      "/workspace"
#define EXEC_BODY_MAX (1u << 20)  /* a POST /execute's JSON */
#define UPLOAD_MAX    (32u << 20) /* an upload's or a download's file, in memory */
#define DOWNLOAD_MAX  UPLOAD_MAX
#define CHUNK	      FILEOP_CHUNK_MAX /* moved in chunks of this, one operation each */
#define MAX_ARGS      65536
#define CONN_LIMIT    256
#define GUARD_SCRIPT                                                                               \
	"p=$(realpath -m -- \"$1\") || exit 3; printf %s \"$p\"; test -e \"$1\" || exit 1"

enum route { R_HEALTH, R_EXECUTE, R_UPLOAD, R_DOWNLOAD, R_LIST, R_EXISTS };
enum step { S_NONE, S_GUARD, S_OP, S_DONE };

struct req {
	struct req *wnext; /* waiting for a free slot (waiting) */
	bool waiting;
	bool announced;		 /* the body has a Content-Length */
	struct req *next, *prev; /* in flight: waiting for the session */
	struct rt *rt;
	struct MHD_Connection *conn; /* NULL once the client is gone */
	enum route route;
	enum step step;
	unsigned long long tag;
	char *body; /* /execute's JSON, or the upload's file */
	size_t len, cap;
	bool too_large, have_file;
	unsigned parts;	   /* /upload: "file" parts seen */
	size_t off, chunk; /* /upload, /download: where the next chunk starts, its size */
	char *name;	   /* /upload: the part's filename; else the path as decoded */
	char view[4200];   /* the path in the view: /workspace/REL */
	struct MHD_PostProcessor *pp;
	struct ab_request q; /* the session request it started */
	struct ab_shlex sh;
	unsigned status; /* the answer, once there */
	char *answer;
	const char *ctype;
	char *disposition;
	char *data; /* a download's bytes */
	size_t data_len;
};

struct rt {
	struct ab_config *cfg;
	const struct ab_runtime_opts *o;
	struct ab_session *s;
	struct MHD_Daemon *d;
	struct req *head;
	struct req *wait_head, *wait_tail; /* in head too: not started, no slot free */
	size_t in_flight;
	unsigned long long next_tag;
	bool gone; /* the sandbox died */
	char gone_why[256];
};

/* r's answer: status and a heap body (NULL: a 500), which r takes. */
void rt_answer(struct req *r, unsigned status, char *body);
/* r's answer: status and {"message": msg}. */
void rt_answer_msg(struct req *r, unsigned status, const char *msg);
/* Start argv (with /execute's timeout when set_timeout), or the file
 * operation of r's route; false when r was answered instead. */
bool rt_start_exec(struct rt *rt, struct req *r, char *const *argv, bool set_timeout);
bool rt_start_op(struct rt *rt, struct req *r);

/* rt_files.c: the path guard's result (realpath inside the sandbox) and a
 * file operation's, into r's next step or its answer. */
void rt_guard_done(struct rt *rt, struct req *r, const struct ab_result *res);
void rt_op_done(struct req *r, const struct ab_result *res);

#endif
