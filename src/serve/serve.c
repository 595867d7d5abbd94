/* agentbox serve: the session protocol agentbox/1 (docs/protocol.md), JSON
 * lines on stdin and stdout or a detached sandbox's socket (serve_conn.c),
 * as a codec over the request engine (front/front.h): this file maps
 * lines to requests and the engine's events back to lines; the engine
 * queues, starts, cancels and ends them. Every line is checked before
 * anything runs; a bad one gets an error reply and the session goes on.
 * Replies are queued and written without blocking when stdout is a pipe,
 * so a slow client never stops timeouts from firing; the queue is
 * bounded: streamed output waits in the command's pipe (backpressure,
 * ab_session_pause_output) and a result's output is escaped from the
 * captured bytes as the client reads it. */
#include "serve/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentbox/agentbox.h"
#include "files/fileop.h"
#include "files/fileop_host.h"
#include "front/front.h"
#include "front/front_audit.h"
#include "front/front_in.h"
#include "front/front_out.h"
#include "front/netop.h"
#include "front/request.h"
#include "serve/serve_input.h"
#include "serve/serve_int.h"
#include "session/result.h"
#include "session/session_port.h"
#include "layer/layer.h"
#include "util/error.h"
#include "util/jsonw.h"
#include "util/output.h"
#include "util/util.h"

#define READ_CHUNK (256u << 10)
/* Replies piling up unread beyond this (front_out.h): stdin waits. */
#define OUT_HIGH_WATER (1u << 20)
/* The pipe to the client this big (the kernel's default is 64 KiB), where
 * the user's pipe budget allows: fewer, bigger writes and reads. Not more:
 * the pages count against the user's pipe-user-pages-soft (64 MiB by
 * default), past which every new pipe of the user gets two pages. */
#define STDOUT_PIPE_SIZE (256u << 10)
/* Results whose output waits to be written, at most: then queued
 * commands wait to start. */
#define MAX_DEFERRED 16

/* ---- output ---- */

/* Backpressure: streamed output is read only while the client keeps up. */
static void out_backpressure(struct server *sv)
{
	if (no_client(sv)) { /* output events are not kept: nothing waits */
		if (sv->paused)
			ab_session_pause_output(sv->s, sv->paused = false);
		return;
	}
	if (!sv->paused && out_full(&sv->out))
		ab_session_pause_output(sv->s, sv->paused = true);
	else if (sv->paused && out_drained(&sv->out))
		ab_session_pause_output(sv->s, sv->paused = false);
}

static void send_json(struct server *sv, json_object *o)
{
	out_json(sv->to ? sv->to : &sv->out, o, NULL);
}

static json_object *id_copy(json_object *id)
{
	return id ? json_object_get(id) : NULL;
}

static void send_error(struct server *sv, json_object *id, enum ab_errc code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* An error reply for the request id (NULL: none): err's protocol code
 * (ab_error_errc) and message. */
static json_object *error_reply(json_object *id, const struct ab_error *err)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("error"));
	json_object_object_add(o, "id", id_copy(id));
	json_object_object_add(o, "code", json_object_new_string(ab_errc_name(ab_error_errc(err))));
	json_object_object_add(o, "message", json_object_new_string(err->msg));
	return o;
}

static void send_error(struct server *sv, json_object *id, enum ab_errc code, const char *fmt, ...)
{
	struct ab_error err = {.kind = code};
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err.msg, sizeof(err.msg), fmt, ap);
	va_end(ap);
	send_json(sv, error_reply(id, &err));
	front_audit_error(&sv->audit, id, ab_errc_name(code));
}

/* ---- requests ---- */

static void request_free(void *arg, struct ab_front_req *fr)
{
	struct request *r = (struct request *)fr;
	if (!serve_replay_hold(arg, r)) /* else freed once its client read all */
		serve_request_destroy(arg, r);
}

/* q (taken) into the engine as a request of the client attached. */
static void submit(struct server *sv, struct ab_request *q)
{
	struct request *r = calloc(1, sizeof(*r));
	if (!r) {
		send_error(sv, q->id, AB_ERRC_INTERNAL, "out of memory");
		return;
	}
	r->fr.q = *q; /* the request is r's now */
	*q = (struct ab_request){0};
	r->fr.key = r->fr.q.id;
	r->gen = sv->client_gen;
	ab_front_submit(&sv->f, &r->fr);
}

/* exec and the file operations: queued, then run as slots free up. A
 * duplicate id or a full queue is said before what is wrong with a field
 * (bad: NULL when there is nothing wrong). */
static void op_exec(struct server *sv, struct ab_request *q, const struct ab_error *bad)
{
	int rc = ab_front_admit(&sv->f, q->id);
	if (rc == -EEXIST)
		send_error(sv, q->id, AB_ERRC_DUPLICATE_ID,
			   "a request with this id is running or queued");
	else if (rc == -ENOSPC)
		send_error(sv, q->id, AB_ERRC_BUSY, "%d requests are queued already", MAX_QUEUE);
	else if (bad)
		send_error(sv, q->id, bad->kind, "%s", bad->msg);
	else
		submit(sv, q);
}

static void op_cancel(struct server *sv, const struct ab_request *q)
{
	struct ab_front_req *r = ab_front_find(&sv->f, q->target);
	if (!r) {
		send_error(sv, q->id, AB_ERRC_INVALID_REQUEST,
			   "cancel: no command with this target id is running or queued");
		return;
	}
	json_object *ok = json_object_new_object();
	json_object_object_add(ok, "type", json_object_new_string("ok"));
	json_object_object_add(ok, "id", id_copy(q->id));
	json_object_object_add(ok, "op", json_object_new_string("cancel"));
	send_json(sv, ok);
	ab_front_cancel(&sv->f, r); /* refused (below) when it had not started */
}

/* stdin, resize, signal to a running command (serve_input.c) */
static void op_input(struct server *sv, const struct ab_request *q)
{
	struct request *r = (struct request *)ab_front_find(&sv->f, q->target);
	struct ab_error e = {0};
	int rc = serve_input(&sv->f, r ? &r->fr : NULL, q, &e);
	if (rc == 0)
		r->stdin_id = json_object_get(q->id); /* answered at AB_EVENT_STDIN */
	else
		send_json(sv, rc < 0 ? error_reply(q->id, &e) : serve_input_ok(q->id, q->op));
}

/* A layer op's reply (the engine's watchdog, front_layer.h), result or
 * error; the lines that waited for it are read next (serve_late). */
static void layer_reply(void *arg, struct ab_front_req *r, json_object *o)
{
	(void)r;
	struct server *sv = arg;
	json_object *t, *c;
	if (json_object_object_get_ex(o, "type", &t) &&
	    !strcmp(json_object_get_string(t), "error") && json_object_object_get_ex(o, "code", &c))
		front_audit_error(&sv->audit, json_object_object_get(o, "id"),
				  json_object_get_string(c));
	send_json(sv, o);
	sv->layer_answered = true;
}

/* ping, stats, net, port: answered at once */
static void op_now(struct server *sv, const struct ab_request *q)
{
	if (q->kind == AB_REQUEST_STATS) {
		send_json(sv, serve_stats_json(sv, q->id));
	} else if (q->kind == AB_REQUEST_PING) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "type", json_object_new_string("pong"));
		json_object_object_add(o, "id", id_copy(q->id));
		send_json(sv, o);
	} else { /* --net allow=: front/netop.c; port: session/session_port.h */
		struct ab_error ne = {0};
		json_object *o = q->kind == AB_REQUEST_PORT ? ab_session_port(sv->s, q->req, &ne)
							    : ab_net_op(sv->s, q->req, &ne);
		if (o)
			json_object_object_add(o, "id", id_copy(q->id));
		if (o)
			send_json(sv, o);
		else
			send_error(sv, q->id, AB_ERRC_INVALID_REQUEST, "%s", ne.msg);
	}
}

static void handle_line(struct server *sv, const char *line, size_t len)
{
	struct ab_request q;
	struct ab_error e = {0};
	int rc = ab_request_parse_host(line, len, &q, &e);
	if (rc == 1)
		return; /* blank */
	if (!q.op) {
		send_error(sv, q.id, e.kind, "%s", e.msg);
		ab_request_clear(&q);
		return;
	}
	front_audit_request(&sv->audit, q.req, q.op);
	if (sv->f.ending) {
		send_error(sv, q.id, AB_ERRC_SHUTDOWN, "the session is shutting down");
	} else if (q.kind == AB_REQUEST_EXEC || q.kind == AB_REQUEST_FILE_OP) {
		op_exec(sv, &q, rc < 0 ? &e : NULL);
	} else if (rc < 0) {
		send_error(sv, q.id, e.kind, "%s", e.msg);
	} else if (q.kind == AB_REQUEST_CANCEL) {
		op_cancel(sv, &q);
	} else if (q.kind == AB_REQUEST_OUTPUT) {
		json_object *o = serve_output_op(sv, &q, &e);
		if (o)
			send_json(sv, o);
		else
			send_error(sv, q.id, e.kind, "%s", e.msg);
	} else if (serve_input_kind(q.kind)) {
		op_input(sv, &q);
	} else if (q.kind == AB_REQUEST_SHUTDOWN) {
		sv->f.ending = true;
		sv->shutdown_id = json_object_get(q.id);
	} else if (q.kind == AB_REQUEST_LAYER) { /* under the engine's watchdog */
		submit(sv, &q);
	} else {
		op_now(sv, &q);
	}
	ab_request_clear(&q);
}

/* A line over MAX_LINE, of which n bytes are at p: answered with the id
 * its start names, when it names one (clients write op and id first). */
static void too_large(void *arg, const char *p, size_t n)
{
	struct server *sv = arg;
	json_object *id = ab_request_scan_id(p, n);
	send_error(sv, id, AB_ERRC_TOO_LARGE,
		   "a request line is longer than %u bytes; files move in chunks of at most "
		   "%u bytes (upload and download with 'offset')",
		   MAX_LINE, FILEOP_CHUNK_MAX);
	json_object_put(id);
}

static void take_line(void *arg, const char *p, size_t n)
{
	handle_line(arg, p, n);
}

static bool layer_busy(void *arg)
{
	return ab_front_layer_busy(&((struct server *)arg)->f);
}

/* Complete lines from the input buffer; an overlong one is answered and
 * skipped up to its newline. The lines after a changes or commit wait
 * for it. */
static void handle_input(struct server *sv)
{
	static const struct front_in_fns fns = {
		.line = take_line, .too_long = too_large, .hold = layer_busy};
	front_in_take(sv->in, &sv->in_len, &sv->discarding, sv->stdin_eof, MAX_LINE, MAX_LINE, &fns,
		      sv);
}

/* ---- events from the session ---- */

static size_t utf8_complete_len(const char *p, size_t n)
{
	/* the length of p without an incomplete sequence at its end */
	size_t i = n, back = 0;
	while (i > 0 && back < 4 && ((unsigned char)p[i - 1] & 0xC0) == 0x80) {
		i--;
		back++;
	}
	if (i == 0)
		return n;
	unsigned char c = (unsigned char)p[i - 1];
	size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
	if (c >= 0xC0 && back + 1 < need && c < 0xF8)
		return i - 1;
	return n;
}

/* An output event of r: data the content of a then b (see out_event). */
static void output_line(struct server *sv, struct request *r, int k, const char *a, size_t alen,
			const char *b, size_t blen)
{
	if (serve_output_event(sv, r, k, a, alen, b, blen))
		out_backpressure(sv);
}

/* Text is sent in whole characters: an incomplete sequence at the end of
 * a chunk is held back (r->hold) and completed by the next one. */
static void on_output(struct server *sv, struct request *r, const struct ab_event *ev)
{
	int k = ev->stream == 2 ? 1 : 0;
	if (r->fr.q.base64) {
		output_line(sv, r, k, ev->data, ev->len, NULL, 0);
		return;
	}
	/* the held bytes and the first of the new ones, up to the end of the
	 * sequence the held ones start */
	const char *data = ev->data;
	size_t len = ev->len, h = r->hold_len[k], t = len < 4 ? len : 4, i = 0;
	char head[8];
	memcpy(head, r->hold[k], h);
	memcpy(head + h, data, t);
	r->hold_len[k] = 0;
	while (i < h) {
		size_t n = utf8_seq_len((const unsigned char *)head + i, h + t - i);
		if (!n && t == len && utf8_complete_len(head + i, h + t - i) == 0) {
			/* still cut short: all of it waits for more */
			r->hold_len[k] = h + t - i;
			memcpy(r->hold[k], head + i, r->hold_len[k]);
			if (i)
				output_line(sv, r, k, head, i, NULL, 0);
			return;
		}
		i += n ? n : 1;
	}
	data += i - h;
	len -= i - h;
	size_t keep = utf8_complete_len(data, len);
	r->hold_len[k] = len - keep;
	memcpy(r->hold[k], data + keep, r->hold_len[k]);
	if (i || keep)
		output_line(sv, r, k, head, i, data, keep);
}

static void flush_held(struct server *sv, struct request *r)
{
	for (int k = 0; k < 2; k++) {
		size_t n = r->hold_len[k];
		r->hold_len[k] = 0;
		if (n) /* an incomplete sequence at the very end: U+FFFD */
			output_line(sv, r, k, r->hold[k], n, NULL, 0);
	}
}

/* A file operation has ended: its reply, checked, or why there is none. */
static void file_op_done(struct server *sv, struct request *r, const struct ab_result *res)
{
	struct ab_error err = {0};
	json_object *o = NULL;
	if (res->cancelled)
		ab_error_proto(&err, AB_ERRC_CANCELLED, "%s: cancelled", r->fr.q.file_op);
	else if (res->timed_out)
		ab_error_proto(&err, AB_ERRC_TIMEOUT, "%s: took longer than its timeout of %llu ms",
			       r->fr.q.file_op, res->timeout_ms);
	else if (res->exit_code != 0 || res->out.truncated)
		ab_error_proto(&err, AB_ERRC_INTERNAL,
			       "%s: the operation failed (exit status %d%s)", r->fr.q.file_op,
			       res->exit_code, res->oom_killed ? ", out of memory" : "");
	else
		o = fileop_reply(r->fr.q.host ? fileop_host_op(r->fr.q.host) : r->fr.q.file_op,
				 r->fr.q.id, res->out.data ? res->out.data : "", res->out.len,
				 &err);
	if (!o)
		o = error_reply(r->fr.q.id, &err);
	if (r->fr.q.host) /* the copier's end: the reply may become an error */
		fileop_host_finish(r->fr.q.host, &o);
	const char *code = NULL;
	json_object *c;
	if (json_object_object_get_ex(o, "code", &c))
		code = json_object_get_string(c);
	front_audit_result(&sv->audit, r->fr.q.id, NULL,
			   code); /* before o, which holds code, is gone */
	send_json(sv, o);
}

/* The result's line: its fields, then the output, escaped as it goes. */
static void result_line(struct server *sv, struct request *r, struct ab_result *res)
{
	json_object *o = ab_result_fields_json(res, true, true, r->fr.q.merged, r->fr.q.base64);
	json_object *head = json_object_new_object();
	json_object_object_add(head, "type", json_object_new_string("result"));
	json_object_object_add(head, "id", id_copy(r->fr.q.id));
	json_object_object_foreach(o, k, v) json_object_object_add(head, k, json_object_get(v));
	json_object_put(o);
	json_object_object_add(head, "cancelled", json_object_new_boolean(res->cancelled));
	json_object *bg = json_object_new_array();
	for (size_t i = 0; i < res->n_background; i++) {
		json_object *b = json_object_new_object();
		json_object_object_add(b, "pid", json_object_new_int(res->background[i].pid));
		json_object_object_add(b, "command",
				       json_object_new_string(res->background[i].command));
		json_object_array_add(bg, b);
	}
	json_object_object_add(head, "background", bg);
	json_object_object_add(head, "background_log",
			       res->background_log[0] ? json_object_new_string(res->background_log)
						      : NULL);
	json_object_object_add(head, "error", NULL);
	serve_replay_keep(sv, r, head);
	/* its output is escaped as it goes */
	out_json(sv->to ? sv->to : &sv->out, head, res);
	front_audit_result(&sv->audit, r->fr.q.id, res, NULL);
	serve_log_result(sv, r->fr.q.id, res);
}

/* A session event of r (the engine frees r after its result). */
static void on_event(void *arg, struct ab_front_req *fr, const struct ab_event *ev)
{
	struct server *sv = arg;
	struct request *r = (struct request *)fr;
	if (ev->kind == AB_EVENT_OUTPUT) {
		on_output(sv, r, ev);
		return;
	}
	if (ev->kind == AB_EVENT_STDIN) { /* a stdin op's answer, now its data is read */
		if (r->stdin_id)
			send_json(sv, serve_input_answer(&r->stdin_id, ev->error));
		return;
	}
	flush_held(sv, r);
	sv->to = serve_route(sv, r);
	serve_replay_ended(sv, r); /* its client is gone: what it did not get */
	if (r->fr.q.watch && !ev->error) {
		json_object *o = serve_watch_end(r->fr.q.id, r->fr.watch, ev->result);
		front_audit_result(&sv->audit, r->fr.q.id, NULL, NULL);
		send_json(sv, o);
	} else if (r->fr.q.file_op && !ev->error) {
		file_op_done(sv, r, ev->result);
	} else if (ev->error) {
		send_json(sv, error_reply(r->fr.q.id, ev->error));
		front_audit_result(&sv->audit, r->fr.q.id, NULL,
				   ab_errc_name(ab_error_errc(ev->error)));
	} else {
		result_line(sv, r, ev->result);
	}
	sv->to = NULL;
}

/* A watch's file event, for the client that asked. */
static void on_watch(void *arg, struct ab_front_req *fr, const struct ab_watch_event *ev)
{
	struct server *sv = arg;
	struct request *r = (struct request *)fr;
	if (serve_route(sv, r))
		return;
	send_json(sv, serve_watch_event(r->fr.q.id, ev));
	out_backpressure(sv);
}

/* r ends without a result: not started (its client's), cancelled before
 * it started, or the session ends (a layer op then gets no reply). */
static void refused(void *arg, struct ab_front_req *fr, enum ab_front_why why,
		    const struct ab_error *e)
{
	struct server *sv = arg;
	struct request *r = (struct request *)fr;
	if (why == AB_FRONT_START_FAILED) {
		sv->to = serve_route(sv, r);
		send_error(sv, r->fr.q.id, ab_error_errc(e), "%s: %s",
			   r->fr.q.file_op ? r->fr.q.file_op : "exec", e->msg);
		sv->to = NULL;
	} else if (why == AB_FRONT_CANCELLED) {
		send_error(sv, r->fr.q.id, AB_ERRC_CANCELLED, "cancelled before it started");
	} else if (r->fr.q.kind != AB_REQUEST_LAYER) {
		send_error(sv, r->fr.q.id, AB_ERRC_SHUTDOWN, "the session is shutting down");
	}
}

/* Results whose output waits to be written (MAX_DEFERRED). */
static void backlog(void *arg, size_t *results, size_t *bytes)
{
	struct server *sv = arg;
	*results = sv->out.parts_text + sv->kept.parts_text;
	*bytes = 0;
}

/* ---- the session ---- */

/* The --audit-log line of the session's start. */
static void audit_start(struct server *sv)
{
	if (sv->audit < 0)
		return;
	json_object *o = front_audit_entry("start");
	json_object_object_add(o, "sandbox_id", json_object_new_string(sandbox_id(sv)));
	json_object_object_add(o, "workspace", json_object_new_string(sv->cfg->workspace));
	json_object_object_add(o, "pid", json_object_new_int((int)getpid()));
	front_audit_write(&sv->audit, o);
}

/* Replies to a pipe or a socket are written without blocking (a slow
 * client never stops timeouts); whether stdout is one, made so. */
static bool stdout_nonblock(void)
{
	struct stat st;
	if (fstat(STDOUT_FILENO, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
		return false;
	if (S_ISFIFO(st.st_mode))
		fcntl(STDOUT_FILENO, F_SETPIPE_SZ, STDOUT_PIPE_SIZE); /* best effort */
	int fl = fcntl(STDOUT_FILENO, F_GETFL);
	return fl >= 0 && fcntl(STDOUT_FILENO, F_SETFL, fl | O_NONBLOCK) == 0;
}

/* ---- the codec's turns in the engine's loop (front.h) ---- */

enum { P_IN, P_OUT, P_SOCK, P_CTL, P_EXEC, N_FDS };

/* The client (not while replies pile up unread, nor while a layer op
 * runs: the lines wait for it), its replies, a detached sandbox's
 * sockets; the idle timeout or ttl. */
static int serve_fds(void *arg, struct pollfd *p, int max, int *wait_ms)
{
	struct server *sv = arg;
	(void)max;
	bool busy = out_pending(&sv->out) + sv->out.parts_raw > OUT_HIGH_WATER ||
		    ab_front_layer_busy(&sv->f);
	bool lst = sv->listen != NULL;
	bool client = sv->in_fd >= 0;
	p[P_IN] = (struct pollfd){.fd = busy || sv->stdin_eof || !client ? -1 : sv->in_fd,
				  .events = POLLIN};
	p[P_OUT] = (struct pollfd){.fd = client && out_waiting(&sv->out) ? sv->out.fd : -1,
				   .events = POLLOUT};
	p[P_SOCK] = (struct pollfd){.fd = lst ? sv->listen->sock_fd : -1, .events = POLLIN};
	p[P_CTL] = (struct pollfd){.fd = lst ? sv->listen->ctl_fd : -1, .events = POLLIN};
	p[P_EXEC] = (struct pollfd){.fd = lst ? sv->listen->exec_fd : -1, .events = POLLIN};
	*wait_ms = lst ? serve_listen_wait_ms(sv) : -1;
	return *wait_ms == 0 ? -1 : N_FDS; /* idle timeout or ttl */
}

static void serve_early(void *arg, struct pollfd *p, int n)
{
	struct server *sv = arg;
	(void)n;
	if (p[P_OUT].revents)
		out_flush(&sv->out, !sv->out.nonblock);
}

static void serve_read(void *arg, struct pollfd *p, int n)
{
	struct server *sv = arg;
	(void)n;
	bool lst = sv->listen != NULL;
	if (p[P_IN].revents) {
		ssize_t r = read(sv->in_fd, sv->in + sv->in_len, READ_CHUNK);
		if ((r < 0 && errno != EINTR && errno != EAGAIN) || r == 0) {
			/* the kernel's word that it went with replies unread */
			sv->conn.reset |= r < 0 && errno == ECONNRESET;
			sv->stdin_eof = true;
			ab_front_cancel_watches(&sv->f);
		}
		if (r > 0)
			sv->in_len += (size_t)r;
		handle_input(sv);
		if (lst && r <= 0 && (p[P_IN].revents & (POLLHUP | POLLERR)))
			sv->conn.hup = true;
	} else if (lst && sv->in_fd >= 0 && (p[P_OUT].revents & (POLLHUP | POLLERR))) {
		sv->conn.hup = true;
	}
}

static void serve_late(void *arg, struct pollfd *p, int n)
{
	struct server *sv = arg;
	(void)n;
	bool lst = sv->listen != NULL;
	bool client = sv->in_fd >= 0;
	if (sv->layer_answered) { /* the lines that waited for it */
		sv->layer_answered = false;
		handle_input(sv);
	}
	if (client && (!out_waiting(&sv->out) || sv->out.nonblock))
		out_flush(&sv->out, false);
	if (lst && client && serve_client_done(sv))
		serve_client_detach(sv);
	for (int i = P_SOCK; lst && i <= P_EXEC; i += 2) {
		if (!p[i].revents)
			continue;
		int fd = conn_accept_client(p[i].fd, sv->conn.fd >= 0, sandbox_id(sv));
		if (fd >= 0)
			serve_client_attach(sv, fd, serve_hello_json(sv), i == P_SOCK);
		if (fd >= 0 && i == P_SOCK)
			serve_replay_adopt(sv);
	}
	if (lst && p[P_CTL].revents)
		serve_control(sv);
}

/* After the flush and the starts (results written may have made room
 * for queued commands: MAX_DEFERRED): backpressure, and whether to end. */
static bool serve_go_on(void *arg)
{
	struct server *sv = arg;
	out_backpressure(sv);
	if (sv->f.ending)
		return false;
	/* end of input: no more requests; what was asked is finished and
	 * answered first (a client that wants it stopped sends shutdown) */
	return sv->listen || !((sv->stdin_eof && !sv->f.head) || sv->out.broken);
}

static const struct ab_front_codec serve_codec = {
	.fds = serve_fds,
	.early = serve_early,
	.input = serve_read,
	.late = serve_late,
	.go_on = serve_go_on,
	.event = on_event,
	.watch = on_watch,
	.layer_reply = layer_reply,
	.refused = refused,
	.backlog = backlog,
	.free_req = request_free,
};

static int serve_main(struct ab_config *cfg, const struct ab_serve_listen *l)
{
	struct server sv = {.cfg = cfg, .audit = -1, .listen = l, .in_fd = STDIN_FILENO};
	const struct ab_front_limits lim = {.max_queue = MAX_QUEUE, .max_deferred = MAX_DEFERRED};
	ab_front_init(&sv.f, cfg, &serve_codec, &sv, &lim);
	if (l) { /* a detached sandbox's launcher makes forks of it */
		sv.f.layer.fork = l->fork;
		sv.f.layer.fork_arg = l->arg;
	}
	out_init(&sv.out, STDOUT_FILENO, false);
	out_init(&sv.kept, -1, false);
	sv.in = malloc(MAX_LINE + READ_CHUNK + 1);
	if (serve_open(&sv) < 0)
		return AB_EXIT_FAILURE;
	struct ab_error err = {0};
	audit_start(&sv);
	if (l) {
		sv.conn = (struct serve_conn){.ctl_fd = l->ctl_fd, .fd = -1};
		sv.conn.started_ms = sv.conn.idle_since_ms = conn_now_ms();
		sv.in_fd = sv.out.fd = -1;
		sv.tails =
			(struct tail_budget){.per_stream = l->keep_output, .total = l->keep_total};
		if (l->ready) /* the layer's directory: ls shows its size */
			l->ready(l->arg, 0,
				 ab_session_layer(sv.s) ? ab_session_layer(sv.s)->dir : NULL);
	} else {
		sv.out.nonblock = stdout_nonblock();
		send_json(&sv, serve_hello_json(&sv));
	}
	int status = 0;
	enum ab_front_end end = ab_front_run(&sv.f, &err);
	if (end == AB_FRONT_DEAD) {
		err.kind = AB_ERRC_INTERNAL;
		send_json(&sv, error_reply(NULL, &err));
		fprintf(stderr, "agentbox: %s\n", err.msg);
		status = AB_EXIT_FAILURE;
	}
	ab_front_drop_all(&sv.f); /* each answered "shutdown" */
	if (sv.frozen)		  /* what is killed next must run to die */
		serve_freeze(&sv, false, &err);
	if (sv.shutdown_id) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "type", json_object_new_string("ok"));
		json_object_object_add(o, "id", sv.shutdown_id);
		json_object_object_add(o, "op", json_object_new_string("shutdown"));
		send_json(&sv, o);
	}
	ab_front_close(&sv.f);
	/* the last replies: all of them, unless a signal says to end now
	 * (a client that reads nothing would hold us for ever) */
	sv.out.stop_fd = sv.f.sigfd;
	if (sv.out.fd >= 0)
		out_flush(&sv.out, end != AB_FRONT_SIGNAL);
	if (sv.out.failed) {
		fputs("agentbox: out of memory for replies\n", stderr);
		status = AB_EXIT_FAILURE;
	}
	if (sv.audit >= 0) {
		front_audit_write(&sv.audit, front_audit_entry("end"));
		close(sv.audit);
	}
	if (l)
		ab_close_keep_errno(sv.conn.fd);
	free(sv.in);
	out_free(&sv.out);
	out_free(&sv.kept);
	ab_front_free(&sv.f);
	serve_replay_gone(&sv, 0, SERVE_GOT_ALL);
	return status;
}

int ab_serve(struct ab_config *cfg)
{
	return serve_main(cfg, NULL);
}

int ab_serve_listen(struct ab_config *cfg, const struct ab_serve_listen *l)
{
	return serve_main(cfg, l);
}
