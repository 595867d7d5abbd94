/* A vfork-like child: one helper for every place that needs a child
 * sharing the caller's memory for the few microseconds until it execs or
 * exits (no page table copied, as posix_spawn does). In proc.c. */
#ifndef AB_VFORK_H
#define AB_VFORK_H

#include <stddef.h>
#include <sys/types.h>

/* clone(CLONE_VM | CLONE_VFORK | SIGCHLD | flags) running fn(arg) on
 * stack[0..size) (a buffer of the caller's that lives until this returns:
 * a frame of its, or a mapping), the caller suspended until the child has
 * exec'd or exited. Every signal is blocked in the caller around the clone
 * and so in the child, which sets the mask it needs itself: no handler of
 * the caller's (an embedding application's) ever runs on the child's
 * stack. Returns the child's pid, or -1 with errno. */
pid_t ab_vfork_child(int (*fn)(void *), void *arg, unsigned long flags, void *stack, size_t size);

#endif
