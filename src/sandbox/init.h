/* The sandbox's pid 1: builds the view, confines itself, starts the
 * command shims (or is the one shim of `agentbox run`), reaps. */
#ifndef AB_INIT_H
#define AB_INIT_H

#include <signal.h>
#include <stdbool.h>

#include "agentbox/agentbox.h"
#include "view/mount.h"
#include "seccomp/seccomp_profile.h"

/* Signals `agentbox run` passes on to its command; the init blocks them. */
extern const int ab_forwarded_signals[6];
/* Block them and extra (0: none) in the calling thread (the mask before
 * into *old, unless NULL) and return a non-blocking, close-on-exec
 * signalfd for them all; -1 with errno. */
int ab_forwarded_signals_fd(int extra, sigset_t *old);

struct init_args {
	const struct ab_config *cfg;
	struct view_plan *plan;
	char **envp; /* the command's environment, already filtered */
	int sync_fd;
	bool by_root;				  /* the launcher is root: groups can be dropped */
	int landlock_fd;			  /* ruleset every command enforces, or -1 */
	const struct ab_seccomp_profile *seccomp; /* NULL: no filter */
	struct ab_cgroup *cgroup; /* for the rlimit fallbacks (the init's copy: join_cgroup) */
	bool one_command;	  /* agentbox run: the init is the one command's shim */
	int shim_sock;		  /* one_command: the shim's socket to the launcher */
	bool landlock_enforced;	  /* the init, and every shim, is in Landlock's domain */
	bool net_beside;	  /* its network namespace comes from the launcher (SYNC_NETNS) */
	const char *gitconfig;	  /* gitid.h: written to $HOME/.gitconfig, or NULL */
	struct net_secrets *secrets; /* --net secret=: the CA bundle written, values forgotten */
};

/* Runs in the child cloned into the new namespaces; never returns. */
_Noreturn void init_main(struct init_args *a);

#endif
