/* agentbox check: the assessment of faked hosts (check_assess is a pure
 * function of the facts), the printed verdict, and the real host's facts. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/check.h"
#include "sandbox/isolation.h"

/* A host that can run agentbox with everything. */
static struct check_facts good(void)
{
	struct check_facts f = {
		.kernel = "6.1.0-13-amd64",
		.userns_clone = 1,
		.max_user_namespaces = 15000,
		.apparmor_restrict = -1,
		.seccomp = true,
		.seccomp_notify = true,
		.landlock_abi = 3,
		.trial_ok = true,
		.host_cgroup = "v2",
		.cgroup_version = "v2",
		.memory = {.how = "cgroup"},
		.cpu = {.how = "cgroup"},
		.pids = {.how = "cgroup"},
	};
	return f;
}

static const struct check_item *find(const struct check_facts *f, const char *name,
				     struct check_item *items)
{
	size_t n = check_assess(f, items);
	cr_assert_leq(n, CHECK_MAX_ITEMS);
	for (size_t i = 0; i < n; i++)
		if (strcmp(items[i].name, name) == 0)
			return &items[i];
	cr_assert_fail("no item '%s'", name);
	return NULL;
}

static bool can_run(const struct check_facts *f)
{
	struct check_item items[CHECK_MAX_ITEMS];
	size_t n = check_assess(f, items);
	for (size_t i = 0; i < n; i++)
		if (items[i].level == CHECK_FAIL)
			return false;
	return true;
}

Test(check, a_good_host_is_all_ok)
{
	struct check_facts f = good();
	struct check_item items[CHECK_MAX_ITEMS];
	size_t n = check_assess(&f, items);
	cr_assert_geq(n, 6);
	for (size_t i = 0; i < n; i++) {
		cr_expect_eq(items[i].level, CHECK_OK, "%s: %s", items[i].name, items[i].detail);
		cr_expect_str_empty(items[i].fix, "%s", items[i].name);
	}
}

Test(check, userns_disabled_by_the_debian_sysctl)
{
	struct check_facts f = good();
	f.userns_clone = 0;
	f.trial_ok = false;
	struct check_item items[CHECK_MAX_ITEMS];
	const struct check_item *it = find(&f, "user namespaces", items);
	cr_assert_eq(it->level, CHECK_FAIL);
	cr_assert(strstr(it->fix, "sysctl -w kernel.unprivileged_userns_clone=1"), "%s", it->fix);
	cr_assert_not(can_run(&f));
	/* root is not affected by that sysctl */
	f.root = true;
	f.trial_ok = true;
	cr_assert_eq(find(&f, "user namespaces", items)->level, CHECK_OK);
}

Test(check, userns_disabled_by_max_user_namespaces)
{
	struct check_facts f = good();
	f.max_user_namespaces = 0;
	f.trial_ok = false;
	struct check_item items[CHECK_MAX_ITEMS];
	const struct check_item *it = find(&f, "user namespaces", items);
	cr_assert_eq(it->level, CHECK_FAIL);
	cr_assert(strstr(it->fix, "user.max_user_namespaces="), "%s", it->fix);
}

Test(check, apparmor_restriction_with_and_without_the_profile)
{
	struct check_facts f = good();
	f.apparmor_restrict = 1;
	f.trial_ok = false;
	struct check_item items[CHECK_MAX_ITEMS];
	const struct check_item *it = find(&f, "user namespaces", items);
	cr_assert_eq(it->level, CHECK_FAIL);
	cr_assert(strstr(it->detail, "AppArmor"), "%s", it->detail);
	cr_assert(strstr(it->fix, "apparmor_parser -r /etc/apparmor.d/usr.bin.agentbox"), "%s",
		  it->fix);
	/* the installed profile lets the trial run */
	f.trial_ok = true;
	it = find(&f, "user namespaces", items);
	cr_assert_eq(it->level, CHECK_OK);
	cr_assert(strstr(it->detail, "profile"), "%s", it->detail);
	cr_assert(can_run(&f));
}

Test(check, a_container_that_forbids_namespaces)
{
	struct check_facts f = good();
	f.in_container = true;
	f.trial_ok = false;
	f.isolation_missing = AB_MISSING_NAMESPACES; /* Docker's default profile */
	snprintf(f.isolation_why, sizeof(f.isolation_why), "namespaces (clone: EPERM)");
	snprintf(f.trial_error, sizeof(f.trial_error), "cannot create the sandbox's namespaces");
	struct check_item items[CHECK_MAX_ITEMS];
	const struct check_item *it = find(&f, "user namespaces", items);
	cr_assert_eq(it->level, CHECK_FAIL);
	cr_assert(strstr(it->fix, "agentbox-seccomp.json"), "%s", it->fix);
	cr_assert(!strstr(it->fix, "unconfined"), "%s", it->fix);
	it = find(&f, "isolation", items);
	cr_assert_eq(it->level, CHECK_FAIL);
	it = find(&f, "trial", items);
	cr_assert_eq(it->level, CHECK_FAIL);
	cr_assert(strstr(it->detail, "cannot create the sandbox's namespaces"), "%s", it->detail);
}

/* Podman's defaults: user namespaces work, a masked /proc and the seccomp
 * profile's sethostname do not; the old diagnosis blamed seccomp for all */
Test(check, a_container_with_a_masked_proc_and_no_sethostname)
{
	struct check_facts f = good();
	f.in_container = true;
	f.trial_ok = false;
	f.isolation_missing = AB_MISSING_OWN_PROC | AB_MISSING_UTS;
	snprintf(f.isolation_why, sizeof(f.isolation_why), "own-proc (EPERM); uts (EPERM)");
	struct check_item items[CHECK_MAX_ITEMS];
	const struct check_item *it = find(&f, "user namespaces", items);
	cr_assert_neq(it->level, CHECK_FAIL, "%s", it->detail);
	it = find(&f, "isolation", items);
	cr_assert_eq(it->level, CHECK_WARN);
	cr_assert(strstr(it->detail, "missing own-proc, uts"), "%s", it->detail);
	cr_assert(strstr(it->fix, "unmask=ALL"), "%s", it->fix);
	cr_assert(strstr(it->fix, "agentbox-seccomp.json"), "%s", it->fix);
}

Test(check, an_old_kernel)
{
	struct check_facts f = good();
	snprintf(f.kernel, sizeof(f.kernel), "5.10.0-28-amd64");
	struct check_item items[CHECK_MAX_ITEMS];
	cr_assert_eq(find(&f, "kernel", items)->level, CHECK_FAIL);
	snprintf(f.kernel, sizeof(f.kernel), "5.12.1");
	cr_assert_eq(find(&f, "kernel", items)->level, CHECK_OK);
}

Test(check, missing_layers_are_warnings_with_fixes)
{
	struct check_facts f = good();
	f.landlock_abi = 0;
	f.seccomp_notify = false;
	struct check_item items[CHECK_MAX_ITEMS];
	const struct check_item *it = find(&f, "landlock", items);
	cr_assert_eq(it->level, CHECK_WARN);
	cr_assert(strstr(it->fix, "lsm="), "%s", it->fix);
	cr_assert_eq(find(&f, "seccomp", items)->level, CHECK_WARN);
	cr_assert(can_run(&f));
	f.seccomp = false;
	cr_assert_eq(find(&f, "seccomp", items)->level, CHECK_FAIL);
	cr_assert_not(can_run(&f));
}

Test(check, landlock_says_whether_signals_are_scoped)
{
	struct check_facts f = good();
	struct check_item items[CHECK_MAX_ITEMS];
	const struct check_item *it = find(&f, "landlock", items);
	cr_assert_eq(it->level, CHECK_OK);
	cr_assert(strstr(it->detail, "no scoped signals"), "%s", it->detail);
	f.landlock_abi = 6;
	it = find(&f, "landlock", items);
	cr_assert_eq(it->level, CHECK_OK);
	cr_assert(strstr(it->detail, "scoped signals: a session command signals only its own"),
		  "%s", it->detail);
}

Test(check, cgroup_limits_say_which_are_real)
{
	struct check_facts f = good();
	snprintf(f.cgroup_version, sizeof(f.cgroup_version), "none");
	snprintf(f.memory.how, sizeof(f.memory.how), "rlimit");
	snprintf(f.cpu.how, sizeof(f.cpu.how), "unavailable");
	snprintf(f.pids.how, sizeof(f.pids.how), "unavailable");
	snprintf(f.memory.why, sizeof(f.memory.why), "RLIMIT_AS per process: no user bus");
	struct check_item items[CHECK_MAX_ITEMS];
	const struct check_item *it = find(&f, "cgroup limits", items);
	cr_assert_eq(it->level, CHECK_WARN);
	/* the verdict of --limits full, as run gives it */
	cr_assert(strstr(it->detail, "memory: refused if asked for (--limits best: dropped)"), "%s",
		  it->detail);
	cr_assert(strstr(it->detail, "cpu: refused if asked for"), "%s", it->detail);
	cr_assert(strstr(it->detail, "pids: refused if asked for"), "%s", it->detail);
	/* why, as the trial's limits said it, under the fallback */
	cr_assert(strstr(it->detail, "dropped): no user bus"), "%s", it->detail);
	/* pids by RLIMIT_NPROC in the sandbox's user namespace hold */
	snprintf(f.pids.how, sizeof(f.pids.how), "rlimit");
	it = find(&f, "cgroup limits", items);
	cr_assert(strstr(it->detail, "pids: RLIMIT_NPROC in the sandbox's user namespace"), "%s",
		  it->detail);
	/* on v2 agentbox asks systemd itself: the fix is a user manager */
	cr_assert(strstr(it->fix, "systemd user manager"), "%s", it->fix);
	cr_assert(strstr(it->fix, "--cgroup-parent"), "%s", it->fix);
	snprintf(f.host_cgroup, sizeof(f.host_cgroup), "v1");
	it = find(&f, "cgroup limits", items);
	cr_assert(strstr(it->fix, "systemd.unified_cgroup_hierarchy=1"), "%s", it->fix);
	cr_assert(can_run(&f), "missing limits do not stop agentbox");
}

static char *slurp(FILE *f)
{
	static char buf[16384];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	return buf;
}

Test(check, json_says_the_verdict_and_the_status_is_1_when_it_cannot_run,
     .init = cr_redirect_stdout)
{
	struct check_facts f = good();
	f.max_user_namespaces = 0;
	f.trial_ok = false;
	cr_assert_eq(check_print(&f, true), 1);
	fflush(stdout);
	json_object *o = json_tokener_parse(slurp(cr_get_redirected_stdout()));
	cr_assert_not_null(o, "not one JSON object");
	json_object *v, *checks;
	cr_assert(json_object_object_get_ex(o, "can_run", &v));
	cr_assert_not(json_object_get_boolean(v));
	cr_assert(json_object_object_get_ex(o, "checks", &checks));
	bool found = false;
	for (size_t i = 0; i < json_object_array_length(checks); i++) {
		json_object *c = json_object_array_get_idx(checks, i), *name, *status, *fix;
		json_object_object_get_ex(c, "name", &name);
		json_object_object_get_ex(c, "status", &status);
		json_object_object_get_ex(c, "fix", &fix);
		if (strcmp(json_object_get_string(name), "user namespaces") == 0) {
			found = true;
			cr_assert_str_eq(json_object_get_string(status), "fail");
			cr_assert(strstr(json_object_get_string(fix), "max_user_namespaces"));
		}
	}
	cr_assert(found);
	json_object_put(o);
}

Test(check, text_says_the_verdict_and_the_status_is_0_when_it_can, .init = cr_redirect_stdout)
{
	struct check_facts f = good();
	f.landlock_abi = 0;
	cr_assert_eq(check_print(&f, false), 0);
	fflush(stdout);
	const char *out = slurp(cr_get_redirected_stdout());
	cr_assert(strstr(out, "this host can run agentbox"), "%s", out);
	cr_assert(strstr(out, "warn  landlock"), "%s", out);
	cr_assert(strstr(out, "fix: enable the Landlock LSM"), "%s", out);
}

/* This host: the trial sandbox must run where sandboxes must work. */
Test(check, this_host)
{
	struct check_facts f;
	check_gather(&f);
	const char *must = getenv("AGENTBOX_MUST_WORK");
	if (!f.trial_ok && !(must && strcmp(must, "1") == 0))
		cr_skip_test("this host cannot run sandboxes: %s", f.trial_error);
	cr_assert(f.trial_ok, "%s", f.trial_error);
	cr_assert_str_neq(f.kernel, "unknown");
	cr_assert_str_neq(f.host_cgroup, "");
	cr_assert(f.seccomp);
}

Test(check, idmapped_mounts_as_root)
{
	struct check_facts f = good();
	struct check_item items[CHECK_MAX_ITEMS];
	/* not root: nothing to say */
	size_t n = check_assess(&f, items);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_neq(items[i].name, "idmapped mounts");
	f.root = true;
	f.idmap = CHECK_IDMAP_OK;
	snprintf(f.idmap_detail, sizeof(f.idmap_detail), "/root/agentbox");
	const struct check_item *it = find(&f, "idmapped mounts", items);
	cr_assert_eq(it->level, CHECK_OK);
	cr_assert(strstr(it->detail, "/root/agentbox"), "%s", it->detail);
	/* a filesystem that refuses is a warning, with the way out */
	f.idmap = CHECK_IDMAP_REFUSED;
	snprintf(f.idmap_detail, sizeof(f.idmap_detail),
		 "'/w' (overlayfs) cannot be idmapped: Invalid argument");
	it = find(&f, "idmapped mounts", items);
	cr_assert_eq(it->level, CHECK_WARN);
	cr_assert(strstr(it->detail, "overlayfs"), "%s", it->detail);
	cr_assert(strstr(it->fix, "--host-uid"), "%s", it->fix);
	cr_assert(can_run(&f));
}

/* check --cgroup-parent: the trial's cgroup is made below that parent, so a
 * delegation is verified, not assumed (a parent the user may not write
 * fails the trial, naming it). Not as root, who could make any parent. */
Test(check, the_trial_uses_the_cgroup_parent_given)
{
	if (geteuid() == 0)
		cr_skip_test("root may create any parent");
	char parent[64];
	snprintf(parent, sizeof(parent), "/agentbox-check-nonexistent-%d", (int)getpid());
	struct check_facts f;
	check_gather_in(&f, parent);
	if (!f.trial_ok && !strstr(f.trial_error, parent)) {
		const char *must = getenv("AGENTBOX_MUST_WORK");
		if (!(must && strcmp(must, "1") == 0))
			cr_skip_test("this host cannot run sandboxes: %s", f.trial_error);
	}
	/* on a host with cgroups at all, the parent was tried */
	if (strcmp(f.host_cgroup, "none") != 0) {
		cr_assert_not(f.trial_ok, "the trial ran without the parent it was given");
		cr_assert(strstr(f.trial_error, parent), "%s", f.trial_error);
	}
}
