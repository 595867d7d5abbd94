/* The request engine every protocol front sits on (docs/architecture.md,
 * "The front engine"): one session, the requests in flight over it, and
 * the loop that waits on it. A codec (serve's JSON lines, MCP, ...) maps
 * its wire format to requests (request.h: parsed from a line, or built
 * from C values) and the engine's callbacks back to its wire format; the
 * engine decides everything else, once:
 *
 * - the queue, in arrival order, each request under a tag of its own;
 * - duplicate ids refused and the queue bounded (ab_front_admit);
 * - concurrency: at most cfg->max_concurrent commands run; the rest wait
 *   and start as slots free, while the codec's replies keep up
 *   (backpressure: results waiting to be written, bytes unread);
 * - the layer ops (changes, commit, discard) one at a time under the
 *   watchdog (front_layer.h), in their order among the others;
 * - a running command's input: stdin, a terminal's size, a signal
 *   (ab_front_input), for every codec that offers them;
 * - cancellation: a waiting request is dropped, a running command is
 *   stopped as on a timeout, a running layer op killed at once;
 * - the poll set: the session's fd, the ending signals (signalfd), the
 *   layer op's pipe and the codec's own fds;
 * - the end: a discard, a signal, the sandbox's death or the codec's
 *   word; each request still there is handed back once, "ended". */
#ifndef AB_FRONT_H
#define AB_FRONT_H

#include <json-c/json.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"
#include "front/front_layer.h"
#include "front/request.h"
#include "watch/watch.h"

/* One request in the engine. A codec allocates it inside a struct of its
 * own (first member) and the engine gives it back through free_req. */
struct ab_front_req {
	struct ab_front_req *next, *prev; /* in arrival order */
	struct ab_request q;		  /* checked; exec, file op or layer op */
	json_object *key;		  /* the id duplicates are refused by (the codec's) */
	unsigned long long tag;
	bool running;		   /* started: a command of the session, or the layer op */
	bool cancelled;		   /* ab_front_cancel on a running command */
	bool no_wait;		   /* start now or refuse with -EBUSY, never queue */
	struct watch_lines *watch; /* a watch's events as they come (q.watch) */
};

/* Why a request ends without its result (refused). */
enum ab_front_why {
	AB_FRONT_START_FAILED, /* the session would not start it: e says why */
	AB_FRONT_CANCELLED,    /* cancelled before it started */
	AB_FRONT_ENDED,	       /* the session ends (ab_front_drop_all) */
};

/* What a step of the loop ended with. */
enum ab_front_end { AB_FRONT_ON, AB_FRONT_DONE, AB_FRONT_DEAD, AB_FRONT_SIGNAL };

/* The codec: its fds, its turn in each step, and the events back. Every
 * callback but the events may be NULL. */
struct front_link;

struct ab_front_codec {
	/* Its fds into p (at most max; fd -1 for none) and its timeout (lower
	 * *wait_ms, -1: none); how many it filled, or -1 to end now. */
	int (*fds)(void *arg, struct pollfd *p, int max, int *wait_ms);
	/* After poll, before the session's events (writes that became
	 * possible); after them (its input); after a layer op's reply (the
	 * rest: connections, writes). p as filled by fds, with revents. */
	void (*early)(void *arg, struct pollfd *p, int n);
	void (*input)(void *arg, struct pollfd *p, int n);
	void (*late)(void *arg, struct pollfd *p, int n);
	/* At the end of each step: whether to go on. */
	bool (*go_on)(void *arg);
	/* An ending signal came (its number): true to go on (a drain: the
	 * signals are no longer polled, go_on decides the end), false to end
	 * the run (AB_FRONT_SIGNAL). NULL: the run ends, the signal unread. */
	bool (*signal)(void *arg, int signo);
	/* The sandbox died (e says why): true to go on without it (every
	 * request still waiting and each new one refused, START_FAILED, with
	 * f->gone_why; the session no longer polled), false to end the run
	 * (AB_FRONT_DEAD). NULL: the run ends. */
	bool (*dead)(void *arg, const struct ab_error *e);
	/* A session event of r (output, stdin written, result or error);
	 * after AB_EVENT_RESULT r is freed. */
	void (*event)(void *arg, struct ab_front_req *r, const struct ab_event *ev);
	/* A watch's file event (q.watch: its output comes as these, checked;
	 * at its AB_EVENT_RESULT r->watch says whether it failed and why). */
	void (*watch)(void *arg, struct ab_front_req *r, const struct ab_watch_event *ev);
	/* A layer op's reply ({"type":"result"|"error","id":...}, taken); r
	 * is freed after, and NULL when it was cancelled meanwhile. */
	void (*layer_reply)(void *arg, struct ab_front_req *r, json_object *reply);
	/* r ends without a result (why; e: the session's error, or NULL); r
	 * is freed after. */
	void (*refused)(void *arg, struct ab_front_req *r, enum ab_front_why why,
			const struct ab_error *e);
	/* What the codec has not written yet: results waiting, bytes. */
	void (*backlog)(void *arg, size_t *results, size_t *bytes);
	void (*free_req)(void *arg, struct ab_front_req *r);
};

struct ab_front_limits {
	size_t max_queue;	   /* requests waiting (0: no bound) */
	bool queue_counts_running; /* ... or waiting and running, all kinds */
	size_t max_deferred;	   /* results waiting to be written: no start (0: none) */
	size_t max_backlog;	   /* bytes waiting to be written: no start (0: none) */
	size_t max_fds;		   /* the codec's fds in one step (0: 13) */
};

struct ab_front {
	struct ab_config *cfg;
	struct ab_session *s;	 /* in process; NULL with link */
	struct front_link *link; /* or the session in another process (front_link.h) */
	int sigfd;		 /* the ending signals */
	const struct ab_front_codec *c;
	void *arg;
	struct ab_front_limits lim;
	struct ab_front_req *head, *tail;
	size_t n;      /* requests in the engine */
	size_t queued; /* commands and file ops waiting for a slot */
	unsigned long long next_tag;
	struct front_layer layer;	/* the layer op running */
	struct ab_front_req *layer_req; /* its request */
	bool ending;			/* no more requests: a discard, a shutdown */
	bool draining;			/* a signal came and the codec drains */
	bool gone;			/* the sandbox died and the codec goes on */
	char gone_why[256];		/* then: why, as each refusal says it */
	struct pollfd *p;		/* the poll set (3 + lim.max_fds) */
};

void ab_front_init(struct ab_front *f, struct ab_config *cfg, const struct ab_front_codec *c,
		   void *arg, const struct ab_front_limits *lim);
/* SIGPIPE ignored, the ending signals on f->sigfd, the session opened
 * from f->cfg (none with f->link set: the link's process holds it); 0, or
 * -1 with err (nothing left open). */
int ab_front_open(struct ab_front *f, struct ab_error *err);
/* Steps until the session ends; what ended it (DEAD: err says why). */
enum ab_front_end ab_front_run(struct ab_front *f, struct ab_error *err);
/* Every request still there handed back (refused, AB_FRONT_ENDED) in
 * order, the layer op killed first. */
void ab_front_drop_all(struct ab_front *f);
/* The session ended (every process killed); f->sigfd stays for the last
 * writes until ab_front_free. */
void ab_front_close(struct ab_front *f);
void ab_front_free(struct ab_front *f);

/* The sandbox is gone (as after the dead callback): why (printf), as
 * every request from now on is refused with it; the session stays until
 * ab_front_close. */
void ab_front_gone(struct ab_front *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The session closed and a new one opened from f->cfg in its place (a
 * discard: the sandbox and its layer went); no request may be in the
 * engine. 0, or -1 with err: then f->s is NULL (ab_front_gone next). */
int ab_front_replace_session(struct ab_front *f, struct ab_error *err);

/* The next tag, for a codec whose request names it (MCP's). */
unsigned long long ab_front_tag(struct ab_front *f);
/* The request whose key equals key, or NULL. */
struct ab_front_req *ab_front_find(struct ab_front *f, json_object *key);
/* Whether a new request with key may come in: 0, -EEXIST (a request with
 * this key is in the engine) or -ENOSPC (the queue is full). */
int ab_front_admit(struct ab_front *f, json_object *key);
/* r (its q filled, key set) into the engine, started when it can be: a
 * command or file op when a slot is free, a layer op when none runs. A
 * no_wait request that cannot start is refused at once. */
void ab_front_submit(struct ab_front *f, struct ab_front_req *r);
/* Cancel r: 0 when it had not started (refused, CANCELLED, and freed), 1
 * when its command is stopped (its result comes as an event), 2 when it
 * was the running layer op (killed and freed; no reply). */
int ab_front_cancel(struct ab_front *f, struct ab_front_req *r);
/* Every watch cancelled (its client can no longer cancel it: the end of
 * its input, or it left); a watch otherwise runs until cancelled. */
void ab_front_cancel_watches(struct ab_front *f);
/* A running command's input, q's kind: AB_REQUEST_STDIN (q->data,
 * q->data_len, q->eof), AB_REQUEST_RESIZE (q->rows, q->cols) or
 * AB_REQUEST_SIGNAL (q->signo), to r (NULL: no request has the target).
 * 1 when done; 0 for a stdin whose data waits for the command to read it
 * (the event AB_EVENT_STDIN of r says when, or why not); -ESRCH when r is
 * NULL or not a command that runs (a layer op, or one that ended);
 * -EAGAIN when r waits and has not started; else the session's negative
 * errno with e saying why (-EBUSY: a stdin is being written, -EPIPE: its
 * stdin or terminal is closed, -EINVAL). The codec says each in its words. */
int ab_front_input(struct ab_front *f, struct ab_front_req *r, const struct ab_request *q,
		   struct ab_error *e);
/* Start what waits and may start now (the codec calls it after making
 * room in its backlog outside a step). */
void ab_front_start(struct ab_front *f);
/* A layer op runs: a codec whose requests must wait for it (serve's). */
bool ab_front_layer_busy(const struct ab_front *f);

#endif
