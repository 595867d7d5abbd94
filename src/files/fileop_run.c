/* File operations, the sandbox's half: fileop_run (fileop.h), which hands
 * a request to its operation (fileop_file.c, fileop_tree.c). */
#include "files/fileop.h"

#include <json-c/json.h>
#include <string.h>

#include "files/fileop_inside.h"
#include "watch/watch.h"
#include "util/util.h"

static int write_op(json_object *q)
{
	return fo_write(q, false);
}

static int upload_op(json_object *q)
{
	return fo_write(q, true);
}

/* Each operation by its name: fn, or with_data for one that streams over
 * the data fd. */
static const struct {
	const char *name;
	int (*fn)(json_object *q);
	int (*with_data)(json_object *q, int data);
} ops[] = {
	{"read", fo_read, NULL},
	{"write", write_op, NULL},
	{"upload", upload_op, NULL},
	{"edit", fo_edit, NULL},
	{"ls", fo_ls, NULL},
	{"glob", fo_glob, NULL},
	{"grep", fo_grep, NULL},
	{"delete", fo_delete, NULL},
	{"download", fo_download, NULL},
	{"upload_from", NULL, fo_upload_from},
	{"download_to", NULL, fo_download_to},
	{"resolve_path", fo_resolve_path, NULL},
	{"place_file", fo_place_file, NULL},
	{"clear_dir", fo_clear_dir, NULL},
};

static int run(const char *request, int data)
{
	json_object *q = json_tokener_parse(request);
	json_object *opv;
	if (!q || !json_object_object_get_ex(q, "op", &opv)) {
		json_object_put(q);
		return 1;
	}
	const char *op = json_object_get_string(opv);
	int r = 1;
	fo_set_exact(fo_jbool(q, "exact", false));
	for (size_t i = 0; i < AB_ARRAY_SIZE(ops); i++)
		if (!strcmp(op, ops[i].name)) {
			r = ops[i].fn ? ops[i].fn(q) : ops[i].with_data(q, data);
			break;
		}
	fo_set_exact(false);
	json_object_put(q);
	return r;
}

int fileop_run(const char *request, int out, int data)
{
	static const char watch[] = "{\"op\":\"watch\","; /* as fileop_prepare writes it */
	if (!strncmp(request, watch, sizeof(watch) - 1)) {
		json_object *q = json_tokener_parse(request);
		const char *path = q ? fo_jstr(q, "path", NULL) : NULL;
		int r = path ? watch_run(path, fo_jbool(q, "recursive", false), out) : 1;
		json_object_put(q);
		return r;
	}
	fo_reply_to(out);
	return run(request, data);
}

int fileop_run_with(const char *request, fileop_put_fn *put, void *arg)
{
	fo_reply_with(put, arg);
	int r = run(request, -1);
	fo_reply_to(-1);
	return r;
}
