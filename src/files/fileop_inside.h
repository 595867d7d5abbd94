/* File operations, the sandbox's half (see fileop.h): what
 * fileop_inside.c, fileop_file.c, fileop_tree.c and fileop_run.c share. It runs as the
 * sandbox's user in a process of its own, under the sandbox's seccomp
 * filter and Landlock ruleset, and never runs a program: every operation
 * is a handful of system calls on paths of the view. Its reply is checked
 * again by the launcher's half (fileop_check.c), which trusts nothing it
 * did not write. Each fo_ operation returns what fo_result or fo_fail
 * returned: 0 once a reply is written. */
#ifndef AB_FILEOP_INSIDE_H
#define AB_FILEOP_INSIDE_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "agentbox/agentbox.h"
#include "files/fileop.h"

#define SNIFF	  8192 /* bytes looked at to tell text from binary */
#define MAX_DEPTH 256  /* directory levels a walk or a delete goes down */

/* replies, written to fd from now on (fileop_run) */
void fo_reply_to(int fd);
/* replies, handed to put from now on (fileop_run_with) */
void fo_reply_with(fileop_put_fn *put, void *arg);
int fo_result(json_object *res);
__attribute__((format(printf, 3, 4))) int fo_fail(enum ab_errc code, const char *path,
						  const char *fmt, ...);
int fo_fail_errno(int e, const char *path, const char *what);
json_object *fo_lossy(const char *s, size_t n);
json_object *fo_file_info(const char *path);
/* A time as RFC 3339 in UTC with milliseconds ("...T12:00:00.123Z"). */
json_object *fo_iso_time(const struct timespec *t);

/* files and request fields */
int fo_open_regular(const char *path, int flags, struct stat *st);
int fo_read_all(const char *path, size_t max, char **out, size_t *len);
int fo_write_all(int fd, const char *p, size_t n);
int fo_make_parents(const char *path);
const char *fo_jstr(json_object *q, const char *key, size_t *len);
bool fo_jbool(json_object *q, const char *key, bool def);
int64_t fo_jint(json_object *q, const char *key, int64_t def);

/* the operations: files (fileop_file.c) */
int fo_read(json_object *q);
int fo_write(json_object *q, bool upload);
int fo_edit(json_object *q);
int fo_download(json_object *q);

/* the operations: the bulk path (fileop_bulk.c), bytes on data */
int fo_upload_from(json_object *q, int data);
int fo_download_to(json_object *q, int data);

/* the operations: trees (fileop_tree.c) */
int fo_ls(json_object *q);
int fo_glob(json_object *q);
int fo_grep(json_object *q);
int fo_delete(json_object *q);
/* agentbox runtime's inner ops: clear_dir (fileop_tree.c), resolve_path and
 * place_file (fileop_guard.c) */
int fo_clear_dir(json_object *q);
int fo_resolve_path(json_object *q);
int fo_place_file(json_object *q);
/* fileop_exact.c. The directory path (absolute, no "." or ".."
 * components) opened O_PATH one component at a time, none followed: a
 * symlink anywhere on the way is an error (ENOTDIR). The fd, or -errno.
 * fo_open_parent_exact opens so the directory path's last component is
 * in, and points *name at that component. */
int fo_open_dir_exact(const char *path);
int fo_open_parent_exact(const char *path, const char **name);
/* Exact mode, for the request running: on, open as
 * fo_open and fo_make_parents reach a path follow no symlink on the way
 * or at its end (ELOOP, ENOTDIR); off, as open(2) and mkdir -p. fo_open
 * returns as open(2) does. */
void fo_set_exact(bool on);
bool fo_exact_on(void);
int fo_open(const char *path, int flags, mode_t mode);
int fo_make_parents_exact(const char *path);

#endif
