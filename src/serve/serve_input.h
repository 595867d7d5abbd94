/* A running command's input in agentbox serve: the stdin, resize and
 * signal ops (docs/protocol.md, "Terminals and streamed stdin"), over the
 * session API; serve.c finds the target and sends the answers. */
#ifndef AB_SERVE_INPUT_H
#define AB_SERVE_INPUT_H

#include <json-c/json.h>

#include "agentbox/agentbox.h"
#include "front/request.h"

enum serve_target { TARGET_NONE, TARGET_QUEUED, TARGET_RUNNING };

/* Do q (AB_REQUEST_STDIN, _RESIZE, _SIGNAL) for the command tagged tag.
 * Returns 1 when it is done (answer "ok" now), 0 for a stdin whose data
 * waits for the command to read it (answer at its AB_EVENT_STDIN), or a
 * negative errno with e saying why (e->kind the protocol's code). */
int serve_input(struct ab_session *s, const struct ab_request *q, enum serve_target target,
		unsigned long long tag, struct ab_error *e);

/* stdin, resize or signal */
bool serve_input_kind(enum ab_request_op kind);

/* {"type":"ok","id":id,"op":op} */
json_object *serve_input_ok(json_object *id, const char *op);
/* A waiting stdin op's answer at its AB_EVENT_STDIN (err: why its data
 * was not all written), *id released and NULL. */
json_object *serve_input_answer(json_object **id, const struct ab_error *err);
/* The hello's features these ops add. */
void serve_input_features(json_object *features);

#endif
