/* sandboxd's watcher.v1.FileWatcherService (v1.0.12) on agentbox
 * runtime's gRPC server (rt_grpc.h): WatchDir as a watch of the engine
 * (the file operation "watch", watch/watch.h: inotify in a shim of the
 * sandbox, its lines checked on the host), its events worded as sandboxd's
 * FileEvent and held ~250 ms before they go, as sandboxd's debounce holds
 * them. Paths are relative to /workspace, the API's root, as sandboxd's
 * are to its root; an event outside it (a watch that a symlink led out of
 * /workspace, within the view) is dropped, as sandboxd drops them. What
 * ends the watch from inside (its directory removed, an overflow) is a
 * last FileEvent of type ERROR, then the status OK, as sandboxd ends it;
 * what makes it fail before it is ready is a status (NOT_FOUND,
 * INVALID_ARGUMENT, PERMISSION_DENIED). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grpc/rt_grpc.h"
#include "lex/rtpath.h"
#include "util/error.h"

void gwatch_start(struct rt_grpc *g, struct gcall *call)
{
	struct rt *rt = g->rt;
	char rel[4096], view[4200];
	int rc = ab_rtpath_within(BASE, call->q.path, AB_RTPATH_BASE_ABS, rel, sizeof(rel));
	if (rc == -EACCES) {
		grpc_finish(call, G_PERMISSION_DENIED,
			    "watch path: access denied: path \"%.300s\": path escapes sandbox root",
			    call->q.path);
		return;
	}
	if (rc < 0) {
		grpc_finish(call, G_INVALID_ARGUMENT, "watch path: %s", strerror(-rc));
		return;
	}
	snprintf(view, sizeof(view), "%s%s%s", BASE, rel[0] ? "/" : "", rel);
	struct gproc *p = calloc(1, sizeof(*p));
	if (!p) {
		grpc_finish(call, G_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	p->proto = g->svc->proto; /* rt_gproc.c's, as its processes' */
	p->watch = true;
	p->fr.no_wait = true; /* a slot of --max-concurrent now, or RESOURCE_EXHAUSTED */
	p->fr.tag = ab_front_tag(&rt->f);
	json_object *fields = json_object_new_object();
	json_object_object_add(fields, "path", json_object_new_string(view));
	json_object_object_add(fields, "recursive", json_object_new_boolean(call->q.recursive));
	json_object *tag = json_object_new_int64((int64_t)p->fr.tag);
	struct ab_error e = {0};
	rc = ab_request_file_op(&p->fr.q, tag, "watch", fields, -1, &e);
	json_object_put(tag);
	if (rc < 0) {
		ab_request_clear(&p->fr.q);
		free(p);
		grpc_finish(call, G_INVALID_ARGUMENT, "watch path: %s", e.msg);
		return;
	}
	p->conn_id = call->c->id;
	p->call = call;
	call->proc = p;
	g->n_procs++;
	ab_front_submit(&rt->f, &p->fr);
}

/* path in the view as sandboxd names it: relative to /workspace ("." for
 * /workspace itself); NULL when it is not under /workspace. */
static const char *relative(const char *path)
{
	size_t b = strlen(BASE);
	if (!path || strncmp(path, BASE, b) != 0 || (path[b] && path[b] != '/'))
		return NULL;
	return path[b] ? path + b + 1 : ".";
}

/* One FileEvent held for the debounce. */
static void hold(struct gproc *p, enum pb_file_event type, const char *path, const char *old,
		 const char *error, unsigned long long now)
{
	size_t room = 16 + pb_size_bytes(path ? strlen(path) : 0) +
		      pb_size_bytes(old ? strlen(old) : 0) +
		      pb_size_bytes(error ? strlen(error) : 0);
	if (p->pend_len + 4 + room > p->pend_cap) {
		size_t cap = p->pend_cap ? 2 * p->pend_cap : 4096;
		while (cap < p->pend_len + 4 + room)
			cap *= 2;
		uint8_t *n = realloc(p->pend, cap);
		if (!n)
			return; /* counted as lost: the overflow the shim reports is the rule */
		p->pend = n;
		p->pend_cap = cap;
	}
	size_t n = pb_file_event(p->pend + p->pend_len + 4, room, type, path, old, error);
	if (n == PB_NO_ROOM)
		return;
	memcpy(p->pend + p->pend_len, &(uint32_t){(uint32_t)n}, 4);
	p->pend_len += 4 + n;
	if (!p->pend_since)
		p->pend_since = now ? now : 1;
}

/* Every event held, into the call's answer. */
static void send_held(struct gproc *p)
{
	struct gcall *call = p->call;
	for (size_t o = 0; call && o + 4 <= p->pend_len;) {
		uint32_t n;
		memcpy(&n, p->pend + o, 4);
		if (!grpc_answer(call, n, grpc_enc_copy, &(struct blob){p->pend + o + 4, n})) {
			grpc_finish(call, G_RESOURCE_EXHAUSTED, "out of memory for the events");
			break;
		}
		o += 4 + n;
	}
	p->pend_len = 0;
	p->pend_since = 0;
}

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

void gwatch_event(struct rt_grpc *g, struct gproc *p, const struct ab_watch_event *ev)
{
	(void)g;
	if (!p->call)
		return;
	static const enum pb_file_event type[] = {
		[AB_WATCH_CREATED] = PB_FE_CREATE, [AB_WATCH_WRITTEN] = PB_FE_WRITE,
		[AB_WATCH_REMOVED] = PB_FE_REMOVE, [AB_WATCH_RENAMED] = PB_FE_RENAME,
		[AB_WATCH_ATTRIB] = PB_FE_CHMOD,
	};
	unsigned long long now = now_ms();
	if (ev->kind == AB_WATCH_READY) {
		p->ready = true;
		grpc_headers(p->call); /* the stream has begun: the client may act */
		return;
	}
	if (ev->kind == AB_WATCH_OVERFLOW) { /* sandboxd's fsnotify overflow: the last event */
		hold(p, PB_FE_ERROR, NULL, NULL,
		     "events were dropped (the watch's queue overflowed): the watch ends", now);
		send_held(p);
		grpc_finish(p->call, G_OK, NULL);
		p->call->proc = NULL;
		p->call = NULL;
		ab_front_cancel(&g->rt->f, &p->fr);
		return;
	}
	const char *path = relative(ev->path);
	if (!path)
		return;
	const char *from = ev->kind == AB_WATCH_RENAMED ? relative(ev->from) : NULL;
	if (ev->kind == AB_WATCH_RENAMED && !from) /* moved in from outside: made here */
		hold(p, PB_FE_CREATE, path, NULL, NULL, now);
	else
		hold(p, type[ev->kind], path, from, NULL, now);
}

void gwatch_ended(struct rt_grpc *g, struct gproc *p, const struct ab_event *ev)
{
	struct gcall *call = p->call;
	if (!call)
		return;
	call->proc = NULL;
	p->call = NULL;
	const struct watch_lines *w = p->fr.watch;
	if (ev->error) {
		grpc_finish(call, g->rt->f.gone ? G_UNAVAILABLE : grpc_code_of(ev->error), "%s",
			    ev->error->msg);
		return;
	}
	if (!w || !w->failed) { /* ended from outside, not by the watch (cancel, timeout) */
		p->call = call;
		send_held(p);
		p->call = NULL;
		grpc_finish(call, g->rt->f.gone ? G_UNAVAILABLE : G_CANCELLED, "the watch ended");
		return;
	}
	enum ab_errc k = ab_error_errc(&w->err);
	if (!p->ready) { /* as sandboxd refuses a path before it watches */
		int code = k == AB_ERRC_FILE_NOT_FOUND	    ? G_NOT_FOUND
			   : k == AB_ERRC_NOT_DIRECTORY	    ? G_INVALID_ARGUMENT
			   : k == AB_ERRC_PERMISSION_DENIED ? G_PERMISSION_DENIED
			   : k == AB_ERRC_INVALID_PATH	    ? G_INVALID_ARGUMENT
							    : G_INTERNAL;
		const char *what = k == AB_ERRC_FILE_NOT_FOUND	? "watch path does not exist"
				   : k == AB_ERRC_NOT_DIRECTORY ? "watch path is not a directory"
								: "watch path";
		grpc_finish(call, code, "%s: %s", what, w->err.msg);
		return;
	}
	p->call = call; /* its last event: why it ended */
	hold(p, PB_FE_ERROR, NULL, NULL,
	     k == AB_ERRC_FILE_NOT_FOUND ? "watched directory was removed or renamed" : w->err.msg,
	     now_ms());
	send_held(p);
	p->call = NULL;
	grpc_finish(call, G_OK, NULL);
}

void gwatch_flush(struct rt_grpc *g, unsigned long long now, int *wait_ms)
{
	for (struct ab_front_req *fr = g->rt->f.head; fr; fr = fr->next) {
		struct gproc *p = rt_gproc_of(g, fr);
		if (!p || !p->watch || !p->pend_len)
			continue;
		unsigned long long due = p->pend_since + WATCH_DEBOUNCE_MS;
		if (!wait_ms || now >= due) {
			send_held(p);
		} else if (*wait_ms < 0 || due - now < (unsigned long long)*wait_ms) {
			*wait_ms = (int)(due - now);
		}
	}
}

void gwatch_free(struct gproc *p)
{
	free(p->pend);
	p->pend = NULL;
}
