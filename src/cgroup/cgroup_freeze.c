/* Pause and resume. On v1 and hybrid hosts the v1 freezer hierarchy's
 * group (freezer.state), where the sandbox has one; else the cgroup v2
 * freezer (cgroup.freeze, Linux 5.2), which also exists without any
 * controller in a hybrid host's unified hierarchy. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "cgroup/cgroup.h"
#include "cgroup/cgroup_int.h"
#include "cgroup/cgroupfs.h"
#include "util/error.h"

static long long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Wait until dir/file reads want or the clock (now_ms) reaches end; false
 * if it never did. */
static bool wait_for(const char *dir, const char *file, const char *want, long long end)
{
	for (;;) {
		char buf[256] = {0};
		if (ab_cgfs_read(dir, file, buf, sizeof(buf)) == 0 && strstr(buf, want))
			return true;
		if (now_ms() >= end)
			return false;
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

/* How long a v1 group may stay FREEZING before it is thawed and frozen
 * again. The kernel freezes each task once, when FROZEN is written (and a
 * child as it forks): a shell's vfork parent it reaches before the parent
 * sleeps is never frozen, since its freezable sleep waits for a child that
 * is already frozen and no signal wakes it (Linux 6.1's freezer); a second
 * write while FREEZING changes nothing. A new pass finds it asleep and
 * freezes it where it waits. */
#define V1_RETRY_MS 100

/* The v1 freezer: FREEZING until every task is in the refrigerator, then
 * FROZEN (Documentation/admin-guide/cgroup-v1/freezer-subsystem.rst),
 * passes repeated every V1_RETRY_MS. One that stays FREEZING is thawed
 * again: never a half-paused sandbox. */
static int freeze_v1(const char *dir, bool freeze, struct ab_error *err)
{
	const char *want = freeze ? "FROZEN" : "THAWED";
	long long end = now_ms() + AB_FREEZE_WAIT_MS;
	for (;;) {
		int r = ab_cgfs_write(dir, "freezer.state", want);
		if (r < 0)
			return ab_error_set(err, -r, "cannot write %s/freezer.state", dir);
		long long pass = now_ms() + V1_RETRY_MS;
		if (wait_for(dir, "freezer.state", want, pass < end ? pass : end))
			return 0;
		if (now_ms() >= end)
			break;
		if (freeze) /* a new pass: only a thaw ends the one under way */
			ab_cgfs_write(dir, "freezer.state", "THAWED");
	}
	if (freeze)
		ab_cgfs_write(dir, "freezer.state", "THAWED");
	return ab_error_plain(err, ETIMEDOUT,
			      "the sandbox's freezer cgroup %s did not %s within %d s%s", dir,
			      freeze ? "freeze" : "thaw", AB_FREEZE_WAIT_MS / 1000,
			      freeze ? "; it was thawed again" : "");
}

int ab_cgroup_freeze(struct ab_cgroup *cg, bool freeze, struct ab_error *err)
{
	if (cg && !cg->v2 && cg->dir[H_FREEZER][0])
		return freeze_v1(cg->dir[H_FREEZER], freeze, err);
	const char *dir = ab_cgroup_v2_dir(cg);
	if (!dir)
		return ab_error_plain(err, ENOTSUP,
				      "this sandbox has no freezer cgroup, so it cannot be paused: "
				      "neither a group in the v1 freezer hierarchy nor a cgroup v2 "
				      "group could be made for it (root makes them; a plain user "
				      "needs a delegated parent, --cgroup-parent, with the freezer "
				      "hierarchy delegated too on a v1 or hybrid host)");
	int r = ab_cgfs_write(dir, "cgroup.freeze", freeze ? "1" : "0");
	if (r < 0)
		return ab_error_set(err, -r, "cannot write %s/cgroup.freeze", dir);
	/* cgroup.events says "frozen 1" once every task is stopped */
	if (wait_for(dir, "cgroup.events", freeze ? "frozen 1" : "frozen 0",
		     now_ms() + AB_FREEZE_WAIT_MS))
		return 0;
	if (freeze) /* never a half-paused sandbox, as with v1 */
		ab_cgfs_write(dir, "cgroup.freeze", "0");
	return ab_error_plain(err, ETIMEDOUT, "the sandbox's cgroup %s did not %s within %d s%s",
			      dir, freeze ? "freeze" : "thaw", AB_FREEZE_WAIT_MS / 1000,
			      freeze ? "; it was thawed again" : "");
}
