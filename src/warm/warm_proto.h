/* What the shim (src/warm/warm.c) and the preloaded object (warm_preload.c)
 * say to each other on the warm child's control socket. Both sides include
 * it; the object links nothing of agentbox. */
#ifndef AB_WARM_PROTO_H
#define AB_WARM_PROTO_H

#include <stdint.h>
#include <sys/socket.h>

/* The warm child's fixed fds at exec: its control socket (SOCK_SEQPACKET)
 * and the memfd ld.so loads the object from (LD_PRELOAD=/proc/self/fd/4). */
enum { WARM_FD_CTL = 3, WARM_FD_OBJECT = 4 };

/* The -c argument at exec: a script that does nothing (run only when the
 * object was not loaded), padded to WARM_ARG_SIZE bytes, so that the
 * command can be written over it in place for /proc/PID/cmdline. */
#define WARM_PLACEHOLDER "exit 0 #agentbox-warm"
#define WARM_ARG_SIZE	 4096

#define WARM_READY	 'R'
#define WARM_REQ_MAGIC	 0x61627731u /* "abw1" */
#define WARM_CHUNK	 (32u << 10) /* payload bytes per packet after the header */
#define WARM_PAYLOAD_MAX (64u << 20)

/* The request, with SCM_RIGHTS of stdin, stdout, stderr; the payload
 * follows in packets of up to WARM_CHUNK bytes: the command, the working
 * directory, then envc environment strings, each NUL-terminated. The
 * object answers nothing: from the request on, the process is the
 * command, and one that cannot be set up says why on its stderr and
 * exits 126 (127: no such directory), as a failed spawn does. */
struct warm_req {
	uint32_t magic;
	uint32_t envc;
	uint64_t len;
};

/* send() and recv() are sendto and recvfrom, which the strict seccomp
 * profile denies; sendmsg and recvmsg are agentbox's own plumbing, which
 * every profile allows (seccomp_profile.c) */
static inline ssize_t warm_send(int fd, const void *buf, size_t len, int flags)
{
	struct iovec iov = {(void *)buf, len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	return sendmsg(fd, &mh, flags);
}

static inline ssize_t warm_recv(int fd, void *buf, size_t len, int flags)
{
	struct iovec iov = {buf, len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	return recvmsg(fd, &mh, flags);
}

#endif
