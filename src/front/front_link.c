/* The front engine split in two processes: the child's end of the link,
 * the engine's calls that reach the session either way, and the checker
 * of what the child sends (front_link.h). */
#include "front/front_link.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>

#include "front/front.h"
#include "util/base64.h"
#include "util/error.h"

#define TAG_MAX (1ull << 53) /* exact in a JSON number */

/* ---- lines ---- */

int front_link_send(struct front_link *l, json_object *o)
{
	size_t n = 0;
	const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
	int rc = 0;
	for (size_t off = 0; s && off <= n;) { /* the line, then its newline */
		const char *p = off < n ? s + off : "\n";
		size_t k = off < n ? n - off : 1;
		ssize_t w = send(l->fd, p, k, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			/* what the other process sends meanwhile is read (into the
			 * buffer, handled later): it stops reading while its replies
			 * wait, so both never wait on each other */
			struct pollfd pf = {.fd = l->fd, .events = POLLOUT | POLLIN};
			if (poll(&pf, 1, -1) > 0 && (pf.revents & POLLIN) && !l->eof &&
			    front_link_read(l) < 0)
				l->eof = true;
			if (l->eof && !(pf.revents & POLLOUT)) {
				rc = -EPIPE;
				break;
			}
			continue;
		}
		if (w <= 0) {
			rc = -(w < 0 ? errno : EPIPE);
			break;
		}
		off += (size_t)w;
		if (off == n + 1)
			break;
	}
	json_object_put(o);
	return s ? rc : -ENOMEM;
}

int front_link_read(struct front_link *l)
{
	for (;;) {
		if (l->cap - l->len < 65536) {
			size_t cap = l->cap ? l->cap * 2 : 262144;
			if (cap > FRONT_LINK_MAX_REPLY + 262144)
				return -1; /* a line past any bound: the parent is not sane */
			char *p = realloc(l->in, cap);
			if (!p)
				return -1;
			l->in = p;
			l->cap = cap;
		}
		ssize_t r = recv(l->fd, l->in + l->len, l->cap - l->len, MSG_DONTWAIT);
		if (r > 0) {
			l->len += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		l->eof = true;
		return -1;
	}
}

/* The complete line at start, parsed (an object that names nothing when
 * it is not JSON), its length with its newline in *taken; NULL: none. */
static json_object *take_line(struct front_link *l, size_t start, size_t *taken)
{
	if (start >= l->len)
		return NULL;
	char *nl = memchr(l->in + start, '\n', l->len - start);
	if (!nl)
		return NULL;
	size_t n = (size_t)(nl - (l->in + start));
	json_tokener *tok = json_tokener_new_ex(64);
	json_object *o = tok ? json_tokener_parse_ex(tok, l->in + start, (int)n) : NULL;
	json_tokener_free(tok);
	*taken = n + 1;
	if (!o)
		o = json_object_new_object(); /* not a line of ours: nothing it names */
	return o;
}

static void cut(struct front_link *l, size_t start, size_t n)
{
	memmove(l->in + start, l->in + start + n, l->len - start - n);
	l->len -= n;
}

json_object *front_link_next(struct front_link *l)
{
	size_t n = 0;
	json_object *o = take_line(l, 0, &n);
	if (o)
		cut(l, 0, n);
	return o;
}

static const char *str_of(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v)
		       : NULL;
}

static long long int_of(json_object *o, const char *key, long long dflt)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int)
		       ? json_object_get_int64(v)
		       : dflt;
}

static bool bool_of(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

/* Wait for the line of type type (and seq, when not 0), the others left
 * for the loop; NULL when the parent is gone. */
static json_object *wait_for(struct front_link *l, const char *type, unsigned long long seq)
{
	for (;;) {
		for (size_t start = 0, n = 0; start < l->len; start += n) {
			json_object *o = take_line(l, start, &n);
			if (!o)
				break;
			const char *t = str_of(o, "type");
			if (t && (!strcmp(t, type) || (!seq && !strcmp(t, "fail"))) &&
			    (!seq || (unsigned long long)int_of(o, "seq", 0) == seq)) {
				cut(l, start, n);
				return o;
			}
			json_object_put(o);
		}
		if (l->eof)
			return NULL;
		struct pollfd pf = {.fd = l->fd, .events = POLLIN};
		if (poll(&pf, 1, -1) < 0 && errno != EINTR)
			return NULL;
		if (front_link_read(l) < 0)
			l->eof = true; /* what came before is still looked at */
	}
}

int front_link_open(struct front_link *l, int fd, struct ab_error *err)
{
	l->fd = fd;
	json_object *o = wait_for(l, "hello", 0);
	if (!o)
		return ab_error_plain(err, EPIPE, "runtime: the session's process is gone");
	const char *t = str_of(o, "type"), *id = str_of(o, "id");
	if (strcmp(t, "hello") || !id) {
		const char *m = str_of(o, "msg");
		ab_error_plain(err, EIO, "%s", m ? m : "the sandbox could not be built");
		l->failed = true;
		json_object_put(o);
		return -1;
	}
	snprintf(l->id, sizeof(l->id), "%s", id);
	l->net = bool_of(o, "net");
	l->layer = bool_of(o, "layer");
	json_object_put(o);
	return 0;
}

void front_link_close(struct front_link *l)
{
	if (l->fd >= 0 && !l->eof) /* on purpose: not a crash */
		front_link_send(l, front_link_msg("end"));
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	while (l->pid > 0 && waitpid(l->pid, NULL, 0) < 0 && errno == EINTR)
		;
	l->pid = 0;
	free(l->in);
	l->in = NULL;
	l->len = l->cap = 0;
}

json_object *front_link_msg(const char *op)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "op", json_object_new_string(op));
	return o;
}

static void add_int(json_object *o, const char *key, long long v)
{
	json_object_object_add(o, key, json_object_new_int64(v));
}

/* A synchronous call: o (taken) with a new seq; the reply, or NULL with
 * err when the parent is gone. */
json_object *front_link_call(struct front_link *l, json_object *o, struct ab_error *err)
{
	add_int(o, "seq", (long long)++l->seq);
	if (front_link_send(l, o) < 0) {
		ab_error_plain(err, EPIPE, "the session's process is gone");
		return NULL;
	}
	json_object *r = wait_for(l, "rc", l->seq);
	if (!r)
		ab_error_plain(err, EPIPE, "the session's process is gone");
	return r;
}

/* A reply's rc, and its message into err when it failed. */
int front_link_rc(json_object *r, struct ab_error *err)
{
	int rc = (int)int_of(r, "rc", -EIO);
	if (rc < 0 && err) {
		const char *m = str_of(r, "msg");
		ab_error_plain(err, -rc, "%s", m ? m : strerror(-rc));
		err->kind = (enum ab_errc)int_of(r, "kind", AB_ERRC_NONE);
	}
	return rc;
}

int front_link_start(struct front_link *l, const struct ab_front_req *r, struct ab_error *err)
{
	json_object *o = front_link_msg(r->q.kind == AB_REQUEST_EXEC	  ? "exec"
					: r->q.kind == AB_REQUEST_FILE_OP ? "file"
									  : "layer");
	add_int(o, "tag", (long long)r->tag);
	json_object_object_add(o, "req", json_object_get(r->q.req));
	if (front_link_send(l, o) < 0)
		return ab_error_plain(err, EPIPE, "the session's process is gone");
	return 0;
}

/* ---- events from the parent ---- */

static bool output_of(json_object *o, const char *key, struct ab_output *out)
{
	const char *b = str_of(o, key);
	if (!b)
		return true;
	const char *why;
	out->data = base64_decode(b, strlen(b), &out->len, &why);
	out->total = out->len;
	return out->data != NULL;
}

static void link_error(json_object *o, struct ab_error *e)
{
	const char *m = str_of(o, "msg");
	*e = (struct ab_error){.code = (int)int_of(o, "code", EIO),
			       .kind = (enum ab_errc)int_of(o, "kind", AB_ERRC_NONE)};
	snprintf(e->msg, sizeof(e->msg), "%s", m ? m : "the operation failed");
}

bool front_link_event(json_object *o, struct ab_event *ev, struct ab_result *res,
		      struct ab_error *e)
{
	const char *t = str_of(o, "type");
	json_object *err = NULL;
	*ev = (struct ab_event){.tag = (unsigned long long)int_of(o, "tag", 0)};
	if (!t)
		return false;
	bool has_err = json_object_object_get_ex(o, "error", &err);
	if (has_err)
		link_error(err, e);
	if (!strcmp(t, "output")) {
		const char *d = str_of(o, "data");
		ev->kind = AB_EVENT_OUTPUT;
		ev->stream = (int)int_of(o, "stream", 1);
		if (!d || !(res->out.data = base64_decode(d, strlen(d), &res->out.len, NULL)))
			return false;
		ev->data = res->out.data;
		ev->len = res->out.len;
		return true;
	}
	if (!strcmp(t, "stdin")) {
		ev->kind = AB_EVENT_STDIN;
		ev->error = has_err ? e : NULL;
		return true;
	}
	if (strcmp(t, "result"))
		return false;
	ev->kind = AB_EVENT_RESULT;
	if (has_err) {
		ev->error = e;
		return true;
	}
	res->exit_code = (int)int_of(o, "exit_code", 0);
	res->signal = (int)int_of(o, "signal", 0);
	res->timed_out = bool_of(o, "timed_out");
	res->cancelled = bool_of(o, "cancelled");
	res->oom_killed = bool_of(o, "oom_killed");
	res->timeout_ms = (unsigned long long)int_of(o, "timeout_ms", 0);
	res->duration_ms = (unsigned long long)int_of(o, "duration_ms", 0);
	res->out.truncated = bool_of(o, "out_truncated");
	res->err.truncated = bool_of(o, "err_truncated");
	if (!output_of(o, "out", &res->out) || !output_of(o, "err", &res->err)) {
		ab_error_plain(e, ENOMEM, "out of memory for a command's output");
		ev->error = e;
	}
	ev->result = res;
	return true;
}

json_object *front_link_error_json(const struct ab_error *e)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "msg", json_object_new_string(e->msg));
	add_int(o, "code", e->code);
	add_int(o, "kind", (long long)e->kind);
	return o;
}

static void add_output(json_object *o, const char *key, const struct ab_output *out)
{
	if (!out->data)
		return;
	char *b = base64_encode(out->data, out->len);
	json_object_object_add(o, key, b ? json_object_new_string(b) : NULL);
	free(b);
}

json_object *front_link_event_json(const struct ab_event *ev)
{
	json_object *o = json_object_new_object();
	static const char *const types[] = {"output", "result", "stdin"};
	json_object_object_add(o, "type", json_object_new_string(types[ev->kind]));
	add_int(o, "tag", (long long)ev->tag);
	if (ev->error) {
		json_object_object_add(o, "error", front_link_error_json(ev->error));
		return o;
	}
	if (ev->kind == AB_EVENT_OUTPUT) {
		char *b = base64_encode(ev->data, ev->len);
		if (!b) {
			json_object_put(o);
			return NULL;
		}
		add_int(o, "stream", ev->stream);
		json_object_object_add(o, "data", json_object_new_string(b));
		free(b);
	} else if (ev->kind == AB_EVENT_RESULT) {
		const struct ab_result *r = ev->result;
		add_int(o, "exit_code", r->exit_code);
		add_int(o, "signal", r->signal);
		json_object_object_add(o, "timed_out", json_object_new_boolean(r->timed_out));
		json_object_object_add(o, "cancelled", json_object_new_boolean(r->cancelled));
		json_object_object_add(o, "oom_killed", json_object_new_boolean(r->oom_killed));
		add_int(o, "timeout_ms", (long long)r->timeout_ms);
		add_int(o, "duration_ms", (long long)r->duration_ms);
		json_object_object_add(o, "out_truncated",
				       json_object_new_boolean(r->out.truncated));
		json_object_object_add(o, "err_truncated",
				       json_object_new_boolean(r->err.truncated));
		add_output(o, "out", &r->out);
		add_output(o, "err", &r->err);
	}
	return o;
}
