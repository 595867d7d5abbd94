/* The caller's git identity in the sandbox's $HOME/.gitconfig: user.name
 * and user.email only, nothing else of the caller's git configuration. */
#ifndef AB_GITID_H
#define AB_GITID_H

#include "util/error.h"

/* Host side: the caller's user.name and user.email (from
 * $XDG_CONFIG_HOME/git/config, then ~/.gitconfig, the last one winning;
 * no includes) as the text of a .gitconfig, or NULL when neither is set. */
char *gitid_read(void);

/* Sandbox side, as the sandbox user before any command: text into
 * HOME/.gitconfig, unless one is there. Nothing to do for NULL. */
int gitid_write(const char *home, const char *text, struct ab_error *err);

#endif
