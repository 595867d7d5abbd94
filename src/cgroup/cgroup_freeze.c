/* Pause and resume. On v1 and hybrid hosts the v1 freezer hierarchy's
 * group (freezer.state), where the sandbox has one; else the cgroup v2
 * freezer (cgroup.freeze, Linux 5.2), which also exists without any
 * controller in a hybrid host's unified hierarchy. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "cgroup/cgroup_int.h"
#include "cgroup/cgroupfs.h"
#include "util/error.h"
#include "util/util.h"

static long long now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static long long now_ms(void)
{
	return now_us() / 1000;
}

/* What fd (a cgroup file, opened once) says now contains want. */
static bool reads(int fd, const char *want)
{
	char buf[256];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return false;
	buf[n] = 0;
	return strstr(buf, want) != NULL;
}

/* Wait until dir/file reads want or the clock (now_ms) reaches end; false
 * if it never did. v1's freezer.state has no notification: it is read
 * again after 20 us, then twice as long each time up to 2 ms (a freeze
 * takes tens to hundreds of us when the tasks get a CPU at once; the
 * fixed 5 ms sleep this was made pause take 5 ms whenever the first read
 * came before the last task reached the refrigerator). */
static bool wait_for(const char *dir, const char *file, const char *want, long long end)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	long nap_us = 20;
	for (;;) {
		if (fd >= 0 && reads(fd, want))
			return true;
		if (now_ms() >= end)
			return false;
		struct timespec ts = {0, nap_us * 1000};
		nanosleep(&ts, NULL);
		if (nap_us < 2000)
			nap_us *= 2;
	}
}

/* cgroup v2: wait until cgroup.events (fd, opened and read before the
 * write to cgroup.freeze) says want, by its notification (poll's
 * POLLPRI: kernfs_notify when "frozen" changes), not by reading it on a
 * clock; false at end. Each wait is 20 ms at most, and the file read
 * again: a notification is never missed (a read arms the next one), this
 * only bounds a tree that is not the kernel's (a test's fake). */
static bool wait_events(int fd, const char *want, long long end)
{
	for (;;) {
		if (reads(fd, want))
			return true;
		long long left = end - now_ms();
		if (left <= 0)
			return false;
		struct pollfd p = {.fd = fd, .events = POLLPRI};
		if (poll(&p, 1, left < 20 ? (int)left : 20) < 0 && errno != EINTR)
			return reads(fd, want);
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
	/* cgroup.events says "frozen 1" once every task is stopped: opened
	 * and read before the write, so its notification is not missed */
	char path[1200];
	snprintf(path, sizeof(path), "%s/cgroup.events", dir);
	cleanup_fd int ev = open(path, O_RDONLY | O_CLOEXEC);
	if (ev < 0)
		return ab_error_set(err, errno, "cannot read %s", path);
	reads(ev, "");
	int r = ab_cgfs_write(dir, "cgroup.freeze", freeze ? "1" : "0");
	if (r < 0)
		return ab_error_set(err, -r, "cannot write %s/cgroup.freeze", dir);
	if (wait_events(ev, freeze ? "frozen 1" : "frozen 0", now_ms() + AB_FREEZE_WAIT_MS))
		return 0;
	if (freeze) /* never a half-paused sandbox, as with v1 */
		ab_cgfs_write(dir, "cgroup.freeze", "0");
	return ab_error_plain(err, ETIMEDOUT, "the sandbox's cgroup %s did not %s within %d s%s",
			      dir, freeze ? "freeze" : "thaw", AB_FREEZE_WAIT_MS / 1000,
			      freeze ? "; it was thawed again" : "");
}
