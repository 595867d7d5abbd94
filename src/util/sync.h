/* The framed channel between the launcher and the sandbox's init: a
 * SOCK_SEQPACKET socketpair, one fixed-size message per packet. Everything
 * read from the sandbox side is validated before it is used. */
#ifndef AB_SYNC_H
#define AB_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"

enum sync_type {
	SYNC_GO = 1, /* launcher -> init: the id maps are written */
	SYNC_ERROR,  /* init -> launcher: setup failed (code, text) */
	SYNC_READY,  /* init -> launcher: confined, ready for commands; shim -> launcher: idle */
	SYNC_LISTENER = 5, /* init -> launcher: its seccomp listener fd rides along */
	SYNC_EXEC = 7,	   /* launcher -> shim: run a command; SYNC_EXEC_FDS fds ride along */
	SYNC_NEW_SHIM,	   /* launcher -> init: start a command shim */
	SYNC_SHIM,	   /* init -> launcher: a new shim's socket, and its pidfd, ride along */
	SYNC_NO_SHIM,	   /* init -> launcher: no shim could be started (status = errno) */
	SYNC_NET_LISTENER, /* init -> launcher: --net allow='s listening socket rides along */
	SYNC_CGROUP,	   /* launcher -> init: the v1 cgroups' tasks files ride along (cgroup.h),
			      then, with text "N leave" (SYNC_CGROUP_LEAVE), as many to
			      leave them by ("N stay": none); N the RLIMIT_NPROC for --pids;
			      the RLIMIT_AS fallback in code (high 32 bits) and status (low) */
	SYNC_NETNS,	   /* launcher -> init: the network namespace it made rides along */
	SYNC_VIEWNS,	   /* init -> launcher, overlay workspace, twice: its first user
			      namespace (status 0), then the commands' mount namespace (1)
			      rides along (ckpt/); a plain user's clones of the layer
			      directory (2) and the workspace (3); the backing tmpfs of
			      /tmp, home (4 + index: view/owntmp.h) */
	SYNC_TYPE_MAX = SYNC_VIEWNS,
	/* a file operation on a shim's own socket, no fds (struct fileop_pkt):
	 * launcher -> shim the request; shim -> launcher its reply, in
	 * FILEOP_OUT packets and a last FILEOP_DONE with the status, which
	 * also says the shim is idle again */
	SYNC_FILEOP = 0x100,
	SYNC_FILEOP_OUT,
	SYNC_FILEOP_DONE,
};

/* A SYNC_FILEOP* packet: this header, then len bytes (at most
 * FILEOP_PKT_MAX). */
struct fileop_pkt {
	uint32_t type;
	int32_t status; /* FILEOP_DONE: 0, or 1 when the operation failed */
	uint32_t len;
	uint32_t zero;
};
#define FILEOP_PKT_MAX (64u << 10)

/* The fds of SYNC_EXEC, in order. */
enum { EXEC_FD_SPEC, EXEC_FD_CTL, EXEC_FD_STDIN, EXEC_FD_STDOUT, EXEC_FD_STDERR, SYNC_EXEC_FDS };
#define SYNC_MAX_FDS 8 /* SYNC_CGROUP: four tasks files to enter, four to leave by */

struct sync_msg {
	uint32_t type;
	int32_t code;
	int32_t status;
	char text[sizeof(((struct ab_error *)0)->msg)];
};

int sync_pair(int fds[2], struct ab_error *err);

/* One packet of exactly len bytes on a SOCK_SEQPACKET socket, with up to
 * SYNC_MAX_FDS fds. packet_recv returns len, 0 at EOF, -EAGAIN (on a
 * non-blocking socket), -EBADMSG for a packet of another size or with
 * more than max fds (which are closed), or -errno. A peer that closed
 * with packets of ours unread is no loss of its own: what it sent before
 * is still returned, then 0. */
int packet_send(int fd, const void *buf, size_t len, const int *fds, size_t nfds);
ssize_t packet_recv(int fd, void *buf, size_t len, int *fds, size_t max, size_t *n);
/* The same for a packet of any size up to cap (its size returned); one
 * bigger is -EBADMSG. */
ssize_t packet_recv_upto(int fd, void *buf, size_t cap, int *fds, size_t max, size_t *n);
/* A SYNC_FILEOP* packet: hdr then len bytes of data, in one packet.
 * Returns 0, or -errno. */
int fileop_pkt_send(int fd, uint32_t type, int32_t status, const void *data, size_t len);
/* Returns 0, or -errno (-EPIPE when the peer is gone). */
int sync_send(int fd, enum sync_type type, int32_t code, int32_t status, const char *text);
/* The same with an fd passed along (SCM_RIGHTS). */
int sync_send_fd(int fd, enum sync_type type, int passed_fd);
/* The same with n fds (at most SYNC_MAX_FDS). */
int sync_send_fds(int fd, enum sync_type type, const int *fds, size_t n);
/* The same with code and status too. */
int sync_send_fds_status(int fd, enum sync_type type, int32_t code, int32_t status, const int *fds,
			 size_t n, const char *text);
/* SYNC_CGROUP's text when the second half of its fds are tasks files to
 * leave the cgroups by (ab_cgroup_leave_fds) */
#define SYNC_CGROUP_LEAVE "leave"

/* Returns 1 with a valid message, 0 on EOF, -EBADMSG for a malformed one,
 * or -errno. A passed fd (close-on-exec) lands in *passed, else -1; passed
 * may be NULL, and fds nobody asked for are closed, never kept. */
int sync_recv(int fd, struct sync_msg *m, int *passed);
/* The same taking up to max fds into fds[], their number in *n. A message
 * with fds its type does not carry is malformed (SYNC_LISTENER carries 1,
 * SYNC_EXEC SYNC_EXEC_FDS, SYNC_CGROUP up to 8, the others none). */
int sync_recv_fds(int fd, struct sync_msg *m, int *fds, size_t max, size_t *n);
/* Whether a sync_msg packet that came with n fds is well formed. */
bool sync_valid(const struct sync_msg *m, size_t n);

#endif
