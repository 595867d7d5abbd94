/* The warm child of an idle shim (shim.c): `/bin/sh -c -- PLACEHOLDER`
 * exec'd ahead of the request with agentbox-warm.so preloaded from a
 * sealed memfd; the object's constructor waits for the request, then makes
 * the process the command (src/warm/warm_preload.c). The shell's exec,
 * ld.so and libc start-up overlap the caller's think time instead of
 * being on the request's path. */
#ifndef AB_WARM_H
#define AB_WARM_H

#include <stdbool.h>
#include <sys/types.h>

struct warm {
	int object;    /* the sealed memfd with agentbox-warm.so; -1: none */
	int devnull;   /* the warm child's stdio until the request */
	bool disabled; /* no warm child for this shim any more */
	pid_t pid;     /* the warm child, or 0 */
	int ctl;       /* our end of its control socket */
	bool ready;    /* it said WARM_READY */
	int layer;     /* the command layer it enforces (landlock_command_layer) */
};

/* The launcher's knobs (AGENTBOX_NO_WARM=1, and a test's), read before
 * the sandbox is cloned: the init and its shims have no environment. */
void warm_read_knobs(void);

/* The shim's warm state, at its start: disabled where AGENTBOX_NO_WARM=1,
 * or where the memfd cannot be made. layer: the Landlock ruleset the warm
 * child enforces before its exec (landlock_command_layer), so that no
 * command can reach it; only where Landlock is enforced. */
void warm_init(struct warm *w, int layer);

/* A warm child when there is none (and warm children work here): an
 * idle shim's call. as_limit: RLIMIT_AS for the command, or 0. */
void warm_spawn(struct warm *w, unsigned long long as_limit);

/* Whether a request can go to the warm child: argv is `/bin/sh -c --
 * CMD` and no variable of envp is read before the shell's main(). */
bool warm_fits(char *const *argv, char *const *envp);

/* The request to the warm child, which then is the command: its pid, or
 * 0 when there is no usable warm child (it is reaped: spawn as before). */
pid_t warm_take(struct warm *w, int in, int out, int err, const char *cmd, const char *cwd,
		char *const *envp);

/* End the warm child, if any, and reap it: before a command that does not
 * use it, whose processes the shim counts as its children. */
void warm_end(struct warm *w);

#endif
