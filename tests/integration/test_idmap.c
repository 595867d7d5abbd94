/* Started by root, agentbox idmaps the workspace and bind sources to its own
 * unprivileged sandbox user: root-owned directories (under a 0700 parent)
 * work without --host-uid, files keep their owners on the host, nothing gets
 * a setuid bit, and filesystems that cannot be idmapped get the documented
 * fallback or error. Unprivileged callers map only themselves. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentbox/agentbox.h"
#include "harness.h"
#include "view/idmap.h"

static struct proc_result r;
static char mounted[4][4096];
static int n_mounted;

static void setup(void)
{
	require_sandbox();
}

/* every filesystem a test mounted goes, even when the test failed */
static void teardown(void)
{
	while (n_mounted > 0)
		umount2(mounted[--n_mounted], MNT_DETACH);
	test_tmp_cleanup();
}

TestSuite(idmap, .init = setup, .fini = teardown, .timeout = 120);

static void need_root(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root: agentbox idmaps only when root starts it");
}

static void mount_fs(const char *type, const char *dir, const char *opts)
{
	cr_assert_lt(n_mounted, 4);
	cr_assert_eq(mount(type, dir, type, 0, opts), 0, "mount %s on %s: %s", type, dir,
		     strerror(errno));
	snprintf(mounted[n_mounted++], sizeof(mounted[0]), "%s", dir);
}

static char *path_in(const char *dir, const char *name)
{
	static char p[4][4200];
	static int i;
	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static void put(const char *dir, const char *name, const char *content, mode_t mode)
{
	FILE *f = fopen(path_in(dir, name), "w");
	cr_assert_not_null(f, "%s/%s: %s", dir, name, strerror(errno));
	fputs(content, f);
	fclose(f);
	cr_assert_eq(chmod(path_in(dir, name), mode), 0);
}

static char *mkdir_in(const char *dir, const char *name, mode_t mode)
{
	char *p = path_in(dir, name);
	cr_assert_eq(mkdir(p, mode), 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(chmod(p, mode), 0);
	return strdup(p);
}

static void assert_owner(const char *dir, const char *name, uid_t uid, gid_t gid)
{
	struct stat st;
	cr_assert_eq(lstat(path_in(dir, name), &st), 0, "%s/%s: %s", dir, name, strerror(errno));
	cr_assert_eq(st.st_uid, uid, "%s/%s: owner %u, not %u", dir, name, (unsigned)st.st_uid,
		     (unsigned)uid);
	cr_assert_eq(st.st_gid, gid, "%s/%s: group %u, not %u", dir, name, (unsigned)st.st_gid,
		     (unsigned)gid);
}

static mode_t mode_of(const char *dir, const char *name)
{
	struct stat st;
	cr_assert_eq(lstat(path_in(dir, name), &st), 0);
	return st.st_mode;
}

/* A root-owned 0700 directory, as /root is, with a root-owned workspace in
 * it holding one file. */
static char *root_workspace(char **parent)
{
	*parent = test_tmpdir();
	cr_assert_eq(chmod(*parent, 0700), 0);
	char *ws = mkdir_in(*parent, "ws", 0755);
	put(ws, "given", "hello\n", 0644);
	return ws;
}

Test(idmap, root_owned_workspace_under_a_0700_parent_from_its_directory)
{
	need_root();
	char *parent;
	char *ws = root_workspace(&parent);
	/* the README's demo: no option at all, the current directory */
	const char *argv[] = {AGENTBOX_BIN,
			      "run",
			      "--",
			      "/bin/sh",
			      "-c",
			      "id -u; id -g; cat given; stat -c '%u %g' given .; echo new > made; "
			      "mkdir sub && echo x > sub/y",
			      NULL};
	struct run_opts o = {.cwd = ws};
	run_raw(argv, &r, &o);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	char want[256];
	/* inside, everything of the workspace's owner is the sandbox user's */
	snprintf(want, sizeof(want), "%u\n%u\nhello\n%u %u\n%u %u\n", AB_SANDBOX_HOST_ID,
		 AB_SANDBOX_HOST_ID, AB_SANDBOX_HOST_ID, AB_SANDBOX_HOST_ID, AB_SANDBOX_HOST_ID,
		 AB_SANDBOX_HOST_ID);
	cr_assert_str_eq(r.out, want);
	cr_assert_str_empty(r.err);
	/* on the host, what it made is root's, like the workspace */
	assert_owner(ws, "made", 0, 0);
	assert_owner(ws, "sub", 0, 0);
	assert_owner(ws, "sub/y", 0, 0);
	free(ws);
}

Test(idmap, workspace_of_another_unprivileged_user)
{
	need_root();
	char *parent = test_tmpdir();
	char *ws = mkdir_in(parent, "ws", 0700);
	cr_assert_eq(chown(ws, 1001, 1002), 0);
	const char *argv[] = {
		AGENTBOX_BIN, "run",	 "--workspace", ws,
		"--",	      "/bin/sh", "-c",		"id -u; stat -c '%u %g' .; echo a > made",
		NULL};
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	char want[128];
	snprintf(want, sizeof(want), "%u\n%u %u\n", AB_SANDBOX_HOST_ID, AB_SANDBOX_HOST_ID,
		 AB_SANDBOX_HOST_ID);
	cr_assert_str_eq(r.out, want);
	assert_owner(ws, "made", 1001, 1002);
	free(ws);
}

/* Root without CAP_SYS_ADMIN, as root in a Podman or Docker container: the
 * message names the capability, not the filesystem, and both ways out work */
Test(idmap, root_without_cap_sys_admin_is_told_why_and_what_works)
{
	need_root();
	if (access("/usr/bin/setpriv", X_OK) != 0)
		cr_skip_test("needs setpriv (util-linux)");
	char *ws = mkdir_in(test_tmpdir(), "ws", 0755);
	const char *argv[] = {"/usr/bin/setpriv",
			      "--bounding-set",
			      "-sys_admin",
			      "--",
			      AGENTBOX_BIN,
			      "run",
			      "--workspace",
			      ws,
			      "--",
			      "/bin/sh",
			      "-c",
			      "id -u; echo a > made",
			      NULL};
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 125, "stderr: %s", r.err);
	cr_assert(strstr(r.err, "need CAP_SYS_ADMIN, which this process lacks"), "%s", r.err);
	cr_assert(strstr(r.err, "--user 1000") && strstr(r.err, "--host-uid N"), "%s", r.err);
	cr_assert_null(strstr(r.err, "filesystem"), "%s", r.err);
	/* --host-uid, with a workspace that uid may write */
	cr_assert_eq(chown(ws, 4243, 4243), 0);
	const char *host_uid[] = {"/usr/bin/setpriv",
				  "--bounding-set",
				  "-sys_admin",
				  "--",
				  AGENTBOX_BIN,
				  "run",
				  "--workspace",
				  ws,
				  "--host-uid",
				  "4243",
				  "--",
				  "/bin/sh",
				  "-c",
				  "id -u; echo a > made",
				  NULL};
	run_raw(host_uid, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "4243\n");
	assert_owner(ws, "made", 4243, 4243);
	/* a workspace of an unprivileged user: runs as its owner, and says why */
	cr_assert_eq(unlink(path_in(ws, "made")), 0);
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "4243\n");
	cr_assert(strstr(r.err, "lacks") && strstr(r.err, "runs as its owner, host uid 4243"), "%s",
		  r.err);
	free(ws);
}

Test(idmap, host_uid_keeps_its_meaning)
{
	need_root();
	char *ws = mkdir_in(test_tmpdir(), "ws", 0755);
	cr_assert_eq(chown(ws, 4243, 4243), 0);
	const char *argv[] = {AGENTBOX_BIN, "run", "--workspace", ws,	"--host-uid",
			      "4243",	    "--",  "/bin/sh",	  "-c", "id -u; echo a > made",
			      NULL};
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "4243\n");
	assert_owner(ws, "made", 4243, 4243);
	free(ws);
}

Test(idmap, bind_and_ro_bind_of_root_owned_directories)
{
	need_root();
	char *parent;
	char *ws = root_workspace(&parent);
	char *rw = mkdir_in(parent, "rw", 0700);
	char *ro = mkdir_in(parent, "ro", 0700);
	put(ro, "file", "kept\n", 0644);
	char bind[4300], ro_bind[4300];
	snprintf(bind, sizeof(bind), "%s:/data", rw);
	snprintf(ro_bind, sizeof(ro_bind), "%s:/ro", ro);
	const char *argv[] = {AGENTBOX_BIN,
			      "run",
			      "--workspace",
			      ws,
			      "--bind",
			      bind,
			      "--ro-bind",
			      ro_bind,
			      "--",
			      "/bin/sh",
			      "-c",
			      "echo x > /data/new && echo wrote; cat /ro/file; "
			      "(echo y > /ro/new) 2>/dev/null || echo ro-new-refused; "
			      "(echo y >> /ro/file) 2>/dev/null || echo ro-file-refused",
			      NULL};
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "wrote\nkept\nro-new-refused\nro-file-refused\n");
	assert_owner(rw, "new", 0, 0);
	cr_assert_eq(access(path_in(ro, "new"), F_OK), -1);
	FILE *f = fopen(path_in(ro, "file"), "r");
	char buf[32] = {0};
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	cr_assert_str_eq(buf, "kept\n");
	free(ws);
	free(rw);
	free(ro);
}

Test(idmap, setuid_root_files_gain_nothing_and_none_can_be_made)
{
	need_root();
	char *parent;
	char *ws = root_workspace(&parent);
	char cmd[9000];
	snprintf(cmd, sizeof(cmd), "cp /usr/bin/id %s/suid-id && chmod 4755 %s/suid-id", ws, ws);
	cr_assert_eq(system(cmd), 0);
	/* an existing set-user-ID root file the command may write */
	put(ws, "writable-suid", "#!/bin/sh\n", 04777);
	mkdir(path_in(ws, "dir"), 0755);
	const char *argv[] = {
		AGENTBOX_BIN,
		"run",
		"--workspace",
		ws,
		"--",
		"/bin/sh",
		"-c",
		"./suid-id -u; echo > made; "
		"chmod 4755 made 2>/dev/null || echo chmod-u+s-refused; "
		"chmod 2755 made 2>/dev/null || echo chmod-g+s-refused; "
		"chmod g+s dir 2>/dev/null || echo dir-g+s-refused; "
		"cp -p suid-id copy 2>/dev/null; "
		"python3 -c 'import os; os.open(\"o\", os.O_CREAT|os.O_WRONLY, 0o4755)' "
		"2>/dev/null || echo open-4755-refused; "
		"echo x >> writable-suid && echo appended",
		NULL};
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	char want[256];
	snprintf(want, sizeof(want),
		 "%u\nchmod-u+s-refused\nchmod-g+s-refused\ndir-g+s-refused\nopen-4755-"
		 "refused\nappended\n",
		 AB_SANDBOX_HOST_ID);
	cr_assert_str_eq(r.out, want);
	/* nothing on the host is set-user-ID or set-group-ID root now but the
	 * file the test made itself */
	cr_assert_eq(mode_of(ws, "made") & (S_ISUID | S_ISGID), 0);
	cr_assert_eq(mode_of(ws, "dir") & S_ISGID, 0);
	if (access(path_in(ws, "copy"), F_OK) == 0)
		cr_assert_eq(mode_of(ws, "copy") & (S_ISUID | S_ISGID), 0);
	cr_assert_eq(access(path_in(ws, "o"), F_OK), -1);
	/* writing a set-user-ID file drops the bit (no CAP_FSETID) */
	cr_assert_eq(mode_of(ws, "writable-suid") & S_ISUID, 0);
	cr_assert_neq(mode_of(ws, "suid-id") & S_ISUID, 0);
	free(ws);
}

Test(idmap, host_root_is_mapped_nowhere_and_private_files_are_the_sandbox_users)
{
	need_root();
	char *parent;
	char *ws = root_workspace(&parent);
	/* outside the idmapped mounts, whatever the command makes is its own:
	 * the one uid and gid it has, never host root */
	const char *argv[] = {AGENTBOX_BIN,
			      "run",
			      "--workspace",
			      ws,
			      "--",
			      "/bin/sh",
			      "-c",
			      "cat /proc/self/uid_map /proc/self/gid_map; touch /tmp/t $HOME/h; "
			      "stat -c '%u %g' /tmp/t $HOME/h; touch /usr/x /x 2>/dev/null || "
			      "echo elsewhere-refused",
			      NULL};
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	char want[512];
	unsigned id = AB_SANDBOX_HOST_ID;
	snprintf(want, sizeof(want),
		 "%10u %10u %10u\n%10u %10u %10u\n%u %u\n%u %u\nelsewhere-refused\n", id, id, 1, id,
		 id, 1, id, id, id, id);
	cr_assert_str_eq(r.out, want);
	free(ws);
}

/* A workspace on a filesystem mounted for the test: what the kernel can
 * idmap (idmap_probe, the same call agentbox check makes) works as on ext4;
 * what it cannot gives the documented error when root owns it, and runs as
 * its owner when an unprivileged user does. */
static void expect_fs_behaviour(const char *ws, const char *fs)
{
	struct ab_error err = {0};
	bool can = idmap_probe(ws, &err) == 0;
	const char *argv[] = {AGENTBOX_BIN, "run", "--workspace",	   ws,	"--",
			      "/bin/sh",    "-c",  "id -u; echo a > made", NULL};
	run_raw(argv, &r, NULL);
	struct stat st;
	cr_assert_eq(stat(ws, &st), 0);
	if (can) {
		cr_assert_eq(r.exit_code, 0, "%s: stderr: %s", fs, r.err);
		cr_assert_eq(strtoul(r.out, NULL, 10), AB_SANDBOX_HOST_ID, "%s: %s", fs, r.out);
		assert_owner(ws, "made", st.st_uid, st.st_gid);
	} else if (st.st_uid == 0) {
		cr_assert_eq(r.exit_code, 125, "%s: exit %d, out %s", fs, r.exit_code, r.out);
		cr_assert(strstr(r.err, fs) && strstr(r.err, "--host-uid") &&
				  strstr(r.err, "cannot idmap the workspace"),
			  "%s", r.err);
		cr_assert_eq(access(path_in(ws, "made"), F_OK), -1);
	} else {
		cr_assert_eq(r.exit_code, 0, "%s: stderr: %s", fs, r.err);
		cr_assert_eq(strtoul(r.out, NULL, 10), st.st_uid, "%s: %s", fs, r.out);
		cr_assert(strstr(r.err, fs) && strstr(r.err, "runs as the workspace's owner"), "%s",
			  r.err);
		assert_owner(ws, "made", st.st_uid, st.st_gid);
	}
}

Test(idmap, tmpfs_workspace)
{
	need_root();
	char *dir = test_tmpdir();
	mount_fs("tmpfs", dir, "size=1m,mode=0755");
	char *ws = mkdir_in(dir, "root-owned", 0755);
	expect_fs_behaviour(ws, "tmpfs");
	free(ws);
	ws = mkdir_in(dir, "user-owned", 0755);
	cr_assert_eq(chown(ws, 1001, 1002), 0);
	expect_fs_behaviour(ws, "tmpfs");
	free(ws);
}

Test(idmap, overlayfs_workspace)
{
	need_root();
	char *dir = test_tmpdir();
	char *lower = mkdir_in(dir, "lower", 0755);
	char *upper = mkdir_in(dir, "upper", 0755);
	char *work = mkdir_in(dir, "work", 0755);
	char *merged = mkdir_in(dir, "merged", 0755);
	char opts[14000];
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
	mount_fs("overlay", merged, opts);
	char *ws = mkdir_in(merged, "root-owned", 0755);
	expect_fs_behaviour(ws, "overlayfs");
	free(ws);
	ws = mkdir_in(merged, "user-owned", 0755);
	cr_assert_eq(chown(ws, 1001, 1002), 0);
	expect_fs_behaviour(ws, "overlayfs");
	free(ws);
	free(lower);
	free(upper);
	free(work);
	free(merged);
}

Test(idmap, unprivileged_callers_map_only_themselves)
{
	if (geteuid() == 0)
		cr_skip_test("for an unprivileged caller (root idmaps instead)");
	char *ws = test_tmpdir();
	const char *argv[] = {
		AGENTBOX_BIN, "run",	 "--workspace", ws,
		"--",	      "/bin/sh", "-c",		"cat /proc/self/uid_map; echo a > made",
		NULL};
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	char want[64];
	snprintf(want, sizeof(want), "%10u %10u %10u\n", (unsigned)geteuid(), (unsigned)geteuid(),
		 1);
	cr_assert_str_eq(r.out, want);
	assert_owner(ws, "made", geteuid(), getegid());
}

Test(idmap, the_sandbox_user_has_an_account_in_the_view)
{
	need_root();
	char *ws = test_tmpdir();
	/* whoami, ssh, passwd look the user up: the view's /etc/passwd and
	 * /etc/group name it, read-only, and the host's files are unchanged;
	 * the directory of the view's root they were written to is gone */
	struct stat before;
	cr_assert_eq(stat("/etc/passwd", &before), 0);
	const char *argv[] = {AGENTBOX_BIN,
			      "run",
			      "--workspace",
			      ws,
			      "--",
			      "/bin/sh",
			      "-c",
			      "whoami; id -gn; grep -c '^root:' /etc/passwd; "
			      "(echo x >> /etc/passwd) 2>/dev/null || echo read-only; "
			      "ls -A / | grep -c agentbox || true",
			      NULL};
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "agent\nagent\n1\nread-only\n0\n");
	struct stat after;
	cr_assert_eq(stat("/etc/passwd", &after), 0);
	cr_assert_eq(before.st_size, after.st_size);
	cr_assert_eq(before.st_mtime, after.st_mtime);
}

Test(idmap, a_bind_source_that_cannot_be_idmapped_is_bound_as_it_is)
{
	need_root();
	char *ws = test_tmpdir();
	char *dir = test_tmpdir();
	char *lower = mkdir_in(dir, "lower", 0755);
	char *upper = mkdir_in(dir, "upper", 0755);
	char *work = mkdir_in(dir, "work", 0755);
	char *merged = mkdir_in(dir, "merged", 0755);
	char opts[14000];
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
	mount_fs("overlay", merged, opts);
	put(merged, "data", "shared\n", 0644);
	struct ab_error err = {0};
	bool can = idmap_probe(merged, &err) == 0;
	char bind[4300];
	snprintf(bind, sizeof(bind), "%s:/data", merged);
	const char *argv[] = {AGENTBOX_BIN,
			      "run",
			      "--workspace",
			      ws,
			      "--bind",
			      bind,
			      "--",
			      "/bin/sh",
			      "-c",
			      "cat /data/data; stat -c %u /data/data; "
			      "(echo x > /data/new) 2>/dev/null && echo wrote || echo refused",
			      NULL};
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	char want[128];
	if (can) {
		/* idmapped like any other source */
		snprintf(want, sizeof(want), "shared\n%u\nwrote\n", AB_SANDBOX_HOST_ID);
		cr_assert_str_empty(r.err);
	} else {
		/* as it is: root's files are nobody's inside, readable, not writable,
		 * and agentbox said why */
		FILE *f = fopen("/proc/sys/kernel/overflowuid", "r");
		unsigned overflow = 65534;
		if (f) {
			cr_assert_eq(fscanf(f, "%u", &overflow), 1);
			fclose(f);
		}
		snprintf(want, sizeof(want), "shared\n%u\nrefused\n", overflow);
		cr_assert(strstr(r.err, "overlayfs") && strstr(r.err, "cannot be idmapped") &&
				  strstr(r.err, "bound at /data as it is"),
			  "%s", r.err);
		cr_assert_eq(access(path_in(merged, "new"), F_OK), -1);
	}
	cr_assert_str_eq(r.out, want);
	free(lower);
	free(upper);
	free(work);
	free(merged);
}
