/* What cgroup.c and cgroup_stale.c share: the hierarchies agentbox uses
 * and how it finds them. Not for the rest of agentbox (cgroup.h). */
#ifndef AB_CGROUP_INT_H
#define AB_CGROUP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum { H_MEMORY, H_CPU, H_CPUACCT, H_PIDS, H_UNIFIED, H_COUNT };

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

#endif
