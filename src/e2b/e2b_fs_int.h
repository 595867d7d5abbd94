/* What envd's filesystem service's files share: e2b_fs_path.c's helpers,
 * and the watches of e2b_fs_watch.c that e2b_fs.c's table names. */
#ifndef AB_E2B_FS_INT_H
#define AB_E2B_FS_INT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "e2b/e2b.h"

/* e2b_fs_path.c: the Connect code of an agentbox error code
 * (docs/protocol.md). */
const char *e2b_fs_code(const char *agentbox_code);
/* The request's string field name as a path of the sandbox (out, size),
 * or false with the call's error sent. */
bool e2b_fs_path(struct e2b_call *c, json_object *req, const char *name, char *out, size_t size);

/* WatchDir and the watcher API (e2b_fs_watch.c). */
void e2b_fs_watch_dir(struct e2b_call *c);
void e2b_fs_create_watcher(struct e2b_call *c);
void e2b_fs_get_watcher_events(struct e2b_call *c);
void e2b_fs_remove_watcher(struct e2b_call *c);

#endif
