/* Published ports (docs/network.md, "Published ports"): a TCP port of a
 * sandbox reached from the host. The launcher makes each listener on the
 * host (loopback) and passes it to the port relay, a confined helper in
 * the sandbox's network namespace (port_relay.c) that relays each
 * connection its owner makes (or anyone's, when public) to 127.0.0.1:PORT
 * inside. Nothing is opened outward: the relay only connects inside. */
#ifndef AB_PORT_H
#define AB_PORT_H

#include <json-c/json.h>
#include <sys/types.h>

#include "util/error.h"

#define PORT_MAX       16 /* ports published at once */
#define PORT_MAX_CONNS 64 /* connections relayed at once (then the listeners wait) */
#define PORT_BACKLOG   64 /* each listener's */
/* A port's token (beyond loopback): 16 to PORT_TOKEN_MAX printable ASCII
 * bytes, sent by the client as the first line of each connection
 * (docs/network.md, "Beyond loopback"); PORT_TOKEN_WAIT_MS to send it. */
#define PORT_TOKEN_MIN	   16
#define PORT_TOKEN_MAX	   128
#define PORT_TOKEN_WAIT_MS 10000

struct port_set;

/* The published ports of the sandbox whose network namespace is netns
 * (kept: the set owns it), reachable by owner's uid; none yet, no relay. */
struct port_set *port_set_new(int netns, uid_t owner);
/* Every listener closed, the relay killed and reaped. */
void port_set_free(struct port_set *ps);

/* The protocol's {"op":"port"} (docs/protocol.md) on ps: publish
 * ("port", optional "host" "ADDR:PORT", "public", "token": a string or
 * true for a new one, which a non-loopback "host" needs), close ("port",
 * "close": true) or list (no "port"). The reply (type "port", without
 * id; "token" once when one was made), or NULL with err. */
json_object *port_op(struct port_set *ps, json_object *req, struct ab_error *err);

/* agentbox __port-relay (main.c): the relay itself. */
int port_relay_main(int argc, char **argv);

#endif
