/* agentbox serve's state, shared by its loop (serve.c) and, for a
 * detached sandbox (agentbox create, docs/detached.md), its clients on
 * unix sockets (serve_conn.c): protocol clients on one listening socket,
 * one at a time, each checked to run as the launcher's own uid; one-line
 * control requests (status, stop) on another. */
#ifndef AB_SERVE_INT_H
#define AB_SERVE_INT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"
#include "front/front.h"
#include "front/front_out.h"
#include "serve/serve.h"
#include "serve/serve_tail.h"

struct serve_conn {
	int ctl_fd;				      /* listening for control requests */
	int fd;					      /* the attached client's socket, or -1 */
	bool hup;				      /* the attached client has hung up */
	unsigned long long started_ms, idle_since_ms; /* conn_now_ms() */
	bool trimmed; /* idle, and its supervisors let go: ab_session_idle_trim */
	bool sock;    /* the client came on sock (a protocol client), not exec */
	bool reset;   /* it went with replies unread in its socket (ECONNRESET) */
};

#define PROTOCOL  "agentbox/1"
#define MAX_LINE  (8u << 20)
#define MAX_QUEUE 1024

struct server {
	struct ab_front f; /* the request engine: the session, the requests */
	struct ab_config *cfg;
	struct ab_session *s; /* f.s */
	int audit;
	struct front_out out; /* the replies on their way (front_out.h) */
	bool paused;	      /* ab_session_pause_output */
	char *in;
	size_t in_len;
	bool discarding;
	bool stdin_eof;
	json_object *shutdown_id;	      /* a shutdown op's (f.ending) */
	int in_fd;			      /* the client's requests: stdin, or conn.fd */
	const struct ab_serve_listen *listen; /* detached, or NULL */
	struct serve_conn conn;
	/* detached: the replies for requests of another client than the one
	 * attached (client_gen, 0: none), kept for the next that replays */
	struct front_out kept;
	struct front_out *to; /* where replies go now: NULL, out */
	unsigned gen, client_gen;
	struct tail_budget tails; /* detached: streamed output kept (serve_tail.h) */
	size_t tails_kept;	  /* of it, bytes replayed into kept */
	bool frozen;		  /* paused: ab_session_freeze */
	bool layer_answered;	  /* a layer op's reply: the lines that waited are next */
	/* detached: streamed commands that ended while their client was
	 * attached, kept until it is known to have read all (serve_replay.c) */
	struct request *done;
	size_t n_done;
};

/* A request in the engine (front.h), with what this codec keeps of it. */
struct request {
	struct ab_front_req fr; /* first: the engine's; its q checked (request.h) */
	unsigned gen;		/* the client that asked (serve_int.h) */
	char hold[2][4];	/* stream: an incomplete UTF-8 sequence held back */
	size_t hold_len[2];
	char *id_json; /* q.id as JSON, for the output events */
	size_t id_len;
	json_object *stdin_id;	  /* a stdin op waiting for its data to be read */
	struct tail tail[2];	  /* stdout (or output), stderr: offsets, kept bytes */
	struct front_out *result; /* ended, its client attached: its result again */
	struct request *next_done;
	bool replay; /* its client went before it read it all: for the next */
};

/* The sandbox's id: a detached one's is its name (agentbox create). */
static inline const char *sandbox_id(const struct server *sv)
{
	return sv->listen && sv->listen->id ? sv->listen->id : ab_session_id(sv->s);
}

/* Commands or file operations queued or running (a layer op is not one). */
static inline bool serve_pending(const struct server *sv)
{
	for (const struct ab_front_req *r = sv->f.head; r; r = r->next)
		if (r->q.kind != AB_REQUEST_LAYER)
			return true;
	return false;
}

/* Replies for r: to the client attached (NULL), or kept when r is
 * another's. */
static inline struct front_out *serve_route(struct server *sv, const struct request *r)
{
	return sv->listen && r->gen != sv->client_gen ? &sv->kept : NULL;
}

/* Detached and no client attached: replies wait for the next one. */
static inline bool no_client(const struct server *sv)
{
	return sv->listen && sv->conn.fd < 0;
}

unsigned long long conn_now_ms(void);

/* The audit log, the engine (the signals that end the session, the
 * sandbox); -1 after saying why (and freeing sv->in, NULL: out of
 * memory). */
int serve_open(struct server *sv);

/* The reply to {"op":"stats"} with id (NULL: none). */
json_object *serve_stats_json(struct server *sv, json_object *id);

/* A protocol client waiting on lfd: its socket (non-blocking), or -1
 * when there is none or it was refused: another uid than ours, or busy
 * (a client is attached already: id names the sandbox in the message);
 * a refused client gets one error line and is closed. */
int conn_accept_client(int lfd, bool busy, const char *id);

/* The client on fd is attached: hello (consumed) first, then, with
 * replay, what was kept for it. */
void serve_client_attach(struct server *sv, int fd, json_object *hello, bool replay);
/* The client is gone: what is kept waits for the next (out_client_gone). */
void serve_client_detach(struct server *sv);
/* The client is done with the connection: gone, or at the end of its
 * requests with all its answers written. */
bool serve_client_done(struct server *sv);
/* Pause or resume the sandbox; 0, or -1 with err. */
int serve_freeze(struct server *sv, bool freeze, struct ab_error *err);
/* One control request, answered and closed at once. */
void serve_control(struct server *sv);
/* ms until the idle timeout or the ttl ends the sandbox (-1: never,
 * 0: now). */
int serve_listen_wait_ms(struct server *sv);
/* A detached sandbox's log (its stderr, agentbox logs ID): what agentbox
 * run says of a command's end (a timeout, an OOM kill, denials), a line
 * each, with the time and the request's id; bounded. */
void serve_log_result(struct server *sv, json_object *id, const struct ab_result *res);

/* Streamed output (serve_replay.c). r's output event of the bytes a then
 * b of stream k: counted, kept when detached, sent unless its client is
 * gone (false then). */
bool serve_output_event(struct server *sv, struct request *r, int k, const char *a, size_t alen,
			const char *b, size_t blen);
/* r ends while its client is gone: what was kept of its output, into
 * sv->to before its result. */
void serve_replay_ended(struct server *sv, struct request *r);
/* A client on sock is attached: the running commands of earlier clients
 * are its now, what was kept of their output first. */
void serve_replay_adopt(struct server *sv);
/* {"op":"output"}: the kept output of a running command from offsets,
 * then the reply returned (NULL: e says why not). */
json_object *serve_output_op(struct server *sv, const struct ab_request *q, struct ab_error *e);
/* r's result line, head, goes to the client attached: a copy is kept
 * with r's output when r streams, for the next client if this one goes
 * before it has read them (docs/detached.md, "Nothing lost"). */
void serve_replay_keep(struct server *sv, struct request *r, json_object *head);
/* r is done: true when it is kept as such a record (not to be freed). */
bool serve_replay_hold(struct server *sv, struct request *r);
/* What a client that went had read of what it was sent. */
enum serve_got {
	SERVE_GOT_ALL,	   /* all of it: its records go */
	SERVE_GOT_NOT,	   /* not all: they go to the next client after its hello */
	SERVE_GOT_UNKNOWN, /* its socket's all, but not what a bridge did with it:
			      they wait for a client that asks (op output) */
};
/* The client of gen (0: every record's, the session ends) is gone. */
void serve_replay_gone(struct server *sv, unsigned gen, enum serve_got got);
/* A client on sock, after its hello: the records of clients that went
 * before they read them, each its output kept then its result; then
 * they go. */
void serve_replay_records(struct server *sv);
/* r's memory, all of it. */
void serve_request_destroy(struct server *sv, struct request *r);

/* The hello: the protocol, the sandbox, its limits (serve_conn.c). */
json_object *serve_hello_json(struct server *sv);

/* A watch's messages (serve_watch.c): one file event; its end, a result
 * (cancelled, timed out) or the error it failed with. */
json_object *serve_watch_event(json_object *id, const struct ab_watch_event *ev);
json_object *serve_watch_end(json_object *id, const struct watch_lines *w,
			     const struct ab_result *res);

#endif
