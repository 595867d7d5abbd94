/* The request engine of the fronts (front.h). */
#include "front/front.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "files/fileop_host.h"
#include "front/front_link.h"
#include "util/error.h"
#include "util/signals.h"

/* The codec's fds in one step, at most, unless its limits say. */
#define CODEC_FDS 13

void ab_front_init(struct ab_front *f, struct ab_config *cfg, const struct ab_front_codec *c,
		   void *arg, const struct ab_front_limits *lim)
{
	*f = (struct ab_front){.cfg = cfg, .sigfd = -1, .c = c, .arg = arg, .lim = *lim};
	if (!f->lim.max_fds)
		f->lim.max_fds = CODEC_FDS;
	front_layer_init(&f->layer);
}

int ab_front_open(struct ab_front *f, struct ab_error *err)
{
	signal(SIGPIPE, SIG_IGN);
	f->sigfd = ab_ending_signals_fd();
	if (f->sigfd < 0) {
		int e = errno;
		ab_error_plain(err, e, "%s", strerror(e));
		return -1;
	}
	if (!f->link && ab_session_open(f->cfg, &f->s, err) < 0) {
		close(f->sigfd);
		f->sigfd = -1;
		return -1;
	}
	return 0;
}

void ab_front_gone(struct ab_front *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->gone_why, sizeof(f->gone_why), fmt, ap);
	va_end(ap);
	f->gone = true;
}

int ab_front_replace_session(struct ab_front *f, struct ab_error *err)
{
	ab_session_close(f->s);
	f->s = NULL;
	if (ab_session_open(f->cfg, &f->s, err) < 0) {
		f->s = NULL;
		return -1;
	}
	return 0;
}

unsigned long long ab_front_tag(struct ab_front *f)
{
	return ++f->next_tag;
}

struct ab_front_req *ab_front_find(struct ab_front *f, json_object *key)
{
	for (struct ab_front_req *r = f->head; r; r = r->next)
		if (json_object_equal(r->key, key))
			return r;
	return NULL;
}

static struct ab_front_req *by_tag(struct ab_front *f, unsigned long long tag)
{
	struct ab_front_req *r = f->head;
	while (r && r->tag != tag)
		r = r->next;
	return r;
}

int ab_front_admit(struct ab_front *f, json_object *key)
{
	if (ab_front_find(f, key))
		return -EEXIST;
	size_t n = f->lim.queue_counts_running ? f->n : f->queued;
	if (f->lim.max_queue && n >= f->lim.max_queue)
		return -ENOSPC;
	return 0;
}

static bool is_layer(const struct ab_front_req *r)
{
	return r->q.kind == AB_REQUEST_LAYER;
}

static void unlink_req(struct ab_front *f, struct ab_front_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		f->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		f->tail = r->prev;
	f->n--;
	if (!r->running && !is_layer(r))
		f->queued--;
}

static void drop(struct ab_front *f, struct ab_front_req *r)
{
	unlink_req(f, r);
	if (r->watch) {
		watch_lines_free(r->watch);
		free(r->watch);
		r->watch = NULL;
	}
	f->c->free_req(f->arg, r);
}

static void refuse(struct ab_front *f, struct ab_front_req *r, enum ab_front_why why,
		   const struct ab_error *e)
{
	if (f->c->refused)
		f->c->refused(f->arg, r, why, e);
	drop(f, r);
}

/* Commands and file ops running. */
static size_t running(struct ab_front *f)
{
	if (!f->link)
		return ab_session_running(f->s);
	size_t n = 0;
	for (struct ab_front_req *r = f->head; r; r = r->next)
		n += r->running && !is_layer(r);
	return n;
}

/* A request to the session; a host file's pipe (fileop_host.h) is its
 * stdin, and the copier runs from now on. */
static int start_one(struct ab_front *f, struct ab_front_req *r, struct ab_error *err)
{
	if (f->gone)
		return ab_error_plain(err, EPIPE, "%s", f->gone_why);
	if (r->q.watch && !f->c->watch) /* its events would go nowhere */
		return ab_error_proto(err, AB_ERRC_UNKNOWN_OP,
				      "this front does not stream file "
				      "events: watch is agentbox/1's");
	if (f->link && running(f) >= f->cfg->max_concurrent)
		return -EBUSY; /* as the session says it */
	if (f->link)	       /* no host file: the other process's requests have none */
		return r->q.host ? ab_error_plain(err, EINVAL, "no host file over a link")
				 : front_link_start(f->link, r, err);
	if (!r->q.host || r->q.host->running)
		return ab_session_start(f->s, &r->q.x, r->tag, err);
	int fds[3] = {-1, -1, -1};
	int rc = fileop_host_start(r->q.host, &fds[0], err);
	if (rc < 0)
		return rc;
	r->q.x.fds = fds;
	rc = ab_session_start(f->s, &r->q.x, r->tag, err);
	r->q.x.fds = NULL;
	close(fds[0]);	    /* the sandbox's now, or nobody's: the copier sees its end */
	if (rc == -EBUSY) { /* not started after all: a new pipe next time */
		fileop_host_free(r->q.host);
		r->q.host = NULL;
		ab_error_proto(err, AB_ERRC_BUSY, "%s: the session is busy", r->q.file_op);
		return -EAGAIN;
	}
	return rc;
}

/* Whether the codec's replies keep up: no start while they do not. */
static bool codec_keeps_up(struct ab_front *f)
{
	size_t results = 0, bytes = 0;
	if (f->c->backlog)
		f->c->backlog(f->arg, &results, &bytes);
	if (f->lim.max_deferred && results >= f->lim.max_deferred)
		return false;
	return !(f->lim.max_backlog && bytes > f->lim.max_backlog);
}

void ab_front_start(struct ab_front *f)
{
	for (struct ab_front_req *r = f->head, *next; r; r = next) {
		next = r->next;
		if (r->running || is_layer(r))
			continue;
		if (!f->gone && (running(f) >= f->cfg->max_concurrent || !codec_keeps_up(f)))
			return;
		struct ab_error err = {0};
		int rc = start_one(f, r, &err);
		if (rc == -EBUSY)
			return;
		f->queued--;
		if (rc < 0) {
			r->running = true; /* counted out of the queue already */
			refuse(f, r, AB_FRONT_START_FAILED, &err);
			continue;
		}
		r->running = true;
	}
}

/* The next layer op, when none runs: started under the watchdog, or
 * answered at once (discard, a request refused), then the next. */
static void layer_next(struct ab_front *f)
{
	while (!f->ending && f->layer.pid <= 0 && !(f->link && f->layer_req)) {
		struct ab_front_req *r = f->head;
		while (r && (r->running || !is_layer(r)))
			r = r->next;
		if (!r)
			return;
		if (f->gone) {
			struct ab_error e = {0};
			ab_error_plain(&e, EPIPE, "%s", f->gone_why);
			refuse(f, r, AB_FRONT_START_FAILED, &e);
			continue;
		}
		if (f->link) { /* under the other process's watchdog */
			struct ab_error e = {0};
			if (front_link_start(f->link, r, &e) < 0) {
				refuse(f, r, AB_FRONT_START_FAILED, &e);
				continue;
			}
			r->running = true;
			f->layer_req = r;
			return;
		}
		json_object *reply = NULL;
		bool end = false;
		/* a command keeps the tree it started in: a checkpoint or a
		 * restore waits for none, it is refused (docs/checkpoints.md) */
		if (front_layer_start(&f->layer, ab_session_layer(f->s), r->q.op, r->q.req, r->q.id,
				      running(f) > 0, &reply, &end)) {
			r->running = true;
			f->layer_req = r;
			return;
		}
		f->ending |= end; /* discard: the sandbox and its layer go */
		f->c->layer_reply(f->arg, r, reply);
		drop(f, r);
	}
}

/* The running layer op's reply, once it came (or its bound passed). */
static void layer_poll(struct ab_front *f)
{
	json_object *reply = f->layer.pid > 0 ? front_layer_poll(&f->layer) : NULL;
	if (!reply)
		return;
	struct ab_front_req *r = f->layer_req;
	f->layer_req = NULL;
	f->c->layer_reply(f->arg, r, reply);
	if (r)
		drop(f, r);
	layer_next(f);
}

bool ab_front_layer_busy(const struct ab_front *f)
{
	return f->layer.pid > 0 || (f->link && f->layer_req);
}

void ab_front_submit(struct ab_front *f, struct ab_front_req *r)
{
	if (!r->tag)
		r->tag = ab_front_tag(f);
	r->prev = f->tail;
	if (f->tail)
		f->tail->next = r;
	else
		f->head = r;
	f->tail = r;
	f->n++;
	if (is_layer(r)) {
		layer_next(f);
		return;
	}
	f->queued++;
	if (!r->no_wait) {
		ab_front_start(f);
		return;
	}
	struct ab_error err = {0};
	int rc = start_one(f, r, &err);
	if (rc == -EBUSY)
		ab_error_proto(&err, AB_ERRC_BUSY, "%u commands are running already",
			       f->cfg->max_concurrent);
	f->queued--;
	r->running = true;
	if (rc < 0)
		refuse(f, r, AB_FRONT_START_FAILED, &err);
}

static json_object *link_cancel(unsigned long long tag)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "op", json_object_new_string("cancel"));
	json_object_object_add(o, "tag", json_object_new_int64((int64_t)tag));
	return o;
}

int ab_front_cancel(struct ab_front *f, struct ab_front_req *r)
{
	if (!r->running) {
		refuse(f, r, AB_FRONT_CANCELLED, NULL);
		return 0;
	}
	if (f->link && (r == f->layer_req || !is_layer(r)))
		front_link_send(f->link, link_cancel(r->tag));
	if (r == f->layer_req) { /* stopped as at its bound: what it wrote stays */
		front_layer_stop(&f->layer);
		f->layer_req = NULL;
		drop(f, r);
		layer_next(f);
		return 2;
	}
	r->cancelled = true;
	if (!f->link)
		ab_session_cancel(f->s, r->tag);
	return 1;
}

struct front_watch {
	struct ab_front *f;
	struct ab_front_req *r;
};

/* A watch's event, checked, to the codec. */
static void on_watch(const struct ab_watch_event *ev, void *arg)
{
	struct front_watch *w = arg;
	if (w->f->c->watch)
		w->f->c->watch(w->f->arg, w->r, ev);
}

void ab_front_cancel_watches(struct ab_front *f)
{
	for (struct ab_front_req *r = f->head, *next; r; r = next) {
		next = r->next;
		if (r->q.watch && !r->cancelled)
			ab_front_cancel(f, r);
	}
}

static void on_event(const struct ab_event *ev, void *arg)
{
	struct ab_front *f = arg;
	struct ab_front_req *r = by_tag(f, ev->tag);
	if (!r)
		return;
	if (r->q.watch && (r->watch || (r->watch = calloc(1, sizeof(*r->watch))))) {
		if (ev->kind == AB_EVENT_OUTPUT) { /* events, checked, for the codec */
			struct front_watch w = {f, r};
			watch_lines_feed(r->watch, ev->data, ev->len, on_watch, &w);
			return;
		}
	}
	f->c->event(f->arg, r, ev);
	if (ev->kind == AB_EVENT_RESULT)
		drop(f, r);
}

/* A signal came: the codec's word on it (a drain goes on). */
static bool on_signal(struct ab_front *f)
{
	if (!f->c->signal) /* left unread: the last writes stop at it */
		return false;
	struct signalfd_siginfo si = {0};
	while (read(f->sigfd, &si, sizeof(si)) > 0)
		;
	f->draining = f->c->signal(f->arg, (int)si.ssi_signo);
	return f->draining;
}

/* The session's events; false when it died and the codec ends with it. */
static bool on_session(struct ab_front *f, struct ab_error *err)
{
	if (ab_session_dispatch(f->s, 0, on_event, f, err) >= 0)
		return true;
	if (!f->c->dead || !f->c->dead(f->arg, err))
		return false;
	ab_front_gone(f, "The sandbox has ended: %.200s", err->msg);
	return true;
}

/* A line of the other process: a session event, a refusal, a layer op's
 * reply, the sandbox's death. */
static void link_line(struct ab_front *f, json_object *o, struct ab_error *err)
{
	json_object *v = NULL;
	const char *t = json_object_get_string(json_object_object_get(o, "type"));
	unsigned long long tag =
		(unsigned long long)json_object_get_int64(json_object_object_get(o, "tag"));
	struct ab_front_req *r = tag ? by_tag(f, tag) : NULL;
	struct ab_error e = {0};
	if (!t)
		return;
	if (!strcmp(t, "layer") && r && r == f->layer_req) {
		f->layer_req = NULL;
		json_object_object_get_ex(o, "reply", &v);
		f->c->layer_reply(f->arg, r, json_object_get(v));
		drop(f, r);
		layer_next(f);
	} else if (!strcmp(t, "refused") && r) {
		json_object_object_get_ex(o, "error", &v);
		snprintf(e.msg, sizeof(e.msg), "%s",
			 json_object_get_string(json_object_object_get(v, "msg")));
		e.code = json_object_get_int(json_object_object_get(v, "code"));
		e.kind = (enum ab_errc)json_object_get_int(json_object_object_get(v, "kind"));
		if (r == f->layer_req)
			f->layer_req = NULL;
		refuse(f, r, AB_FRONT_START_FAILED, &e);
		layer_next(f);
	} else if (!strcmp(t, "dead") && !f->gone) {
		snprintf(err->msg, sizeof(err->msg), "%s",
			 json_object_get_string(json_object_object_get(o, "msg")));
		if (f->c->dead && f->c->dead(f->arg, err))
			ab_front_gone(f, "The sandbox has ended: %.200s", err->msg);
	} else if (r) {
		struct ab_event ev;
		struct ab_result res = {0};
		if (front_link_event(o, &ev, &res, &e))
			on_event(&ev, f);
		ab_result_free(&res);
	}
}

/* The other process's lines; false when it is gone. */
static bool on_link(struct ab_front *f, struct ab_error *err)
{
	int rc = front_link_read(f->link);
	json_object *o;
	while ((o = front_link_next(f->link))) {
		link_line(f, o, err);
		json_object_put(o);
	}
	if (rc == 0 || f->gone)
		return true;
	ab_error_plain(err, EPIPE, "the session's process is gone");
	if (!f->c->dead || !f->c->dead(f->arg, err))
		return false;
	ab_front_gone(f, "The sandbox has ended: %.200s", err->msg);
	return true;
}

/* One wait and what came: the codec's turns around the session's events
 * and the layer op's reply, then what may start. */
static enum ab_front_end step(struct ab_front *f, struct ab_error *err)
{
	if (!f->p && !(f->p = calloc(3 + f->lim.max_fds, sizeof(*f->p))))
		return AB_FRONT_DONE;
	struct pollfd *p = f->p;
	int wait = -1;
	int n = f->c->fds ? f->c->fds(f->arg, p + 3, (int)f->lim.max_fds, &wait) : 0;
	if (n < 0)
		return AB_FRONT_DONE;
	int lw = front_layer_timeout(&f->layer);
	if (lw >= 0 && (wait < 0 || lw < wait))
		wait = lw;
	/* lines a synchronous call read past (front_link.c) wait in its buffer */
	bool buffered =
		f->link && !f->gone && f->link->len && memchr(f->link->in, '\n', f->link->len);
	if (buffered)
		wait = 0;
	p[0] = (struct pollfd){.fd = f->draining ? -1 : f->sigfd, .events = POLLIN};
	p[1] = (struct pollfd){.fd = f->gone   ? -1
				     : f->link ? f->link->fd
				     : !f->s   ? -1
					       : ab_session_fd(f->s),
			       .events = POLLIN};
	p[2] = (struct pollfd){.fd = front_layer_fd(&f->layer), .events = POLLIN};
	if (poll(p, (nfds_t)(3 + n), wait) < 0 && errno != EINTR)
		return AB_FRONT_DONE;
	if (f->c->early)
		f->c->early(f->arg, p + 3, n);
	if (p[0].revents && !on_signal(f))
		return AB_FRONT_SIGNAL;
	if ((p[1].revents || buffered) && !(f->link ? on_link(f, err) : on_session(f, err)))
		return AB_FRONT_DEAD;
	if (f->c->input)
		f->c->input(f->arg, p + 3, n);
	layer_poll(f);
	if (f->c->late)
		f->c->late(f->arg, p + 3, n);
	ab_front_start(f);
	return !f->c->go_on || f->c->go_on(f->arg) ? AB_FRONT_ON : AB_FRONT_DONE;
}

enum ab_front_end ab_front_run(struct ab_front *f, struct ab_error *err)
{
	enum ab_front_end end;
	while ((end = step(f, err)) == AB_FRONT_ON)
		;
	return end;
}

void ab_front_drop_all(struct ab_front *f)
{
	front_layer_stop(&f->layer);
	f->layer_req = NULL;
	while (f->head)
		refuse(f, f->head, AB_FRONT_ENDED, NULL);
}

void ab_front_close(struct ab_front *f)
{
	if (f->link) { /* the other process ends the sandbox and exits */
		front_link_close(f->link);
		free(f->link);
		f->link = NULL;
		return;
	}
	ab_session_close(f->s);
	f->s = NULL;
}

void ab_front_free(struct ab_front *f)
{
	free(f->p);
	f->p = NULL;
	if (f->sigfd >= 0)
		close(f->sigfd);
	f->sigfd = -1;
}
