/* The uid of a TCP connection's local peer (port_peer.h). */
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "port/port_peer.h"
#include "util/util.h"

/* a's address (IPv4, or IPv6 unless v4-mapped: the peer's own socket is
 * IPv4 then) and port into an inet_diag id's side */
static int side(const struct sockaddr_storage *a, __be32 addr[4], __be16 *port)
{
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *p = (const void *)a;
		memcpy(addr, &p->sin_addr, 4);
		*port = p->sin_port;
		return AF_INET;
	}
	const struct sockaddr_in6 *p = (const void *)a;
	bool v4 = IN6_IS_ADDR_V4MAPPED(&p->sin6_addr);
	memcpy(addr, v4 ? &p->sin6_addr.s6_addr[12] : p->sin6_addr.s6_addr, v4 ? 4 : 16);
	*port = p->sin6_port;
	return v4 ? AF_INET : AF_INET6;
}

long port_peer_uid(int diag, int fd)
{
	struct sockaddr_storage peer, here;
	socklen_t pl = sizeof(peer), hl = sizeof(here);
	if (getpeername(fd, (struct sockaddr *)&peer, &pl) < 0 ||
	    getsockname(fd, (struct sockaddr *)&here, &hl) < 0 ||
	    (peer.ss_family != AF_INET && peer.ss_family != AF_INET6))
		return -1;
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} q = {
		.nlh = {.nlmsg_len = sizeof(q),
			.nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST},
		.r = {.sdiag_protocol = IPPROTO_TCP,
		      .idiag_states = ~0u,
		      .id.idiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}},
	};
	q.r.sdiag_family = (__u8)side(&peer, q.r.id.idiag_src, &q.r.id.idiag_sport);
	side(&here, q.r.id.idiag_dst, &q.r.id.idiag_dport);
	cleanup_fd int own = -1;
	if (diag < 0) {
		struct timeval tv = {.tv_sec = 1};
		diag = own = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
		if (own < 0 || setsockopt(own, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
			return -1;
	}
	if (send(diag, &q, sizeof(q), 0) != (ssize_t)sizeof(q))
		return -1;
	union {
		struct nlmsghdr h;
		char b[8192];
	} ans;
	ssize_t n = recv(diag, &ans, sizeof(ans), 0);
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct inet_diag_msg)) ||
	    ans.h.nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    ans.h.nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
		return -1;
	const struct inet_diag_msg *m = NLMSG_DATA(&ans.h);
	/* the socket asked about, not another */
	if (m->id.idiag_sport != q.r.id.idiag_sport || m->id.idiag_dport != q.r.id.idiag_dport ||
	    memcmp(m->id.idiag_src, q.r.id.idiag_src, sizeof(m->id.idiag_src)) != 0)
		return -1;
	return (long)m->idiag_uid;
}
