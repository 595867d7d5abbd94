/* The layer ops (changes, commit) of serve, mcp and runtime under a watchdog
 * (front_layer.c): each runs in a child of the launcher, so that the
 * protocol loop goes on enforcing timeouts meanwhile and a stuck one is
 * killed at its bound and answered with an error. */
#ifndef AB_FRONT_LAYER_H
#define AB_FRONT_LAYER_H

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/types.h>

#include "ckpt/ckpt.h"
#include "layer/layer.h"

/* The bound of a changes or commit without its own "timeout". */
#define FRONT_LAYER_TIMEOUT_MS (300u * 1000u)

/* The fd a layer op's child writes its reply on. */
#define FRONT_LAYER_REPLY_FD 3

struct front_layer {
	pid_t pid; /* 0: none running */
	int fd;	   /* the reply's pipe, -1: none */
	json_object *id;
	char op[16];
	unsigned long long timeout_ms, deadline_ms;
	char *buf;
	size_t len, cap;
	/* a detached sandbox's launcher: what makes forks (ckpt.h); NULL:
	 * this session cannot be forked. Kept across ops. */
	ckpt_fork_fn fork;
	void *fork_arg;
};

void front_layer_init(struct front_layer *j);
/* Start op (changes, commit, fork) on l; *reply is set instead when the op is
 * answered at once (discard, the checkpoints' ops, or a request refused):
 * 1 when started, 0 when *reply is set. busy: commands run, which a
 * checkpoint or a restore refuses (src/ckpt/). */
int front_layer_start(struct front_layer *j, struct ab_layer *l, const char *op, json_object *req,
		      json_object *id, bool busy, json_object **reply, bool *end);
/* The fd to poll for reading (-1 when nothing runs) and the ms until the
 * bound (-1: none). */
int front_layer_fd(const struct front_layer *j);
int front_layer_timeout(const struct front_layer *j);
/* Read what came; the reply when the op is done (or was stopped at its
 * bound), else NULL. */
json_object *front_layer_poll(struct front_layer *j);
/* Kill a running op and forget it. */
void front_layer_stop(struct front_layer *j);

#endif
