/* envd's plain HTTP file routes (docs/e2b.md "Files"): GET /files, a
 * file's bytes, and POST /files, an upload (the body itself as
 * application/octet-stream, or multipart/form-data with one part per
 * file, its path the part's filename). Both move the file in chunks of
 * the `download` and `upload` file operations (docs/protocol.md "Files of
 * any size"), run inside the sandbox with its user and view: the path and
 * hostile-input discipline is theirs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "e2b/e2b_fs_int.h"
#include "util/base64.h"

#define CHUNK (4 << 20)
/* A download is held whole before it is answered: at most this much. */
#define MAX_DOWNLOAD (512L << 20)
#define MAX_PARTS    1024

struct part {
	char path[4200]; /* the sandbox's */
	char gz[4300];	 /* gzip: where the compressed bytes go first, or "" */
	const unsigned char *data;
	size_t len;
	bool meta_set;	    /* its metadata set, or cleared (e2b_meta.c) */
	bool seen, existed; /* its first chunk's answer: it was there before */
};

struct xfer {
	struct e2b_http *h;
	struct e2b_sbx *sbx;
	long req;
	/* GET */
	char path[4200];
	unsigned char *buf;
	size_t len, cap;
	/* POST */
	struct part *parts;
	size_t nparts, cur, off;
	json_object *written;
	json_object *meta; /* X-Metadata-* headers: each file's, or NULL */
};

static void xfer_gone(struct e2b_http *h, void *data)
{
	(void)h;
	struct xfer *x = data;
	if (x->req > 0)
		e2b_sbx_forget(x->sbx, x->req);
	free(x->buf);
	free(x->parts);
	json_object_put(x->written);
	json_object_put(x->meta);
	free(x);
}

static int status_of(const char *code)
{
	static const struct {
		const char *code;
		int status;
	} map[] = {
		{"file_not_found", 404}, {"is_directory", 400},	   {"not_directory", 400},
		{"invalid_path", 400},	 {"invalid_request", 400}, {"permission_denied", 403},
		{"read_only", 403},	 {"no_space", 507},	   {"too_large", 413},
	};
	for (size_t i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(code, map[i].code))
			return map[i].status;
	return 500;
}

static const char *str(json_object *o, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
}

/* The end of a request on the link: false (and the answer sent) unless msg
 * is a result. */
static bool result_or_answer(struct xfer *x, json_object *msg, bool last)
{
	if (!last)
		return false;
	x->req = 0;
	if (!msg) {
		e2b_http_error(x->h, 502, "the sandbox ended");
		return false;
	}
	const char *type = str(msg, "type");
	if (type && !strcmp(type, "result"))
		return true;
	const char *m = str(msg, "message");
	e2b_http_error(x->h, status_of(str(msg, "code")), "%s",
		       m ? m : "the file operation failed");
	return false;
}

static bool xsend(struct xfer *x, json_object *req, e2b_sbx_fn fn)
{
	x->req = e2b_sbx_request(x->sbx, req, fn, x);
	if (x->req > 0)
		return true;
	x->req = 0;
	e2b_http_error(x->h, 502, "the sandbox cannot be reached");
	return false;
}

/* ---- GET /files ---- */

static void download_next(struct xfer *x);

static void on_chunk(void *arg, json_object *msg, bool last)
{
	struct xfer *x = arg;
	if (!result_or_answer(x, msg, last))
		return;
	json_object *d, *v;
	const char *why = NULL;
	if (!json_object_object_get_ex(msg, "data", &d)) {
		e2b_http_error(x->h, 500, "download: no data");
		return;
	}
	size_t n = (size_t)json_object_get_string_len(d);
	if (x->len + BASE64_DECODED_MAX(n) > (size_t)MAX_DOWNLOAD) {
		e2b_http_error(x->h, 413, "the file is over %ld bytes, more than this server holds",
			       MAX_DOWNLOAD);
		return;
	}
	if (x->len + BASE64_DECODED_MAX(n) > x->cap) {
		size_t cap = x->cap ? x->cap : CHUNK;
		while (cap < x->len + BASE64_DECODED_MAX(n))
			cap *= 2;
		unsigned char *p = realloc(x->buf, cap);
		if (!p) {
			e2b_http_error(x->h, 500, "out of memory");
			return;
		}
		x->buf = p;
		x->cap = cap;
	}
	long got = base64_decode_into(x->buf + x->len, json_object_get_string(d), n, &why);
	if (got < 0) {
		e2b_http_error(x->h, 500, "download: %s", why);
		return;
	}
	x->len += (size_t)got;
	if (json_object_object_get_ex(msg, "eof", &v) && json_object_get_boolean(v)) {
		e2b_http_reply(x->h, 200, "application/octet-stream", x->buf, x->len);
		return;
	}
	if (got == 0) {
		e2b_http_error(x->h, 500, "download: an empty chunk before the end");
		return;
	}
	download_next(x);
}

static void download_next(struct xfer *x)
{
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("download"));
	json_object_object_add(req, "path", json_object_new_string(x->path));
	json_object_object_add(req, "offset", json_object_new_int64((int64_t)x->len));
	json_object_object_add(req, "length", json_object_new_int(CHUNK));
	xsend(x, req, on_chunk);
}

static struct xfer *xfer_new(struct e2b_http *h)
{
	struct xfer *x = calloc(1, sizeof(*x));
	if (!x) {
		e2b_http_error(h, 500, "out of memory");
		return NULL;
	}
	x->h = h;
	x->sbx = e2b_http_sbx(h);
	e2b_http_set_data(h, x, xfer_gone);
	return x;
}

static bool path_in(struct e2b_http *h, const char *p, char *out, size_t size)
{
	if (!p || !*p) {
		e2b_http_error(h, 400, "path is required");
		return false;
	}
	if (e2b_path_in(p, out, size) < 0 || out[0] != '/') {
		e2b_http_error(h, 400, "invalid path");
		return false;
	}
	return true;
}

static void files_get(struct e2b_http *h)
{
	struct xfer *x = xfer_new(h);
	if (!x || !path_in(h, e2b_http_query(h, "path"), x->path, sizeof(x->path)))
		return;
	download_next(x);
}

/* ---- POST /files ---- */

static void upload_next(struct xfer *x);
static void part_done(struct xfer *x);

/* gunzip's answer: the file is there, or the body was no gzip. */
static void on_gunzip(void *arg, json_object *msg, bool last)
{
	struct xfer *x = arg;
	if (!result_or_answer(x, msg, last))
		return;
	json_object *v;
	if (!json_object_object_get_ex(msg, "exit_code", &v) || json_object_get_int(v) != 0) {
		const char *e = str(msg, "stderr");
		e2b_http_error(x->h, 400, "the gzip body could not be decompressed: %s",
			       e && *e ? e : "gzip failed");
		return;
	}
	part_done(x);
}

static const char gunzip_sh[] = "gzip -dc < \"$1\" > \"$2\"; r=$?; rm -f -- \"$1\"; exit $r";

static void on_upload(void *arg, json_object *msg, bool last)
{
	struct xfer *x = arg;
	if (!result_or_answer(x, msg, last))
		return;
	struct part *p = &x->parts[x->cur];
	json_object *v;
	if (!p->seen && json_object_object_get_ex(msg, "created", &v)) {
		p->seen = true;
		p->existed = !json_object_get_boolean(v);
	}
	if (x->off < p->len) {
		upload_next(x);
		return;
	}
	if (p->gz[0]) { /* the compressed bytes are in: gunzip them into place, inside */
		json_object *req = json_object_new_object(), *argv = json_object_new_array();
		const char *args[] = {"/bin/sh", "-c", gunzip_sh, "e2b", p->gz, p->path};
		for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++)
			json_object_array_add(argv, json_object_new_string(args[i]));
		json_object_object_add(req, "op", json_object_new_string("exec"));
		json_object_object_add(req, "argv", argv);
		xsend(x, req, on_gunzip);
		return;
	}
	part_done(x);
}

/* python3's answer: the file's metadata is set; or, none given, what an
 * overwritten file had is gone (where there is python3: else it had none
 * a client could have set). */
static void on_meta(void *arg, json_object *msg, bool last)
{
	struct xfer *x = arg;
	if (!result_or_answer(x, msg, last))
		return;
	json_object *v;
	if (x->meta &&
	    (!json_object_object_get_ex(msg, "exit_code", &v) || json_object_get_int(v) != 0)) {
		e2b_http_error(x->h, 500,
			       "the metadata could not be set (python3 sets extended "
			       "attributes in the sandbox; exit %d)",
			       v ? json_object_get_int(v) : -1);
		return;
	}
	part_done(x);
}

static void part_done(struct xfer *x)
{
	struct part *p = &x->parts[x->cur];
	/* an overwrite keeps the file (upload writes in place), so what
	 * metadata it had goes, as in envd; gunzip writes in place too */
	if ((x->meta || p->existed || p->gz[0]) && !p->meta_set) {
		p->meta_set = true;
		xsend(x, e2b_meta_set_req(p->path, x->meta), on_meta);
		return;
	}
	char out[8192];
	const char *s = strrchr(p->path, '/');
	json_object *e = json_object_new_object();
	json_object_object_add(e, "name", json_object_new_string(s ? s + 1 : p->path));
	json_object_object_add(e, "type", json_object_new_string("file"));
	json_object_object_add(e, "path",
			       json_object_new_string(e2b_path_out(p->path, out, sizeof(out)) < 0
							      ? p->path
							      : out));
	if (x->meta)
		json_object_object_add(e, "metadata", json_object_get(x->meta));
	json_object_array_add(x->written, e);
	x->cur++;
	x->off = 0;
	if (x->cur < x->nparts) {
		upload_next(x);
		return;
	}
	const char *body = json_object_to_json_string_ext(x->written, JSON_C_TO_STRING_PLAIN);
	e2b_http_reply(x->h, 200, NULL, body, strlen(body));
}

static void upload_next(struct xfer *x)
{
	struct part *p = &x->parts[x->cur];
	size_t n = p->len - x->off < CHUNK ? p->len - x->off : CHUNK;
	char *b64 = base64_encode(p->data + x->off, n);
	if (!b64) {
		e2b_http_error(x->h, 500, "out of memory");
		return;
	}
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("upload"));
	json_object_object_add(req, "path", json_object_new_string(p->gz[0] ? p->gz : p->path));
	json_object_object_add(req, "offset", json_object_new_int64((int64_t)x->off));
	json_object_object_add(req, "overwrite", json_object_new_boolean(true));
	json_object_object_add(req, "data", json_object_new_string(b64));
	free(b64);
	x->off += n;
	xsend(x, req, on_upload);
}

/* A parameter of a header's value (boundary=..., filename="..."), into
 * out: quoted or not; %22, %0A and %0D undone as FormData writes them. */
static bool header_param(const char *v, size_t vlen, const char *name, char *out, size_t size)
{
	size_t nl = strlen(name);
	for (size_t i = 0; i + nl + 1 <= vlen; i++) {
		if ((i && v[i - 1] != ';' && v[i - 1] != ' ') || strncasecmp(v + i, name, nl) ||
		    v[i + nl] != '=')
			continue;
		const char *s = v + i + nl + 1, *end = v + vlen;
		bool q = s < end && *s == '"';
		s += q;
		size_t o = 0;
		for (; s < end && (q ? *s != '"' : *s != ';' && *s != ' '); s++) {
			char c = *s;
			if (q && c == '\\' && s + 1 < end)
				c = *++s;
			else if (c == '%' && end - s >= 3 &&
				 (!strncasecmp(s, "%22", 3) || !strncasecmp(s, "%0A", 3) ||
				  !strncasecmp(s, "%0D", 3))) {
				c = s[2] == '2' ? '"' : (s[2] == 'A' || s[2] == 'a') ? '\n' : '\r';
				s += 2;
			}
			if (o + 1 >= size) {
				out[0] = 0;
				return false;
			}
			out[o++] = c;
		}
		out[o] = 0;
		return true;
	}
	return false;
}

/* The parts of a multipart/form-data body into x->parts; false with the
 * answer sent when malformed. qpath: the query's path, which names the
 * file when given (one part). */
static bool parse_multipart(struct xfer *x, const char *ctype, const unsigned char *body,
			    size_t len, const char *qpath)
{
	char boundary[256], delim[262];
	if (!header_param(ctype, strlen(ctype), "boundary", boundary, sizeof(boundary)) ||
	    !boundary[0]) {
		e2b_http_error(x->h, 400, "multipart/form-data without a boundary");
		return false;
	}
	int dl = snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
	x->parts = calloc(MAX_PARTS, sizeof(*x->parts));
	if (!x->parts) {
		e2b_http_error(x->h, 500, "out of memory");
		return false;
	}
	/* the first delimiter may start the body without its CRLF */
	const unsigned char *p = memmem(body, len, delim + 2, (size_t)dl - 2);
	const unsigned char *end = body + len;
	while (p) {
		p += dl - 2;
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			return true; /* the close delimiter */
		const unsigned char *hdr = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
		if (!hdr)
			break;
		const unsigned char *data = hdr + 4;
		const unsigned char *next = memmem(data, (size_t)(end - data), delim, (size_t)dl);
		if (!next)
			break;
		/* the part's Content-Disposition filename */
		char name[4200] = "";
		for (const unsigned char *l = p; l < hdr;) {
			const unsigned char *e = memmem(l, (size_t)(hdr - l), "\r\n", 2);
			if (!e)
				e = hdr;
			if ((size_t)(e - l) > 20 &&
			    !strncasecmp((const char *)l, "content-disposition:", 20))
				header_param((const char *)l, (size_t)(e - l), "filename", name,
					     sizeof(name));
			l = e + 2;
		}
		if (x->nparts == MAX_PARTS) {
			e2b_http_error(x->h, 400, "more than %d files in one upload", MAX_PARTS);
			return false;
		}
		struct part *pt = &x->parts[x->nparts++];
		const char *path = qpath && *qpath ? qpath : name;
		if (!path_in(x->h, path, pt->path, sizeof(pt->path)))
			return false;
		pt->data = data;
		pt->len = (size_t)(next - data);
		p = next + 2;
	}
	e2b_http_error(x->h, 400, "malformed multipart/form-data body");
	return false;
}

static void files_post(struct e2b_http *h)
{
	struct xfer *x = xfer_new(h);
	if (!x)
		return;
	size_t len = 0;
	const unsigned char *body = e2b_http_body(h, &len);
	const char *ctype = e2b_http_header(h, "Content-Type");
	const char *cenc = e2b_http_header(h, "Content-Encoding");
	const char *qpath = e2b_http_query(h, "path");
	bool gz = cenc && !strcasecmp(cenc, "gzip");
	if (cenc && *cenc && strcasecmp(cenc, "identity") && !gz) {
		e2b_http_error(h, 415, "Content-Encoding %s is not supported (identity, gzip)",
			       cenc);
		return;
	}
	if (e2b_meta_headers(h, &x->meta) < 0)
		return;
	x->written = json_object_new_array();
	if (ctype && !strncasecmp(ctype, "multipart/form-data", 19)) {
		if (gz) {
			e2b_http_error(
				h, 415,
				"a gzip multipart body is not supported: gzip an octet-stream");
			return;
		}
		if (!parse_multipart(x, ctype, body, len, qpath))
			return;
		if (!x->nparts) {
			e2b_http_error(h, 400, "no file in the upload");
			return;
		}
	} else {
		x->parts = calloc(1, sizeof(*x->parts));
		if (!x->parts) {
			e2b_http_error(h, 500, "out of memory");
			return;
		}
		if (!path_in(h, qpath, x->parts[0].path, sizeof(x->parts[0].path)))
			return;
		x->parts[0].data = body;
		x->parts[0].len = len;
		x->nparts = 1;
		if (gz) { /* beside the file, a name no one else picks */
			unsigned long long r = 0;
			if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
				e2b_http_error(h, 500, "no random bytes for a name");
				return;
			}
			const char *slash = strrchr(x->parts[0].path, '/');
			snprintf(x->parts[0].gz, sizeof(x->parts[0].gz),
				 "%.*s/.agentbox-gz-%016llx", (int)(slash - x->parts[0].path),
				 x->parts[0].path, r);
		}
	}
	upload_next(x);
}

const struct e2b_route e2b_fs_routes[] = {
	{"GET", "/files", files_get},
	{"POST", "/files", files_post},
	{NULL, NULL, NULL},
};
