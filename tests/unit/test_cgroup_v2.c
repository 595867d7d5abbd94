/* The cgroup v2 path over a directory laid out like a cgroup2 hierarchy
 * with controllers (this project's machines are hybrid, with no v2
 * controllers to test against). The real v1, hybrid and controller-less
 * cgroup2 paths are covered by tests/integration/test_limits.c. */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup/cgroup.h"

static char root[64];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void put(const char *rel, const char *content)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(content, f);
	fclose(f);
}

static char *get(const char *dir, const char *file)
{
	static char buf[256];
	char path[1400];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/agentbox-cgv2.XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	put("cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
	put("cgroup.subtree_control", "");
	char deleg[512];
	snprintf(deleg, sizeof(deleg), "%s/user.slice", root);
	cr_assert_eq(mkdir(deleg, 0755), 0);
	/* the caller's own (delegated) cgroup, as systemd-run --scope makes it */
	ab_cgroup_test_fake_v2(root, "/user.slice");
}

static void teardown(void)
{
	ab_cgroup_test_fake_v2(NULL, NULL);
	nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(cgroup_v2, .init = setup, .fini = teardown);

/* Where the sandbox's cgroup is: the status path below the fake root. */
static void cgroup_dir(const struct ab_cgroup *cg, char *out, size_t len)
{
	snprintf(out, len, "%s%s", root, ab_cgroup_status(cg)->path);
}

Test(cgroup_v2, limits_are_written_where_this_caller_may_make_cgroups)
{
	struct ab_limits lim = {.memory = 64 << 20, .cpu_millis = 500, .pids = 100};
	struct ab_cgroup *cg = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_cgroup_create(NULL, &lim, &cg, &err), 0, "%s", err.msg);
	const struct ab_cgroup_status *st = ab_cgroup_status(cg);
	cr_assert_str_eq(st->version, "v2");
	/* root under the hierarchy's agentbox group; anyone else beneath its
	 * own cgroup, which systemd delegated to it */
	const char *want = geteuid() == 0 ? "/agentbox/agentbox-" : "/user.slice/agentbox-";
	cr_assert(strncmp(st->path, want, strlen(want)) == 0, "%s", st->path);
	char dir[1024];
	cgroup_dir(cg, dir, sizeof(dir));
	cr_assert_str_eq(get(dir, "memory.max"), "67108864");
	cr_assert_str_eq(get(dir, "memory.swap.max"), "0");
	cr_assert_str_eq(get(dir, "cpu.max"), "50000 100000");
	cr_assert_str_eq(get(dir, "pids.max"), "100");
	cr_assert_eq(st->memory.how, AB_LIMIT_CGROUP);
	cr_assert_eq(st->cpu.how, AB_LIMIT_CGROUP);
	cr_assert_eq(st->pids.how, AB_LIMIT_CGROUP);
	/* the parent hands the controllers down to its children */
	char parent[1024];
	snprintf(parent, sizeof(parent), "%s", dir);
	*strrchr(parent, '/') = '\0';
	cr_assert(strlen(get(parent, "cgroup.subtree_control")) > 0);
	ab_cgroup_destroy(cg);
}

Test(cgroup_v2, an_explicit_parent_is_used_as_given)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/ci", root);
	cr_assert_eq(mkdir(p, 0755), 0);
	struct ab_limits lim = {.pids = 7};
	struct ab_cgroup *cg = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_cgroup_create("/ci", &lim, &cg, &err), 0, "%s", err.msg);
	cr_assert(strncmp(ab_cgroup_status(cg)->path, "/ci/agentbox-", 13) == 0, "%s",
		  ab_cgroup_status(cg)->path);
	char dir[1024];
	cgroup_dir(cg, dir, sizeof(dir));
	cr_assert_str_eq(get(dir, "pids.max"), "7");
	ab_cgroup_destroy(cg);
}

Test(cgroup_v2, attach_and_accounting_read_the_v2_files)
{
	struct ab_limits lim = {.memory = 32 << 20};
	struct ab_cgroup *cg = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_cgroup_create(NULL, &lim, &cg, &err), 0, "%s", err.msg);
	char dir[1024];
	cgroup_dir(cg, dir, sizeof(dir));
	cr_assert_eq(ab_cgroup_attach(cg, 4242, false, &err), 0, "%s", err.msg);
	cr_assert_str_eq(get(dir, "cgroup.procs"), "4242");
	char rel[1100];
	snprintf(rel, sizeof(rel), "%s/memory.events", dir + strlen(root) + 1);
	put(rel, "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");
	snprintf(rel, sizeof(rel), "%s/memory.peak", dir + strlen(root) + 1);
	put(rel, "33554432\n");
	snprintf(rel, sizeof(rel), "%s/cpu.stat", dir + strlen(root) + 1);
	put(rel, "usage_usec 3000\nuser_usec 2000\nsystem_usec 1000\n");
	struct ab_cgroup_stats stats;
	cr_assert_eq(ab_cgroup_stats(cg, &stats), 0);
	cr_assert(stats.oom_killed);
	cr_assert(stats.have_memory_peak);
	cr_assert_eq(stats.memory_peak, 33554432ULL);
	cr_assert(stats.have_cpu);
	cr_assert_eq(stats.cpu_user_us, 2000ULL);
	cr_assert_eq(stats.cpu_system_us, 1000ULL);
	ab_cgroup_destroy(cg);
}

Test(cgroup_v2, no_oom_kill_is_no_oom)
{
	struct ab_limits lim = {.memory = 32 << 20};
	struct ab_cgroup *cg = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_cgroup_create(NULL, &lim, &cg, &err), 0, "%s", err.msg);
	char dir[1024], rel[1100];
	cgroup_dir(cg, dir, sizeof(dir));
	snprintf(rel, sizeof(rel), "%s/memory.events", dir + strlen(root) + 1);
	/* "oom" counts limit hits; only "oom_kill" means a process died */
	put(rel, "low 0\nhigh 0\nmax 9\noom 2\noom_kill 0\n");
	struct ab_cgroup_stats stats;
	cr_assert_eq(ab_cgroup_stats(cg, &stats), 0);
	cr_assert_not(stats.oom_killed);
	ab_cgroup_destroy(cg);
}

Test(cgroup_v2, a_hierarchy_without_the_controllers_is_not_used_for_limits)
{
	put("cgroup.controllers", "cpuset io\n");
	struct ab_limits lim = {.memory = 64 << 20, .pids = 10};
	struct ab_cgroup *cg = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_cgroup_create(NULL, &lim, &cg, &err), 0, "%s", err.msg);
	const struct ab_cgroup_status *st = ab_cgroup_status(cg);
	/* memory falls back to an rlimit, and says so; pids cannot */
	cr_assert_eq(st->memory.how, AB_LIMIT_RLIMIT);
	cr_assert_eq(st->pids.how, AB_LIMIT_UNAVAILABLE);
	cr_assert(strlen(st->pids.why) > 0);
	ab_cgroup_destroy(cg);
}

/* The parent's controllers go in with one write: one at a time, the
 * threaded ones (pids, cpu) went in while memory was refused in a cgroup
 * with processes, which made it a thread root no process could leave
 * (EOPNOTSUPP on a real systemd scope). A fake file keeps the last write. */
Test(cgroup_v2, the_controllers_are_enabled_in_one_write)
{
	struct ab_limits lim = {.memory = 64 << 20, .pids = 10};
	struct ab_cgroup *cg = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_cgroup_create("/user.slice", &lim, &cg, &err), 0, "%s", err.msg);
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/user.slice", root);
	cr_assert_str_eq(get(dir, "cgroup.subtree_control"), "+memory +pids +cpu");
	ab_cgroup_destroy(cg);
}

Test(cgroup_v2, only_the_controllers_the_parent_offers_are_asked_for)
{
	put("user.slice/cgroup.controllers", "memory pids\n");
	struct ab_limits lim = {.memory = 64 << 20, .cpu_millis = 500};
	struct ab_cgroup *cg = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_cgroup_create("/user.slice", &lim, &cg, &err), 0, "%s", err.msg);
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/user.slice", root);
	cr_assert_str_eq(get(dir, "cgroup.subtree_control"), "+memory +pids");
	ab_cgroup_destroy(cg);
}

Test(cgroup_v2, controllers_already_enabled_are_not_written_again)
{
	put("user.slice/cgroup.controllers", "cpu memory pids\n");
	put("user.slice/cgroup.subtree_control", "cpu memory pids\n");
	struct ab_limits lim = {.pids = 10};
	struct ab_cgroup *cg = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_cgroup_create("/user.slice", &lim, &cg, &err), 0, "%s", err.msg);
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/user.slice", root);
	cr_assert_str_eq(get(dir, "cgroup.subtree_control"), "cpu memory pids\n");
	ab_cgroup_destroy(cg);
}

/* A launcher that agentbox moved into a leaf of a delegated cgroup (its own
 * "-launcher" leaf, or the shared one for the other processes there) makes
 * its sandboxes beside that leaf, in the delegated cgroup, never inside a
 * leaf (which must stay without children to keep its processes). */
Test(cgroup_v2, a_launcher_in_a_leaf_makes_its_sandbox_in_the_delegated_parent)
{
	if (geteuid() == 0) {
		teardown(); /* a skipped test's .fini does not run */
		cr_skip_test("root's sandboxes go to /agentbox, whatever its own cgroup");
	}
	const char *leaves[] = {"/user.slice/agentbox.others",
				"/user.slice/agentbox-1-2-3-launcher"};
	for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
		ab_cgroup_test_fake_v2(root, leaves[i]);
		struct ab_limits lim = {.pids = 10};
		struct ab_cgroup *cg = NULL;
		struct ab_error err = {0};
		cr_assert_eq(ab_cgroup_create(NULL, &lim, &cg, &err), 0, "%s", err.msg);
		const char *path = ab_cgroup_status(cg)->path;
		cr_assert(strncmp(path, "/user.slice/agentbox-", 21) == 0 &&
				  !strchr(path + 12, '/'),
			  "from %s: %s", leaves[i], path);
		ab_cgroup_destroy(cg);
	}
}
