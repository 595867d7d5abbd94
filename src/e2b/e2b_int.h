/* agentbox e2b's insides: the server, its connections and sandboxes
 * (e2b.h is what a service sees). */
#ifndef AB_E2B_INT_H
#define AB_E2B_INT_H

#include <stdint.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"
#include "e2b/e2b.h"

/* Bounds of what a client sends: a request's head (http/http_frame.h's
 * NET_HEAD_MAX), its body, what waits to be written to it. */
#define E2B_BODY_MAX  (64u << 20)
#define E2B_OUT_MAX   (32u << 20)
#define E2B_CONNS_MAX 256
#define E2B_KEY_LEN   64 /* hex digits of a key or an access token */

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
};

enum conn_state { C_HEAD, C_BODY, C_BUSY, C_STREAM };

struct e2b_conn {
	struct e2b_conn *next;
	struct e2b *srv;
	int fd;
	enum conn_state st;
	char *in;
	size_t in_len, in_cap;
	size_t head_len, body_want;
	char *out;
	size_t out_len, out_off, out_cap;
	bool close_after, dead;
	struct e2b_http *req;  /* the request being answered */
	struct e2b_call *call; /* its Connect call, if one */
};

/* One sandbox of the server's. */
struct e2b_pending {
	struct e2b_pending *next;
	long h;
	e2b_sbx_fn fn;
	void *arg;
	bool watch;
};

struct e2b_sbx {
	struct e2b_sbx *next;
	struct e2b *srv;
	char id[64];
	char token[E2B_KEY_LEN + 1]; /* envd's access token */
	char template_id[64];
	char workdir[4096]; /* its /workspace on the host ("" none) */
	json_object *metadata, *envs;
	long long started_ms, end_ms; /* realtime; end_ms: its timeout */
	bool paused, dead;
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
	char root[4096];     /* the detached sandboxes' directory */
	char workroot[4096]; /* the sandboxes' workspaces */
	struct e2b_conn *conns;
	size_t n_conns;
	struct e2b_sbx *sbxs;
	long next_h;
	struct e2b_call *calls; /* the Connect calls alive (their ticks) */
	bool stop;
};

/* e2b_http.c */
long long e2b_now_ms(void);
void e2b_conn_write(struct e2b_conn *c, const void *b, size_t n);
void e2b_conn_head(struct e2b_conn *c, int status, const char *ctype, long long len);
void e2b_http_done(struct e2b_http *h); /* the request answered: free it */
int e2b_serve(struct e2b *srv);
void e2b_random_hex(char *out, size_t digits);

/* e2b_connect.c: a request whose path is /SERVICE/METHOD (1: taken) */
int e2b_connect_route(struct e2b_conn *c, struct e2b_http *h);
void e2b_calls_tick(struct e2b *srv, long long now);
int e2b_calls_wait_ms(struct e2b *srv, long long now);
void e2b_call_conn_gone(struct e2b_call *c);

/* e2b_control.c: the control API; a and b the same, in constant time */
bool e2b_same(const char *a, const char *b);
void e2b_control_route(struct e2b_http *h);
void e2b_envd_route(struct e2b_http *h);

/* e2b_sbx.c */
struct e2b_sbx *e2b_sbx_find(struct e2b *srv, const char *id);
int e2b_sbx_create(struct e2b *srv, const char *template_id, struct e2b_sbx **out,
		   struct ab_error *err);
void e2b_sbx_kill(struct e2b_sbx *s);
int e2b_sbx_ctl(struct e2b_sbx *s, const char *word, struct ab_error *err);
int e2b_sbx_poll_fd(struct e2b_sbx *s, short *events);
void e2b_sbx_io(struct e2b_sbx *s, short revents);
void e2b_sbxs_expire(struct e2b *srv, long long now);
void e2b_sbxs_end(struct e2b *srv);

/* e2b_process.c */
void e2b_process_free(struct e2b_sbx *s);

#endif
