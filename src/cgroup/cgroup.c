/* The sandbox's cgroup (cgroup.h). libcgroup finds the hierarchies (v1
 * controllers, hybrid, or the unified v2 mount); the cgroup files are then
 * written directly, because the files this needs most (cgroup.kill,
 * cgroup.events, memory.events, memory.peak, cpu.stat, subtree_control for
 * a delegated v2 subtree) are outside what libcgroup 2.0 wraps.
 *
 * libcgroup is asked where the hierarchies are only when they are not
 * where systemd puts them (its first cgroup_init() costs milliseconds, paid
 * by every run otherwise).
 *
 * Layouts:
 *  - v2 with controllers: one directory; memory.max, memory.swap.max,
 *    cpu.max, pids.max; unprivileged users get one beneath their own
 *    (systemd-delegated) cgroup, or in a scope systemd makes for them
 *    (cgroup_delegate.c); the init is cloned straight into it.
 *  - v1 or hybrid: a directory in each of memory, cpu, cpuacct and pids
 *    (and freezer, for a session: pause and resume, cgroup_freeze.c),
 *    plus one in a controller-less cgroup2 mount when there is one, which
 *    tracks every process for kill and CPU accounting.
 *  - none: no cgroup can be written; memory falls back to RLIMIT_AS, the
 *    other limits are reported unavailable with the reason. */
#include "cgroup/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libcgroup.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup_delegate.h"
#include "cgroup/cgroup_int.h"
#include "cgroup/cgroupfs.h"
#include "util/error.h"
#include "util/util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static const char *const h_names[H_COUNT] = {"freezer", "memory", "cpu",
					     "cpuacct", "pids",	  "unified"};

/* "key value" lines: the value of key, or -1. */
static long long keyed(const char *buf, const char *key)
{
	size_t k = strlen(key);
	for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, k) == 0 && p[k] == ' ')
			return atoll(p + k + 1);
	return -1;
}

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

/* libcgroup's view of the mounts, asked only when the usual places do
 * not answer: its first cgroup_init() costs milliseconds. */
static bool libcgroup_mount(const char *ctrl, char *out, size_t len)
{
	static int ready = -1;
	if (ready < 0)
		ready = cgroup_init() == 0;
	char *mp = NULL;
	if (!ready || cgroup_get_subsys_mount_point(ctrl, &mp) != 0 || !mp)
		return false;
	snprintf(out, len, "%s", mp);
	free(mp);
	return true;
}

/* The mount point of a hierarchy: /sys/fs/cgroup/<controller> as every
 * systemd host lays it out, else wherever libcgroup finds it; the unified
 * mount by its filesystem type. */
bool ab_cg_find_mount(int h, char *out, size_t len)
{
	struct statfs sf;
	if (ab_cgfs_faked()) {
		snprintf(out, len, "%s", ab_cgfs_fake_root());
		return h == H_UNIFIED;
	}
	if (h == H_UNIFIED) {
		const char *cands[] = {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"};
		for (size_t i = 0; i < AB_ARRAY_SIZE(cands); i++) {
			if (statfs(cands[i], &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC) {
				snprintf(out, len, "%s", cands[i]);
				return true;
			}
		}
		return false;
	}
	snprintf(out, len, "/sys/fs/cgroup/%s", h_names[h]);
	if (statfs(out, &sf) == 0)
		return sf.f_type == CGROUP_SUPER_MAGIC;
	/* a pure v2 host has no such directory: no v1 controller there */
	if (statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
		return false;
	return libcgroup_mount(h_names[h], out, len) && statfs(out, &sf) == 0 &&
	       sf.f_type == CGROUP_SUPER_MAGIC;
}

/* v2 with controllers: the caller's parent, or below the caller's own
 * cgroup when it may write there (a delegated subtree). */
bool ab_cg_v2_has_controllers(const char *root)
{
	char buf[512];
	return ab_cgfs_read(root, "cgroup.controllers", buf, sizeof(buf)) == 0 &&
	       strstr(buf, "memory") && strstr(buf, "pids");
}

static void set_limit(struct ab_cgroup *cg, struct ab_limit_status *s, const char *dir,
		      const char *file, const char *value, const char *what)
{
	int r = dir[0] ? ab_cgfs_write(dir, file, value) : -ENOENT;
	if (r == 0) {
		ab_cg_set_how(s, AB_LIMIT_CGROUP, NULL);
		return;
	}
	char why[200];
	snprintf(why, sizeof(why), "cannot write %s/%s: %s", dir[0] ? dir : what, file,
		 strerror(-r));
	ab_cg_set_how(s, AB_LIMIT_UNAVAILABLE, why);
	(void)cg;
}

static void apply_v2(struct ab_cgroup *cg, const struct ab_limits *lim)
{
	const char *d = cg->dir[H_UNIFIED];
	char v[64];
	if (lim->memory) {
		snprintf(v, sizeof(v), "%llu", lim->memory);
		set_limit(cg, &cg->st.memory, d, "memory.max", v, "memory");
		if (cg->st.memory.how == AB_LIMIT_CGROUP)
			ab_cgfs_write(d, "memory.swap.max", "0"); /* absent without swap */
	}
	if (lim->cpu_millis) {
		snprintf(v, sizeof(v), "%u 100000", lim->cpu_millis * 100);
		set_limit(cg, &cg->st.cpu, d, "cpu.max", v, "cpu");
	}
	if (lim->pids) {
		snprintf(v, sizeof(v), "%lu", lim->pids);
		set_limit(cg, &cg->st.pids, d, "pids.max", v, "pids");
	}
}

static void apply_v1(struct ab_cgroup *cg, const struct ab_limits *lim)
{
	char v[64];
	if (lim->memory) {
		snprintf(v, sizeof(v), "%llu", lim->memory);
		set_limit(cg, &cg->st.memory, cg->dir[H_MEMORY], "memory.limit_in_bytes", v,
			  "memory");
		/* swap not beyond it, where swap accounting exists */
		if (cg->st.memory.how == AB_LIMIT_CGROUP)
			ab_cgfs_write(cg->dir[H_MEMORY], "memory.memsw.limit_in_bytes", v);
	}
	if (lim->cpu_millis) {
		snprintf(v, sizeof(v), "%u", lim->cpu_millis * 100);
		set_limit(cg, &cg->st.cpu, cg->dir[H_CPU], "cpu.cfs_quota_us", v, "cpu");
	}
	if (lim->pids) {
		snprintf(v, sizeof(v), "%lu", lim->pids);
		set_limit(cg, &cg->st.pids, cg->dir[H_PIDS], "pids.max", v, "pids");
	}
}

static const char *procs_dir(const struct ab_cgroup *cg);

/* Whether this launcher may put a process into root+rel/... of the
 * controller-less cgroup2 beside v1 hierarchies: moving a process (and
 * clone3 into a cgroup) needs write access to cgroup.procs of the common
 * ancestor of its cgroup and the target (cgroup_attach_permissions). An
 * unprivileged user with a v1 delegation usually lacks it, and the kernel
 * says so only after the global lock a move by pid takes, which waits for
 * an RCU grace period: 10-20 ms of every start, for an EACCES. */
static bool may_enter_unified(const char *root, const char *rel)
{
	if (geteuid() == 0)
		return true;
	char own[512];
	if (!ab_cgfs_own_v2(own, sizeof(own)))
		return true; /* cannot tell: the move says */
	/* the longest common prefix of whole components */
	size_t n = 0;
	for (size_t i = 0;; i++) {
		bool end_own = own[i] == '\0' || own[i] == '/';
		bool end_rel = rel[i] == '\0' || rel[i] == '/';
		if (end_own && end_rel)
			n = i;
		if (own[i] != rel[i] || own[i] == '\0')
			break;
	}
	char path[1200];
	snprintf(path, sizeof(path), "%s%.*s/cgroup.procs", root, (int)n, rel);
	return access(path, W_OK) == 0;
}

/* What ab_cgroup_finish makes the v1 hierarchies' groups of. */
struct cg_pending {
	bool have[H_COUNT];
	char roots[H_COUNT][512];
	char rel[512], name[96], why[200];
	const char *parent;
	struct ab_limits lim;
};

static char no_dir[1]; /* a handle's "" directory: never written */

static void dir_clear(struct ab_cgroup *cg, int h)
{
	if (cg->dir[h] != no_dir)
		free(cg->dir[h]);
	cg->dir[h] = no_dir;
}

/* ab_cg_make_dir, into the handle's directory h. */
static int make_dir(struct ab_cgroup *cg, int h, const char *root, const char *rel,
		    const char *name)
{
	char d[1024];
	int r = ab_cg_make_dir(d, sizeof(d), root, rel, name, &cg->lock_fd[h]);
	if (r < 0)
		return r;
	char *copy = strdup(d);
	if (!copy) {
		rmdir(d);
		ab_close_keep_errno(cg->lock_fd[h]);
		cg->lock_fd[h] = -1;
		return -ENOMEM;
	}
	dir_clear(cg, h);
	cg->dir[h] = copy;
	return 0;
}

/* Where a v1 hierarchy's cgroup was made: its tasks file for the init to
 * enter by itself; the controller-less v2 one beside them (hybrid): its
 * directory for clone3. What cannot be opened is left to
 * ab_cgroup_attach. */
static void open_v1_entries(struct ab_cgroup *cg)
{
	if (ab_cgfs_faked())
		return;
	for (int h = 0; h < H_COUNT; h++) {
		if (!cg->dir[h][0] || (h == H_CPUACCT && strcmp(cg->dir[h], cg->dir[H_CPU]) == 0))
			continue;
		if (h == H_UNIFIED) {
			if (cg->clone_fd < 0)
				cg->clone_fd = open(cg->dir[h], O_PATH | O_DIRECTORY | O_CLOEXEC);
			continue;
		}
		char path[1100];
		snprintf(path, sizeof(path), "%s/tasks", cg->dir[h]);
		cg->self_fd[h] = open(path, O_WRONLY | O_CLOEXEC);
	}
}

/* init_leaves: where the init goes once the command is gone, in each
 * hierarchy it entered by itself: the parent, or the root of the
 * hierarchy where the parent is agentbox's shared group. All or none:
 * one it could not leave would keep every cgroup until its end anyway. */
static void open_v1_exits(struct ab_cgroup *cg, const struct cg_pending *p)
{
	for (int h = 0; h < H_UNIFIED; h++) {
		if (cg->self_fd[h] < 0)
			continue;
		char path[1100];
		if (cg->own_parent)
			snprintf(path, sizeof(path), "%s/tasks", p->roots[h]);
		else
			snprintf(path, sizeof(path), "%.*s/tasks",
				 (int)(strrchr(cg->dir[h], '/') - cg->dir[h]), cg->dir[h]);
		cg->leave_fd[h] = open(path, O_WRONLY | O_CLOEXEC);
		if (cg->leave_fd[h] >= 0)
			continue;
		for (int i = 0; i < H_COUNT; i++)
			ab_close_keep_errno(cg->leave_fd[i]);
		for (int i = 0; i < H_COUNT; i++)
			cg->leave_fd[i] = -1;
		return;
	}
}

static unsigned counter;

static int create_done(struct ab_cgroup *cg, const char *parent, const struct ab_limits *lim,
		       const char *why, struct ab_cgroup **out, struct ab_error *err);

int ab_cgroup_create(const char *parent, const struct ab_limits *lim, struct ab_cgroup **out,
		     struct ab_error *err)
{
	struct ab_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return ab_error_set(err, ENOMEM, "making the sandbox's cgroup");
	cg->oom_fd = cg->clone_fd = cg->pids_fd = -1;
	for (int h = 0; h < H_COUNT; h++) {
		cg->self_fd[h] = cg->leave_fd[h] = cg->lock_fd[h] = -1;
		cg->dir[h] = no_dir;
	}
	cg->st.version = "none";
	char name[96];
	ab_cg_name(name, sizeof(name), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));

	char roots[H_COUNT][512] = {{0}};
	bool have[H_COUNT];
	for (int h = 0; h < H_COUNT; h++)
		have[h] = ab_cg_find_mount(h, roots[h], sizeof(roots[h]));
	char why[200] = "no cgroup hierarchy is mounted";
	int r;

	if (have[H_UNIFIED] && ab_cg_v2_has_controllers(roots[H_UNIFIED])) {
		char rel[512], own[512];
		const char *root = roots[H_UNIFIED];
		r = 0;
		if (parent) {
			/* the launcher moves out of it only if it is in it */
			snprintf(rel, sizeof(rel), "%s", parent);
			bool mine = ab_cgfs_own_v2(own, sizeof(own)) && strcmp(own, rel) == 0;
			char pdir[1024];
			snprintf(pdir, sizeof(pdir), "%s%s", root, rel);
			ab_cg_v2_prepare(pdir, name, mine);
		} else if (geteuid() == 0) {
			/* root's sandboxes share one group, made (and controllers
			 * handed down from the root, which systemd usually has done)
			 * when missing, and left in place (as a v1 one is, below) */
			snprintf(rel, sizeof(rel), "/agentbox");
			cg->own_parent = true;
			char pdir[1024];
			snprintf(pdir, sizeof(pdir), "%s%s", root, rel);
			ab_cg_enable_controllers(root);
			if (mkdir(pdir, 0755) == 0 || errno == EEXIST)
				ab_cg_enable_controllers(pdir);
		} else
			r = ab_cg_v2_user_parent(root, name, rel, sizeof(rel), why, sizeof(why));
		if (strcmp(rel, "/") == 0)
			rel[0] = '\0';
		if (r == 0 && (r = make_dir(cg, H_UNIFIED, root, rel, name)) < 0)
			snprintf(why, sizeof(why), "cannot create a cgroup in %.60s%.60s: %.30s",
				 root, rel, strerror(-r));
		if (r == 0) {
			cg->v2 = true;
			cg->st.version = "v2";
			snprintf(cg->st.path, sizeof(cg->st.path), "%.400s/%.96s", rel, name);
			apply_v2(cg, lim);
			ab_cg_fall_back(cg, lim,
					"the v2 controller is not enabled for this cgroup");
			if (!ab_cgfs_faked())
				cg->clone_fd =
					open(cg->dir[H_UNIFIED], O_PATH | O_DIRECTORY | O_CLOEXEC);
			*out = cg;
			return 0;
		}
	} else if (have[H_MEMORY] || have[H_PIDS] || have[H_CPU]) {
		/* now only the controller-less cgroup2, which clone3 needs;
		 * the v1 ones in ab_cgroup_finish. Root's shared group is made
		 * by the first run and kept: removing it after each run cost
		 * the next one a mkdir per hierarchy (~0.1 ms at an agent's
		 * cadence). */
		const char *rel = parent ? parent : "/agentbox";
		cg->own_parent = !parent;
		struct cg_pending *p = cg->pending = calloc(1, sizeof(*p));
		if (!p) {
			ab_cgroup_destroy(cg);
			*out = NULL;
			return ab_error_set(err, ENOMEM, "making the sandbox's cgroup");
		}
		p->parent = parent;
		p->lim = *lim;
		memcpy(p->have, have, sizeof(have));
		memcpy(p->roots, roots, sizeof(roots));
		snprintf(p->rel, sizeof(p->rel), "%s", rel);
		snprintf(p->name, sizeof(p->name), "%s", name);
		snprintf(p->why, sizeof(p->why), "%s", why);
		if (have[H_UNIFIED] && !lim->init_leaves &&
		    may_enter_unified(roots[H_UNIFIED], rel) &&
		    make_dir(cg, H_UNIFIED, roots[H_UNIFIED], rel, name) == 0 && !ab_cgfs_faked())
			cg->clone_fd = open(cg->dir[H_UNIFIED], O_PATH | O_DIRECTORY | O_CLOEXEC);
		*out = cg;
		return 0;
	}
	return create_done(cg, parent, lim, why, out, err);
}

/* The end of a creation: a --cgroup-parent that gave nothing is an error;
 * else the fallbacks of what could not be applied. */
static int create_done(struct ab_cgroup *cg, const char *parent, const struct ab_limits *lim,
		       const char *why, struct ab_cgroup **out, struct ab_error *err)
{
	if (parent && !procs_dir(cg)) {
		/* asked for by name: a parent that does not work is an error, not
		 * a silent fallback */
		int r = ab_error_plain(err, EACCES, "--cgroup-parent %s: %s", parent, why);
		ab_cgroup_destroy(cg);
		*out = NULL;
		return r;
	}
	ab_cg_fall_back(cg, lim, why);
	*out = cg;
	return 0;
}

int ab_cgroup_finish(struct ab_cgroup **cgp, struct ab_error *err)
{
	struct ab_cgroup *cg = *cgp;
	if (!cg || !cg->pending)
		return 0;
	struct cg_pending *p = cg->pending;
	cg->pending = NULL;
	const char *rel = p->rel, *name = p->name, *parent = p->parent;
	char(*roots)[512] = p->roots;
	const bool *have = p->have;
	bool any = cg->dir[H_UNIFIED][0] != '\0';
	/* root's CPU time comes from the controller-less cgroup2 beside
	 * (cpu.stat, ab_cgroup_stats): a cpuacct cgroup of its own would
	 * cost a start two mkdirs and its end two rmdirs for nothing */
	bool no_cpuacct = !parent && cg->dir[H_UNIFIED][0];
	for (int h = 0; h < H_UNIFIED; h++) {
		if (!have[h] || (h == H_CPUACCT && strcmp(roots[h], roots[H_CPU]) == 0))
			continue; /* cpu,cpuacct mounted together: one directory */
		if (h == H_CPUACCT && no_cpuacct)
			continue;
		/* one command: its CPU time comes from its shim's wait4, and
		 * only the session's stats read the cgroup's; a cpu cgroup
		 * without --cpus would limit nothing */
		if (p->lim.init_leaves && (h == H_CPUACCT || (h == H_CPU && !p->lim.cpu_millis)))
			continue;
		/* one command is never paused; a session that cannot have a
		 * freezer group is refused a pause, and that alone */
		if (h == H_FREEZER && p->lim.init_leaves)
			continue;
		int r = make_dir(cg, h, roots[h], rel, name);
		if (r == 0 && h != H_FREEZER)
			any = true;
		else if (h == H_FREEZER)
			continue;
		else
			snprintf(p->why, sizeof(p->why),
				 "cannot create a cgroup in %.60s%.60s: %.40s", roots[h], rel,
				 strerror(-r));
	}
	if (any) {
		cg->st.version = "v1";
		snprintf(cg->st.path, sizeof(cg->st.path), "%.400s/%.96s", rel, name);
		char *copy;
		if (cg->dir[H_CPUACCT][0] == '\0' && cg->dir[H_CPU][0] && !no_cpuacct &&
		    (copy = strdup(cg->dir[H_CPU]))) {
			dir_clear(cg, H_CPUACCT);
			cg->dir[H_CPUACCT] = copy;
		}
		apply_v1(cg, &p->lim);
		open_v1_entries(cg);
		if (p->lim.init_leaves)
			open_v1_exits(cg, p);
	}
	char why[200];
	snprintf(why, sizeof(why), "%s", p->why);
	struct ab_limits lim = p->lim;
	free(p);
	return create_done(cg, parent, &lim, why, cgp, err);
}

const struct ab_cgroup_status *ab_cgroup_status(const struct ab_cgroup *cg)
{
	return &cg->st;
}

const char *ab_cgroup_v2_dir(const struct ab_cgroup *cg)
{
	return cg && cg->dir[H_UNIFIED][0] ? cg->dir[H_UNIFIED] : NULL;
}

int ab_cgroup_clone_fd(const struct ab_cgroup *cg)
{
	return cg ? cg->clone_fd : -1;
}

size_t ab_cgroup_entry_fds(const struct ab_cgroup *cg, int *fds)
{
	size_t n = 0;
	for (int h = 0; cg && h < H_COUNT; h++)
		if (cg->self_fd[h] >= 0)
			fds[n++] = cg->self_fd[h];
	return n;
}

size_t ab_cgroup_leave_fds(const struct ab_cgroup *cg, int *fds)
{
	size_t n = 0;
	for (int h = 0; cg && h < H_COUNT; h++)
		if (cg->self_fd[h] >= 0 && cg->leave_fd[h] >= 0)
			fds[n++] = cg->leave_fd[h];
	return n;
}

/* the init's tasks files to leave by (a process of its own: a copy) */
static int held_leave[H_COUNT] = {-1, -1, -1, -1, -1, -1};
static size_t n_held_leave;

void ab_cgroup_hold_leave(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (n_held_leave < H_COUNT)
			held_leave[n_held_leave++] = fds[i];
		else
			close(fds[i]);
}

void ab_cgroup_leave(void)
{
	/* best effort: one not left only makes the launcher wait for our end */
	for (size_t i = 0; i < n_held_leave; i++) {
		ssize_t w = write(held_leave[i], "0", 1);
		(void)w;
		close(held_leave[i]);
		held_leave[i] = -1;
	}
	n_held_leave = 0;
}

int ab_cgroup_enter(const int *fds, size_t n, struct ab_error *err)
{
	for (size_t i = 0; i < n; i++) {
		if (write(fds[i], "0", 1) == 1)
			continue;
		int e = errno;
		/* which one: the tasks file's path, as the kernel names it */
		char link[64], path[512];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fds[i]);
		ssize_t len = readlink(link, path, sizeof(path) - 1);
		path[len > 0 ? len : 0] = '\0';
		return ab_error_set(err, e, "cannot enter the sandbox's cgroup%s%s",
				    len > 0 ? " through " : "", path);
	}
	return 0;
}

bool ab_cgroup_pending(const struct ab_cgroup *cg)
{
	return cg && cg->pending;
}

int ab_cgroup_attach(struct ab_cgroup *cg, pid_t pid, bool placed, struct ab_error *err)
{
	char v[32];
	snprintf(v, sizeof(v), "%d", (int)pid);
	for (int h = 0; cg && h < H_COUNT; h++) {
		if (!cg->dir[h][0] || (h == H_CPUACCT && strcmp(cg->dir[h], cg->dir[H_CPU]) == 0) ||
		    cg->self_fd[h] >= 0 || (placed && h == H_UNIFIED))
			continue;
		int r = ab_cgfs_write(cg->dir[h], "cgroup.procs", v);
		if (r < 0 && h == H_UNIFIED && !cg->v2) {
			/* the controller-less mount only tracks processes; moving
			 * into it needs the common ancestor's cgroup.procs, which
			 * an unprivileged user with a v1 delegation may lack */
			rmdir(cg->dir[h]);
			dir_clear(cg, h);
			ab_close_keep_errno(cg->lock_fd[h]);
			cg->lock_fd[h] = -1;
			continue;
		}
		if (r < 0)
			return ab_error_set(err, -r, "cannot move the sandbox into %s", cg->dir[h]);
	}
	return 0;
}

/* The directory that lists every process: unified (v2 or the hybrid's
 * controller-less mount) where there is one, else pids or memory. */
static const char *procs_dir(const struct ab_cgroup *cg)
{
	static const int order[] = {H_UNIFIED, H_PIDS, H_MEMORY, H_CPU, H_FREEZER};
	for (size_t i = 0; i < AB_ARRAY_SIZE(order); i++)
		if (cg->dir[order[i]][0])
			return cg->dir[order[i]];
	return NULL;
}

/* sig to every process in the cgroup; SIGKILL through cgroup.kill where the
 * kernel has it (5.14). */
static int cgroup_signal_all(struct ab_cgroup *cg, int sig)
{
	const char *d = cg ? procs_dir(cg) : NULL;
	if (!d)
		return 0;
	if (sig == SIGKILL && cg->dir[H_UNIFIED][0] &&
	    ab_cgfs_write(cg->dir[H_UNIFIED], "cgroup.kill", "1") == 0)
		return 0;
	char buf[65536];
	if (ab_cgfs_read(d, "cgroup.procs", buf, sizeof(buf)) < 0)
		return 0;
	for (char *p = buf; *p;) {
		pid_t pid = (pid_t)strtol(p, &p, 10);
		if (pid > 0)
			kill(pid, sig);
		while (*p == '\n')
			p++;
	}
	return 0;
}

/* The count under key in the events file held open at *fd, opened from
 * path on the first call (nothing to open when path is empty); 0 when it
 * cannot be read. A session asks before and after every command: the file
 * stays open (a cgroupfs file reads afresh from offset 0), which spares
 * the launcher a path walk through cgroupfs per command. */
static unsigned long long events_count(int *fd, const char *path, const char *key)
{
	if (*fd < 0 && (!path[0] || (*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0))
		return 0;
	char buf[1024];
	ssize_t n = pread(*fd, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return 0;
	buf[n] = '\0';
	long long v = keyed(buf, key);
	return v > 0 ? (unsigned long long)v : 0;
}

/* The memory controller's files, by cgroup version. */
struct memory_files {
	int h; /* the hierarchy */
	const char *events, *current, *peak;
};

static const struct memory_files memory_v2 = {H_UNIFIED, "memory.events", "memory.current",
					      "memory.peak"};
static const struct memory_files memory_v1 = {H_MEMORY, "memory.oom_control",
					      "memory.usage_in_bytes", "memory.max_usage_in_bytes"};

unsigned long long ab_cgroup_oom_kills(struct ab_cgroup *cg)
{
	if (!cg || !procs_dir(cg))
		return 0;
	const struct memory_files *mf = cg->v2 ? &memory_v2 : &memory_v1;
	char path[1200] = "";
	if (cg->oom_fd < 0 && cg->dir[mf->h][0])
		snprintf(path, sizeof(path), "%s/%s", cg->dir[mf->h], mf->events);
	return events_count(&cg->oom_fd, path, "oom_kill");
}

unsigned long long ab_cgroup_pids_refused(struct ab_cgroup *cg)
{
	if (!cg || cg->st.pids.how != AB_LIMIT_CGROUP)
		return 0;
	const char *d = cg->v2 ? cg->dir[H_UNIFIED] : cg->dir[H_PIDS];
	char path[1200] = "";
	if (cg->pids_fd < 0 && d[0])
		snprintf(path, sizeof(path), "%s/pids.events", d);
	return events_count(&cg->pids_fd, path, "max");
}

int ab_cgroup_stats(struct ab_cgroup *cg, struct ab_cgroup_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!cg || !procs_dir(cg))
		return -ENOENT;
	char buf[4096];
	st->memory_current = st->pids_current = -1;
	const struct memory_files *mf = cg->v2 ? &memory_v2 : &memory_v1;
	const char *d = cg->dir[mf->h];
	if (d[0]) {
		if (ab_cgfs_read(d, mf->events, buf, sizeof(buf)) == 0 &&
		    keyed(buf, "oom_kill") > 0)
			st->oom_kills = (unsigned long long)keyed(buf, "oom_kill");
		if (ab_cgfs_read(d, mf->current, buf, sizeof(buf)) == 0)
			st->memory_current = strtoll(buf, NULL, 10);
		if (ab_cgfs_read(d, mf->peak, buf, sizeof(buf)) == 0) {
			st->have_memory_peak = true;
			st->memory_peak = strtoull(buf, NULL, 10);
		}
	}
	st->oom_killed = st->oom_kills > 0;
	const char *pd = cg->dir[cg->v2 ? H_UNIFIED : H_PIDS];
	if (pd[0] && ab_cgfs_read(pd, "pids.current", buf, sizeof(buf)) == 0)
		st->pids_current = strtoll(buf, NULL, 10);
	/* cpu.stat works even on a controller-less cgroup2 mount */
	if (cg->dir[H_UNIFIED][0] &&
	    ab_cgfs_read(cg->dir[H_UNIFIED], "cpu.stat", buf, sizeof(buf)) == 0 &&
	    keyed(buf, "user_usec") >= 0) {
		st->have_cpu = true;
		st->cpu_user_us = (unsigned long long)keyed(buf, "user_usec");
		st->cpu_system_us = (unsigned long long)keyed(buf, "system_usec");
	} else if (cg->dir[H_CPUACCT][0] &&
		   ab_cgfs_read(cg->dir[H_CPUACCT], "cpuacct.stat", buf, sizeof(buf)) == 0) {
		long hz = sysconf(_SC_CLK_TCK);
		st->have_cpu = true;
		st->cpu_user_us = (unsigned long long)keyed(buf, "user") * 1000000ULL /
				  (unsigned long long)hz;
		st->cpu_system_us = (unsigned long long)keyed(buf, "system") * 1000000ULL /
				    (unsigned long long)hz;
	}
	return 0;
}

int ab_cgroup_memory(struct ab_cgroup *cg, long long *current)
{
	*current = -1;
	if (!cg || !procs_dir(cg))
		return -ENOENT;
	const struct memory_files *mf = cg->v2 ? &memory_v2 : &memory_v1;
	const char *d = cg->dir[mf->h];
	char buf[64];
	if (d[0] && ab_cgfs_read(d, mf->current, buf, sizeof(buf)) == 0)
		*current = strtoll(buf, NULL, 10);
	return 0;
}

int ab_cgroup_memory_file(struct ab_cgroup *cg, char *out, size_t size)
{
	if (!cg || !procs_dir(cg))
		return -ENOENT;
	const struct memory_files *mf = cg->v2 ? &memory_v2 : &memory_v1;
	const char *d = cg->dir[mf->h];
	if (!d[0] || (size_t)snprintf(out, size, "%s/%s", d, mf->current) >= size)
		return -ENOENT;
	return 0;
}

/* Kill what is left and remove every directory, waiting (bounded) for
 * the processes to be gone: a cgroup with members cannot be removed. */
static void remove_dirs(struct ab_cgroup *cg)
{
	for (int tries = 0; tries < 200; tries++) {
		bool left = false;
		for (int h = 0; h < H_COUNT; h++)
			if (cg->dir[h][0] && rmdir(cg->dir[h]) < 0 && errno == EBUSY)
				left = true;
			else
				dir_clear(cg, h);
		if (!left)
			return;
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

bool ab_cgroup_remove_left(struct ab_cgroup *cg)
{
	int fds[H_COUNT];
	if (!cg || !procs_dir(cg) || cg->dir[H_UNIFIED][0] || ab_cgroup_leave_fds(cg, fds) == 0)
		return false;
	/* the kernel's word that nothing is in it: rmdir of a cgroup with
	 * members fails (EBUSY) */
	bool all = true;
	for (int h = 0; h < H_COUNT; h++) {
		if (!cg->dir[h][0])
			continue;
		/* only a removal (or one already gone) counts: any other
		 * failure leaves it to ab_cgroup_destroy, after the init's end */
		if (rmdir(cg->dir[h]) < 0 && errno != ENOENT) {
			all = false;
			continue;
		}
		dir_clear(cg, h);
		ab_close_keep_errno(cg->lock_fd[h]);
		cg->lock_fd[h] = -1;
	}
	return all;
}

void ab_cgroup_destroy(struct ab_cgroup *cg)
{
	if (!cg)
		return;
	ab_close_keep_errno(cg->oom_fd);
	ab_close_keep_errno(cg->pids_fd);
	ab_close_keep_errno(cg->clone_fd);
	for (int h = 0; h < H_COUNT; h++) {
		ab_close_keep_errno(cg->self_fd[h]);
		ab_close_keep_errno(cg->leave_fd[h]);
	}
	if (procs_dir(cg)) {
		cgroup_signal_all(cg, SIGKILL);
		/* a v1-frozen process dies of SIGKILL only once thawed */
		if (cg->dir[H_FREEZER][0])
			ab_cgfs_write(cg->dir[H_FREEZER], "freezer.state", "THAWED");
		remove_dirs(cg);
	}
	/* after the rmdirs: one left behind is then stale for any reaper */
	for (int h = 0; h < H_COUNT; h++) {
		ab_close_keep_errno(cg->lock_fd[h]);
		dir_clear(cg, h);
	}
	free(cg->pending);
	free(cg);
}
