/* The engine's calls that reach the session (front_link.h): in process,
 * or over the link to the session's process. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/front.h"
#include "front/front_link.h"
#include "front/netop.h"
#include "layer/layer.h"
#include "session/session_port.h"
#include "util/base64.h"
#include "util/error.h"

static const char *str_of(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v)
		       : "";
}

static bool bool_of(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

static void add_int(json_object *o, const char *key, long long v)
{
	json_object_object_add(o, key, json_object_new_int64(v));
}

/* ---- the engine's calls that reach the session ---- */

const char *ab_front_id(struct ab_front *f)
{
	return f->link ? f->link->id : ab_session_id(f->s);
}

bool ab_front_has_net(struct ab_front *f)
{
	return f->link ? f->link->net : ab_session_net_report(f->s) != NULL;
}

bool ab_front_has_layer(struct ab_front *f)
{
	return f->link ? f->link->layer : ab_session_layer(f->s) != NULL;
}

/* net or port, over the link: the other process's reply */
static json_object *link_op(struct ab_front *f, const char *op, json_object *req,
			    struct ab_error *err)
{
	json_object *o = front_link_msg(op);
	json_object_object_add(o, "req", json_object_get(req));
	json_object *r = front_link_call(f->link, o, err), *reply = NULL;
	if (r && front_link_rc(r, err) == 0 && json_object_object_get_ex(r, "reply", &reply))
		json_object_get(reply);
	json_object_put(r);
	return reply;
}

json_object *ab_front_net_op(struct ab_front *f, json_object *req, struct ab_error *err)
{
	return f->link ? link_op(f, "net", req, err) : ab_net_op(f->s, req, err);
}

json_object *ab_front_port_op(struct ab_front *f, json_object *req, struct ab_error *err)
{
	return f->link ? link_op(f, "port", req, err) : ab_session_port(f->s, req, err);
}

int ab_front_stdin(struct ab_front *f, unsigned long long tag, const char *data, size_t len,
		   bool eof, struct ab_error *err)
{
	if (!f->link)
		return ab_session_stdin(f->s, tag, data, len, eof, err);
	char *b = base64_encode(data ? data : "", len);
	if (!b)
		return ab_error_plain(err, ENOMEM, "out of memory");
	json_object *o = front_link_msg("stdin");
	add_int(o, "tag", (long long)tag);
	json_object_object_add(o, "data", json_object_new_string(b));
	json_object_object_add(o, "eof", json_object_new_boolean(eof));
	free(b);
	json_object *r = front_link_call(f->link, o, err);
	int rc = r ? front_link_rc(r, err) : -EPIPE;
	json_object_put(r);
	return rc;
}

int ab_front_signal(struct ab_front *f, unsigned long long tag, int sig)
{
	if (!f->link)
		return ab_session_signal(f->s, tag, sig);
	json_object *o = front_link_msg("signal");
	add_int(o, "tag", (long long)tag);
	add_int(o, "signo", sig);
	struct ab_error e = {0};
	json_object *r = front_link_call(f->link, o, &e);
	int rc = r ? front_link_rc(r, NULL) : -EPIPE;
	json_object_put(r);
	return rc;
}

int ab_front_resize(struct ab_front *f, unsigned long long tag, unsigned rows, unsigned cols,
		    struct ab_error *err)
{
	if (!f->link)
		return ab_session_resize(f->s, tag, rows, cols, err);
	json_object *o = front_link_msg("resize");
	add_int(o, "tag", (long long)tag);
	add_int(o, "rows", rows);
	add_int(o, "cols", cols);
	json_object *r = front_link_call(f->link, o, err);
	int rc = r ? front_link_rc(r, err) : -EPIPE;
	json_object_put(r);
	return rc;
}

void ab_front_pause_output(struct ab_front *f, bool pause)
{
	if (!f->link) {
		ab_session_pause_output(f->s, pause);
		return;
	}
	json_object *o = front_link_msg("pause");
	json_object_object_add(o, "on", json_object_new_boolean(pause));
	front_link_send(f->link, o);
}

int ab_front_discard(struct ab_front *f, json_object **reply, char *old, size_t old_size,
		     struct ab_error *err)
{
	*reply = NULL;
	snprintf(old, old_size, "%s", ab_front_id(f));
	if (f->link) {
		json_object *r = front_link_call(f->link, front_link_msg("discard"), err),
			    *v = NULL;
		int rc = r ? front_link_rc(r, err) : -EPIPE;
		if (rc == 0 && json_object_object_get_ex(r, "reply", &v)) {
			*reply = json_object_get(v);
			snprintf(f->link->id, sizeof(f->link->id), "%s", str_of(r, "id"));
		} else if (r && bool_of(r, "gone")) {
			ab_front_gone(f, "%s", err->msg);
			rc = -2;
		} else
			rc = -1;
		json_object_put(r);
		return rc == 0 ? 0 : rc == -2 ? -2 : -1;
	}
	bool end = false;
	if (layer_session_op(ab_session_layer(f->s), "discard", NULL, reply, &end, err) < 0)
		return -1;
	if (ab_front_replace_session(f, err) < 0) { /* its layer removed with it */
		ab_front_gone(f,
			      "The sandbox has ended: discard removed it and a new one could not "
			      "be built: %.150s",
			      err->msg);
		json_object_put(*reply);
		*reply = NULL;
		return -2;
	}
	return 0;
}

int ab_front_input(struct ab_front *f, struct ab_front_req *r, const struct ab_request *q,
		   struct ab_error *e)
{
	if (!r || (!f->s && !f->link))
		return -ESRCH;
	if (!r->running)
		return -EAGAIN;
	int rc;
	switch (q->kind) {
	case AB_REQUEST_STDIN:
		return ab_front_stdin(f, r->tag, q->data, q->data_len, q->eof, e);
	case AB_REQUEST_RESIZE:
		rc = ab_front_resize(f, r->tag, q->rows, q->cols, e);
		break;
	case AB_REQUEST_SIGNAL:
		rc = ab_front_signal(f, r->tag, q->signo);
		if (rc < 0 && rc != -ESRCH)
			ab_error_plain(e, -rc, "%s", strerror(-rc));
		break;
	default:
		return ab_error_plain(e, EINVAL, "%s: not a running command's input",
				      q->op ? q->op : "input");
	}
	return rc < 0 ? rc : 1;
}
