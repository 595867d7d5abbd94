/* agentbox changes|commit|discard DIR: the review of a layer that
 * `run --workspace-mode overlay --keep-changes DIR` left (layer.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "layer/layer.h"

static const char usage_layer[] =
	"Usage: agentbox changes [--json] [--diff] [--max-diff-bytes N] [--ignored] DIR\n"
	"       agentbox commit [--force] DIR [PATH...]\n"
	"       agentbox discard DIR\n"
	"\n"
	"Review the layer DIR that agentbox run --workspace-mode overlay\n"
	"--keep-changes DIR left (docs/workspace.md):\n"
	"  changes   list what the layer changes in the workspace: A added,\n"
	"            M modified, D deleted, R renamed; '!' marks a path the host\n"
	"            changed since the layer started. --diff adds unified diffs of\n"
	"            text files (at most --max-diff-bytes each, default 65536);\n"
	"            a symlink shows its target, flagged when it points outside\n"
	"            the workspace; a protected path is flagged\n"
	"            --json prints one JSON object. What the workspace's\n"
	"            .gitignore files ignore is left out (and counted) unless\n"
	"            --ignored, which lists it marked 'I'\n"
	"  commit    apply the changes (all, or those at PATHs and beneath) to the\n"
	"            workspace, each file atomically; refuses when the host changed\n"
	"            one of them since, unless --force; a protected path only\n"
	"            with --force and a PATH naming it (or the protected path it\n"
	"            is in); of a rename, only the end beneath a PATH is applied\n"
	"  discard   remove DIR and everything in it\n"
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

static int cli_changes(struct ab_layer *l, bool json, struct layer_change_opts *o)
{
	struct ab_error err = {0};
	json_object *out = NULL;
	if (layer_changes(l, o, &out, &err) < 0)
		return fail(&err);
	if (json)
		puts(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN |
								 JSON_C_TO_STRING_NOSLASHESCAPE));
	else
		print_changes(out, o->diff, o->include_ignored);
	json_object_put(out);
	return 0;
}

static int cli_commit(struct ab_layer *l, char **paths, size_t n, bool force)
{
	struct ab_error err = {0};
	json_object *out = NULL;
	if (layer_commit(l, paths, n, force, &out, &err) < 0)
		return fail(&err);
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
	json_object_put(out);
	return code;
}

int layer_cli(int argc, char **argv)
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
	struct ab_layer *l = NULL;
	if (layer_open(argv[i], &l, &err) < 0)
		return fail(&err);
	int code;
	if (!strcmp(cmd, "changes"))
		code = cli_changes(l, json, &o);
	else if (!strcmp(cmd, "commit"))
		code = cli_commit(l, argv + i + 1, (size_t)(argc - i - 1), force);
	else
		code = layer_discard(l, &err) < 0 ? fail(&err) : 0;
	layer_free(l);
	return code;
}
