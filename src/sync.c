#include "sync.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "error.h"

int sync_pair(int fds[2], struct ab_error *err)
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) < 0)
		return ab_error_set(err, errno, "cannot create the sandbox's control channel");
	return 0;
}

int sync_send(int fd, enum sync_type type, int32_t code, int32_t status, const char *text)
{
	struct sync_msg m = {.type = type, .code = code, .status = status};
	if (text)
		strncpy(m.text, text, sizeof(m.text) - 1);
	ssize_t n;
	do
		n = send(fd, &m, sizeof(m), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(m) ? 0 : -EIO;
}

int sync_recv(int fd, struct sync_msg *m)
{
	ssize_t n;
	do
		n = recv(fd, m, sizeof(*m), MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return 0;
	if (n != (ssize_t)sizeof(*m) || m->type < SYNC_GO || m->type > SYNC_EXIT ||
	    memchr(m->text, '\0', sizeof(m->text)) == NULL)
		return -EBADMSG;
	return 1;
}
