/* Capabilities: a command runs with none, in every set, and with
 * no_new_privs, so neither exec of a setuid or file-capability binary nor
 * uid 0 inside the sandbox gives any back. */
#ifndef AB_CAPS_H
#define AB_CAPS_H

#include "agentbox/agentbox.h"

/* Sandbox, in the command's process just before exec. */
int caps_drop_all(struct ab_error *err);

#endif
