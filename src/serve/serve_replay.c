/* Streamed output with its offsets, and what a detached sandbox keeps of
 * it for the next client (docs/detached.md, "Nothing lost"): every byte
 * of a streamed command's stdout and stderr goes into its tail
 * (serve_tail.h), sent or not, since no one can tell what a killed client
 * had read; the next client gets all that is kept, each chunk with its
 * offset, and what was never sent nor kept said as output_dropped. */
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "front/front_out.h"
#include "front/request.h"
#include "serve/serve_int.h"
#include "serve/serve_tail.h"
#include "util/error.h"
#include "util/jsonw.h"

/* Of what was sent to a client, the last this much is kept, for what it
 * may not have read when it went (the reply buffer, the socket's, its
 * own, a connect bridge's): the rest of the bound waits for the output
 * of a command whose client is gone. */
#define SENT_KEPT (1u << 20)
/* Replayed output goes in events of at most this much. */
#define PIECE (64u << 10)
/* Streamed commands that ended while their client was attached, kept
 * until it has read all: at most this many, the oldest go first. */
#define DONE_MAX 8

static const char *stream_name(const struct request *r, int k)
{
	return r->fr.q.merged ? "output" : k ? "stderr" : "stdout";
}

/* Whether r's output is kept: a streamed command of a detached sandbox. */
static bool keeps(const struct server *sv, const struct request *r)
{
	return sv->listen && r->fr.q.kind == AB_REQUEST_EXEC && r->fr.q.x.stream;
}

static int id_sink(void *arg, const char *p, size_t n)
{
	struct request *r = arg;
	char *q = realloc(r->id_json, r->id_len + n);
	if (!q)
		return -ENOMEM;
	memcpy(q + r->id_len, p, n);
	r->id_json = q;
	r->id_len += n;
	return 0;
}

/* r's id as JSON (r->id_json), for the output events; false: no memory. */
static bool id_json(struct request *r)
{
	if (r->id_json)
		return true;
	struct ab_jw w;
	ab_jw_init(&w, id_sink, r);
	ab_jw_value(&w, r->fr.q.id);
	return ab_jw_finish(&w) == 0;
}

bool serve_output_event(struct server *sv, struct request *r, int k, const char *a, size_t alen,
			const char *b, size_t blen)
{
	struct tail *t = &r->tail[k];
	struct tail_budget *keep = keeps(sv, r) ? &sv->tails : NULL;
	unsigned long long off = t->end;
	tail_add(t, keep, a, alen);
	tail_add(t, keep, b, blen);
	if (serve_route(sv, r))
		return false; /* its client is gone: kept for the next */
	if (!id_json(r)) {
		out_fail(&sv->out);
		return false;
	}
	out_event(&sv->out, r->id_json, r->id_len, stream_name(r, k), off, r->fr.q.base64, a, alen,
		  b, blen);
	t->sent = t->end;
	if (t->end > SENT_KEPT)
		tail_trim(t, t->end - SENT_KEPT);
	return true;
}

/* n bytes of text at p, without an incomplete character at the end (a
 * piece of a longer text: the rest comes in the next). */
static size_t whole_chars(const char *p, size_t n)
{
	for (size_t i = 1; i <= 3 && i <= n; i++) {
		unsigned char c = (unsigned char)p[n - i];
		if ((c & 0xC0) == 0x80)
			continue;
		size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
		return need > i && n > i ? n - i : n;
	}
	return n;
}

/* What r keeps of stream k from offset from on, as output events to o;
 * first, when bytes from lost on are neither kept nor to be sent, an
 * output_dropped message with their offsets. The bytes sent. */
static size_t send_tail(struct front_out *o, struct request *r, int k, unsigned long long lost,
			unsigned long long from)
{
	struct tail *t = &r->tail[k];
	if (from < tail_start(t))
		from = tail_start(t);
	if (from > t->end)
		from = t->end;
	if (lost < from) {
		json_object *m = json_object_new_object();
		json_object_object_add(m, "type", json_object_new_string("output_dropped"));
		json_object_object_add(m, "id", json_object_get(r->fr.q.id));
		json_object_object_add(m, "stream", json_object_new_string(stream_name(r, k)));
		json_object_object_add(m, "offset", json_object_new_int64((int64_t)lost));
		json_object_object_add(m, "end", json_object_new_int64((int64_t)from));
		out_json(o, m, NULL);
	}
	if (from < t->end && !id_json(r)) {
		out_fail(o);
		return 0;
	}
	static char piece[PIECE];
	size_t sent = 0;
	while (from < t->end) {
		size_t n = tail_copy(t, from, piece, sizeof(piece));
		if (!n)
			break;
		if (!r->fr.q.base64 && from + n < t->end)
			n = whole_chars(piece, n);
		out_event(o, r->id_json, r->id_len, stream_name(r, k), from, r->fr.q.base64, piece,
			  n, NULL, 0);
		from += n;
		sent += n;
	}
	t->sent = t->end;
	return sent;
}

void serve_replay_ended(struct server *sv, struct request *r)
{
	if (!sv->to || !keeps(sv, r))
		return;
	for (int k = 0; k < 2; k++) {
		struct tail *t = &r->tail[k];
		if (!t->end)
			continue;
		/* what waits in kept counts against the sandbox's bound too */
		bool room = sv->tails_kept + t->len <= sv->tails.total;
		sv->tails_kept += send_tail(sv->to, r, k, t->sent, room ? 0 : t->end);
	}
}

void serve_replay_adopt(struct server *sv)
{
	sv->tails_kept = 0; /* kept went to the client */
	for (struct ab_front_req *fr = sv->f.head; fr; fr = fr->next) {
		struct request *r = (struct request *)fr;
		if (r->gen == sv->client_gen)
			continue;
		r->gen = sv->client_gen;
		for (int k = 0; k < 2 && keeps(sv, r); k++)
			if (r->tail[k].end)
				send_tail(&sv->out, r, k, r->tail[k].sent, 0);
	}
}

void serve_replay_keep(struct server *sv, struct request *r, json_object *head)
{
	if (!keeps(sv, r) || serve_route(sv, r) || r->result)
		return;
	r->result = malloc(sizeof(*r->result));
	if (!r->result)
		return; /* (as before: its output goes with its client) */
	out_init(r->result, -1, false);
	out_json_copy(r->result, json_object_get(head));
}

bool serve_replay_hold(struct server *sv, struct request *r)
{
	if (!r->result)
		return false;
	tail_fit(&r->tail[0], &sv->tails);
	tail_fit(&r->tail[1], &sv->tails);
	struct request **p = &sv->done;
	while (*p)
		p = &(*p)->next_done;
	*p = r;
	if (++sv->n_done > DONE_MAX) {
		struct request *old = sv->done;
		sv->done = old->next_done;
		sv->n_done--;
		serve_request_destroy(sv, old);
	}
	return true;
}

void serve_replay_gone(struct server *sv, unsigned gen, enum serve_got got)
{
	for (struct request **p = &sv->done; *p;) {
		struct request *r = *p;
		if (gen && r->gen != gen) {
			p = &r->next_done;
			continue;
		}
		if (got == SERVE_GOT_UNKNOWN || got == SERVE_GOT_NOT) {
			r->replay = got == SERVE_GOT_NOT;
			r->gen = 0; /* no client's now */
			p = &r->next_done;
			continue;
		}
		*p = r->next_done;
		sv->n_done--;
		serve_request_destroy(sv, r);
	}
}

/* Record r (taken off the list) to o: its kept output from offsets
 * from[], then its result; r is freed. */
static void record_send(struct server *sv, struct front_out *o, struct request *r,
			const unsigned long long from[2])
{
	for (int k = 0; k < 2; k++)
		if (r->tail[k].end || from[k])
			send_tail(o, r, k, from[k], from[k]);
	out_splice(o, r->result);
	serve_request_destroy(sv, r);
}

void serve_replay_records(struct server *sv)
{
	for (struct request **p = &sv->done; *p;) {
		struct request *r = *p;
		if (!r->replay) {
			p = &r->next_done;
			continue;
		}
		*p = r->next_done;
		sv->n_done--;
		unsigned long long from[2] = {tail_start(&r->tail[0]), tail_start(&r->tail[1])};
		record_send(sv, &sv->out, r, from);
	}
}

/* The record of the command with id target, off the list; or NULL. */
static struct request *record_take(struct server *sv, json_object *target)
{
	for (struct request **p = &sv->done; *p; p = &(*p)->next_done) {
		struct request *r = *p;
		if (json_object_equal(r->fr.q.id, target)) {
			*p = r->next_done;
			sv->n_done--;
			return r;
		}
	}
	return NULL;
}

static json_object *output_ok(const struct ab_request *q, json_object *offs)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("ok"));
	json_object_object_add(o, "id", json_object_get(q->id));
	json_object_object_add(o, "op", json_object_new_string("output"));
	json_object_object_add(o, "offsets", offs);
	return o;
}

json_object *serve_output_op(struct server *sv, const struct ab_request *q, struct ab_error *e)
{
	struct request *r = (struct request *)ab_front_find(&sv->f, q->target);
	struct request *rec = r ? NULL : record_take(sv, q->target);
	if (rec) { /* ended: what is kept of it, its result, then ok */
		json_object *offs = json_object_new_object();
		for (int k = 0; k < 2 && !(k && rec->fr.q.merged); k++)
			json_object_object_add(offs, stream_name(rec, k),
					       json_object_new_int64((int64_t)rec->tail[k].end));
		record_send(sv, &sv->out, rec, q->offsets);
		return output_ok(q, offs);
	}
	if (!r || r->fr.q.kind != AB_REQUEST_EXEC || !r->fr.running) {
		ab_error_proto(e, AB_ERRC_INVALID_REQUEST,
			       "output: no command with this target id is running or kept (a "
			       "finished command's kept output is sent with its result, once)");
		return NULL;
	}
	if (!keeps(sv, r)) {
		ab_error_proto(e, AB_ERRC_INVALID_REQUEST,
			       "output: only a detached sandbox keeps output, of commands with "
			       "\"stream\": true");
		return NULL;
	}
	json_object *offs = json_object_new_object();
	for (int k = 0; k < 2; k++) {
		if (k && r->fr.q.merged)
			break;
		send_tail(&sv->out, r, k, q->offsets[k], q->offsets[k]);
		json_object_object_add(offs, stream_name(r, k),
				       json_object_new_int64((int64_t)r->tail[k].end));
	}
	return output_ok(q, offs);
}

void serve_request_destroy(struct server *sv, struct request *r)
{
	if (r->result) {
		out_free(r->result);
		free(r->result);
	}
	tail_free(&r->tail[0], &sv->tails);
	tail_free(&r->tail[1], &sv->tails);
	ab_request_clear(&r->fr.q);
	json_object_put(r->stdin_id);
	free(r->id_json);
	free(r);
}
