/* What rt_grpc.c (the HTTP/2 side) and rt_gproc.c (the processes) of
 * agentbox runtime's gRPC server share: a call, a process, a connection.
 * Files that include this header call nghttp2_* through the table of
 * runtime/rt_h2.h (loaded with dlopen when --grpc-port is given). */
#ifndef AB_RT_GRPC_H
#define AB_RT_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc/rt_pb.h"
#include "runtime/rt_h2.h"
#include "runtime/rt_server.h"

#define MSG_MAX		(4u << 20)	     /* a request message, as grpc's default limit */
#define STREAMS_MAX	100		     /* concurrent calls per connection */
#define IN_TOTAL_MAX	(64u << 20)	     /* request bytes held over every connection */
#define OUT_MAX		(1u << 20)	     /* a stream's answer bytes not yet sent */
#define EXEC_OUT_MAX	((2u << 20) - 65536) /* Execute's stdout and stderr, each */
#define START_TIMEOUT_S 1e7 /* the longest a request may ask: --max-timeout bounds it */

enum {
	G_OK = 0,
	G_CANCELLED = 1,
	G_INVALID_ARGUMENT = 3,
	G_DEADLINE_EXCEEDED = 4,
	G_NOT_FOUND = 5,
	G_PERMISSION_DENIED = 7,
	G_RESOURCE_EXHAUSTED = 8,
	G_FAILED_PRECONDITION = 9,
	G_UNIMPLEMENTED = 12,
	G_INTERNAL = 13,
	G_UNAVAILABLE = 14,
	G_UNAUTHENTICATED = 16,
};

struct gproc;

struct gcall {
	struct gconn *c;
	struct gcall *next, *prev; /* the connection's */
	int32_t sid;
	int method; /* -1: not one of the service's */
	bool post, bad_ctype, too_large, dispatched, headers_sent, done;
	bool authed, bad_host; /* its authorization, its :authority (rt_auth.h) */
	uint8_t *in;	       /* the request's bytes */
	size_t in_len, in_cap;
	struct pb_req q;
	uint8_t *out; /* answer bytes (framed messages) not yet sent */
	size_t out_len, out_off, out_cap;
	unsigned long long over_since; /* when out went past OUT_MAX, 0: not */
	unsigned long long last_in;    /* when its headers or its last data came */
	int status;
	char msg[600];	     /* grpc-message, percent-encoded */
	struct gproc *proc;  /* Start, Execute: its process; WriteStdin: its target */
	struct gcall *wnext; /* WriteStdin: waiting for the one before it */
};

/* A process: a request of the front engine (fr first, then its protocol:
 * struct rt_req_head, how the runtime's server tells it from an HTTP
 * request); a Start's key is its id, a JSON int, which ab_front_find
 * looks up. */
struct gproc {
	struct ab_front_req fr;
	const struct rt_proto *proto; /* &rt_grpc_proto (struct rt_req_head) */
	int32_t id;		      /* Start's; 0 for Execute's */
	unsigned long long conn_id;   /* the connection that started it: the only one
					 that reaches it by id */
	bool pty;
	struct gcall *call; /* its Start or Execute call, NULL once gone */
	struct gcall *wcur; /* the WriteStdin in progress (wbusy), NULL if gone */
	bool wbusy;
	struct gcall *whead, *wtail; /* WriteStdin calls waiting */
	/* WatchDir's (rt_gwatch.c): its events held for the debounce */
	bool watch, ready;
	uint8_t *pend; /* FileEvent messages, each after its length (4 bytes) */
	size_t pend_len, pend_cap;
	unsigned long long pend_since; /* when the first of them came (ms) */
};
_Static_assert(offsetof(struct gproc, proto) == offsetof(struct rt_req_head, proto),
	       "a process begins as struct rt_req_head");

struct gconn {
	struct gconn *next, *prev;
	struct rt_grpc *g;
	int fd;
	nghttp2_session *h;
	struct gcall *calls;
	size_t n_calls;
	unsigned long long idle_since;
	unsigned long long id;	     /* this server's n-th connection */
	unsigned long long accepted; /* when; closed if no call is authenticated soon */
	int client;		     /* its client (rt_auth_client_take) */
	bool dead, ending, authed;
};

struct rt_grpc {
	struct rt *rt;
	const struct rt_grpc_service *svc;
	int lfd;
	nghttp2_session_callbacks *cb;
	struct gconn *conns;
	size_t n_conns;
	size_t n_procs; /* its processes in the engine */
	int32_t next_id;
	unsigned long long next_conn_id;
	size_t in_total;
	bool paused, stopping;
};

struct blob {
	const void *d;
	size_t n;
};

/* rt_grpc.c: the answer of a call. grpc_answer adds one message that enc
 * writes (room bytes at most) and sends the response's headers if not yet
 * sent; false without memory. grpc_finish ends the call with a status (a
 * trailer, or trailers only), once; grpc_finish_ok with an empty message
 * and OK. grpc_enc_copy encodes a struct blob as it is. */
bool grpc_answer(struct gcall *call, size_t room, size_t (*enc)(uint8_t *, size_t, const void *),
		 const void *arg);
void grpc_finish(struct gcall *call, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void grpc_finish_ok(struct gcall *call);
/* The response's headers now, its messages to come (a stream that has
 * begun: a watch that is ready). */
void grpc_headers(struct gcall *call);
size_t grpc_enc_copy(uint8_t *out, size_t outsz, const void *arg);
/* The gRPC code for an agentbox error, by its errno. */
int grpc_code_of(const struct ab_error *e);

/* The server on --grpc-port. rt_grpc_open listens (0, or -errno with
 * err), the service's methods svc (rt_gproc.c's); rt_grpc_pollfds fills up
 * to max poll entries (the listener first) and rt_grpc_run does what they
 * say; rt_grpc_busy counts its processes running; rt_grpc_quiesce stops
 * listening (a drain: new calls get UNAVAILABLE); rt_grpc_close, after the
 * session is closed, answers and frees everything. */
#define GRPC_CONN_LIMIT 64
struct rt_grpc_service;
int rt_grpc_open(struct rt *rt, const struct rt_grpc_service *svc, struct ab_error *err);
size_t rt_grpc_pollfds(struct rt *rt, struct pollfd *p, size_t max);
void rt_grpc_run(struct rt *rt, const struct pollfd *p, size_t n);
size_t rt_grpc_busy(const struct rt *rt);
void rt_grpc_quiesce(struct rt *rt);
void rt_grpc_close(struct rt *rt);

/* The service on the connections (rt_gproc.c's, handed to rt_grpc_open):
 * dispatch does a call whose request is in, decoded; proto is what its
 * processes say they are (struct rt_req_head). */
struct rt_grpc_service {
	void (*dispatch)(struct rt_grpc *g, struct gcall *call);
	const struct rt_proto *proto;
};

/* rt_gwatch.c: watcher.v1.FileWatcherService's WatchDir, a watch of the
 * engine (the file operation "watch"): gwatch_start does a call; the
 * engine's watch events and its result come to gwatch_event and
 * gwatch_ended; gwatch_flush sends what the debounce held long enough
 * (and lowers *wait_ms to the next one due; NULL: every one now). */
#define WATCH_DEBOUNCE_MS 250
void gwatch_start(struct rt_grpc *g, struct gcall *call);
void gwatch_event(struct rt_grpc *g, struct gproc *p, const struct ab_watch_event *ev);
void gwatch_ended(struct rt_grpc *g, struct gproc *p, const struct ab_event *ev);
void gwatch_flush(struct rt_grpc *g, unsigned long long now, int *wait_ms);
void gwatch_free(struct gproc *p);

/* fr as a process of g, or NULL when it is another protocol's request. */
static inline struct gproc *rt_gproc_of(const struct rt_grpc *g, struct ab_front_req *fr)
{
	return fr && ((struct rt_req_head *)fr)->proto == g->svc->proto ? (struct gproc *)fr : NULL;
}

#endif
