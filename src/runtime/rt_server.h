/* What agentbox runtime's protocols share (runtime.c): the server, its one
 * session in the front engine, and the table each protocol gives it
 * (httpapi/'s HTTP API, grpc/'s ProcessService). runtime.c opens them,
 * polls their fds, hands each its requests' events and ends them; a
 * protocol calls down into this floor and the engine, never into the
 * other protocol. */
#ifndef AB_RT_SERVER_H
#define AB_RT_SERVER_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "agentbox/agentbox.h"
#include "front/front.h"
#include "runtime/rt_auth.h"
#include "runtime/runtime.h"

#define BASE "/workspace" /* the sandbox's workspace: the APIs' root */

struct pollfd;
struct rt;

/* A protocol of the runtime. Every callback may be NULL. */
struct rt_proto {
	size_t max_fds; /* its fds in one step, at most */
	/* Listen (before the session is opened): 0, or -errno with err. */
	int (*open)(struct rt *rt, struct ab_error *err);
	/* Everything is open: its "listening on" line. */
	void (*ready)(struct rt *rt);
	/* Its fds into p (at most max), its timeout (lower *wait_ms); how many. */
	int (*fds)(struct rt *rt, struct pollfd *p, int max, int *wait_ms);
	/* After the session's events: what its fds (as fds filled them) say. */
	void (*run)(struct rt *rt, const struct pollfd *p, int n);
	/* A drain began: no new connection. */
	void (*quiesce)(struct rt *rt);
	/* Its work not in the engine's count (the drain waits for it too). */
	size_t (*busy)(const struct rt *rt);
	/* The end (after the session's, when served): what is open answered
	 * and freed; also when open failed, for what was opened. */
	void (*close)(struct rt *rt);
	/* The engine's callbacks (struct ab_front_codec) for its requests;
	 * arg is the struct rt. */
	void (*event)(void *arg, struct ab_front_req *fr, const struct ab_event *ev);
	void (*layer_reply)(void *arg, struct ab_front_req *fr, json_object *reply);
	void (*refused)(void *arg, struct ab_front_req *fr, enum ab_front_why why,
			const struct ab_error *e);
	void (*left)(void *arg, struct ab_front_req *fr);
	/* a watch's file event (the engine's watch) */
	void (*watch)(void *arg, struct ab_front_req *fr, const struct ab_watch_event *ev);
};

/* How each protocol's request begins: the engine's request, then the
 * protocol it belongs to (the callbacks above are found by it). */
struct rt_req_head {
	struct ab_front_req fr;
	const struct rt_proto *proto;
};

#define RT_PROTOS_MAX 4

struct MHD_Daemon;
struct rt_grpc;

struct rt {
	struct ab_front f; /* the engine: the session, the requests, the loop */
	struct ab_config *cfg;
	const struct ab_runtime_opts *o;
	time_t started;
	unsigned long long drain_until; /* a signal came: the drain's end (ms) */
	bool served;			/* the session was opened: the loop ran */
	struct rt_auth auth;		/* the token, the clients (rt_auth.c) */
	const struct rt_proto *const *protos;
	size_t n_protos;
	int nfds[RT_PROTOS_MAX]; /* each protocol's fds in this step */
	/* the protocols' own */
	struct MHD_Daemon *d; /* httpapi/: the HTTP daemon */
	struct rt_grpc *grpc; /* grpc/: --grpc-port's server, or NULL */
};

/* What runs: the engine's requests and each protocol's busy count. */
size_t rt_busy(const struct rt *rt);

/* The shim's "agentbox: cannot run 'NAME': WHY" in the last line of a
 * result's stderr (a sanitizer build may have warned before it, on that
 * line too), and its length without the newline in *n; NULL if none. */
const char *rt_cannot_run_line(const struct ab_result *res, size_t *n);

#endif
