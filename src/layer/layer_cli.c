/* agentbox changes|commit|discard DIR: the review of a layer that
 * `run --workspace-mode overlay --keep-changes DIR` left (layer.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/error.h"
#include "layer/layer.h"

static const char usage_layer[] =
	"Usage: agentbox changes [--json] [--diff] [--max-diff-bytes N] [--ignored] DIR|ID\n"
	"       agentbox changes [--json] --since CHECKPOINT ID\n"
	"       agentbox commit [--force] DIR|ID [PATH...]\n"
	"       agentbox discard DIR|ID\n"
	"\n"
	"Review the layer DIR that agentbox run --workspace-mode overlay\n"
	"--keep-changes DIR left, or the layer of the detached sandbox ID\n"
	"(agentbox create --workspace-mode overlay), through its launcher\n"
	"(docs/workspace.md):\n"
	"  changes   list what the layer changes in the workspace: A added,\n"
	"            M modified, D deleted, R renamed; '!' marks a path the host\n"
	"            changed since the layer started. --diff adds unified diffs of\n"
	"            text files (at most --max-diff-bytes each, default 65536);\n"
	"            a symlink shows its target, flagged when it points outside\n"
	"            the workspace; a protected path is flagged\n"
	"            --json prints one JSON object. What the workspace's\n"
	"            .gitignore files ignore is left out (and counted) unless\n"
	"            --ignored, which lists it marked 'I'. --since CHECKPOINT: of a\n"
	"            sandbox, what was written (W) or deleted (D) after that\n"
	"            checkpoint (docs/checkpoints.md). Of a sandbox on checkpoints,\n"
	"            changes and commit take its layers' merged view\n"
	"  commit    apply the changes (all, or those at PATHs and beneath) to the\n"
	"            workspace, each file atomically; refuses when the host changed\n"
	"            one of them since, unless --force; a protected path only\n"
	"            with --force and a PATH naming it (or the protected path it\n"
	"            is in); of a rename, only the end beneath a PATH is applied\n"
	"  discard   remove DIR and everything in it; of a sandbox ID, its layer\n"
	"            and the sandbox with it (as agentbox rm)\n"
	"\n"
	"Exit status: 0 done; 1 commit refused for conflicts; 125 failed.\n";

static void print_changes(json_object *o, bool diff, bool ignored_too)
{
	json_object *arr = json_object_object_get(o, "changes");
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *c = json_object_array_get_idx(arr, i);
		const char *st = json_object_get_string(json_object_object_get(c, "status"));
		const char *path = json_object_get_string(json_object_object_get(c, "path"));
		json_object *from = json_object_object_get(c, "from");
		bool conflict = json_object_get_boolean(json_object_object_get(c, "conflict"));
		json_object *target = json_object_object_get(c, "target");
		bool outside = json_object_get_boolean(json_object_object_get(c, "target_outside"));
		bool prot = json_object_get_boolean(json_object_object_get(c, "protected"));
		bool ignored = json_object_get_boolean(json_object_object_get(c, "ignored"));
		printf("%c%c%s %s%s%s%s%s%s%s%s\n", conflict ? '!' : ' ', (char)(st[0] - 'a' + 'A'),
		       ignored ? "I" : "", from ? json_object_get_string(from) : "",
		       from ? " -> " : "", path, target ? " (symlink to " : "",
		       target ? json_object_get_string(target) : "", target ? ")" : "",
		       outside ? " [points outside the workspace]" : "",
		       prot ? " [protected]" : "");
		json_object *d = json_object_object_get(c, "diff");
		if (diff && d)
			fputs(json_object_get_string(d), stdout);
	}
	int64_t left_out = json_object_get_int64(json_object_object_get(o, "ignored_count"));
	if (left_out && !ignored_too)
		fprintf(stderr,
			"agentbox: changes: %lld path%s that .gitignore ignores left out "
			"(--ignored lists them)\n",
			(long long)left_out, left_out == 1 ? "" : "s");
}

static int fail(const struct ab_error *err)
{
	fprintf(stderr, "agentbox: %s\n", err->msg);
	return AB_EXIT_FAILURE;
}

static int cli_changes(json_object *out, bool json, struct layer_change_opts *o)
{
	if (json)
		puts(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN |
								 JSON_C_TO_STRING_NOSLASHESCAPE));
	else
		print_changes(out, o->diff, o->include_ignored);
	return 0;
}

static int cli_commit(json_object *out)
{
	json_object *done = json_object_object_get(out, "committed");
	json_object *conflicts = json_object_object_get(out, "conflicts");
	int code = 0;
	if (json_object_array_length(done) == 0 && json_object_array_length(conflicts) > 0) {
		fputs("agentbox: commit: changed on the host since the layer started:", stderr);
		for (size_t i = 0; i < json_object_array_length(conflicts); i++)
			fprintf(stderr, " %s",
				json_object_get_string(json_object_array_get_idx(conflicts, i)));
		fputs(" (nothing committed; --force overwrites them)\n", stderr);
		code = 1;
	}
	for (size_t i = 0; i < json_object_array_length(done); i++)
		printf("%s\n", json_object_get_string(json_object_array_get_idx(done, i)));
	json_object *outside = json_object_object_get(out, "outside_selection");
	for (size_t i = 0; code == 0 && i < json_object_array_length(outside); i++)
		fprintf(stderr,
			"agentbox: commit: not applied, outside the paths given (the other end "
			"of a rename): %s\n",
			json_object_get_string(json_object_array_get_idx(outside, i)));
	return code;
}

/* The command on the layer directory dir: its result into *out. */
static int local(const char *dir, const char *cmd, char **paths, size_t n, bool force,
		 struct layer_change_opts *o, json_object **out, struct ab_error *err)
{
	struct ab_layer *l = NULL;
	int r = layer_open(dir, &l, err);
	if (r < 0)
		return r;
	if (!strcmp(cmd, "changes"))
		r = layer_changes(l, o, out, err);
	else if (!strcmp(cmd, "commit"))
		r = layer_commit(l, paths, n, force, out, err);
	else
		r = layer_discard(l, err);
	layer_free(l);
	return r;
}

/* The command as a request to sandbox id (docs/protocol.md): the same
 * result object, made by its launcher, which alone may touch its layer. */
static int ask_sandbox(layer_remote_fn remote, const char *id, const char *cmd, char **paths,
		       size_t n, bool force, struct layer_change_opts *o, json_object **out,
		       struct ab_error *err)
{
	json_object *req = json_object_new_object(), *reply = NULL;
	json_object_object_add(req, "op", json_object_new_string(cmd));
	json_object_object_add(req, "id", json_object_new_string("agentbox-cli"));
	if (!strcmp(cmd, "changes")) {
		json_object_object_add(req, "diff", json_object_new_boolean(o->diff));
		json_object_object_add(req, "max_diff_bytes",
				       json_object_new_int64((int64_t)o->diff_max));
		json_object_object_add(req, "include_ignored",
				       json_object_new_boolean(o->include_ignored));
		if (o->since)
			json_object_object_add(req, "since", json_object_new_string(o->since));
	} else if (!strcmp(cmd, "commit")) {
		json_object_object_add(req, "force", json_object_new_boolean(force));
		if (n) {
			json_object *a = json_object_new_array();
			for (size_t i = 0; i < n; i++)
				json_object_array_add(a, json_object_new_string(paths[i]));
			json_object_object_add(req, "paths", a);
		}
	}
	int r = remote(id, req, &reply, err);
	json_object_put(req);
	if (r < 0)
		return r;
	json_object *type = json_object_object_get(reply, "type");
	if (strcmp(json_object_get_string(type), "error") == 0) {
		json_object *msg = json_object_object_get(reply, "message");
		r = ab_error_plain(err, EINVAL, "sandbox %s: %s", id,
				   msg ? json_object_get_string(msg) : "refused");
		json_object_put(reply);
		return r;
	}
	*out = reply;
	return 0;
}

int layer_cli(int argc, char **argv, layer_remote_fn remote)
{
	const char *cmd = argv[0];
	bool json = false, force = false;
	struct layer_change_opts o = {.diff_max = 65536};
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage_layer, stdout);
			return 0;
		} else if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (!strcmp(cmd, "changes") && !strcmp(a, "--json")) {
			json = true;
		} else if (!strcmp(cmd, "changes") && !strcmp(a, "--ignored")) {
			o.include_ignored = true;
		} else if (!strcmp(cmd, "changes") && !strcmp(a, "--since") && i + 1 < argc) {
			o.since = argv[++i];
		} else if (!strcmp(cmd, "changes") && !strcmp(a, "--diff")) {
			o.diff = true;
		} else if (!strcmp(cmd, "changes") && !strcmp(a, "--max-diff-bytes") &&
			   i + 1 < argc) {
			char *end;
			unsigned long long v = strtoull(argv[++i], &end, 10);
			if (*end || v < 1 || v > (16u << 20)) {
				fprintf(stderr,
					"agentbox: changes: --max-diff-bytes: '%s' is not 1 to "
					"16777216\n",
					argv[i]);
				return AB_EXIT_FAILURE;
			}
			o.diff_max = (size_t)v;
		} else if (!strcmp(cmd, "commit") && !strcmp(a, "--force")) {
			force = true;
		} else {
			fprintf(stderr,
				"agentbox: %s: unknown option '%s' (try 'agentbox %s --help')\n",
				cmd, a, cmd);
			return AB_EXIT_FAILURE;
		}
	}
	if (i >= argc || (strcmp(cmd, "commit") && i + 1 != argc)) {
		fprintf(stderr, "agentbox: %s: %s (try 'agentbox %s --help')\n", cmd,
			i >= argc ? "no layer directory given" : "too many arguments", cmd);
		return AB_EXIT_FAILURE;
	}
	struct ab_error err = {0};
	json_object *out = NULL;
	struct stat st;
	/* a name that is no directory: a detached sandbox's id */
	bool sandbox = remote && !strchr(argv[i], '/') &&
		       !(stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode));
	if (o.since && !sandbox) {
		fprintf(stderr, "agentbox: changes: --since: only of a sandbox ID (agentbox "
				"checkpoints ID lists its checkpoints)\n");
		return AB_EXIT_FAILURE;
	}
	int r = sandbox ? ask_sandbox(remote, argv[i], cmd, argv + i + 1, (size_t)(argc - i - 1),
				      force, &o, &out, &err)
			: local(argv[i], cmd, argv + i + 1, (size_t)(argc - i - 1), force, &o, &out,
				&err);
	if (r < 0)
		return fail(&err);
	int code = 0;
	if (!strcmp(cmd, "changes"))
		code = cli_changes(out, json, &o);
	else if (!strcmp(cmd, "commit"))
		code = cli_commit(out);
	json_object_put(out);
	return code;
}
