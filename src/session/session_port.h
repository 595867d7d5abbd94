/* The protocol's {"op":"port"} on a session (docs/protocol.md): a TCP
 * port of the sandbox published on the host (port/port.h). */
#ifndef AB_SESSION_PORT_H
#define AB_SESSION_PORT_H

#include <json-c/json.h>

#include "agentbox/agentbox.h"

/* The reply (type "port", without id), or NULL with err: a bad request, a
 * sandbox without a network namespace of its own (--net host), a port
 * that cannot be listened on, a relay that failed or died. */
json_object *ab_session_port(struct ab_session *s, json_object *req, struct ab_error *err);

#endif
