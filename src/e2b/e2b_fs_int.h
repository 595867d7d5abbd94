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

/* File metadata, `user.e2b.*` extended attributes (e2b_meta.c). An
 * upload's X-Metadata-* headers as an object in *out (NULL: none); -1
 * with the answer sent when one is not a valid key or value. */
int e2b_meta_headers(struct e2b_http *h, json_object **out);
/* The exec request that clears path's metadata and sets meta's keys
 * (meta NULL: only clears, and without python3 does nothing). */
json_object *e2b_meta_set_req(const char *path, json_object *meta);
/* A shell command that reads NUL-ended paths on its stdin and prints,
 * for each with metadata, "X", the path, then key and value pairs, each
 * ended by a NUL, and an empty field (nothing without python3 in the
 * sandbox). Values not printable ASCII are left out, as the SDK could
 * not have written them; at most 64 keys of 4 KiB each. */
#define E2B_META_PY                                                                                \
	"import os,sys\n"                                                                          \
	"o=sys.stdout.buffer\n"                                                                    \
	"for p in sys.stdin.buffer.read().split(b'\\0'):\n"                                        \
	" try: ks=[k for k in os.listxattr(p,follow_symlinks=False)"                               \
	" if k.startswith('user.e2b.') and len(k)>9][:64]\n"                                       \
	" except OSError: continue\n"                                                              \
	" r=[]\n"                                                                                  \
	" for k in ks:\n"                                                                          \
	"  try: v=os.getxattr(p,k,follow_symlinks=False)\n"                                        \
	"  except OSError: continue\n"                                                             \
	"  if len(v)<=4096 and all(32<=c<127 for c in v): r+=[k[9:].encode(),v]\n"                 \
	" if r: o.write(b'\\0'.join([b'X',p]+r+[b'',b'']))\n"
#define E2B_META_GET_SH                                                                            \
	"{ command -v python3 >/dev/null 2>&1 && python3 -c \"" E2B_META_PY "\" 2>/dev/null; }"
/* What that printed (out, len), as "metadata" of the entries (or first)
 * with those paths. */
void e2b_meta_attach(const char *out, size_t len, json_object *entries, json_object *first);

#endif
