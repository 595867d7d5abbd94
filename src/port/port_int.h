/* What the launcher's half (port.c) and the relay (port_relay.c) share:
 * the fds the relay starts with and the fixed-size messages between them
 * on their SOCK_SEQPACKET socket. */
#ifndef AB_PORT_INT_H
#define AB_PORT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "port/port.h"

#define PORT_HELPER_CTL	  3
#define PORT_HELPER_NETNS 4

enum {
	PORT_ADD = 1, /* launcher -> relay: serve this listener (fd attached) */
	PORT_DEL,     /* launcher -> relay: close the listener of key */
	PORT_READY,   /* relay -> launcher: confined, serving */
	PORT_OK,      /* relay -> launcher: done (key) */
	PORT_FAIL,    /* relay -> launcher: not done (err, msg) */
};

struct port_msg {
	uint32_t type, key;
	int32_t err;
	uint16_t port;
	bool public;
	char msg[200];
	char token[PORT_TOKEN_MAX + 1]; /* PORT_ADD: the token each connection sends
					   first ("": none, the peer's uid instead) */
};

/* One message (and an fd, or -1) from sock into *m (util/sync.h's
 * packet_recv): its size, 0 at the end, -errno (-EBADMSG: not one). */
ssize_t port_recv(int sock, struct port_msg *m, int *fd);

#endif
