/* The bulk path of upload and download (docs/protocol.md, "Host files"):
 * the launcher's half. An upload's "from" is a file of the caller's host,
 * a download's "to" a path there; both are opened here, with the
 * launcher's own credentials (the caller's), never inside. The bytes move
 * through a pipe whose other end is the shim's stdin, no host fd ever
 * enters the sandbox: a copier thread splices the source into the pipe
 * (upload) or the pipe into a temporary file beside "to" (download), and
 * the launcher's loop never waits on it but for the end of a pipe's worth
 * after the shim's reply (FILEOP_HOST_DRAIN_MS at most). A download's
 * temporary file becomes "to" only when the shim's reply says every byte
 * was sent and the copier has them all; otherwise it is removed. */
#ifndef AB_FILEOP_HOST_H
#define AB_FILEOP_HOST_H

#include <json-c/json.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agentbox/agentbox.h"

#define FILEOP_HOST_PIPE_MAX (16u << 20) /* the pipe's size asked for first */
#define FILEOP_HOST_DRAIN_MS 2000	 /* after the reply, for the copier's end */

struct fileop_host {
	bool down;    /* a download's "to"; else an upload's "from" */
	int file;     /* upload: the source; download: the temporary file */
	char *path;   /* the host path as given */
	char *tmp;    /* download: the temporary file's path, until renamed */
	int64_t size; /* upload: the source's size at open */
	int pipe_end; /* the copier's end of the pipe */
	int abort_fd; /* eventfd: the copier stops */
	int done_fd;  /* eventfd: the copier has stopped */
	pthread_t thread;
	bool running;
	uint64_t moved;	  /* what the copier moved (read after the join) */
	int error;	  /* its errno, 0: none */
	uint64_t reserve; /* download: the free space "to"'s file system keeps */
	bool reserve_hit; /* download: stopped by it (error ENOSPC) */
};

/* For fileop_prepare_host: the host file of op ("upload": field "from",
 * opened; "download": field "to", its temporary file made) from v. 0, or
 * a negative errno with err naming the field. */
int fileop_host_open(const char *op, const char *field, json_object *v, struct fileop_host **out,
		     struct ab_error *err);

/* The inner op name the reply is checked against ("upload_from",
 * "download_to"). */
const char *fileop_host_op(const struct fileop_host *h);

/* The pipe and the copier: *child is the end for the shim's stdin, which
 * the caller closes once the command is started. */
int fileop_host_start(struct fileop_host *h, int *child, struct ab_error *err);

/* The shim's reply is in (*msg: the protocol's result or error message):
 * the copier ended, a download's file renamed to "to" or removed, and *msg
 * replaced by an error when the bytes did not all arrive. */
void fileop_host_finish(struct fileop_host *h, json_object **msg);

/* The copier stopped, the fds closed, a temporary file removed; NULL is
 * fine. */
void fileop_host_free(struct fileop_host *h);

#endif
