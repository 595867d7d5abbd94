#ifndef AB_DEFAULTS_H
#define AB_DEFAULTS_H

#include "agentbox/agentbox.h"

/* The defaults files, in the profile format, applied to cfg in order:
 * /etc/agentbox/config.json, then the user's
 * ($XDG_CONFIG_HOME/agentbox/config.json, default ~/.config/agentbox/);
 * or only $AGENTBOX_CONFIG (a file; "none": no file). A missing file is
 * skipped (but AGENTBOX_CONFIG's); one another user may change is refused.
 * Those applied are named in cfg->defaults_files. */
int ab_defaults_load(struct ab_config *cfg, struct ab_error *err);

#endif
