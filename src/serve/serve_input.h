/* A running command's input in agentbox serve: the stdin, resize and
 * signal ops (docs/protocol.md, "Terminals and streamed stdin"), through
 * the engine (ab_front_input); serve.c finds the target and sends the
 * answers. */
#ifndef AB_SERVE_INPUT_H
#define AB_SERVE_INPUT_H

#include <json-c/json.h>

#include "agentbox/agentbox.h"
#include "front/front.h"
#include "front/request.h"

/* Do q (AB_REQUEST_STDIN, _RESIZE, _SIGNAL) for the command of r (NULL:
 * no request has the target id). Returns 1 when it is done (answer "ok" now), 0 for a stdin whose
 * data waits for the command to read it (answer at its AB_EVENT_STDIN), or a negative errno with e
 * saying why (e->kind the protocol's code). */
int serve_input(struct ab_front *f, struct ab_front_req *r, const struct ab_request *q,
		struct ab_error *e);

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
