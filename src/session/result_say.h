/* What agentbox says on stderr of a command's end, the same for `run` and
 * `exec`: a timeout, an OOM kill, refused forks, seccomp and network
 * denials, each a line a user would otherwise read as the command's own
 * failure. */
#ifndef AB_RESULT_SAY_H
#define AB_RESULT_SAY_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>

#include "agentbox/agentbox.h"

/* The limits the lines name (for exec: from the sandbox's hello). */
struct ab_say_limits {
	unsigned long long kill_after_ms;
	unsigned long long memory; /* bytes; 0: none */
	unsigned long pids;
};

/* The lines of res to f; the denials only when `denials` (a run with a
 * --report has them there). */
void ab_result_say(FILE *f, const struct ab_result *res, const struct ab_say_limits *lim,
		   bool denials);

/* The same lines of a session's result message (docs/protocol.md), with
 * the limits of the session's hello, for a request whose timeout was
 * timeout_ms (0: the session's default). */
void ab_result_say_json(FILE *f, json_object *result, json_object *hello,
			unsigned long long timeout_ms);

#endif
