/* sandboxd's process.proto on the wire (rt_pb.h). A message is a run of
 * fields, each a varint key (field number << 3 | wire type) and a value:
 * a varint (0), 8 bytes (1), a length and that many bytes (2), 4 bytes (5).
 * Every length is checked against what is left before it is used. */
#include "grpc/rt_pb.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const pb_method_names[PB_METHODS] = {
	[PB_START] = "Start",
	[PB_EXECUTE] = "Execute",
	[PB_WRITE_STDIN] = "WriteStdin",
	[PB_SEND_SIGNAL] = "SendSignal",
	[PB_RESIZE_TTY] = "ResizeTTY",
	[PB_WATCH_DIR] = "WatchDir",
};

#define PROCESS_SVC "/process.v1.ProcessService/"
const char *const pb_method_paths[PB_METHODS] = {
	[PB_START] = PROCESS_SVC "Start",
	[PB_EXECUTE] = PROCESS_SVC "Execute",
	[PB_WRITE_STDIN] = PROCESS_SVC "WriteStdin",
	[PB_SEND_SIGNAL] = PROCESS_SVC "SendSignal",
	[PB_RESIZE_TTY] = PROCESS_SVC "ResizeTTY",
	[PB_WATCH_DIR] = "/watcher.v1.FileWatcherService/WatchDir",
};

struct rd {
	const uint8_t *p, *end;
};

static int varint(struct rd *r, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned i = 0; i < 10; i++) {
		if (r->p >= r->end)
			return -EINVAL;
		uint8_t c = *r->p++;
		x |= (uint64_t)(c & 0x7f) << (7 * i);
		if (!(c & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -EINVAL; /* more than 10 bytes */
}

/* A field: its number, wire type and value (a varint's in v, a
 * length-delimited one's bytes in d/n). */
struct pbf {
	uint32_t num;
	unsigned wt;
	uint64_t v;
	const uint8_t *d;
	size_t n;
};

/* The next field into *f (fixed-size values skipped). */
static int field(struct rd *r, struct pbf *f)
{
	uint64_t key;
	*f = (struct pbf){0};
	if (varint(r, &key) < 0 || key >> 3 == 0 || key >> 3 > 0x1fffffff)
		return -EINVAL;
	f->num = (uint32_t)(key >> 3);
	f->wt = key & 7;
	size_t left = (size_t)(r->end - r->p);
	switch (f->wt) {
	case 0:
		return varint(r, &f->v);
	case 1:
	case 5: {
		size_t n = f->wt == 1 ? 8 : 4;
		if (left < n)
			return -EINVAL;
		r->p += n;
		return 0;
	}
	case 2: /* the length checked against what is left after it */
		if (varint(r, &f->v) < 0 || f->v > (size_t)(r->end - r->p))
			return -EINVAL;
		f->d = r->p;
		f->n = (size_t)f->v;
		r->p += f->n;
		return 0;
	default: /* groups (3, 4) and 6, 7: not in proto3 */
		return -EINVAL;
	}
}

static char *string_of(const uint8_t *d, size_t n)
{
	if (memchr(d, 0, n)) /* no argument, name or path can hold one */
		return NULL;
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, d, n);
		s[n] = 0;
	}
	return s;
}

static int push(char ***v, size_t *n, size_t max, char *s)
{
	if (*n >= max) {
		free(s);
		return -E2BIG;
	}
	char **nv = realloc(*v, (*n + 2) * sizeof(char *));
	if (!nv) {
		free(s);
		return -ENOMEM;
	}
	nv[(*n)++] = s;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}

/* One env_vars entry: a message of key (1) and value (2). */
static int env_entry(struct pb_req *q, const uint8_t *d, size_t dn, const char **why)
{
	struct rd r = {d, d + dn};
	const uint8_t *k = (const uint8_t *)"", *val = (const uint8_t *)"";
	size_t kn = 0, vn = 0;
	struct pbf f;
	while (r.p < r.end) {
		if (field(&r, &f) < 0)
			return *why = "a malformed env_vars entry", -EINVAL;
		if (f.wt == 2 && f.num == 1)
			k = f.d, kn = f.n;
		else if (f.wt == 2 && f.num == 2)
			val = f.d, vn = f.n;
	}
	if (kn == 0 || memchr(k, '=', kn) || memchr(k, 0, kn) || memchr(val, 0, vn))
		return *why = "an env_vars name is empty or holds '=' or a NUL byte", -EINVAL;
	char *s = malloc(kn + vn + 2);
	if (!s)
		return -ENOMEM;
	memcpy(s, k, kn);
	s[kn] = '=';
	memcpy(s + kn + 1, val, vn);
	s[kn + 1 + vn] = 0;
	int rc = push(&q->env, &q->n_env, PB_MAX_ENV, s);
	if (rc == -E2BIG)
		*why = "too many env_vars";
	return rc;
}

static int config(struct pb_req *q, const uint8_t *d, size_t dn, const char **why)
{
	struct rd r = {d, d + dn};
	struct pbf f;
	while (r.p < r.end) {
		if (field(&r, &f) < 0)
			return *why = "a malformed ProcessConfig", -EINVAL;
		if (f.wt != 2 || f.num < 1 || f.num > 3)
			continue;
		if (f.num == 2) {
			int rc = env_entry(q, f.d, f.n, why);
			if (rc < 0)
				return rc;
			continue;
		}
		char *s = string_of(f.d, f.n);
		if (!s && memchr(f.d, 0, f.n))
			return *why = f.num == 1 ? "a command argument holds a NUL byte"
						 : "cwd holds a NUL byte",
			       -EINVAL;
		if (!s)
			return -ENOMEM;
		if (f.num == 3) {
			free(q->cwd);
			q->cwd = s;
			continue;
		}
		int rc = push(&q->argv, &q->argc, PB_MAX_ARGS, s);
		if (rc == -E2BIG)
			*why = "too many command arguments";
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int pty(struct pb_req *q, const uint8_t *d, size_t dn, const char **why)
{
	struct rd r = {d, d + dn};
	q->pty = true;
	struct pbf f;
	while (r.p < r.end) {
		if (field(&r, &f) < 0)
			return *why = "a malformed PTY", -EINVAL;
		if (f.wt == 0 && f.num == 1)
			q->cols = (uint32_t)f.v;
		else if (f.wt == 0 && f.num == 2)
			q->rows = (uint32_t)f.v;
	}
	return 0;
}

/* One field of method's request. */
static int request_field(enum pb_method m, struct pb_req *q, const struct pbf *f, const char **why)
{
	uint32_t num = f->num;
	unsigned wt = f->wt;
	bool cfg = m == PB_START || m == PB_EXECUTE;
	if (m == PB_WATCH_DIR) { /* path (1), recursive (2) */
		if (num == 1 && wt == 2) {
			char *s = string_of(f->d, f->n);
			if (!s)
				return memchr(f->d, 0, f->n)
					       ? (*why = "path holds a NUL byte", -EINVAL)
					       : -ENOMEM;
			free(q->path);
			q->path = s;
		} else if (num == 2 && wt == 0) {
			q->recursive = f->v != 0;
		}
		return 0;
	}
	if (cfg && num == 1 && wt == 2)
		return config(q, f->d, f->n, why);
	if (m == PB_START && num == 2 && wt == 2)
		return pty(q, f->d, f->n, why);
	if (cfg)
		return 0;
	if (num == 1 && wt == 0) {
		q->process_id = (int32_t)(uint32_t)f->v;
	} else if (m == PB_WRITE_STDIN && num == 2 && wt == 2) {
		q->input = f->d ? f->d : (const uint8_t *)"";
		q->input_len = f->n;
		q->eof = false;
	} else if (m == PB_WRITE_STDIN && num == 3 && wt == 2) {
		q->eof = true;
		q->input = NULL;
		q->input_len = 0;
	} else if (m == PB_SEND_SIGNAL && num == 2 && wt == 0) {
		q->signal = (int32_t)(uint32_t)f->v;
	} else if (m == PB_RESIZE_TTY && (num == 2 || num == 3) && wt == 0) {
		*(num == 2 ? &q->cols : &q->rows) = (uint32_t)f->v;
	}
	return 0;
}

int pb_decode(enum pb_method m, const uint8_t *b, size_t len, struct pb_req *q, const char **why)
{
	*q = (struct pb_req){0};
	*why = "out of memory";
	struct rd r = {b, b + len};
	struct pbf f;
	int rc = 0;
	while (rc == 0 && r.p < r.end) {
		if (field(&r, &f) < 0) {
			*why = "the request is not a valid protobuf message";
			rc = -EINVAL;
		} else {
			rc = request_field(m, q, &f, why);
		}
	}
	if (rc == 0 && m == PB_WATCH_DIR && !q->path && !(q->path = calloc(1, 1)))
		rc = -ENOMEM;
	if (rc < 0)
		pb_req_free(q);
	return rc;
}

void pb_req_free(struct pb_req *q)
{
	for (size_t i = 0; i < q->argc; i++)
		free(q->argv[i]);
	for (size_t i = 0; i < q->n_env; i++)
		free(q->env[i]);
	free(q->argv);
	free(q->env);
	free(q->cwd);
	free(q->path);
	*q = (struct pb_req){0};
}

/* ---- encoding ---- */

struct wr {
	uint8_t *p, *end;
	bool over;
};

static void put_varint(struct wr *w, uint64_t v)
{
	do {
		if (w->p >= w->end) {
			w->over = true;
			return;
		}
		*w->p++ = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
}

static void put_bytes(struct wr *w, uint32_t num, const void *d, size_t n)
{
	put_varint(w, (uint64_t)num << 3 | 2);
	put_varint(w, n);
	if (w->over || (size_t)(w->end - w->p) < n) {
		w->over = true;
		return;
	}
	if (n)
		memcpy(w->p, d, n);
	w->p += n;
}

/* an int32 as protobuf sends it: a negative one sign-extended to 64 bits */
static void put_int32(struct wr *w, uint32_t num, int32_t v)
{
	put_varint(w, (uint64_t)num << 3);
	put_varint(w, (uint64_t)(int64_t)v);
}

static size_t done(struct wr *w, uint8_t *out)
{
	return w->over ? PB_NO_ROOM : (size_t)(w->p - out);
}

/* StartResponse with a one-int32 event message (InitEvent, ExitEvent) */
static size_t start_event(uint8_t *out, size_t outsz, uint32_t num, int32_t v)
{
	uint8_t inner[16];
	struct wr iw = {inner, inner + sizeof(inner), false};
	if (v)
		put_int32(&iw, 1, v);
	struct wr w = {out, out + outsz, false};
	put_bytes(&w, num, inner, (size_t)(iw.p - inner));
	return done(&w, out);
}

size_t pb_start_init(uint8_t *out, size_t outsz, int32_t process_id)
{
	return start_event(out, outsz, 1, process_id);
}

size_t pb_start_exit(uint8_t *out, size_t outsz, int32_t exit_code)
{
	return start_event(out, outsz, 4, exit_code);
}

size_t pb_start_output(uint8_t *out, size_t outsz, int stream, const void *data, size_t n)
{
	struct wr w = {out, out + outsz, false};
	put_bytes(&w, stream == 2 ? 3 : 2, data, n);
	return done(&w, out);
}

size_t pb_execute_response(uint8_t *out, size_t outsz, int32_t exit_code, const void *o, size_t on,
			   const void *e, size_t en)
{
	struct wr w = {out, out + outsz, false};
	if (exit_code)
		put_int32(&w, 1, exit_code);
	if (on)
		put_bytes(&w, 2, o, on);
	if (en)
		put_bytes(&w, 3, e, en);
	return done(&w, out);
}

static void put_string(struct wr *w, uint32_t num, const char *s)
{
	if (s && *s)
		put_bytes(w, num, s, strlen(s));
}

size_t pb_file_event(uint8_t *out, size_t outsz, enum pb_file_event type, const char *path,
		     const char *old_path, const char *error)
{
	struct wr w = {out, out + outsz, false};
	put_varint(&w, 1 << 3);
	put_varint(&w, (uint64_t)type);
	put_string(&w, 2, path);
	put_string(&w, 3, old_path);
	put_string(&w, 4, error);
	return done(&w, out);
}
