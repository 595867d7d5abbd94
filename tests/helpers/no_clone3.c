/* no_clone3 [--control] CMD ARGS...: run CMD with clone3 failing with
 * ENOSYS, as under an older kernel or a container runtime's seccomp
 * profile, so agentbox's fallback from clone3(CLONE_INTO_CGROUP) to clone
 * and a cgroup migration is tested where the kernel has clone3 (tests/v2).
 * --control blocks acct instead: the same kind of filter, for timings. */
#include <errno.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	bool control = argc > 1 && strcmp(argv[1], "--control") == 0;
	argv += control;
	argc -= control;
	if (argc < 2) {
		fprintf(stderr, "usage: no_clone3 [--control] CMD [ARGS...]\n");
		return 125;
	}
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int sys = control ? SCMP_SYS(acct) : SCMP_SYS(clone3);
	int r = ctx ? seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), sys, 0) : -ENOMEM;
	if (r == 0)
		r = seccomp_load(ctx);
	if (r < 0) {
		fprintf(stderr, "no_clone3: cannot load the filter: %s\n", strerror(-r));
		return 125;
	}
	seccomp_release(ctx);
	execvp(argv[1], argv + 1);
	fprintf(stderr, "no_clone3: %s: %s\n", argv[1], strerror(errno));
	return 127;
}
