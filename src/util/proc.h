/* The processes of the caller's pid namespace, from /proc. */
#ifndef AB_PROC_H
#define AB_PROC_H

#include <dirent.h>
#include <stdbool.h>
#include <sys/types.h>

struct ab_procs {
	int fd;	   /* /proc */
	char *buf; /* its entries, read by getdents64 into pages of their own */
	size_t len, pos;
	int depth; /* NSpid fields of ours when /proc is an outer one, else 0 */
};

/* Start listing; -errno when /proc cannot be read. */
int ab_procs_open(struct ab_procs *it);
/* The next process and its parent; false at the end. A process that ends
 * while it is read is left out. */
bool ab_procs_next(struct ab_procs *it, pid_t *pid, pid_t *ppid);
void ab_procs_close(struct ab_procs *it);
/* The command name (comm) of pid, "" when it is gone. */
void ab_proc_comm(pid_t pid, char *out, size_t len);

/* Note the bounds of the caller's stack mapping (from /proc/self/maps),
 * before a clone that runs on a copy of it: the clone knows them without
 * /proc. */
void ab_stack_note(void);
/* Give back the pages of the noted stack below the caller's frame, which
 * a deeper call once used and none uses now (they come back zeroed when
 * needed): an idle process's memory. Nothing when none was noted or the
 * caller runs on another stack. */
void ab_stack_trim(void);
/* What malloc holds free (malloc_trim) and the stack below the caller
 * (ab_stack_trim) go back to the kernel. */
void ab_memory_trim(void);

#endif
