/* The bottom of a session's files (session.h): the clock of its deadlines
 * and the interest of its one epoll set, used by every file above. */
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "session/session.h"

unsigned long long session_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

static uint64_t ev_data(size_t slot, int kind)
{
	return ((uint64_t)(slot + 1) << 8) | (uint64_t)kind;
}

int session_watch(struct ab_session *s, int fd, size_t slot, int kind)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = ev_data(slot, kind)};
	return epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

void session_unwatch(struct ab_session *s, int *fd)
{
	if (*fd < 0)
		return;
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, *fd, NULL);
	close(*fd);
	*fd = -1;
}

int session_watch_out(struct ab_session *s, int fd, size_t slot, int kind, bool on)
{
	struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = ev_data(slot, kind)};
	return epoll_ctl(s->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &ev) < 0 ? -errno : 0;
}
