/* agentbox mcp: the Model Context Protocol over stdio (JSON-RPC 2.0, one
 * message a line; revisions 2025-11-25 and 2025-06-18), a codec over the
 * request engine (front/front.h) as serve.c is for agentbox/1. A tool
 * call becomes a request of that protocol (mcp_tools.c), checked by
 * request.c as every request is (an object, never a line written to be
 * parsed back), and the engine runs it as a command, file operation or
 * layer op of the session; its result comes back as the tool's result.
 * Everything wrong with a call is a tool error (isError); only what is
 * wrong with a message itself is a JSON-RPC error, and the server goes on
 * after both. Replies go out through front_out.c's bounded, non-blocking
 * queue, so a client that does not read never stops timeouts; the
 * overlay's changes, commit and discard run one at a time under the
 * engine's watchdog (front_layer.c), as serve's, so a commit of many
 * files stops no other call and no deadline. End of file on stdin ends
 * the session (every process killed, the cgroup removed) once the layer
 * calls sent before it are answered. */
#include "mcp/mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "files/fileop.h"
#include "front/front.h"
#include "front/front_audit.h"
#include "front/front_in.h"
#include "front/front_out.h"
#include "front/request.h"
#include "mcp/mcp_tools.h"
#include "sandbox/isolation.h"
#include "session/result.h"
#include "util/error.h"

#define MAX_LINE	 (16u << 20) /* a write_file of 6 MiB, escaped */
#define READ_CHUNK	 (256u << 10)
#define OUT_HIGH_WATER	 (1u << 20)
#define MAX_CALLS	 1024 /* tool calls running or waiting */
#define PROGRESS_MS	 1000 /* a progress notification this often */
#define LATEST_VERSION	 "2025-11-25"
#define PREVIOUS_VERSION "2025-06-18"

/* JSON-RPC 2.0's error codes */
#define RPC_PARSE_ERROR	     -32700
#define RPC_INVALID_REQUEST  -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS   -32602

static const char *const log_levels[] = {"debug", "info",     "notice", "warning",
					 "error", "critical", "alert",	"emergency"};
#define N_LEVELS (int)(sizeof(log_levels) / sizeof(log_levels[0]))

/* A tool call: a request in the engine (front.h), with what MCP keeps. */
struct call {
	struct ab_front_req fr; /* first: the engine's; its q the protocol request */
	json_object *rpc_id;	/* the tools/call's id (fr.key) */
	json_object *args;	/* its arguments, for the result's text */
	json_object *token;	/* _meta.progressToken, or NULL */
	const struct mcp_tool *tool;
	unsigned long long started_ms, progress_ms; /* progress_ms 0: not yet */
	long long progress;
};

struct mcp {
	struct ab_front f; /* the request engine: the session, the calls */
	struct ab_config *cfg;
	struct ab_session *s; /* f.s */
	struct front_out out;
	char *in;
	size_t in_len;
	bool discarding, stdin_eof;
	int log_level; /* index in log_levels; N_LEVELS: none asked for */
	int audit;     /* --audit-log, or -1 */
};

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

/* ---- messages out ---- */

/* A JSON-RPC message: its two members (k1: v1, k2: v2, both taken). */
static void send_msg(struct mcp *m, const char *k1, json_object *v1, const char *k2,
		     json_object *v2)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, k1, v1);
	json_object_object_add(o, k2, v2);
	json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
	out_json(&m->out, o, NULL);
}

static void rpc_result(struct mcp *m, json_object *id, json_object *result)
{
	send_msg(m, "id", json_object_get(id), "result", result);
}

/* A JSON string of at most 511 bytes, formatted. */
__attribute__((format(printf, 1, 0))) static json_object *string_of(const char *fmt, va_list ap)
{
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	return json_object_new_string(msg);
}

__attribute__((format(printf, 4, 5))) static void rpc_error(struct mcp *m, json_object *id,
							    int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	json_object *e = json_object_new_object(), *msg = string_of(fmt, ap);
	va_end(ap);
	json_object_object_add(e, "code", json_object_new_int(code));
	json_object_object_add(e, "message", msg);
	send_msg(m, "id", json_object_get(id), "error", e);
}

static void notify(struct mcp *m, const char *method, json_object *params)
{
	send_msg(m, "method", json_object_new_string(method), "params", params);
}

/* notifications/message, when the client asked for level or below */
__attribute__((format(printf, 3, 4))) static void log_msg(struct mcp *m, int level, const char *fmt,
							  ...)
{
	if (level < m->log_level)
		return;
	json_object *p = json_object_new_object();
	json_object_object_add(p, "level", json_object_new_string(log_levels[level]));
	json_object_object_add(p, "logger", json_object_new_string("agentbox"));
	va_list ap;
	va_start(ap, fmt);
	json_object_object_add(p, "data", string_of(fmt, ap));
	va_end(ap);
	notify(m, "notifications/message", p);
}

/* ---- tool calls ---- */

static void call_free(void *arg, struct ab_front_req *r)
{
	(void)arg;
	struct call *c = (struct call *)r;
	json_object_put(c->rpc_id);
	json_object_put(c->args);
	json_object_put(c->token);
	ab_request_clear(&c->fr.q);
	free(c);
}

/* The call's result (the engine frees the call after). */
static void call_done(struct mcp *m, struct call *c, json_object *result)
{
	log_msg(m, 0, "%s: done in %llu ms%s", mcp_tool_name(c->tool), now_ms() - c->started_ms,
		json_object_get_boolean(json_object_object_get(result, "isError"))
			? " (a tool error)"
			: "");
	rpc_result(m, c->rpc_id, result);
}

/* A layer call's reply (a protocol result or error) into its result:
 * changes, commit and discard run one at a time in the engine's watchdog
 * child, so that no other call and no deadline waits for a review or a
 * commit of many files; discard is answered at once. r is NULL when the
 * call was cancelled meanwhile. */
static void layer_reply(void *arg, struct ab_front_req *r, json_object *reply)
{
	struct mcp *m = arg;
	struct call *c = (struct call *)r;
	if (c) {
		front_audit_result(&m->audit, json_object_object_get(reply, "id"), NULL,
				   json_object_get_string(json_object_object_get(reply, "code")));
		call_done(m, c, mcp_tool_reply_result(c->tool, c->args, reply));
	}
	json_object_put(reply);
}

/* A call that ends without a result of the session: it could not start,
 * it was cancelled before it did (no response, as the protocol says), or
 * the sandbox ends. */
static void refused(void *arg, struct ab_front_req *r, enum ab_front_why why,
		    const struct ab_error *e)
{
	struct mcp *m = arg;
	struct call *c = (struct call *)r;
	if (why == AB_FRONT_START_FAILED)
		call_done(m, c, mcp_tool_error("%s", e->msg));
	else if (why == AB_FRONT_ENDED && !c->fr.cancelled)
		rpc_result(m, c->rpc_id,
			   mcp_tool_error("the sandbox ended before the call finished (%s)",
					  m->f.ending ? "discard" : "the server is stopping"));
}

/* Waiting calls start while slots are free and the client reads its
 * replies: past OUT_HIGH_WATER unread, none starts, so what results wait
 * in memory is bounded by the calls running, whatever commands print. */
static void backlog(void *arg, size_t *results, size_t *bytes)
{
	struct mcp *m = arg;
	*results = 0;
	*bytes = out_pending(&m->out) + m->out.parts_raw;
}

/* What this server offers beyond the plain tools: the layer's review in an
 * overlay session, and its commit and discard with --model-commits. */
static unsigned offer(const struct mcp *m)
{
	if (!ab_session_layer(m->s))
		return 0;
	return MCP_OFFER_LAYER | (m->cfg->model_commits ? MCP_OFFER_COMMIT : 0);
}

static void tools_call(struct mcp *m, json_object *id, json_object *params)
{
	json_object *name = json_object_object_get(params, "name");
	json_object *args = json_object_object_get(params, "arguments");
	const struct mcp_tool *t = json_object_is_type(name, json_type_string)
					   ? mcp_tool_find(json_object_get_string(name), offer(m))
					   : NULL;
	if (!t) {
		rpc_error(m, id, RPC_INVALID_PARAMS, "Unknown tool: %.64s",
			  name ? json_object_get_string(name) : "(no name)");
		return;
	}
	if (ab_front_find(&m->f, id)) {
		rpc_error(m, id, RPC_INVALID_REQUEST, "a request with this id is in progress");
		return;
	}
	if (args && !json_object_is_type(args, json_type_object)) {
		rpc_result(m, id,
			   mcp_tool_error("%s: arguments must be an object", mcp_tool_name(t)));
		return;
	}
	if (m->f.ending) {
		rpc_result(m, id, mcp_tool_error("the sandbox has ended (discard)"));
		return;
	}
	if (ab_front_admit(&m->f, id) < 0) {
		rpc_result(
			m, id,
			mcp_tool_error("%d tool calls are running or waiting already", MAX_CALLS));
		return;
	}
	char why[512];
	unsigned long long tag = ab_front_tag(&m->f);
	json_object *req = mcp_tool_request(t, args, (long long)tag, why, sizeof(why));
	if (!req) {
		rpc_result(m, id, mcp_tool_error("%s", why));
		return;
	}
	front_audit_request(&m->audit, req,
			    json_object_get_string(json_object_object_get(req, "op")));
	struct call *c = calloc(1, sizeof(*c));
	struct ab_error e = {0};
	if (!c) {
		rpc_result(m, id, mcp_tool_error("out of memory"));
		json_object_put(req);
		return;
	}
	if (ab_request_object(req, false, &c->fr.q, &e) < 0) { /* q holds req */
		rpc_result(m, id, mcp_tool_error("%s", e.msg));
		ab_request_clear(&c->fr.q);
		free(c);
		return;
	}
	c->rpc_id = c->fr.key = json_object_get(id);
	c->args = args ? json_object_get(args) : json_object_new_object();
	json_object *meta = json_object_object_get(params, "_meta");
	json_object *token = json_object_object_get(meta, "progressToken");
	if (json_object_is_type(token, json_type_string) ||
	    json_object_is_type(token, json_type_int))
		c->token = json_object_get(token);
	c->tool = t;
	c->fr.tag = tag;
	c->started_ms = now_ms();
	log_msg(m, 0, "%s: called", mcp_tool_name(t));
	ab_front_submit(&m->f, &c->fr);
}

/* notifications/cancelled: the call ends (a command as on a timeout, a
 * layer call as at its bound: what a commit wrote before stays) and gets
 * no response, as the protocol says. */
static void cancelled(struct mcp *m, json_object *params)
{
	struct call *c =
		(struct call *)ab_front_find(&m->f, json_object_object_get(params, "requestId"));
	if (!c || c->fr.cancelled)
		return;
	log_msg(m, 0, "%s: cancelled by the client", mcp_tool_name(c->tool));
	ab_front_cancel(&m->f, &c->fr);
}

/* notifications/progress for every running call that asked, each second:
 * the seconds it has run. Returns the ms until the next one is due. */
static int progress_tick(struct mcp *m)
{
	unsigned long long now = now_ms(), wait = ~0ull;
	for (struct ab_front_req *r = m->f.head; r; r = r->next) {
		struct call *c = (struct call *)r;
		if (!r->running || !c->token || r->cancelled)
			continue;
		if (!c->progress_ms) /* started since the last tick */
			c->progress_ms = now + PROGRESS_MS;
		if (c->progress_ms <= now) {
			json_object *p = json_object_new_object();
			json_object_object_add(p, "progressToken", json_object_get(c->token));
			json_object_object_add(p, "progress", json_object_new_int64(++c->progress));
			char msg[128];
			snprintf(msg, sizeof(msg), "%s: running for %llu s", mcp_tool_name(c->tool),
				 (now - c->started_ms) / 1000);
			json_object_object_add(p, "message", json_object_new_string(msg));
			notify(m, "notifications/progress", p);
			c->progress_ms = now + PROGRESS_MS;
		}
		if (c->progress_ms - now < wait)
			wait = c->progress_ms - now;
	}
	return wait == ~0ull ? -1 : (int)wait;
}

/* ---- events from the session ---- */

static json_object *file_op_result(struct call *c, const struct ab_result *res)
{
	const char *op = c->fr.q.file_op;
	if (res->timed_out)
		return mcp_tool_error("%s: took longer than its timeout of %llu ms", op,
				      res->timeout_ms);
	if (res->exit_code != 0 || res->out.truncated)
		return mcp_tool_error("%s: the operation failed (exit status %d%s)", op,
				      res->exit_code, res->oom_killed ? ", out of memory" : "");
	struct ab_error err = {0};
	json_object *reply = fileop_reply(op, c->fr.q.id, res->out.data ? res->out.data : "",
					  res->out.len, &err);
	if (!reply)
		return mcp_tool_error("%s", err.msg);
	json_object *r = mcp_tool_reply_result(c->tool, c->args, reply);
	json_object_put(reply);
	return r;
}

/* A session event of c: only its result counts (the engine frees c). */
static void on_event(void *arg, struct ab_front_req *r, const struct ab_event *ev)
{
	struct mcp *m = arg;
	struct call *c = (struct call *)r;
	if (ev->kind != AB_EVENT_RESULT)
		return;
	json_object *tag = json_object_new_int64((int64_t)c->fr.tag);
	front_audit_result(&m->audit, tag, ev->error ? NULL : ev->result,
			   ev->error ? ab_errc_name(ab_error_errc(ev->error)) : NULL);
	json_object_put(tag);
	if (c->fr.cancelled)
		return; /* no response, as the protocol says */
	if (ev->error)
		call_done(m, c, mcp_tool_error("%s", ev->error->msg));
	else if (c->fr.q.file_op)
		call_done(m, c, file_op_result(c, ev->result));
	else
		call_done(m, c, mcp_tool_exec_result(ev->result));
}

/* ---- requests ---- */

static json_object *initialize_result(struct mcp *m, json_object *params)
{
	const char *asked =
		json_object_get_string(json_object_object_get(params, "protocolVersion"));
	const char *version =
		asked && !strcmp(asked, PREVIOUS_VERSION) ? PREVIOUS_VERSION : LATEST_VERSION;
	json_object *r = json_object_new_object();
	json_object_object_add(r, "protocolVersion", json_object_new_string(version));
	json_object *caps = json_object_new_object();
	json_object *tools = json_object_new_object();
	json_object_object_add(tools, "listChanged", json_object_new_boolean(false));
	json_object_object_add(caps, "tools", tools);
	json_object_object_add(caps, "logging", json_object_new_object());
	json_object_object_add(r, "capabilities", caps);
	json_object *info = json_object_new_object();
	json_object_object_add(info, "name", json_object_new_string("agentbox"));
	json_object_object_add(info, "title", json_object_new_string("agentbox sandbox"));
	json_object_object_add(info, "version", json_object_new_string(AGENTBOX_VERSION));
	json_object_object_add(r, "serverInfo", info);
	unsigned offered = offer(m);
	char text[1024];
	snprintf(text, sizeof(text),
		 "Every tool runs in one agentbox sandbox (%s) that lives as long as this "
		 "server: the project is at /workspace, the rest of the host is out of reach, "
		 "the network is %s. Files written by execute are there for the file tools and "
		 "the next command.%s",
		 ab_session_id(m->s),
		 m->cfg->net == AB_NET_HOST    ? "the host's"
		 : m->cfg->net == AB_NET_PROXY ? "limited to an allowlist (a proxy)"
					       : "off (loopback only)",
		 offered & MCP_OFFER_COMMIT
			 ? " Writes land in a layer: review them with changes, then commit "
			   "them to the user's files or discard them."
		 : offered ? " Writes land in a layer: list them with changes; the user reviews "
			     "and commits them to their files."
			   : "");
	json_object_object_add(r, "instructions", json_object_new_string(text));
	return r;
}

static void set_level(struct mcp *m, json_object *id, json_object *params)
{
	const char *level = json_object_get_string(json_object_object_get(params, "level"));
	for (int i = 0; level && i < N_LEVELS; i++)
		if (!strcmp(level, log_levels[i])) {
			m->log_level = i;
			rpc_result(m, id, json_object_new_object());
			return;
		}
	rpc_error(m, id, RPC_INVALID_PARAMS,
		  "logging/setLevel: level must be one of debug, info, notice, warning, error, "
		  "critical, alert, emergency");
}

static void handle_request(struct mcp *m, json_object *id, const char *method, json_object *params)
{
	if (!strcmp(method, "initialize")) {
		rpc_result(m, id, initialize_result(m, params));
	} else if (!strcmp(method, "ping")) {
		rpc_result(m, id, json_object_new_object());
	} else if (!strcmp(method, "tools/list")) {
		json_object *r = json_object_new_object();
		json_object_object_add(r, "tools", mcp_tools_list(offer(m)));
		rpc_result(m, id, r);
	} else if (!strcmp(method, "tools/call")) {
		tools_call(m, id, params);
	} else if (!strcmp(method, "logging/setLevel")) {
		set_level(m, id, params);
	} else {
		rpc_error(m, id, RPC_METHOD_NOT_FOUND, "Method not found: %.64s", method);
	}
}

static bool valid_id(json_object *id)
{
	return json_object_is_type(id, json_type_int) ||
	       (json_object_is_type(id, json_type_string) && json_object_get_string_len(id) > 0 &&
		json_object_get_string_len(id) <= AB_REQUEST_MAX_ID_LEN);
}

static void handle_message(struct mcp *m, json_object *o)
{
	json_object *id = NULL, *method, *params = NULL, *v;
	bool has_id = json_object_object_get_ex(o, "id", &id);
	if (has_id && !valid_id(id))
		id = NULL;
	if (!json_object_object_get_ex(o, "jsonrpc", &v) ||
	    strcmp(json_object_get_string(v) ? json_object_get_string(v) : "", "2.0")) {
		rpc_error(m, id, RPC_INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"");
		return;
	}
	if (!json_object_object_get_ex(o, "method", &method)) {
		if (!json_object_object_get_ex(o, "result", &v) &&
		    !json_object_object_get_ex(o, "error", &v))
			rpc_error(m, id, RPC_INVALID_REQUEST, "a message without \"method\"");
		return; /* a response: this server asks the client nothing */
	}
	if (!json_object_is_type(method, json_type_string) ||
	    (json_object_object_get_ex(o, "params", &params) && params &&
	     !json_object_is_type(params, json_type_object))) {
		rpc_error(m, id, RPC_INVALID_REQUEST,
			  "\"method\" must be a string and \"params\" an object");
		return;
	}
	const char *name = json_object_get_string(method);
	if (!has_id) {
		if (!strcmp(name, "notifications/cancelled"))
			cancelled(m, params);
		return; /* notifications/initialized and the rest: nothing to do */
	}
	if (!id) {
		rpc_error(m, NULL, RPC_INVALID_REQUEST, "\"id\" must be a string or an integer");
		return;
	}
	handle_request(m, id, name, params);
}

static void handle_line(struct mcp *m, const char *line, size_t len)
{
	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	size_t i = 0;
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	if (i == len)
		return;
	struct json_tokener *tok = json_tokener_new_ex(64);
	if (!tok) {
		rpc_error(m, NULL, RPC_PARSE_ERROR, "out of memory");
		return;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	json_object *o = json_tokener_parse_ex(tok, line + i, (int)(len - i));
	bool whole = json_tokener_get_error(tok) == json_tokener_success &&
		     json_tokener_get_parse_end(tok) == len - i;
	json_tokener_free(tok);
	if (!o || !whole)
		rpc_error(m, NULL, RPC_PARSE_ERROR, "Parse error: not one JSON value in UTF-8");
	else if (json_object_is_type(o, json_type_array))
		rpc_error(m, NULL, RPC_INVALID_REQUEST,
			  "JSON-RPC batches are not supported (protocol %s sends one message at "
			  "a time)",
			  LATEST_VERSION);
	else if (!json_object_is_type(o, json_type_object))
		rpc_error(m, NULL, RPC_INVALID_REQUEST, "a message must be a JSON object");
	else
		handle_message(m, o);
	json_object_put(o);
}

static void take_line(void *arg, const char *p, size_t n)
{
	handle_line(arg, p, n);
}

static void too_long(void *arg, const char *p, size_t n)
{
	(void)p;
	(void)n;
	rpc_error(arg, NULL, RPC_INVALID_REQUEST,
		  "a message is longer than %u bytes; write_file carries at most %u bytes",
		  MAX_LINE, FILEOP_DATA_MAX);
}

/* Complete lines from the input buffer (one within the buffer is taken
 * whole); an overlong one is answered and skipped up to its newline. */
static void handle_input(struct mcp *m)
{
	static const struct front_in_fns fns = {.line = take_line, .too_long = too_long};
	front_in_take(m->in, &m->in_len, &m->discarding, m->stdin_eof, MAX_LINE, SIZE_MAX, &fns, m);
}

/* ---- the server ---- */

static bool stdout_nonblock(void)
{
	struct stat st;
	if (fstat(STDOUT_FILENO, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
		return false;
	int fl = fcntl(STDOUT_FILENO, F_GETFL);
	return fl >= 0 && fcntl(STDOUT_FILENO, F_SETFL, fl | O_NONBLOCK) == 0;
}

static void print_notice(const char *line)
{
	fprintf(stderr, "agentbox: %s\n", line);
}

/* What serve's hello says of limits that do not hold through a cgroup,
 * and of isolation --isolation best dropped: here, on stderr, which the
 * hosts keep in their MCP logs (the tools' results do not say it). */
static void report_limits(struct mcp *m)
{
	const struct ab_result *lim = ab_session_limits(m->s);
	json_object *l = ab_limits_json(m->cfg, lim);
	json_object_object_foreach(l, name, v)
	{
		json_object *how = json_object_object_get(v, "how");
		if (!json_object_object_get(v, "value") ||
		    !json_object_is_type(how, json_type_string) ||
		    !strcmp(json_object_get_string(how), "cgroup"))
			continue;
		const char *why = json_object_get_string(json_object_object_get(v, "why"));
		const char *h = json_object_get_string(how);
		fprintf(stderr, "agentbox: mcp: the %s limit is %s%s%s%s\n", name,
			!strcmp(h, "unavailable") ? "not applied" : "applied as ",
			!strcmp(h, "unavailable") ? "" : h, why ? ": " : "", why ? why : "");
	}
	json_object_put(l);
	json_object *iso = ab_isolation_json(lim->isolation_missing);
	if (!json_object_is_type(iso, json_type_string))
		fprintf(stderr, "agentbox: mcp: isolation (--isolation best): %s\n",
			json_object_to_json_string_ext(iso, JSON_C_TO_STRING_PLAIN));
	json_object_put(iso);
}

/* A layer call running or waiting: end of file waits for it, as a
 * commit the client sent before it closed is one it meant. */
static bool layer_pending(const struct mcp *m)
{
	for (const struct ab_front_req *r = m->f.head; r; r = r->next)
		if (r->q.kind == AB_REQUEST_LAYER)
			return true;
	return false;
}

/* ---- the codec's turns in the engine's loop (front.h) ---- */

/* stdin (not while replies pile up unread), stdout while replies wait;
 * the next progress notification. */
static int mcp_fds(void *arg, struct pollfd *p, int max, int *wait_ms)
{
	struct mcp *m = arg;
	(void)max;
	*wait_ms = progress_tick(m); /* first: what it sends is written below */
	bool busy = out_pending(&m->out) + m->out.parts_raw > OUT_HIGH_WATER;
	p[0] = (struct pollfd){.fd = busy || m->stdin_eof ? -1 : STDIN_FILENO, .events = POLLIN};
	p[1] = (struct pollfd){.fd = out_waiting(&m->out) ? STDOUT_FILENO : -1, .events = POLLOUT};
	return 2;
}

static void mcp_early(void *arg, struct pollfd *p, int n)
{
	struct mcp *m = arg;
	(void)n;
	if (p[1].revents)
		out_flush(&m->out, !m->out.nonblock);
}

static void mcp_read(void *arg, struct pollfd *p, int n)
{
	struct mcp *m = arg;
	(void)n;
	if (!p[0].revents)
		return;
	ssize_t r = read(STDIN_FILENO, m->in + m->in_len, READ_CHUNK);
	if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
		m->stdin_eof = true;
	if (r > 0)
		m->in_len += (size_t)r;
	handle_input(m);
}

static void mcp_late(void *arg, struct pollfd *p, int n)
{
	struct mcp *m = arg;
	(void)p;
	(void)n;
	if (!out_waiting(&m->out) || m->out.nonblock)
		out_flush(&m->out, false);
}

/* Until end of file (and the layer calls sent before it), a discard or a
 * client gone. */
static bool mcp_go_on(void *arg)
{
	struct mcp *m = arg;
	return !m->f.ending && (!m->stdin_eof || layer_pending(m)) && !m->out.broken;
}

static const struct ab_front_codec mcp_codec = {
	.fds = mcp_fds,
	.early = mcp_early,
	.input = mcp_read,
	.late = mcp_late,
	.go_on = mcp_go_on,
	.event = on_event,
	.layer_reply = layer_reply,
	.refused = refused,
	.backlog = backlog,
	.free_req = call_free,
};

int ab_mcp(struct ab_config *cfg)
{
	struct mcp m = {.cfg = cfg, .log_level = N_LEVELS, .audit = -1};
	if (cfg->audit_log &&
	    (m.audit = open(cfg->audit_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY,
			    0600)) < 0) {
		fprintf(stderr, "agentbox: --audit-log: cannot write '%s': %s\n", cfg->audit_log,
			strerror(errno));
		return AB_EXIT_FAILURE;
	}
	const struct ab_front_limits lim = {.max_queue = MAX_CALLS,
					    .queue_counts_running = true,
					    .max_backlog = OUT_HIGH_WATER};
	ab_front_init(&m.f, cfg, &mcp_codec, &m, &lim);
	out_init(&m.out, STDOUT_FILENO, false);
	struct ab_error err = {0};
	cfg->notice = print_notice;
	if (ab_front_open(&m.f, &err) < 0) {
		fprintf(stderr, "agentbox: %s\n", err.msg);
		return AB_EXIT_FAILURE;
	}
	m.s = m.f.s;
	report_limits(&m);
	if (m.audit >= 0) {
		json_object *o = front_audit_entry("start");
		json_object_object_add(o, "sandbox_id", json_object_new_string(ab_session_id(m.s)));
		json_object_object_add(o, "front", json_object_new_string("mcp"));
		front_audit_write(&m.audit, o);
	}
	m.out.nonblock = stdout_nonblock();
	m.in = malloc(MAX_LINE + READ_CHUNK + 1);
	if (!m.in) {
		fputs("agentbox: out of memory\n", stderr);
		ab_front_close(&m.f);
		ab_front_free(&m.f);
		return AB_EXIT_FAILURE;
	}
	int status = 0;
	if (ab_front_run(&m.f, &err) == AB_FRONT_DEAD) {
		fprintf(stderr, "agentbox: %s\n", err.msg);
		log_msg(&m, 4, "the sandbox died: %s", err.msg);
		status = AB_EXIT_FAILURE;
	}
	ab_front_drop_all(&m.f); /* the calls still there: the sandbox ends */
	ab_front_close(&m.f);
	if (m.audit >= 0) {
		front_audit_write(&m.audit, front_audit_entry("end"));
		close(m.audit);
	}
	m.out.stop_fd = m.f.sigfd;
	out_flush(&m.out, true);
	free(m.in);
	out_free(&m.out);
	ab_front_free(&m.f);
	return status;
}
