/* envd's watches (docs/e2b.md "Files"): WatchDir, a server stream, and
 * the watcher API (CreateWatcher, GetWatcherEvents, RemoveWatcher), whose
 * events wait in the server until fetched. Each is one `watch` request on
 * the sandbox's link (docs/protocol.md), its events mapped to fsnotify's
 * as envd sends them: created CREATE, written WRITE, removed REMOVE,
 * renamed RENAME of the old name then CREATE of the new, attributes
 * CHMOD; a name is the path below the watched directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "e2b/e2b_fs_int.h"

struct watch {
	struct e2b_sbx *sbx; /* NULL once the sandbox's link broke */
	char sbx_id[64];
	long h; /* the watch request, 0 once it ended */
	char root[4200];
	bool include_entry;
	bool stream;	       /* WatchDir; else a watcher */
	struct e2b_call *call; /* WatchDir's call, or CreateWatcher's until ready */
	/* a watcher's */
	char id[40];
	json_object *events;
	size_t nevents;
	bool ended;
	char end_code[32];
	char end_msg[256];
	struct watch *next;
};

static struct watch *watchers;
static int nwatchers;

static void ignore(void *arg, json_object *msg, bool last)
{
	(void)arg;
	(void)msg;
	(void)last;
}

static void cancel(struct watch *w)
{
	if (w->h <= 0 || !w->sbx)
		return;
	char target[32];
	e2b_sbx_req_id(w->h, target, sizeof(target));
	e2b_sbx_forget(w->sbx, w->h);
	w->h = 0;
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("cancel"));
	json_object_object_add(req, "target", json_object_new_string(target));
	long h = e2b_sbx_request(w->sbx, req, ignore, NULL);
	if (h > 0)
		e2b_sbx_forget(w->sbx, h);
}

static void watcher_free(struct watch *w)
{
	for (struct watch **p = &watchers; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			nwatchers--;
			break;
		}
	cancel(w);
	json_object_put(w->events);
	free(w);
}

static const char *str(json_object *o, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
}

static const char *rel(const struct watch *w, const char *p)
{
	size_t n = strlen(w->root);
	while (n > 1 && w->root[n - 1] == '/')
		n--;
	if (!strncmp(p, w->root, n) && p[n] == '/')
		return p + n + 1;
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static void add_event(struct watch *w, json_object *arr, const char *type, const char *path,
		      bool dir, bool entry)
{
	json_object *ev = json_object_new_object();
	json_object_object_add(ev, "name", json_object_new_string(rel(w, path)));
	json_object_object_add(ev, "type", json_object_new_string(type));
	if (entry && w->include_entry) {
		char out[8192];
		const char *s = strrchr(path, '/');
		json_object *e = json_object_new_object();
		json_object_object_add(e, "name", json_object_new_string(s ? s + 1 : path));
		json_object_object_add(
			e, "type",
			json_object_new_string(dir ? "FILE_TYPE_DIRECTORY" : "FILE_TYPE_FILE"));
		json_object_object_add(
			e, "path",
			json_object_new_string(e2b_path_out(path, out, sizeof(out)) < 0 ? path
											: out));
		json_object_object_add(ev, "entry", e);
	}
	json_object_array_add(arr, ev);
}

/* The FilesystemEvents of one agentbox event (an array, maybe empty). */
static json_object *events_of(struct watch *w, json_object *msg)
{
	json_object *arr = json_object_new_array(), *v;
	const char *ev = str(msg, "event"), *path = str(msg, "path"), *from = str(msg, "from");
	bool dir = json_object_object_get_ex(msg, "dir", &v) && json_object_get_boolean(v);
	if (!ev || !path)
		return arr;
	if (!strcmp(ev, "created"))
		add_event(w, arr, "EVENT_TYPE_CREATE", path, dir, true);
	else if (!strcmp(ev, "written"))
		add_event(w, arr, "EVENT_TYPE_WRITE", path, dir, true);
	else if (!strcmp(ev, "removed"))
		add_event(w, arr, "EVENT_TYPE_REMOVE", path, dir, false);
	else if (!strcmp(ev, "attributes"))
		add_event(w, arr, "EVENT_TYPE_CHMOD", path, dir, true);
	else if (!strcmp(ev, "renamed")) {
		if (from)
			add_event(w, arr, "EVENT_TYPE_RENAME", from, dir, false);
		add_event(w, arr, "EVENT_TYPE_CREATE", path, dir, true);
	}
	return arr;
}

static void on_event(void *arg, json_object *msg, bool last)
{
	struct watch *w = arg;
	if (last)
		w->h = 0;
	const char *type = msg ? str(msg, "type") : NULL;
	const char *code = NULL, *m = NULL;
	if (!msg) {
		w->sbx = NULL;
		code = E2B_UNAVAILABLE;
		m = "the sandbox ended";
	} else if (type && !strcmp(type, "error")) {
		code = e2b_fs_code(str(msg, "code"));
		if (!strcmp(str(msg, "code") ? str(msg, "code") : "", "not_directory"))
			code = E2B_INVALID_ARGUMENT;
		m = str(msg, "message");
	} else if (type && !strcmp(type, "event")) {
		const char *ev = str(msg, "event");
		if (ev && !strcmp(ev, "ready")) {
			if (w->stream) {
				json_object *start = json_object_new_object();
				json_object_object_add(start, "start", json_object_new_object());
				e2b_call_send(w->call, start);
			} else if (w->call) {
				struct e2b_call *c = w->call;
				w->call = NULL;
				json_object *r = json_object_new_object();
				json_object_object_add(r, "watcherId",
						       json_object_new_string(w->id));
				e2b_call_reply(c, r);
			}
			return;
		}
		json_object *evs = events_of(w, msg);
		size_t n = json_object_array_length(evs);
		for (size_t i = 0; i < n; i++) {
			json_object *e = json_object_get(json_object_array_get_idx(evs, i));
			if (w->stream) {
				json_object *out = json_object_new_object();
				json_object_object_add(out, "filesystem", e);
				e2b_call_send(w->call, out);
			} else if (w->nevents < 65536) {
				json_object_array_add(w->events, e);
				w->nevents++;
			} else
				json_object_put(e); /* bounded: the oldest are kept */
		}
		json_object_put(evs);
		return;
	}
	if (!last)
		return;
	/* the watch ended: with an error, or a result (cancelled, timed out) */
	if (w->stream) {
		if (code)
			e2b_call_error(w->call, code, "%s", m ? m : "the watch ended");
		else
			e2b_call_end(w->call);
		return; /* gone freed w */
	}
	if (w->call) { /* before ready: CreateWatcher fails, the watcher goes */
		struct e2b_call *c = w->call;
		e2b_call_error(c, code ? code : E2B_INTERNAL, "%s", m ? m : "the watch ended");
		return; /* gone freed w */
	}
	w->ended = true;
	snprintf(w->end_code, sizeof(w->end_code), "%s", code ? code : "");
	snprintf(w->end_msg, sizeof(w->end_msg), "%s", m ? m : "");
}

static void stream_gone(struct e2b_call *c, void *data)
{
	(void)c;
	struct watch *w = data;
	cancel(w);
	free(w);
}

static void create_gone(struct e2b_call *c, void *data)
{
	struct watch *w = data;
	if (w->call == c) { /* the client left (or failed) before ready */
		w->call = NULL;
		watcher_free(w);
	}
}

static void keepalive(struct e2b_call *c, void *data)
{
	(void)data;
	json_object *k = json_object_new_object();
	json_object_object_add(k, "keepalive", json_object_new_object());
	e2b_call_send(c, k);
}

static struct watch *start(struct e2b_call *c, bool stream)
{
	json_object *req = e2b_call_req(c), *v;
	struct watch *w = calloc(1, sizeof(*w));
	if (!w) {
		e2b_call_error(c, E2B_INTERNAL, "out of memory");
		return NULL;
	}
	if (!e2b_fs_path(c, req, "path", w->root, sizeof(w->root))) {
		free(w);
		return NULL;
	}
	w->sbx = e2b_call_sbx(c);
	snprintf(w->sbx_id, sizeof(w->sbx_id), "%s", e2b_sbx_id(w->sbx));
	w->stream = stream;
	w->call = c;
	w->include_entry =
		json_object_object_get_ex(req, "includeEntry", &v) && json_object_get_boolean(v);
	bool recursive =
		json_object_object_get_ex(req, "recursive", &v) && json_object_get_boolean(v);
	json_object *wr = json_object_new_object();
	json_object_object_add(wr, "op", json_object_new_string("watch"));
	json_object_object_add(wr, "path", json_object_new_string(w->root));
	json_object_object_add(wr, "recursive", json_object_new_boolean(recursive));
	if (stream) {
		e2b_call_set_data(c, w, stream_gone);
		const char *ka = e2b_call_header(c, "Keepalive-Ping-Interval");
		long s = ka ? strtol(ka, NULL, 10) : 0;
		e2b_call_set_tick(c, (int)(s > 0 && s <= 600 ? s : 50) * 1000, keepalive);
	} else {
		unsigned char rnd[16];
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
			json_object_put(wr);
			free(w);
			e2b_call_error(c, E2B_INTERNAL, "no random bytes for the watcher's id");
			return NULL;
		}
		for (size_t i = 0; i < sizeof(rnd); i++)
			snprintf(w->id + 2 * i, 3, "%02x", rnd[i]);
		w->events = json_object_new_array();
		w->next = watchers;
		watchers = w;
		nwatchers++;
		e2b_call_set_data(c, w, create_gone);
	}
	w->h = e2b_sbx_request(w->sbx, wr, on_event, w);
	if (w->h < 0) {
		w->h = 0;
		e2b_call_error(c, E2B_UNAVAILABLE, "the sandbox cannot be reached");
		return NULL;
	}
	return w;
}

void e2b_fs_watch_dir(struct e2b_call *c)
{
	start(c, true);
}

void e2b_fs_create_watcher(struct e2b_call *c)
{
	if (nwatchers >= 1024) {
		e2b_call_error(c, E2B_RESOURCE_EXHAUSTED, "too many watchers (1024): remove some");
		return;
	}
	start(c, false);
}

static struct watch *find_watcher(struct e2b_call *c)
{
	const char *id = str(e2b_call_req(c), "watcherId");
	for (struct watch *w = watchers; id && w; w = w->next)
		if (!strcmp(w->id, id) && !strcmp(w->sbx_id, e2b_sbx_id(e2b_call_sbx(c))) &&
		    !w->call)
			return w;
	e2b_call_error(c, E2B_NOT_FOUND, "watcher %s not found", id ? id : "(none)");
	return NULL;
}

void e2b_fs_get_watcher_events(struct e2b_call *c)
{
	struct watch *w = find_watcher(c);
	if (!w)
		return;
	if (w->ended && !w->nevents && w->end_code[0]) {
		e2b_call_error(c, w->end_code, "%s", w->end_msg);
		return;
	}
	json_object *r = json_object_new_object();
	json_object_object_add(r, "events", w->events);
	w->events = json_object_new_array();
	w->nevents = 0;
	e2b_call_reply(c, r);
}

void e2b_fs_remove_watcher(struct e2b_call *c)
{
	struct watch *w = find_watcher(c);
	if (!w)
		return;
	watcher_free(w);
	e2b_call_reply(c, NULL);
}
