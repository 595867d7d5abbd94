/* A run's init leaves its v1 cgroups once the command is gone
 * (ab_cgroup_leave), and the launcher removes them then, without waiting
 * for the init's end (ab_cgroup_remove_left): against the real v1
 * hierarchies, as root or in the delegated subtree CI gives the
 * unprivileged user (AGENTBOX_TEST_DELEGATED_PARENT); skipped on a host
 * with no v1 hierarchy (v2 has no cheap way out: the init stays and the
 * launcher waits) and for a user with no delegation. A process stands in
 * for the init. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup/cgroup.h"

static const char *const v1_roots[] = {"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids",
				       "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct"};

/* Where agentbox makes v1 cgroups here; NULL (the reason in *why) where
 * it makes none. */
static const char *v1_parent(bool *usable, const char **why)
{
	const char *parent = getenv("AGENTBOX_TEST_DELEGATED_PARENT");
	struct stat st;
	*usable = false;
	if (stat("/sys/fs/cgroup/pids/tasks", &st) < 0 &&
	    stat("/sys/fs/cgroup/memory/tasks", &st) < 0)
		*why = "no cgroup v1 hierarchy (memory or pids) on this host";
	else if (geteuid() != 0 && !(parent && *parent))
		*why = "no delegated cgroup (AGENTBOX_TEST_DELEGATED_PARENT)";
	else
		*usable = true;
	return parent && *parent ? parent : NULL;
}

static bool cgroup_exists(const char *path)
{
	for (size_t i = 0; i < sizeof(v1_roots) / sizeof(v1_roots[0]); i++) {
		char full[1100];
		struct stat st;
		snprintf(full, sizeof(full), "%s%s", v1_roots[i], path);
		if (stat(full, &st) == 0)
			return true;
	}
	return false;
}

static void byte(int fd, char *c)
{
	cr_assert_eq(read(fd, c, 1), 1, "the stand-in for the init died");
}

/* A run's v1 cgroups below a parent we may use, made as the launcher
 * makes them when its init will leave them; their path into path. */
static struct ab_cgroup *run_group(char *path, size_t size)
{
	bool usable;
	const char *why = NULL;
	const char *parent = v1_parent(&usable, &why);
	if (!usable)
		cr_skip_test("%s", why); /* the host's layout, not a missing feature */
	struct ab_limits lim = {.pids = 50, .init_leaves = true};
	struct ab_cgroup *cg = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_cgroup_create(parent, &lim, &cg, &err), 0, "%s", err.msg);
	cr_assert_eq(ab_cgroup_finish(&cg, &err), 0, "%s", err.msg);
	snprintf(path, size, "%s", ab_cgroup_status(cg)->path);
	return cg;
}

Test(cgroup_leave, the_cgroups_go_once_the_init_has_left_before_its_end)
{
	char path[512];
	struct ab_cgroup *cg = run_group(path, sizeof(path));
	struct ab_error err = {0};
	cr_assert_str_eq(ab_cgroup_status(cg)->version, "v1");
	/* no cgroup2 beside: leaving that would take the global lock */
	cr_assert_lt(ab_cgroup_clone_fd(cg), 0);
	int in[8], out[8];
	size_t n = ab_cgroup_entry_fds(cg, in);
	cr_assert_gt(n, 0);
	cr_assert_eq(ab_cgroup_leave_fds(cg, out), n, "a way out for every way in");

	int to_child[2], from_child[2];
	cr_assert_eq(pipe(to_child), 0);
	cr_assert_eq(pipe(from_child), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* the init: enters, says so, leaves when told, then lives on
		 * (not past the test: a failed assertion ends the parent) */
		char c;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (ab_cgroup_enter(in, n, &err) < 0)
			_exit(1);
		ab_cgroup_hold_leave(out, n);
		if (write(from_child[1], "e", 1) != 1 || read(to_child[0], &c, 1) != 1)
			_exit(1);
		ab_cgroup_leave();
		if (write(from_child[1], "l", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c;
	byte(from_child[0], &c);
	cr_assert_eq(c, 'e');
	/* still in them: not removed, and the rest is for ab_cgroup_destroy */
	cr_assert(!ab_cgroup_remove_left(cg), "removed a cgroup with the init in it");
	cr_assert(cgroup_exists(path), "%s went with a member in it", path);
	cr_assert_eq(write(to_child[1], "l", 1), 1);
	byte(from_child[0], &c);
	cr_assert_eq(c, 'l');
	/* out of them and alive: removed at once */
	cr_assert(ab_cgroup_remove_left(cg), "not removed after the init left");
	cr_assert_eq(kill(pid, 0), 0, "the stand-in for the init should still run");
	cr_assert(!cgroup_exists(path), "%s left behind", path);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ab_cgroup_destroy(cg);
}

Test(cgroup_leave, a_cgroup_whose_init_never_left_is_removed_after_its_end)
{
	char path[512];
	struct ab_cgroup *cg = run_group(path, sizeof(path));
	struct ab_error err = {0};
	int in[8];
	size_t n = ab_cgroup_entry_fds(cg, in);
	int from_child[2];
	cr_assert_eq(pipe(from_child), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (ab_cgroup_enter(in, n, &err) < 0 || write(from_child[1], "e", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c;
	byte(from_child[0], &c);
	cr_assert(!ab_cgroup_remove_left(cg), "removed a cgroup with the init in it");
	/* the launcher's way then: the init killed and reaped, then removed */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ab_cgroup_destroy(cg);
	cr_assert(!cgroup_exists(path), "%s left behind", path);
}
