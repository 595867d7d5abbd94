/* The proxy's event loop primitives (netproxy_int.h): the clock, the epoll
 * set's keys and interest. Below both netproxy.c (the loop) and netconn.c
 * (each connection). */
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>

#include "net/netproxy_int.h"

unsigned long long net_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

uint64_t net_key(size_t i, int what)
{
	return ((uint64_t)i << 8) | (uint64_t)what;
}

/* Interest in an fd; none at all takes it out of the set, so that a hang-up
 * the proxy is not ready to act on cannot wake the loop again and again. */
void net_set_mask(struct netproxy *p, size_t i, int fd, uint32_t *cur, uint32_t want, int what)
{
	if (fd < 0 || *cur == want)
		return;
	struct epoll_event ev = {.events = want, .data.u64 = net_key(i, what)};
	int op = !want ? EPOLL_CTL_DEL : !*cur ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
	epoll_ctl(p->epfd, op, fd, &ev);
	*cur = want;
}

int net_add_fd(struct netproxy *p, int fd, uint64_t k, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.u64 = k};
	return epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}
