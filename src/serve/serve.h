/* agentbox serve: the JSON-lines session protocol (docs/protocol.md). */
#ifndef AB_SERVE_H
#define AB_SERVE_H

#include "agentbox/agentbox.h"
#include "ckpt/ckpt.h"

/* Build the sandbox from cfg, speak the protocol on stdin and stdout until
 * shutdown or end of file; returns the exit status (0, or 125 when the
 * sandbox could not be built or died). */
int ab_serve(struct ab_config *cfg);

/* A detached sandbox (agentbox create, docs/detached.md): the same
 * protocol to clients that connect to sock_fd, one at a time; the session
 * outlives them. A result that comes while no client is attached waits
 * for the next, right after its hello. ready is called once: rc 0 once
 * the sandbox is built (msg: its overlay workspace's layer directory, or
 * NULL), or -1 with the message why not. */
struct ab_serve_listen {
	const char *id; /* the sandbox's id in hellos and status replies */
	/* listening unix sockets (serve_int.h): protocol clients that get the
	 * kept replies, control requests, clients that do not (exec) */
	int sock_fd, ctl_fd, exec_fd;
	unsigned long long idle_timeout_ms, ttl_ms; /* 0: none */
	bool idle_pause;			    /* at the idle timeout: pause, not end */
	/* streamed output kept for the next client: bytes per command and
	 * stream, and in all (docs/detached.md) */
	size_t keep_output, keep_total;
	/* idle this long, its idle command supervisors and their warm shells
	 * go (ab_session_idle_trim); 0: never */
	unsigned long long idle_release_ms;
	/* called once it is released (idle: true; idle_ms how long it has
	 * been idle), and once it is not idle any more (false) */
	void (*idle)(void *arg, bool idle, unsigned long long idle_ms, const char *memory_file);
	void (*ready)(void *arg, int rc, const char *msg);
	void *arg;
	/* makes forks of this sandbox (the protocol's "fork", ckpt.h); NULL:
	 * refused. A fork's: the layers its workspace starts from, mounted
	 * before it is ready (ckpt_fork_begin); n_base 0 for none */
	ckpt_fork_fn fork;
	char *const *base;
	size_t n_base;
	/* and its maker's tmpfs of /tmp and home, copied from (ckpt.h) */
	const struct ckpt_fork_own *base_own;
	size_t n_base_own;
};
int ab_serve_listen(struct ab_config *cfg, const struct ab_serve_listen *l);

#endif
