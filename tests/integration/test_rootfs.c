/* --rootfs DIR through the real binary: the view's system is the tree's,
 * not the host's, with every layer of confinement as on the host's; a
 * tree that cannot run the command is refused (125) naming what it
 * lacks. The tree is built here from the host's dash, cat and the probe
 * with the libraries ldd names: no debootstrap, a few milliseconds. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static struct proc_result r;

static void setup(void)
{
	require_sandbox();
}

TestSuite(rootfs, .init = setup, .fini = test_tmp_cleanup, .timeout = 120);

#define PROBE "--ro-bind", AGENTBOX_PROBE ":/probe"

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* A root tree: /bin/sh (dash), /bin/cat, their libraries and the probe's,
 * an etc/passwd without the sandbox user, /home and /opt/marker. */
static char *make_tree(void)
{
	char *t = test_tmpdir();
	sh("set -e; cd %s; mkdir -p bin etc home opt usr/bin; cp /bin/dash bin/sh; "
	   "cp /bin/cat bin/cat; echo from-tree > opt/marker; "
	   "echo 'root:x:0:0:root:/root:/bin/sh' > etc/passwd; echo 'root:x:0:' > etc/group; "
	   "for l in $(ldd /bin/dash /bin/cat %s | grep -o '/[^ ]*' | sort -u); do "
	   "[ -e \"$l\" ] || continue; mkdir -p .$(dirname $l); cp -L $l .$l; done; "
	   "chmod -R a+rX .",
	   t, AGENTBOX_PROBE);
	return t;
}

static void assert_has(const char *hay, const char *needle)
{
	cr_assert(strstr(hay, needle), "no '%s' in:\n%s\nstderr: %s", needle, hay, r.err);
}

Test(rootfs, the_command_runs_on_the_tree_not_on_the_host)
{
	char *ws = test_tmpdir(), *tree = make_tree();
	cr_assert_eq(access("/usr/bin/env", X_OK), 0, "the host has /usr/bin/env");
	run_in(ws, &r, NULL, "--rootfs", tree, "--", "/bin/sh", "-c",
	       "test -e /usr/bin/env && echo host-env; cat /opt/marker; "
	       "echo w > /workspace/out && echo ws-rw; echo h > $HOME/f && echo home-rw; "
	       "echo t > /tmp/f && echo tmp-rw; (echo x > /x) 2>/dev/null || echo root-ro; "
	       "(echo x > /opt/x) 2>/dev/null || echo tree-ro; "
	       "(echo x >> /etc/passwd) 2>/dev/null || echo passwd-ro; cat /etc/passwd",
	       NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_null(strstr(r.out, "host-env"), "%s", r.out);
	assert_has(r.out, "from-tree\nws-rw\nhome-rw\ntmp-rw\nroot-ro\ntree-ro\npasswd-ro\n");
	/* the tree's own lines, and the sandbox user's added in the view */
	char line[80];
	snprintf(line, sizeof(line),
		 "root:x:0:0:root:/root:/bin/sh\nagent:x:%u:", (unsigned)test_host_uid());
	assert_has(r.out, line);
	char path[4200], buf[16] = {0};
	snprintf(path, sizeof(path), "%s/out", ws);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	cr_assert_str_eq(buf, "w\n");
	/* the tree itself is as it was */
	snprintf(path, sizeof(path), "%s/etc/passwd", tree);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_size, (off_t)strlen("root:x:0:0:root:/root:/bin/sh\n"));
}

Test(rootfs, every_layer_of_confinement_holds_on_a_tree)
{
	char *ws = test_tmpdir(), *tree = make_tree();
	run_in(ws, &r, NULL, "--rootfs", tree, PROBE, "--", "/bin/sh", "-c",
	       "echo pid=$$; while read k v rest; do case $k in "
	       "NoNewPrivs:|Seccomp:|CapEff:) echo $k$v;; esac; done < /proc/self/status; "
	       "/probe escapes",
	       NULL);
	cr_assert_eq(r.exit_code, 0, "stderr: %s out: %s", r.err, r.out);
	/* its own pid namespace: the init is 1, the command next */
	cr_assert(strncmp(r.out, "pid=1\n", 6) == 0 || strncmp(r.out, "pid=2\n", 6) == 0, "%s",
		  r.out);
	assert_has(r.out, "NoNewPrivs:1\n");
	assert_has(r.out, "Seccomp:2\n");
	assert_has(r.out, "CapEff:0000000000000000\n");
	const char *escapes[] = {"mount", "unshare", "keyctl", "bpf", "io_uring_setup"};
	for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		char want[64];
		snprintf(want, sizeof(want), "%s=EPERM\n", escapes[i]);
		assert_has(r.out, want);
	}
	/* Landlock: /proc is a writable mount, and still refused */
	run_in(ws, &r, NULL, "--rootfs", tree, PROBE, "--", "/probe", "write",
	       "/proc/self/oom_score_adj", NULL);
	cr_assert_str_eq(r.out, "EACCES\n", "stderr: %s", r.err);
}

/* agentbox run --rootfs tree a b c: 125 and one line with want. */
static void assert_refused(const char *ws, const char *tree, const char *want, const char *a,
			   const char *b, const char *c)
{
	const char *argv[] = {AGENTBOX_BIN, "run", "--workspace", ws, "--rootfs", tree, a, b, c,
			      NULL};
	run_raw(argv, &r, NULL);
	cr_assert_eq(r.exit_code, 125, "want 125 for '%s', got %d: %s%s", want, r.exit_code, r.err,
		     r.out);
	assert_has(r.err, want);
	cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
}

Test(rootfs, a_tree_without_what_the_command_needs_is_refused_naming_it)
{
	char *ws = test_tmpdir(), *tree = make_tree();
	char path[4200];
	/* another architecture: cat's ELF header says aarch64 */
	sh("printf '\\267\\000' | dd of=%s/bin/cat bs=1 seek=18 conv=notrunc 2>/dev/null", tree);
	assert_refused(ws, tree, "/bin/cat (the command) is built for aarch64", "--", "cat",
		       "/etc/group");
	/* a script whose interpreter the tree lacks */
	sh("printf '#!/usr/bin/python3\\n' > %s/usr/bin/s && chmod 755 %s/usr/bin/s", tree, tree);
	assert_refused(ws, tree, "has no /usr/bin/python3 (the interpreter of /usr/bin/s)", "--",
		       "s", NULL);
	/* a loader whose own loader is itself: checked once, no endless walk;
	 * agentbox reports what the exec then did (the report is there) */
	sh("cd %s && cp lib64/ld-linux-x86-64.so.2 ld.keep && cp bin/sh lib64/ld-linux-x86-64.so.2",
	   tree);
	const char *loop[] = {"--rootfs", tree, "-c", "true", NULL};
	json_object_put(run_with_report(ws, loop, &r));
	sh("cd %s && mv ld.keep lib64/ld-linux-x86-64.so.2", tree);
	/* the dynamic loader */
	sh("cd %s && mv lib64 lib64.away", tree);
	assert_refused(ws, tree, "(the dynamic loader of /bin/sh)", "-c", "true", NULL);
	sh("cd %s && mv lib64.away lib64", tree);
	/* no account file to add the sandbox user to */
	snprintf(path, sizeof(path), "%s/etc/passwd", tree);
	cr_assert_eq(unlink(path), 0);
	assert_refused(ws, tree, "has no etc/passwd", "-c", "true", NULL);
	/* no shell for -c, nor for a session */
	sh("echo 'root:x:0:0::/:/bin/sh' > %s/etc/passwd && rm %s/bin/sh", tree, tree);
	assert_refused(ws, tree, "has no /bin/sh (the shell of -c)", "-c", "true", NULL);
	const char *serve[] = {AGENTBOX_BIN, "serve", "--workspace", ws, "--rootfs", tree, NULL};
	run_raw(serve, &r, NULL);
	cr_assert_eq(r.exit_code, 125, "%s", r.err);
	assert_has(r.err, "has no /bin/sh (the shell of the session's commands)");
}

Test(rootfs, bad_rootfs_options_are_refused)
{
	char *ws = test_tmpdir(), *tree = make_tree();
	run_in(ws, &r, NULL, "--rootfs", "/", "--", "/bin/true", NULL);
	cr_assert_eq(r.exit_code, 125);
	assert_has(r.err, "--rootfs /: that is the host's own root");
	run_in(ws, &r, NULL, "--rootfs", "/nonexistent-rootfs", "--", "/bin/true", NULL);
	cr_assert_eq(r.exit_code, 125);
	assert_has(r.err, "--rootfs: cannot use '/nonexistent-rootfs'");
	run_in(ws, &r, NULL, "--rootfs", "/etc/hostname", "--", "/bin/true", NULL);
	cr_assert_eq(r.exit_code, 125);
	assert_has(r.err, "is not a directory");
	/* a mount point the read-only tree lacks cannot be made in it */
	run_in(ws, &r, NULL, "--rootfs", tree, "--tmpfs", "/opt/new", "--", "/bin/true", NULL);
	cr_assert_eq(r.exit_code, 125);
	assert_has(r.err, "--tmpfs: cannot mount at /opt/new: --rootfs");
	/* one it has is used, and a new top-level one is made on the view */
	run_in(ws, &r, NULL, "--rootfs", tree, "--tmpfs", "/opt", "--tmpfs", "/new", "--",
	       "/bin/sh", "-c", "echo a > /opt/a && echo b > /new/b && echo ok", NULL);
	cr_assert_str_eq(r.out, "ok\n", "stderr: %s", r.err);
}

Test(rootfs, the_overlay_workspace_and_a_profile_compose_with_it)
{
	char *ws = test_tmpdir(), *tree = make_tree(), *dir = test_tmpdir();
	run_in(ws, &r, NULL, "--rootfs", tree, "--workspace-mode", "overlay", "--", "/bin/sh", "-c",
	       "echo o > /workspace/f && cat /workspace/f && cat /opt/marker", NULL);
	cr_assert_str_eq(r.out, "o\nfrom-tree\n", "stderr: %s", r.err);
	char path[4200];
	snprintf(path, sizeof(path), "%s/f", ws);
	cr_assert_neq(access(path, F_OK), 0, "the overlay wrote through to the workspace");
	/* a profile's relative rootfs is relative to the profile */
	sh("ln -s %s %s/tree-link && cp -r %s/. %s/tree && printf '{\"rootfs\": \"tree\"}' > "
	   "%s/p.json",
	   tree, dir, tree, dir, dir);
	snprintf(path, sizeof(path), "%s/p.json", dir);
	run_in(ws, &r, NULL, "--profile", path, "--", "/bin/cat", "/opt/marker", NULL);
	cr_assert_str_eq(r.out, "from-tree\n", "stderr: %s", r.err);
	/* a symbolic link is not followed to a tree */
	snprintf(path, sizeof(path), "%s/tree-link", dir);
	run_in(ws, &r, NULL, "--rootfs", path, "--", "/bin/true", NULL);
	cr_assert_eq(r.exit_code, 125);
	assert_has(r.err, "is a symbolic link");
}

Test(rootfs, check_tries_the_tree)
{
	char *tree = make_tree();
	const char *argv[] = {AGENTBOX_BIN, "check", "--rootfs", tree, NULL};
	struct run_opts o = {.cwd = test_tmpdir()};
	run_raw(argv, &r, &o);
	cr_assert_eq(r.exit_code, 0, "%s%s", r.out, r.err);
	assert_has(r.out, " -- /bin/sh -c : worked");
	sh("rm %s/bin/sh", tree);
	run_raw(argv, &r, &o);
	cr_assert_eq(r.exit_code, 1, "%s%s", r.out, r.err);
	assert_has(r.out, "has no /bin/sh (the shell of -c)");
}

Test(rootfs, root_may_keep_its_trees_where_only_root_can_enter)
{
	if (geteuid() != 0)
		return; /* a tree the caller can enter is all an unprivileged caller has */
	char *ws = test_tmpdir(), *tree = make_tree(), *priv = test_tmpdir();
	/* as /root and /var/lib/machines are: the sandbox's own uid cannot
	 * enter, the launcher binds the tree for it */
	cr_assert_eq(chmod(priv, 0700), 0);
	sh("cp -a %s %s/tree", tree, priv);
	char path[4200];
	snprintf(path, sizeof(path), "%s/tree", priv);
	run_in(ws, &r, NULL, "--rootfs", path, "--", "/bin/sh", "-c",
	       "cat /opt/marker; (echo x > /opt/x) 2>/dev/null || echo ro", NULL);
	cr_assert_str_eq(r.out, "from-tree\nro\n", "stderr: %s", r.err);
}
