/* agentbox serve: the JSON-lines session protocol (docs/protocol.md). */
#ifndef AB_SERVE_H
#define AB_SERVE_H

#include "agentbox/agentbox.h"

/* Build the sandbox from cfg, speak the protocol on stdin and stdout until
 * shutdown or end of file; returns the exit status (0, or 125 when the
 * sandbox could not be built or died). */
int ab_serve(struct ab_config *cfg);

#endif
