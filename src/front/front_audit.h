/* The audit log of agentbox serve (front_audit.c). Each function takes
 * the log's fd, does nothing when it is -1, and closes it and sets it to
 * -1 (saying so on stderr) when a write fails. */
#ifndef AB_FRONT_AUDIT_H
#define AB_FRONT_AUDIT_H

#include <json-c/json.h>

#include "agentbox/agentbox.h"

/* A new entry for event ("start", "request", ...) with its time. */
json_object *front_audit_entry(const char *event);
/* Write entry o (taken) as one line. */
void front_audit_write(int *fd, json_object *o);
/* An error reply with code sent for the request id. */
void front_audit_error(int *fd, json_object *id, const char *code);
/* The request req with op: what was asked, not the data. */
void front_audit_request(int *fd, json_object *req, const char *op);
/* The end of request id: its result res, or code, the error it got. */
void front_audit_result(int *fd, json_object *id, const struct ab_result *res, const char *code);

#endif
