/* The launcher side of building one sandbox (design.md, "Processes and
 * trust"), for every session, `agentbox run`'s one-command ones included.
 *
 * Order: check the configuration and plan the view (nothing created yet),
 * load the seccomp profile, build the environment, make the cgroup last
 * (on v1 hierarchies only the cgroup2 beside them, which clone3 needs);
 * then clone the init into the new namespaces (straight into the cgroup
 * where the kernel can), write its uid/gid maps and send GO; the v1
 * hierarchies' cgroups, then the network namespace (userns_net_beside),
 * are made while the init builds the view, and it enters them before its
 * cgroup namespace and its host name. What follows is session.c's. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "view/config.h"
#include "util/error.h"
#include "view/idmap.h"
#include "layer/layer.h"
#include "view/overlay.h"
#include "sandbox/gitid.h"
#include "sandbox/init.h"
#include "sandbox/isolation.h"
#include "view/mount.h"
#include "net/netproxy.h"
#include "net/netproc.h"
#include "net/netsecret.h"
#include "util/parse.h"
#include "layer/protect.h"
#include "sandbox/sandbox.h"
#include "seccomp/seccomp_profile.h"
#include "util/proc.h"
#include "util/sync.h"
#include "sandbox/userns.h"
#include "util/util.h"

extern char **environ;

/* Say why the kernel refused new namespaces, in terms a user can act on. */
static int clone_error(int e, struct ab_error *err)
{
	if (ab_read_int("/proc/sys/kernel/unprivileged_userns_clone") == 0 && geteuid() != 0)
		return ab_error_plain(err, e,
				      "cannot create a user namespace: user namespaces are "
				      "disabled (sysctl kernel.unprivileged_userns_clone=0)");
	if (ab_read_int("/proc/sys/user/max_user_namespaces") == 0)
		return ab_error_plain(err, e,
				      "cannot create a user namespace: user namespaces are "
				      "disabled (sysctl user.max_user_namespaces=0)");
	if (ab_read_int("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1 &&
	    geteuid() != 0)
		return ab_error_plain(err, e,
				      "cannot create a user namespace: AppArmor restricts "
				      "unprivileged user namespaces "
				      "(sysctl kernel.apparmor_restrict_unprivileged_userns=1)");
	return ab_error_set(err, e, "cannot create the sandbox's namespaces");
}

static void kill_and_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* clone3's arguments (linux/sched.h, struct clone_args, 5.7 with cgroup) */
struct clone3_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
		set_tid_size, cgroup;
};
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* Raw clone, fork semantics with the new namespaces in one step: straight
 * into the sandbox's cgroup where the kernel can (clone3 with
 * CLONE_INTO_CGROUP, cgroup v2, Linux 5.7), so no running task is
 * migrated on the start path (a migration waits for an RCU grace period);
 * else *placed is false and the caller moves the init, which waits for GO
 * before running anything. */
static pid_t clone_init(const struct sandbox *sb, bool net_beside, bool *placed)
{
	unsigned long flags = userns_clone_flags(&sb->cfg);
	/* about 0.6 ms of the kernel's, which would hold up the view: made
	 * beside it instead (userns_make_net) */
	if (net_beside)
		flags &= ~(unsigned long)CLONE_NEWNET;
	int cgfd = ab_cgroup_clone_fd(sb->cg);
	*placed = false;
	if (cgfd >= 0) {
		struct clone3_args ca = {
			.flags = flags | CLONE_INTO_CGROUP,
			.exit_signal = SIGCHLD,
			.cgroup = (uint64_t)cgfd,
		};
		pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		if (pid >= 0) {
			*placed = true;
			return pid;
		}
		/* no clone3 (ENOSYS: an older kernel, or a seccomp filter of
		 * whatever runs agentbox), no CLONE_INTO_CGROUP (E2BIG,
		 * EINVAL): the migration gives the same sandbox, later */
	}
	return (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
}

static int report_cgroup(const struct ab_config *cfg, struct ab_result *res,
			 const struct ab_cgroup *cg, struct ab_error *err);

/* The v1 cgroups, made while the init builds the view (ab_cgroup_finish),
 * and their tasks files to it, which it enters by itself before its
 * cgroup namespace and before anything of a command runs; also sent where
 * there are none, so the init always waits for the cgroup's word. */
static int finish_cgroup(struct sandbox *sb, pid_t pid, int sync_fd, bool *gone,
			 struct ab_error *err)
{
	bool pending = ab_cgroup_pending(sb->cg);
	int r = ab_cgroup_finish(&sb->cg, err);
	/* the idmap helpers that had not yet ended at the clone, waited
	 * for, not left as zombies for the whole session: each has released
	 * its memory (the launcher went on) and is microseconds from its end */
	view_plan_reap_helpers(&sb->plan, true);
	if (r == 0 && pending)
		r = report_cgroup(&sb->cfg, &sb->limits, sb->cg, err);
	/* what it cannot enter by itself: moved by pid (slow, but rare) */
	if (r == 0)
		r = ab_cgroup_attach(sb->cg, pid, true, err);
	if (r < 0)
		return r;
	int fds[8];
	size_t n = ab_cgroup_entry_fds(sb->cg, fds);
	/* and the ways out, which it takes once the command is gone */
	size_t out = ab_cgroup_leave_fds(sb->cg, fds + n);
	unsigned long long as = ab_cgroup_rlimit_as(sb->cg);
	char text[64];
	snprintf(text, sizeof(text), "%lu %s", ab_cgroup_rlimit_nproc(sb->cg),
		 out ? SYNC_CGROUP_LEAVE : "stay");
	r = sync_send_fds_status(sync_fd, SYNC_CGROUP, (int32_t)(uint32_t)(as >> 32),
				 (int32_t)(uint32_t)as, fds, n + out, text);
	/* an init that failed while building the view is gone (EPIPE): its
	 * error is waiting on the socket, and the session reads it next */
	*gone = r == -EPIPE || r == -ECONNRESET;
	return r < 0 && !*gone ? ab_error_set(err, -r, "cannot start the sandbox") : 0;
}

/* The sandbox's network namespace, made while the init builds the view,
 * and sent to it (SYNC_NETNS), which enters it before its host name. */
static int send_net(struct sandbox *sb, int userns, int sync_fd, struct ab_error *err)
{
	if (userns < 0)
		return 0;
	cleanup_fd int net = userns_make_net(userns, err);
	if (net < 0)
		return net;
	sb->netns = fcntl(net, F_DUPFD_CLOEXEC, 3); /* -1: no port can be published */
	int r = sync_send_fd(sync_fd, SYNC_NETNS, net);
	/* an init that failed while building the view: as finish_cgroup */
	return r < 0 && r != -EPIPE && r != -ECONNRESET
		       ? ab_error_set(err, -r, "cannot start the sandbox")
		       : 0;
}

pid_t sandbox_clone(struct sandbox *sb, struct init_args *a, int *sync_out, struct ab_error *err)
{
	int pair[2];
	*sync_out = -1;
	int r = sync_pair(pair, err);
	if (r < 0)
		return r;
	a->cfg = &sb->cfg;
	a->plan = &sb->plan;
	a->envp = sb->envp;
	a->gitconfig = sb->gitconfig;
	a->secrets = sb->secrets;
	a->sync_fd = pair[1];
	/* decided here: in the child, geteuid() depends on whether the maps
	 * are written yet */
	a->by_root = geteuid() == 0;
	a->landlock_fd = -1;
	a->seccomp = sb->seccomp;
	a->cgroup = sb->cg;
	a->net_beside = userns_net_beside(&sb->cfg);
	bool placed;
	ab_stack_note(); /* the init trims its copy once set up */
	pid_t pid = clone_init(sb, a->net_beside, &placed);
	if (pid < 0) {
		r = clone_error(errno, err);
		close(pair[0]);
		close(pair[1]);
		return r;
	}
	if (pid == 0) {
		close(pair[0]);
		init_main(a);
	}
	close(pair[1]);
	/* opened while the init waits for GO, as the caller's still */
	cleanup_fd int userns = -1;
	if (a->net_beside) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		if ((userns = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
			r = ab_error_set(err, errno, "cannot open %s", path);
			kill_and_reap(pid);
			close(pair[0]);
			return r;
		}
	}
	/* those not yet scheduled are reaped when the plan is freed */
	view_plan_reap_helpers(&sb->plan, false);
	if (sb->plan.layer && (r = overlay_keep_for_checkpoints(&sb->plan, err)) < 0) {
		kill_and_reap(pid);
		close(pair[0]);
		return r;
	}
	view_plan_close_trees(&sb->plan); /* the init has its own copies */
	/* into the v2 cgroup before it runs anything: it waits for GO */
	r = ab_cgroup_attach(sb->cg, pid, placed, err);
	if (r == 0)
		r = userns_write_maps(pid, &sb->cfg, err);
	if (r == 0 && (r = sync_send(pair[0], SYNC_GO, 0, 0, NULL)) < 0)
		ab_error_set(err, -r, "cannot start the sandbox");
	bool gone = false;
	if (r == 0)
		r = finish_cgroup(sb, pid, pair[0], &gone, err);
	if (r == 0 && !gone)
		r = send_net(sb, userns, pair[0], err);
	if (r < 0) {
		kill_and_reap(pid);
		close(pair[0]);
		return r;
	}
	/* what crashed runs left, off the start's path: once the init has
	 * what it waits for (its cgroups, its network), so that a sweep of
	 * many sandboxes' groups (one /proc read per launcher beside it)
	 * runs beside the init's confinement instead of before it */
	ab_cgroup_reap_stale_beside(sb->cg, sb->cfg.cgroup_parent);
	*sync_out = pair[0];
	return pid;
}

static const char *how_name(enum ab_limit_how how)
{
	switch (how) {
	case AB_LIMIT_CGROUP:
		return "cgroup";
	case AB_LIMIT_RLIMIT:
		return "rlimit";
	case AB_LIMIT_UNAVAILABLE:
		return "unavailable";
	default:
		return "not set";
	}
}

/* A size as given: 256M, 2G, or bytes. */
static void size_text(char *out, size_t len, unsigned long long v)
{
	static const char units[] = "KMGT";
	int u = -1;
	while (u < 3 && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(out, len, "%llu", v);
	else
		snprintf(out, len, "%llu%c", v, units[u]);
}

/* The cause under a fallback's why ("RLIMIT_AS per process: CAUSE"). */
static const char *cause(const char *why)
{
	const char *c = strncmp(why, "RLIMIT_", 7) == 0 ? strstr(why, ": ") : NULL;
	return c ? c + 2 : why;
}

/* what[from..n) as "a, b and c" into out. */
static void join_limits(char *out, size_t size, char what[][128], size_t from, size_t n)
{
	out[0] = '\0';
	for (size_t i = from; i < n; i++)
		snprintf(out + strlen(out), size - strlen(out), "%s%s",
			 i == from    ? ""
			 : i + 1 == n ? " and "
				      : ", ",
			 what[i]);
}

/* Each limit against what was asked: one that was asked for and cannot
 * hold as asked (memory only per process, no CPU share, no pids bound
 * at all) refuses under --limits full and is said under best; a default
 * that cannot hold is said. The caller removes the cgroup on error. */
static int judge_limits(const struct ab_config *cfg, const struct ab_cgroup_status *st,
			struct ab_error *err)
{
	char mem[32], what[3][128];
	const char *why = NULL;
	size_t n = 0;
	/* best: a memory limit held per process is applied, weaker; not dropped */
	bool mem_weaker = cfg->memory && st->memory.how == AB_LIMIT_RLIMIT;
	size_text(mem, sizeof(mem), cfg->memory);
	if (cfg->memory && st->memory.how != AB_LIMIT_CGROUP) {
		snprintf(what[n++], sizeof(what[0]), "--memory %s (%s)", mem,
			 mem_weaker ? "a per-process RLIMIT_AS at most, not the sandbox's total"
				    : "no memory cgroup");
		why = cause(st->memory.why);
	}
	if (cfg->cpu_millis && st->cpu.how != AB_LIMIT_CGROUP) {
		snprintf(what[n++], sizeof(what[0]), "--cpus %g (no cpu controller)",
			 cfg->cpu_millis / 1000.0);
		why = why ? why : st->cpu.why;
	}
	bool pids_gone = cfg->pids && st->pids.how == AB_LIMIT_UNAVAILABLE;
	if (pids_gone && cfg->pids_set) {
		snprintf(what[n++], sizeof(what[0]), "--pids %lu (no pids cgroup, no RLIMIT_NPROC)",
			 cfg->pids);
		why = why ? why : cause(st->pids.why);
	}
	char line[sizeof(err->msg)];
	if (pids_gone && !cfg->pids_set && cfg->notice && !cfg->quiet) {
		snprintf(line, sizeof(line),
			 "the default --pids %lu cannot hold here: %.300s; fork bombs are not "
			 "stopped (docs/install.md, \"Cgroups and limits\")",
			 cfg->pids, st->pids.why);
		cfg->notice(line);
	}
	if (!n)
		return 0;
	char list[400], rest[400];
	join_limits(list, sizeof(list), what, 0, n);
	join_limits(rest, sizeof(rest), what, 1, n);
	if (!cfg->limits_best)
		return ab_error_plain(
			err, EPERM,
			"%s cannot hold as asked: %.300s; get a cgroup you may "
			"write (docs/install.md, \"Cgroups and limits\": a delegated "
			"cgroup, or --cgroup-parent with a group root made yours), or "
			"pass --limits best to run without %s",
			list, why, n > 1 ? "them" : "it");
	if (cfg->notice && !cfg->quiet) {
		/* the weaker memory limit (what[0]) apart from the dropped ones */
		if (mem_weaker && n > 1)
			snprintf(line, sizeof(line),
				 "--limits best: --memory %s only as a per-process RLIMIT_AS, not "
				 "the sandbox's total; running without %s: %.300s",
				 mem, rest, why);
		else if (mem_weaker)
			snprintf(line, sizeof(line),
				 "--limits best: --memory %s only as a per-process RLIMIT_AS, not "
				 "the sandbox's total: %.300s",
				 mem, why);
		else
			snprintf(line, sizeof(line), "--limits best: running without %s: %.300s",
				 list, why);
		cfg->notice(line);
	}
	return 0;
}

/* The cgroup's limits into the result, then judged (judge_limits) before
 * anything of a command runs. */
static int report_cgroup(const struct ab_config *cfg, struct ab_result *res,
			 const struct ab_cgroup *cg, struct ab_error *err)
{
	const struct ab_cgroup_status *st = ab_cgroup_status(cg);
	const struct {
		const struct ab_limit_status *ls;
		struct ab_limit_report *out;
	} limits[] = {
		{&st->memory, &res->memory},
		{&st->cpu, &res->cpu},
		{&st->pids, &res->pids},
	};
	res->cgroup_version = st->version;
	snprintf(res->cgroup_path, sizeof(res->cgroup_path), "%s", st->path);
	for (size_t i = 0; i < AB_ARRAY_SIZE(limits); i++) {
		limits[i].out->how = how_name(limits[i].ls->how);
		snprintf(limits[i].out->why, sizeof(limits[i].out->why), "%s", limits[i].ls->why);
	}
	return judge_limits(cfg, st, err);
}

/* The sandbox's cgroup: complete where the host has cgroup v2 (the
 * limits are reported here); on v1 hierarchies only what the clone needs
 * (finish_cgroup does the rest, and reaps what crashed runs left). */
static int make_cgroup(const struct ab_config *cfg, struct ab_result *res, struct ab_cgroup **cg,
		       struct ab_error *err)
{
	struct ab_limits lim = {cfg->memory, cfg->cpu_millis, cfg->pids, cfg->exit_after_run,
				!(cfg->isolation_missing & AB_MISSING_NAMESPACES)};
	int r = ab_cgroup_create(cfg->cgroup_parent, &lim, cg, err);
	if (r == 0 && !ab_cgroup_pending(*cg))
		r = report_cgroup(cfg, res, *cg, err);
	return r;
}

/* Pass each line of text to the caller's notice callback. */
static void notify_lines(const struct ab_config *cfg, const char *text)
{
	if (!cfg->notice || !text)
		return;
	char line[512];
	for (const char *p = text; *p;) {
		size_t n = strcspn(p, "\n");
		snprintf(line, sizeof(line), "%.*s", (int)n, p);
		if (n)
			cfg->notice(line);
		p += n + (p[n] == '\n');
	}
}

unsigned long long sandbox_timeout(const struct ab_config *cfg, unsigned long long t)
{
	unsigned long long max = cfg->max_timeout_ms;
	return max && (t == 0 || t > max) ? max : t;
}

/* The session's default timeout, clamped, with a notice when it was. */
static unsigned long long effective_timeout(const struct ab_config *cfg)
{
	unsigned long long t = sandbox_timeout(cfg, cfg->timeout_ms);
	if (t != cfg->timeout_ms && cfg->notice) {
		char line[160];
		snprintf(line, sizeof(line), "--timeout clamped to --max-timeout (%llu ms)", t);
		cfg->notice(line);
	}
	return t;
}

static int check_rlimits(struct ab_config *cfg, struct ab_error *err)
{
	for (size_t i = 0; i < cfg->n_rlimits; i++) {
		struct rlimit cur;
		if (getrlimit(cfg->rlimits[i].resource, &cur) < 0)
			return ab_error_set(err, errno, "--rlimit %s",
					    ab_rlimit_name(cfg->rlimits[i].resource));
		bool above = cur.rlim_max != RLIM_INFINITY && cfg->rlimits[i].value > cur.rlim_max;
		if (above && !cfg->rlimits[i].by_user)
			cfg->rlimits[i].value = cur.rlim_max; /* a default fits what there is */
		/* nobody in the sandbox may raise a hard limit */
		else if (above)
			return ab_error_plain(err, EPERM,
					      "--rlimit %s=%llu: above the hard limit %llu this "
					      "process has",
					      ab_rlimit_name(cfg->rlimits[i].resource),
					      cfg->rlimits[i].value,
					      (unsigned long long)cur.rlim_max);
	}
	return 0;
}

/* Started by root without --host-uid: the launcher's idmapped copies of
 * the sources (idmap.h). A workspace whose filesystem cannot be idmapped
 * and that root does not own makes the sandbox run as its owner instead,
 * as agentbox did before idmapped mounts. */
static int plan_idmaps(struct sandbox *sb, char **notices, struct ab_error *err)
{
	struct ab_config *cfg = &sb->cfg;
	if (!ab_config_idmaps(cfg))
		return 0;
	int r = idmap_plan_trees(&sb->plan, cfg->host_uid, cfg->host_gid, notices, err);
	/* a --rootfs's own are planned with it (rootfs.c) */
	if (r == 0)
		return cfg->rootfs || cfg->image
			       ? 0
			       : idmap_plan_id_files(&sb->plan, cfg->uid, cfg->gid, cfg->home, err);
	struct ab_error why = *err;
	/* EPERM: no CAP_SYS_ADMIN (root in a container), whatever the filesystem */
	if ((r != -EOPNOTSUPP && r != -EPERM) || ab_config_run_as_owner(cfg, err) < 0) {
		*err = why;
		return r;
	}
	char line[sizeof(why.msg) + 80];
	if (r == -EPERM)
		snprintf(line, sizeof(line),
			 "cannot idmap the workspace '%s': %s; runs as its owner, host uid %u, "
			 "instead",
			 cfg->workspace, idmap_eperm_reason(), (unsigned)cfg->host_uid);
	else
		snprintf(line, sizeof(line),
			 "%s; runs as the workspace's owner, host uid %u, instead", why.msg,
			 (unsigned)cfg->host_uid);
	free(*notices);
	*notices = strdup(line);
	view_plan_free(&sb->plan);
	return view_plan_build(cfg, &sb->protect, &sb->plan, err);
}

int sandbox_prepare(struct ab_config *cfg, struct sandbox *sb, struct ab_error *err)
{
	memset(sb, 0, sizeof(*sb));
	sb->watch.fd = -1;
	sb->netns = -1;
	view_plan_init(&sb->plan);
	int r = ab_config_finish(cfg, err);
	if (r == 0)
		r = check_rlimits(cfg, err);
	if (r < 0)
		return r;
	sb->cfg = *cfg;
	sb->cfg.timeout_ms = sb->limits.timeout_ms = effective_timeout(cfg);
	cfg = &sb->cfg;
	r = ab_isolation_decide(cfg, err); /* --isolation best */
	if (r < 0)
		return r;
	/* everything that checks the caller's input comes before the cgroup,
	 * the only thing made on the host before the sandbox exists */
	char *notices = NULL;
	cleanup_free char *idmap_notices = NULL;
	r = protect_scan(cfg, &sb->protect, err);
	if (r == 0)
		r = view_plan_build(cfg, &sb->protect, &sb->plan, err);
	if (r == 0)
		r = plan_idmaps(sb, &idmap_notices, err);
	if (r == 0)
		r = ab_seccomp_load(cfg->seccomp, &sb->seccomp, &notices, err);
	if (r == 0)
		r = ab_env_build(cfg, environ, &sb->envp, err);
	/* --net secret=: NAME stays here, the sandbox gets a placeholder */
	if (r == 0 && cfg->net == AB_NET_PROXY)
		r = net_secrets_new(cfg, environ, &sb->secrets, err);
	if (r == 0 && sb->secrets)
		r = net_secrets_env(sb->secrets, &sb->envp, err);
	/* the proxy's helper, confined, before the sandbox: it makes the CA
	 * (net/netproc.h) */
	if (r == 0 && cfg->net == AB_NET_PROXY)
		r = netproc_start(cfg, sb->secrets, &sb->netproc, err);
	/* with namespaces $HOME is the sandbox's tmpfs, else the host's own */
	if (r == 0 && !(cfg->isolation_missing & AB_MISSING_NAMESPACES))
		sb->gitconfig = gitid_read();
	/* the protected files are bound in place (an overlay binds its own) */
	if (r == 0 && !(cfg->isolation_missing & AB_MISSING_NAMESPACES) && !sb->plan.layer)
		protect_watch_start(cfg, &sb->protect, &sb->watch);
	if (r == 0)
		r = make_cgroup(cfg, &sb->limits, &sb->cg, err);
	if (r == 0) {
		notify_lines(cfg, idmap_notices);
		notify_lines(cfg, notices);
		if (!sb->seccomp)
			notify_lines(cfg,
				     "--seccomp none: the command runs without a syscall filter");
		if (cfg->no_landlock)
			notify_lines(cfg, "--landlock off: no Landlock layer under the mounts");
		if (cfg->net == AB_NET_HOST)
			notify_lines(cfg, "--net host: the command shares the host's network");
	}
	free(notices);
	if (r < 0) {
		sandbox_release(sb);
		/* an idmapping's user namespace refused */
		ab_isolation_explain(cfg, AB_MISSING_NAMESPACES, err);
	}
	return r;
}

void sandbox_release(struct sandbox *sb)
{
	ab_env_free(sb->envp);
	if (sb->netns >= 0)
		close(sb->netns);
	sb->netns = -1;
	netproc_free(sb->netproc);
	sb->netproc = NULL;
	net_secrets_free(sb->secrets);
	sb->secrets = NULL;
	ab_cgroup_destroy(sb->cg);
	ab_seccomp_free(sb->seccomp);
	view_plan_free(&sb->plan);
	protect_state_free(&sb->protect);
	protect_watch_free(&sb->watch);
	free(sb->gitconfig);
	sb->gitconfig = NULL;
	sb->envp = NULL;
	sb->cg = NULL;
	sb->seccomp = NULL;
}

/* The limits as applied, into a result. */
void sandbox_limits_into(const struct sandbox *sb, struct ab_result *res)
{
	res->timeout_ms = sb->limits.timeout_ms;
	res->memory = sb->limits.memory;
	res->cpu = sb->limits.cpu;
	res->pids = sb->limits.pids;
	res->cgroup_version = sb->limits.cgroup_version;
	res->isolation_missing = sb->cfg.isolation_missing;
	memcpy(res->cgroup_path, sb->limits.cgroup_path, sizeof(res->cgroup_path));
}
