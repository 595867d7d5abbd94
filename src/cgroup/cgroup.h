/* The sandbox's cgroup, whatever the host has: cgroup v2 (a delegated
 * subtree for unprivileged users), v1 or hybrid hierarchies. libcgroup does
 * the work behind this interface; nothing else in agentbox knows which
 * version the host runs. Where no cgroup can be written, limits fall back to
 * rlimits where one exists and each limit says how it was (not) applied. */
#ifndef AB_CGROUP_H
#define AB_CGROUP_H

#include <stdbool.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"

struct ab_limits {
	unsigned long long memory; /* bytes, swap not beyond it; 0 = no limit */
	unsigned cpu_millis;	   /* CPU time quota in thousandths of a core; 0 = none */
	unsigned long pids;	   /* 0 = no limit */
	/* one command (`agentbox run`) whose init leaves its v1 cgroups once
	 * the command is gone (ab_cgroup_leave_fds), so that they are removed
	 * without waiting for the init's end; no cgroup2 beside them, which it
	 * could leave only through the global lock */
	bool init_leaves;
	/* the sandbox has its own user namespace: without a pids cgroup,
	 * RLIMIT_NPROC set in it counts its processes only (Linux >= 5.14) */
	bool own_userns;
};

enum ab_limit_how {
	AB_LIMIT_NOT_SET,     /* not asked for */
	AB_LIMIT_CGROUP,      /* applied by the cgroup */
	AB_LIMIT_RLIMIT,      /* applied by an rlimit instead: memory per process (weaker),
				 pids by RLIMIT_NPROC in the sandbox's user namespace */
	AB_LIMIT_UNAVAILABLE, /* could not be applied; why says why */
};

struct ab_limit_status {
	enum ab_limit_how how;
	char why[200];
};

struct ab_cgroup_status {
	struct ab_limit_status memory, cpu, pids;
	const char *version; /* "v2", "v1", or "none" */
	char path[512];	     /* the cgroup's path below the hierarchy root, or "" */
};

struct ab_cgroup_stats {
	bool oom_killed; /* from the cgroup's own events, never guessed */
	bool have_memory_peak;
	unsigned long long memory_peak; /* bytes */
	bool have_cpu;
	unsigned long long cpu_user_us, cpu_system_us;
	unsigned long long oom_kills;		/* how many, for sessions: per command */
	long long memory_current, pids_current; /* bytes, processes; -1: unknown */
};

struct ab_cgroup;

/* Launcher: make a fresh cgroup for one sandbox, named uniquely for this
 * launcher (pid and start time, so leftovers of dead launchers are
 * recognisable), under parent (--cgroup-parent) or, when NULL, where this
 * host allows it: root in a shared agentbox group; anyone else beneath
 * its own cgroup where it may divide it (a delegated subtree: the launcher,
 * and in a Delegate=yes cgroup the other processes there too, move into
 * leaves first), else in a Delegate=yes scope systemd makes for it. Never fails only because no
 * cgroup can be made: then the handle is "none" and status says so per limit; fails (negative
 * errno) for real errors, e.g. a parent that does not exist (on v1, where the
 * groups are made after the clone, ab_cgroup_finish is where that fails). */
int ab_cgroup_create(const char *parent, const struct ab_limits *lim, struct ab_cgroup **out,
		     struct ab_error *err);
const struct ab_cgroup_status *ab_cgroup_status(const struct ab_cgroup *cg);
/* The sandbox's cgroup v2 directory (on a hybrid host, the controller-less
 * unified hierarchy's), or NULL when it has none. */
const char *ab_cgroup_v2_dir(const struct ab_cgroup *cg);

/* Freeze (or thaw) every process of the sandbox with the v1 freezer
 * hierarchy's group (v1 and hybrid hosts, where it has one) or the cgroup
 * v2 freezer, and wait (AB_FREEZE_WAIT_MS at most: a loaded machine
 * freezes slowly; whoever waits for a pause's answer waits longer) until
 * the kernel says it is done; -ENOTSUP (with err saying how to get one)
 * where the sandbox has neither. */
#define AB_FREEZE_WAIT_MS 5000
int ab_cgroup_freeze(struct ab_cgroup *cg, bool freeze, struct ab_error *err);

/* A cgroup fd to create the sandbox's init in directly
 * (clone3 with CLONE_INTO_CGROUP: no task is migrated, the init runs its
 * first instruction under every limit), or -1 where the kernel cannot:
 * then the init is moved with ab_cgroup_attach. Owned by cg. */
int ab_cgroup_clone_fd(const struct ab_cgroup *cg);

/* Where v1 hierarchies are in use: make their cgroups and apply the
 * limits (ab_cgroup_create made only what the clone needs, the v2
 * directory), after the clone, while the init builds the view; a no-op
 * otherwise. On failure (a --cgroup-parent that gives nothing) *cg is
 * destroyed and NULL. The status is complete only after this. */
int ab_cgroup_finish(struct ab_cgroup **cg, struct ab_error *err);
bool ab_cgroup_pending(const struct ab_cgroup *cg);

/* Move pid (the sandbox's init) into the cgroup in every hierarchy it
 * does not enter by itself (ab_cgroup_enter) and, when placed (clone3 put
 * it there, or an earlier call), but for the v2 one. A no-op on a "none"
 * handle. */
int ab_cgroup_attach(struct ab_cgroup *cg, pid_t pid, bool placed, struct ab_error *err);

/* cgroup v1: the tasks files the init enters by (ab_cgroup_enter), sent
 * to it after ab_cgroup_finish; fds has room for 8. Returns how many. */
size_t ab_cgroup_entry_fds(const struct ab_cgroup *cg, int *fds);
/* With init_leaves: the tasks files the init leaves the sandbox's cgroups
 * by, one per entry fd (the parent's, or the hierarchy root's where the
 * parent is agentbox's shared group, which stays between runs); 0 where
 * there are none, e.g. on cgroup v2. */
size_t ab_cgroup_leave_fds(const struct ab_cgroup *cg, int *fds);

/* In the sandbox's init, before its cgroup namespace and before anything
 * of a command runs: write "0" to each of the n tasks files, moving only
 * itself. A process that moves only itself takes no global lock, so this
 * costs no RCU grace period, unlike a move by pid from the launcher. */
int ab_cgroup_enter(const int *fds, size_t n, struct ab_error *err);

/* In the sandbox's init: keep the n tasks files of ab_cgroup_leave_fds
 * (owned from now on); ab_cgroup_leave writes "0" to each, once nothing
 * of the command is left, moving the init out so that the launcher can
 * remove the cgroups at once. A no-op where none were kept. */
void ab_cgroup_hold_leave(const int *fds, size_t n);
void ab_cgroup_leave(void);

/* Launcher, after the command's end: remove the cgroups now if the init
 * has left them (ab_cgroup_leave) and nothing else is in them; true when
 * every directory is gone. False leaves the rest to ab_cgroup_destroy,
 * which waits for the members' end. */
bool ab_cgroup_remove_left(struct ab_cgroup *cg);

/* In the sandbox's init: the RLIMIT_AS standing in for --memory as the
 * launcher decided it in ab_cgroup_finish (the init's copy of the handle
 * was made before). */
void ab_cgroup_set_rlimit_as(struct ab_cgroup *cg, unsigned long long v);
/* The same for the RLIMIT_NPROC standing in for --pids (0: none), and,
 * in the init once its last user namespace is made, setting it (an
 * --rlimit nproc below it stays). */
void ab_cgroup_set_rlimit_nproc(struct ab_cgroup *cg, unsigned long v);
unsigned long ab_cgroup_rlimit_nproc(const struct ab_cgroup *cg);
int ab_cgroup_apply_nproc(const struct ab_cgroup *cg, struct ab_error *err);

/* Apply the rlimit fallbacks for limits the cgroup could not apply. Called
 * in the sandbox, in the command's process before exec. */
int ab_cgroup_apply_rlimits(const struct ab_cgroup *cg, struct ab_error *err);
/* The RLIMIT_AS that stands in for --memory, 0 when the cgroup applies it. */
unsigned long long ab_cgroup_rlimit_as(const struct ab_cgroup *cg);

int ab_cgroup_stats(struct ab_cgroup *cg, struct ab_cgroup_stats *st);
/* Its memory_current alone (-1: unknown), one file read: a status's.
 * -ENOENT as ab_cgroup_stats. */
int ab_cgroup_memory(struct ab_cgroup *cg, long long *current);
/* The path of the file memory_current is read from into out; -ENOENT
 * where there is none. */
int ab_cgroup_memory_file(struct ab_cgroup *cg, char *out, size_t size);
/* OOM kills in the cgroup so far (0 without a memory controller). */
unsigned long long ab_cgroup_oom_kills(struct ab_cgroup *cg);
/* Forks the pids cgroup refused so far (pids.events "max"); 0 where the
 * limit is not a cgroup's (RLIMIT_NPROC counts no refusals). */
unsigned long long ab_cgroup_pids_refused(struct ab_cgroup *cg);

/* Kill what is left, remove the cgroup from every hierarchy, free. */
void ab_cgroup_destroy(struct ab_cgroup *cg);

/* Remove agentbox's own cgroups whose launcher is dead (killed by
 * SIGKILL, say), under parent or the default places; never one whose
 * launcher is alive. Returns how many were removed. */
int ab_cgroup_reap_stale(const char *parent);
/* The same beside cg, a launcher's own cgroup (NULL: none), whose
 * directories are no reason to list their parents. */
int ab_cgroup_reap_stale_beside(const struct ab_cgroup *cg, const char *parent);
/* Give back what the sweeps of this process hold (its own start time,
 * read before a clone): the init, which never sweeps, has no use for it. */
void ab_cgroup_forget_sweeps(void);

/* Tests only: treat root, a directory laid out like a cgroup2 hierarchy
 * with controllers, as the host's, with own as the caller's cgroup; NULL
 * to go back to the real ones. */
void ab_cgroup_test_fake_v2(const char *root, const char *own);

#endif
