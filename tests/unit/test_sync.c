/* The packets between the launcher and the sandbox (sync.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/sync.h"

/* A shim sends its last word and ends while a SHIM_KILL of the launcher
 * is still unread in its queue: the kernel reports ECONNRESET on the
 * launcher's end once, ahead of the packet. The packet must still come,
 * then the end of file; taken as the end, `agentbox run` lost the result
 * of a timed-out command ("the command's supervisor in the sandbox was
 * killed"). */
Test(packet, last_word_of_a_peer_that_closed_with_ours_unread)
{
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
	cr_assert_eq(fcntl(sp[0], F_SETFL, O_NONBLOCK), 0);
	char kill = 'K';
	cr_assert_eq(send(sp[0], &kill, 1, 0), 1); /* never read by the peer */
	char last[16] = "exited";
	cr_assert_eq(packet_send(sp[1], last, sizeof(last), NULL, 0), 0);
	close(sp[1]);

	char got[16] = {0};
	int fds[2];
	size_t n = 99;
	cr_assert_eq(packet_recv(sp[0], got, sizeof(got), fds, 2, &n), (ssize_t)sizeof(got));
	cr_assert_str_eq(got, "exited");
	cr_assert_eq(n, 0);
	cr_assert_eq(packet_recv(sp[0], got, sizeof(got), fds, 2, &n), 0);
	close(sp[0]);
}

/* Nothing sent before the close: the reset is the end, not an error. */
Test(packet, reset_with_nothing_left_is_the_end)
{
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
	cr_assert_eq(fcntl(sp[0], F_SETFL, O_NONBLOCK), 0);
	char kill = 'K';
	cr_assert_eq(send(sp[0], &kill, 1, 0), 1);
	close(sp[1]);
	char got[16];
	int fds[2];
	size_t n;
	cr_assert_eq(packet_recv(sp[0], got, sizeof(got), fds, 2, &n), 0);
	close(sp[0]);
}

/* A live peer with nothing sent: still -EAGAIN, the reset changes nothing. */
Test(packet, open_and_empty_is_eagain)
{
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
	cr_assert_eq(fcntl(sp[0], F_SETFL, O_NONBLOCK), 0);
	char got[16];
	int fds[2];
	size_t n;
	cr_assert_eq(packet_recv(sp[0], got, sizeof(got), fds, 2, &n), -EAGAIN);
	close(sp[0]);
	close(sp[1]);
}
