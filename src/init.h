/* The sandbox's pid 1: builds the view, starts the command, reaps. */
#ifndef AB_INIT_H
#define AB_INIT_H

#include <signal.h>
#include <stdbool.h>

#include "agentbox/agentbox.h"
#include "mount.h"
#include "seccomp_profile.h"

/* Signals the launcher passes on to the command. */
static const int ab_forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

struct init_args {
	const struct ab_config *cfg;
	struct view_plan *plan;
	char **envp; /* the command's environment, already filtered */
	int sync_fd;
	bool by_root;				  /* the launcher is root: groups can be dropped */
	int landlock_fd;			  /* ruleset every command enforces, or -1 */
	const struct ab_seccomp_profile *seccomp; /* NULL: no filter */
	int out_fd, err_fd;		/* write ends of the capture pipes, or -1: pass through */
	const struct ab_cgroup *cgroup; /* for the rlimit fallbacks */
	bool session;			/* agentbox serve: run commands as the launcher asks */
};

/* Runs in the child cloned into the new namespaces; never returns. */
_Noreturn void init_main(struct init_args *a);

#endif
