/* envd's file metadata (docs/e2b.md "Files"): what an upload's
 * X-Metadata-KEY headers give is kept as the file's `user.e2b.KEY`
 * extended attributes, as envd keeps it, and Stat, ListDir and Move give
 * those of their entries back. agentbox's file operations read and write
 * no extended attributes, so both are python3 run inside the sandbox (an
 * `exec` of a fixed script, the paths, keys and values its arguments,
 * never in it): the sandbox's user, view, seccomp and Landlock are the
 * guard. What it prints is bounded and parsed here as data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "e2b/e2b_fs_int.h"
#include "e2b/e2b_int.h"

#define META_PREFIX "X-Metadata-"
#define META_MAX    64 /* keys on one file, given or read */

/* argv: the path, then key and value pairs: what it had goes first. */
static const char set_py[] = "import os,sys\n"
			     "p=sys.argv[1]\n"
			     "for k in os.listxattr(p,follow_symlinks=False):\n"
			     " if k.startswith('user.e2b.'):"
			     " os.removexattr(p,k,follow_symlinks=False)\n"
			     "for k,v in zip(sys.argv[2::2],sys.argv[3::2]):\n"
			     " os.setxattr(p,'user.e2b.'+k,v.encode(),follow_symlinks=False)\n";

/* A key as an HTTP header's name may be (the SDK's METADATA_KEY_REGEX),
 * a value printable ASCII. */
static bool key_ok(const char *k)
{
	if (!*k)
		return false;
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
		      (*k >= '0' && *k <= '9') || strchr("!#$%&'*+-.^_`|~", *k)))
			return false;
	return true;
}

static bool value_ok(const char *v)
{
	for (; *v; v++)
		if (*v < 0x20 || *v > 0x7e)
			return false;
	return true;
}

int e2b_meta_headers(struct e2b_http *h, json_object **out)
{
	*out = NULL;
	size_t pl = strlen(META_PREFIX), n = 0;
	for (size_t i = 0; i < h->n_hdrs; i++) {
		const char *name = h->hdrs[i].name, *v = h->hdrs[i].value;
		if (strncasecmp(name, META_PREFIX, pl))
			continue;
		if (!key_ok(name + pl) || !value_ok(v) || ++n > META_MAX) {
			json_object_put(*out);
			*out = NULL;
			e2b_http_error(h, 400, "invalid metadata %s (at most %d, printable)", name,
				       META_MAX);
			return -1;
		}
		if (!*out)
			*out = json_object_new_object();
		json_object_object_add(*out, name + pl, json_object_new_string(v));
	}
	return 0;
}

json_object *e2b_meta_set_req(const char *path, json_object *meta)
{
	/* none to set, only what was there to clear: not without python3 */
	const char *run = meta ? "exec python3 -c \"$0\" \"$@\""
			       : "command -v python3 >/dev/null 2>&1 || exit 0; "
				 "exec python3 -c \"$0\" \"$@\"";
	json_object *req = json_object_new_object(), *argv = json_object_new_array();
	const char *head[] = {"/bin/sh", "-c", run, set_py, path};
	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		json_object_array_add(argv, json_object_new_string(head[i]));
	if (meta) {
		json_object_object_foreach(meta, k, v)
		{
			json_object_array_add(argv, json_object_new_string(k));
			json_object_array_add(argv, json_object_get(v));
		}
	}
	json_object_object_add(req, "op", json_object_new_string("exec"));
	json_object_object_add(req, "argv", argv);
	return req;
}

/* The entry of entries (or first) whose path is p's, as E2B names it. */
static json_object *entry_at(json_object *entries, json_object *first, const char *p)
{
	char out[8192];
	if (e2b_path_out(p, out, sizeof(out)) < 0)
		return NULL;
	json_object *v;
	if (first && json_object_object_get_ex(first, "path", &v) &&
	    !strcmp(json_object_get_string(v), out))
		return first;
	size_t n = entries ? json_object_array_length(entries) : 0;
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(entries, i);
		if (json_object_object_get_ex(e, "path", &v) &&
		    !strcmp(json_object_get_string(v), out))
			return e;
	}
	return NULL;
}

void e2b_meta_attach(const char *out, size_t len, json_object *entries, json_object *first)
{
	size_t off = 0;
	while (off < len) { /* "X", path, key, value, ..., "" */
		const char *f[2 + 2 * META_MAX + 1];
		size_t nf = 0;
		while (off < len && nf < sizeof(f) / sizeof(f[0])) {
			const char *z = memchr(out + off, 0, len - off);
			if (!z)
				return;
			f[nf++] = out + off;
			off = (size_t)(z - out) + 1;
			if (nf > 2 && nf % 2 == 1 && !*f[nf - 1])
				break;
		}
		if (nf < 3 || strcmp(f[0], "X") || *f[nf - 1] || nf % 2 == 0)
			return; /* not the script's: nothing more is taken */
		json_object *e = entry_at(entries, first, f[1]);
		if (!e || nf == 3)
			continue;
		json_object *m = json_object_new_object();
		for (size_t i = 2; i + 1 < nf; i += 2)
			json_object_object_add(m, f[i], json_object_new_string(f[i + 1]));
		json_object_object_add(e, "metadata", m);
	}
}
