/* The "network" object of a result (docs/result.md) and the one line
 * `agentbox run` prints about denials. */
#ifndef AB_NETREPORT_H
#define AB_NETREPORT_H

#include <json-c/json.h>
#include <stdio.h>

#include "agentbox/agentbox.h"

json_object *ab_net_report_json(const struct ab_net_report *r);
/* "agentbox: network denied: host:port (reason) xN, ..." to f when any. */
void ab_net_report_print_denials(const struct ab_net_report *r, FILE *f);

#endif
