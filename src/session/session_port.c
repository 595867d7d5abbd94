/* {"op":"port"} on a session (session_port.h): the published ports' set
 * made at the first request, with the sandbox's network namespace. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "port/port.h"
#include "session/session.h"
#include "session/session_port.h"
#include "util/util.h"

/* The namespace made beside the clone, or the init's (made in the clone
 * under a launcher's own seccomp filter): a copy the set owns. */
static int netns_of(struct ab_session *s, struct ab_error *err)
{
	if (s->sb.cfg.net == AB_NET_HOST)
		return ab_error_plain(err, EINVAL,
				      "port: the sandbox shares the host's network (--net host): "
				      "its ports are on the host already");
	if (s->sb.netns >= 0) {
		int fd = fcntl(s->sb.netns, F_DUPFD_CLOEXEC, 3);
		return fd >= 0 ? fd : ab_error_set(err, errno, "port: the network namespace");
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)s->init);
	int fd = s->init > 0 && !s->init_reaped ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0)
		return ab_error_set(err, errno ? errno : ESRCH,
				    "port: cannot open the sandbox's network namespace");
	/* --isolation best without namespaces: the host's own is no sandbox's */
	struct stat a, b;
	if (fstat(fd, &a) < 0 || stat("/proc/self/ns/net", &b) < 0 || a.st_ino == b.st_ino) {
		close(fd);
		return ab_error_plain(err, EINVAL,
				      "port: the sandbox has no network namespace of its own");
	}
	return fd;
}

json_object *ab_session_port(struct ab_session *s, json_object *req, struct ab_error *err)
{
	if (s->dead || s->init_reaped) {
		ab_error_plain(err, ESRCH, "port: the sandbox has ended");
		return NULL;
	}
	if (!s->ports) {
		int ns = netns_of(s, err);
		if (ns < 0)
			return NULL;
		s->ports = port_set_new(ns, getuid());
		if (!s->ports) {
			close(ns);
			ab_error_set(err, ENOMEM, "port");
			return NULL;
		}
	}
	return port_op(s->ports, req, err);
}
