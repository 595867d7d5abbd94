/* Pause and resume: the cgroup v2 freezer (cgroup.freeze, Linux 5.2),
 * which also exists without any controller in a hybrid host's unified
 * hierarchy. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "cgroup/cgroup.h"
#include "cgroup/cgroupfs.h"
#include "util/error.h"

int ab_cgroup_freeze(struct ab_cgroup *cg, bool freeze, struct ab_error *err)
{
	const char *dir = ab_cgroup_v2_dir(cg);
	if (!dir)
		return ab_error_plain(err, ENOTSUP,
				      "this sandbox has no cgroup v2 group, so it cannot be "
				      "paused: the freezer used is cgroup v2's (on a hybrid host "
				      "the unified hierarchy's, where root makes one; a plain "
				      "user needs a delegated v2 parent, --cgroup-parent), not "
				      "the v1 freezer");
	int r = ab_cgfs_write(dir, "cgroup.freeze", freeze ? "1" : "0");
	if (r < 0)
		return ab_error_set(err, -r, "cannot write %s/cgroup.freeze", dir);
	/* cgroup.events says "frozen 1" once every task is stopped */
	const char *want = freeze ? "frozen 1" : "frozen 0";
	for (int i = 0; i < 200; i++) {
		char buf[256] = {0};
		if (ab_cgfs_read(dir, "cgroup.events", buf, sizeof(buf)) == 0 && strstr(buf, want))
			return 0;
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return ab_error_plain(err, ETIMEDOUT, "the sandbox's cgroup %s did not %s within 1 s", dir,
			      freeze ? "freeze" : "thaw");
}
