/* The front engine split in two processes (front_split.h): the fork, the
 * front's confinement, and the session's process, a codec of the engine
 * whose wire is the link (front_link.h) and whose client is the front.
 *
 * The process that was started stays the front (the pid a supervisor
 * signals and waits for, and the one that answers "the sandbox has
 * ended" when the sandbox dies); the session's process is its child, so
 * killing the runtime's descendants kills the sandbox, not the server.
 * When the front dies, the session's process sees the link close, says
 * so, and ends the sandbox: nothing restarts the front. A front forked
 * again from the same process would have the same address layout, so a
 * restart would let an attacker who crashes it try again as often as he
 * likes (ASLR brute force); a fresh process (the pod restarted) has a new
 * one. */
#include "runtime/front_split.h"

#include <errno.h>
#include <linux/netlink.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine/confine.h"
#include "files/fileop.h"
#include "front/front_link.h"
#include "front/front_out.h"
#include "session/session_port.h"
#include "util/error.h"
#include "util/util.h"

#define SYS(name)                                                                                  \
	{                                                                                          \
		.nr = SCMP_SYS(name), .arg = -1                                                    \
	}
/* What the codecs need beyond confine_base (confine.h): serving sockets
 * that are open already, the wait for the session's process; no open, no
 * socket but sock_diag, no connect, no kill, no ptrace, no execve. */
static const struct confine_syscall front_syscalls[] = {
	SYS(epoll_pwait2),
	SYS(select),
	SYS(pselect6),
	SYS(accept),
	SYS(accept4),
	SYS(recvfrom),
	SYS(recvmsg),
	SYS(sendto),
	SYS(sendmsg),
	SYS(shutdown),
	SYS(setsockopt),
	SYS(getsockopt),
	SYS(getsockname),
	SYS(getpeername),
	SYS(time),
	SYS(restart_syscall),
	SYS(sysinfo),
	SYS(getrlimit),
	SYS(uname),
	SYS(wait4),
	SYS(waitid),
	/* the HTTP front's client by uid (rt_auth.c), as ss(8) finds it */
	{.nr = SCMP_SYS(socket),
	 .arg = 0,
	 .value = AF_NETLINK,
	 .arg_b = 2,
	 .value_b = NETLINK_SOCK_DIAG},
#if defined(__SANITIZE_ADDRESS__)
	/* the sanitizers' own needs (the asan preset): LeakSanitizer stops
	 * the world (see below) and reads /proc/self/maps */
	SYS(openat),
	SYS(readlink),
	SYS(readlinkat),
	SYS(getdents64),
	SYS(prctl),
#endif
};

#if defined(__SANITIZE_ADDRESS__)
/* The sanitizers' own needs (the asan preset): LeakSanitizer stops the
 * world (see below) and reads /proc/self/maps; the shadow memory takes
 * terabytes of address space (no RLIMIT_AS). */
#define SANITIZED 1 /* the shadow memory takes terabytes: no RLIMIT_AS */
/* LeakSanitizer's check at exit stops the world from a cloned tracer that
 * the front's filter and identity do not allow (it cannot read its own
 * /proc/PID/task): it is skipped in the front alone (LSan's own hook). */
static bool confined;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return confined;
}
#else
#define SANITIZED 0
#endif

/* ---- the session's process: the session served to the front ---- */

/* Replies the front has not read, in bytes: past this nothing more starts
 * and nothing more is read from it. */
#define BACKLOG_MAX (64u << 20)

struct parent {
	struct ab_front f;
	struct front_out out;
	int fd;
	const char *what;
	char *in;
	size_t len, cap;
	bool eof, bad, child_paused, paused;
	bool end; /* the front said it ends on purpose */
};

static void send_o(struct parent *p, json_object *o)
{
	if (o)
		out_json(&p->out, o, NULL);
}

static json_object *typed(const char *type)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string(type));
	return o;
}

/* The reply to a synchronous call. */
static json_object *rc_reply(unsigned long long seq, int rc, const struct ab_error *e)
{
	json_object *o = typed("rc");
	json_object_object_add(o, "seq", json_object_new_int64((int64_t)seq));
	json_object_object_add(o, "rc", json_object_new_int(rc));
	if (rc < 0 && e) {
		json_object_object_add(o, "msg",
				       json_object_new_string(e->msg[0] ? e->msg : strerror(-rc)));
		json_object_object_add(o, "kind", json_object_new_int((int)e->kind));
	}
	return o;
}

static void refused_now(struct parent *p, unsigned long long tag, const struct ab_error *e)
{
	json_object *o = typed("refused");
	json_object_object_add(o, "tag", json_object_new_int64((int64_t)tag));
	json_object_object_add(o, "error", front_link_error_json(e));
	send_o(p, o);
}

/* The front broke the protocol: it is not believed further; the sandbox
 * ends. */
static void violation(struct parent *p, const char *why)
{
	if (!p->bad)
		fprintf(stderr,
			"agentbox: runtime: the %s sent a bad message (%s): the sandbox ends\n",
			p->what, why);
	p->bad = true;
}

static struct ab_front_req *by_tag(struct parent *p, unsigned long long tag)
{
	struct ab_front_req *r = p->f.head;
	while (r && r->tag != tag)
		r = r->next;
	return r;
}

/* exec, file, layer: checked as a request line of a client is, then into
 * the engine under the child's tag. */
static void request(struct parent *p, struct front_link_msg *m)
{
	struct ab_error e = {0};
	if (by_tag(p, m->tag)) {
		violation(p, "a tag in use");
		return;
	}
	struct ab_front_req *r = calloc(1, sizeof(*r));
	if (!r) {
		ab_error_plain(&e, ENOMEM, "out of memory");
		refused_now(p, m->tag, &e);
		return;
	}
	int rc;
	if (m->op == LINK_FILE) { /* the runtime's inner ops, only on this link */
		json_object *opv = json_object_object_get(m->req, "op");
		const char *op = json_object_is_type(opv, json_type_string)
					 ? json_object_get_string(opv)
					 : "";
		r->q.req = json_object_get(m->req);
		r->q.kind = AB_REQUEST_FILE_OP;
		r->q.file_op = fileop_prepare_inner(r->q.req, op, &r->q.inner, &e);
		r->q.op = r->q.file_op;
		r->q.x.file_op = r->q.inner;
		rc = r->q.file_op ? 0 : -1;
		if (rc == 0 && !strcmp(r->q.file_op, "watch")) { /* its lines, as they come */
			r->q.x.stream = true; /* (the front's engine checks them: q.watch) */
			r->q.x.no_timeout = true;
			r->q.x.max_output = 4096;
		}
	} else {
		rc = ab_request_object(json_object_get(m->req), false, &r->q, &e);
		enum ab_request_op want = m->op == LINK_EXEC ? AB_REQUEST_EXEC : AB_REQUEST_LAYER;
		if (rc == 0 && (r->q.kind != want ||
				(want == AB_REQUEST_LAYER && !strcmp(r->q.op, "discard"))))
			rc = ab_error_plain(&e, EINVAL, "link: not a request of this op");
	}
	if (rc < 0) {
		refused_now(p, m->tag, &e);
		ab_request_clear(&r->q);
		free(r);
		return;
	}
	r->tag = m->tag;
	ab_front_submit(&p->f, r);
}

static void sync_op(struct parent *p, struct front_link_msg *m)
{
	struct ab_error e = {0};
	struct ab_session *s = p->f.s;
	int rc = -EPIPE;
	json_object *reply = NULL;
	char old[64];
	if (p->f.gone && m->op != LINK_DISCARD) {
		ab_error_plain(&e, EPIPE, "%s", p->f.gone_why);
	} else if (m->op == LINK_STDIN) {
		rc = ab_session_stdin(s, m->tag, m->data, m->data_len, m->eof, &e);
	} else if (m->op == LINK_SIGNAL) {
		rc = ab_session_signal(s, m->tag, m->signo);
	} else if (m->op == LINK_RESIZE) {
		rc = ab_session_resize(s, m->tag, m->rows, m->cols, &e);
	} else if (m->op == LINK_NET) {
		reply = ab_front_has_net(&p->f) ? ab_front_net_op(&p->f, m->req, &e) : NULL;
		if (!reply && !e.msg[0])
			ab_error_plain(&e, ENOENT, "the sandbox has no network proxy");
		rc = reply ? 0 : -EINVAL;
	} else if (m->op == LINK_PORT) { /* port/port.c checks every value */
		reply = ab_session_port(s, m->req, &e);
		rc = reply ? 0 : -(e.code ? e.code : EINVAL);
	} else if (m->op == LINK_DISCARD && (p->f.gone || p->f.n || !ab_front_has_layer(&p->f))) {
		rc = ab_error_plain(&e, EBUSY, "%s",
				    p->f.gone ? p->f.gone_why
				    : p->f.n  ? "requests are in the engine"
					      : "no overlay layer");
	} else if (m->op == LINK_DISCARD) {
		rc = ab_front_discard(&p->f, &reply, old, sizeof(old), &e);
		if (rc == -2)
			ab_error_plain(&e, EIO, "%s", p->f.gone_why);
		rc = rc == 0 ? 0 : rc == -2 ? -EIO : -(e.code ? e.code : EIO);
	}
	json_object *o = rc_reply(m->seq, rc, &e);
	if (reply)
		json_object_object_add(o, "reply", reply);
	if (m->op == LINK_DISCARD && rc == 0)
		json_object_object_add(o, "id", json_object_new_string(ab_front_id(&p->f)));
	if (m->op == LINK_DISCARD && p->f.gone)
		json_object_object_add(o, "gone", json_object_new_boolean(true));
	send_o(p, o);
}

static void line(struct parent *p, const char *s, size_t n)
{
	struct front_link_msg m;
	struct ab_error e = {0};
	if (front_link_check(s, n, &m, &e) < 0) {
		violation(p, e.msg);
		return;
	}
	if (m.op <= LINK_LAYER) {
		request(p, &m);
	} else if (m.op == LINK_CANCEL) {
		struct ab_front_req *r = by_tag(p, m.tag);
		if (r)
			ab_front_cancel(&p->f, r);
	} else if (m.op == LINK_END) {
		p->end = true;
	} else if (m.op == LINK_PAUSE) {
		p->child_paused = m.on;
	} else {
		sync_op(p, &m);
	}
	front_link_msg_clear(&m);
}

static void read_child(struct parent *p)
{
	for (int rounds = 0; rounds < 16 && !p->bad; rounds++) {
		if (p->cap - p->len < 65536) {
			size_t cap = p->cap ? p->cap * 2 : 262144;
			char *b = cap <= FRONT_LINK_MAX_REQ + 262144 ? realloc(p->in, cap) : NULL;
			if (!b) {
				violation(p, "a line past its bound");
				return;
			}
			p->in = b;
			p->cap = cap;
		}
		ssize_t r = recv(p->fd, p->in + p->len, p->cap - p->len, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (r <= 0) {
			p->eof = true;
			break;
		}
		p->len += (size_t)r;
		size_t start = 0;
		char *nl;
		while (!p->bad && (nl = memchr(p->in + start, '\n', p->len - start))) {
			line(p, p->in + start, (size_t)(nl - (p->in + start)));
			start = (size_t)(nl - p->in) + 1;
		}
		memmove(p->in, p->in + start, p->len - start);
		p->len -= start;
	}
}

static int p_fds(void *arg, struct pollfd *pf, int max, int *wait_ms)
{
	struct parent *p = arg;
	/* a front that does not read its replies is not read either: this
	 * process's memory stays bounded by what already runs */
	bool full = out_pending(&p->out) + p->out.parts_raw > BACKLOG_MAX;
	pf[0] = (struct pollfd){
		.fd = p->eof ? -1 : p->fd,
		.events = (short)((full ? 0 : POLLIN) | (out_waiting(&p->out) ? POLLOUT : 0))};
	return 1;
}

static void p_input(void *arg, struct pollfd *pf, int n)
{
	struct parent *p = arg;
	if (pf[0].revents & POLLOUT)
		out_flush(&p->out, false);
	if (pf[0].revents & (POLLIN | POLLHUP | POLLERR))
		read_child(p);
	out_flush(&p->out, false);
	bool pause = p->child_paused || out_full(&p->out);
	if (pause != p->paused && p->f.s && !p->f.gone) {
		p->paused = pause;
		ab_session_pause_output(p->f.s, pause);
	}
}

static bool p_go_on(void *arg)
{
	struct parent *p = arg;
	return !p->eof && !p->bad;
}

/* SIGTERM and the others: the front drains (it has the listeners) and
 * closes the link, which ends this process. */
static bool p_signal(void *arg, int signo)
{
	(void)arg;
	(void)signo;
	return true;
}

static bool p_dead(void *arg, const struct ab_error *e)
{
	struct parent *p = arg;
	fprintf(stderr, "agentbox: %s\n", e->msg);
	json_object *o = typed("dead");
	json_object_object_add(o, "msg", json_object_new_string(e->msg));
	send_o(p, o);
	return true;
}

static void p_event(void *arg, struct ab_front_req *r, const struct ab_event *ev)
{
	struct parent *p = arg;
	(void)r;
	json_object *o = front_link_event_json(ev);
	if (!o) {
		struct ab_error e = {0};
		ab_error_plain(&e, ENOMEM, "out of memory for an event");
		struct ab_event er = {.kind = ev->kind, .tag = ev->tag, .error = &e};
		o = front_link_event_json(&er);
	}
	send_o(p, o);
}

static void p_layer_reply(void *arg, struct ab_front_req *r, json_object *reply)
{
	struct parent *p = arg;
	if (!r) {
		json_object_put(reply);
		return;
	}
	json_object *o = typed("layer");
	json_object_object_add(o, "tag", json_object_new_int64((int64_t)r->tag));
	json_object_object_add(o, "reply", reply);
	send_o(p, o);
}

static void p_refused(void *arg, struct ab_front_req *r, enum ab_front_why why,
		      const struct ab_error *e)
{
	struct ab_error c = {0};
	if (!e)
		ab_error_plain(&c, ECANCELED,
			       why == AB_FRONT_ENDED ? "The server is stopping" : "cancelled");
	refused_now(arg, r->tag, e ? e : &c);
}

static void p_backlog(void *arg, size_t *results, size_t *bytes)
{
	struct parent *p = arg;
	*results = 0;
	*bytes = out_pending(&p->out) + p->out.parts_raw;
}

static void p_free(void *arg, struct ab_front_req *r)
{
	(void)arg;
	ab_request_clear(&r->q);
	free(r);
}

static const struct ab_front_codec parent_codec = {
	.fds = p_fds,
	.input = p_input,
	.go_on = p_go_on,
	.signal = p_signal,
	.dead = p_dead,
	.event = p_event,
	.layer_reply = p_layer_reply,
	.refused = p_refused,
	.backlog = p_backlog,
	.free_req = p_free,
};

/* How the front ended, as this process sees it: 0 after a clean end. */
static int ended(struct parent *p)
{
	if (p->bad)
		return AB_EXIT_FAILURE;
	if (!p->end) /* it did not say it ends: it died */
		fprintf(stderr,
			"agentbox: runtime: the %s closed its link without a drain (it died?): "
			"the sandbox ends\n",
			p->what);
	return 0;
}

static bool in_set(const int *set, size_t n, int fd)
{
	for (size_t i = 0; i < n; i++)
		if (set[i] == fd)
			return true;
	return false;
}

static int run_parent(struct ab_config *cfg, const struct ab_front_split *sp, int fd)
{
	int now[4096];
	int n = confine_open_fds(now, sizeof(now) / sizeof(now[0]));
	for (int i = 0; i < n; i++) /* the codecs' fds are the child's alone */
		if (now[i] > 2 && now[i] != fd && !in_set(sp->before, sp->n_before, now[i]))
			close(now[i]);
	struct parent p = {.fd = fd, .what = sp->what};
	struct ab_front_limits lim = {.max_backlog = BACKLOG_MAX};
	ab_front_init(&p.f, cfg, &parent_codec, &p, &lim);
	out_init(&p.out, fd, true);
	struct ab_error err = {0};
	if (ab_front_open(&p.f, &err) < 0) {
		fprintf(stderr, "agentbox: %s\n", err.msg);
		json_object *o = typed("fail");
		json_object_object_add(o, "msg", json_object_new_string(err.msg));
		out_json(&p.out, o, NULL);
		out_flush(&p.out, true);
		close(fd);
		out_free(&p.out);
		ab_front_free(&p.f);
		return AB_EXIT_FAILURE;
	}
	json_object *h = typed("hello");
	json_object_object_add(h, "id", json_object_new_string(ab_front_id(&p.f)));
	json_object_object_add(h, "net", json_object_new_boolean(ab_front_has_net(&p.f)));
	json_object_object_add(h, "layer", json_object_new_boolean(ab_front_has_layer(&p.f)));
	send_o(&p, h);
	out_flush(&p.out, false);
	ab_front_run(&p.f, &err);
	ab_front_drop_all(&p.f);
	ab_front_close(&p.f); /* every process of the sandbox killed */
	int status = ended(&p);
	if (sp->remove_at_end && sp->remove_at_end[0]) /* the front may no longer */
		unlink(sp->remove_at_end);
	close(fd);
	out_free(&p.out);
	free(p.in);
	ab_front_free(&p.f);
	return status;
}

/* ---- the front ---- */

/* This process confined, f opened over the link: 0, or -1 with err. */
static int front(struct ab_front *f, const struct ab_front_split *sp, int fd, pid_t pid,
		 struct ab_error *err)
{
	struct front_link *l = calloc(1, sizeof(*l));
	if (!l)
		return ab_error_plain(err, ENOMEM, "out of memory");
	l->fd = fd;
	l->pid = pid;
	f->link = l;
	int now[4096], keep[4096];
	size_t k = 0;
	if (ab_front_open(f, err) < 0) /* the ending signals only */
		return -1;
	int n = confine_open_fds(now, sizeof(now) / sizeof(now[0]));
	for (int i = 0; i < n; i++)
		if (!in_set(sp->before, sp->n_before, now[i]))
			keep[k++] = now[i];
	if (n < 0)
		return ab_error_set(err, errno, "cannot list the open fds");
	/* the front keeps 0-2 (stderr says what it does) and what the codecs
	 * opened; as root it becomes nobody, with no capability; never
	 * dumpable (no /proc/PID/fd for its own uid) */
	for (int std = 0; std < 3; std++)
		if (!in_set(keep, k, std))
			keep[k++] = std;
	if (confine_fds(keep, k, err) < 0 ||
	    confine_memory(SANITIZED	? 0
			   : sp->max_as ? sp->max_as
					: 4ull << 30,
			   err) < 0 ||
	    (geteuid() == 0 ? confine_identity(65534, 65534, err) : confine_caps_drop(err)) < 0)
		return -1;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return ab_error_set(err, errno, "confine: cannot make the front undumpable");
	if (confine_seccomp_base(front_syscalls, AB_ARRAY_SIZE(front_syscalls), err) < 0)
		return -1;
#if SANITIZED
	confined = true;
#endif
	return front_link_open(l, fd, err);
}

int ab_front_split(struct ab_front *f, const struct ab_front_split *sp, int *status,
		   struct ab_error *err)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return ab_error_set(err, errno, "runtime: socketpair");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return ab_error_set(err, e, "runtime: cannot fork the session's process");
	}
	if (pid == 0) { /* the session's process: it never returns */
		close(sv[0]);
		int st = run_parent(f->cfg, sp, sv[1]);
		fflush(NULL);
		_exit(st);
	}
	close(sv[1]);
	if (front(f, sp, sv[0], pid, err) == 0)
		return 0;
	/* the session's process said why (the sandbox could not be built), or
	 * this one could not be confined: the other ends at the link's close */
	bool said = f->link && f->link->failed;
	ab_front_close(f);
	ab_front_free(f);
	*status = AB_EXIT_FAILURE;
	if (said)
		return 1;
	return -1;
}
