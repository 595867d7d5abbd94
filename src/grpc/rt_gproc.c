/* The processes of agentbox runtime's gRPC server (rt_grpc.h): the
 * service's five methods on the runtime's session, as sandboxd's
 * packages/sandboxd/pkg/server/process.go does them with os/exec: Start
 * and Execute run a command (Start gives it an id, streams its output and
 * its exit), WriteStdin, SendSignal and ResizeTTY act on a Start's process
 * by that id while it runs. */
#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grpc/rt_gproc.h"
#include "grpc/rt_grpc.h"
#include "lex/rtpath.h"
#include "util/error.h"

/* ---- processes ---- */

/* A Start's process by its id, started by this connection: another's is
 * not there. */
static struct gproc *proc_by_id(struct rt_grpc *g, struct gcall *call, int32_t id)
{
	json_object *key = json_object_new_int(id);
	struct ab_front_req *fr = id && key ? ab_front_find(&g->rt->f, key) : NULL;
	json_object_put(key);
	struct gproc *p = rt_gproc_of(g, fr);
	return p && p->conn_id == call->c->id ? p : NULL;
}

/* The next waiting WriteStdin of p, started (the ones that cannot be are
 * answered). */
static void stdin_next(struct rt_grpc *g, struct gproc *p)
{
	while (!p->wbusy && p->whead) {
		struct gcall *call = p->whead;
		p->whead = call->wnext;
		if (!p->whead)
			p->wtail = NULL;
		call->wnext = NULL;
		struct ab_error e = {0};
		struct ab_request in = {.kind = AB_REQUEST_STDIN,
					.data = (const char *)call->q.input,
					.data_len = call->q.input_len,
					.eof = call->q.eof};
		int rc = ab_front_input(&g->rt->f, &p->fr, &in, &e);
		if (rc == 0) { /* written as the command reads: AB_EVENT_STDIN */
			p->wbusy = true;
			p->wcur = call;
			continue;
		}
		call->proc = NULL;
		if (rc > 0 || (rc == -EPIPE && call->q.eof)) /* written now; or closed */
			grpc_finish_ok(call);
		else if (rc == -EPIPE)
			grpc_finish(call, G_FAILED_PRECONDITION, "process %d: its stdin is closed",
				    p->id);
		else if (rc == -ESRCH)
			grpc_finish(call, G_NOT_FOUND, "process %d not found", p->id);
		else
			grpc_finish(call, G_INTERNAL, "process %d: %s", p->id, e.msg);
	}
}

/* Start or Execute: argv in the sandbox, as the call asks. */
static void start_proc(struct rt_grpc *g, struct gcall *call)
{
	struct rt *rt = g->rt;
	struct pb_req *q = &call->q;
	bool start = call->method == PB_START;
	if (!q->argc) {
		grpc_finish(call, G_INVALID_ARGUMENT, "command is required");
		return;
	}
	char rel[4096], view[4200] = BASE;
	if (q->cwd && *q->cwd) { /* as sandboxd's SanitizePath: under the root */
		int rc = ab_rtpath_within(BASE, q->cwd, AB_RTPATH_BASE_ABS, rel, sizeof(rel));
		if (rc == -EACCES) {
			grpc_finish(
				call, G_PERMISSION_DENIED,
				"cwd: access denied: path \"%.300s\": path escapes sandbox root",
				q->cwd);
			return;
		}
		if (rc < 0) {
			grpc_finish(call, G_INVALID_ARGUMENT, "cwd: %s", strerror(-rc));
			return;
		}
		snprintf(view, sizeof(view), "%s%s%s", BASE, rel[0] ? "/" : "", rel);
	}
	if (q->pty && (q->rows > 65535 || q->cols > 65535)) {
		grpc_finish(call, G_INVALID_ARGUMENT, "pty: rows and cols must be at most 65535");
		return;
	}
	struct gproc *p = calloc(1, sizeof(*p));
	if (!p) {
		grpc_finish(call, G_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	p->proto = &rt_grpc_proto;
	p->fr.no_wait = true; /* started now or refused: RESOURCE_EXHAUSTED */
	p->fr.tag = ab_front_tag(&rt->f);
	int32_t id = 0;
	if (start)
		id = g->next_id == INT32_MAX ? 1 : g->next_id + 1;
	struct ab_request_exec_args a = {
		.argv = (const char *const *)q->argv,
		.cwd = view,
		.env = (const char *const *)q->env,
		.timeout_s = START_TIMEOUT_S,
		.max_output = start ? 65536 : EXEC_OUT_MAX,
		.stream = start,
		.stdin_stream = start && !q->pty,
		.pty_rows = q->pty ? (q->rows ? q->rows : 24) : 0,
		.pty_cols = q->pty ? (q->cols ? q->cols : 80) : 0,
	};
	json_object *tag = json_object_new_int64((int64_t)p->fr.tag);
	struct ab_error e = {0};
	int rc = ab_request_exec(&p->fr.q, tag, &a, &e);
	json_object_put(tag);
	if (rc < 0) { /* what no command can be: an empty argv[0], a cwd too long */
		ab_request_clear(&p->fr.q);
		free(p);
		grpc_finish(call, G_INVALID_ARGUMENT, "failed to start command: %s", e.msg);
		return;
	}
	p->fr.key = start ? json_object_new_int(id) : NULL;
	p->pty = q->pty;
	p->conn_id = call->c->id;
	p->call = call;
	call->proc = p;
	g->n_procs++;
	ab_front_submit(&rt->f, &p->fr);
	if (!call->proc) /* refused (rt_grpc_refused): answered, p freed */
		return;
	if (start) {
		g->next_id = id;
		p->id = id;
		uint8_t m[16];
		size_t n = pb_start_init(m, sizeof(m), p->id);
		grpc_answer(call, n, grpc_enc_copy, &(struct blob){m, n});
	}
}

/* WriteStdin, SendSignal, ResizeTTY: on a process of Start by its id. */
static void on_proc(struct rt_grpc *g, struct gcall *call)
{
	struct pb_req *q = &call->q;
	struct gproc *p = proc_by_id(g, call, q->process_id);
	if (!p) {
		grpc_finish(call, G_NOT_FOUND, "process %d not found", q->process_id);
		return;
	}
	struct ab_error e = {0};
	int rc = 0;
	if (call->method == PB_WRITE_STDIN) {
		if (!q->eof && !q->input_len) {
			grpc_finish_ok(call);
			return;
		}
		call->proc = p;
		if (p->wtail)
			p->wtail->wnext = call;
		else
			p->whead = call;
		p->wtail = call;
		stdin_next(g, p);
		return;
	}
	if (call->method == PB_SEND_SIGNAL) {
		int sig = q->signal;
		if (sig != SIGINT && sig != SIGTERM && sig != SIGKILL) {
			grpc_finish(call, G_INVALID_ARGUMENT,
				    "unsupported or unspecified signal: %d", sig);
			return;
		}
		struct ab_request in = {.kind = AB_REQUEST_SIGNAL, .signo = sig};
		rc = ab_front_input(&g->rt->f, &p->fr, &in, &e);
		if (rc == -ESRCH) /* it has ended: its exit is on its way */
			rc = 0;
	} else if (!p->pty) {
		grpc_finish(call, G_FAILED_PRECONDITION,
			    "failed to resize TTY: process %d has no PTY", p->id);
		return;
	} else if (!q->rows || !q->cols || q->rows > 65535 || q->cols > 65535) {
		grpc_finish(call, G_INVALID_ARGUMENT, "rows and cols must be from 1 to 65535");
		return;
	} else {
		struct ab_request in = {
			.kind = AB_REQUEST_RESIZE, .rows = q->rows, .cols = q->cols};
		rc = ab_front_input(&g->rt->f, &p->fr, &in, &e);
		if (rc == -ESRCH)
			rc = 0;
	}
	if (rc < 0)
		grpc_finish(call, G_FAILED_PRECONDITION, "process %d: %s", p->id,
			    e.msg[0] ? e.msg : strerror(-rc));
	else
		grpc_finish_ok(call);
}

/* A call whose request is in: its one message decoded, then its method. */
static void grpc_dispatch(struct rt_grpc *g, struct gcall *call)
{
	if (!call->post || call->method < 0) {
		grpc_finish(call, G_UNIMPLEMENTED,
			    "unknown method: agentbox runtime serves "
			    "process.v1.ProcessService and watcher.v1.FileWatcherService");
		return;
	}
	if (call->bad_ctype) {
		grpc_finish(call, G_INVALID_ARGUMENT, "content-type must be application/grpc");
		return;
	}
	if (call->too_large) {
		grpc_finish(call, G_RESOURCE_EXHAUSTED,
			    "the request is larger than %u bytes (the message size limit) or the "
			    "server holds too many requests",
			    MSG_MAX);
		return;
	}
	size_t n = call->in_len >= 5 ? (size_t)call->in[1] << 24 | (size_t)call->in[2] << 16 |
					       (size_t)call->in[3] << 8 | call->in[4]
				     : 0;
	if (call->in_len < 5 || call->in_len != 5 + n) {
		grpc_finish(call, G_INVALID_ARGUMENT, "the request is not one gRPC message");
		return;
	}
	if (call->in[0]) {
		grpc_finish(
			call, G_UNIMPLEMENTED,
			"compressed messages are not supported (grpc-accept-encoding: identity)");
		return;
	}
	const char *why;
	int rc = pb_decode((enum pb_method)call->method, call->in + 5, n, &call->q, &why);
	if (rc < 0) {
		grpc_finish(call, rc == -E2BIG ? G_RESOURCE_EXHAUSTED : G_INVALID_ARGUMENT,
			    "%s: %s", pb_method_names[call->method], why);
		return;
	}
	if (g->rt->f.gone || g->stopping) {
		grpc_finish(call, G_UNAVAILABLE, "%s",
			    g->rt->f.gone ? g->rt->f.gone_why : "The server is stopping");
		return;
	}
	if (call->method == PB_WATCH_DIR)
		gwatch_start(g, call);
	else if (call->method == PB_START || call->method == PB_EXECUTE)
		start_proc(g, call);
	else
		on_proc(g, call);
}

/* ---- the session's events ---- */

static size_t enc_output(uint8_t *out, size_t outsz, const void *arg)
{
	const struct ab_event *ev = arg;
	return pb_start_output(out, outsz, ev->stream, ev->data, ev->len);
}

/* A process's exit code as sandboxd v1.0.7 (#1897) reports it: killed by
 * signal n, 128+n (137 for SIGKILL), where earlier versions said -1. */
static int exit_code_of(const struct ab_result *r)
{
	return r->signal ? 128 + r->signal : r->exit_code;
}

static size_t enc_exec(uint8_t *out, size_t outsz, const void *arg)
{
	const struct ab_result *r = arg;
	return pb_execute_response(out, outsz, exit_code_of(r), r->out.data, r->out.len,
				   r->err.data, r->err.len);
}

/* The shim's line for a command it could not run (rt_cannot_run_line), if
 * the command could not be run; its length in *n. */
static const char *cannot_run(const struct ab_result *r, int *n)
{
	size_t len = 0;
	const char *at = r->exit_code == AB_EXIT_NOT_FOUND ? rt_cannot_run_line(r, &len) : NULL;
	*n = (int)len;
	return at;
}

static void proc_ended(struct rt_grpc *g, struct gproc *p, const struct ab_event *ev)
{
	struct gcall *call = p->call;
	const struct ab_result *r = ev->result;
	const char *line;
	int len = 0;
	if (!call)
		return;
	call->proc = NULL;
	if (ev->error) {
		grpc_finish(call, g->rt->f.gone ? G_UNAVAILABLE : grpc_code_of(ev->error), "%s",
			    ev->error->msg);
	} else if (p->id) { /* Start: its exit */
		uint8_t m[24];
		size_t n = pb_start_exit(m, sizeof(m), exit_code_of(r));
		if (grpc_answer(call, n, grpc_enc_copy, &(struct blob){m, n}))
			grpc_finish(call, G_OK, NULL);
		else
			grpc_finish(call, G_INTERNAL, "out of memory");
	} else if ((line = cannot_run(r, &len)) != NULL) {
		grpc_finish(call, G_NOT_FOUND,
			    "failed to execute command: command or path not found: %.*s", len,
			    line);
	} else if (grpc_answer(call, pb_size_bytes(r->out.len) + pb_size_bytes(r->err.len) + 11,
			       enc_exec, r)) {
		grpc_finish(call, G_OK, NULL);
	} else {
		grpc_finish(call, G_RESOURCE_EXHAUSTED, "out of memory for the output");
	}
}

static void proc_event(void *arg, struct ab_front_req *fr, const struct ab_event *ev)
{
	struct rt *rt = arg;
	struct rt_grpc *g = rt->grpc;
	struct gproc *p = (struct gproc *)fr;
	if (p->watch) { /* its events come to proc_watch; here its end */
		if (ev->kind == AB_EVENT_RESULT)
			gwatch_ended(g, p, ev);
		return;
	}
	if (ev->kind == AB_EVENT_OUTPUT) {
		if (p->call && p->id &&
		    !grpc_answer(p->call, pb_size_bytes(ev->len), enc_output, ev))
			grpc_finish(p->call, G_RESOURCE_EXHAUSTED, "out of memory for the output");
		return;
	}
	if (ev->kind == AB_EVENT_STDIN) {
		struct gcall *call = p->wcur;
		p->wbusy = false;
		p->wcur = NULL;
		if (call) {
			call->proc = NULL;
			if (ev->error)
				grpc_finish(call, G_FAILED_PRECONDITION, "process %d: %s", p->id,
					    ev->error->msg);
			else
				grpc_finish_ok(call);
		}
		stdin_next(g, p);
		return;
	}
	if (ev->kind != AB_EVENT_RESULT)
		return;
	proc_ended(g, p, ev);
	if (p->wcur) {
		p->wcur->proc = NULL;
		grpc_finish(p->wcur, G_NOT_FOUND, "process %d has exited", p->id);
	}
	for (struct gcall *w = p->whead, *nx; w; w = nx) {
		nx = w->wnext;
		w->wnext = NULL;
		w->proc = NULL;
		grpc_finish(w, G_NOT_FOUND, "process %d has exited", p->id);
	}
	p->wcur = p->whead = p->wtail = NULL; /* freed as it leaves the engine */
}

static void proc_refused(void *arg, struct ab_front_req *fr, enum ab_front_why why,
			 const struct ab_error *e)
{
	struct rt *rt = arg;
	struct gproc *p = (struct gproc *)fr;
	struct gcall *call = p->call;
	if (!call)
		return;
	p->call = NULL;
	call->proc = NULL;
	if (why == AB_FRONT_ENDED)
		grpc_finish(call, G_UNAVAILABLE, "The server is stopping");
	else if (e && e->kind == AB_ERRC_BUSY)
		grpc_finish(call, G_RESOURCE_EXHAUSTED,
			    "%u processes are running, as many as agentbox runtime's "
			    "--max-concurrent allows",
			    rt->cfg->max_concurrent);
	else if (e)
		grpc_finish(call, grpc_code_of(e), "failed to start command: %s", e->msg);
	else
		grpc_finish(call, G_CANCELLED, "cancelled");
}

static void proc_left(void *arg, struct ab_front_req *fr)
{
	struct rt *rt = arg;
	struct gproc *p = (struct gproc *)fr;
	for (struct gcall *w = p->whead; w; w = w->wnext)
		w->proc = NULL;
	if (p->wcur)
		p->wcur->proc = NULL;
	if (p->call)
		p->call->proc = NULL;
	if (rt->grpc)
		rt->grpc->n_procs--;
	gwatch_free(p);
	json_object_put(p->fr.key);
	ab_request_clear(&p->fr.q); /* its argv, env and cwd */
	free(p);
}

static void proc_watch(void *arg, struct ab_front_req *fr, const struct ab_watch_event *ev)
{
	struct rt *rt = arg;
	if (rt->grpc)
		gwatch_event(rt->grpc, (struct gproc *)fr, ev);
}

static const struct rt_grpc_service service = {grpc_dispatch, &rt_grpc_proto};

/* ---- the runtime's protocol ---- */

static int proto_open(struct rt *rt, struct ab_error *err)
{
	return rt->o->grpc_port ? rt_grpc_open(rt, &service, err) : 0;
}

static void proto_ready(struct rt *rt)
{
	const char *l = rt->o->listen;
	if (rt->grpc)
		fprintf(stderr,
			"agentbox: runtime: gRPC process.v1.ProcessService on %s%s%s:%u (h2c)\n",
			strchr(l, ':') ? "[" : "", l, strchr(l, ':') ? "]" : "", rt->o->grpc_port);
}

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

static int proto_fds(struct rt *rt, struct pollfd *p, int max, int *wait_ms)
{
	if (rt->grpc) /* a watch's events held: the poll ends when they are due */
		gwatch_flush(rt->grpc, now_ms(), wait_ms);
	return (int)rt_grpc_pollfds(rt, p, (size_t)max);
}

static void proto_run(struct rt *rt, const struct pollfd *p, int n)
{
	int unused = -1;
	if (rt->grpc)
		gwatch_flush(rt->grpc, now_ms(), &unused);
	rt_grpc_run(rt, p, (size_t)n);
}

const struct rt_proto rt_grpc_proto = {
	.max_fds = 1 + GRPC_CONN_LIMIT, /* the listener, the connections */
	.open = proto_open,
	.ready = proto_ready,
	.fds = proto_fds,
	.run = proto_run,
	.quiesce = rt_grpc_quiesce,
	.busy = rt_grpc_busy,
	.close = rt_grpc_close,
	.event = proc_event,
	.refused = proc_refused,
	.left = proc_left,
	.watch = proc_watch,
};
