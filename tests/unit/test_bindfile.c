/* A bound file's way back to the host (view/bindfile.h): the launcher's
 * half, on files of a temporary directory, without a sandbox. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "view/bindfile.h"

static char dir[] = "/tmp/agentbox-bindfile-unit-XXXXXX";
static char src[128];

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static char *get(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int entries(void)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *de; (de = readdir(d));)
		n += de->d_name[0] != '.' || (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."));
	closedir(d);
	return n;
}

/* An entry as bindfile_plan leaves it: the seed is what SRC held. */
static struct view_entry entry(const char *seed)
{
	return (struct view_entry){.kind = VIEW_BIND,
				   .src = src,
				   .dst = "/home/agent/cfg.json",
				   .rw = true,
				   .copy = true,
				   .seed = (char *)seed,
				   .seed_len = strlen(seed),
				   .mode = 0640};
}

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	snprintf(src, sizeof(src), "%s/cfg.json", dir);
	put(src, "old\n");
	chmod(src, 0640);
}

static void teardown(void)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(bindfile, .init = setup, .fini = teardown);

Test(bindfile, unchanged_inside_is_not_rewritten)
{
	struct stat before, after;
	stat(src, &before);
	struct view_entry e = entry("old\n");
	char note[512];
	struct ab_error err = {0};
	cr_assert_eq(bindfile_write_back(&e, "old\n", 4, note, sizeof(note), &err), 0, "%s",
		     err.msg);
	stat(src, &after);
	cr_assert_eq(before.st_ino, after.st_ino);
	cr_assert_str_empty(note);
}

Test(bindfile, changed_inside_replaces_the_file_keeping_its_mode)
{
	struct stat before, after;
	stat(src, &before);
	struct view_entry e = entry("old\n");
	char note[512];
	struct ab_error err = {0};
	cr_assert_eq(bindfile_write_back(&e, "new\n", 4, note, sizeof(note), &err), 0, "%s",
		     err.msg);
	stat(src, &after);
	cr_assert_neq(before.st_ino, after.st_ino); /* a new file renamed over it */
	cr_assert_eq(after.st_mode & 07777, 0640);
	cr_assert_str_eq(get(src), "new\n");
	cr_assert_eq(entries(), 1); /* no temporary file left */
}

Test(bindfile, changed_on_both_sides_goes_beside)
{
	put(src, "host\n");
	struct view_entry e = entry("old\n");
	char note[512];
	struct ab_error err = {0};
	cr_assert_eq(bindfile_write_back(&e, "sandbox\n", 8, note, sizeof(note), &err), 0, "%s",
		     err.msg);
	cr_assert_str_eq(get(src), "host\n");
	char conflict[160];
	snprintf(conflict, sizeof(conflict), "%s.agentbox-conflict", src);
	cr_assert_str_eq(get(conflict), "sandbox\n");
	cr_assert_not_null(strstr(note, "changed on the host"));
}

/* The host file replaced by a link meanwhile (on the host): not followed,
 * not written through; the sandbox's version goes beside it. */
Test(bindfile, host_file_swapped_for_a_link_is_not_written_through)
{
	char target[160];
	snprintf(target, sizeof(target), "%s/target", dir);
	put(target, "old\n"); /* the seed's content, behind a link */
	unlink(src);
	cr_assert_eq(symlink(target, src), 0);
	struct view_entry e = entry("old\n");
	char note[512];
	struct ab_error err = {0};
	cr_assert_eq(bindfile_write_back(&e, "new\n", 4, note, sizeof(note), &err), 0, "%s",
		     err.msg);
	cr_assert_str_eq(get(target), "old\n");
	struct stat st;
	cr_assert_eq(lstat(src, &st), 0);
	cr_assert(S_ISLNK(st.st_mode));
	cr_assert_not_null(strstr(note, "agentbox-conflict"));
}
