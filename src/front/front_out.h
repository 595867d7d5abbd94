/* The replies of agentbox serve on their way to the client, in bounded
 * memory: a buffer of what is ready to write, and behind it, in order,
 * what waits for room (parts): small replies as bytes, and the output of
 * a result as the captured bytes themselves, escaped (or base64) piece
 * by piece as the client reads, never whole. Streamed output is
 * written straight into the buffer (out_event); the server stops reading
 * the commands' pipes while the buffer is full (out_full). */
#ifndef AB_FRONT_OUT_H
#define AB_FRONT_OUT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"

/* Bytes in the buffer: at OUT_PAUSE it is full (the streamed commands'
 * pipes wait), below OUT_RESUME it takes output again. */
#define OUT_PAUSE  (128u << 10)
#define OUT_RESUME (64u << 10)

struct front_part;

struct front_out {
	int fd;
	char *buf;
	size_t len, cap, off; /* buf[off, len) is to write */
	bool nonblock;	      /* fd is non-blocking: a write never waits */
	int stop_fd;	      /* readable: a blocking flush waits no more (-1: none) */
	bool broken;	      /* the client is gone */
	bool failed;	      /* no memory for the replies: the session ends */
	bool mid_line;	      /* the last byte written ended no line */
	struct front_part *parts, *parts_tail;
	size_t parts_raw;  /* bytes in parts */
	size_t parts_text; /* results' outputs in parts */
	struct ab_result *stealing;
};

void out_init(struct front_out *o, int fd, bool nonblock);
void out_free(struct front_out *o);
void out_fail(struct front_out *o);
/* Bytes written to the buffer and not yet to fd. */
size_t out_pending(const struct front_out *o);
/* Anything still to write. */
bool out_waiting(const struct front_out *o);
/* Whether streamed output must wait (a result's output, or a full buffer,
 * ahead of it); and whether it may come again. */
bool out_full(const struct front_out *o);

/* The client has gone (a detached sandbox): what it was sent of a line
 * is dropped with the rest of that line, and so are the output events
 * still in the buffer; the results and errors stay for the next client. */
void out_client_gone(struct front_out *o);
/* Everything src holds to write, behind what dst holds; src is empty
 * (and freed) after. */
void out_splice(struct front_out *dst, struct front_out *src);
bool out_drained(const struct front_out *o);

void out_add(struct front_out *o, const char *p, size_t n);
/* v as one line; consumes v. steal: the result v was made from, whose
 * output buffers (res->out.data, res->err.data) it may keep, to escape
 * them as they are written (they are NULL then), or NULL. */
void out_json(struct front_out *o, json_object *v, struct ab_result *steal);
/* v as one line, as out_json, its big texts (a result's output) copied
 * as they are, to be escaped as they are written; consumes v. */
void out_json_copy(struct front_out *o, json_object *v);
/* {"type":"output","id":ID,"stream":STREAM,"offset":N,"data":DATA,
 * "encoding":...}: id the request's id as JSON, N the offset of the bytes
 * in the command's stream, data the content of the bytes a then b
 * (text: whole characters, escaped, lossy) or of a as base64. Written
 * without json-c, in the order every other reply has its fields. */
void out_event(struct front_out *o, const char *id, size_t id_len, const char *stream,
	       unsigned long long offset, bool base64, const char *a, size_t alen, const char *b,
	       size_t blen);
/* Write what can be written (block: all of it, unless stop_fd becomes
 * readable meanwhile); false once fd is gone. */
bool out_flush(struct front_out *o, bool block);

#endif
