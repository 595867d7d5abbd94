/* Graded isolation (docs/containers.md): what of the sandbox this host
 * (usually a container) lets agentbox build, and what --isolation best
 * drops when it cannot. Full isolation is the default; a weaker sandbox is
 * never silent: it is named in the result, the hello, on stderr and by
 * agentbox check. */
#ifndef AB_ISOLATION_H
#define AB_ISOLATION_H

#include <json-c/json.h>
#include <stdbool.h>

#include "agentbox/agentbox.h"

/* "full" or "best" into cfg->isolation; -EINVAL with a message otherwise. */
int ab_isolation_parse(const char *value, enum ab_isolation *out, struct ab_error *err);
const char *ab_isolation_mode_name(enum ab_isolation mode);

/* What this host refuses, probed once per process in a throwaway child
 * (new namespaces, a procfs, a host name), with one line per missing
 * layer saying why into why (may be NULL). Cached; net: whether the probe
 * makes a network namespace too. */
unsigned ab_isolation_probe(bool net, char *why, size_t why_len);

/* Launcher, before the plan: with --isolation best, probe and set
 * cfg->isolation_missing, telling cfg->notice once what is dropped; a
 * missing layer best cannot do without is an error. With full, nothing is
 * probed (full isolation costs nothing extra). */
int ab_isolation_decide(struct ab_config *cfg, struct ab_error *err);

/* After the sandbox could not be built with --isolation full: if the probe
 * finds layers of relevant (AB_MISSING_*) this host refuses, replace err
 * with a message that lists them and how to get them (exit 125 as before). */
void ab_isolation_explain(const struct ab_config *cfg, unsigned relevant, struct ab_error *err);

/* The result's and the hello's "isolation": "full", or
 * {"level":"partial","missing":["own-proc","uts"]}. */
json_object *ab_isolation_json(unsigned missing);

/* Without namespaces (isolation_bare.c): the init's setup instead of the
 * namespace steps (private tmp, cwd and env at host paths, the Landlock
 * ruleset into a->landlock_fd); killing the command's whole tree, by
 * signal (instead of kill(-1)) and at the init's exit (which no pid
 * namespace does then). */
struct init_args;
int ab_bare_confine(struct init_args *a, int *landlock_abi, struct ab_error *err);
void ab_bare_kill_tree(int sig);
/* A command's environment and cwd as the launcher sent them, made right
 * without a mount view: /workspace at the workspace's host path, HOME and
 * TMPDIR the private tmp, PWD the cwd. Points into static storage. */
void ab_bare_spec(const struct ab_config *cfg, char ***envp, char **cwd);
void ab_bare_finish(void);

/* The names of the missing layers, comma-separated, into out. */
void ab_isolation_names(unsigned missing, char *out, size_t len);

#endif
