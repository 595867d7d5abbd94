/* JSON pieces shared by the one-shot report (docs/result.md) and the
 * session protocol's results (docs/protocol.md). */
#ifndef AB_RESULT_H
#define AB_RESULT_H

#include <json-c/json.h>
#include <stdbool.h>

#include "agentbox/agentbox.h"

/* exit_code .. protected_paths_changed of a result (docs/result.md), the
 * same for a run's report and a session's result; ran false: agentbox failed,
 * the command's fields are null. NULL when out of memory. */
json_object *ab_result_fields_json(const struct ab_result *res, bool ran, bool captured,
				   bool merged, bool base64);
json_object *ab_denied_json(const struct ab_denied_syscall *d, size_t n);
/* The "limits" object: what was asked for and how it was applied. */
json_object *ab_limits_json(const struct ab_config *cfg, const struct ab_result *res);
/* o as one line, newline included, to a blocking fd. */
int ab_json_write_line(json_object *o, int fd, struct ab_error *err);

#endif
