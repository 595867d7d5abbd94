/* The launcher's part of building one sandbox, shared by `agentbox run`
 * (ab_run) and sessions (ab_session_open): check and plan everything on
 * the host first, make the cgroup last, then clone the init. */
#ifndef AB_SANDBOX_H
#define AB_SANDBOX_H

#include <sys/types.h>

#include "agentbox/agentbox.h"
#include "cgroup/cgroup.h"
#include "sandbox/init.h"
#include "view/mount.h"
#include "layer/protect.h"
#include "layer/protect_watch.h"
#include "seccomp/seccomp_profile.h"

struct netproc;

struct sandbox {
	struct ab_config cfg; /* the effective configuration (timeout clamped); shallow */
	struct protect_state protect;
	struct protect_watch watch; /* writes the protected files refused */
	struct view_plan plan;
	struct ab_seccomp_profile *seccomp; /* NULL: no filter */
	struct ab_cgroup *cg;
	char **envp;		     /* the commands' environment under the policy */
	char *gitconfig;	     /* gitid.h: the caller's git identity, or NULL */
	struct net_secrets *secrets; /* --net secret= (net/netsecret.h), or NULL */
	struct netproc *netproc;     /* --net allow='s helper (net/netproc.h), or NULL */
	struct ab_result limits;     /* only the limit reports, cgroup and timeout_ms */
	/* the network namespace made beside the clone, kept for published
	 * ports (port/port.h); -1: none */
	int netns;
};

/* Check cfg, plan the view, load the seccomp profile, build the
 * environment, make the cgroup; notices go to cfg->notice. On failure
 * nothing is left on the host. */
int sandbox_prepare(struct ab_config *cfg, struct sandbox *sb, struct ab_error *err);
void sandbox_release(struct sandbox *sb);
void sandbox_limits_into(const struct sandbox *sb, struct ab_result *res);
/* The timeout in force for a requested t (0: none): clamped to
 * --max-timeout; the one rule for a run and every session command. */
unsigned long long sandbox_timeout(const struct ab_config *cfg, unsigned long long t);

/* Clone the init into the new namespaces with the arguments a (the fields
 * from sb are filled in here), put it in the cgroup, write its id maps and
 * send GO. Returns its pid and the launcher's end of the control channel
 * in *sync_fd, or a negative errno with nothing left running. */
pid_t sandbox_clone(struct sandbox *sb, struct init_args *a, int *sync_fd, struct ab_error *err);

#endif
