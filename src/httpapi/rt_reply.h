/* The bodies of agent-sandbox's legacy runtime, as its main.py (FastAPI,
 * pydantic v2) writes them: compact JSON, keys in its order. Pure, no I/O
 * (rt_reply.c). Every function returns a heap string, or NULL without
 * memory. */
#ifndef AB_RT_REPLY_H
#define AB_RT_REPLY_H

#include <json-c/json.h>
#include <stddef.h>

#include "agentbox/agentbox.h"

/* {"message": msg} */
char *rt_message(const char *msg);
/* {"detail": detail}: FastAPI's 404 and 405 */
char *rt_detail(const char *detail);

/* The body of a POST /execute: the command, or NULL with *status 422 and
 * *err_body FastAPI's {"detail":[...]} for a body that is not JSON, not an
 * object, without "command" or with a command that is not a string. */
char *rt_execute_command(const char *body, size_t len, char **err_body);

/* /execute's 200 body: {"stdout","stderr","exit_code"}. */
char *rt_execute_body(const char *out, size_t out_len, const char *err, size_t err_len,
		      int exit_code);
/* /execute's failure: stdout "", stderr "Failed to execute command: <why>",
 * exit_code 1, as main.py answers an exception. */
char *rt_execute_failed(const char *why);
/* The result of a command that ran into /execute's body: its output, its
 * status (negative: the signal, as Popen.returncode), the Python exception's
 * text for a program that could not be run or timed out. argv as split. */
char *rt_execute_result(const struct ab_result *res, char *const *argv);

/* Python's repr() of a list of strings, as TimeoutExpired prints it. */
char *rt_pyrepr_list(char *const *argv);

/* An "ls" result of the session into /list's entries:
 * [{"name","size","type","mod_time"}]. NULL for a malformed one. */
char *rt_list_body(json_object *ls);
/* An "ls" entry's {"name","size","type":"file"|"directory"}, as both
 * APIs' listings begin. */
json_object *rt_list_entry(json_object *e, const char *name);

/* Content-Disposition for a download named name, as Starlette's
 * FileResponse writes it. */
char *rt_disposition(const char *name);

#endif
