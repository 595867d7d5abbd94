/* The front engine split in two processes (front_link.h): the parent
 * keeps the session (the sandbox's pidfds, cgroup, seccomp listener, and
 * root when root started it) and parses nothing from the network; the
 * confined front (confine/confine.h) runs the codecs over a link. */
#ifndef AB_FRONT_SPLIT_H
#define AB_FRONT_SPLIT_H

#include <stddef.h>

#include "agentbox/agentbox.h"
#include "front/front.h"

struct ab_front_split {
	const char *what;	   /* the child, as messages name it ("network front") */
	const int *before;	   /* the fds open before the codecs opened theirs */
	size_t n_before;	   /* (confine_open_fds): the front closes these */
	unsigned long long max_as; /* the front's RLIMIT_AS (0: 4 GiB) */
	const char *remove_at_end; /* a file the session's process removes as it ends
				    * (read then; NULL or "": none) */
};

/* Fork f's process in two (f initialised, not opened). The child keeps
 * the session, opened from f->cfg, serves it to this process over the
 * link until the link closes, and exits. This process is confined and f
 * opened over the link: 0, and the codecs run f as before; at
 * ab_front_close the link closes and the child is waited for. 1 with
 * *status AB_EXIT_FAILURE when the sandbox could not be built (the child
 * said why on stderr); -1 with err when nothing could start. */
int ab_front_split(struct ab_front *f, const struct ab_front_split *sp, int *status,
		   struct ab_error *err);

#endif
