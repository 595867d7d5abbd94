/* agentbox runtime's HTTP API (http_server.c): agent-sandbox's legacy
 * runtime API, sandboxd's REST API and agentbox's own routes, one of the
 * runtime's protocols (ab_runtime, runtime/rt_server.h). */
#ifndef AB_HTTP_SERVER_H
#define AB_HTTP_SERVER_H

#include "runtime/rt_server.h"

extern const struct rt_proto rt_http_proto;

#endif
