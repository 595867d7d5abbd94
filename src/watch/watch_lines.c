/* File events, the launcher's half (watch.h): the lines a watch's shim
 * writes, split and checked field by field (they come from inside the
 * sandbox: a line not of the form is the end of the stream, never
 * believed), each handed on as a typed event. */
#include "watch/watch.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static const char *const names[] = {
	[AB_WATCH_READY] = "ready",	  [AB_WATCH_CREATED] = "created",
	[AB_WATCH_WRITTEN] = "written",	  [AB_WATCH_REMOVED] = "removed",
	[AB_WATCH_RENAMED] = "renamed",	  [AB_WATCH_ATTRIB] = "attributes",
	[AB_WATCH_OVERFLOW] = "overflow",
};

const char *watch_kind_name(enum ab_watch_kind k)
{
	return (size_t)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

void watch_event_fields(json_object *o, const struct ab_watch_event *ev)
{
	json_object_object_add(o, "event", json_object_new_string(watch_kind_name(ev->kind)));
	if (ev->path)
		json_object_object_add(o, "path", json_object_new_string(ev->path));
	if (ev->from)
		json_object_object_add(o, "from", json_object_new_string(ev->from));
	if (ev->kind != AB_WATCH_OVERFLOW)
		json_object_object_add(o, "dir", json_object_new_boolean(ev->dir));
}

/* A path of the view: absolute, no NUL, at most 4095 bytes. */
static const char *view_path(json_object *o, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	const char *s = json_object_get_string(v);
	size_t n = (size_t)json_object_get_string_len(v);
	return n && n <= 4095 && s[0] == '/' && strlen(s) == n ? s : NULL;
}

/* The error line: its code (a file error's) and message. */
static bool error_line(struct watch_lines *w, json_object *o)
{
	json_object *er, *c, *m;
	if (!json_object_object_get_ex(o, "error", &er) ||
	    !json_object_object_get_ex(er, "code", &c) ||
	    !json_object_object_get_ex(er, "message", &m) ||
	    !json_object_is_type(c, json_type_string) || !json_object_is_type(m, json_type_string))
		return false;
	enum ab_errc k = ab_errc_by_name(json_object_get_string(c));
	if (k != AB_ERRC_FILE_NOT_FOUND && k != AB_ERRC_NOT_DIRECTORY &&
	    k != AB_ERRC_PERMISSION_DENIED && k != AB_ERRC_INTERNAL)
		return false;
	const char *msg = json_object_get_string(m);
	if (msg[0])
		ab_error_proto(&w->err, k, "%.400s", msg);
	else /* an empty message (or one that starts with NUL) still says why */
		ab_error_proto(&w->err, k, "watch: the watcher in the sandbox failed (%s)",
			       ab_errc_name(k));
	w->failed = true;
	return true;
}

/* The whole of n bytes as one JSON value, or NULL. */
static json_object *parse(const char *s, size_t n)
{
	json_tokener *t = json_tokener_new();
	if (!t)
		return NULL;
	json_object *o = json_tokener_parse_ex(t, s, (int)n);
	if (o && json_tokener_get_parse_end(t) != n) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(t);
	return o;
}

static bool one(struct watch_lines *w, const char *line, size_t n, watch_event_fn *fn, void *arg)
{
	json_object *o = parse(line, n);
	bool ok = false;
	if (!o || !json_object_is_type(o, json_type_object))
		goto out;
	json_object *e;
	if (!json_object_object_get_ex(o, "e", &e)) {
		ok = error_line(w, o);
		goto out;
	}
	struct ab_watch_event ev = {0};
	const char *name = json_object_get_string(e);
	size_t k = 0;
	while (k < sizeof(names) / sizeof(names[0]) && strcmp(names[k], name))
		k++;
	if (k == sizeof(names) / sizeof(names[0]) || !json_object_is_type(e, json_type_string))
		goto out;
	ev.kind = (enum ab_watch_kind)k;
	json_object *d;
	ev.dir = json_object_object_get_ex(o, "d", &d) && json_object_get_boolean(d);
	if (ev.kind != AB_WATCH_OVERFLOW && !(ev.path = view_path(o, "p")))
		goto out;
	if (ev.kind == AB_WATCH_RENAMED && !(ev.from = view_path(o, "f")))
		goto out;
	if (ev.kind != AB_WATCH_READY)
		w->events++;
	fn(&ev, arg);
	ok = true;
out:
	json_object_put(o);
	return ok;
}

void watch_lines_feed(struct watch_lines *w, const char *data, size_t len, watch_event_fn *fn,
		      void *arg)
{
	while (len && !w->failed) {
		const char *nl = memchr(data, '\n', len);
		size_t take = nl ? (size_t)(nl - data) : len;
		if (w->len + take > WATCH_LINE_MAX) {
			ab_error_proto(&w->err, AB_ERRC_INTERNAL,
				       "watch: the sandbox sent a line too long");
			w->failed = true;
			return;
		}
		if (!w->buf && !(w->buf = malloc(WATCH_LINE_MAX + 1))) {
			ab_error_proto(&w->err, AB_ERRC_INTERNAL, "watch: out of memory");
			w->failed = true;
			return;
		}
		memcpy(w->buf + w->len, data, take);
		w->len += take;
		data += take + (nl ? 1 : 0);
		len -= take + (nl ? 1 : 0);
		if (!nl)
			return;
		bool ok = one(w, w->buf, w->len, fn, arg);
		w->len = 0;
		if (!ok && !w->failed) {
			ab_error_proto(&w->err, AB_ERRC_INTERNAL,
				       "watch: the sandbox sent a malformed event");
			w->failed = true;
		}
	}
}

void watch_lines_free(struct watch_lines *w)
{
	free(w->buf);
	*w = (struct watch_lines){0};
}
