/* Whose is the other end of a TCP connection from this host: the uid that
 * owns the peer's socket, by one exact NETLINK_SOCK_DIAG (inet_diag)
 * lookup of the connection's 4-tuple, as ss(8) finds it. Used by every
 * door that admits its owner only: a published port's relay (port.h) and
 * agentbox runtime's clients (runtime/rt_auth.c). */
#ifndef AB_PORT_PEER_H
#define AB_PORT_PEER_H

/* The uid owning the socket at the other end of connected fd (IPv4, IPv6
 * or v4-mapped), looked up on diag (a NETLINK_SOCK_DIAG socket of the
 * host's network namespace; -1: one is made for the call, in the
 * caller's). -1 when it cannot be told (a peer not on this host, or gone). */
long port_peer_uid(int diag, int fd);

#endif
