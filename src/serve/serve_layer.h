/* The layer ops (changes, commit) of serve, mcp and runtime under a watchdog
 * (serve_layer.c): each runs in a child of the launcher, so that the
 * protocol loop goes on enforcing timeouts meanwhile and a stuck one is
 * killed at its bound and answered with an error. */
#ifndef AB_SERVE_LAYER_H
#define AB_SERVE_LAYER_H

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/types.h>

#include "layer/layer.h"

/* The bound of a changes or commit without its own "timeout". */
#define SERVE_LAYER_TIMEOUT_MS (300u * 1000u)

struct serve_layer {
	pid_t pid; /* 0: none running */
	int fd;	   /* the reply's pipe, -1: none */
	json_object *id;
	char op[16];
	unsigned long long timeout_ms, deadline_ms;
	char *buf;
	size_t len, cap;
};

void serve_layer_init(struct serve_layer *j);
/* Start op (changes, commit) on l; *reply is set instead when the op is
 * answered at once (discard, or a request refused): 1 when started, 0
 * when *reply is set. */
int serve_layer_start(struct serve_layer *j, struct ab_layer *l, const char *op, json_object *req,
		      json_object *id, json_object **reply, bool *end);
/* The fd to poll for reading (-1 when nothing runs) and the ms until the
 * bound (-1: none). */
int serve_layer_fd(const struct serve_layer *j);
int serve_layer_timeout(const struct serve_layer *j);
/* Read what came; the reply when the op is done (or was stopped at its
 * bound), else NULL. */
json_object *serve_layer_poll(struct serve_layer *j);
/* Kill a running op and forget it. */
void serve_layer_stop(struct serve_layer *j);

#endif
