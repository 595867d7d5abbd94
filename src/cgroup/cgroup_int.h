/* What cgroup.c, cgroup_rlimit.c and cgroup_stale.c share: the handle,
 * the hierarchies agentbox uses and how it finds them. Not for the rest of
 * agentbox (cgroup.h). */
#ifndef AB_CGROUP_INT_H
#define AB_CGROUP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cgroup/cgroup.h"

/* the freezer first: a stale group's processes are thawed to die before
 * the other hierarchies' groups are removed (cgroup_stale.c) */
enum { H_FREEZER, H_MEMORY, H_CPU, H_CPUACCT, H_PIDS, H_UNIFIED, H_COUNT };

struct ab_cgroup {
	struct ab_cgroup_status st;
	bool v2;	 /* one unified directory does everything */
	bool own_parent; /* the parent is agentbox's shared group, not the caller's */
	/* created directories: each a string of its own, or "" if none (one
	 * constant, never written): the handle is in every idle launcher's
	 * heap and its init's, a few hundred bytes rather than 11 KiB */
	char *dir[H_COUNT];
	unsigned long long rlimit_as;
	unsigned long rlimit_nproc; /* standing in for pids.max; 0: none */
	int oom_fd;		    /* memory.events or memory.oom_control, opened at first use */
	int pids_fd;		    /* pids.events, opened at first use */
	int clone_fd;		    /* the v2 cgroup, for clone3(CLONE_INTO_CGROUP); -1: none */
	/* v1: each hierarchy's tasks file, open for the init to write "0" to,
	 * moving only itself: the kernel skips the global threadgroup lock
	 * for that (cgroup_procs_write_start), so no RCU grace period is
	 * waited for, where moving a pid through cgroup.procs waits one
	 * (10-20 ms); -1: none */
	int self_fd[H_COUNT];
	/* each directory's lock while it exists: the launcher lives
	 * (cgroup_owner.c); -1: none */
	int lock_fd[H_COUNT];
	/* init_leaves: tasks files to leave by, one per self_fd; -1: none */
	int leave_fd[H_COUNT];
	/* v1 and hybrid: what the v1 hierarchies are made of after the
	 * clone (ab_cgroup_finish), while the init builds the view; NULL
	 * once made */
	struct cg_pending *pending;
};

/* cgroup_rlimit.c, which cgroup.c calls (never the other way round) */
void ab_cg_set_how(struct ab_limit_status *s, enum ab_limit_how how, const char *why);
/* No cgroup for a limit: the rlimit standing in where one holds, else
 * unavailable with why (cgroup_rlimit.c). */
void ab_cg_fall_back(struct ab_cgroup *cg, const struct ab_limits *lim, const char *why);

/* The mount point of hierarchy h; false where it has none. */
bool ab_cg_find_mount(int h, char *out, size_t len);
/* A cgroup2 root with the memory and pids controllers. */
bool ab_cg_v2_has_controllers(const char *root);

/* cgroup_owner.c: a process's start time (/proc/PID/stat field 22), 0 if
 * it is gone. */
unsigned long long ab_cg_start_time(pid_t pid);
/* A sandbox's cgroup name: agentbox-ns<pidns>-<pid>-<start>-<n>
 * (cgroup_stale.c). */
void ab_cg_name(char *out, size_t len, unsigned n);
/* Make root+rel/name (and root+rel when missing) into out, with the lock
 * that says its launcher lives in *lock; -errno, out emptied. */
int ab_cg_make_dir(char *out, size_t len, const char *root, const char *rel, const char *name,
		   int *lock);
/* The flock of a shared parent: LOCK_SH (a launcher making its cgroup,
 * waiting a second at most) or LOCK_EX (a reaper, not waiting); -1 when
 * not had. */
int ab_cg_lock_parent(const char *parent, int how);
/* Nobody holds the lock of dfd/name (1), someone does (0), cannot tell (-1). */
int ab_cg_unlocked(int dfd, const char *name);
/* What a name says of its launcher: alive or dead by pid in this pid
 * namespace, or in one whose pids we cannot see; not ours: alive. */
enum ab_cg_owner { AB_CG_OWNER_ALIVE, AB_CG_OWNER_DEAD, AB_CG_OWNER_UNSEEN };
enum ab_cg_owner ab_cg_owner(const char *name);
/* A sweep begins or ends: ab_cg_owner forgets the launchers it judged
 * (each launcher has a group in every hierarchy, and its /proc/PID/stat
 * is read once a sweep, not once per hierarchy). */
void ab_cg_owner_sweep(void);

#endif
