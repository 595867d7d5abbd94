/* The tools of agentbox mcp, named and shaped as deepagents names its
 * tools (execute, read_file, write_file, edit_file, ls, glob, grep; in an
 * overlay session also changes, commit, discard): their schemas and
 * descriptions, a call's arguments into a request of the session protocol
 * (docs/protocol.md), which request.c then checks as it checks every
 * request, and the session's reply into the tool's result. The arguments
 * come from the MCP client, so nothing in them is trusted. */
#ifndef AB_MCP_TOOLS_H
#define AB_MCP_TOOLS_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"

enum mcp_tool_kind {
	MCP_TOOL_EXEC,	/* runs as a command of the session */
	MCP_TOOL_FILE,	/* a file operation, run like a command */
	MCP_TOOL_LAYER, /* changes, commit, discard: front_layer.c's child */
};

struct mcp_tool;

/* What a server offers beyond the plain tools. */
#define MCP_OFFER_LAYER	 1u /* an overlay session: changes */
#define MCP_OFFER_COMMIT 2u /* --model-commits: commit and discard for the model too */

/* The tools/list result's "tools": those whose needs offer holds. */
json_object *mcp_tools_list(unsigned offer);
/* The tool named name, or NULL (none, or one offer does not hold). */
const struct mcp_tool *mcp_tool_find(const char *name, unsigned offer);
const char *mcp_tool_name(const struct mcp_tool *t);
enum mcp_tool_kind mcp_tool_kind(const struct mcp_tool *t);

/* The protocol request for a call of t with args (an object, or NULL for
 * none): {"op":...,"id":id,...}. NULL with why filled when an argument is
 * unknown, missing or of the wrong type. */
json_object *mcp_tool_request(const struct mcp_tool *t, json_object *args, long long id, char *why,
			      size_t why_len);

/* A CallToolResult with one text, isError set. */
json_object *mcp_tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The CallToolResult of an execute that ran. */
json_object *mcp_tool_exec_result(const struct ab_result *res);
/* The CallToolResult for the session's reply to a file operation or a
 * layer op (a protocol "result" or "error" message); args as called. */
json_object *mcp_tool_reply_result(const struct mcp_tool *t, json_object *args, json_object *reply);

#endif
