/* Created protected paths never stay live (docs/workspace.md, "Protected
 * paths a command creates"): in a direct workspace, after each command and
 * before its result, every protected path that did not exist when the
 * sandbox started and would make the host run something (a .git/config
 * with a key git runs or loads, a .git/hooks with more than samples, a
 * .bashrc, ...) is renamed aside in its own directory, under a name no
 * tool reads, and reported with how to take it back. */
#ifndef AB_PROTECT_QUARANTINE_H
#define AB_PROTECT_QUARANTINE_H

#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"
#include "layer/protect.h"

/* The suffix of a quarantined name: FILE.agentbox-quarantine-STAMP. */
#define PROTECT_QUARANTINE_SUFFIX ".agentbox-quarantine-"

/* Whether a git config file's text (.git/config, .git/config.worktree, or
 * with modules a .gitmodules) holds only keys git writes for a plain
 * repository, read strictly: true, or false with why ("sets
 * core.fsmonitor"). Anything it cannot read as git would is not safe. */
bool protect_gitconfig_safe(const char *text, size_t len, bool modules, char *why, size_t whylen);

/* Host side, after a command whose processes are gone: put out of effect
 * the protected paths of start (the state at the sandbox's start) that did
 * not exist then and do now in a form the host would run. Appends one
 * entry per path to *out (n entries), and those it judged safe to *kept
 * (NULL-terminated, or NULL); returns 0 or -ENOMEM. */
int protect_quarantine(const struct ab_config *cfg, const struct protect_state *start,
		       struct ab_quarantined **out, size_t *n, char ***kept);
void protect_quarantined_free(struct ab_quarantined *q, size_t n);

#endif
