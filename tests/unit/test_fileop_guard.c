/* agentbox runtime's inner file operations (src/files/fileop_guard.c,
 * fo_clear_dir), run here as the sandbox runs them (fileop_run_with) on a
 * temporary directory, their replies checked as the launcher checks them
 * (fileop_reply). The hostile cases are what a command running in the
 * sandbox can plant between the runtime's resolve_path and the operation
 * that uses its answer: a symlink at the target, at the temporary file or
 * in a parent, a FIFO, a directory where a file is expected. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files/fileop.h"
#include "front/request.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ab-guard-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(fileop_guard, .init = setup, .fini = teardown, .timeout = 20);

struct buf {
	char p[65536];
	size_t n;
};

static void put(const char *d, size_t n, void *arg)
{
	struct buf *b = arg;
	cr_assert_lt(b->n + n, sizeof(b->p));
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

/* dir's path of rel */
static const char *at(const char *rel)
{
	static char p[8][256];
	static int i;
	i = (i + 1) % 8;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, rel);
	return p[i];
}

/* The request q (taken) as the runtime starts it (fileop_prepare_inner);
 * its checked reply ("type" result or error). */
static json_object *run_q(json_object *q)
{
	const char *op = json_object_get_string(json_object_object_get(q, "op"));
	json_object_object_add(q, "id", json_object_new_int(1));
	char *inner = NULL;
	struct ab_error e = {0};
	const char *name = fileop_prepare_inner(q, op, &inner, &e);
	cr_assert_not_null(name, "%s: %s", op, e.msg);
	struct buf *b = calloc(1, sizeof(*b));
	cr_assert_eq(fileop_run_with(inner, put, b), 0);
	json_object *id = json_object_new_int(1);
	json_object *reply = fileop_reply(name, id, b->p, b->n, &e);
	cr_assert_not_null(reply, "%s: %.*s: %s", name, (int)b->n, b->p, e.msg);
	json_object_put(id);
	json_object_put(q);
	free(inner);
	free(b);
	return reply;
}

static json_object *req(const char *op, const char *path)
{
	json_object *q = json_object_new_object();
	json_object_object_add(q, "op", json_object_new_string(op));
	json_object_object_add(q, "path", json_object_new_string(path));
	return q;
}

/* The inner op with path (and from, mode: place_file's). */
static json_object *run(const char *op, const char *path, const char *from, int mode)
{
	json_object *q = req(op, path);
	if (from) {
		json_object_object_add(q, "from", json_object_new_string(from));
		json_object_object_add(q, "mode", json_object_new_int(mode));
	}
	return run_q(q);
}

static const char *field(json_object *o, const char *k)
{
	return json_object_get_string(json_object_object_get(o, k));
}

static bool is_result(json_object *o)
{
	return !strcmp(field(o, "type"), "result");
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(s, f);
	fclose(f);
}

static void expect_content(const char *path, const char *s)
{
	char b[256] = {0};
	int fd = open(path, O_RDONLY | O_NOFOLLOW);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	ssize_t n = read(fd, b, sizeof(b) - 1);
	close(fd);
	cr_expect_eq(n, (ssize_t)strlen(s));
	cr_expect_str_eq(b, s, "%s", path);
}

Test(fileop_guard, inner_ops_are_not_the_protocols)
{
	static const char *const lines[] = {
		"{\"op\":\"resolve_path\",\"id\":1,\"path\":\"a\"}",
		"{\"op\":\"place_file\",\"id\":1,\"path\":\"a\",\"from\":\"b\",\"mode\":420}",
		"{\"op\":\"clear_dir\",\"id\":1,\"path\":\"/workspace\"}",
	};
	for (size_t i = 0; i < 3; i++) {
		struct ab_request q = {0};
		struct ab_error e = {0};
		cr_expect_lt(ab_request_parse(lines[i], strlen(lines[i]), &q, &e), 0);
		cr_expect_eq(e.kind, AB_ERRC_UNKNOWN_OP, "%s", lines[i]);
		ab_request_clear(&q);
	}
	char *inner = NULL;
	struct ab_error e = {0};
	json_object *q = json_tokener_parse("{\"op\":\"upload_from\",\"id\":1,\"path\":\"a\"}");
	cr_expect_null(fileop_prepare_inner(q, "upload_from", &inner, &e));
	json_object_put(q);
}

Test(fileop_guard, resolve_follows_symlinks_as_realpath_m)
{
	cr_assert_eq(mkdir(at("real"), 0755), 0);
	write_file(at("real/f.txt"), "abc");
	cr_assert_eq(symlink("real", at("rel")), 0);
	cr_assert_eq(symlink(at("real"), at("abs")), 0);
	cr_assert_eq(symlink("nowhere/x", at("dangling")), 0);
	/* ".." in a target: taken from what is resolved so far, past a
	 * component that is not there as realpath -m takes it */
	cr_assert_eq(symlink("missing/../rel/f.txt", at("via")), 0);
	cr_assert_eq(symlink("../real", at("real/up")), 0);
	static const struct {
		const char *in, *out;
		bool exists, is_dir;
		int size;
	} cases[] = {
		{"rel/f.txt", "real/f.txt", true, false, 3},
		{"abs/./f.txt", "real/f.txt", true, false, 3},
		{"via", "real/f.txt", true, false, 3},
		{"rel/up/up/up", "real", true, true, -1},
		{"rel/new/deeper", "real/new/deeper", false, false, 0},
		{"dangling", "nowhere/x", false, false, 0},
		{"real/f.txt/under", "real/f.txt/under", false, false, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_object *r = run("resolve_path", at(cases[i].in), NULL, 0);
		cr_assert(is_result(r), "%s", json_object_to_json_string(r));
		cr_expect_str_eq(field(r, "path"), at(cases[i].out), "%s", cases[i].in);
		cr_expect_eq(json_object_get_boolean(json_object_object_get(r, "exists")),
			     cases[i].exists, "%s", cases[i].in);
		cr_expect_eq(json_object_get_boolean(json_object_object_get(r, "is_dir")),
			     cases[i].is_dir, "%s", cases[i].in);
		if (cases[i].size >= 0)
			cr_expect_eq(json_object_get_int(json_object_object_get(r, "size")),
				     cases[i].size, "%s", cases[i].in);
		json_object_put(r);
	}
}

Test(fileop_guard, resolve_of_a_loop_is_an_error_and_a_fifo_does_not_block)
{
	cr_assert_eq(symlink("b", at("a")), 0);
	cr_assert_eq(symlink("a", at("b")), 0);
	json_object *r = run("resolve_path", at("a/x"), NULL, 0);
	cr_expect_str_eq(field(r, "type"), "error");
	cr_expect_str_eq(field(r, "code"), "invalid_path");
	json_object_put(r);
	cr_assert_eq(mkfifo(at("fifo"), 0644), 0);
	r = run("resolve_path", at("fifo"), NULL, 0);
	cr_assert(is_result(r));
	cr_expect(json_object_get_boolean(json_object_object_get(r, "exists")));
	cr_expect_not(json_object_get_boolean(json_object_object_get(r, "is_dir")));
	json_object_put(r);
}

Test(fileop_guard, place_gives_the_mode_and_renames)
{
	write_file(at(".t"), "new");
	write_file(at("f"), "old");
	json_object *r = run("place_file", at("f"), at(".t"), 0600);
	cr_assert(is_result(r), "%s", json_object_to_json_string(r));
	json_object_put(r);
	expect_content(at("f"), "new");
	struct stat st;
	cr_assert_eq(lstat(at("f"), &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0600);
	cr_expect_eq(lstat(at(".t"), &st), -1);
}

/* the parent replaced by a symlink out after resolve_path answered */
Test(fileop_guard, place_refuses_a_symlink_planted_in_a_parent)
{
	cr_assert_eq(mkdir(at("out"), 0755), 0);
	write_file(at("out/.t"), "planted");
	cr_assert_eq(symlink("out", at("sub")), 0);
	json_object *r = run("place_file", at("sub/f"), at("sub/.t"), 0644);
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	struct stat st;
	cr_expect_eq(lstat(at("out/f"), &st), -1, "renamed through the symlink");
	expect_content(at("out/.t"), "planted");
}

/* a symlink at the temporary file: neither chmod nor rename follow it */
Test(fileop_guard, place_refuses_a_symlink_at_the_temporary_file)
{
	write_file(at("secret"), "s");
	cr_assert_eq(chmod(at("secret"), 0600), 0);
	cr_assert_eq(symlink(at("secret"), at(".t")), 0);
	json_object *r = run("place_file", at("f"), at(".t"), 0666);
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	struct stat st;
	cr_assert_eq(lstat(at("secret"), &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0600, "chmod followed the symlink");
	cr_expect_eq(lstat(at("f"), &st), -1);
	cr_expect_eq(lstat(at(".t"), &st), -1, "the planted link stays");
}

Test(fileop_guard, place_refuses_a_fifo_and_a_directory_target)
{
	cr_assert_eq(mkfifo(at(".t"), 0644), 0);
	json_object *r = run("place_file", at("f"), at(".t"), 0644);
	cr_expect_str_eq(field(r, "type"), "error");
	cr_expect_str_eq(field(r, "code"), "invalid_path");
	json_object_put(r);
	struct stat st;
	cr_expect_eq(lstat(at("f"), &st), -1);
	cr_assert_eq(mkdir(at("d"), 0755), 0);
	write_file(at("d/keep"), "k");
	write_file(at(".t2"), "x");
	r = run("place_file", at("d"), at(".t2"), 0644);
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	expect_content(at("d/keep"), "k");
	cr_expect_eq(lstat(at(".t2"), &st), -1, "the temporary file stays");
	/* a hard link to another file planted as the temporary file */
	write_file(at("other"), "o");
	cr_assert_eq(chmod(at("other"), 0600), 0);
	cr_assert_eq(link(at("other"), at(".t3")), 0);
	r = run("place_file", at("f"), at(".t3"), 0666);
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	cr_assert_eq(lstat(at("other"), &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0600, "a hard link's file given the mode");
	cr_expect_eq(lstat(at("f"), &st), -1);
}

/* a symlink at the target is replaced, never written through */
Test(fileop_guard, place_replaces_a_symlink_at_the_target)
{
	write_file(at("victim"), "v");
	cr_assert_eq(symlink(at("victim"), at("f")), 0);
	write_file(at(".t"), "new");
	json_object *r = run("place_file", at("f"), at(".t"), 0644);
	cr_assert(is_result(r));
	json_object_put(r);
	expect_content(at("f"), "new");
	expect_content(at("victim"), "v");
}

Test(fileop_guard, clear_removes_what_is_in_and_follows_nothing)
{
	cr_assert_eq(mkdir(at("ws"), 0755), 0);
	cr_assert_eq(mkdir(at("ws/sub"), 0755), 0);
	cr_assert_eq(mkdir(at("out"), 0755), 0);
	write_file(at("ws/a"), "a");
	write_file(at("ws/.hidden"), "h");
	write_file(at("ws/sub/b"), "b");
	write_file(at("out/keep"), "k");
	cr_assert_eq(symlink(at("out"), at("ws/link")), 0);
	cr_assert_eq(mkfifo(at("ws/fifo"), 0644), 0);
	json_object *r = run("clear_dir", at("ws"), NULL, 0);
	cr_assert(is_result(r), "%s", json_object_to_json_string(r));
	cr_expect_eq(json_object_get_int(json_object_object_get(r, "deleted")), 6);
	json_object_put(r);
	struct stat st;
	cr_expect_eq(lstat(at("ws"), &st), 0);
	cr_expect_eq(rmdir(at("ws")), 0, "not empty");
	expect_content(at("out/keep"), "k");
	/* the directory itself a symlink now: refused */
	cr_assert_eq(symlink(at("out"), at("ws")), 0);
	r = run("clear_dir", at("ws"), NULL, 0);
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	expect_content(at("out/keep"), "k");
}

/* The protocol's operations as the runtime sends them, on the path
 * resolve_path answered (exact mode): a symlink planted after the check,
 * in a parent or at the end, is not followed. */
static json_object *upload(const char *path, const char *b64)
{
	json_object *q = req("upload", path);
	json_object_object_add(q, "data", json_object_new_string(b64));
	json_object_object_add(q, "offset", json_object_new_int(0));
	return run_q(q);
}

Test(fileop_guard, exact_upload_creates_parents_but_follows_no_symlink)
{
	json_object *r = upload(at("new/deeper/f"), "eHl6"); /* "xyz" */
	cr_assert(is_result(r), "%s", json_object_to_json_string(r));
	json_object_put(r);
	expect_content(at("new/deeper/f"), "xyz");
	cr_assert_eq(mkdir(at("out"), 0755), 0);
	cr_assert_eq(symlink("out", at("sub")), 0);
	r = upload(at("sub/f"), "eHl6");
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	r = upload(at("sub/made/f"), "eHl6");
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	struct stat st;
	cr_expect_eq(lstat(at("out/f"), &st), -1, "written through a parent symlink");
	cr_expect_eq(lstat(at("out/made"), &st), -1, "a directory made through a symlink");
	write_file(at("victim"), "v");
	cr_assert_eq(symlink("victim", at("lf")), 0);
	r = upload(at("lf"), "eHl6");
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	expect_content(at("victim"), "v");
}

Test(fileop_guard, exact_download_ls_delete_follow_no_symlink)
{
	cr_assert_eq(mkdir(at("out"), 0755), 0);
	write_file(at("out/f"), "secret");
	cr_assert_eq(symlink("out", at("sub")), 0);
	cr_assert_eq(symlink("out/f", at("lf")), 0);
	json_object *q = req("download", at("lf"));
	json_object_object_add(q, "offset", json_object_new_int(0));
	json_object *r = run_q(q);
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	q = req("download", at("sub/f"));
	json_object_object_add(q, "offset", json_object_new_int(0));
	r = run_q(q);
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	r = run_q(req("ls", at("sub")));
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	r = run_q(req("delete", at("sub/f")));
	cr_expect_str_eq(field(r, "type"), "error");
	json_object_put(r);
	expect_content(at("out/f"), "secret");
	/* the same paths without a symlink on the way work */
	q = req("download", at("out/f"));
	json_object_object_add(q, "offset", json_object_new_int(0));
	r = run_q(q);
	cr_expect(is_result(r), "%s", json_object_to_json_string(r));
	json_object_put(r);
	r = run_q(req("ls", at("out")));
	cr_expect(is_result(r), "%s", json_object_to_json_string(r));
	json_object_put(r);
	r = run_q(req("delete", at("out/f")));
	cr_expect(is_result(r), "%s", json_object_to_json_string(r));
	json_object_put(r);
}
