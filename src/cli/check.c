/* agentbox check (see check.h). The trial run is the ground truth for
 * "can run"; the sysctls and the kernel's features say why not, and what
 * to do about it. */
#include "cli/check.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/landlock.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "agentbox/agentbox.h"
#include "view/idmap.h"
#include "sandbox/isolation.h"
#include "util/util.h"

/* the oldest kernel with every interface agentbox uses (mount_setattr) */
#define MIN_MAJOR 5
#define MIN_MINOR 12

static bool file_has(const char *path, const char *word)
{
	char buf[512] = {0};
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0 && strstr(buf, word);
}

static void copy_limit(struct check_limit *dst, const struct ab_limit_report *src)
{
	snprintf(dst->how, sizeof(dst->how), "%s", src->how ? src->how : "unavailable");
	snprintf(dst->why, sizeof(dst->why), "%s", src->why);
}

static void trial(struct check_facts *f)
{
	char ws[] = "/tmp/agentbox-check-XXXXXX";
	if (!mkdtemp(ws)) {
		snprintf(f->trial_error, sizeof(f->trial_error),
			 "cannot make a workspace in /tmp: %s", strerror(errno));
		return;
	}
	/* as root, idmapped to the sandbox user; owned by uid 65534, for a /tmp
	 * that cannot be idmapped, whose owner the sandbox then runs as */
	if (f->root && chown(ws, 65534, 65534) < 0) {
		snprintf(f->trial_error, sizeof(f->trial_error), "cannot hand %s to uid 65534: %s",
			 ws, strerror(errno));
		rmdir(ws);
		return;
	}
	char *argv[24];
	int argc = 0;
	/* best: what each limit becomes, where full would refuse the run */
	char *common[] = {"run", "--workspace", ws,    "--memory", "64M", "--cpus", "1", "--pids",
			  "64",	 "--timeout",	"10s", "--limits", "best"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(common); i++)
		argv[argc++] = common[i];
	if (f->cgroup_parent[0]) {
		argv[argc++] = "--cgroup-parent";
		argv[argc++] = f->cgroup_parent;
	}
	if (f->rootfs[0]) {
		argv[argc++] = "--rootfs";
		argv[argc++] = f->rootfs;
	}
	if (f->image[0]) {
		argv[argc++] = "--image";
		argv[argc++] = f->image;
	}
	/* a root tree or an image need not have /bin/true; its shell it must */
	bool tree = f->rootfs[0] || f->image[0];
	const char *what = tree ? "/bin/sh -c :" : "/bin/true";
	argv[argc++] = "--";
	if (tree) {
		argv[argc++] = "/bin/sh";
		argv[argc++] = "-c";
		argv[argc++] = ":";
	} else {
		argv[argc++] = "/bin/true";
	}
	argv[argc] = NULL;
	struct ab_config cfg;
	struct ab_result res = {0};
	struct ab_error err = {0};
	bool help = false;
	ab_config_init(&cfg);
	int r = ab_config_parse_run(&cfg, argc, argv, &help, &err);
	for (size_t i = 0; i < cfg.n_defaults_files; i++)
		snprintf(f->defaults + strlen(f->defaults),
			 sizeof(f->defaults) - strlen(f->defaults), "%s%s", i ? ", " : "",
			 cfg.defaults_files[i]);
	if (r == 0)
		r = ab_run(&cfg, &res, &err);
	if (r < 0) {
		snprintf(f->trial_error, sizeof(f->trial_error), "%s", err.msg);
	} else if (res.exit_code != 0) {
		snprintf(f->trial_error, sizeof(f->trial_error),
			 "the sandbox started, but %s exited with %d", what, res.exit_code);
	} else {
		f->trial_ok = true;
		snprintf(f->cgroup_version, sizeof(f->cgroup_version), "%s",
			 res.cgroup_version ? res.cgroup_version : "none");
		copy_limit(&f->memory, &res.memory);
		copy_limit(&f->cpu, &res.cpu);
		copy_limit(&f->pids, &res.pids);
		snprintf(f->cgroup_path, sizeof(f->cgroup_path), "%s", res.cgroup_path);
	}
	ab_result_free(&res);
	ab_config_free(&cfg);
	rmdir(ws);
}

void check_gather(struct check_facts *f)
{
	check_gather_in(f, NULL);
}

void check_gather_in(struct check_facts *f, const char *cgroup_parent)
{
	check_gather_on(f, cgroup_parent, NULL, NULL);
}

void check_gather_on(struct check_facts *f, const char *cgroup_parent, const char *rootfs,
		     const char *image)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->cgroup_parent, sizeof(f->cgroup_parent), "%s",
		 cgroup_parent ? cgroup_parent : "");
	snprintf(f->rootfs, sizeof(f->rootfs), "%s", rootfs ? rootfs : "");
	snprintf(f->image, sizeof(f->image), "%s", image ? image : "");
	struct utsname u;
	snprintf(f->kernel, sizeof(f->kernel), "%s", uname(&u) == 0 ? u.release : "unknown");
	f->root = geteuid() == 0;
	f->userns_clone = ab_read_int("/proc/sys/kernel/unprivileged_userns_clone");
	f->max_user_namespaces = ab_read_int("/proc/sys/user/max_user_namespaces");
	f->apparmor_restrict =
		ab_read_int("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
	f->in_container = access("/.dockerenv", F_OK) == 0 ||
			  access("/run/.containerenv", F_OK) == 0 ||
			  file_has("/proc/1/environ", "container=");
	f->seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
	f->seccomp_notify = file_has("/proc/sys/kernel/seccomp/actions_avail", "user_notif");
	int abi =
		(int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	f->landlock_abi = abi > 0 ? abi : 0;
	struct statfs sfs;
	const char *host = "none";
	if (statfs("/sys/fs/cgroup", &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC)
		host = "v2";
	else if (access("/sys/fs/cgroup/memory", F_OK) == 0 ||
		 access("/sys/fs/cgroup/pids", F_OK) == 0)
		host = "v1";
	snprintf(f->host_cgroup, sizeof(f->host_cgroup), "%s", host);
	snprintf(f->cgroup_version, sizeof(f->cgroup_version), "none");
	if (f->root) {
		struct ab_error err = {0};
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			snprintf(cwd, sizeof(cwd), ".");
		f->idmap = idmap_probe(cwd, &err) == 0 ? CHECK_IDMAP_OK
			   : err.code == EPERM	       ? CHECK_IDMAP_NO_CAP
						       : CHECK_IDMAP_REFUSED;
		const char *d = f->idmap == CHECK_IDMAP_OK ? cwd : err.msg;
		snprintf(f->idmap_detail, sizeof(f->idmap_detail), "%.*s",
			 (int)sizeof(f->idmap_detail) - 1, d);
	}
	/* what a container refuses, by trying it (isolation.h) */
	f->isolation_missing = ab_isolation_probe(true, f->isolation_why, sizeof(f->isolation_why));
	trial(f);
}

static __attribute__((format(printf, 4, 5))) void item(struct check_item *it, const char *name,
						       enum check_level level, const char *fmt, ...)
{
	it->name = name;
	it->level = level;
	it->fix[0] = '\0';
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(it->detail, sizeof(it->detail), fmt, ap);
	va_end(ap);
}

static void fix(struct check_item *it, const char *text)
{
	snprintf(it->fix, sizeof(it->fix), "%s", text);
}

static void assess_kernel(const struct check_facts *f, struct check_item *it)
{
	int major = 0, minor = 0;
	sscanf(f->kernel, "%d.%d", &major, &minor);
	if (major > MIN_MAJOR || (major == MIN_MAJOR && minor >= MIN_MINOR))
		item(it, "kernel", CHECK_OK, "Linux %s", f->kernel);
	else {
		item(it, "kernel", CHECK_FAIL,
		     "Linux %s is older than %d.%d, the first with every "
		     "interface agentbox uses (mount_setattr, pidfds)",
		     f->kernel, MIN_MAJOR, MIN_MINOR);
		fix(it, "upgrade the kernel (Debian 12, Ubuntu 22.04 and Fedora 36 and later have "
			"one new enough)");
	}
}

/* User namespaces: what is known to stop them, whatever the trial says */
static void assess_userns(const struct check_facts *f, struct check_item *it)
{
	if (f->userns_clone == 0 && !f->root) {
		item(it, "user namespaces", CHECK_FAIL,
		     "disabled for unprivileged users (sysctl kernel.unprivileged_userns_clone=0)");
		fix(it, "sudo sysctl -w kernel.unprivileged_userns_clone=1 (and put it in "
			"/etc/sysctl.d/ to keep it)");
	} else if (f->max_user_namespaces == 0) {
		item(it, "user namespaces", CHECK_FAIL,
		     "disabled (sysctl user.max_user_namespaces=0)");
		fix(it, "sudo sysctl -w user.max_user_namespaces=15000 (and put it in "
			"/etc/sysctl.d/ to keep it)");
	} else if (f->apparmor_restrict == 1 && !f->root && !f->trial_ok) {
		item(it, "user namespaces", CHECK_FAIL,
		     "AppArmor restricts unprivileged user namespaces "
		     "(sysctl kernel.apparmor_restrict_unprivileged_userns=1) and no profile "
		     "grants them to agentbox");
		fix(it, "install agentbox from its package, whose AppArmor profile allows it "
			"(/etc/apparmor.d/usr.bin.agentbox), or load that profile: sudo "
			"apparmor_parser -r /etc/apparmor.d/usr.bin.agentbox");
	} else if (f->isolation_missing & AB_MISSING_NAMESPACES) {
		/* the probe says what refused, not a guess */
		item(it, "user namespaces", CHECK_FAIL, "refused%s: %.300s",
		     f->in_container ? " (this container's seccomp profile, as Docker's "
				       "default does)"
				     : "",
		     f->isolation_why);
		fix(it, "run the container with --security-opt "
			"seccomp=packaging/containers/agentbox-seccomp.json (docs/containers.md), "
			"or run agentbox on the host");
	} else if (f->apparmor_restrict == 1 && !f->root) {
		item(it, "user namespaces", CHECK_OK,
		     "available (AppArmor restricts them, and its profile grants them to "
		     "agentbox)");
	} else {
		item(it, "user namespaces", f->trial_ok ? CHECK_OK : CHECK_WARN, "%s",
		     f->trial_ok ? "available" : "not restricted by any sysctl (see the trial)");
	}
}

static void assess_seccomp(const struct check_facts *f, struct check_item *it)
{
	if (!f->seccomp) {
		item(it, "seccomp", CHECK_FAIL, "the kernel has no seccomp filters");
		fix(it, "use a kernel built with CONFIG_SECCOMP_FILTER (every distro kernel is)");
	} else if (!f->seccomp_notify) {
		item(it, "seccomp", CHECK_WARN,
		     "filters work, but without user notification denied syscalls are not "
		     "reported by name");
		fix(it, "a kernel of 5.5 or later has it");
	} else {
		item(it, "seccomp", CHECK_OK, "filters and user notification");
	}
}

static void assess_landlock(const struct check_facts *f, struct check_item *it)
{
	if (f->landlock_abi >= 6) {
		item(it, "landlock", CHECK_OK,
		     "ABI %d: writes only beneath the view's writable places; scoped signals: a "
		     "session command signals only its own processes",
		     f->landlock_abi);
	} else if (f->landlock_abi > 0) {
		item(it, "landlock", CHECK_OK,
		     "ABI %d: writes only beneath the view's writable places; no scoped signals "
		     "(Linux 6.12): a command can stop or kill agentbox's supervisors, which are "
		     "then replaced",
		     f->landlock_abi);
	} else {
		item(it, "landlock", CHECK_WARN,
		     "not available: the mount view alone keeps writes in the workspace (no second "
		     "layer)");
		fix(it, "enable the Landlock LSM: add landlock to the kernel's lsm= boot parameter "
			"(cat /sys/kernel/security/lsm shows the current list)");
	}
}

/* Cgroups: which limits will be real, from the trial */
static void assess_cgroups(const struct check_facts *f, struct check_item *it)
{
	if (!f->trial_ok) {
		item(it, "cgroup limits", CHECK_WARN, "unknown: the trial sandbox did not run");
	} else {
		const struct {
			const char *name;
			const struct check_limit *l;
		} lim[] = {{"memory", &f->memory}, {"cpu", &f->cpu}, {"pids", &f->pids}};
		char text[400] = "";
		bool all = true;
		/* the verdict of --limits full (sandbox.c, judge_limits): pids by
		 * RLIMIT_NPROC in the sandbox's user namespace holds as asked */
		for (size_t i = 0; i < 3; i++) {
			bool cg = strcmp(lim[i].l->how, "cgroup") == 0;
			bool nproc = i == 2 && strcmp(lim[i].l->how, "rlimit") == 0;
			all &= cg;
			snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s%s: %s",
				 i ? ", " : "", lim[i].name,
				 cg	 ? "cgroup"
				 : nproc ? "RLIMIT_NPROC in the sandbox's user namespace"
					 : "refused if asked for (--limits best: dropped)");
		}
		/* the first reason a limit is missing: they share one cause */
		const char *why = "";
		for (size_t i = 0; i < 3 && !why[0]; i++)
			if (strcmp(lim[i].l->how, "cgroup") != 0)
				why = lim[i].l->why;
		/* the cause under a fallback ("RLIMIT_AS per process: CAUSE") */
		if (strncmp(why, "RLIMIT_", 7) == 0 && strstr(why, ": "))
			why = strstr(why, ": ") + 2;
		if (all)
			item(it, "cgroup limits", CHECK_OK,
			     "host cgroup %s, the sandbox's %s (%.150s); %s", f->host_cgroup,
			     f->cgroup_version, f->cgroup_path, text);
		else
			item(it, "cgroup limits", CHECK_WARN,
			     "host cgroup %s, the sandbox's %s; %s%s%.200s", f->host_cgroup,
			     f->cgroup_version, text, why[0] ? ": " : "", why);
		if (!all && strcmp(f->host_cgroup, "v1") == 0 && !f->root)
			fix(it,
			    "cgroup v1 cannot be delegated to users safely: boot with "
			    "systemd.unified_cgroup_hierarchy=1 for cgroup v2, or have root give "
			    "you a group in each controller ('sudo agentbox setup-delegation "
			    "$USER', kept across reboots) and pass --cgroup-parent /agentbox-$USER "
			    "(or set \"cgroup-parent\" in ~/.config/agentbox/config.json; "
			    "'agentbox check --cgroup-parent /agentbox-$USER' tries it)");
		else if (!all && !f->root)
			fix(it,
			    "agentbox asks your systemd user manager for a Delegate=yes scope when "
			    "its own cgroup is not delegated: have one running for you (a login "
			    "through pam_systemd, or loginctl enable-linger $USER), run agentbox "
			    "in a delegated cgroup, or pass --cgroup-parent with a subtree you "
			    "own");
		else if (!all)
			fix(it, "mount the memory, cpu and pids controllers (cgroup v2: "
				"systemd.unified_cgroup_hierarchy=1)");
	}
}

/* As root: whether workspaces can be idmapped */
static void assess_idmap(const struct check_facts *f, struct check_item *it)
{
	if (f->idmap == CHECK_IDMAP_OK) {
		item(it, "idmapped mounts", CHECK_OK,
		     "%s can be idmapped: a workspace there, root's too, is the sandbox "
		     "user's",
		     f->idmap_detail);
	} else if (f->idmap == CHECK_IDMAP_NO_CAP) {
		item(it, "idmapped mounts", CHECK_WARN,
		     "%s: a root-owned workspace is refused, another runs as its owner",
		     f->idmap_detail);
		fix(it, idmap_eperm_fix);
	} else {
		item(it, "idmapped mounts", CHECK_WARN,
		     "%s: a root-owned workspace there is refused, another runs as its "
		     "owner",
		     f->idmap_detail);
		fix(it, "keep workspaces on ext4, btrfs, xfs (or tmpfs on Linux 6.3 and "
			"later), or pass --host-uid N to run the sandbox as an unprivileged "
			"host uid with the workspace bound as it is");
	}
}

static void assess_defaults(const struct check_facts *f, struct check_item *it)
{
	if (f->defaults[0])
		item(it, "defaults", CHECK_OK, "applied before --profile and the options: %s",
		     f->defaults);
	else
		item(it, "defaults", CHECK_OK,
		     "no defaults file (/etc/agentbox/config.json, "
		     "~/.config/agentbox/config.json; AGENTBOX_CONFIG names another)");
}

static void assess_trial(const struct check_facts *f, struct check_item *it)
{
	char run[200];
	if (f->rootfs[0])
		snprintf(run, sizeof(run),
			 "agentbox run --rootfs %.120s -- /bin/sh -c :", f->rootfs);
	else if (f->image[0])
		snprintf(run, sizeof(run), "agentbox run --image %.120s -- /bin/sh -c :", f->image);
	else
		snprintf(run, sizeof(run), "agentbox run -- /bin/true");
	if (f->trial_ok)
		item(it, "trial", CHECK_OK, "%s worked", run);
	else
		item(it, "trial", CHECK_FAIL, "%s failed: %s", run, f->trial_error);
}

/* The "isolation" item from the probe's answer. */
static void isolation_item(unsigned missing, const char *why, struct check_item *it)
{
	memset(it, 0, sizeof(*it));
	it->name = "isolation";
	if (!missing) {
		it->level = CHECK_OK;
		snprintf(it->detail, sizeof(it->detail),
			 "full (every namespace, an own /proc, "
			 "an own host name)");
		return;
	}
	char names[120];
	ab_isolation_names(missing, names, sizeof(names));
	if (missing & AB_MISSING_NAMESPACES) {
		it->level = CHECK_FAIL;
		snprintf(it->detail, sizeof(it->detail),
			 "no user namespace can be made: --isolation full refuses to run; "
			 "--isolation best runs (not as root) with Landlock, seccomp, "
			 "no_new_privs, rlimits and the whole-tree kill, without any namespace");
		snprintf(it->fix, sizeof(it->fix),
			 "run the container with --security-opt "
			 "seccomp=packaging/containers/agentbox-seccomp.json (docs/containers.md)");
		return;
	}
	it->level = CHECK_WARN;
	snprintf(it->detail, sizeof(it->detail),
		 "partial, missing %s: --isolation full refuses to run, --isolation best runs "
		 "without them; %.180s",
		 names, why);
	snprintf(it->fix, sizeof(it->fix),
		 "for full isolation run the container with --security-opt "
		 "seccomp=packaging/containers/agentbox-seccomp.json%s (docs/containers.md)",
		 missing & AB_MISSING_OWN_PROC
			 ? " and an unmasked /proc (podman --security-opt unmask=ALL, docker "
			   "--security-opt systempaths=unconfined, Kubernetes procMount: Unmasked)"
			 : "");
}

size_t check_assess(const struct check_facts *f, struct check_item *items)
{
	size_t n = 0;
	assess_kernel(f, &items[n++]);
	assess_userns(f, &items[n++]);
	isolation_item(f->isolation_missing, f->isolation_why, &items[n++]);
	assess_seccomp(f, &items[n++]);
	assess_landlock(f, &items[n++]);
	assess_cgroups(f, &items[n++]);
	if (f->idmap != CHECK_IDMAP_UNKNOWN)
		assess_idmap(f, &items[n++]);
	assess_defaults(f, &items[n++]);
	assess_trial(f, &items[n++]);
	return n;
}

static const char *level_name(enum check_level l)
{
	return l == CHECK_OK ? "ok" : l == CHECK_WARN ? "warn" : "FAIL";
}

int check_print(const struct check_facts *f, bool json)
{
	struct check_item items[CHECK_MAX_ITEMS];
	size_t n = check_assess(f, items);
	bool can = true;
	for (size_t i = 0; i < n; i++)
		can &= items[i].level != CHECK_FAIL;
	if (json) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "can_run", json_object_new_boolean(can));
		json_object *arr = json_object_new_array();
		for (size_t i = 0; i < n; i++) {
			json_object *e = json_object_new_object();
			json_object_object_add(e, "name", json_object_new_string(items[i].name));
			json_object_object_add(
				e, "status",
				json_object_new_string(items[i].level == CHECK_OK     ? "ok"
						       : items[i].level == CHECK_WARN ? "warn"
										      : "fail"));
			json_object_object_add(e, "detail",
					       json_object_new_string(items[i].detail));
			json_object_object_add(
				e, "fix",
				items[i].fix[0] ? json_object_new_string(items[i].fix) : NULL);
			json_object_array_add(arr, e);
		}
		json_object_object_add(o, "checks", arr);
		json_object_object_add(o, "kernel", json_object_new_string(f->kernel));
		json_object_object_add(o, "host_cgroup", json_object_new_string(f->host_cgroup));
		json_object_object_add(o, "cgroup", json_object_new_string(f->cgroup_version));
		json_object_object_add(o, "landlock_abi", json_object_new_int(f->landlock_abi));
		json_object_object_add(o, "landlock_signal_scope",
				       json_object_new_boolean(f->landlock_abi >= 6));
		puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							       JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else {
		printf("agentbox %s: %s\n", AGENTBOX_VERSION,
		       can ? "this host can run agentbox" : "this host cannot run agentbox");
		for (size_t i = 0; i < n; i++) {
			printf("  %-5s %-16s %s\n", level_name(items[i].level), items[i].name,
			       items[i].detail);
			if (items[i].fix[0])
				printf("  %-5s %-16s fix: %s\n", "", "", items[i].fix);
		}
	}
	return can ? 0 : 1;
}
