#include "sync.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "error.h"
#include "util.h"

int sync_pair(int fds[2], struct ab_error *err)
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) < 0)
		return ab_error_set(err, errno, "cannot create the sandbox's control channel");
	return 0;
}

static int send_msg(int fd, const struct sync_msg *m, int passed_fd)
{
	struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (passed_fd >= 0) {
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &passed_fd, sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(*m) ? 0 : -EIO;
}

int sync_send(int fd, enum sync_type type, int32_t code, int32_t status, const char *text)
{
	struct sync_msg m = {.type = type, .code = code, .status = status};
	if (text)
		strncpy(m.text, text, sizeof(m.text) - 1);
	return send_msg(fd, &m, -1);
}

int sync_send_fd(int fd, enum sync_type type, int passed_fd)
{
	struct sync_msg m = {.type = type};
	return send_msg(fd, &m, passed_fd);
}

int sync_recv(int fd, struct sync_msg *m, int *passed)
{
	struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = u.buf,
		.msg_controllen = sizeof(u.buf),
	};
	if (passed)
		*passed = -1;
	ssize_t n;
	do
		n = recvmsg(fd, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* take every fd that came along: keep one if asked for, close the rest */
	int got = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfds; i++) {
			int pfd;
			memcpy(&pfd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < 0 && passed)
				got = pfd;
			else
				close(pfd);
		}
	}
	if (n == 0) {
		ab_close_keep_errno(got);
		return 0;
	}
	if (n != (ssize_t)sizeof(*m) || (mh.msg_flags & MSG_CTRUNC) || m->type < SYNC_GO ||
	    m->type > SYNC_SIGNAL_ALL || memchr(m->text, '\0', sizeof(m->text)) == NULL ||
	    (got >= 0) != (m->type == SYNC_LISTENER)) {
		ab_close_keep_errno(got);
		return -EBADMSG;
	}
	if (passed)
		*passed = got;
	return 1;
}
