/* rt_auth.h's locks on agentbox runtime's HTTP listener (libmicrohttpd):
 * each connection counted to its client (rt_auth_client_take) and shut
 * when its client holds its share, or when a request's head is not in
 * RT_HEAD_DEADLINE_S after the connection came or its last answer went
 * (a client that trickles a head byte by byte holds no slot for long);
 * and each request's Host, Origin, token and (a JSON route's)
 * Content-Type judged before anything else is done for it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "runtime/rt_auth.h"
#include "httpapi/rt_int.h"

struct rt_hconn {
	struct rt_hconn *next, *prev;
	int fd, client;
	bool in_head; /* waiting for a request's head */
	unsigned long long since;
};

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

void rt_auth_http_notify(void *cls, struct MHD_Connection *c, void **ctx,
			 enum MHD_ConnectionNotificationCode toe)
{
	struct rt_auth *a = &((struct rt *)cls)->auth;
	struct rt_hconn *h = *ctx;
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (!h)
			return;
		rt_auth_client_put(a, h->client, false);
		if (h->prev)
			h->prev->next = h->next;
		else
			a->hconns = h->next;
		if (h->next)
			h->next->prev = h->prev;
		free(h);
		*ctx = NULL;
		return;
	}
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	int fd = ci ? ci->connect_fd : -1;
	h = fd >= 0 ? calloc(1, sizeof(*h)) : NULL;
	if (!h) {
		if (fd >= 0)
			shutdown(fd, SHUT_RDWR); /* the daemon closes it */
		return;
	}
	h->fd = fd;
	h->in_head = true;
	h->since = now_ms();
	h->client = rt_auth_client_take(a, fd, false);
	if (h->client < 0)
		shutdown(fd, SHUT_RDWR); /* its client holds its share: closed at once */
	h->next = a->hconns;
	if (a->hconns)
		a->hconns->prev = h;
	a->hconns = h;
	*ctx = h;
}

static struct rt_hconn *hconn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

void rt_auth_http_request(struct MHD_Connection *c, bool head_in)
{
	struct rt_hconn *h = hconn_of(c);
	if (!h)
		return;
	h->in_head = !head_in;
	h->since = now_ms();
}

void rt_auth_http_sweep(struct rt *rt)
{
	unsigned long long now = now_ms();
	unsigned long long bound =
		1000ull * (rt->o->conn_timeout_s < RT_HEAD_DEADLINE_S ? rt->o->conn_timeout_s
								      : RT_HEAD_DEADLINE_S);
	for (struct rt_hconn *h = rt->auth.hconns; h; h = h->next)
		if (h->in_head && now > h->since + bound) {
			shutdown(h->fd, SHUT_RDWR);
			h->in_head = false; /* once */
		}
}

static const char *header(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* A JSON route's body must say it is JSON: text/plain (and the form types)
 * is what a web page may POST to another origin without asking first. */
static bool json_ctype(const char *ct)
{
	if (!ct || strncasecmp(ct, "application/json", 16))
		return false;
	ct += 16;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return !*ct || *ct == ';';
}

bool rt_auth_http_refused(struct rt *rt, struct MHD_Connection *c, struct req *r, const char *url)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	const char *host = header(c, "Host"), *origin = header(c, "Origin");
	const char *authz = header(c, "Authorization");
	const char *why;
	unsigned status;
	if (!rt_auth_host_ok(&rt->auth, host, host ? strlen(host) : 0, ci ? ci->connect_fd : -1)) {
		why = "the Host header names another server (agentbox runtime --host NAME admits "
		      "a name)";
		status = MHD_HTTP_MISDIRECTED_REQUEST;
	} else if (origin && !rt_auth_origin_ok(&rt->auth, origin, strlen(origin))) {
		why = "a request from a web page's origin is refused (agentbox runtime "
		      "--allow-origin ORIGIN admits one)";
		status = MHD_HTTP_FORBIDDEN;
	} else if (!rt_auth_bearer_ok(&rt->auth, authz, authz ? strlen(authz) : 0)) {
		why = authz ? "the token is wrong"
			    : "a token is required: Authorization: Bearer TOKEN";
		status = MHD_HTTP_UNAUTHORIZED;
	} else {
		return false;
	}
	/* the error's shape: sandboxd's under /v1/ and agentbox's own, main.py's else */
	r->route =
		!strncmp(url, "/v1/", 4) || !strncmp(url, "/agentbox/", 10) ? R_V1_FILE : R_HEALTH;
	rt_answer_msg(r, status, why);
	return true;
}

bool rt_auth_http_json_refused(struct MHD_Connection *c, struct req *r)
{
	if (r->step == S_DONE || (r->route != R_EXECUTE && !(r->route > R_AB_NONE && r->post)))
		return false;
	const char *cl = header(c, "Content-Length");
	bool body = header(c, "Transfer-Encoding") || (cl && strtoull(cl, NULL, 10) > 0);
	if (!body || json_ctype(header(c, "Content-Type")))
		return false;
	rt_answer_msg(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
		      "the body must be sent as Content-Type: application/json");
	return true;
}
