/* The front engine split in two processes (issue 49): the session in a
 * trusted parent, the protocol codecs that face the network in a confined
 * child (front_split.h forks them). Between them, on a private socketpair,
 * one JSON object a line: the child's engine sends its requests (exec,
 * file and layer ops as the objects request.h built, cancel, stdin,
 * signal, resize, output pause, net, discard) and the parent sends the
 * session's events back (output, stdin written, result, refusal, a layer
 * op's reply, the sandbox's death). This channel is the only one that
 * carries the runtime's inner file ops (resolve_path, place_file,
 * clear_dir); no public protocol does.
 *
 * Everything the parent reads here comes from the part a network attacker
 * may own: front_link_check takes a line apart as hostile (bounded, every
 * key known, every value typed and in range) before the parent acts. */
#ifndef AB_FRONT_LINK_H
#define AB_FRONT_LINK_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"

/* A line either way: a file chunk's base64 with room to spare; a reply
 * the parent sends (a download's chunk, a listing) may be longer. */
#define FRONT_LINK_MAX_REQ   (8u << 20)
#define FRONT_LINK_MAX_REPLY (96u << 20)

struct ab_front;
struct ab_front_req;

/* The child's end. */
struct front_link {
	int fd;
	char *in;
	size_t len, cap;
	unsigned long long seq; /* the last synchronous call's */
	bool eof;
	bool failed;	 /* the other process could not build the sandbox */
	int pid;	 /* the session's process, waited for at the close */
	char id[64];	 /* the sandbox's, from the hello */
	bool net, layer; /* it has the network proxy, an overlay layer */
};

/* The front's end on fd (taken); the hello read (blocking): 0, or -1 with
 * err (failed: the other process could not build the sandbox and said
 * why on stderr; err says it too). */
int front_link_open(struct front_link *l, int fd, struct ab_error *err);
/* The link closed and the other process waited for. */
void front_link_close(struct front_link *l);
/* o (taken) as one line, written whole (blocking); 0 or -errno. */
int front_link_send(struct front_link *l, json_object *o);
/* What can be read now into the buffer; -1 once the parent is gone. */
int front_link_read(struct front_link *l);
/* The next complete line of the buffer, parsed; NULL when none. */
json_object *front_link_next(struct front_link *l);
/* A synchronous call: o (taken; front_link_msg's) sent with a new seq;
 * the reply, or NULL with err when the other process is gone.
 * front_link_rc: the reply's rc, its message into err when it failed. */
json_object *front_link_msg(const char *op);
json_object *front_link_call(struct front_link *l, json_object *o, struct ab_error *err);
int front_link_rc(json_object *r, struct ab_error *err);
/* A request of r to the parent: exec, file or layer (by r->q.kind). */
int front_link_start(struct front_link *l, const struct ab_front_req *r, struct ab_error *err);
/* An event line of the parent decoded: ev (its result allocated in *res,
 * to free with ab_result_free; its error in *e). false: not one. */
bool front_link_event(json_object *o, struct ab_event *ev, struct ab_result *res,
		      struct ab_error *e);

/* front_calls.c: the engine's calls that reach the session, either way: in process
 * (f->s), or over f->link (a synchronous round trip where the session
 * answers at once). As the ab_session_ call each is named after. */
const char *ab_front_id(struct ab_front *f);
bool ab_front_has_net(struct ab_front *f);
bool ab_front_has_layer(struct ab_front *f);
json_object *ab_front_net_op(struct ab_front *f, json_object *req, struct ab_error *err);
/* {"op":"port"} (session/session_port.h) on the session, here or over the
 * link: its reply, or NULL with err. */
json_object *ab_front_port_op(struct ab_front *f, json_object *req, struct ab_error *err);
int ab_front_stdin(struct ab_front *f, unsigned long long tag, const char *data, size_t len,
		   bool eof, struct ab_error *err);
int ab_front_signal(struct ab_front *f, unsigned long long tag, int sig);
int ab_front_resize(struct ab_front *f, unsigned long long tag, unsigned rows, unsigned cols,
		    struct ab_error *err);
void ab_front_pause_output(struct ab_front *f, bool pause);
/* discard: the overlay layer removed with the sandbox, a new sandbox from
 * the same options in its place (no request may be in the engine). 0 with
 * *reply (the layer's reply) and old (the old sandbox's id); -1 with err
 * when nothing changed; -2 when the old one is gone and no new one could
 * be built (f is gone: f->gone_why). */
int ab_front_discard(struct ab_front *f, json_object **reply, char *old, size_t old_size,
		     struct ab_error *err);

/* ---- the parent's side ---- */

enum front_link_op {
	LINK_EXEC,
	LINK_FILE,
	LINK_LAYER,
	LINK_CANCEL,
	LINK_PAUSE,
	LINK_STDIN,
	LINK_SIGNAL,
	LINK_RESIZE,
	LINK_NET,
	LINK_PORT,
	LINK_DISCARD,
	LINK_END, /* the front ends on purpose (a drain): the link closes next */
};

struct front_link_msg {
	enum front_link_op op;
	json_object *root; /* the line, owned */
	unsigned long long tag, seq;
	json_object *req; /* exec, file, layer, net: in root */
	char *data;	  /* stdin: decoded, owned */
	size_t data_len;
	bool eof, on;
	int signo;
	unsigned rows, cols;
};

/* A line of the front (len bytes, no newline) checked into m: 0, or a
 * negative errno with err saying what is wrong (m then holds nothing). */
int front_link_check(const char *line, size_t len, struct front_link_msg *m, struct ab_error *err);
void front_link_msg_clear(struct front_link_msg *m);
/* An event of the session as the line for the child (its result's output
 * as base64); NULL when out of memory. */
json_object *front_link_event_json(const struct ab_event *ev);
/* An error as {"msg","code","kind"}. */
json_object *front_link_error_json(const struct ab_error *e);

#endif
