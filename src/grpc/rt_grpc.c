/* agentbox runtime's gRPC server: sandboxd's process.v1.ProcessService
 * (agent-sandbox's packages/sandboxd/spec/process/v1/process.proto) over
 * HTTP/2 cleartext with prior knowledge, as a client's insecure channel
 * dials it. libnghttp2 (runtime/rt_h2.h, loaded by rt_libs.c) frames the
 * connections; rt_pb.c decodes the requests and encodes the answers; each
 * process is a command of the runtime's one session. One thread: the
 * server's loop (runtime/runtime.c) polls the listener and the
 * connections (rt_grpc_pollfds, rt_grpc_run) beside the HTTP daemon and
 * the session, and hands rt_gproc.c the session's events of its commands.
 *
 * A process of Start lives as long as its stream: when the client cancels
 * the call or goes away, the process is cancelled (as sandboxd's exec
 * bound to the call's context is killed). Its output is queued per stream
 * up to OUT_MAX bytes; past that the session's streamed output is paused
 * (the command blocks on its full pipe) until the client reads, and a
 * stream that stays past it for --http-timeout seconds is reset and its
 * process cancelled. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "front/front_link.h"
#include "grpc/rt_grpc.h"
#include "util/error.h"

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

/* how long ago t was (0 for a t after now: set while now was read) */
static unsigned long long since(unsigned long long now, unsigned long long t)
{
	return now > t ? now - t : 0;
}

/* ---- answers ---- */

static ssize_t read_out(nghttp2_session *h, int32_t sid, uint8_t *buf, size_t length,
			uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct gcall *call = src->ptr;
	size_t avail = call->out_len - call->out_off;
	if (avail) {
		size_t n = avail < length ? avail : length;
		memcpy(buf, call->out + call->out_off, n);
		call->out_off += n;
		if (call->out_off == call->out_len)
			call->out_off = call->out_len = 0;
		if (call->out_len - call->out_off <= OUT_MAX)
			call->over_since = 0;
		return (ssize_t)n;
	}
	if (!call->done)
		return NGHTTP2_ERR_DEFERRED;
	char st[16];
	snprintf(st, sizeof(st), "%d", call->status);
	nghttp2_nv tr[] = {
		{(uint8_t *)"grpc-status", (uint8_t *)st, 11, strlen(st), NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)"grpc-message", (uint8_t *)call->msg, 12, strlen(call->msg),
		 NGHTTP2_NV_FLAG_NONE},
	};
	*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
	if (nghttp2_submit_trailer(h, sid, tr, call->msg[0] ? 2 : 1) != 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	return 0;
}

#define NV(n, v)                                                                                   \
	{                                                                                          \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE     \
	}

/* The response's headers with its data to come. */
static void open_answer(struct gcall *call)
{
	if (call->headers_sent) {
		nghttp2_session_resume_data(call->c->h, call->sid);
		return;
	}
	nghttp2_nv hd[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
			   NV("grpc-accept-encoding", "identity")};
	nghttp2_data_provider prd = {.source.ptr = call, .read_callback = read_out};
	call->headers_sent = true;
	nghttp2_submit_response(call->c->h, call->sid, hd, 3, &prd);
}

void grpc_headers(struct gcall *call)
{
	open_answer(call);
}

/* One message of n bytes, encoded by enc into the call's answer. */
bool grpc_answer(struct gcall *call, size_t room, size_t (*enc)(uint8_t *, size_t, const void *),
		 const void *arg)
{
	if (call->out_len + 5 + room > call->out_cap) {
		if (call->out_off) { /* what was sent goes first */
			memmove(call->out, call->out + call->out_off,
				call->out_len - call->out_off);
			call->out_len -= call->out_off;
			call->out_off = 0;
		}
		size_t cap = call->out_len + 5 + room; /* by doubling: chunks come often */
		if (cap < 2 * call->out_cap && cap < 2 * OUT_MAX)
			cap = 2 * call->out_cap;
		uint8_t *o = realloc(call->out, cap);
		if (!o)
			return false;
		call->out = o;
		call->out_cap = cap;
	}
	uint8_t *m = call->out + call->out_len;
	size_t n = enc(m + 5, room, arg);
	if (n == PB_NO_ROOM || n > room)
		return false;
	m[0] = 0;
	m[1] = (uint8_t)(n >> 24);
	m[2] = (uint8_t)(n >> 16);
	m[3] = (uint8_t)(n >> 8);
	m[4] = (uint8_t)n;
	call->out_len += 5 + n;
	open_answer(call);
	return true;
}

/* grpc-message's percent-encoding: printable ASCII but '%' as it is */
static void set_msg(struct gcall *call, const char *msg)
{
	size_t o = 0;
	for (const unsigned char *s = (const unsigned char *)msg; *s && o + 4 < sizeof(call->msg);
	     s++) {
		if (*s >= 0x20 && *s <= 0x7e && *s != '%') {
			call->msg[o++] = (char)*s;
		} else {
			snprintf(call->msg + o, 4, "%%%02X", *s);
			o += 3;
		}
	}
	call->msg[o] = 0;
}

/* The call's status: a trailer after its messages, or trailers only. */
void grpc_finish(struct gcall *call, int status, const char *fmt, ...)
{
	if (call->done)
		return;
	char m[512] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(m, sizeof(m), fmt, ap);
		va_end(ap);
	}
	set_msg(call, m);
	call->status = status;
	call->done = true;
	if (call->headers_sent) {
		nghttp2_session_resume_data(call->c->h, call->sid);
		return;
	}
	char st[16];
	snprintf(st, sizeof(st), "%d", status);
	nghttp2_nv hd[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
			   NV("grpc-status", st), NV("grpc-message", call->msg)};
	call->headers_sent = true;
	nghttp2_submit_response(call->c->h, call->sid, hd, call->msg[0] ? 4 : 3, NULL);
}

static size_t enc_empty(uint8_t *out, size_t outsz, const void *arg)
{
	return 0;
}

size_t grpc_enc_copy(uint8_t *out, size_t outsz, const void *arg)
{
	const struct blob *b = arg;
	if (b->n > outsz)
		return PB_NO_ROOM;
	memcpy(out, b->d, b->n);
	return b->n;
}

void grpc_finish_ok(struct gcall *call)
{
	if (grpc_answer(call, 0, enc_empty, NULL))
		grpc_finish(call, G_OK, NULL);
	else
		grpc_finish(call, G_INTERNAL, "out of memory");
}

/* The gRPC code for an agentbox error (its errno). */
int grpc_code_of(const struct ab_error *e)
{
	switch (e->code) {
	case ENOENT:
	case ENOTDIR:
	case ESRCH:
		return G_NOT_FOUND;
	case EACCES:
	case EPERM:
		return G_PERMISSION_DENIED;
	case EINVAL:
		return G_INVALID_ARGUMENT;
	case ECANCELED:
		return G_CANCELLED;
	case ETIMEDOUT:
		return G_DEADLINE_EXCEEDED;
	case EPIPE:
	case ECONNRESET:
	case ESHUTDOWN:
		return G_UNAVAILABLE;
	default:
		return G_INTERNAL;
	}
}
/* ---- connections ---- */

/* A call ended (answered, reset, or its connection gone): a process it
 * started is cancelled, a WriteStdin it waits for forgets it. */
static void call_free(struct rt_grpc *g, struct gcall *call)
{
	struct gconn *c = call->c;
	struct gproc *p = call->proc;
	if (p && p->call == call) {
		p->call = NULL;
		ab_front_cancel(&g->rt->f, &p->fr); /* stopped: freed after its result */
	} else if (p && p->wcur == call) {
		p->wcur = NULL;
	} else if (p) {
		struct gcall **w = &p->whead, *last = NULL;
		while (*w && *w != call)
			last = *w, w = &(*w)->wnext;
		if (*w) {
			*w = call->wnext;
			if (p->wtail == call)
				p->wtail = last;
		}
	}
	if (call->prev)
		call->prev->next = call->next;
	else
		c->calls = call->next;
	if (call->next)
		call->next->prev = call->prev;
	if (!--c->n_calls)
		c->idle_since = now_ms();
	g->in_total -= call->in_cap;
	pb_req_free(&call->q);
	free(call->in);
	free(call->out);
	free(call);
}

static ssize_t on_send(nghttp2_session *h, const uint8_t *data, size_t len, int flags, void *user)
{
	struct gconn *c = user;
	ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
			       ? NGHTTP2_ERR_WOULDBLOCK
			       : NGHTTP2_ERR_CALLBACK_FAILURE;
	return n;
}

static int on_begin_headers(nghttp2_session *h, const nghttp2_frame *f, void *user)
{
	struct gconn *c = user;
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct gcall *call = calloc(1, sizeof(*call));
	if (!call)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	call->c = c;
	call->sid = f->hd.stream_id;
	call->method = -1;
	call->last_in = now_ms();
	call->authed = c->g->rt->auth.off; /* else its authorization header says */
	call->next = c->calls;
	if (c->calls)
		c->calls->prev = call;
	c->calls = call;
	c->n_calls++;
	nghttp2_session_set_stream_user_data(h, call->sid, call);
	return 0;
}

static int on_header(nghttp2_session *h, const nghttp2_frame *f, const uint8_t *name, size_t nl,
		     const uint8_t *value, size_t vl, uint8_t flags, void *user)
{
	struct gcall *call = nghttp2_session_get_stream_user_data(h, f->hd.stream_id);
	if (!call || f->hd.type != NGHTTP2_HEADERS || call->dispatched)
		return 0;
	if (nl == 5 && !memcmp(name, ":path", 5)) {
		for (int i = 0; i < PB_METHODS; i++)
			if (vl == strlen(pb_method_paths[i]) &&
			    !memcmp(value, pb_method_paths[i], vl))
				call->method = i;
	} else if (nl == 7 && !memcmp(name, ":method", 7)) {
		call->post = vl == 4 && !memcmp(value, "POST", 4);
	} else if (nl == 12 && !memcmp(name, "content-type", 12)) {
		call->bad_ctype = vl < 16 || memcmp(value, "application/grpc", 16);
	} else if (nl == 13 && !memcmp(name, "authorization", 13)) {
		struct gconn *c = user;
		call->authed = rt_auth_bearer_ok(&c->g->rt->auth, (const char *)value, vl);
	} else if (nl == 10 && !memcmp(name, ":authority", 10)) {
		struct gconn *c = user;
		call->bad_host = !rt_auth_host_ok(&c->g->rt->auth, (const char *)value, vl, c->fd);
	}
	return 0;
}

static int on_data(nghttp2_session *h, uint8_t flags, int32_t sid, const uint8_t *data, size_t len,
		   void *user)
{
	struct gconn *c = user;
	struct gcall *call = nghttp2_session_get_stream_user_data(h, sid);
	if (!call || call->dispatched)
		return 0;
	call->last_in = now_ms();
	if (call->too_large)
		return 0;
	if (call->in_len + len > call->in_cap) {
		size_t cap = call->in_cap ? call->in_cap * 2 : 4096;
		while (cap < call->in_len + len)
			cap *= 2;
		if (cap > MSG_MAX + 5)
			cap = MSG_MAX + 5;
		uint8_t *b = call->in_len + len <= cap &&
					     c->g->in_total + cap - call->in_cap <= IN_TOTAL_MAX
				     ? realloc(call->in, cap)
				     : NULL;
		if (!b) { /* past a bound: answered RESOURCE_EXHAUSTED at its end */
			call->too_large = true;
			c->g->in_total -= call->in_cap;
			free(call->in);
			call->in = NULL;
			call->in_len = call->in_cap = 0;
			return 0;
		}
		c->g->in_total += cap - call->in_cap;
		call->in = b;
		call->in_cap = cap;
	}
	memcpy(call->in + call->in_len, data, len);
	call->in_len += len;
	return 0;
}

static int on_frame(nghttp2_session *h, const nghttp2_frame *f, void *user)
{
	struct gconn *c = user;
	struct gcall *call = nghttp2_session_get_stream_user_data(h, f->hd.stream_id);
	if (call && !call->dispatched && f->hd.type == NGHTTP2_HEADERS &&
	    f->headers.cat == NGHTTP2_HCAT_REQUEST) { /* judged before its body is read */
		if (call->bad_host || !call->authed) {
			call->dispatched = true;
			if (call->bad_host)
				grpc_finish(call, G_PERMISSION_DENIED,
					    ":authority names another server (agentbox runtime "
					    "--host NAME admits a name)");
			else
				grpc_finish(call, G_UNAUTHENTICATED,
					    "a token is required: authorization: Bearer TOKEN");
			return 0;
		}
		c->authed = true;
	}
	if ((f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS) ||
	    !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	if (call && !call->dispatched) {
		call->dispatched = true;
		c->g->svc->dispatch(c->g, call);
	}
	return 0;
}

static int on_close(nghttp2_session *h, int32_t sid, uint32_t code, void *user)
{
	struct gconn *c = user;
	struct gcall *call = nghttp2_session_get_stream_user_data(h, sid);
	if (call) {
		nghttp2_session_set_stream_user_data(h, sid, NULL);
		call_free(c->g, call);
	}
	return 0;
}

static void conn_free(struct rt_grpc *g, struct gconn *c)
{
	while (c->calls)
		call_free(g, c->calls);
	if (c->prev)
		c->prev->next = c->next;
	else
		g->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	g->n_conns--;
	rt_auth_client_put(&g->rt->auth, c->client, true);
	nghttp2_session_del(c->h);
	close(c->fd);
	free(c);
}

static void accept_conns(struct rt_grpc *g)
{
	for (int i = 0; i < 16; i++) {
		int fd = accept4(g->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int client = g->n_conns < GRPC_CONN_LIMIT
				     ? rt_auth_client_take(&g->rt->auth, fd, true)
				     : -1;
		struct gconn *c = client >= 0 ? calloc(1, sizeof(*c)) : NULL;
		if (!c) { /* past the bound, or its client's share: closed at once */
			rt_auth_client_put(&g->rt->auth, client, true);
			close(fd);
			continue;
		}
		int one = 1; /* small frames (window updates, headers) go at once */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->g = g;
		c->fd = fd;
		c->client = client;
		c->id = ++g->next_conn_id;
		c->idle_since = c->accepted = now_ms();
		nghttp2_settings_entry iv[] = {
			{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, STREAMS_MAX},
			{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20},
			{NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384},
		};
		if (nghttp2_session_server_new(&c->h, g->cb, c) != 0) {
			rt_auth_client_put(&g->rt->auth, client, true);
			close(fd);
			free(c);
			continue;
		}
		nghttp2_submit_settings(c->h, NGHTTP2_FLAG_NONE, iv, 3);
		c->next = g->conns;
		if (g->conns)
			g->conns->prev = c;
		g->conns = c;
		g->n_conns++;
	}
}

/* ---- the loop's side ---- */

size_t rt_grpc_pollfds(struct rt *rt, struct pollfd *p, size_t max)
{
	struct rt_grpc *g = rt->grpc;
	size_t n = 0;
	if (!g || !max)
		return 0;
	p[n++] = (struct pollfd){.fd = g->lfd, .events = POLLIN};
	for (struct gconn *c = g->conns; c && n < max; c = c->next) {
		short ev = 0;
		if (nghttp2_session_want_read(c->h))
			ev |= POLLIN;
		if (nghttp2_session_want_write(c->h))
			ev |= POLLOUT;
		p[n++] = (struct pollfd){.fd = c->fd, .events = ev};
	}
	return n;
}

/* Read what a connection has; false when it is done. */
static bool conn_read(struct gconn *c)
{
	uint8_t buf[65536];
	ssize_t n = read(c->fd, buf, sizeof(buf));
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	if (n == 0)
		return false;
	return nghttp2_session_mem_recv(c->h, buf, (size_t)n) >= 0;
}

/* Output paused while a stream holds more than OUT_MAX; a stream that
 * holds it longer than --http-timeout is reset (its process cancelled). */
static void backpressure(struct rt_grpc *g, unsigned long long now)
{
	bool over = false;
	for (struct ab_front_req *fr = g->rt->f.head; fr; fr = fr->next) {
		struct gproc *p = rt_gproc_of(g, fr);
		if (!p)
			continue;
		struct gcall *call = p->call;
		if (!call || call->out_len - call->out_off <= OUT_MAX)
			continue;
		if (!call->over_since)
			call->over_since = now;
		if (since(now, call->over_since) > g->rt->o->conn_timeout_s * 1000ull) {
			fprintf(stderr,
				"agentbox: runtime: gRPC process %d: its client read none of its "
				"output for %u s: stream reset, process cancelled\n",
				p->id, g->rt->o->conn_timeout_s);
			p->call = NULL;
			call->proc = NULL;
			ab_front_cancel(&g->rt->f, &p->fr);
			nghttp2_submit_rst_stream(call->c->h, NGHTTP2_FLAG_NONE, call->sid,
						  NGHTTP2_CANCEL);
			continue;
		}
		over = true;
	}
	if (over != g->paused && !g->rt->f.gone) {
		g->paused = over;
		ab_front_pause_output(&g->rt->f, over);
	}
}

void rt_grpc_run(struct rt *rt, const struct pollfd *p, size_t n)
{
	struct rt_grpc *g = rt->grpc;
	if (!g)
		return;
	if (n && p[0].revents && g->lfd >= 0)
		accept_conns(g);
	unsigned long long now = now_ms(), tmo = g->rt->o->conn_timeout_s * 1000ull;
	for (size_t i = 1; i < n; i++) {
		struct gconn *c = g->conns;
		while (c && c->fd != p[i].fd)
			c = c->next;
		if (c && (p[i].revents & (POLLIN | POLLHUP | POLLERR)) && !conn_read(c))
			c->dead = true;
	}
	unsigned long long head =
		(tmo < RT_HEAD_DEADLINE_S * 1000ull ? tmo : RT_HEAD_DEADLINE_S * 1000ull);
	for (struct gconn *c = g->conns, *next; c; c = next) {
		next = c->next;
		if (!c->authed && since(now, c->accepted) > head)
			c->dead = true; /* no authenticated call in time: its slot back */
		if (!c->dead && !c->ending && !c->n_calls &&
		    (g->stopping || since(now, c->idle_since) > tmo)) {
			c->ending = true; /* a GOAWAY: the client dials again */
			nghttp2_session_terminate_session(c->h, NGHTTP2_NO_ERROR);
		}
		for (struct gcall *call = c->calls; call; call = call->next)
			if (!call->dispatched && since(now, call->last_in) > tmo) { /* stalled */
				call->dispatched = true;
				nghttp2_submit_rst_stream(c->h, NGHTTP2_FLAG_NONE, call->sid,
							  NGHTTP2_CANCEL);
			}
		if (!c->dead && nghttp2_session_send(c->h) != 0)
			c->dead = true;
		if (c->dead ||
		    (!nghttp2_session_want_read(c->h) && !nghttp2_session_want_write(c->h)))
			conn_free(g, c);
	}
	backpressure(g, now); /* after sending: what the clients took is out */
}

size_t rt_grpc_busy(const struct rt *rt)
{
	return rt->grpc ? rt->grpc->n_procs : 0;
}

/* A listening socket on --listen's address, port: its fd or -errno. */
static int listen_socket(struct rt *rt, unsigned port, struct ab_error *err)
{
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(port)};
	bool v6 = strchr(rt->o->listen, ':') != NULL;
	if (v6 ? inet_pton(AF_INET6, rt->o->listen, &a6.sin6_addr) != 1
	       : inet_pton(AF_INET, rt->o->listen, &a4.sin_addr) != 1)
		return ab_error_plain(err, EINVAL,
				      "runtime: --listen %s is not an IPv4 or IPv6 address",
				      rt->o->listen);
	int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, v6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4,
		 v6 ? sizeof(a6) : sizeof(a4)) < 0 ||
	    listen(fd, 64) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return ab_error_set(err, e, "runtime: cannot listen on %s port %u for gRPC",
				    rt->o->listen, port);
	}
	return fd;
}

int rt_grpc_open(struct rt *rt, const struct rt_grpc_service *svc, struct ab_error *err)
{
	char why[300];
	if (!rt_h2_load(why, sizeof(why)))
		return ab_error_plain(err, ENOENT, "runtime: %s", why);
	struct rt_grpc *g = calloc(1, sizeof(*g));
	if (!g)
		return ab_error_plain(err, ENOMEM, "runtime: out of memory");
	g->rt = rt;
	g->svc = svc;
	g->lfd = -1;
	int rc = listen_socket(rt, rt->o->grpc_port, err);
	if (rc < 0 || nghttp2_session_callbacks_new(&g->cb) != 0) {
		if (rc >= 0)
			close(rc);
		free(g);
		return rc < 0 ? rc : ab_error_plain(err, ENOMEM, "runtime: out of memory");
	}
	g->lfd = rc;
	nghttp2_session_callbacks_set_send_callback(g->cb, on_send);
	nghttp2_session_callbacks_set_on_frame_recv_callback(g->cb, on_frame);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(g->cb, on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(g->cb, on_close);
	nghttp2_session_callbacks_set_on_header_callback(g->cb, on_header);
	nghttp2_session_callbacks_set_on_begin_headers_callback(g->cb, on_begin_headers);
	rt->grpc = g;
	return 0;
}

void rt_grpc_quiesce(struct rt *rt)
{
	struct rt_grpc *g = rt->grpc;
	if (!g || g->lfd < 0)
		return;
	close(g->lfd);
	g->lfd = -1;
	g->stopping = true;
}

/* The session is closed (its processes handed back by the engine first,
 * their calls answered UNAVAILABLE): every call still open gets it too,
 * sent if the socket takes it now, and everything is freed. */
void rt_grpc_close(struct rt *rt)
{
	struct rt_grpc *g = rt->grpc;
	if (!g)
		return;
	rt_grpc_quiesce(rt);
	for (struct gconn *c = g->conns; c; c = c->next)
		for (struct gcall *call = c->calls; call; call = call->next)
			grpc_finish(call, G_UNAVAILABLE, "The server is stopping");
	while (g->conns) {
		nghttp2_session_send(g->conns->h);
		conn_free(g, g->conns);
	}
	nghttp2_session_callbacks_del(g->cb);
	free(g);
	rt->grpc = NULL;
}
