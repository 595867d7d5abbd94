/* The framing of what the sandbox sends the launcher (src/util/sync.c): fixed-
 * size packets on a SOCK_SEQPACKET socket, with file descriptors riding
 * along (SCM_RIGHTS). The init's messages go through sync_recv_fds, a
 * command shim's through packet_recv (command.c). Input: byte 0 is the
 * number of fds the packet carries (low 3 bits) and which receiver reads
 * it (the rest); the remaining bytes are the packet, sent over a real
 * socketpair. Whatever comes, the receiver must keep no fd it did not
 * hand back, and hand back only a well-formed message.
 *
 * What command.c then makes of a shim's message (valid_exit, on_ctl) is
 * static there, so it is not reached. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "sandbox/shim.h"
#include "util/sync.h"

/* The lowest free fd number: a received fd kept by mistake would take it. */
static int lowest_free_fd(void)
{
	int fd = dup(STDERR_FILENO);
	FUZZ_CHECK(fd >= 0);
	close(fd);
	return fd;
}

static void send_packet(int sock, const uint8_t *data, size_t size, size_t nfds)
{
	int fds[8];
	for (size_t i = 0; i < nfds; i++)
		FUZZ_CHECK((fds[i] = dup(STDERR_FILENO)) >= 0);
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)data, .iov_len = size};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds) {
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	FUZZ_CHECK(sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)size);
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]); /* in flight: the receiver has its own copies */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	int sv[2];
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	int before = lowest_free_fd();
	size_t nfds = data[0] & 7;
	int receiver = (data[0] >> 3) % 4;
	send_packet(sv[1], data + 1, size - 1, nfds);

	int fds[SYNC_MAX_FDS + 4];
	size_t got = 0;
	if (receiver == 0 || receiver == 1) {
		/* the init's channel: up to the fds a SYNC_EXEC carries, or one */
		struct sync_msg m;
		size_t max = receiver == 0 ? SYNC_MAX_FDS : 1;
		int r = sync_recv_fds(sv[0], &m, fds, max, &got);
		FUZZ_CHECK(r == 1 || r == 0 || r == -EBADMSG);
		if (r == 1) {
			FUZZ_CHECK(m.type >= SYNC_GO && m.type <= SYNC_TYPE_MAX);
			FUZZ_CHECK(memchr(m.text, '\0', sizeof(m.text)));
			FUZZ_CHECK(got <= max && size - 1 == sizeof(m));
		} else {
			FUZZ_CHECK(got == 0);
		}
	} else if (receiver == 2) {
		struct sync_msg m;
		int passed = -1;
		int r = sync_recv(sv[0], &m, &passed);
		FUZZ_CHECK(r == 1 || r == 0 || r == -EBADMSG);
		if (passed >= 0)
			fds[got++] = passed;
		FUZZ_CHECK(r == 1 || passed < 0);
	} else {
		/* a command shim's control socket, as command.c reads it */
		struct shim_msg m;
		ssize_t n = packet_recv(sv[0], &m, sizeof(m), fds, 2, &got);
		FUZZ_CHECK(n == (ssize_t)sizeof(m) || n == 0 || n == -EBADMSG);
		FUZZ_CHECK(n == (ssize_t)sizeof(m) || got == 0);
		FUZZ_CHECK(got <= 2 && (n <= 0 || size - 1 == sizeof(m)));
	}
	for (size_t i = 0; i < got; i++) {
		FUZZ_CHECK(fcntl(fds[i], F_GETFD) == FD_CLOEXEC);
		close(fds[i]);
	}
	/* every fd that came along was handed back or closed */
	FUZZ_CHECK(lowest_free_fd() == before);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
