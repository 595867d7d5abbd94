/* agentbox mcp: a Model Context Protocol server on stdin and stdout
 * (JSON-RPC 2.0, one message a line), backed by one session for its
 * lifetime (docs/mcp.md). */
#ifndef AB_MCP_H
#define AB_MCP_H

#include "agentbox/agentbox.h"

/* Serve until end of file on stdin or a signal. Returns the exit status:
 * 0 after a clean end, AB_EXIT_FAILURE when the sandbox could not be built
 * or died. */
int ab_mcp(struct ab_config *cfg);

#endif
