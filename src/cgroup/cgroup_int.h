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
/* A process's start time (/proc/PID/stat field 22), 0 if it is gone. */
unsigned long long ab_cg_start_time(pid_t pid);
/* A cgroup2 root with the memory and pids controllers. */
bool ab_cg_v2_has_controllers(const char *root);

#endif
