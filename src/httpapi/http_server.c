/* agentbox runtime's HTTP API: agent-sandbox's legacy runtime API
 * (rt_reply.h for its bodies) over HTTP with libmicrohttpd, one of the
 * runtime's protocols (runtime/rt_server.h: rt_http_proto). One thread:
 * the daemon runs in the server's loop (its epoll fd polled beside the
 * session's and the signals'); a request that needs the sandbox starts a
 * command or file operation there and its connection is suspended until
 * the session's event answers it. A file route first resolves its path
 * inside the sandbox (resolve_path, as realpath), so that a symlink out of
 * /workspace is refused as main.py refuses it (403); the operation itself
 * runs in the view, which is the guard, on the path as resolved. */
#include "httpapi/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include "runtime/rt_mhd.h"
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "files/fileop.h"
#include "files/fileop_inside.h"
#include "httpapi/rt_reply.h"
#include "lex/rtpath.h"
#include "lex/shlex.h"
#include "front/front_link.h"
#include "front/request.h"
#include "util/error.h"
#include "util/output.h"
#include "util/signals.h"

#include "httpapi/rt_int.h"

/* never called: a HEAD's body is not sent */
static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

static enum MHD_Result queue(struct MHD_Connection *c, struct req *r)
{
	struct MHD_Response *resp;
	if (r->wstream) { /* a watch's events, as they come */
		resp = rt_watch_response(r);
	} else if (r->route == R_V1_FILE && r->head && !r->is_dir && r->status == MHD_HTTP_OK) {
		/* the length GET would send */
		resp = MHD_create_response_from_callback(r->size, 4096, no_body, NULL, NULL);
		if (resp)
			MHD_add_response_header(resp, "Content-Type", r->ctype);
	} else if (r->data) {
		resp = MHD_create_response_from_buffer(r->data_len, r->data, MHD_RESPMEM_MUST_FREE);
		r->data = NULL;
		if (resp) {
			MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
			if (r->disposition)
				MHD_add_response_header(resp, "Content-Disposition",
							r->disposition);
		}
	} else {
		const char *b = r->answer ? r->answer : "{\"message\":\"Internal error\"}";
		resp = MHD_create_response_from_buffer(strlen(b), (void *)b, MHD_RESPMEM_MUST_COPY);
		if (resp && r->status != MHD_HTTP_NO_CONTENT)
			MHD_add_response_header(resp, "Content-Type", r->ctype);
	}
	if (!resp)
		return MHD_NO;
	if (r->status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
	if (r->status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, "Allow",
					r->route >= R_AB_NONE	? rt_ab_allow(r->route)
					: r->route == R_V1_FILE ? "GET, HEAD, PUT, DELETE"
					: r->route >= R_V1_FILE ? "GET, HEAD"
					: r->route == R_HEALTH	? "GET"
								: "POST");
	enum MHD_Result ret = MHD_queue_response(c, r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* ---- the session's side ---- */

/* The engine's event for r: its result into its next step or its answer. */
static void on_event(void *arg, struct ab_front_req *fr, const struct ab_event *ev)
{
	struct rt *rt = arg;
	struct req *r = (struct req *)fr;
	if (ev->kind != AB_EVENT_RESULT || !r->conn) /* gone: freed as it leaves */
		return;
	if (r->route == R_AB_WATCH) {
		rt_watch_ended(rt, r, ev);
		return;
	}
	if (r->route >= R_V1_FILE && !ev->error) {
		rt_v1_event(rt, r, ev->result);
	} else if (ev->error) {
		if (r->route == R_EXECUTE)
			rt_answer(r, MHD_HTTP_OK, rt_execute_failed(ev->error->msg));
		else
			rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR, ev->error->msg);
	} else if (r->route == R_EXECUTE) {
		rt_answer(r, MHD_HTTP_OK, rt_execute_result(ev->result, r->sh.argv));
	} else if (r->step == S_GUARD) {
		rt_guard_done(rt, r, ev->result);
	} else {
		rt_op_done(r, ev->result);
	}
	rt_req_resume(r);
}

static void on_watch(void *arg, struct ab_front_req *fr, const struct ab_watch_event *ev)
{
	(void)arg;
	rt_watch_event((struct req *)fr, ev);
}

/* ---- requests ---- */

/* The path of a file route: the URL decoded once more (the server decoded
 * it once, as uvicorn does), kept in /workspace lexically. */
static bool path_of(struct req *r, const char *rest)
{
	size_t n = strlen(rest);
	char *dec = malloc(n + 1);
	size_t dl;
	char rel[4096];
	if (!dec) {
		rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return false;
	}
	int rc = ab_rtpath_unquote(rest, n, dec, &dl);
	free(r->name);
	r->name = dec;
	if (rc == 0)
		rc = ab_rtpath_within(BASE, dec, 0, rel, sizeof(rel));
	if (rc == -ENAMETOOLONG) { /* main.py: realpath gives up, the file is not there */
		if (r->route == R_EXISTS) {
			json_object *o = json_object_new_object();
			json_object_object_add(o, "path", json_object_new_string(dec));
			json_object_object_add(o, "exists", json_object_new_boolean(false));
			rt_answer(r, MHD_HTTP_OK,
				  strdup(json_object_to_json_string_ext(
					  o, JSON_C_TO_STRING_PLAIN |
						     JSON_C_TO_STRING_NOSLASHESCAPE)));
			json_object_put(o);
		} else
			rt_answer_msg(r, MHD_HTTP_NOT_FOUND,
				      r->route == R_LIST ? "Path is not a directory"
							 : "File not found");
		return false;
	}
	if (rc < 0) { /* out of the base, or a NUL byte: main.py's ValueError */
		rt_answer_msg(r, MHD_HTTP_FORBIDDEN, "Access denied");
		return false;
	}
	snprintf(r->view, sizeof(r->view), "%s%s%s", BASE, rel[0] ? "/" : "", rel);
	return true;
}

/* The guard for a file route's path, then its operation. */
static void file_route(struct rt *rt, struct req *r)
{
	r->step = S_GUARD;
	rt_start_file(rt, r, rt_file_req("resolve_path", r->view));
}

static void execute(struct rt *rt, struct req *r)
{
	char *err_body = NULL;
	char *cmd = rt_execute_command(r->body ? r->body : "", r->len, &err_body);
	if (!cmd) {
		rt_answer(r, MHD_HTTP_UNPROCESSABLE_CONTENT, err_body);
		return;
	}
	const char *why = NULL;
	int rc = ab_shlex_split(cmd, strlen(cmd), MAX_ARGS, &r->sh, &why);
	free(cmd);
	if (rc == 0 && r->sh.argc == 0)
		why = "list index out of range"; /* Popen([]) */
	else if (rc == -E2BIG)
		why = "too many arguments";
	else if (rc < 0 && !why)
		why = strerror(-rc);
	if (why) {
		rt_answer(r, MHD_HTTP_OK, rt_execute_failed(why));
		return;
	}
	r->step = S_OP;
	rt_start_exec(rt, r, r->sh.argv, true);
}

/* What a request asks, once its body is in. */
static void dispatch(struct rt *rt, struct req *r, const char *rest)
{
	if (r->route >= R_AB_NONE) {
		rt_ab_dispatch(rt, r);
		return;
	}
	if (r->route >= R_V1_FILE) {
		rt_v1_dispatch(rt, r, rest);
		return;
	}
	if (r->too_large) {
		char m[128];
		snprintf(m, sizeof(m), "Request body too large (at most %u bytes)",
			 r->route == R_UPLOAD ? UPLOAD_MAX : EXEC_BODY_MAX);
		rt_answer_msg(r, MHD_HTTP_CONTENT_TOO_LARGE, m);
		return;
	}
	if (r->route == R_HEALTH) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "status",
				       json_object_new_string(rt->f.gone ? "error" : "ok"));
		json_object_object_add(
			o, "message",
			json_object_new_string(rt->f.gone ? rt->f.gone_why
							  : "Sandbox Runtime is active."));
		rt_answer(r, rt->f.gone ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK,
			  strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)));
		json_object_put(o);
		return;
	}
	if (r->route == R_UPLOAD && !r->have_file) {
		rt_answer(r, MHD_HTTP_UNPROCESSABLE_CONTENT,
			  strdup("{\"detail\":[{\"type\":\"missing\",\"loc\":[\"body\",\"file\"],"
				 "\"msg\":\"Field required\",\"input\":null}]}"));
		return;
	}
	if (rt->f.gone) {
		if (r->route == R_EXECUTE)
			rt_answer(r, MHD_HTTP_OK, rt_execute_failed(rt->f.gone_why));
		else
			rt_answer_msg(r, MHD_HTTP_SERVICE_UNAVAILABLE, rt->f.gone_why);
		return;
	}
	if (r->route == R_EXECUTE) {
		execute(rt, r);
		return;
	}
	if (r->route == R_UPLOAD) { /* its filename is not percent-decoded */
		char rel[4096];
		int rc = ab_rtpath_within(BASE, r->name, 0, rel, sizeof(rel));
		if (rc < 0) {
			rt_answer_msg(r,
				      rc == -EACCES ? MHD_HTTP_FORBIDDEN
						    : MHD_HTTP_INTERNAL_SERVER_ERROR,
				      rc == -EACCES ? "Access denied"
						    : "File upload failed: invalid path");
			return;
		}
		snprintf(r->view, sizeof(r->view), "%s%s%s", BASE, rel[0] ? "/" : "", rel);
	}
	bool ok = r->route == R_UPLOAD || path_of(r, rest);
	if (ok)
		file_route(rt, r);
}

static enum MHD_Result upload_part(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *filename, const char *content_type,
				   const char *transfer_encoding, const char *data, uint64_t off,
				   size_t size)
{
	struct req *r = cls;
	if (!key || strcmp(key, "file") || (!filename && r->route != R_V1_FILE))
		return MHD_YES;
	if (off == 0 && r->parts++) /* a second "file" part: the first is taken */
		return MHD_YES;
	if (r->parts > 1)
		return MHD_YES;
	if (!r->have_file && r->route == R_V1_FILE) {
		r->have_file = true;
	} else if (!r->have_file) {
		free(r->name);
		r->name = strdup(filename);
		r->have_file = r->name != NULL;
	}
	if (r->len + size > UPLOAD_MAX) {
		r->too_large = true;
		return MHD_YES;
	}
	if (rt_body_append(r, data, size) < 0)
		r->too_large = true;
	return MHD_YES;
}

static bool route_of(const char *url, const char *method, struct req *r, const char **rest,
		     unsigned *bad)
{
	*rest = "";
	if (rt_ab_route(url, method, r) || rt_v1_route(url, method, r, rest))
		return true;
	static const struct {
		const char *prefix;
		bool exact, post;
		enum route route;
	} routes[] = {
		{"/", true, false, R_HEALTH},	   {"/execute", true, true, R_EXECUTE},
		{"/upload", true, true, R_UPLOAD}, {"/download/", false, false, R_DOWNLOAD},
		{"/list/", false, false, R_LIST},  {"/exists/", false, false, R_EXISTS},
	};
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		size_t n = strlen(routes[i].prefix);
		if (routes[i].exact ? strcmp(url, routes[i].prefix)
				    : strncmp(url, routes[i].prefix, n))
			continue;
		r->route = routes[i].route;
		*rest = url + n;
		if (strcmp(method, routes[i].post ? "POST" : "GET")) {
			*bad = MHD_HTTP_METHOD_NOT_ALLOWED;
			return false;
		}
		return true;
	}
	*bad = MHD_HTTP_NOT_FOUND;
	return false;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *data,
			       size_t *data_size, void **con_cls)
{
	struct rt *rt = cls;
	struct req *r = *con_cls;
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		r->proto = &rt_http_proto;
		r->rt = rt;
		r->conn = c;
		*con_cls = r;
		rt_auth_http_request(c, true);
		if (rt_auth_http_refused(rt, c, r, url)) /* before anything is done for it */
			return queue(c, r);
		const char *rest;
		unsigned bad = 0;
		/* url is as sent (no unescaping by the daemon): decoded here once */
		size_t ul = strlen(url), dl;
		char *dec = malloc(ul + 1);
		if (!dec || ab_rtpath_unquote(url, ul, dec, &dl) < 0) { /* a NUL byte */
			free(dec);
			bool file = !strcmp(method, "GET") &&
				    (!strncmp(url, "/download/", 10) ||
				     !strncmp(url, "/list/", 6) || !strncmp(url, "/exists/", 8));
			if (!strncmp(url, "/v1/", 4)) {
				r->route = R_V1_FILE;
				rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, "the path holds a NUL byte");
			} else if (file) /* main.py: realpath's ValueError */
				rt_answer_msg(r, MHD_HTTP_FORBIDDEN, "Access denied");
			else
				rt_answer(r, MHD_HTTP_NOT_FOUND, rt_detail("Not Found"));
			return MHD_YES;
		}
		if (!route_of(dec, method, r, &rest, &bad))
			rt_answer(r, bad,
				  rt_detail(bad == MHD_HTTP_NOT_FOUND ? "Not Found"
								      : "Method Not Allowed"));
		else if (!rt_auth_http_json_refused(c, r) && r->route != R_UPLOAD)
			r->name = strdup(rest);
		free(dec);
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
		unsigned long long limit =
			r->route == R_UPLOAD || r->put ? UPLOAD_MAX + 65536 : EXEC_BODY_MAX;
		const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
		r->multipart = r->put && ct && !strncasecmp(ct, "multipart/form-data", 19);
		r->mode_arg = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "mode");
		r->recursive_arg =
			MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "recursive");
		unsigned long long n = cl ? strtoull(cl, NULL, 10) : 0;
		r->too_large = r->step != S_DONE && n > limit;
		r->announced = cl != NULL;
		if (r->step != S_DONE && (r->route == R_UPLOAD || r->multipart) && !r->too_large)
			r->pp = MHD_create_post_processor(c, 65536, upload_part, r);
		/* a body up to twice the bound is read (and dropped) before the 413,
		 * which a client that sends it all first then reads; past that it
		 * is not read: answered now, the connection closed after */
		if (r->too_large && n > 2 * limit)
			dispatch(rt, r, "");
		if (r->step == S_DONE) /* known before the body: not read */
			return queue(c, r);
		return MHD_YES;
	}
	if (*data_size) {
		if (r->step == S_DONE || r->too_large) {
			*data_size = 0; /* read and dropped: the answer is known */
			return MHD_YES;
		}
		if (r->route == R_UPLOAD || r->multipart) {
			if (!r->pp || MHD_post_process(r->pp, data, *data_size) != MHD_YES)
				r->have_file = false;
		} else if (r->len + *data_size > (r->put ? UPLOAD_MAX : EXEC_BODY_MAX)) {
			r->too_large = true;
		} else {
			if (rt_body_append(r, data, *data_size) < 0)
				return MHD_NO;
		}
		*data_size = 0;
		/* past the bound: a body of an announced length (within the bound
		 * and a slack) is read to its end and answered 413; one without
		 * (chunked) is cut off here: the connection closes */
		return r->too_large && !r->announced ? MHD_NO : MHD_YES;
	}
	if (r->step == S_NONE && r->route >= R_V1_FILE) {
		dispatch(rt, r, r->name ? r->name : ""); /* name stays: a listing's path */
		if (r->step != S_DONE) {
			MHD_suspend_connection(c);
			r->suspended = true;
			return MHD_YES;
		}
	} else if (r->step == S_NONE) {
		char *rest = r->route == R_UPLOAD ? NULL : r->name;
		if (rest)
			r->name = NULL;
		/* upload_part left the filename in name; the others their path */
		dispatch(rt, r, rest ? rest : "");
		free(rest);
		if (r->step != S_DONE) {
			MHD_suspend_connection(c);
			r->suspended = true;
			return MHD_YES;
		}
	}
	if (r->step != S_DONE) /* resumed early: still waiting */
		return MHD_YES;
	return queue(c, r);
}

/* The connection ended (answered, timed out, reset, or the daemon stops). */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode why)
{
	struct rt *rt = cls;
	struct req *r = *con_cls;
	*con_cls = NULL;
	rt_auth_http_request(c, false); /* the next request's head is awaited */
	if (!r)
		return;
	if (!r->engaged) {
		rt_req_free(r);
		return;
	}
	/* in the engine: a command stopped (freed after its result), one
	 * waiting dropped; a changes or commit runs on, freed after its reply */
	r->conn = NULL;
	r->again = false;
	if (!r->fr.running || r->fr.q.kind != AB_REQUEST_LAYER)
		ab_front_cancel(&rt->f, &r->fr);
}

/* The URL as it came: decoded by the handler (twice for a path, as
 * uvicorn and main.py do), never by the daemon. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *uri)
{
	return strlen(uri);
}

static struct MHD_Daemon *listen_on(struct rt *rt, struct ab_error *err)
{
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(rt->o->port)};
	struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(rt->o->port)};
	bool v6 = strchr(rt->o->listen, ':') != NULL;
	if (v6 ? inet_pton(AF_INET6, rt->o->listen, &a6.sin6_addr) != 1
	       : inet_pton(AF_INET, rt->o->listen, &a4.sin_addr) != 1) {
		ab_error_plain(err, EINVAL, "runtime: --listen %s is not an IPv4 or IPv6 address",
			       rt->o->listen);
		return NULL;
	}
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | (v6 ? MHD_USE_IPv6 : 0);
	struct MHD_Daemon *d = MHD_start_daemon(
		flags, rt->o->port, NULL, NULL, handler, rt, MHD_OPTION_SOCK_ADDR,
		v6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4, MHD_OPTION_CONNECTION_TIMEOUT,
		rt->o->conn_timeout_s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT,
		MHD_OPTION_NOTIFY_COMPLETED, completed, rt, MHD_OPTION_NOTIFY_CONNECTION,
		rt_auth_http_notify, rt, MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
		MHD_OPTION_END);
	if (!d)
		ab_error_set(err, errno ? errno : EADDRINUSE,
			     "runtime: cannot listen on %s port %u", rt->o->listen, rt->o->port);
	return d;
}

/* ---- the runtime's protocol ---- */

static int http_open(struct rt *rt, struct ab_error *err)
{
	char why[256];
	if (!rt_mhd_load(why, sizeof(why)))
		return ab_error_plain(err, ENOENT, "runtime: %s", why);
	rt->d = listen_on(rt, err);
	return rt->d ? 0 : -1;
}

static void http_ready(struct rt *rt)
{
	const char *l = rt->o->listen;
	fprintf(stderr, "agentbox: runtime: listening on http://%s%s%s:%u/ (sandbox %s)\n",
		strchr(l, ':') ? "[" : "", l, strchr(l, ':') ? "]" : "", rt->o->port,
		ab_front_id(&rt->f));
}

static int http_fds(struct rt *rt, struct pollfd *p, int max, int *wait_ms)
{
	(void)max;
	MHD_UNSIGNED_LONG_LONG t = 0;
	int wait = MHD_get_timeout(rt->d, &t) == MHD_YES ? (t > 1000 ? 1000 : (int)t) : 1000;
	if (*wait_ms < 0 || wait < *wait_ms)
		*wait_ms = wait;
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(rt->d, MHD_DAEMON_INFO_EPOLL_FD);
	p[0] = (struct pollfd){.fd = info ? info->epoll_fd : -1, .events = POLLIN};
	return 1;
}

static void http_run(struct rt *rt, const struct pollfd *p, int n)
{
	(void)p;
	(void)n;
	rt_auth_http_sweep(rt);
	rt_watch_sweep(rt, &rt_http_proto);
	MHD_run(rt->d);
}

static void http_quiesce(struct rt *rt)
{
	int lfd = (int)MHD_quiesce_daemon(rt->d);
	if (lfd >= 0)
		close(lfd);
}

/* The requests in the engine were answered 503 (their connections
 * resumed): sent, and the daemon stopped (the requests whose client is
 * there freed with it). */
static void http_close(struct rt *rt)
{
	if (!rt->d)
		return;
	if (rt->served)
		MHD_run(rt->d);
	MHD_stop_daemon(rt->d);
	rt->d = NULL;
}

const struct rt_proto rt_http_proto = {
	.max_fds = 1, /* the daemon's epoll fd */
	.open = http_open,
	.ready = http_ready,
	.fds = http_fds,
	.run = http_run,
	.quiesce = http_quiesce,
	.close = http_close,
	.event = on_event,
	.layer_reply = rt_ab_layer_reply,
	.refused = rt_req_refused,
	.left = rt_req_left,
	.watch = on_watch,
};
