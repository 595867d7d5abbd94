/* The protobuf wire format of sandboxd's process.v1.ProcessService
 * (agent-sandbox's packages/sandboxd/spec/process/v1/process.proto) and
 * of its watcher.v1.FileWatcherService (v1.0.12; docs/kubernetes.md says
 * where its form was taken from), by hand (rt_pb.c): their six requests
 * decoded, their responses encoded. Pure,
 * no I/O; every length is checked against the bytes there are, unknown
 * fields are skipped, a group or a bad wire type is refused. */
#ifndef AB_RT_PB_H
#define AB_RT_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PB_MAX_ARGS 4096 /* ProcessConfig.command entries */
#define PB_MAX_ENV  1024 /* ProcessConfig.env_vars entries */

enum pb_method {
	PB_START,
	PB_EXECUTE,
	PB_WRITE_STDIN,
	PB_SEND_SIGNAL,
	PB_RESIZE_TTY,
	PB_WATCH_DIR, /* watcher.v1.FileWatcherService */
	PB_METHODS
};
/* The methods' names and their :path (/SERVICE/NAME), by enum pb_method. */
extern const char *const pb_method_names[PB_METHODS];
extern const char *const pb_method_paths[PB_METHODS];

/* One decoded request; its strings are copies (pb_req_free), input points
 * into the message decoded. */
struct pb_req {
	char **argv; /* NULL-terminated; argc entries */
	size_t argc;
	char **env; /* "NAME=VALUE", NULL-terminated; n_env entries */
	size_t n_env;
	char *cwd; /* NULL when not given */
	bool pty;  /* StartRequest.pty present */
	uint32_t rows, cols;
	int32_t process_id;
	const uint8_t *input; /* WriteStdinRequest.input, or NULL */
	size_t input_len;
	bool eof; /* WriteStdinRequest.eof (the oneof's last field given) */
	int32_t signal;
	char *path;	/* WatchDirRequest.path ("" when not given) */
	bool recursive; /* WatchDirRequest.recursive */
};

/* Decode the len bytes at b as method's request into q (zeroed first).
 * Returns 0, or -EINVAL with why (a static string) naming what is wrong,
 * -E2BIG past PB_MAX_ARGS or PB_MAX_ENV, -ENOMEM. q is freed on error. */
int pb_decode(enum pb_method method, const uint8_t *b, size_t len, struct pb_req *q,
	      const char **why);
void pb_req_free(struct pb_req *q);

/* Encoders: each writes its message into out (room for outsz bytes) and
 * returns its length (0: an empty message), or PB_NO_ROOM when it does not
 * fit. pb_size_bytes gives the room a bytes field takes. */
#define PB_NO_ROOM ((size_t)-1)
size_t pb_start_init(uint8_t *out, size_t outsz, int32_t process_id);
size_t pb_start_exit(uint8_t *out, size_t outsz, int32_t exit_code);
/* StartResponse.stdout (stream 1) or .stderr (2) of n bytes */
size_t pb_start_output(uint8_t *out, size_t outsz, int stream, const void *data, size_t n);
size_t pb_execute_response(uint8_t *out, size_t outsz, int32_t exit_code, const void *o, size_t on,
			   const void *e, size_t en);
/* FileEvent: type (enum FileEventType), path, old_path, error (each
 * string NULL or "": not sent) */
enum pb_file_event {
	PB_FE_CREATE = 1,
	PB_FE_WRITE = 2,
	PB_FE_REMOVE = 3,
	PB_FE_RENAME = 4,
	PB_FE_CHMOD = 5,
	PB_FE_ERROR = 6,
};
size_t pb_file_event(uint8_t *out, size_t outsz, enum pb_file_event type, const char *path,
		     const char *old_path, const char *error);
/* room for a bytes field of n bytes, its tag and length included */
static inline size_t pb_size_bytes(size_t n)
{
	return n + 1 + 10;
}

#endif
