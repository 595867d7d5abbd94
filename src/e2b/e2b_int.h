/* agentbox e2b's insides: the server, its connections and sandboxes
 * (e2b.h is what a service sees). */
#ifndef AB_E2B_INT_H
#define AB_E2B_INT_H

#include <stdint.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"
#include "http/http_frame.h"
#include "e2b/e2b.h"

/* Bounds of what a client sends: a request's head (http/http_frame.h's
 * NET_HEAD_MAX), its body, what waits to be written to it. */
#define E2B_BODY_MAX (64u << 20)
/* a chunked body as sent: its framing's bytes too */
#define E2B_BODY_RAW_MAX (E2B_BODY_MAX + (E2B_BODY_MAX >> 3))
#define E2B_OUT_MAX	 (32u << 20)
#define E2B_CONNS_MAX	 256
#define E2B_KEY_LEN	 64 /* hex digits of a key or an access token */

struct e2b_hdr {
	char *name, *value;
};

/* One plain HTTP request (control API or envd's routes) being answered. */
struct e2b_http {
	struct e2b_conn *conn; /* NULL: the client went away */
	char *method, *path, *query;
	struct e2b_hdr *hdrs;
	size_t n_hdrs;
	unsigned char *body;
	size_t body_len;
	struct e2b_sbx *sbx;
	void *data;
	void (*gone)(struct e2b_http *, void *);
	char **q; /* decoded query: name, value, ... */
	size_t n_q;
	bool chunked; /* an answer begun (e2b_http_begin) without its length */
};

/* reading a head, its body; answering (BUSY, STREAM); CLOSING: an answer
 * to a request refused whole, then the end; TUNNEL: a sandbox's port's
 * (e2b_host.c), bytes both ways */
enum conn_state { C_HEAD, C_BODY, C_BUSY, C_STREAM, C_CLOSING, C_TUNNEL };
/* A request that stalls this long half read, and a connection idle this
 * long between requests, are dropped. */
#define E2B_STALL_MS 30000
#define E2B_IDLE_MS  300000

struct e2b_conn {
	struct e2b_conn *next;
	struct e2b *srv;
	int fd;
	enum conn_state st;
	char *in;
	size_t in_len, in_cap;
	size_t head_len, body_want;
	bool chunked; /* the body chunked: nb follows it */
	struct net_body nb;
	size_t body_raw; /* a chunked body's bytes so far, as sent */
	char *out;
	size_t out_len, out_off, out_cap;
	bool close_after, dead;
	long long last_ms;	/* when it last read something, or was answered */
	struct e2b_http *req;	/* the request being answered */
	struct e2b_call *call;	/* its Connect call, if one */
	struct e2b_tunnel *tun; /* getHost's: to a sandbox's port (e2b_host.c) */
};

/* One sandbox of the server's. */
struct e2b_pending {
	struct e2b_pending *next;
	long h;
	e2b_sbx_fn fn;
	void *arg;
};

struct e2b_sbx {
	struct e2b_sbx *next;
	struct e2b *srv;
	char id[64];
	char token[E2B_KEY_LEN + 1];   /* envd's access token */
	char traffic[E2B_KEY_LEN + 1]; /* its ports' token (allowPublicTraffic false), "" none */
	char template_id[64];
	char workdir[4096]; /* its /workspace on the host ("" none) */
	json_object *metadata, *envs;
	long long started_ms, end_ms;  /* realtime; end_ms: its timeout */
	bool paused, dead, auto_pause; /* auto_pause: paused at its timeout */
	bool retired;  /* killed with snapshots left: hidden, kept for them (e2b_snap.c) */
	bool creating; /* its maker (a child) still at work */
	int create_fd, create_pipe; /* the maker's pidfd; its result */
	pid_t create_pid;
	char create_msg[1100];
	size_t create_len;
	void (*created)(void *arg, struct e2b_sbx *s, const char *why); /* e2b_created_fn */
	void *created_arg;
	long long m_cpu_ms, m_at_ms; /* the last metrics' CPU time, and when */
	int fd;			     /* its link: the detached sandbox's socket, -1 none */
	bool hello;
	char *in;
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_off, out_cap;
	struct e2b_pending *pending;
	void *procs; /* e2b_process.c's table */
	void (*procs_free)(struct e2b_sbx *);
};

struct e2b {
	int lfd;
	char key[E2B_KEY_LEN + 1];
	char root[4096];       /* the detached sandboxes' directory */
	char workroot[4096];   /* the sandboxes' workspaces */
	char domain[256];      /* getHost's PORT-ID.DOMAIN (--domain) */
	char domain_port[270]; /* "DOMAIN:PORT", what create answers as its domain */
	struct e2b_conn *conns;
	size_t n_conns;
	struct e2b_sbx *sbxs;
	long next_h;
	struct e2b_call *calls; /* the Connect calls alive (their ticks) */
	struct e2b_snap *snaps; /* e2b_snap.c's */
	long next_snap;
	bool stop;
};

/* The files, lowest first (each calls only those before it): e2b_conn.c,
 * e2b_sbx.c, e2b_connect.c, e2b_process.c and e2b_fs.c (the services),
 * e2b_snap.c, e2b_control.c, e2b_host.c (getHost's ports), e2b_http.c (the
 * loop), e2b_cli.c. */

/* What a fork is made with (e2b_snap.c): its E2B timeout in seconds,
 * template, metadata and envVars (NULL: none; held by whoever holds it). */
struct e2b_fork_opts {
	long long secs;
	char template_id[64];
	json_object *metadata, *envs;
};

/* e2b_conn.c: answers on a connection; a and b the same, in constant time */
long long e2b_now_ms(void);
void e2b_random_hex(char *out, size_t digits);
bool e2b_same(const char *a, const char *b);
void e2b_conn_write(struct e2b_conn *c, const void *b, size_t n);
void e2b_conn_head(struct e2b_conn *c, int status, const char *ctype, long long len);
void e2b_http_done(struct e2b_http *h); /* the request answered: free it */
void e2b_http_free(struct e2b_http *h);

/* e2b_host.c: a request whose Host is PORT-ID.DOMAIN (getHost(port)) to
 * that port of sandbox ID: 1 when taken (h freed; the connection is a
 * tunnel's, C_TUNNEL, or refused, C_CLOSING), 0 not such a request. Then
 * the loop polls the client for client_events (client_io) and the port's
 * connection, up_fd (-1: none now), for up_io; host_free at its end. */
int e2b_host_take(struct e2b_conn *c, struct e2b_http *h);
short e2b_host_client_events(struct e2b_conn *c);
int e2b_host_up_fd(struct e2b_conn *c, short *events);
void e2b_host_client_io(struct e2b_conn *c, short revents);
void e2b_host_up_io(struct e2b_conn *c, short revents);
void e2b_host_free(struct e2b_conn *c);

/* e2b_http.c: the loop, until SIGINT or SIGTERM */
int e2b_serve(struct e2b *srv);

/* e2b_connect.c: a request whose path is /SERVICE/METHOD, to a method of
 * tables (NULL-ended): 1 when taken */
int e2b_connect_route(struct e2b_conn *c, struct e2b_http *h,
		      const struct e2b_method *const *tables);
void e2b_calls_tick(struct e2b *srv, long long now);
int e2b_calls_wait_ms(struct e2b *srv, long long now);
void e2b_call_conn_gone(struct e2b_call *c);

/* e2b_control.c: the control API, envd's plain routes */
void e2b_control_route(struct e2b_http *h);
void e2b_envd_route(struct e2b_http *h);

/* e2b_sbx.c */
struct e2b_sbx *e2b_sbx_find(struct e2b *srv, const char *id);
/* A new sandbox into *out at once, made by a child meanwhile: done(arg,
 * s, why) once it is ready (why NULL) or failed (why says; s is freed
 * after), with the loop's next turns; *out is neither found nor listed
 * until then. */
typedef void (*e2b_created_fn)(void *arg, struct e2b_sbx *s, const char *why);
int e2b_sbx_create(struct e2b *srv, e2b_created_fn done, void *arg, struct e2b_sbx **out,
		   struct ab_error *err);
void e2b_sbx_kill(struct e2b_sbx *s);
/* The sandbox id, made by parent's launcher (a fork), taken on: its link
 * dialled, its workspace parent's (removed with the last of them); NULL
 * (err says why; the sandbox stopped) when it cannot be. */
struct e2b_sbx *e2b_sbx_adopt(struct e2b_sbx *parent, const char *id, const struct e2b_fork_opts *o,
			      struct ab_error *err);
/* As e2b_sbx_find, a retired sandbox too: what a snapshot stands on. */
struct e2b_sbx *e2b_sbx_holder(struct e2b *srv, const char *id);
int e2b_sbx_ctl(struct e2b_sbx *s, const char *word, struct ab_error *err);
int e2b_sbx_poll_fd(struct e2b_sbx *s, short *events);
void e2b_sbx_io(struct e2b_sbx *s, short revents);
void e2b_sbxs_expire(struct e2b *srv, long long now);
void e2b_sbxs_end(struct e2b *srv);

/* e2b_snap.c: snapshots (POST /sandboxes/ID/snapshots, GET /snapshots,
 * DELETE /templates/ID) and forks. An id is SANDBOX-sN, at most this
 * long; a name at most E2B_SNAP_NAME_MAX. */
#define E2B_SNAP_ID_MAX	  100
#define E2B_SNAP_NAME_MAX 128
struct e2b_snap;
/* By its id, else the newest snapshot of that name (E2B's template alias). */
struct e2b_snap *e2b_snap_find(struct e2b *srv, const char *id);
int e2b_snaps_of(struct e2b *srv, const char *sbx); /* how many stand on it */
void e2b_snap_create(struct e2b_http *h, struct e2b_sbx *s, json_object *body);
void e2b_snap_list(struct e2b_http *h);
void e2b_snap_delete(struct e2b_http *h, const char *id);
/* The forks made (n of them, owned by the server) or why not (made NULL,
 * status E2B's); h is still there. */
typedef void (*e2b_forked_fn)(struct e2b_http *h, struct e2b_sbx **made, size_t n, const char *why,
			      int status);
/* count forks of parent from its checkpoint from (NULL: its state now). */
void e2b_snap_fork(struct e2b_http *h, struct e2b_sbx *parent, const char *from, int count,
		   const struct e2b_fork_opts *o, e2b_forked_fn done);
/* One sandbox from snapshot p. */
void e2b_snap_fork_from(struct e2b_http *h, struct e2b_snap *p, const struct e2b_fork_opts *o,
			e2b_forked_fn done);
void e2b_snaps_end(struct e2b *srv);

#endif
