/* envd's filesystem service, filesystem.Filesystem (docs/e2b.md "Files"):
 * Stat, ListDir, MakeDir, Move, Remove, WatchDir and the watcher API, each
 * one request on the sandbox's link (docs/protocol.md). Remove is the
 * `delete` file operation and the watches are `watch`; what the file
 * operations do not tell (mode, owner, group, a link's target) comes from
 * find(1) run inside the sandbox as an `exec` with argv, its paths as
 * arguments of a fixed script, never in it: the sandbox's user, view,
 * seccomp and Landlock are the guard, as for every file operation. */
#include "e2b/e2b.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2b/e2b_fs_int.h"
#include "util/base64.h"

/* find's fields of one entry, each ended by a NUL: type (f d l ...), path,
 * size, mode (octal permission bits), permissions (ls -l), uid, gid,
 * mtime (seconds.fraction), a link's target. */
#define FS_FMT	  "%y\\0%p\\0%s\\0%m\\0%M\\0%U\\0%G\\0%T@\\0%l\\0"
#define FS_FIELDS 9
/* Before the entries, the uid and gid of the sandbox's user: the owner
 * E2B calls "user". */
#define FS_IDS "printf '%s\\0%s\\0' \"$(id -u)\" \"$(id -g)\"; "
/* A listing bigger than this is refused (resource_exhausted). */
#define FS_MAX_OUTPUT (64 << 20)

/* after an entry's fields, its metadata (e2b_meta.c): find's status */
#define FS_META(paths) "; r=$?; find " paths " -print0 2>/dev/null | " E2B_META_GET_SH "; exit $r"
static const char stat_sh[] =
	FS_IDS "find \"$1\" -maxdepth 0 -printf \"$2\"" FS_META("\"$1\" -maxdepth 0");
static const char list_sh[] = FS_IDS
	"find -H \"$1\" -maxdepth \"$2\" -printf \"$3\"" FS_META("-H \"$1\" -maxdepth \"$2\"");
static const char mkdir_sh[] =
	"if [ -e \"$1\" ] || [ -L \"$1\" ]; then echo \"path already exists\" >&2; exit 3; fi; "
	"mkdir -p -- \"$1\" || exit 1; " FS_IDS "exec find \"$1\" -maxdepth 0 -printf \"$2\"";
static const char move_sh[] =
	"mv -T -- \"$1\" \"$2\" || exit 1; " FS_IDS
	"find \"$2\" -maxdepth 0 -printf \"$3\"" FS_META("\"$2\" -maxdepth 0");

/* ---- E2B's entries ---- */

static const char *file_type(char t)
{
	switch (t) {
	case 'f':
		return "FILE_TYPE_FILE";
	case 'd':
		return "FILE_TYPE_DIRECTORY";
	case 'l':
		return "FILE_TYPE_SYMLINK";
	default:
		return "FILE_TYPE_UNSPECIFIED";
	}
}

static json_object *path_out(const char *p)
{
	char out[8192];
	if (e2b_path_out(p, out, sizeof(out)) < 0)
		return json_object_new_string(p);
	return json_object_new_string(out);
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s && s[1] ? s + 1 : (s && s != p ? s : p);
}

static json_object *owner_name(const char *id, const char *own)
{
	if (!strcmp(id, own))
		return json_object_new_string("user");
	if (!strcmp(id, "0"))
		return json_object_new_string("root");
	return json_object_new_string(id);
}

/* RFC 3339 in UTC with milliseconds, as protobuf's JSON writes a Timestamp. */
static json_object *timestamp(const char *t)
{
	char *end;
	double v = strtod(t, &end);
	time_t sec = (time_t)v;
	long ms = (long)((v - (double)sec) * 1000.0);
	struct tm tm;
	char buf[64];
	if (end == t || !gmtime_r(&sec, &tm))
		return NULL;
	size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, sizeof(buf) - n, ".%03ldZ", ms < 0 ? 0 : ms > 999 ? 999 : ms);
	return json_object_new_string(buf);
}

/* One entry from find's fields f[0..FS_FIELDS). */
static json_object *entry_of(char **f, const char *uid, const char *gid)
{
	json_object *e = json_object_new_object();
	json_object_object_add(e, "name", json_object_new_string(base_name(f[1])));
	json_object_object_add(e, "type", json_object_new_string(file_type(f[0][0])));
	json_object_object_add(e, "path", path_out(f[1]));
	json_object_object_add(e, "size", json_object_new_int64(strtoll(f[2], NULL, 10)));
	json_object_object_add(e, "mode", json_object_new_int64(strtol(f[3], NULL, 8)));
	json_object_object_add(e, "permissions", json_object_new_string(f[4]));
	json_object_object_add(e, "owner", owner_name(f[5], uid));
	json_object_object_add(e, "group", owner_name(f[6], gid));
	json_object *t = timestamp(f[7]);
	if (t)
		json_object_object_add(e, "modifiedTime", t);
	if (f[0][0] == 'l' && f[8][0]) {
		/* E2B gives the target as an absolute path */
		char abs[8192];
		if (f[8][0] == '/')
			snprintf(abs, sizeof(abs), "%s", f[8]);
		else {
			const char *slash = strrchr(f[1], '/');
			int dl = slash ? (int)(slash - f[1]) : 0;
			snprintf(abs, sizeof(abs), "%.*s/%s", dl, f[1], f[8]);
		}
		json_object_object_add(e, "symlinkTarget", path_out(abs));
	}
	return e;
}

/* Paths in the order of a walk: by component, '/' before any byte. */
static int walk_order(const void *a, const void *b)
{
	json_object *x = *(json_object *const *)a, *y = *(json_object *const *)b, *v;
	const char *p = json_object_object_get_ex(x, "path", &v) ? json_object_get_string(v) : "";
	const char *q = json_object_object_get_ex(y, "path", &v) ? json_object_get_string(v) : "";
	for (; *p && *p == *q; p++, q++)
		;
	int c = *p == '/' ? 1 : (unsigned char)*p, d = *q == '/' ? 1 : (unsigned char)*q;
	return c - d;
}

/* The entries in find's output (out, len): an array, the first entry
 * apart in *first (owned) when first is not NULL. NULL when malformed. */
static json_object *entries_of(char *out, size_t len, json_object **first, char *first_type,
			       size_t *used)
{
	char *fields[2 + FS_FIELDS];
	size_t nf = 0, off = 0;
	json_object *arr = json_object_new_array();
	bool had_first = false;
	while (off < len) {
		char *z = memchr(out + off, 0, len - off);
		if (!z || (nf == 2 && !strcmp(out + off, "X"))) /* the metadata after */
			break;
		fields[nf++] = out + off;
		off = (size_t)(z - out) + 1;
		if (nf == 2 + FS_FIELDS) {
			json_object *e = entry_of(fields + 2, fields[0], fields[1]);
			if (!had_first && first) {
				*first = e;
				*first_type = fields[2][0];
			} else
				json_object_array_add(arr, e);
			had_first = true;
			nf = 2;
		}
	}
	if (!had_first && first) {
		json_object_put(arr);
		return NULL;
	}
	*used = off;
	return arr;
}

/* ---- requests on the link, one per call ---- */

/* A failed helper's code from its stderr (find's, mkdir's, mv's words). */
static const char *code_of_stderr(const char *err, int status)
{
	if (status == 3)
		return E2B_ALREADY_EXISTS;
	if (strstr(err, "No such file"))
		return E2B_NOT_FOUND;
	if (strstr(err, "Not a directory"))
		return E2B_INVALID_ARGUMENT;
	if (strstr(err, "Permission denied") || strstr(err, "Read-only") ||
	    strstr(err, "Operation not permitted"))
		return E2B_PERMISSION_DENIED;
	if (strstr(err, "File exists") || strstr(err, "Directory not empty"))
		return E2B_ALREADY_EXISTS;
	if (strstr(err, "No space") || strstr(err, "quota"))
		return E2B_RESOURCE_EXHAUSTED;
	return E2B_INTERNAL;
}

enum fs_op { FS_STAT, FS_LIST, FS_MKDIR, FS_MOVE, FS_REMOVE };

struct fs_req {
	struct e2b_call *call;
	struct e2b_sbx *sbx;
	long h;
	enum fs_op op;
};

static void req_gone(struct e2b_call *c, void *data)
{
	(void)c;
	struct fs_req *r = data;
	if (r->h > 0)
		e2b_sbx_forget(r->sbx, r->h);
	free(r);
}

static void exec_done(struct fs_req *r, json_object *msg)
{
	struct e2b_call *c = r->call;
	json_object *v;
	const char *type =
		json_object_object_get_ex(msg, "type", &v) ? json_object_get_string(v) : "";
	if (strcmp(type, "result")) {
		const char *code = json_object_object_get_ex(msg, "code", &v)
					   ? json_object_get_string(v)
					   : NULL;
		const char *m = json_object_object_get_ex(msg, "message", &v)
					? json_object_get_string(v)
					: "";
		e2b_call_error(c, e2b_fs_code(code), "%s", m);
		return;
	}
	int status = json_object_object_get_ex(msg, "exit_code", &v) ? json_object_get_int(v) : -1;
	size_t olen = 0, elen = 0;
	const char *why = NULL;
	json_object *so = NULL, *se = NULL;
	json_object_object_get_ex(msg, "stdout", &so);
	json_object_object_get_ex(msg, "stderr", &se);
	char *out = base64_decode(so ? json_object_get_string(so) : "",
				  so ? (size_t)json_object_get_string_len(so) : 0, &olen, &why);
	char *err = base64_decode(se ? json_object_get_string(se) : "",
				  se ? (size_t)json_object_get_string_len(se) : 0, &elen, &why);
	if (json_object_object_get_ex(msg, "truncated", &v) && json_object_get_boolean(v)) {
		e2b_call_error(c, E2B_RESOURCE_EXHAUSTED, "the listing is over %d bytes",
			       FS_MAX_OUTPUT);
		goto out;
	}
	if (!out || !err) {
		e2b_call_error(c, E2B_INTERNAL, "the helper's output was not base64");
		goto out;
	}
	json_object *first = NULL;
	char ftype = 0;
	size_t used = 0;
	json_object *rest = entries_of(out, olen, &first, &ftype, &used);
	if (rest)
		e2b_meta_attach(out + used, olen - used, rest, first);
	if (!rest) {
		/* nothing listed: the helper's error */
		char *nl = strchr(err, '\n');
		if (nl)
			*nl = 0;
		const char *e = strncmp(err, "find: ", 6) ? err : err + 6;
		e2b_call_error(c, code_of_stderr(err, status), "%s",
			       *e ? e : "the path could not be read");
		goto out;
	}
	json_object *reply = json_object_new_object();
	if (r->op == FS_LIST) {
		if (ftype != 'd') {
			json_object_put(first);
			json_object_put(rest);
			json_object_put(reply);
			e2b_call_error(c, E2B_INVALID_ARGUMENT, "path is not a directory");
			goto out;
		}
		json_object_put(first);
		json_object_array_sort(rest, walk_order);
		json_object_object_add(reply, "entries", rest);
	} else {
		json_object_put(rest);
		json_object_object_add(reply, "entry", first);
	}
	e2b_call_reply(c, reply);
out:
	free(out);
	free(err);
}

static void on_reply(void *arg, json_object *msg, bool last)
{
	struct fs_req *r = arg;
	if (!last)
		return; /* an exec's streamed output: none is asked for */
	r->h = 0;
	if (!msg) {
		e2b_call_error(r->call, E2B_UNAVAILABLE, "the sandbox ended");
		return;
	}
	if (r->op == FS_REMOVE) {
		/* envd removes what is not there without a word */
		json_object *v, *code;
		const char *type =
			json_object_object_get_ex(msg, "type", &v) ? json_object_get_string(v) : "";
		if (!strcmp(type, "result") ||
		    (json_object_object_get_ex(msg, "code", &code) &&
		     !strcmp(json_object_get_string(code), "file_not_found")))
			e2b_call_reply(r->call, NULL);
		else
			exec_done(r, msg);
		return;
	}
	exec_done(r, msg);
}

static void send_req(struct e2b_call *c, enum fs_op op, json_object *req)
{
	struct fs_req *r = calloc(1, sizeof(*r));
	if (!r) {
		json_object_put(req);
		e2b_call_error(c, E2B_INTERNAL, "out of memory");
		return;
	}
	r->call = c;
	r->sbx = e2b_call_sbx(c);
	r->op = op;
	e2b_call_set_data(c, r, req_gone);
	r->h = e2b_sbx_request(r->sbx, req, on_reply, r);
	if (r->h < 0) {
		r->h = 0;
		e2b_call_error(c, E2B_UNAVAILABLE, "the sandbox cannot be reached");
	}
}

/* An exec of sh -c script with args (paths already the sandbox's). */
static void run_script(struct e2b_call *c, enum fs_op op, const char *script, const char **args)
{
	json_object *req = json_object_new_object();
	json_object *argv = json_object_new_array();
	json_object_array_add(argv, json_object_new_string("/bin/sh"));
	json_object_array_add(argv, json_object_new_string("-c"));
	json_object_array_add(argv, json_object_new_string(script));
	json_object_array_add(argv, json_object_new_string("e2b"));
	for (; *args; args++)
		json_object_array_add(argv, json_object_new_string(*args));
	json_object_object_add(req, "op", json_object_new_string("exec"));
	json_object_object_add(req, "argv", argv);
	json_object_object_add(req, "encoding", json_object_new_string("base64"));
	json_object_object_add(req, "max_output", json_object_new_int(FS_MAX_OUTPUT));
	send_req(c, op, req);
}

/* ---- the methods ---- */

/* A script of one path, its entry the answer: Stat, MakeDir. */
static void one_path(struct e2b_call *c, enum fs_op op, const char *script)
{
	char p[4200];
	if (e2b_fs_path(c, e2b_call_req(c), "path", p, sizeof(p)))
		run_script(c, op, script, (const char *[]){p, FS_FMT, NULL});
}

static void fs_stat(struct e2b_call *c)
{
	one_path(c, FS_STAT, stat_sh);
}

static void fs_list(struct e2b_call *c)
{
	char p[4200], depth[16];
	json_object *v, *req = e2b_call_req(c);
	if (!e2b_fs_path(c, req, "path", p, sizeof(p)))
		return;
	long d = json_object_object_get_ex(req, "depth", &v) ? json_object_get_int64(v) : 1;
	if (d < 1)
		d = 1; /* envd takes 0 as 1 */
	if (d > 64)
		d = 64;
	snprintf(depth, sizeof(depth), "%ld", d);
	run_script(c, FS_LIST, list_sh, (const char *[]){p, depth, FS_FMT, NULL});
}

static void fs_mkdir(struct e2b_call *c)
{
	one_path(c, FS_MKDIR, mkdir_sh);
}

static void fs_move(struct e2b_call *c)
{
	char s[4200], d[4200];
	if (!e2b_fs_path(c, e2b_call_req(c), "source", s, sizeof(s)) ||
	    !e2b_fs_path(c, e2b_call_req(c), "destination", d, sizeof(d)))
		return;
	run_script(c, FS_MOVE, move_sh, (const char *[]){s, d, FS_FMT, NULL});
}

static void fs_remove(struct e2b_call *c)
{
	char p[4200];
	if (!e2b_fs_path(c, e2b_call_req(c), "path", p, sizeof(p)))
		return;
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("delete"));
	json_object_object_add(req, "path", json_object_new_string(p));
	json_object_object_add(req, "recursive", json_object_new_boolean(true));
	send_req(c, FS_REMOVE, req);
}

const struct e2b_method e2b_fs_methods[] = {
	{"filesystem.Filesystem", "Stat", E2B_UNARY, fs_stat},
	{"filesystem.Filesystem", "ListDir", E2B_UNARY, fs_list},
	{"filesystem.Filesystem", "MakeDir", E2B_UNARY, fs_mkdir},
	{"filesystem.Filesystem", "Move", E2B_UNARY, fs_move},
	{"filesystem.Filesystem", "Remove", E2B_UNARY, fs_remove},
	{"filesystem.Filesystem", "WatchDir", E2B_STREAM, e2b_fs_watch_dir},
	{"filesystem.Filesystem", "CreateWatcher", E2B_UNARY, e2b_fs_create_watcher},
	{"filesystem.Filesystem", "GetWatcherEvents", E2B_UNARY, e2b_fs_get_watcher_events},
	{"filesystem.Filesystem", "RemoveWatcher", E2B_UNARY, e2b_fs_remove_watcher},
	{NULL, NULL, E2B_UNARY, NULL},
};
