/* A vfork-like child (vfork.h). */
#include "util/vfork.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <pthread.h>

pid_t ab_vfork_child(int (*fn)(void *), void *arg, unsigned long flags, void *stack, size_t size)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* the stack grows down on every architecture agentbox builds for */
	pid_t pid = clone(fn, (char *)stack + size, CLONE_VM | CLONE_VFORK | SIGCHLD | flags, arg);
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return pid;
}
