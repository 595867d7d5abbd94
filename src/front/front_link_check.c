/* What the network front sends the session's process, checked as hostile
 * (front_link.h): the line bounded and parsed with a bounded depth, an
 * object whose every key is one its op has, every value of its type and
 * range. Nothing here acts: front_split.c does, on what passed. */
#include "front/front_link.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "util/error.h"

#define TAG_MAX (1ull << 53)

static const struct {
	const char *name;
	enum front_link_op op;
	const char *keys[6]; /* besides "op" */
} ops[] = {
	{"exec", LINK_EXEC, {"tag", "req"}},
	{"file", LINK_FILE, {"tag", "req"}},
	{"layer", LINK_LAYER, {"tag", "req"}},
	{"cancel", LINK_CANCEL, {"tag"}},
	{"pause", LINK_PAUSE, {"on"}},
	{"stdin", LINK_STDIN, {"seq", "tag", "data", "eof"}},
	{"signal", LINK_SIGNAL, {"seq", "tag", "signo"}},
	{"resize", LINK_RESIZE, {"seq", "tag", "rows", "cols"}},
	{"net", LINK_NET, {"seq", "req"}},
	{"port", LINK_PORT, {"seq", "req"}},
	{"discard", LINK_DISCARD, {"seq"}},
	{"end", LINK_END, {0}},
};

static bool has_key(size_t i, const char *key)
{
	for (size_t k = 0; k < 6 && ops[i].keys[k]; k++)
		if (!strcmp(ops[i].keys[k], key))
			return true;
	return false;
}

/* key's value of type t, required */
static json_object *need(json_object *o, const char *key, json_type t)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, t) ? v : NULL;
}

static bool id_in(json_object *o, const char *key, unsigned long long *out)
{
	json_object *v = need(o, key, json_type_int);
	if (!v)
		return false;
	int64_t n = json_object_get_int64(v);
	if (n < 1 || (unsigned long long)n > TAG_MAX)
		return false;
	*out = (unsigned long long)n;
	return true;
}

static int fields(size_t i, json_object *o, struct front_link_msg *m, struct ab_error *err)
{
	json_object *v;
#define BAD(...) ab_error_plain(err, EINVAL, __VA_ARGS__)
	if (has_key(i, "tag") && !id_in(o, "tag", &m->tag))
		return BAD("link: %s: tag is not an integer from 1 to 2^53", ops[i].name);
	if (has_key(i, "seq") && !id_in(o, "seq", &m->seq))
		return BAD("link: %s: seq is not an integer from 1 to 2^53", ops[i].name);
	if (has_key(i, "req") && !(m->req = need(o, "req", json_type_object)))
		return BAD("link: %s: req is not an object", ops[i].name);
	if (has_key(i, "on")) {
		if (!(v = need(o, "on", json_type_boolean)))
			return BAD("link: pause: on is not a boolean");
		m->on = json_object_get_boolean(v);
	}
	if (has_key(i, "eof")) {
		if (!(v = need(o, "eof", json_type_boolean)))
			return BAD("link: stdin: eof is not a boolean");
		m->eof = json_object_get_boolean(v);
	}
	if (has_key(i, "data")) {
		const char *why = NULL;
		if (!(v = need(o, "data", json_type_string)))
			return BAD("link: stdin: data is not a string");
		size_t n = (size_t)json_object_get_string_len(v);
		m->data = base64_decode(json_object_get_string(v), n, &m->data_len, &why);
		if (!m->data)
			return BAD("link: stdin: data: %s", why ? why : "not base64");
	}
	if (has_key(i, "signo")) {
		v = need(o, "signo", json_type_int);
		int s = v ? json_object_get_int(v) : 0;
		if (s != SIGINT && s != SIGTERM && s != SIGKILL)
			return BAD("link: signal: signo is not SIGINT, SIGTERM or SIGKILL");
		m->signo = s;
	}
	if (has_key(i, "rows")) {
		json_object *r = need(o, "rows", json_type_int),
			    *c = need(o, "cols", json_type_int);
		int64_t rows = r ? json_object_get_int64(r) : 0,
			cols = c ? json_object_get_int64(c) : 0;
		if (rows < 1 || rows > 65535 || cols < 1 || cols > 65535)
			return BAD("link: resize: rows and cols are not from 1 to 65535");
		m->rows = (unsigned)rows;
		m->cols = (unsigned)cols;
	}
#undef BAD
	return 0;
}

int front_link_check(const char *line, size_t len, struct front_link_msg *m, struct ab_error *err)
{
	*m = (struct front_link_msg){0};
	if (len > FRONT_LINK_MAX_REQ)
		return ab_error_plain(err, E2BIG, "link: a line of %zu bytes (at most %u)", len,
				      FRONT_LINK_MAX_REQ);
	if (memchr(line, '\0', len))
		return ab_error_plain(err, EINVAL, "link: a NUL byte in a line");
	json_tokener *tok = json_tokener_new_ex(32);
	if (!tok)
		return ab_error_plain(err, ENOMEM, "link: out of memory");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	json_object *o = json_tokener_parse_ex(tok, line, (int)len);
	bool whole = o && json_tokener_get_parse_end(tok) == len;
	json_tokener_free(tok);
	if (!whole || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return ab_error_plain(err, EINVAL, "link: a line that is not one JSON object");
	}
	json_object *opv = need(o, "op", json_type_string);
	size_t i = 0;
	while (opv && i < sizeof(ops) / sizeof(ops[0]) &&
	       strcmp(ops[i].name, json_object_get_string(opv)))
		i++;
	if (!opv || i == sizeof(ops) / sizeof(ops[0])) {
		json_object_put(o);
		return ab_error_plain(err, EINVAL, "link: no known op");
	}
	json_object_object_foreach(o, key, val)
	{
		(void)val;
		if (strcmp(key, "op") && !has_key(i, key)) {
			json_object_put(o);
			return ab_error_plain(err, EINVAL, "link: %s: unknown key", ops[i].name);
		}
	}
	m->op = ops[i].op;
	m->root = o;
	if (fields(i, o, m, err) < 0) {
		front_link_msg_clear(m);
		return -1;
	}
	return 0;
}

void front_link_msg_clear(struct front_link_msg *m)
{
	json_object_put(m->root);
	free(m->data);
	*m = (struct front_link_msg){0};
}
