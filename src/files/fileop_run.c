/* File operations, the sandbox's half: fileop_run (fileop.h), which hands
 * a request to its operation (fileop_file.c, fileop_tree.c). */
#include "files/fileop.h"

#include <json-c/json.h>
#include <string.h>

#include "files/fileop_inside.h"

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
	if (!strcmp(op, "read"))
		r = fo_read(q);
	else if (!strcmp(op, "write"))
		r = fo_write(q, false);
	else if (!strcmp(op, "upload"))
		r = fo_write(q, true);
	else if (!strcmp(op, "edit"))
		r = fo_edit(q);
	else if (!strcmp(op, "ls"))
		r = fo_ls(q);
	else if (!strcmp(op, "glob"))
		r = fo_glob(q);
	else if (!strcmp(op, "grep"))
		r = fo_grep(q);
	else if (!strcmp(op, "delete"))
		r = fo_delete(q);
	else if (!strcmp(op, "download"))
		r = fo_download(q);
	else if (!strcmp(op, "upload_from"))
		r = fo_upload_from(q, data);
	else if (!strcmp(op, "download_to"))
		r = fo_download_to(q, data);
	else if (!strcmp(op, "resolve_path"))
		r = fo_resolve_path(q);
	else if (!strcmp(op, "place_file"))
		r = fo_place_file(q);
	else if (!strcmp(op, "clear_dir"))
		r = fo_clear_dir(q);
	fo_set_exact(false);
	json_object_put(q);
	return r;
}

int fileop_run(const char *request, int out, int data)
{
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
