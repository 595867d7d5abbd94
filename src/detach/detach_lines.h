/* The client's end of a detached sandbox's socket, shared by the command
 * lines that talk to it (detach_cli.c's exec, detach_request.c): dialling
 * by id, the hello, JSON lines read without blocking past a signal. */
#ifndef AB_DETACH_LINES_H
#define AB_DETACH_LINES_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

/* Lines from the launcher. */
struct lines {
	int fd;
	int sigfd; /* readable: *sig, and lines_next returns NULL (-1: none) */
	bool sig;
	char *buf;
	size_t len, cap;
	bool eof;
	bool cancelled;		     /* lines_next_cancel sent its cancel */
	json_object *hello, *result; /* exec: the sandbox's hello, the result */
};

/* "agentbox: " and the message on stderr; returns AB_EXIT_FAILURE. */
int detach_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "agentbox: CMD: WHAT 'ARG' (try 'agentbox CMD --help')" on stderr;
 * returns AB_EXIT_FAILURE. */
int detach_bad_arg(const char *cmd, const char *what, const char *arg);
bool detach_is_help(const char *a);
/* The arguments of a command that takes --help, one flag (its long and
 * short forms; short may be NULL) and, with operand, at most one operand:
 * *set when the flag is given, *operand (NULL when none). -1 to go on,
 * else the command's exit status (0 after the usage, or one said). */
int detach_simple_args(int argc, char **argv, const char *cmd, const char *usage, const char *flag,
		       const char *short_flag, bool *set, const char **operand);
/* A whole line already read, as JSON, or NULL (none yet; or one that is
 * not an object: *bad then). Never blocks. */
json_object *lines_take(struct lines *l, bool *bad);
/* One read from the launcher into the buffer (l->eof at its end); false
 * when a line would be over its bound. */
bool lines_fill(struct lines *l);
/* The next line as JSON (NULL at the end, on a signal (l->sig), or on a
 * line that is not an object: *bad then). Blocks until one of them. */
json_object *lines_next(struct lines *l, bool *bad);
/* lines_next for a client whose request target runs: the first signal
 * cancels it (a cancel op sent on l->fd), a line that is not an object is
 * skipped; NULL only at the end. */
json_object *lines_next_cancel(struct lines *l, const char *target);
const char *lines_str(json_object *o, const char *key);
int detach_write_all(int fd, const char *p, size_t n);
/* The sandbox's hello into l->hello (or why there is none, said). */
int lines_hello(struct lines *l, const char *id);
/* A socket to sandbox id's leaf ("sock", "exec"), or -1 (said). */
int detach_cli_dial(const char *id, const char *leaf, char *root, size_t size);

#endif
