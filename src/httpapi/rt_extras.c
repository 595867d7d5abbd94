/* agentbox runtime's own extras under /agentbox/v1/, routes no client of
 * agent-sandbox uses: the overlay workspace's review (changes), commit and
 * discard, the network proxy's report (net), file events (watch,
 * rt_watch.c) and published ports (port). Errors are sandboxd's
 * {"code","message"}: 409 CONFLICT when the runtime was started without
 * what the route needs (--workspace-mode overlay, --net allow=), 400 for a
 * bad body or query.
 *
 * changes and commit read what commands wrote, hostile files: they run in
 * a child under front_layer.c's watchdog (its bound: the body's or query's
 * "timeout", default 300 s), one at a time, the others waiting in order,
 * while the loop goes on. discard cannot empty a mounted overlay's layer
 * (the overlay caches what it looked up): it ends the sandbox, its layer
 * removed, and builds a new one from the same options, so the runtime
 * (the pod) lives on; it is refused while anything runs in the sandbox. */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "front/netop.h"
#include "front/front_link.h"
#include "httpapi/rt_int.h"

#define AB_PREFIX "/agentbox/v1/"

bool rt_ab_route(const char *url, const char *method, struct req *r)
{
	static const struct {
		const char *name;
		enum route route;
		bool post;
	} routes[] = {
		{"changes", R_AB_CHANGES, false}, {"commit", R_AB_COMMIT, true},
		{"discard", R_AB_DISCARD, true},  {"net", R_AB_NET, false},
		{"watch", R_AB_WATCH, false},	  {"port", R_AB_PORT, false},
	};
	size_t n = strlen(AB_PREFIX);
	if (strncmp(url, "/agentbox/", 10) && strcmp(url, "/agentbox"))
		return false;
	r->post = !strcmp(method, "POST");
	for (size_t i = 0; !strncmp(url, AB_PREFIX, n) && i < sizeof(routes) / sizeof(routes[0]);
	     i++) {
		if (strcmp(url + n, routes[i].name))
			continue;
		r->route = routes[i].route;
		bool ok = r->post ? routes[i].post || r->route == R_AB_NET || r->route == R_AB_PORT
				  : !routes[i].post && !strcmp(method, "GET");
		if (!ok)
			rt_answer_msg(r, MHD_HTTP_METHOD_NOT_ALLOWED,
				      "method not allowed: use the one Allow names");
		return true;
	}
	r->route = R_AB_NONE;
	rt_answer_msg(r, MHD_HTTP_NOT_FOUND,
		      "no such route: agentbox's are GET /agentbox/v1/changes, POST "
		      "/agentbox/v1/commit, POST /agentbox/v1/discard, GET or POST "
		      "/agentbox/v1/net, GET /agentbox/v1/watch, GET or POST /agentbox/v1/port");
	return true;
}

const char *rt_ab_allow(enum route route)
{
	return route == R_AB_CHANGES || route == R_AB_WATCH ? "GET"
	       : route == R_AB_NET			    ? "GET, POST"
							    : "POST";
}

/* The body: absent or empty is {}; else a JSON object of only the keys
 * given (NULL-terminated). NULL when answered (400). */
static json_object *body_of(struct req *r, const char *const *keys)
{
	json_object *o = NULL;
	size_t len = r->len;
	const char *b = r->body ? r->body : "";
	while (len && strchr(" \t\r\n", b[len - 1]))
		len--;
	if (!len)
		return json_object_new_object();
	json_tokener *t = json_tokener_new();
	if (t)
		o = json_tokener_parse_ex(t, b, (int)len);
	bool whole = t && o && json_tokener_get_parse_end(t) == len;
	json_tokener_free(t);
	if (!whole || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, "the body must be one JSON object");
		return NULL;
	}
	json_object_object_foreach(o, k, v)
	{
		(void)v;
		bool known = false;
		for (size_t i = 0; keys[i]; i++)
			known |= !strcmp(k, keys[i]);
		if (!known) {
			char m[200];
			snprintf(m, sizeof(m), "unknown field \"%.64s\" in the body", k);
			json_object_put(o);
			rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, m);
			return NULL;
		}
	}
	return o;
}

/* GET /agentbox/v1/changes's query into the op's fields: diff,
 * include_ignored (booleans), max_diff_bytes, timeout (numbers). */
static json_object *changes_query(struct req *r)
{
	static const char *const bools[] = {"diff", "include_ignored"};
	static const char *const nums[] = {"max_diff_bytes", "timeout"};
	json_object *o = json_object_new_object();
	for (size_t i = 0; i < 2; i++) {
		const char *v =
			MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, bools[i]);
		if (!v)
			continue;
		bool t = !strcmp(v, "true") || !strcmp(v, "1") || !*v;
		if (!t && strcmp(v, "false") && strcmp(v, "0")) {
			char m[200];
			snprintf(m, sizeof(m), "%s \"%.64s\" must be true or false", bools[i], v);
			json_object_put(o);
			rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, m);
			return NULL;
		}
		json_object_object_add(o, bools[i], json_object_new_boolean(t));
	}
	for (size_t i = 0; i < 2; i++) {
		const char *v =
			MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, nums[i]);
		if (!v)
			continue;
		char *end;
		double d = strtod(v, &end);
		if (!*v || *end || !(d > 0) || d > 1e8) {
			char m[200];
			snprintf(m, sizeof(m), "%s \"%.64s\" must be a positive number", nums[i],
				 v);
			json_object_put(o);
			rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, m);
			return NULL;
		}
		json_object_object_add(o, nums[i],
				       i == 0 ? json_object_new_int64((int64_t)d)
					      : json_object_new_double(d));
	}
	return o;
}

static unsigned status_of(const char *code)
{
	return !code				  ? MHD_HTTP_INTERNAL_SERVER_ERROR
	       : !strcmp(code, "invalid_request") ? MHD_HTTP_BAD_REQUEST
	       : !strcmp(code, "timeout")	  ? MHD_HTTP_GATEWAY_TIMEOUT
	       : !strcmp(code, "shutdown")	  ? MHD_HTTP_SERVICE_UNAVAILABLE
						  : MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* A layer op's protocol reply into r's answer: the result's fields without
 * type, id and op (200), or the error (taken). */
static void layer_answer(struct req *r, json_object *reply)
{
	const char *type = json_object_get_string(json_object_object_get(reply, "type"));
	if (type && !strcmp(type, "result")) {
		json_object_object_del(reply, "type");
		json_object_object_del(reply, "id");
		json_object_object_del(reply, "op");
		rt_answer(r, MHD_HTTP_OK, rt_json_line(reply));
		return;
	}
	const char *code = json_object_get_string(json_object_object_get(reply, "code"));
	const char *msg = json_object_get_string(json_object_object_get(reply, "message"));
	rt_answer_msg(r, status_of(code), msg ? msg : "the operation failed");
	json_object_put(reply);
}

void rt_ab_layer_reply(void *arg, struct ab_front_req *fr, json_object *reply)
{
	struct req *r = (struct req *)fr;
	if (!r || !r->conn) { /* its client went away: it ran on */
		json_object_put(reply);
		return;
	}
	layer_answer(r, reply);
	rt_req_resume(r);
}

/* changes or commit with its fields (taken): the engine's layer op, one
 * at a time, in order. */
static void queue_layer_op(struct rt *rt, struct req *r, json_object *fields)
{
	rt_submit_op(rt, r, true, r->route == R_AB_CHANGES ? "changes" : "commit", fields);
}

/* discard: the layer goes with the sandbox; a new one from the same
 * options takes its place. */
static void discard(struct rt *rt, struct req *r)
{
	if (rt_busy(rt)) {
		rt_answer_msg(r, MHD_HTTP_CONFLICT,
			      "commands or operations are running in the sandbox, which discard "
			      "ends: retry once they are done");
		return;
	}
	json_object *reply = NULL;
	struct ab_error e = {0};
	char old[64];
	int rc = ab_front_discard(&rt->f, &reply, old, sizeof(old), &e);
	if (rc == -1) {
		rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR, e.msg);
		return;
	}
	if (rc < 0) { /* its layer removed with it, and no new one */
		fprintf(stderr, "agentbox: runtime: %s\n", rt->f.gone_why);
		rt_answer_msg(r, MHD_HTTP_INTERNAL_SERVER_ERROR, rt->f.gone_why);
		return;
	}
	fprintf(stderr,
		"agentbox: runtime: discard: sandbox %s and its changes removed; sandbox %s\n", old,
		ab_front_id(&rt->f));
	json_object_object_add(reply, "sandbox_id", json_object_new_string(ab_front_id(&rt->f)));
	rt_answer(r, MHD_HTTP_OK, rt_json_line(reply));
}

/* GET: the report; POST {"allow","deny"}: the patterns replaced first. */
static void net(struct rt *rt, struct req *r)
{
	static const char *const keys[] = {"allow", "deny", NULL};
	json_object *req = r->post ? body_of(r, keys) : json_object_new_object();
	if (!req)
		return;
	if (!ab_front_has_net(&rt->f)) {
		json_object_put(req);
		rt_answer_msg(r, MHD_HTTP_CONFLICT,
			      "the sandbox has no network proxy: start agentbox runtime with "
			      "--net allow=HOSTS for a report and a policy to change");
		return;
	}
	struct ab_error e = {0};
	json_object *o = ab_front_net_op(&rt->f, req, &e);
	json_object_put(req);
	if (!o) {
		rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, e.msg);
		return;
	}
	json_object_object_del(o, "type");
	rt_answer(r, MHD_HTTP_OK, rt_json_line(o));
}

/* GET: the ports published; POST {"port","host","public","token","close"}:
 * one published or closed first (the protocol's port op, docs/network.md). */
static void port(struct rt *rt, struct req *r)
{
	static const char *const keys[] = {"port", "host", "public", "token", "close", NULL};
	json_object *req = r->post ? body_of(r, keys) : json_object_new_object();
	if (!req)
		return;
	if (r->post && !json_object_object_get_ex(req, "port", NULL)) {
		json_object_put(req);
		rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, "port: the body needs a \"port\"");
		return;
	}
	struct ab_error e = {0};
	json_object *o = ab_front_port_op(&rt->f, req, &e);
	json_object_put(req);
	if (!o) {
		rt_answer_msg(r, e.code == EPERM ? MHD_HTTP_FORBIDDEN : MHD_HTTP_BAD_REQUEST,
			      e.msg);
		return;
	}
	json_object_object_del(o, "type");
	rt_answer(r, MHD_HTTP_OK, rt_json_line(o));
}

void rt_ab_dispatch(struct rt *rt, struct req *r)
{
	if (r->too_large) {
		char m[128];
		snprintf(m, sizeof(m), "request body too large (at most %u bytes)", EXEC_BODY_MAX);
		rt_answer_msg(r, MHD_HTTP_CONTENT_TOO_LARGE, m);
		return;
	}
	if (rt->f.gone) {
		rt_answer_msg(r, MHD_HTTP_SERVICE_UNAVAILABLE, rt->f.gone_why);
		return;
	}
	if (r->route == R_AB_NET) {
		net(rt, r);
		return;
	}
	if (r->route == R_AB_WATCH) {
		rt_watch_start(rt, r);
		return;
	}
	if (r->route == R_AB_PORT) {
		port(rt, r);
		return;
	}
	if (!ab_front_has_layer(&rt->f)) {
		rt_answer_msg(r, MHD_HTTP_CONFLICT,
			      "the workspace is not an overlay: start agentbox runtime with "
			      "--workspace-mode overlay for changes, commit and discard");
		return;
	}
	if (r->route == R_AB_DISCARD) {
		static const char *const none[] = {NULL};
		json_object *b = body_of(r, none);
		if (b)
			discard(rt, r);
		json_object_put(b);
		return;
	}
	static const char *const commit_keys[] = {"paths", "force", "timeout", NULL};
	json_object *req = r->route == R_AB_CHANGES ? changes_query(r) : body_of(r, commit_keys);
	if (req)
		queue_layer_op(rt, r, req);
}
