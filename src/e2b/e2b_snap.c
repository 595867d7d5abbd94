/* agentbox e2b's snapshots and forks (docs/e2b.md, "Snapshots and fork"):
 * a snapshot is a checkpoint of its sandbox (docs/checkpoints.md), named
 * SANDBOX-sN; a sandbox made from it, and E2B's fork, are agentbox forks
 * of that sandbox, made by its launcher (the protocol's fork op on the
 * sandbox's link) and then taken on as the server's own sandboxes. A
 * sandbox killed while snapshots of it remain is retired instead: gone
 * from E2B's view, paused, kept until its last snapshot is deleted. */
#include "e2b/e2b_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detach/detach.h"
#include "util/error.h"

struct e2b_snap {
	struct e2b_snap *next;
	char id[E2B_SNAP_ID_MAX + 1];
	char sbx[64];  /* its sandbox's id */
	char ckpt[24]; /* the checkpoint's name there */
	char name[E2B_SNAP_NAME_MAX + 1];
};

static void reply_json(struct e2b_http *h, int status, json_object *o)
{
	size_t n;
	const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
	e2b_http_reply(h, status, NULL, s, n);
	json_object_put(o);
}

/* An error of the sandbox's (type "error"; NULL: the link went down) as
 * E2B's status: an unknown checkpoint 404, commands running 409, a
 * refused request 400, else 500. */
static int status_of(json_object *msg, const char **why)
{
	json_object *v;
	*why = "the sandbox's link is down";
	if (!msg)
		return 500;
	const char *code =
		json_object_object_get_ex(msg, "code", &v) ? json_object_get_string(v) : "";
	*why = json_object_object_get_ex(msg, "message", &v) ? json_object_get_string(v)
							     : "the sandbox refused";
	if (!strcmp(code, "not_found"))
		return 404;
	if (!strcmp(code, "busy"))
		return 409;
	if (!strcmp(code, "invalid_request"))
		return 400;
	return 500;
}

static bool is_error(json_object *msg)
{
	json_object *t;
	return !msg || !json_object_object_get_ex(msg, "type", &t) ||
	       strcmp(json_object_get_string(t), "result") != 0;
}

struct e2b_snap *e2b_snap_find(struct e2b *srv, const char *id)
{
	struct e2b_snap *named = NULL; /* the newest of that name (first: made last) */
	for (struct e2b_snap *p = srv->snaps; p; p = p->next) {
		if (!strcmp(p->id, id))
			return p;
		if (!named && p->name[0] && !strcmp(p->name, id))
			named = p;
	}
	return named;
}

int e2b_snaps_of(struct e2b *srv, const char *sbx)
{
	int n = 0;
	for (struct e2b_snap *p = srv->snaps; p; p = p->next)
		n += !strcmp(p->sbx, sbx);
	return n;
}

static json_object *snap_json(const struct e2b_snap *p)
{
	json_object *o = json_object_new_object(), *names = json_object_new_array();
	json_object_array_add(names, json_object_new_string(p->name[0] ? p->name : p->id));
	json_object_object_add(o, "snapshotID", json_object_new_string(p->id));
	json_object_object_add(o, "names", names);
	return o;
}

/* A snapshot whose sandbox is gone (it ended under the server: its
 * layers with it) is dropped. */
static void prune(struct e2b *srv)
{
	for (struct e2b_snap **pp = &srv->snaps; *pp;) {
		struct e2b_snap *p = *pp;
		if (!e2b_sbx_holder(srv, p->sbx)) {
			*pp = p->next;
			free(p);
		} else {
			pp = &p->next;
		}
	}
}

/* ---- a snapshot: the checkpoint op ---- */

struct snap_req {
	struct e2b_http *h; /* NULL: the client went */
	struct e2b *srv;
	char sbx[64], ckpt[24];
	char name[E2B_SNAP_NAME_MAX + 1];
};

/* The client went: data (a snap_req or a fork_req, whose first member is
 * its request) is freed by the sandbox's answer, which replies to no one. */
static void req_gone(struct e2b_http *h, void *data)
{
	(void)h;
	*(struct e2b_http **)data = NULL;
}

static void checkpointed(void *arg, json_object *msg, bool last)
{
	struct snap_req *r = arg;
	if (!last)
		return;
	const char *why;
	int status = status_of(msg, &why);
	struct e2b_snap *p = is_error(msg) ? NULL : calloc(1, sizeof(*p));
	if (p) { /* kept even when the client went: listed, deletable */
		snprintf(p->id, sizeof(p->id), "%s-%s", r->sbx, r->ckpt);
		memcpy(p->sbx, r->sbx, sizeof(p->sbx));
		memcpy(p->ckpt, r->ckpt, sizeof(p->ckpt));
		memcpy(p->name, r->name, sizeof(p->name));
		p->next = r->srv->snaps;
		r->srv->snaps = p;
	}
	if (r->h && p)
		reply_json(r->h, 201, snap_json(p));
	else if (r->h)
		e2b_http_error(r->h, is_error(msg) ? status : 500, "cannot snapshot: %s",
			       msg && is_error(msg) ? why : "out of memory");
	free(r);
}

/* A name: 1 to E2B_SNAP_NAME_MAX of letters, digits and ._-/: (E2B's
 * team/name:tag). */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > E2B_SNAP_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:",
			    *s))
			return false;
	return true;
}

void e2b_snap_create(struct e2b_http *h, struct e2b_sbx *s, json_object *body)
{
	json_object *n = json_object_object_get(body, "name");
	if (n && !(json_object_is_type(n, json_type_string) && name_ok(json_object_get_string(n))))
		return e2b_http_error(h, 400, "name: 1 to %d of letters, digits and . _ - / :",
				      E2B_SNAP_NAME_MAX);
	if (s->paused)
		return e2b_http_error(h, 409, "sandbox %s is paused: resume it first", s->id);
	struct snap_req *r = calloc(1, sizeof(*r));
	if (!r)
		return e2b_http_error(h, 500, "out of memory");
	r->h = h;
	r->srv = s->srv;
	snprintf(r->sbx, sizeof(r->sbx), "%s", s->id);
	snprintf(r->ckpt, sizeof(r->ckpt), "s%ld", ++s->srv->next_snap);
	if (n)
		snprintf(r->name, sizeof(r->name), "%s", json_object_get_string(n));
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("checkpoint"));
	json_object_object_add(req, "name", json_object_new_string(r->ckpt));
	if (e2b_sbx_request(s, req, checkpointed, r) < 0) {
		free(r);
		return e2b_http_error(h, 500, "the sandbox's link is down");
	}
	e2b_http_set_data(h, r, req_gone);
}

void e2b_snap_list(struct e2b_http *h)
{
	struct e2b *srv = h->conn->srv;
	const char *sbx = e2b_http_query(h, "sandboxID"), *name = e2b_http_query(h, "name");
	prune(srv);
	json_object *a = json_object_new_array();
	for (struct e2b_snap *p = srv->snaps; p; p = p->next) {
		if (sbx && strcmp(sbx, p->sbx))
			continue;
		if (name && strcmp(name, p->id) && strcmp(name, p->name))
			continue;
		json_object_array_add(a, snap_json(p));
	}
	reply_json(h, 200, a);
}

void e2b_snap_delete(struct e2b_http *h, const char *id)
{
	struct e2b *srv = h->conn->srv;
	prune(srv);
	for (struct e2b_snap **pp = &srv->snaps; *pp; pp = &(*pp)->next) {
		struct e2b_snap *p = *pp;
		if (strcmp(p->id, id))
			continue;
		*pp = p->next;
		struct e2b_sbx *s = e2b_sbx_holder(srv, p->sbx);
		/* a retired sandbox goes with its last snapshot */
		if (s && s->retired && !e2b_snaps_of(srv, p->sbx))
			e2b_sbx_kill(s);
		free(p);
		return e2b_http_reply(h, 204, NULL, "", 0);
	}
	e2b_http_error(h, 404, "snapshot %s not found", id);
}

/* ---- forks: the fork op, its sandboxes taken on ---- */

struct fork_req {
	struct e2b_http *h; /* NULL: the client went */
	struct e2b *srv;
	char parent[64];
	struct e2b_fork_opts o;
	e2b_forked_fn done;
};

static void fork_req_free(struct fork_req *r)
{
	json_object_put(r->o.metadata);
	json_object_put(r->o.envs);
	free(r);
}

/* Each of ids taken on, or none: those taken on killed, the others
 * stopped. The number taken on into *out (n of them), or -1. */
static int take_on(struct fork_req *r, json_object *ids, struct e2b_sbx **out, size_t n,
		   struct ab_error *err)
{
	struct e2b_sbx *parent = e2b_sbx_holder(r->srv, r->parent);
	size_t i = 0;
	for (; parent && i < n; i++) {
		const char *id = json_object_get_string(json_object_array_get_idx(ids, i));
		if (!id || !detach_id_valid(id) ||
		    !(out[i] = e2b_sbx_adopt(parent, id, &r->o, err)))
			break;
	}
	if (parent && i == n)
		return 0;
	if (!parent)
		ab_error_plain(err, ENOENT, "the sandbox ended during the fork");
	for (size_t j = 0; j < n; j++) {
		const char *id = json_object_get_string(json_object_array_get_idx(ids, j));
		if (j < i)
			e2b_sbx_kill(out[j]);
		else if (id && detach_id_valid(id) && (j > i || !parent)) { /* i: stopped */
			json_object *reply = NULL;
			struct ab_error e2 = {0};
			detach_ctl(r->srv->root, id, "stop", &reply, &e2);
			json_object_put(reply);
		}
	}
	return -1;
}

static void forked(void *arg, json_object *msg, bool last)
{
	struct fork_req *r = arg;
	if (!last)
		return;
	const char *why;
	int status = status_of(msg, &why);
	json_object *ids = is_error(msg) ? NULL : json_object_object_get(msg, "ids");
	size_t n = json_object_is_type(ids, json_type_array) ? json_object_array_length(ids) : 0;
	struct e2b_sbx **made = n ? calloc(n, sizeof(*made)) : NULL;
	struct ab_error err = {0};
	if (!is_error(msg) && (!made || take_on(r, ids, made, n, &err) < 0)) {
		status = 500;
		why = made ? err.msg : "no sandboxes in the sandbox's answer";
		free(made);
		made = NULL;
		n = 0;
	}
	if (r->h)
		r->done(r->h, made, made ? n : 0, made ? NULL : why, status);
	free(made);
	fork_req_free(r);
}

void e2b_snap_fork(struct e2b_http *h, struct e2b_sbx *parent, const char *from, int count,
		   const struct e2b_fork_opts *o, e2b_forked_fn done)
{
	if (parent->paused && !parent->retired)
		return e2b_http_error(h, 409, "sandbox %s is paused: resume it first", parent->id);
	struct fork_req *r = calloc(1, sizeof(*r));
	if (!r)
		return e2b_http_error(h, 500, "out of memory");
	r->h = h;
	r->srv = parent->srv;
	r->done = done;
	r->o = *o;
	json_object_get(o->metadata);
	json_object_get(o->envs);
	snprintf(r->parent, sizeof(r->parent), "%s", parent->id);
	char name[24] = "i";
	e2b_random_hex(name + 1, 20);
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("fork"));
	json_object_object_add(req, "count", json_object_new_int(count));
	json_object_object_add(req, "name", json_object_new_string(name));
	if (from)
		json_object_object_add(req, "from", json_object_new_string(from));
	if (e2b_sbx_request(parent, req, forked, r) < 0) {
		fork_req_free(r);
		return e2b_http_error(h, 500, "the sandbox's link is down");
	}
	e2b_http_set_data(h, r, req_gone);
}

void e2b_snap_fork_from(struct e2b_http *h, struct e2b_snap *p, const struct e2b_fork_opts *o,
			e2b_forked_fn done)
{
	struct e2b_sbx *s = e2b_sbx_holder(h->conn->srv, p->sbx);
	if (!s)
		return e2b_http_error(h, 404, "snapshot %s: its sandbox has ended", p->id);
	e2b_snap_fork(h, s, p->ckpt, 1, o, done);
}

void e2b_snaps_end(struct e2b *srv)
{
	while (srv->snaps) {
		struct e2b_snap *p = srv->snaps;
		srv->snaps = p->next;
		free(p);
	}
}
