/* File events of a path in the view (docs/protocol.md, "watch"), two
 * halves on two sides of the trust boundary:
 *   watch_run      inside, in a shim of the sandbox's pool (the file
 *                  operation "watch", fileop_run): inotify on the path
 *                  (and, recursive, every directory under it, those made
 *                  later too); one compact JSON line per event to out,
 *                  through a bounded queue: what does not fit is dropped
 *                  and an "overflow" line says so, never silence;
 *   watch_lines    launcher: those lines split, each checked (it comes
 *                  from inside: nothing in it is trusted) and handed on
 *                  as a typed event, which each codec words.
 * The line form (launcher and shim only, no client sees it):
 *   {"e":"ready","p":ROOT}  {"e":KIND,"p":PATH[,"d":true]}
 *   {"e":"renamed","p":NEW,"f":OLD[,"d":true]}  {"e":"overflow"}
 *   {"error":{"code":C,"message":M}}  (the last: the watch failed) */
#ifndef AB_WATCH_H
#define AB_WATCH_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"

#define WATCH_LINE_MAX	(3 * 4096 + 256) /* two paths, escaped, and the rest */
#define WATCH_QUEUE_MAX (1u << 20)	 /* bytes of events the shim holds */
#define WATCH_DIRS_MAX	65536		 /* directories one watch follows */

enum ab_watch_kind {
	AB_WATCH_READY,	   /* watching: every event from now on is reported */
	AB_WATCH_CREATED,  /* a file or directory made (or moved in) */
	AB_WATCH_WRITTEN,  /* a file closed after writing */
	AB_WATCH_REMOVED,  /* removed (or moved out) */
	AB_WATCH_RENAMED,  /* path is the new name, from the old */
	AB_WATCH_ATTRIB,   /* its mode, owner, times or extended attributes */
	AB_WATCH_OVERFLOW, /* events were dropped here */
};

struct ab_watch_event {
	enum ab_watch_kind kind;
	const char *path; /* in the view; NULL for overflow */
	const char *from; /* renamed: the old path */
	bool dir;
};

/* The name of a kind as the protocol says it ("created", ...). */
const char *watch_kind_name(enum ab_watch_kind k);
/* ev's fields as the protocol's event message has them ("event", "path",
 * "from", "dir"), added to o (every codec that words an event). */
void watch_event_fields(json_object *o, const struct ab_watch_event *ev);

/* Inside the sandbox: watch root (absolute in the view, a directory) and,
 * with recursive, every directory under it, writing lines to out until
 * out is closed or the process is killed (a cancel, the sandbox's end).
 * Returns nonzero after an error line when root cannot be watched. */
int watch_run(const char *root, bool recursive, int out);

/* Launcher: one watch's lines as they come. */
struct watch_lines {
	char *buf; /* a line not ended yet */
	size_t len;
	unsigned long long events; /* handed on, ready excluded */
	bool failed;		   /* the error line came, or a line was malformed */
	struct ab_error err;	   /* then: why (kind the protocol's code) */
};
typedef void watch_event_fn(const struct ab_watch_event *ev, void *arg);
/* The next len bytes of output: each whole line checked and handed to fn.
 * A malformed line (too long, not the form above) ends the stream: failed
 * set, err internal, what follows ignored. */
void watch_lines_feed(struct watch_lines *w, const char *data, size_t len, watch_event_fn *fn,
		      void *arg);
void watch_lines_free(struct watch_lines *w);

#endif
