/* agentbox runtime's server (rt_server.h): its protocols (the HTTP API of
 * httpapi/, the gRPC of grpc/) opened, then one session in the front
 * engine for the server's lifetime, polled in the engine's loop with each
 * protocol's fds; each request's events go to the protocol it came by. A
 * signal drains: no new connection, what is in flight finishes, for
 * --drain-timeout at most. */
#include "runtime/runtime.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "confine/confine.h"
#include "runtime/front_split.h"
#include "runtime/rt_server.h"
#include "util/error.h"

const char *rt_cannot_run_line(const struct ab_result *res, size_t *n)
{
	static const char pre[] = "agentbox: cannot run '";
	const char *e = res->err.data;
	size_t len = res->err.len;
	if (!e || len < 2 || e[len - 1] != '\n')
		return NULL;
	const char *nl = memrchr(e, '\n', len - 1);
	if (nl) {
		len -= (size_t)(nl + 1 - e);
		e = nl + 1;
	}
	/* within that line: ASan's "cannot open the report file" notice, from
	 * the sandbox's side where its log path is not, ends with no newline */
	const char *at = memmem(e, len, pre, sizeof(pre) - 1);
	if (at)
		*n = len - (size_t)(at - e) - 1;
	return at;
}

/* ---- the engine's codec: each protocol's fds and requests, a drain ---- */

size_t rt_busy(const struct rt *rt)
{
	size_t busy = rt->f.n;
	for (size_t i = 0; i < rt->n_protos; i++)
		if (rt->protos[i]->busy)
			busy += rt->protos[i]->busy(rt);
	return busy;
}

static const struct rt_proto *proto_of(const struct ab_front_req *fr)
{
	return ((const struct rt_req_head *)fr)->proto;
}

static int loop_fds(void *arg, struct pollfd *p, int max, int *wait_ms)
{
	struct rt *rt = arg;
	int n = 0;
	for (size_t i = 0; i < rt->n_protos; i++) {
		const struct rt_proto *pr = rt->protos[i];
		rt->nfds[i] = pr->fds ? pr->fds(rt, p + n, max - n, wait_ms) : 0;
		n += rt->nfds[i];
	}
	return n;
}

static void loop_late(void *arg, struct pollfd *p, int n)
{
	(void)n;
	struct rt *rt = arg;
	for (size_t i = 0; i < rt->n_protos; i++) {
		if (rt->protos[i]->run)
			rt->protos[i]->run(rt, p, rt->nfds[i]);
		p += rt->nfds[i];
	}
}

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

/* A signal: the drain (requests in flight finish, for drain_timeout_s at
 * most; no new connection is taken). */
static bool on_signal(void *arg, int signo)
{
	struct rt *rt = arg;
	fprintf(stderr, "agentbox: runtime: %s: finishing %zu requests\n", strsignal(signo),
		rt->f.n);
	for (size_t i = 0; i < rt->n_protos; i++)
		if (rt->protos[i]->quiesce)
			rt->protos[i]->quiesce(rt);
	rt->drain_until = now_ms() + rt->o->drain_timeout_s * 1000ull;
	return true;
}

static bool go_on(void *arg)
{
	struct rt *rt = arg;
	if (!rt->drain_until)
		return true;
	return rt_busy(rt) && now_ms() < rt->drain_until;
}

/* The sandbox died: the server goes on, answering that it has ended. */
static bool on_dead(void *arg, const struct ab_error *e)
{
	(void)arg;
	fprintf(stderr, "agentbox: %s\n", e->msg);
	return true;
}

static void on_event(void *arg, struct ab_front_req *fr, const struct ab_event *ev)
{
	proto_of(fr)->event(arg, fr, ev);
}

/* A layer op's reply; fr is NULL when its request was cancelled meanwhile
 * (its client went): the reply is dropped. */
static void on_layer_reply(void *arg, struct ab_front_req *fr, json_object *reply)
{
	if (fr && proto_of(fr)->layer_reply)
		proto_of(fr)->layer_reply(arg, fr, reply);
	else
		json_object_put(reply);
}

static void on_refused(void *arg, struct ab_front_req *fr, enum ab_front_why why,
		       const struct ab_error *e)
{
	if (proto_of(fr)->refused)
		proto_of(fr)->refused(arg, fr, why, e);
}

static void on_left(void *arg, struct ab_front_req *fr)
{
	proto_of(fr)->left(arg, fr);
}

/* A watch's file event, to the protocol whose watch it is. */
static void on_watch(void *arg, struct ab_front_req *fr, const struct ab_watch_event *ev)
{
	if (proto_of(fr)->watch)
		proto_of(fr)->watch(arg, fr, ev);
}

static const struct ab_front_codec codec = {
	.fds = loop_fds,
	.late = loop_late,
	.go_on = go_on,
	.signal = on_signal,
	.dead = on_dead,
	.event = on_event,
	.layer_reply = on_layer_reply,
	.refused = on_refused,
	.free_req = on_left,
	.watch = on_watch,
};

static void print_notice(const char *line)
{
	fprintf(stderr, "agentbox: %s\n", line);
}

/* The protocols closed, the last first; then the locks, the engine. */
static void close_all(struct rt *rt)
{
	for (size_t i = rt->n_protos; i-- > 0;)
		if (rt->protos[i]->close)
			rt->protos[i]->close(rt);
	rt_auth_close(&rt->auth);
	ab_front_free(&rt->f);
}

int ab_runtime(struct ab_config *cfg, const struct ab_runtime_opts *o,
	       const struct rt_proto *const *protos)
{
	if (cfg->audit_log) {
		fputs("agentbox: runtime: --audit-log is not supported by agentbox runtime (use "
		      "agentbox serve for an audit log)\n",
		      stderr);
		return AB_EXIT_FAILURE;
	}
	struct rt rt = {.cfg = cfg, .o = o, .started = time(NULL), .protos = protos};
	int before[4096]; /* the fds the network front closes (front_split.h) */
	int n_before = confine_open_fds(before, sizeof(before) / sizeof(before[0]));
	struct ab_front_limits lim = {0};
	while (protos[rt.n_protos] && rt.n_protos < RT_PROTOS_MAX)
		lim.max_fds += protos[rt.n_protos++]->max_fds;
	ab_front_init(&rt.f, cfg, &codec, &rt, &lim);
	struct ab_error err = {0};
	cfg->notice = print_notice;
	int rc = 0; /* nothing is served before the loop, the token in */
	for (size_t i = 0; rc == 0 && i < rt.n_protos; i++)
		rc = protos[i]->open ? protos[i]->open(&rt, &err) : 0;
	/* HTTP and gRPC are parsed in this process, confined; a child keeps
	 * the session (docs/architecture.md, "agentbox runtime's processes") */
	struct ab_front_split sp = {.what = "network front",
				    .before = before,
				    .n_before = n_before > 0 ? (size_t)n_before : 0,
				    .remove_at_end = rt.auth.file /* a token made: rt_auth.c */};
	int split = 0, status = 0;
	if (rc < 0 || rt_auth_open(&rt.auth, o, &err) < 0 || n_before < 0 ||
	    (split = ab_front_split(&rt.f, &sp, &status, &err)) < 0) {
		fprintf(stderr, "agentbox: %s\n", err.msg);
		close_all(&rt);
		return AB_EXIT_FAILURE;
	}
	if (split == 1) { /* the sandbox could not be built: said why */
		rt_auth_close(&rt.auth);
		return status;
	}
	rt.served = true;
	for (size_t i = 0; i < rt.n_protos; i++)
		if (protos[i]->ready)
			protos[i]->ready(&rt);
	ab_front_run(&rt.f, &err);
	/* what waits or runs is answered (each protocol in its words), then
	 * what still runs is killed */
	ab_front_drop_all(&rt.f);
	ab_front_close(&rt.f);
	close_all(&rt);
	return 0;
}
