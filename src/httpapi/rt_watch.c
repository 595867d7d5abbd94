/* agentbox runtime's GET /agentbox/v1/watch?path=P&recursive=BOOL: the
 * engine's watch (the file operation "watch", watch/watch.h) as a stream
 * of NDJSON, one line per event as the protocol's event message words it
 * without its type and id ({"event","path","dir"[,"from"]}, the first
 * "ready"), and a last line for its end: the protocol's result without its
 * type, id and op ({"events","cancelled","timed_out"}) or its error
 * ({"code","message"}, sandboxd's body). A path that cannot be watched is
 * a status before any line (404, 400, 403). The body is chunked and ends
 * when the watch does; the client ends it by closing the connection.
 *
 * While nothing is there to send the connection is suspended (from the
 * content reader, which libmicrohttpd allows), so it neither spins nor
 * times out; each event resumes it. At most WATCH_HTTP_MAX bytes wait for
 * a slow client: past that events are dropped and one {"event":
 * "overflow"} line says so, never silence. A suspended connection is not
 * polled by the daemon, so a client that went away would go unseen until
 * the next event: rt_watch_sweep looks at each one's socket twice a second
 * (POLLRDHUP) and ends the watch of a client that closed it. */
#include <errno.h>
#include <poll.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "httpapi/rt_int.h"
#include "lex/rtpath.h"
#include "util/error.h"

#define WATCH_HTTP_MAX (1u << 20)

/* line (taken, a JSON object) appended to r's stream; forced: whatever
 * waits (its end) */
static void put_line(struct req *r, json_object *o, bool forced)
{
	char *s = rt_json_line(o);
	size_t n = s ? strlen(s) : 0;
	if (!s)
		return;
	if (!forced && r->wlen - r->woff + n > WATCH_HTTP_MAX) {
		free(s);
		if (!r->woverflow) { /* said once, forced past the bound */
			r->woverflow = true;
			json_object *ov = json_object_new_object();
			json_object_object_add(ov, "event", json_object_new_string("overflow"));
			put_line(r, ov, true);
		}
		return;
	}
	if (r->woff && r->woff == r->wlen)
		r->woff = r->wlen = 0;
	if (r->wlen + n > r->wcap) {
		size_t cap = r->wcap ? r->wcap : 4096;
		while (cap < r->wlen + n)
			cap *= 2;
		char *b = realloc(r->wbuf, cap);
		if (!b) {
			free(s);
			return;
		}
		r->wbuf = b;
		r->wcap = cap;
	}
	memcpy(r->wbuf + r->wlen, s, n);
	r->wlen += n;
	free(s);
}

static ssize_t watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct req *r = cls;
	(void)pos;
	if (r->woff < r->wlen) {
		size_t n = r->wlen - r->woff < max ? r->wlen - r->woff : max;
		memcpy(buf, r->wbuf + r->woff, n);
		r->woff += n;
		if (r->woff == r->wlen) {
			r->woff = r->wlen = 0;
			r->woverflow = false; /* drained: the next drop is said again */
		}
		return (ssize_t)n;
	}
	if (r->wended || !r->conn)
		return MHD_CONTENT_READER_END_OF_STREAM;
	MHD_suspend_connection(r->conn); /* until the next event (rt_req_resume) */
	r->suspended = true;
	return 0;
}

struct MHD_Response *rt_watch_response(struct req *r)
{
	struct MHD_Response *resp =
		MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, watch_read, r, NULL);
	if (resp) {
		MHD_add_response_header(resp, "Content-Type", "application/x-ndjson");
		MHD_add_response_header(resp, "Cache-Control", "no-store");
	}
	return resp;
}

void rt_watch_start(struct rt *rt, struct req *r)
{
	const char *path = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "path");
	const char *rec = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "recursive");
	bool recursive = rec && (!*rec || !strcmp(rec, "true") || !strcmp(rec, "1"));
	if (rec && !recursive && strcmp(rec, "false") && strcmp(rec, "0")) {
		char m[200];
		snprintf(m, sizeof(m), "recursive \"%.64s\" must be true or false", rec);
		rt_answer_msg(r, MHD_HTTP_BAD_REQUEST, m);
		return;
	}
	/* the query's value percent-decoded (the daemon decodes nothing: its
	 * no_unescape), then as the protocol's watch takes it: in the view,
	 * /workspace when absent */
	size_t n = path ? strlen(path) : 0, dl = 0;
	char *dec = malloc(n + 1);
	if (!dec || (path && ab_rtpath_unquote(path, n, dec, &dl) < 0)) {
		free(dec);
		rt_answer_msg(r, dec ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_INTERNAL_SERVER_ERROR,
			      "path must be a path without NUL bytes");
		return;
	}
	json_object *fields = json_object_new_object();
	json_object_object_add(fields, "path", json_object_new_string(path ? dec : BASE));
	free(dec);
	json_object_object_add(fields, "recursive", json_object_new_boolean(recursive));
	r->fr.no_wait = true; /* a slot now, or 429: a watch holds it until it ends */
	rt_submit_op(rt, r, false, "watch", fields);
}

void rt_watch_event(struct req *r, const struct ab_watch_event *ev)
{
	if (!r->conn)
		return;
	if (ev->kind == AB_WATCH_READY && !r->wstream) { /* the stream begins: 200 */
		r->wstream = true;
		r->status = MHD_HTTP_OK;
		r->step = S_DONE;
	}
	json_object *o = json_object_new_object();
	watch_event_fields(o, ev);
	put_line(r, o, false);
	rt_req_resume(r);
}

static unsigned status_of(enum ab_errc k)
{
	return k == AB_ERRC_FILE_NOT_FOUND	? MHD_HTTP_NOT_FOUND
	       : k == AB_ERRC_PERMISSION_DENIED ? MHD_HTTP_FORBIDDEN
	       : k == AB_ERRC_NOT_DIRECTORY || k == AB_ERRC_INVALID_PATH ||
			       k == AB_ERRC_INVALID_REQUEST
		       ? MHD_HTTP_BAD_REQUEST
	       : k == AB_ERRC_SHUTDOWN ? MHD_HTTP_SERVICE_UNAVAILABLE
				       : MHD_HTTP_INTERNAL_SERVER_ERROR;
}

void rt_watch_ended(struct rt *rt, struct req *r, const struct ab_event *ev)
{
	const struct watch_lines *w = r->fr.watch;
	const struct ab_result *res = ev->result;
	struct ab_error err = {0};
	if (ev->error)
		err = *ev->error;
	else if (w && w->failed)
		err = w->err;
	if (!r->wstream) { /* before it was ready: a status */
		unsigned st = rt->f.gone   ? MHD_HTTP_SERVICE_UNAVAILABLE
			      : err.msg[0] ? status_of(ab_error_errc(&err))
					   : MHD_HTTP_INTERNAL_SERVER_ERROR;
		rt_answer_msg(r, st, err.msg[0] ? err.msg : "the watch ended before it began");
		rt_req_resume(r);
		return;
	}
	json_object *o = json_object_new_object();
	if (err.msg[0]) {
		json_object_object_add(o, "code",
				       json_object_new_string(ab_errc_name(ab_error_errc(&err))));
		json_object_object_add(o, "message", json_object_new_string(err.msg));
	} else {
		json_object_object_add(o, "events",
				       json_object_new_int64(w ? (int64_t)w->events : 0));
		json_object_object_add(o, "cancelled", json_object_new_boolean(res->cancelled));
		json_object_object_add(o, "timed_out", json_object_new_boolean(res->timed_out));
	}
	put_line(r, o, true);
	r->wended = true;
	rt_req_resume(r);
}

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

void rt_watch_sweep(struct rt *rt, const struct rt_proto *http)
{
	static unsigned long long last;
	unsigned long long now = now_ms();
	if (now - last < 500)
		return;
	last = now;
	for (struct ab_front_req *fr = rt->f.head; fr; fr = fr->next) {
		struct req *r = (struct req *)fr;
		if (((struct rt_req_head *)fr)->proto != http || r->route != R_AB_WATCH ||
		    !r->wstream || !r->suspended || !r->conn)
			continue;
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct pollfd p = {.fd = ci ? ci->connect_fd : -1, .events = POLLRDHUP};
		if (p.fd < 0 || poll(&p, 1, 0) <= 0 ||
		    !(p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			continue;
		r->wended = true; /* its client closed: the stream ends, the watch with it */
		r->wlen = r->woff = 0;
		rt_req_resume(r);
	}
}
