/* agentbox fork ID: new detached sandboxes whose workspace starts at a
 * checkpoint of ID's (docs/checkpoints.md, src/ckpt/ckpt_fork.c). The
 * parent's launcher makes them: it holds the configuration ID was created
 * with (profile, limits, network policy, secrets from its environment),
 * which no other process has whole; a child of it calls detach_create for
 * each, as agentbox create would. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detach/detach.h"
#include "front/front_layer.h"
#include "image/cache.h"
#include "util/error.h"
#include "util/parse.h"

static const char usage_fork[] =
	"Usage: agentbox fork [--from C] [--count N] [--name NEW] [--json] ID\n"
	"\n"
	"Make N (default 1, at most 100) new detached sandboxes whose /workspace\n"
	"starts as the overlay workspace of sandbox ID was at its checkpoint C\n"
	"(without --from: as it is now, checkpointed first: refused while a\n"
	"command runs). Each has ID's options (profile, limits, network policy,\n"
	"secrets, timeouts) and stands on C's layers where they are (no file is\n"
	"copied); what it writes is its own, and ID goes on undisturbed. Prints\n"
	"the new ids, one a line (--json: {\"ids\": [...], \"from\": C}). --name\n"
	"NEW names it NEW, or NEW-1 ... NEW-N. The layers go with the last sandbox\n"
	"that stands on them (agentbox rm). /tmp and the home directory start as\n"
	"they were at C (their layers, in ID's memory, are copied into the\n"
	"fork's); the processes are not copied: each fork starts none.\n"
	"\n"
	"Exit status: 0 done; 125 failed (nothing made).\n";

int detach_cli_fork(int argc, char **argv)
{
	const char *from = NULL, *name = NULL;
	long long count = 1;
	bool json = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage_fork, stdout);
			return 0;
		} else if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (!strcmp(a, "--json")) {
			json = true;
		} else if (i + 1 < argc && !strcmp(a, "--from")) {
			from = argv[++i];
		} else if (i + 1 < argc && !strcmp(a, "--name")) {
			name = argv[++i];
		} else if (i + 1 < argc && !strcmp(a, "--count")) {
			char *end = NULL;
			errno = 0;
			count = strtoll(argv[++i], &end, 10);
			if (errno || !*argv[i] || *end || count < 1 || count > CKPT_FORK_MAX) {
				fprintf(stderr,
					"agentbox: fork: --count '%s': a whole number from 1 to "
					"%d\n",
					argv[i], CKPT_FORK_MAX);
				return AB_EXIT_FAILURE;
			}
		} else {
			fprintf(stderr,
				"agentbox: fork: unknown option '%s' (try 'agentbox fork "
				"--help')\n",
				a);
			return AB_EXIT_FAILURE;
		}
	}
	if (argc - i != 1) {
		fprintf(stderr, "agentbox: fork: %s\n",
			argc - i < 1 ? "no sandbox ID given" : "one sandbox ID, please");
		return AB_EXIT_FAILURE;
	}
	json_object *req = json_object_new_object(), *reply = NULL;
	json_object_object_add(req, "op", json_object_new_string("fork"));
	json_object_object_add(req, "id", json_object_new_string("agentbox-cli"));
	json_object_object_add(req, "count", json_object_new_int64(count));
	if (from)
		json_object_object_add(req, "from", json_object_new_string(from));
	if (name)
		json_object_object_add(req, "name", json_object_new_string(name));
	struct ab_error err = {0};
	int r = detach_request(argv[i], req, &reply, &err);
	json_object_put(req);
	if (r < 0) {
		fprintf(stderr, "agentbox: fork: %s\n", err.msg);
		return AB_EXIT_FAILURE;
	}
	int code = 0;
	if (!strcmp(json_object_get_string(json_object_object_get(reply, "type")), "error")) {
		json_object *msg = json_object_object_get(reply, "message");
		fprintf(stderr, "agentbox: fork: sandbox %s: %s\n", argv[i],
			msg ? json_object_get_string(msg) : "refused");
		code = AB_EXIT_FAILURE;
	} else if (json) {
		json_object_object_del(reply, "type");
		json_object_object_del(reply, "id");
		json_object_object_del(reply, "op");
		puts(json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN));
	} else {
		json_object *ids = json_object_object_get(reply, "ids");
		for (size_t k = 0; k < json_object_array_length(ids); k++)
			puts(json_object_get_string(json_object_array_get_idx(ids, k)));
	}
	json_object_put(reply);
	return code;
}

/* The ones made so far, removed: a fork request makes all or none. */
static void remove_made(json_object *ids)
{
	for (size_t k = 0; k < json_object_array_length(ids); k++) {
		char *rm[] = {"rm", "-f",
			      (char *)json_object_get_string(json_object_array_get_idx(ids, k)),
			      NULL};
		detach_cli_rm(3, rm);
	}
}

int detach_fork_make(struct ab_config *cfg, const struct detach_opts *o, const struct ckpt_fork *f,
		     json_object *ids, struct ab_error *err)
{
	/* the launcher's fds are closed here: its image's layer locks too */
	int r = cfg->image_use ? image_use_relock(cfg->image_use, err) : 0;
	if (r < 0)
		return r;
	for (unsigned k = 0; k < f->count; k++) {
		char name[sizeof(f->name) + 16], id[DETACH_ID_MAX + 1];
		struct detach_opts fo = *o;
		fo.name = NULL;
		if (f->name[0]) {
			if (f->count == 1)
				snprintf(name, sizeof(name), "%s", f->name);
			else
				snprintf(name, sizeof(name), "%s-%u", f->name, k + 1);
			fo.name = name;
		}
		fo.base = f->base;
		fo.n_base = f->n_base;
		fo.base_own = f->own;
		fo.n_base_own = f->n_own;
		fo.close_fd = FRONT_LAYER_REPLY_FD; /* not the forks' to hold */
		fo.fork = detach_fork_make;	    /* a fork may be forked */
		r = detach_create(cfg, &fo, id, sizeof(id), err);
		if (r < 0) {
			remove_made(ids);
			return r;
		}
		json_object_array_add(ids, json_object_new_string(id));
	}
	return 0;
}
