/* Sandbox profiles (docs/profiles.md): a JSON object whose keys are the
 * long options of agentbox run and serve. Each key/value becomes the same
 * ab_option_apply() call the command line makes, so a value is checked by
 * the same code and fails with the same words, prefixed with the file and
 * the key. Applied before the command line, which therefore overrides it. */
#include "cli/profile.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "cli/options.h"
#include "seccomp/policy_builtin.h"
#include "seccomp/seccomp_profile.h"
#include "util/jsonw.h"
#include "util/util.h"

/* Options a profile may not set, and why. */
static const struct {
	const char *key;
	const char *why;
} refused[] = {
	{"help", "is not a setting"},
	{"profile", "cannot be set in a profile: profiles do not include each other"},
	{"report", "belongs on the command line: it says how this call's result is read, "
		   "not what the sandbox is"},
	{"capture", "belongs on the command line: it says how this call's result is read, "
		    "not what the sandbox is"},
	{"merge-output", "belongs on the command line: it says how this call's result is "
			 "read, not what the sandbox is"},
	{"output-encoding", "belongs on the command line: it says how this call's result is "
			    "read, not what the sandbox is"},
};

/* Keys whose value is (or, for binds, starts with) a host path. */
static const char *const host_path_keys[] = {"workspace", "skills",    "rootfs",
					     "image",	  "ro-bind",   "bind",
					     "seccomp",	  "audit-log", "keep-changes"};

struct loader {
	struct ab_config *cfg;
	const char *source;
	char *base; /* directory relative paths are resolved against, or NULL */
	struct ab_error *err;
};

static int fail(struct loader *l, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct loader *l, int code, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ab_error_plain(l->err, code, "profile %s: %s", l->source, msg);
}

static const char *type_name(json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_null:
		return "null";
	case json_type_boolean:
		return "a boolean";
	case json_type_int:
	case json_type_double:
		return "a number";
	case json_type_string:
		return "a string";
	case json_type_array:
		return "an array";
	case json_type_object:
		return "an object";
	}
	return "something else";
}

static bool is_host_path_key(const char *key)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(host_path_keys); i++)
		if (strcmp(host_path_keys[i], key) == 0)
			return true;
	return false;
}

/* A relative host path in a profile is relative to the profile's own
 * directory, as in docker-compose files: the profile then works from any
 * current directory. *out is NULL when the value stays as it is. */
static int resolve_path(struct loader *l, const char *label, const char *key, const char *value,
			char **out)
{
	*out = NULL;
	if (!is_host_path_key(key))
		return 0;
	if (strcmp(key, "seccomp") == 0 &&
	    (strcmp(value, "default") == 0 || strcmp(value, "strict") == 0 ||
	     strcmp(value, "permissive") == 0 || strcmp(value, "none") == 0))
		return 0;
	if (value[0] == '~')
		return fail(l, EINVAL, "%s: '%s': '~' is not expanded in a profile; write the path",
			    label, value);
	/* image: oci:DIR[:TAG], DIR the host path */
	const char *prefix = "";
	if (strcmp(key, "image") == 0) {
		if (strncmp(value, "oci:", 4) != 0)
			return 0; /* the option's error to give */
		prefix = "oci:";
		value += 4;
	}
	if (!l->base || !value[0] || value[0] == '/')
		return 0;
	/* SRC[:DST], split at the last ':' as the option is: only SRC is a
	 * host path, and an empty one is the option's error to give */
	if ((strcmp(key, "ro-bind") == 0 || strcmp(key, "bind") == 0) &&
	    strrchr(value, ':') == value)
		return 0;
	if (asprintf(out, "%s%s/%s", prefix, l->base, value) < 0) {
		*out = NULL;
		return ab_error_set(l->err, ENOMEM, "profile %s", l->source);
	}
	return 0;
}

/* The option's own error, with "--key" replaced by the file and the key. */
static int option_failed(struct loader *l, const char *label, const char *key,
			 const struct ab_error *e)
{
	char opt[80];
	snprintf(opt, sizeof(opt), "--%s", key);
	size_t n = strlen(opt);
	const char *rest = e->msg;
	int code = e->code ? e->code : EINVAL;
	if (strncmp(rest, opt, n) == 0 && (rest[n] == ':' || rest[n] == ' '))
		return fail(l, code, "%s%s", label, rest + n);
	return fail(l, code, "%s: %s", label, rest);
}

static int apply_string(struct loader *l, const char *label, const char *key, const char *value)
{
	cleanup_free char *resolved = NULL;
	int r = resolve_path(l, label, key, value, &resolved);
	if (r < 0)
		return r;
	struct ab_error e = {0};
	if (ab_option_apply(l->cfg, key, resolved ? resolved : value, &e) < 0)
		return option_failed(l, label, key, &e);
	return 0;
}

static int apply_key(struct loader *l, const char *key, json_object *v)
{
	char label[80];
	snprintf(label, sizeof(label), "\"%s\"", key);
	if (strcmp(key, "comment") == 0) {
		if (!json_object_is_type(v, json_type_string))
			return fail(l, EINVAL, "%s: expected a string, got %s", label,
				    type_name(v));
		return 0;
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(refused); i++)
		if (strcmp(refused[i].key, key) == 0)
			return fail(l, EINVAL, "%s %s", label, refused[i].why);

	switch (ab_option_kind(key)) {
	case AB_OPTION_UNKNOWN:
		return fail(l, EINVAL,
			    "unknown key %s (keys are the long options of agentbox run and "
			    "serve, without the dashes)",
			    label);
	case AB_OPTION_FLAG:
		if (!json_object_is_type(v, json_type_boolean))
			return fail(l, EINVAL, "%s: expected true or false, got %s", label,
				    type_name(v));
		if (json_object_get_boolean(v)) {
			struct ab_error e = {0};
			if (ab_option_apply(l->cfg, key, NULL, &e) < 0)
				return option_failed(l, label, key, &e);
		}
		return 0;
	case AB_OPTION_VALUE:
		/* "net": ["allow=...", "secret=..."], as --net given again */
		if (strcmp(key, "net") == 0 && json_object_is_type(v, json_type_array)) {
			for (size_t i = 0; i < json_object_array_length(v); i++) {
				json_object *item = json_object_array_get_idx(v, i);
				char ilabel[100];
				snprintf(ilabel, sizeof(ilabel), "\"net\"[%zu]", i);
				if (!json_object_is_type(item, json_type_string))
					return fail(l, EINVAL, "%s: expected a string, got %s",
						    ilabel, type_name(item));
				int r = apply_string(l, ilabel, key, json_object_get_string(item));
				if (r < 0)
					return r;
			}
			return 0;
		}
		/* numbers as written: "cpus": 0.5 is "0.5", "pids": 64 is "64" */
		if (!json_object_is_type(v, json_type_string) &&
		    !json_object_is_type(v, json_type_int) &&
		    !json_object_is_type(v, json_type_double))
			return fail(l, EINVAL, "%s: expected a string or a number, got %s", label,
				    type_name(v));
		return apply_string(l, label, key, json_object_get_string(v));
	case AB_OPTION_LIST:
		if (!json_object_is_type(v, json_type_array))
			return fail(l, EINVAL,
				    "%s: expected an array of strings (it may be given more than "
				    "once), got %s",
				    label, type_name(v));
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			json_object *item = json_object_array_get_idx(v, i);
			char ilabel[100];
			snprintf(ilabel, sizeof(ilabel), "\"%s\"[%zu]", key, i);
			if (!json_object_is_type(item, json_type_string))
				return fail(l, EINVAL, "%s: expected a string, got %s", ilabel,
					    type_name(item));
			int r = apply_string(l, ilabel, key, json_object_get_string(item));
			if (r < 0)
				return r;
		}
		return 0;
	}
	return fail(l, EINVAL, "%s: internal: unknown option kind", label);
}

/* json-c keeps the last of two equal keys without a word; in a profile that
 * is a mistake worth naming. Walks the top-level object of text json-c has
 * already accepted (so it is well-formed) and decodes each key with json-c,
 * so "m\u0065mory" and "memory" are the same key. */
static int find_duplicate_key(struct loader *l, const char *buf, size_t len)
{
	json_object *seen = json_object_new_object();
	json_tokener *tok = json_tokener_new();
	int r = 0;
	if (!seen || !tok) {
		r = ab_error_set(l->err, ENOMEM, "profile %s", l->source);
		goto out;
	}
	int depth = 0;
	bool expect_key = false;
	for (size_t i = 0; i < len && r == 0; i++) {
		char c = buf[i];
		if (c == '"') {
			size_t start = i;
			for (i++; i < len && buf[i] != '"'; i++)
				if (buf[i] == '\\')
					i++;
			if (depth != 1 || !expect_key || i >= len)
				continue;
			expect_key = false;
			json_tokener_reset(tok);
			json_object *s =
				json_tokener_parse_ex(tok, buf + start, (int)(i - start + 1));
			if (!s)
				continue; /* cannot happen in text json-c accepted */
			const char *key = json_object_get_string(s);
			if (json_object_object_get_ex(seen, key, NULL))
				r = fail(l, EINVAL, "\"%s\" is given twice", key);
			else if (json_object_object_add(seen, key, NULL) < 0)
				r = ab_error_set(l->err, ENOMEM, "profile %s", l->source);
			json_object_put(s);
		} else if (c == '{' || c == '[') {
			depth++;
			expect_key = c == '{' && depth == 1;
		} else if (c == '}' || c == ']') {
			depth--;
		} else if (c == ',' && depth == 1) {
			expect_key = true;
		}
	}
out:
	if (tok)
		json_tokener_free(tok);
	json_object_put(seen);
	return r;
}

static int parse_json(struct loader *l, const char *buf, size_t len, json_object **out)
{
	size_t off;
	enum json_tokener_error je;
	int r = ab_json_parse_whole(buf, len, out, &off, &je);
	if (r == -ENOMEM)
		return ab_error_set(l->err, ENOMEM, "profile %s", l->source);
	if (r == 0)
		return 0;
	size_t line = 1, col = 1;
	for (size_t i = 0; i < off && i < len; i++, col++)
		if (buf[i] == '\n') {
			line++;
			col = 0;
		}
	const char *why = je == json_tokener_success	? "unexpected data after the object"
			  : je == json_tokener_continue ? "unexpected end"
							: json_tokener_error_desc(je);
	return fail(l, EINVAL, "invalid JSON at line %zu, column %zu: %s", line, col, why);
}

int ab_profile_load_buffer(struct ab_config *cfg, const char *buf, size_t len, const char *source,
			   struct ab_error *err)
{
	struct loader l = {.cfg = cfg, .source = source ? source : "(profile)", .err = err};
	if (len > AB_PROFILE_MAX_BYTES)
		return fail(&l, EFBIG, "larger than %d MiB", AB_PROFILE_MAX_BYTES >> 20);
	const char *slash = source ? strrchr(source, '/') : NULL;
	if (slash) {
		l.base = slash == source ? strdup("/") : strndup(source, (size_t)(slash - source));
		if (!l.base)
			return ab_error_set(err, ENOMEM, "profile %s", l.source);
	}
	json_object *root = NULL;
	int r = parse_json(&l, buf, len, &root);
	if (r == 0 && !json_object_is_type(root, json_type_object))
		r = fail(&l, EINVAL, "expected a JSON object of options, got %s", type_name(root));
	if (r == 0)
		r = find_duplicate_key(&l, buf, len);
	if (r == 0) {
		json_object_object_foreach(root, key, v)
		{
			if ((r = apply_key(&l, key, v)) < 0)
				break;
		}
	}
	json_object_put(root);
	free(l.base);
	return r;
}

int ab_profile_load_file(struct ab_config *cfg, const char *path, struct ab_error *err)
{
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ab_error_set(err, errno, "profile %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return ab_error_set(err, errno, "profile %s", path);
	if (S_ISDIR(st.st_mode))
		return ab_error_set(err, EISDIR, "profile %s", path);
	/* read to the end, which may be a pipe (--profile <(...)), one byte
	 * beyond the limit to know it was exceeded */
	cleanup_free char *buf = malloc(AB_PROFILE_MAX_BYTES + 1);
	if (!buf)
		return ab_error_set(err, ENOMEM, "profile %s", path);
	size_t n = 0;
	while (n <= AB_PROFILE_MAX_BYTES) {
		ssize_t k = read(fd, buf + n, AB_PROFILE_MAX_BYTES + 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return ab_error_set(err, errno, "reading profile %s", path);
		if (k == 0)
			break;
		n += (size_t)k;
	}
	if (n > AB_PROFILE_MAX_BYTES)
		return ab_error_plain(err, EFBIG, "profile %s: larger than %d MiB", path,
				      AB_PROFILE_MAX_BYTES >> 20);
	return ab_profile_load_buffer(cfg, buf, n, path, err);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int json_file(const struct dirent *d)
{
	size_t n = strlen(d->d_name);
	return d->d_name[0] != '.' && n > 5 && strcmp(d->d_name + n - 5, ".json") == 0;
}

/* "agent, offline-build, untrusted": the profiles shipped in dir. */
static void list_profiles(const char *dir, char *out, size_t size)
{
	struct dirent **names = NULL;
	int n = scandir(dir, &names, json_file, by_name);
	size_t used = 0;
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (used < size)
			used += (size_t)snprintf(out + used, size - used, "%s%.*s", i ? ", " : "",
						 (int)(strlen(names[i]->d_name) - 5),
						 names[i]->d_name);
		free(names[i]);
	}
	free(names);
	/* and the built-in ones the directory does not override */
	for (const struct ab_policy_file *f = ab_policy_builtin_files; f->name; f++) {
		const char *base = f->name + strlen("sandbox/");
		int len = (int)strlen(base) - 5;
		char rel[4400];
		snprintf(rel, sizeof(rel), "%s/%.*s.json", dir, len, base);
		if (strncmp(f->name, "sandbox/", 8) != 0 || !ab_policy_builtin(f->name) ||
		    access(rel, F_OK) == 0 || used >= size)
			continue;
		used += (size_t)snprintf(out + used, size - used, "%s%.*s", used ? ", " : "", len,
					 base);
	}
	if (!out[0])
		snprintf(out, size, "none");
}

int ab_profile_load(struct ab_config *cfg, const char *spec, struct ab_error *err)
{
	if (!*spec)
		return ab_error_plain(err, EINVAL, "--profile: empty value (a NAME or a FILE)");
	size_t n = strlen(spec);
	if (strchr(spec, '/') || (n >= 5 && strcmp(spec + n - 5, ".json") == 0))
		return ab_profile_load_file(cfg, spec, err);
	char dir[4096], path[4200];
	snprintf(dir, sizeof(dir), "%s/sandbox", ab_policy_dir());
	snprintf(path, sizeof(path), "%s/%s.json", dir, spec);
	if (access(path, F_OK) < 0 && errno == ENOENT) {
		char rel[300];
		snprintf(rel, sizeof(rel), "sandbox/%s.json", spec);
		const struct ab_policy_file *builtin = ab_policy_builtin(rel);
		if (builtin) { /* not on disk: the copy built into the binary */
			snprintf(rel, sizeof(rel), "(built-in) %s", spec);
			return ab_profile_load_buffer(cfg, builtin->data, builtin->size, rel, err);
		}
		char names[300];
		list_profiles(dir, names, sizeof(names));
		return ab_error_plain(err, ENOENT,
				      "--profile: no profile named '%s' in %s (there: %s); "
				      "for a file in the current directory, write ./%s",
				      spec, dir, names, spec);
	}
	return ab_profile_load_file(cfg, path, err);
}
