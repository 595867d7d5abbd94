/* envd's process service (E2B's spec/envd/process/process.proto) over
 * agentbox/1's exec (docs/protocol.md): Start is an exec with streamed
 * base64 output (and a pty or a streamed stdin), its events the exec's
 * output chunks and result; Connect follows a running one; SendInput and
 * CloseStdin are stdin operations (one at a time per command, queued
 * here), SendSignal a signal, Update a resize; List the ones running.
 * A pid is the server's number for a command of the sandbox (E2B_PID_BASE
 * and up), not a process id inside it. A command goes on when its callers go away, as
 * envd's do; it ends with the sandbox. */
#include "e2b/e2b_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A command's pid is this plus its number in the sandbox: far above any
 * process id inside (a `kill -0 PID` there fails, as for a command gone). */
#define E2B_PID_BASE 1000000

/* envd's keepalive while a stream is quiet, unless the SDK's
 * Keepalive-Ping-Interval header asks another (seconds). */
#define KEEPALIVE_MS 50000

struct input;

struct proc {
	struct proc *next;
	struct e2b_sbx *s;
	unsigned pid;
	char *tag;
	json_object *config;
	long h; /* the exec request */
	bool pty, stdin_open;
	struct e2b_call **subs;
	size_t n_subs;
	struct input *inputs; /* queued; the first is in flight when sent */
};

struct procs {
	struct proc *list;
	unsigned next_pid;
};

struct input {
	struct input *next;
	struct proc *p; /* NULL: the command ended */
	struct e2b_call *call;
	json_object *req; /* NULL once sent */
	long h;
};

static void procs_free(struct e2b_sbx *s);

static struct procs *table(struct e2b_sbx *s)
{
	if (!s->procs) {
		s->procs = calloc(1, sizeof(struct procs));
		s->procs_free = procs_free;
	}
	return s->procs;
}

/* ---- events ---- */

static json_object *event(const char *kind, json_object *body)
{
	json_object *e = json_object_new_object(), *o = json_object_new_object();
	json_object_object_add(e, kind, body ? body : json_object_new_object());
	json_object_object_add(o, "event", e);
	return o;
}

static json_object *start_event(unsigned pid)
{
	json_object *b = json_object_new_object();
	json_object_object_add(b, "pid", json_object_new_int64(pid));
	return event("start", b);
}

static void broadcast(struct proc *p, json_object *msg)
{
	for (size_t i = 0; i < p->n_subs; i++)
		e2b_call_send(p->subs[i], json_object_get(msg));
	json_object_put(msg);
}

/* Go's os.ProcessState.String() for a signal, as envd's status says. */
static const char *signal_words(const char *sig)
{
	static const char *const t[][2] = {
		{"SIGKILL", "killed"},
		{"SIGTERM", "terminated"},
		{"SIGINT", "interrupt"},
		{"SIGHUP", "hangup"},
		{"SIGQUIT", "quit"},
		{"SIGPIPE", "broken pipe"},
		{"SIGSEGV", "segmentation fault"},
		{"SIGABRT", "aborted"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(t[i][0], sig))
			return t[i][1];
	return sig;
}

static json_object *end_event(json_object *result)
{
	json_object *b = json_object_new_object();
	json_object *sig = json_object_object_get(result, "signal");
	const char *signame =
		json_object_is_type(sig, json_type_string) ? json_object_get_string(sig) : NULL;
	int code = json_object_get_int(json_object_object_get(result, "exit_code"));
	char status[96];
	if (signame) {
		snprintf(status, sizeof(status), "signal: %s", signal_words(signame));
		json_object_object_add(b, "exitCode", json_object_new_int(-1));
		json_object_object_add(b, "exited", json_object_new_boolean(false));
	} else {
		snprintf(status, sizeof(status), "exit status %d", code);
		json_object_object_add(b, "exitCode", json_object_new_int(code));
		json_object_object_add(b, "exited", json_object_new_boolean(true));
	}
	json_object_object_add(b, "status", json_object_new_string(status));
	return event("end", b);
}

/* ---- a command's end ---- */

static void input_next(struct proc *p);

static void proc_free(struct proc *p)
{
	struct procs *t = p->s->procs;
	for (struct proc **pp = &t->list; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	while (p->n_subs)
		e2b_call_end(p->subs[p->n_subs - 1]); /* its gone drops it */
	while (p->inputs) {
		struct input *in = p->inputs;
		p->inputs = in->next;
		in->p = NULL;
		in->next = NULL;
		if (!in->req)
			continue; /* in flight: its reply frees it */
		json_object_put(in->req);
		in->req = NULL;
		if (in->call)
			e2b_call_error(in->call, E2B_NOT_FOUND, "the process ended");
		else
			free(in);
	}
	free(p->subs);
	free(p->tag);
	json_object_put(p->config);
	free(p);
}

static void ended_with_error(struct proc *p, const char *code, const char *msg)
{
	while (p->n_subs)
		e2b_call_error(p->subs[p->n_subs - 1], code, "%s", msg);
	proc_free(p);
}

static void on_exec(void *arg, json_object *msg, bool last)
{
	struct proc *p = arg;
	const char *type = msg ? json_object_get_string(json_object_object_get(msg, "type")) : NULL;
	if (!msg)
		return ended_with_error(p, E2B_UNAVAILABLE, E2B_GONE);
	if (type && !strcmp(type, "output")) {
		const char *stream = json_object_get_string(json_object_object_get(msg, "stream"));
		json_object *d = json_object_new_object();
		json_object_object_add(d,
				       p->pty				     ? "pty"
				       : stream && !strcmp(stream, "stderr") ? "stderr"
									     : "stdout",
				       json_object_get(json_object_object_get(msg, "data")));
		broadcast(p, event("data", d));
	} else if (type && !strcmp(type, "result") &&
		   json_object_get_boolean(json_object_object_get(msg, "timed_out"))) {
		ended_with_error(p, E2B_DEADLINE_EXCEEDED, "the command's deadline passed");
	} else if (type && !strcmp(type, "result")) {
		broadcast(p, end_event(msg));
		proc_free(p);
	} else if (type && !strcmp(type, "error")) {
		const char *code = json_object_get_string(json_object_object_get(msg, "code"));
		const char *m = json_object_get_string(json_object_object_get(msg, "message"));
		bool gone = code && !strcmp(code, "shutdown");
		ended_with_error(p,
				 gone					    ? E2B_UNAVAILABLE
				 : code && !strcmp(code, "invalid_request") ? E2B_INVALID_ARGUMENT
									    : E2B_INTERNAL,
				 gone ? E2B_GONE
				 : m  ? m
				      : "the command failed");
	} else if (last) {
		proc_free(p);
	}
}

/* ---- subscribers ---- */

static void sub_gone(struct e2b_call *c, void *data)
{
	struct proc *p = data;
	for (size_t i = 0; i < p->n_subs; i++)
		if (p->subs[i] == c) {
			p->subs[i] = p->subs[--p->n_subs];
			return;
		}
}

static void keepalive(struct e2b_call *c, void *data)
{
	(void)data;
	e2b_call_send(c, event("keepalive", NULL));
}

static void subscribe(struct e2b_call *c, struct proc *p)
{
	struct e2b_call **n = realloc(p->subs, (p->n_subs + 1) * sizeof(*n));
	if (!n)
		return e2b_call_error(c, E2B_INTERNAL, "out of memory");
	p->subs = n;
	p->subs[p->n_subs++] = c;
	e2b_call_set_data(c, p, sub_gone);
	const char *ka = e2b_call_header(c, "Keepalive-Ping-Interval");
	long secs = ka ? strtol(ka, NULL, 10) : 0;
	e2b_call_set_tick(c, secs > 0 && secs <= 3600 ? (int)secs * 1000 : KEEPALIVE_MS, keepalive);
	e2b_call_send(c, start_event(p->pid));
}

/* The process a ProcessSelector names ({"pid": N} or {"tag": T}). */
static struct proc *select_proc(struct e2b_call *c, json_object *sel)
{
	struct procs *t = table(e2b_call_sbx(c));
	json_object *pid = json_object_object_get(sel, "pid");
	json_object *tag = json_object_object_get(sel, "tag");
	for (struct proc *p = t ? t->list : NULL; p; p = p->next) {
		if (pid && (unsigned)json_object_get_int64(pid) == p->pid)
			return p;
		if (tag && p->tag && !strcmp(json_object_get_string(tag), p->tag))
			return p;
	}
	if (pid)
		e2b_call_error(c, E2B_NOT_FOUND, "process with pid %u not found",
			       (unsigned)json_object_get_int64(pid));
	else if (tag)
		e2b_call_error(c, E2B_NOT_FOUND, "process with tag %s not found",
			       json_object_get_string(tag));
	else
		e2b_call_error(c, E2B_INVALID_ARGUMENT, "process: a pid or a tag");
	return NULL;
}

/* ---- Start ---- */

static bool strings(json_object *o, json_type outer)
{
	if (!o)
		return true;
	if (!json_object_is_type(o, outer))
		return false;
	if (outer == json_type_array) {
		for (size_t i = 0; i < json_object_array_length(o); i++)
			if (!json_object_is_type(json_object_array_get_idx(o, i), json_type_string))
				return false;
		return true;
	}
	json_object_object_foreach(o, k, v)
	{
		(void)k;
		if (!json_object_is_type(v, json_type_string))
			return false;
	}
	return true;
}

/* exec's fields from a StartRequest into req (0), or an error's message. */
static const char *exec_fields(struct e2b_call *c, json_object *req, json_object *sr,
			       struct proc *p)
{
	json_object *proc = json_object_object_get(sr, "process");
	json_object *cmd = json_object_object_get(proc, "cmd");
	json_object *args = json_object_object_get(proc, "args");
	json_object *envs = json_object_object_get(proc, "envs");
	json_object *cwd = json_object_object_get(proc, "cwd");
	json_object *pty = json_object_object_get(sr, "pty");
	json_object *stdin_flag = json_object_object_get(sr, "stdin");
	if (!json_object_is_type(cmd, json_type_string) || !*json_object_get_string(cmd))
		return "process.cmd: required";
	if (!strings(args, json_type_array) || !strings(envs, json_type_object) ||
	    (cwd && !json_object_is_type(cwd, json_type_string)))
		return "process: args a list of strings, envs an object of strings, cwd a string";
	json_object *argv = json_object_new_array();
	json_object_array_add(argv, json_object_get(cmd));
	for (size_t i = 0; args && i < json_object_array_length(args); i++)
		json_object_array_add(argv, json_object_get(json_object_array_get_idx(args, i)));
	json_object_object_add(req, "argv", argv);
	json_object *env = json_object_new_object();
	struct e2b_sbx *s = e2b_call_sbx(c);
	if (s->envs) {
		json_object_object_foreach(s->envs, k1, v1)
			json_object_object_add(env, k1, json_object_get(v1));
	}
	if (envs) {
		json_object_object_foreach(envs, k2, v2)
			json_object_object_add(env, k2, json_object_get(v2));
	}
	json_object_object_add(req, "env", env);
	/* /home/user is the workspace there too (e2b_sbx.c): a command
	 * starts in it by that name, so its pwd is the files API's */
	char ws[4096], dir[4096];
	if (e2b_path_in(cwd ? json_object_get_string(cwd) : E2B_HOME, ws, sizeof(ws)) < 0 ||
	    e2b_path_out(ws, dir, sizeof(dir)) < 0)
		return "process.cwd: too long";
	json_object_object_add(req, "cwd", json_object_new_string(dir));
	/* a link to /workspace in an overlay sandbox (view/overlay.c): the
	 * shell's pwd is the name it was given when PWD says it */
	if (!json_object_object_get(env, "PWD"))
		json_object_object_add(env, "PWD", json_object_new_string(dir));
	if (pty) {
		json_object *size = json_object_object_get(pty, "size");
		int64_t cols = json_object_get_int64(json_object_object_get(size, "cols"));
		int64_t rows = json_object_get_int64(json_object_object_get(size, "rows"));
		if (cols < 1 || cols > 65535 || rows < 1 || rows > 65535)
			return "pty.size: cols and rows from 1 to 65535";
		json_object *t = json_object_new_object();
		json_object_object_add(t, "rows", json_object_new_int64(rows));
		json_object_object_add(t, "cols", json_object_new_int64(cols));
		json_object_object_add(req, "pty", t);
		p->pty = p->stdin_open = true;
	} else if (!stdin_flag || json_object_get_boolean(stdin_flag)) {
		json_object *st = json_object_new_object();
		json_object_object_add(st, "stream", json_object_new_boolean(true));
		json_object_object_add(req, "stdin", st);
		p->stdin_open = true;
	}
	/* the SDK's timeoutMs is the call's deadline: the command's too */
	const char *deadline = e2b_call_header(c, "Connect-Timeout-Ms");
	long long ms = deadline ? strtoll(deadline, NULL, 10) : 0;
	if (ms > 0)
		json_object_object_add(req, "timeout", json_object_new_double((double)ms / 1000.0));
	json_object_object_add(req, "stream", json_object_new_boolean(true));
	json_object_object_add(req, "encoding", json_object_new_string("base64"));
	if (!p->pty)
		json_object_object_add(req, "keep_background", json_object_new_boolean(true));
	return NULL;
}

static void start(struct e2b_call *c)
{
	json_object *sr = e2b_call_req(c);
	struct e2b_sbx *s = e2b_call_sbx(c);
	struct procs *t = table(s);
	struct proc *p = t ? calloc(1, sizeof(*p)) : NULL;
	if (!p)
		return e2b_call_error(c, E2B_INTERNAL, "out of memory");
	p->s = s;
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("exec"));
	const char *bad = exec_fields(c, req, sr, p);
	json_object *tag = json_object_object_get(sr, "tag");
	if (!bad && tag && !json_object_is_type(tag, json_type_string))
		bad = "tag: a string";
	if (bad) {
		json_object_put(req);
		free(p);
		return e2b_call_error(c, E2B_INVALID_ARGUMENT, "%s", bad);
	}
	p->tag = tag ? strdup(json_object_get_string(tag)) : NULL;
	p->config = json_object_get(json_object_object_get(sr, "process"));
	p->pid = E2B_PID_BASE + ++t->next_pid;
	p->h = e2b_sbx_request(s, req, on_exec, p);
	if (p->h < 0) {
		p->next = NULL;
		json_object_put(p->config);
		free(p->tag);
		free(p);
		return e2b_call_error(c, E2B_UNAVAILABLE, "the sandbox's link is down");
	}
	p->next = t->list;
	t->list = p;
	subscribe(c, p);
}

static void connect_proc(struct e2b_call *c)
{
	struct proc *p = select_proc(c, json_object_object_get(e2b_call_req(c), "process"));
	if (p)
		subscribe(c, p);
}

static void list(struct e2b_call *c)
{
	struct procs *t = table(e2b_call_sbx(c));
	json_object *a = json_object_new_array();
	for (struct proc *p = t ? t->list : NULL; p; p = p->next) {
		json_object *i = json_object_new_object();
		json_object_object_add(i, "config", json_object_get(p->config));
		json_object_object_add(i, "pid", json_object_new_int64(p->pid));
		if (p->tag)
			json_object_object_add(i, "tag", json_object_new_string(p->tag));
		json_object_array_add(a, i);
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "processes", a);
	e2b_call_reply(c, o);
}

/* ---- one request answered by the sandbox's ok: signal, resize ---- */

struct oneshot {
	struct e2b_call *c;
	struct e2b_sbx *s;
	long h;
};

static void oneshot_gone(struct e2b_call *c, void *data)
{
	struct oneshot *o = data;
	(void)c;
	if (o->h > 0)
		e2b_sbx_forget(o->s, o->h); /* its reply is dropped, o freed here */
	free(o);
}

static void oneshot_done(void *arg, json_object *msg, bool last)
{
	struct oneshot *o = arg;
	if (!last)
		return;
	o->h = 0;
	const char *type = msg ? json_object_get_string(json_object_object_get(msg, "type")) : NULL;
	if (type && !strcmp(type, "ok"))
		return e2b_call_reply(o->c, NULL);
	const char *m = msg ? json_object_get_string(json_object_object_get(msg, "message")) : NULL;
	e2b_call_error(o->c, msg ? E2B_NOT_FOUND : E2B_UNAVAILABLE, "%s", m ? m : E2B_GONE);
}

static void oneshot(struct e2b_call *c, struct proc *p, json_object *req)
{
	struct oneshot *o = calloc(1, sizeof(*o));
	if (!o) {
		json_object_put(req);
		return e2b_call_error(c, E2B_INTERNAL, "out of memory");
	}
	char target[32];
	e2b_sbx_req_id(p->h, target, sizeof(target));
	json_object_object_add(req, "target", json_object_new_string(target));
	o->c = c;
	o->s = p->s;
	e2b_call_set_data(c, o, oneshot_gone);
	o->h = e2b_sbx_request(p->s, req, oneshot_done, o);
	if (o->h < 0) {
		o->h = 0;
		e2b_call_error(c, E2B_UNAVAILABLE, "the sandbox's link is down");
	}
}

static void send_signal(struct e2b_call *c)
{
	json_object *r = e2b_call_req(c);
	json_object *sig = json_object_object_get(r, "signal");
	const char *name = NULL;
	if (json_object_is_type(sig, json_type_int))
		name = json_object_get_int(sig) == 9	? "KILL"
		       : json_object_get_int(sig) == 15 ? "TERM"
							: NULL;
	else if (json_object_is_type(sig, json_type_string))
		name = !strcmp(json_object_get_string(sig), "SIGNAL_SIGKILL")	? "KILL"
		       : !strcmp(json_object_get_string(sig), "SIGNAL_SIGTERM") ? "TERM"
										: NULL;
	if (!name)
		return e2b_call_error(c, E2B_INVALID_ARGUMENT,
				      "signal: SIGNAL_SIGKILL or SIGNAL_SIGTERM");
	struct proc *p = select_proc(c, json_object_object_get(r, "process"));
	if (!p)
		return;
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("signal"));
	json_object_object_add(req, "signal", json_object_new_string(name));
	oneshot(c, p, req);
}

static void update(struct e2b_call *c)
{
	json_object *r = e2b_call_req(c);
	struct proc *p = select_proc(c, json_object_object_get(r, "process"));
	if (!p)
		return;
	json_object *size = json_object_object_get(json_object_object_get(r, "pty"), "size");
	if (!size)
		return e2b_call_reply(c, NULL); /* nothing to change */
	if (!p->pty)
		return e2b_call_error(c, E2B_FAILED_PRECONDITION, "the process has no pty");
	int64_t cols = json_object_get_int64(json_object_object_get(size, "cols"));
	int64_t rows = json_object_get_int64(json_object_object_get(size, "rows"));
	if (cols < 1 || cols > 65535 || rows < 1 || rows > 65535)
		return e2b_call_error(c, E2B_INVALID_ARGUMENT,
				      "pty.size: cols and rows from 1 to 65535");
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("resize"));
	json_object_object_add(req, "rows", json_object_new_int64(rows));
	json_object_object_add(req, "cols", json_object_new_int64(cols));
	oneshot(c, p, req);
}

/* ---- input: one stdin operation at a time per command ---- */

static void input_gone(struct e2b_call *c, void *data)
{
	struct input *in = data;
	(void)c;
	in->call = NULL;
	if (!in->p && !in->req && !in->h)
		free(in); /* neither queued nor in flight */
}

static void input_done(void *arg, json_object *msg, bool last)
{
	struct input *in = arg;
	if (!last)
		return;
	in->h = 0;
	struct proc *p = in->p;
	if (p && p->inputs == in)
		p->inputs = in->next;
	const char *type = msg ? json_object_get_string(json_object_object_get(msg, "type")) : NULL;
	const char *m = msg ? json_object_get_string(json_object_object_get(msg, "message")) : NULL;
	in->p = NULL;
	if (!in->call) {
		free(in);
	} else if (type && !strcmp(type, "ok")) {
		e2b_call_reply(in->call, NULL); /* input_gone frees it */
	} else {
		e2b_call_error(in->call, msg ? E2B_FAILED_PRECONDITION : E2B_UNAVAILABLE, "%s",
			       m ? m : E2B_GONE);
	}
	if (p)
		input_next(p);
}

static void input_next(struct proc *p)
{
	struct input *in = p->inputs;
	if (!in || !in->req)
		return;
	json_object *req = in->req;
	in->req = NULL;
	in->h = e2b_sbx_request(p->s, req, input_done, in);
	if (in->h < 0) {
		in->h = 0;
		input_done(in, NULL, true);
	}
}

static void queue_input(struct e2b_call *c, struct proc *p, const char *b64, bool eof)
{
	if (!p->stdin_open)
		return e2b_call_error(c, E2B_FAILED_PRECONDITION,
				      "the process's stdin is not open (start it with stdin)");
	struct input *in = calloc(1, sizeof(*in));
	if (!in)
		return e2b_call_error(c, E2B_INTERNAL, "out of memory");
	in->p = p;
	in->call = c;
	in->req = json_object_new_object();
	json_object_object_add(in->req, "op", json_object_new_string("stdin"));
	char target[32];
	e2b_sbx_req_id(p->h, target, sizeof(target));
	json_object_object_add(in->req, "target", json_object_new_string(target));
	if (b64) {
		json_object_object_add(in->req, "data", json_object_new_string(b64));
		json_object_object_add(in->req, "encoding", json_object_new_string("base64"));
	}
	if (eof) {
		json_object_object_add(in->req, "eof", json_object_new_boolean(true));
		if (!p->pty)
			p->stdin_open = false;
	}
	e2b_call_set_data(c, in, input_gone);
	struct input **tail = &p->inputs;
	while (*tail)
		tail = &(*tail)->next;
	*tail = in;
	if (p->inputs == in)
		input_next(p);
}

static void send_input(struct e2b_call *c)
{
	json_object *r = e2b_call_req(c);
	json_object *input = json_object_object_get(r, "input");
	json_object *data = json_object_object_get(input, "stdin");
	if (!data)
		data = json_object_object_get(input, "pty");
	if (!json_object_is_type(data, json_type_string))
		return e2b_call_error(c, E2B_INVALID_ARGUMENT, "input: stdin or pty, base64 bytes");
	struct proc *p = select_proc(c, json_object_object_get(r, "process"));
	if (!p)
		return;
	if (!*json_object_get_string(data))
		return e2b_call_reply(c, NULL);
	queue_input(c, p, json_object_get_string(data), false);
}

static void close_stdin(struct e2b_call *c)
{
	struct proc *p = select_proc(c, json_object_object_get(e2b_call_req(c), "process"));
	if (!p)
		return;
	if (p->pty)
		return e2b_call_error(c, E2B_FAILED_PRECONDITION,
				      "a pty's stdin is not closed: send Ctrl-D (0x04)");
	queue_input(c, p, NULL, true);
}

static void stream_input(struct e2b_call *c)
{
	e2b_call_error(c, E2B_UNIMPLEMENTED,
		       "StreamInput (a client stream) is not served over HTTP/1.1: use SendInput");
}

const struct e2b_method e2b_process_methods[] = {
	{"process.Process", "Start", E2B_STREAM, start},
	{"process.Process", "Connect", E2B_STREAM, connect_proc},
	{"process.Process", "List", E2B_UNARY, list},
	{"process.Process", "SendInput", E2B_UNARY, send_input},
	{"process.Process", "StreamInput", E2B_UNARY, stream_input},
	{"process.Process", "SendSignal", E2B_UNARY, send_signal},
	{"process.Process", "CloseStdin", E2B_UNARY, close_stdin},
	{"process.Process", "Update", E2B_UNARY, update},
	{NULL, NULL, E2B_UNARY, NULL},
};

/* The sandbox is gone: its commands with it (their callers were told). */
static void procs_free(struct e2b_sbx *s)
{
	struct procs *t = s->procs;
	if (!t)
		return;
	while (t->list)
		ended_with_error(t->list, E2B_UNAVAILABLE, E2B_GONE);
	free(t);
	s->procs = NULL;
}
