/* The egress proxy (netproxy.h): its epoll set, accepting (bounded by
 * --net max-conns), deadlines and the byte budget (--net rate=), setup and
 * teardown. Each connection's life is netconn.c. */
#include "net/netproxy.h"

#include <errno.h>
#include <ifaddrs.h>
#include <poll.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"
#include "net/netproxy_int.h"
#include "net/netresolve.h"
#include "net/netsecret.h"
#include "util/util.h"

/* A connection past --net max-conns: counted, closed. */
static void refuse(struct netproxy *p, uint64_t id, unsigned port, int fd)
{
	static const char why[] = "too many connections at once (--net max-conns)";
	net_report_add(&p->total, false, "*", 0, why);
	if (p->sink.record)
		p->sink.record(p->sink.arg, id, port, false, "*", 0, why);
	if (id && p->sink.closed)
		p->sink.closed(p->sink.arg, id);
	close(fd);
}

static void on_accept(struct netproxy *p)
{
	for (;;) {
		int fd = accept4(p->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		/* from which port: the launcher finds whose command it is */
		struct sockaddr_in from;
		socklen_t l = sizeof(from);
		unsigned port = 0;
		if (getpeername(fd, (struct sockaddr *)&from, &l) == 0 &&
		    from.sin_family == AF_INET)
			port = ntohs(from.sin_port);
		struct conn *c = NULL;
		size_t i;
		for (i = 0; i < p->max && !c; i++)
			if (p->conns[i].st == S_FREE)
				c = &p->conns[i];
		if (!c || p->n_conns >= p->pol.max_conns) {
			/* refused once the launcher knows whose it is, while its
			 * process waits for an answer (a few at a time) */
			if (p->sink.accepted && p->n_refusing < AB_ARRAY_SIZE(p->refusing)) {
				uint64_t id = ++p->next_id;
				p->refusing[p->n_refusing++] = (struct refusing){id, fd, port};
				p->sink.accepted(p->sink.arg, id, port);
			} else {
				refuse(p, 0, port, fd);
			}
			continue;
		}
		i--;
		memset(c, 0, offsetof(struct conn, c2u));
		c->cfd = c->ufd = -1;
		if (!(c->c2u = malloc(2 * sizeof(*c->c2u)))) {
			close(fd);
			continue;
		}
		c->u2c = c->c2u + 1;
		c->c2u->len = c->u2c->len = 0;
		c->st = p->sink.accepted ? S_TAG : S_HEAD;
		c->id = ++p->next_id;
		c->cfd = fd;
		c->deadline = net_now_ms() + HANDSHAKE_MS;
		c->client_port = port;
		p->n_conns++;
		if (p->sink.accepted)
			p->sink.accepted(p->sink.arg, c->id, port);
		else if (net_add_fd(p, fd, net_key(i, W_CLIENT), EPOLLIN) < 0)
			conn_close(p, c);
		else
			c->cmask = EPOLLIN;
	}
}

/* The terminating threads' reports and ends (netterm.c). */
static void on_term(struct netproxy *p)
{
	uint64_t id;
	bool done;
	char why[400];
	while (net_term_recv(p, &id, &done, why, sizeof(why))) {
		struct conn *c = NULL;
		for (size_t i = 0; i < p->max && !c; i++)
			if (p->conns[i].st == S_TERM && p->conns[i].id == id)
				c = &p->conns[i];
		if (!c)
			continue;
		if (why[0])
			conn_record(p, c, false, why);
		if (done) {
			net_term_join(p, c, false);
			conn_close(p, c);
		}
	}
}

/* A terminating thread whose client has gone (it read a refusal, or gave
 * up on a handshake, and its command may have ended at once) is about to
 * say why: its word is waited for, at most ms, so that it reaches the
 * command's result. A connection whose client is still there is not. */
void netproxy_settle(struct netproxy *p, int ms)
{
	unsigned long long deadline = net_now_ms() + (unsigned)ms;
	for (;;) {
		on_term(p);
		bool ending = false;
		for (size_t i = 0; i < p->max && !ending; i++) {
			if (p->conns[i].st != S_TERM)
				continue;
			struct pollfd pf = {.fd = p->conns[i].cfd, .events = POLLRDHUP};
			ending = poll(&pf, 1, 0) > 0 &&
				 (pf.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
		}
		unsigned long long now = net_now_ms();
		if (!ending || now >= deadline)
			return;
		struct pollfd tp = {.fd = p->term_pair[0], .events = POLLIN};
		(void)poll(&tp, 1, (int)(deadline - now));
	}
}

/* Deadlines, and the byte budget's refill. */
static void on_tick(struct netproxy *p)
{
	uint64_t ticks;
	(void)!read(p->timerfd, &ticks, sizeof(ticks));
	unsigned long long now = net_now_ms();
	if (p->pol.rate) {
		unsigned long long dt = now - p->refilled_ms;
		p->refilled_ms = now;
		p->tokens += (long long)(p->pol.rate * dt / 1000);
		if (p->tokens > (long long)p->pol.rate)
			p->tokens = (long long)p->pol.rate;
		if (p->tokens > 0)
			p->throttled = false;
	}
	for (size_t i = 0; i < p->max; i++) {
		struct conn *c = &p->conns[i];
		if (c->st == S_FREE || c->st == S_TERM || now < c->deadline)
			continue;
		if (c->st == S_RELAY || c->st == S_CLOSING)
			conn_close(p, c);
		else
			conn_fail(c, 504, 6, "timed out before the connection was made");
		c->deadline = now + 1000; /* the reply gets a second to go */
	}
}

static void arm(struct netproxy *p)
{
	struct itimerspec its = {0};
	unsigned ms = p->throttled ? THROTTLE_TICK_MS : TICK_MS;
	if (p->n_conns || p->throttled) {
		its.it_value.tv_sec = ms / 1000;
		its.it_value.tv_nsec = (long)(ms % 1000) * 1000000;
	}
	timerfd_settime(p->timerfd, 0, &its, NULL);
}

void netproxy_dispatch(struct netproxy *p)
{
	struct epoll_event evs[64];
	int n = epoll_wait(p->epfd, evs, 64, 0);
	bool was_throttled = p->throttled;
	for (int k = 0; k < n; k++) {
		int what = (int)(evs[k].data.u64 & 0xff);
		size_t i = (size_t)(evs[k].data.u64 >> 8);
		if (what == W_LISTEN) {
			on_accept(p);
		} else if (what == W_RESOLVER) {
			conn_on_lookups(p);
		} else if (what == W_TIMER) {
			on_tick(p);
		} else if (what == W_TERM) {
			on_term(p);
		} else if (i < p->max && p->conns[i].st != S_FREE) {
			if (what == W_CLIENT)
				conn_on_client(p, &p->conns[i], evs[k].events);
			else
				conn_on_upstream(p, &p->conns[i], evs[k].events);
		}
	}
	for (size_t i = 0; i < p->max; i++)
		conn_update(p, i);
	if (n > 0 || was_throttled != p->throttled)
		arm(p);
}

/* ---- setup ---- */

static void find_self(struct netproxy *p)
{
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) < 0)
		return;
	size_t n = 0;
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
		n++;
	p->self = calloc(n ? n : 1, sizeof(*p->self));
	for (struct ifaddrs *i = ifa; i && p->self; i = i->ifa_next) {
		unsigned port;
		if (i->ifa_addr &&
		    net_addr_from_sockaddr(i->ifa_addr, p->self[p->n_self], &port) == 0)
			p->n_self++;
	}
	freeifaddrs(ifa);
}

int netproxy_policy_new(const struct ab_config *cfg, struct netproxy **out, struct ab_error *err)
{
	struct netproxy *p = *out = calloc(1, sizeof(*p));
	if (!p)
		return ab_error_set(err, ENOMEM, "starting the network proxy");
	p->listen_fd = p->epfd = p->timerfd = -1;
	p->term_pair[0] = p->term_pair[1] = -1;
	int r = netproxy_policy_from_config(p, cfg, err);
	if (r < 0) {
		netproxy_free(p);
		*out = NULL;
	}
	return r;
}

int netproxy_new(const struct ab_config *cfg, struct net_secrets *sec, int listen_fd,
		 struct netproxy **out, struct ab_error *err)
{
	struct netproxy *p;
	int r = netproxy_policy_new(cfg, &p, err);
	*out = NULL;
	if (r < 0) {
		close(listen_fd);
		return r;
	}
	p->listen_fd = listen_fd;
	p->sec = sec;
	p->max = p->pol.max_conns;
	p->conns = calloc(p->max, sizeof(*p->conns));
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (!p->conns || p->epfd < 0 || p->timerfd < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, p->term_pair) <
		    0) {
		r = ab_error_set(err, errno ? errno : ENOMEM, "starting the network proxy");
		goto fail;
	}
	for (size_t i = 0; i < p->max; i++)
		p->conns[i].cfd = p->conns[i].ufd = -1;
	if ((r = net_resolver_new(&p->res, err)) < 0)
		goto fail;
	fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
	if ((r = net_add_fd(p, listen_fd, net_key(0, W_LISTEN), EPOLLIN)) < 0 ||
	    (r = net_add_fd(p, net_resolver_fd(p->res), net_key(0, W_RESOLVER), EPOLLIN)) < 0 ||
	    (r = net_add_fd(p, p->timerfd, net_key(0, W_TIMER), EPOLLIN)) < 0 ||
	    (r = net_add_fd(p, p->term_pair[0], net_key(0, W_TERM), EPOLLIN)) < 0) {
		ab_error_set(err, -r, "starting the network proxy");
		goto fail;
	}
	find_self(p);
	p->tokens = (long long)p->pol.rate;
	p->refilled_ms = net_now_ms();
	p->total.on = true;
	*out = p;
	return 0;
fail:
	netproxy_free(p);
	return r;
}

int netproxy_fd(const struct netproxy *p)
{
	return p->epfd;
}

void netproxy_free(struct netproxy *p)
{
	if (!p)
		return;
	for (size_t i = 0; p->conns && i < p->max; i++) {
		if (p->conns[i].st == S_TERM && p->conns[i].term)
			net_term_join(p, &p->conns[i], true);
		if (p->conns[i].st != S_FREE)
			conn_close(p, &p->conns[i]);
	}
	free(p->conns);
	for (size_t i = 0; i < p->n_refusing; i++)
		close(p->refusing[i].fd);
	net_resolver_free(p->res);
	int fds[] = {p->epfd, p->timerfd, p->listen_fd, p->term_pair[0], p->term_pair[1]};
	for (size_t i = 0; i < AB_ARRAY_SIZE(fds); i++)
		ab_close_keep_errno(fds[i]);
	netproxy_rules_free(p);
	free(p->self);
	net_report_free(&p->total);
	free(p);
}

void netproxy_set_sink(struct netproxy *p, const struct netproxy_sink *sink)
{
	p->sink = *sink;
}

void netproxy_tagged(struct netproxy *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_refusing; i++)
		if (p->refusing[i].id == id) {
			struct refusing r = p->refusing[i];
			p->refusing[i] = p->refusing[--p->n_refusing];
			refuse(p, r.id, r.port, r.fd);
			return;
		}
	for (size_t i = 0; i < p->max; i++)
		if (p->conns[i].st == S_TAG && p->conns[i].id == id) {
			p->conns[i].st = S_HEAD;
			conn_update(p, i);
			return;
		}
}

const struct ab_net_report *netproxy_total(const struct netproxy *p)
{
	return &p->total;
}
