/* agentbox runtime's requests, the floor its routes stand on (rt_int.h):
 * an answer set, a request started on the session (a command or a file
 * operation; suspended until its event), its body grown, its memory freed,
 * and sandboxd's bodies. http_server.c, rt_files.c, rt_v1.c and rt_extras.c
 * call down into it; it calls none of them. */
#include <errno.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files/fileop.h"
#include "httpapi/rt_int.h"
#include "httpapi/rt_reply.h"
#include "front/request.h"
#include "util/output.h"

/* ---- answers ---- */

void rt_answer(struct req *r, unsigned status, char *body)
{
	free(r->answer);
	free(r->data); /* a download's bytes are not what it answers */
	r->data = NULL;
	r->data_len = 0;
	r->status = body ? status : MHD_HTTP_INTERNAL_SERVER_ERROR;
	r->answer = body;
	r->ctype = "application/json";
	r->step = S_DONE;
}

void rt_answer_msg(struct req *r, unsigned status, const char *msg)
{
	rt_answer(r, status, r->route >= R_V1_FILE ? rt_v1_error(status, msg) : rt_message(msg));
}

void rt_req_free(struct req *r)
{
	if (!r)
		return;
	if (r->pp)
		MHD_destroy_post_processor(r->pp);
	ab_request_clear(&r->fr.q);
	ab_shlex_free(&r->sh);
	free(r->body);
	free(r->name);
	free(r->answer);
	free(r->disposition);
	free(r->data);
	free(r->after);
	free(r->wbuf);
	free(r);
}

/* r's request, built (rc 0) or not (e says why), into the engine; its
 * connection suspended until its event. False (r answered) when it could
 * not start. During r's own event it goes in once the event is done
 * (rt_req_left). */
static bool start(struct rt *rt, struct req *r, int rc, struct ab_error *e)
{
	if (rc != 0) {
		if (r->route == R_EXECUTE)
			rt_answer(r, MHD_HTTP_OK, rt_execute_failed(e->msg));
		else
			rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR, e->msg);
		return false;
	}
	if (r->engaged) {
		r->again = true;
		return true;
	}
	r->engaged = true;
	ab_front_submit(&rt->f, &r->fr);
	return r->engaged; /* false: refused at once, answered */
}

/* r's next request built: a new tag (the id it names) and q cleared. */
static json_object *next_id(struct rt *rt, struct req *r)
{
	ab_request_clear(&r->fr.q);
	r->fr.tag = ab_front_tag(&rt->f);
	return json_object_new_int64((int64_t)r->fr.tag);
}

void rt_req_resume(struct req *r)
{
	if (r->suspended && r->conn && r->step == S_DONE) {
		r->suspended = false;
		MHD_resume_connection(r->conn);
	}
}

void rt_req_refused(void *arg, struct ab_front_req *fr, enum ab_front_why why,
		    const struct ab_error *e)
{
	struct rt *rt = arg;
	struct req *r = (struct req *)fr;
	if (!r->conn)
		return;
	const char *msg = e ? e->msg : "cancelled";
	if (why == AB_FRONT_ENDED)
		rt_answer_msg(r, MHD_HTTP_SERVICE_UNAVAILABLE, "The server is stopping");
	else if (r->route == R_EXECUTE)
		rt_answer(r, MHD_HTTP_OK, rt_execute_failed(msg));
	else if (r->route == R_AB_WATCH && e && e->kind == AB_ERRC_BUSY)
		rt_answer_msg(r, MHD_HTTP_TOO_MANY_REQUESTS,
			      "as many commands and watches run as --max-concurrent allows: "
			      "a watch takes a slot until it ends");
	else
		rt_answer_msg(r,
			      r->route >= R_AB_NONE && rt->f.gone ? MHD_HTTP_SERVICE_UNAVAILABLE
								  : MHD_HTTP_INTERNAL_SERVER_ERROR,
			      msg);
	rt_req_resume(r);
}

void rt_req_left(void *arg, struct ab_front_req *fr)
{
	struct rt *rt = arg;
	struct req *r = (struct req *)fr;
	r->engaged = false;
	if (r->again && r->conn) { /* its next step, built during its event */
		r->again = false;
		fr->next = fr->prev = NULL;
		fr->running = fr->cancelled = false;
		r->engaged = true;
		ab_front_submit(&rt->f, fr);
		return;
	}
	r->again = false;
	if (!r->conn) /* its client is gone: nothing else holds it */
		rt_req_free(r);
}

json_object *rt_file_req(const char *op, const char *path)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "op", json_object_new_string(op));
	json_object_object_add(o, "path", json_object_new_string(path));
	return o;
}

bool rt_start_file(struct rt *rt, struct req *r, json_object *o)
{
	struct ab_error e = {0};
	json_object_object_add(o, "id", next_id(rt, r));
	r->fr.q.req = o;
	r->fr.q.kind = AB_REQUEST_FILE_OP;
	r->fr.q.op = json_object_get_string(json_object_object_get(o, "op"));
	json_object_object_get_ex(o, "id", &r->fr.q.id);
	const char *path = json_object_get_string(json_object_object_get(o, "path"));
	const char *from = json_object_get_string(json_object_object_get(o, "from"));
	int rc = 0;
	/* as a request line of a path that is not UTF-8 is refused */
	if (!utf8_valid(path, strlen(path)) || (from && !utf8_valid(from, strlen(from))))
		rc = ab_error_proto(&e, AB_ERRC_INVALID_JSON, "%s: the path is not UTF-8",
				    r->fr.q.op);
	else if (!(r->fr.q.file_op = fileop_prepare_inner(o, r->fr.q.op, &r->fr.q.inner, &e)))
		rc = -(e.code ? e.code : EINVAL);
	r->fr.q.x.file_op = r->fr.q.inner;
	return start(rt, r, rc, &e);
}

bool rt_start_exec(struct rt *rt, struct req *r, char *const *argv, bool set_timeout)
{
	json_object *id = next_id(rt, r);
	struct ab_error e = {0};
	struct ab_request_exec_args a = {
		.argv = (const char *const *)argv,
		.timeout_s = set_timeout ? rt->o->exec_timeout_s : -1,
	};
	int rc = ab_request_exec(&r->fr.q, id, &a, &e);
	json_object_put(id);
	return start(rt, r, rc, &e);
}

void rt_submit_op(struct rt *rt, struct req *r, bool layer, const char *op, json_object *fields)
{
	struct ab_error e = {0};
	r->fr.tag = ab_front_tag(&rt->f);
	json_object *id = json_object_new_int64((int64_t)r->fr.tag);
	int rc = layer ? ab_request_layer(&r->fr.q, id, op, fields, &e)
		       : ab_request_file_op(&r->fr.q, id, op, fields, -1, &e);
	json_object_put(id);
	if (rc < 0) {
		rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, e.msg);
		return;
	}
	r->step = S_OP;
	r->engaged = true;
	ab_front_submit(&rt->f, &r->fr);
}

/* The file operation a route does once its path is known to be inside. */
bool rt_start_op(struct rt *rt, struct req *r)
{
	const char *op = r->route == R_UPLOAD || r->put ? "upload"
			 : r->route == R_LIST		? "ls"
							: "download";
	json_object *o = rt_file_req(op, r->view);
	if (r->route != R_LIST) /* in chunks: a file over one line's bound */
		json_object_object_add(o, "offset", json_object_new_int64((int64_t)r->off));
	if (r->route == R_UPLOAD || r->put) {
		size_t n = r->len - r->off < CHUNK ? r->len - r->off : CHUNK;
		r->chunk = n;
		char *b64 = base64_encode(r->body ? r->body + r->off : "", n);
		if (!b64) {
			json_object_put(o);
			rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR,
				      "File upload failed: out of memory");
			return false;
		}
		json_object_object_add(o, "data", json_object_new_string(b64));
		free(b64);
	}
	r->step = S_OP;
	return rt_start_file(rt, r, o);
}

/* size bytes more of the body, its buffer grown by halves (not a copy of
 * the whole for each piece the daemon hands over) */
int rt_body_append(struct req *r, const char *data, size_t size)
{
	if (r->len + size + 1 > r->cap) {
		size_t cap = r->cap ? r->cap + r->cap / 2 : 65536;
		if (cap < r->len + size + 1)
			cap = r->len + size + 1;
		char *b = realloc(r->body, cap);
		if (!b)
			return -ENOMEM;
		r->body = b;
		r->cap = cap;
	}
	memcpy(r->body + r->len, data, size);
	r->len += size;
	return 0;
}

/* ---- sandboxd's bodies ---- */

static const char *code_of(unsigned status)
{
	switch (status) {
	case MHD_HTTP_BAD_REQUEST:
		return "INVALID_ARGUMENT";
	case MHD_HTTP_UNAUTHORIZED:
		return "UNAUTHENTICATED";
	case MHD_HTTP_FORBIDDEN:
	case MHD_HTTP_MISDIRECTED_REQUEST:
		return "PERMISSION_DENIED";
	case MHD_HTTP_UNSUPPORTED_MEDIA_TYPE:
		return "INVALID_ARGUMENT";
	case MHD_HTTP_NOT_FOUND:
		return "NOT_FOUND";
	case MHD_HTTP_METHOD_NOT_ALLOWED:
		return "UNIMPLEMENTED";
	case MHD_HTTP_CONFLICT:
		return "CONFLICT";
	case MHD_HTTP_CONTENT_TOO_LARGE:
	case MHD_HTTP_TOO_MANY_REQUESTS:
		return "RESOURCE_EXHAUSTED";
	case MHD_HTTP_SERVICE_UNAVAILABLE:
		return "UNAVAILABLE";
	case MHD_HTTP_GATEWAY_TIMEOUT:
		return "DEADLINE_EXCEEDED";
	default:
		return "INTERNAL";
	}
}

char *rt_json_line(json_object *o)
{
	char *s = NULL;
	if (asprintf(&s, "%s\n",
		     json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							       JSON_C_TO_STRING_NOSLASHESCAPE)) < 0)
		s = NULL;
	json_object_put(o);
	return s;
}

char *rt_v1_error(unsigned status, const char *msg)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "code", json_object_new_string(code_of(status)));
	json_object_object_add(o, "message", json_object_new_string(msg));
	return rt_json_line(o);
}
