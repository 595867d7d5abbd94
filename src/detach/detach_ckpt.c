/* agentbox checkpoint|checkpoints|restore ID: one request to a detached
 * sandbox's launcher, which alone may switch its workspace
 * (docs/checkpoints.md, src/ckpt/). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "detach/detach.h"
#include "util/error.h"

static const char usage_ckpt[] =
	"Usage: agentbox checkpoint [--name NAME] ID\n"
	"       agentbox checkpoints [--json] ID\n"
	"       agentbox restore ID NAME\n"
	"\n"
	"Checkpoints of the detached sandbox ID, whose workspace is an overlay\n"
	"(agentbox create --workspace-mode overlay; docs/checkpoints.md):\n"
	"  checkpoint   make what /workspace holds now a read-only layer, and go on\n"
	"               in a fresh one; prints the checkpoint's name (NAME, or c1,\n"
	"               c2...). /tmp and the home directory are taken with it\n"
	"               (overlays too, in the sandbox's memory). No file is copied:\n"
	"               it takes the time of a mount\n"
	"  checkpoints  list them: name, layers beneath, bytes of its own layer of\n"
	"               /workspace (on disk) and of /tmp and home (in memory)\n"
	"  restore      bring /workspace back to checkpoint NAME (later checkpoints\n"
	"               stay, and may be restored in turn)\n"
	"Both refuse while a command runs. Processes left in the background keep\n"
	"the tree they had (their working directory and open files).\n"
	"\n"
	"Exit status: 0 done; 125 failed.\n";

static int fail(const char *cmd, const char *msg)
{
	fprintf(stderr, "agentbox: %s: %s\n", cmd, msg);
	return AB_EXIT_FAILURE;
}

static void print_list(json_object *o)
{
	json_object *arr = json_object_object_get(o, "checkpoints");
	printf("%-24s %6s %12s %12s\n", "NAME", "LAYERS", "BYTES", "TMP+HOME");
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *c = json_object_array_get_idx(arr, i);
		printf("%-24s %6d %12lld %12lld\n",
		       json_object_get_string(json_object_object_get(c, "name")),
		       json_object_get_int(json_object_object_get(c, "layers")),
		       (long long)json_object_get_int64(json_object_object_get(c, "bytes")),
		       (long long)json_object_get_int64(json_object_object_get(c, "own_bytes")));
	}
}

int detach_cli_checkpoint(int argc, char **argv)
{
	const char *cmd = argv[0], *name = NULL;
	bool json = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_ckpt, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (!strcmp(cmd, "checkpoint") && !strcmp(argv[i], "--name") &&
			   i + 1 < argc) {
			name = argv[++i];
		} else if (!strcmp(cmd, "checkpoints") && !strcmp(argv[i], "--json")) {
			json = true;
		} else {
			fprintf(stderr,
				"agentbox: %s: unknown option '%s' (try 'agentbox %s --help')\n",
				cmd, argv[i], cmd);
			return AB_EXIT_FAILURE;
		}
	}
	int want = !strcmp(cmd, "restore") ? 2 : 1;
	if (argc - i != want)
		return fail(cmd, argc - i < want
					 ? (want == 2 ? "an ID and a checkpoint's name, please"
						      : "no sandbox ID given")
					 : "too many arguments");
	json_object *req = json_object_new_object(), *reply = NULL;
	json_object_object_add(req, "op", json_object_new_string(cmd));
	json_object_object_add(req, "id", json_object_new_string("agentbox-cli"));
	if (name)
		json_object_object_add(req, "name", json_object_new_string(name));
	if (want == 2)
		json_object_object_add(req, "checkpoint", json_object_new_string(argv[i + 1]));
	struct ab_error err = {0};
	int r = detach_request(argv[i], req, &reply, &err);
	json_object_put(req);
	if (r < 0)
		return fail(cmd, err.msg);
	json_object *type = json_object_object_get(reply, "type");
	int code = 0;
	if (strcmp(json_object_get_string(type), "error") == 0) {
		json_object *msg = json_object_object_get(reply, "message");
		fprintf(stderr, "agentbox: %s: sandbox %s: %s\n", cmd, argv[i],
			msg ? json_object_get_string(msg) : "refused");
		code = AB_EXIT_FAILURE;
	} else if (!strcmp(cmd, "checkpoint")) {
		puts(json_object_get_string(json_object_object_get(reply, "checkpoint")));
	} else if (!strcmp(cmd, "checkpoints")) {
		if (json)
			puts(json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN));
		else
			print_list(reply);
	}
	json_object_put(reply);
	return code;
}
