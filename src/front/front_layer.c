/* The watchdog of the layer ops (front_layer.h). A review or a commit
 * reads what commands wrote, which is hostile: opened without blocking and
 * type-checked (layer_diff.c), it still could take long (a huge tree, a
 * slow disk) or, were a defect left, block. So it runs in a child of the
 * launcher, which dies with it (PR_SET_PDEATHSIG) and holds no fd but its
 * reply's pipe; the loop reads the reply as it comes, and at the bound
 * kills the child and answers with a timeout error. What a commit wrote
 * before it was stopped stays (each file is atomic, layer_commit.c). */
#include "front/front_layer.h"
#include "front/request.h"
#include "ckpt/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"
#include "util/util.h"

/* A reply bigger than this (diffs of many files) is refused. */
#define REPLY_MAX (256u << 20)

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

void front_layer_init(struct front_layer *j)
{
	*j = (struct front_layer){.fd = -1};
}

static json_object *error_obj(json_object *id, enum ab_errc code, const char *msg)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("error"));
	json_object_object_add(o, "id", id ? json_object_get(id) : NULL);
	json_object_object_add(o, "code", json_object_new_string(ab_errc_name(code)));
	json_object_object_add(o, "message", json_object_new_string(msg));
	return o;
}

/* A checkpoint op's errno as the protocol's code. */
static enum ab_errc ckpt_errc(int code)
{
	return code == EEXIST	? AB_ERRC_EXISTS
	       : code == ENOENT ? AB_ERRC_NOT_FOUND
	       : code == EINVAL ? AB_ERRC_INVALID_REQUEST
	       : code == EBUSY	? AB_ERRC_BUSY
	       : code == EDQUOT ? AB_ERRC_NO_SPACE
				: AB_ERRC_INTERNAL;
}

/* The reply's fields, or the error, as one line for the launcher. */
static json_object *child_op(struct ab_layer *l, const char *op, json_object *req)
{
	json_object *reply = NULL, *o = json_object_new_object();
	struct ab_error err = {0};
	bool end = false;
	/* a workspace on checkpoints: its stack merged, reviewed as one upper */
	bool stacked = strcmp(op, "discard") != 0 && ckpt_stacked(l);
	int r = stacked ? ckpt_review_prepare(l, &err) : 0;
	if (r == 0)
		r = layer_session_op(l, op, req, &reply, &end, &err);
	if (stacked && l->review_upper)
		ckpt_merge_remove(l);
	if (r < 0) {
		json_object *e = json_object_new_object();
		json_object_object_add(e, "code", json_object_new_int(layer_error_code(err.code)));
		json_object_object_add(e, "message", json_object_new_string(err.msg));
		json_object_object_add(o, "error", e);
	} else {
		json_object_object_add(o, "ok", reply);
	}
	return o;
}

/* A fork's: the sandboxes made (a child of the launcher: ckpt.h). */
static json_object *child_fork(struct front_layer *j, const struct ckpt_fork *f)
{
	json_object *o = json_object_new_object(), *ids = json_object_new_array();
	struct ab_error err = {0};
	/* what a sandbox's launcher starts with: no signal blocked or caught */
	sigset_t none;
	sigemptyset(&none);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (j->fork(j->fork_arg, f, ids, &err) < 0) {
		json_object *e = json_object_new_object();
		json_object_object_add(e, "code", json_object_new_int(ckpt_errc(err.code)));
		json_object_object_add(e, "message", json_object_new_string(err.msg));
		json_object_object_add(o, "error", e);
		json_object_put(ids);
	} else {
		json_object *r = json_object_new_object();
		json_object_object_add(r, "ids", ids);
		json_object_object_add(r, "from", json_object_new_string(f->from));
		json_object_object_add(o, "ok", r);
	}
	return o;
}

static void child(int fd, struct front_layer *j, struct ab_layer *l, const char *op,
		  json_object *req, const struct ckpt_fork *f)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGPIPE, SIG_DFL);
	/* a fork's: the tmpfs of /tmp and home whose layers the forks copy
	 * (ckpt.h), kept beside the reply's fd, close-on-exec */
	struct ckpt_fork fk = f ? *f : (struct ckpt_fork){0};
	int keep[AB_ARRAY_SIZE(fk.own)];
	fk.n_own = 0;
	for (size_t i = 0; f && l && i < l->n_own && fk.n_own < AB_ARRAY_SIZE(keep); i++)
		if (l->own[i].tree >= 0 &&
		    (keep[fk.n_own] = fcntl(l->own[i].tree, F_DUPFD_CLOEXEC, 64)) >= 0)
			fk.own[fk.n_own++] = (struct ckpt_fork_own){l->own[i].dst, -1};
	if (dup2(fd, FRONT_LAYER_REPLY_FD) < 0)
		_exit(1);
	for (size_t k = 0; k < fk.n_own; k++)
		fk.own[k].tree = dup3(keep[k], FRONT_LAYER_REPLY_FD + 1 + (int)k, O_CLOEXEC);
	/* the session's fds are none of its business */
	close_range(FRONT_LAYER_REPLY_FD + 1 + (unsigned)fk.n_own, ~0u, 0);
	json_object *o = f ? child_fork(j, &fk) : child_op(l, op, req);
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
								  JSON_C_TO_STRING_NOSLASHESCAPE);
	for (size_t n = strlen(s), off = 0; off < n;) {
		ssize_t w = write(FRONT_LAYER_REPLY_FD, s + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(1);
		off += (size_t)w;
	}
	_exit(0);
}

/* "timeout" in seconds, as an exec's: more than 0, at most 10000000. */
static int op_timeout(json_object *req, const char *op, unsigned long long *ms, char *msg, size_t n)
{
	*ms = FRONT_LAYER_TIMEOUT_MS;
	if (ab_request_timeout(req, false, ms) < 0) {
		snprintf(msg, n,
			 "%s: 'timeout' must be a number of seconds above 0, at most 10000000", op);
		return -EINVAL;
	}
	return 0;
}

int front_layer_start(struct front_layer *j, struct ab_layer *l, const char *op, json_object *req,
		      json_object *id, bool busy, json_object **reply, bool *end)
{
	char msg[256];
	unsigned long long ms = FRONT_LAYER_TIMEOUT_MS;
	struct ckpt_fork fk = {0}, *f = NULL;
	*reply = NULL;
	*end = false;
	if (!strcmp(op, "fork")) { /* checked, C found or taken here; made by a child */
		struct ab_error err = {0};
		if (!j->fork)
			ab_error_plain(&err, EINVAL,
				       "fork: only a detached sandbox (agentbox create) can be "
				       "forked: its launcher makes the new ones");
		if (!j->fork || ckpt_fork_prepare(l, req, busy, &fk, &err) < 0) {
			*reply = error_obj(id, ckpt_errc(err.code), err.msg);
			return 0;
		}
		f = &fk;
		goto start;
	}
	if (busy && ckpt_op_switches(op)) {
		snprintf(msg, sizeof(msg),
			 "%s: commands are running; a checkpoint or a restore is taken between "
			 "commands",
			 op);
		*reply = error_obj(id, AB_ERRC_BUSY, msg);
		return 0;
	}
	if (ckpt_op_fields(op) || ckpt_is_changes_since(op, req)) {
		/* a mount, or a walk of the layers above a checkpoint: answered here */
		json_object *o = NULL;
		struct ab_error err = {0};
		if (ckpt_session_op(l, op, req, &o, &err) < 0) {
			*reply = error_obj(id, ckpt_errc(err.code), err.msg);
			return 0;
		}
		json_object_object_add(o, "type", json_object_new_string("result"));
		json_object_object_add(o, "id", id ? json_object_get(id) : NULL);
		json_object_object_add(o, "op", json_object_new_string(op));
		*reply = o;
		return 0;
	}
	if (!l || strcmp(op, "discard") == 0 || op_timeout(req, op, &ms, msg, sizeof(msg)) < 0) {
		if (l && strcmp(op, "discard") != 0) {
			*reply = error_obj(id, AB_ERRC_INVALID_REQUEST, msg);
			return 0;
		}
		/* nothing to read: answered here */
		json_object *o = NULL;
		struct ab_error err = {0};
		if (layer_session_op(l, op, req, &o, end, &err) < 0) {
			*reply = error_obj(id, layer_error_code(err.code), err.msg);
			return 0;
		}
		json_object_object_add(o, "type", json_object_new_string("result"));
		json_object_object_add(o, "id", id ? json_object_get(id) : NULL);
		json_object_object_add(o, "op", json_object_new_string(op));
		*reply = o;
		return 0;
	}
start:;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0 || (j->pid = fork()) < 0) {
		snprintf(msg, sizeof(msg), "%s: cannot start it: %s", op, strerror(errno));
		*reply = error_obj(id, AB_ERRC_INTERNAL, msg);
		j->pid = 0;
		if (f)
			ckpt_fork_free(f);
		return 0;
	}
	if (j->pid == 0) {
		close(p[0]);
		child(p[1], j, l, op, req, f);
	}
	if (f)
		ckpt_fork_free(f);
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	j->fd = p[0];
	j->id = id ? json_object_get(id) : NULL;
	snprintf(j->op, sizeof(j->op), "%s", op);
	j->timeout_ms = ms;
	j->deadline_ms = now_ms() + ms;
	return 1;
}

int front_layer_fd(const struct front_layer *j)
{
	return j->pid > 0 ? j->fd : -1;
}

int front_layer_timeout(const struct front_layer *j)
{
	if (j->pid <= 0)
		return -1;
	unsigned long long now = now_ms();
	return now >= j->deadline_ms ? 0 : (int)(j->deadline_ms - now);
}

static void reset(struct front_layer *j)
{
	ckpt_fork_fn fork = j->fork;
	void *fork_arg = j->fork_arg;
	if (j->pid > 0) {
		kill(j->pid, SIGKILL);
		while (waitpid(j->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	ab_close_keep_errno(j->fd);
	json_object_put(j->id);
	free(j->buf);
	front_layer_init(j);
	j->fork = fork;
	j->fork_arg = fork_arg;
}

void front_layer_stop(struct front_layer *j)
{
	reset(j);
}

/* The child's line into the protocol's reply. */
static json_object *reply_of(struct front_layer *j)
{
	json_object *o = j->buf ? json_tokener_parse(j->buf) : NULL, *v, *reply = NULL;
	char msg[sizeof(((struct ab_error *)0)->msg)];
	if (o && json_object_object_get_ex(o, "ok", &v) &&
	    json_object_is_type(v, json_type_object)) {
		reply = json_object_get(v);
		json_object_object_add(reply, "type", json_object_new_string("result"));
		json_object_object_add(reply, "id", j->id ? json_object_get(j->id) : NULL);
		json_object_object_add(reply, "op", json_object_new_string(j->op));
	} else if (o && json_object_object_get_ex(o, "error", &v)) {
		json_object *c = json_object_object_get(v, "code");
		snprintf(msg, sizeof(msg), "%s",
			 json_object_get_string(json_object_object_get(v, "message")));
		reply = error_obj(j->id, (enum ab_errc)json_object_get_int(c), msg);
	} else {
		snprintf(msg, sizeof(msg), "%s: the operation ended without a reply", j->op);
		reply = error_obj(j->id, AB_ERRC_INTERNAL, msg);
	}
	json_object_put(o);
	return reply;
}

json_object *front_layer_poll(struct front_layer *j)
{
	char msg[256];
	if (j->pid <= 0)
		return NULL;
	for (;;) {
		if (j->cap - j->len < 65536) {
			size_t cap = j->cap ? j->cap * 2 : 65536 * 2;
			char *p = cap > REPLY_MAX + 1 ? NULL : realloc(j->buf, cap);
			if (!p) {
				snprintf(msg, sizeof(msg),
					 "%s: the reply is over %u MiB; ask for fewer paths, or "
					 "without diffs",
					 j->op, REPLY_MAX >> 20);
				json_object *o = error_obj(j->id, AB_ERRC_INTERNAL, msg);
				reset(j);
				return o;
			}
			j->buf = p;
			j->cap = cap;
		}
		ssize_t n = read(j->fd, j->buf + j->len, j->cap - j->len - 1);
		if (n > 0) {
			j->len += (size_t)n;
			j->buf[j->len] = '\0';
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			json_object *o = reply_of(j);
			reset(j);
			return o;
		}
		break; /* EAGAIN: more to come */
	}
	if (now_ms() < j->deadline_ms)
		return NULL;
	snprintf(msg, sizeof(msg),
		 "%s: stopped after its bound of %llu ms (give a longer 'timeout' in seconds); "
		 "what a commit wrote before stays",
		 j->op, j->timeout_ms);
	json_object *o = error_obj(j->id, AB_ERRC_TIMEOUT, msg);
	reset(j);
	return o;
}
