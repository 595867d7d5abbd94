#include "util/sync.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "util/error.h"
#include "util/util.h"

int sync_pair(int fds[2], struct ab_error *err)
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) < 0)
		return ab_error_set(err, errno, "cannot create the sandbox's control channel");
	return 0;
}

int packet_send(int fd, const void *buf, size_t len, const int *fds, size_t nfds)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	/* zeroed: the kernel copies the padding after the fds in as well */
	union {
		char buf[CMSG_SPACE(SYNC_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} u = {0};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > SYNC_MAX_FDS)
		return -EINVAL;
	if (nfds) {
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)len ? 0 : -EIO;
}

int fileop_pkt_send(int fd, uint32_t type, int32_t status, const void *data, size_t len)
{
	struct fileop_pkt h = {.type = type, .status = status, .len = (uint32_t)len};
	struct iovec iov[2] = {{.iov_base = &h, .iov_len = sizeof(h)},
			       {.iov_base = (void *)data, .iov_len = len}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
	if (len > FILEOP_PKT_MAX)
		return -EMSGSIZE;
	ssize_t n;
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)(sizeof(h) + len) ? 0 : -EIO;
}

static int send_msg(int fd, const struct sync_msg *m, const int *fds, size_t nfds)
{
	return packet_send(fd, m, sizeof(*m), fds, nfds);
}

int sync_send(int fd, enum sync_type type, int32_t code, int32_t status, const char *text)
{
	struct sync_msg m = {.type = type, .code = code, .status = status};
	if (text)
		strncpy(m.text, text, sizeof(m.text) - 1);
	return send_msg(fd, &m, NULL, 0);
}

int sync_send_fd(int fd, enum sync_type type, int passed_fd)
{
	struct sync_msg m = {.type = type};
	return send_msg(fd, &m, &passed_fd, 1);
}

int sync_send_fds(int fd, enum sync_type type, const int *fds, size_t n)
{
	struct sync_msg m = {.type = type};
	return send_msg(fd, &m, fds, n);
}

int sync_send_fds_status(int fd, enum sync_type type, int32_t code, int32_t status, const int *fds,
			 size_t n, const char *text)
{
	struct sync_msg m = {.type = type, .code = code, .status = status};
	if (text)
		snprintf(m.text, sizeof(m.text), "%s", text);
	return send_msg(fd, &m, fds, n);
}

/* SYNC_SHIM: the shim's socket, and its pidfd when the profile lets the
 * init open one. */
static bool fds_fit(uint32_t type, size_t n)
{
	switch (type) {
	case SYNC_LISTENER:
	case SYNC_NET_LISTENER:
	case SYNC_NETNS:
	case SYNC_VIEWNS:
		return n == 1;
	case SYNC_SHIM:
		return n == 1 || n == 2;
	case SYNC_EXEC:
		return n == SYNC_EXEC_FDS;
	case SYNC_CGROUP:
		return n <= 8;
	default:
		return n == 0;
	}
}

ssize_t packet_recv(int fd, void *buf, size_t len, int *fds, size_t max, size_t *nout)
{
	ssize_t n = packet_recv_upto(fd, buf, len, fds, max, nout);
	if (n > 0 && (size_t)n != len) {
		for (size_t i = 0; i < *nout; i++)
			ab_close_keep_errno(fds[i]);
		*nout = 0;
		return -EBADMSG;
	}
	return n;
}

ssize_t packet_recv_upto(int fd, void *buf, size_t len, int *fds, size_t max, size_t *nout)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	union {
		char buf[CMSG_SPACE((SYNC_MAX_FDS + 4) * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = u.buf,
		.msg_controllen = sizeof(u.buf),
	};
	*nout = 0;
	ssize_t n;
	bool reset = false;
	/* ECONNRESET says only that the peer closed with our packets unread
	 * in its queue (a SHIM_KILL sent as the shim ended): the error is
	 * given once, ahead of the packets it sent before, which are still
	 * here, as is the end of file behind them. Taken as the end, it
	 * lost a shim's last word (SHIM_EXITED) and with it the result. */
	for (;;) {
		n = recvmsg(fd, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ECONNRESET && !reset) {
			reset = true;
			continue;
		}
		break;
	}
	if (n < 0)
		return -errno;
	/* take every fd that came along: keep what fits, close the rest */
	size_t got = 0;
	bool extra = false;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int pfd;
			memcpy(&pfd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < max) {
				fds[got++] = pfd;
			} else {
				close(pfd);
				extra = true;
			}
		}
	}
	if (n > 0 && ((size_t)n > len || (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) || extra)) {
		for (size_t i = 0; i < got; i++)
			ab_close_keep_errno(fds[i]);
		return -EBADMSG;
	}
	if (n == 0)
		for (size_t i = 0; i < got; i++)
			ab_close_keep_errno(fds[i]);
	else
		*nout = got;
	return n;
}

bool sync_valid(const struct sync_msg *m, size_t n)
{
	return m->type >= SYNC_GO && m->type <= SYNC_TYPE_MAX &&
	       memchr(m->text, '\0', sizeof(m->text)) != NULL && fds_fit(m->type, n);
}

int sync_recv_fds(int fd, struct sync_msg *m, int *fds, size_t max, size_t *nout)
{
	size_t got;
	ssize_t n = packet_recv(fd, m, sizeof(*m), fds, max, &got);
	*nout = 0;
	if (n <= 0)
		return n == -EAGAIN ? -EAGAIN : (int)n;
	if (sync_valid(m, got)) {
		*nout = got;
		return 1;
	}
	for (size_t i = 0; i < got; i++)
		ab_close_keep_errno(fds[i]);
	return -EBADMSG;
}

int sync_recv(int fd, struct sync_msg *m, int *passed)
{
	int fds[SYNC_MAX_FDS];
	size_t n;
	int r = sync_recv_fds(fd, m, fds, passed ? 1 : 0, &n);
	if (passed)
		*passed = n ? fds[0] : -1;
	return r;
}
