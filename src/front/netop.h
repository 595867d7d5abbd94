/* The session protocol's {"op":"net"} (docs/protocol.md): change the
 * allow/deny patterns of a session's proxy for later connections, and say
 * what is in force and what the proxy did so far. */
#ifndef AB_NETOP_H
#define AB_NETOP_H

#include <json-c/json.h>

#include "agentbox/agentbox.h"

/* The reply (type "net", without id), or NULL with err: a request that is
 * not {"allow": [PATTERN...], "deny": [PATTERN...]} (each optional), a bad
 * pattern, or a session without the proxy. Nothing changes then. */
json_object *ab_net_op(struct ab_session *s, json_object *req, struct ab_error *err);

#endif
