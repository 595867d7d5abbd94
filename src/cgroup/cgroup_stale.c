/* What crashed launchers left: cgroups nobody holds the lock of and whose
 * launcher is gone (cgroup_owner.c says how that is told), emptied and
 * removed (ab_cgroup_reap_stale, cgroup.h). */
#include "cgroup/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup_delegate.h"
#include "cgroup/cgroup_int.h"
#include "cgroup/cgroupfs.h"
#include "util/util.h"

/* SIGKILL to each process cgroup.procs of the stale cgroup path lists,
 * through a pidfd and only when /proc/PID/cgroup still names that cgroup:
 * a pid read from the list may have exited and been reused since (pid_max
 * can be 32768), by another launcher's init say. A process born after the
 * list was read is never in a stale cgroup's list, and one that exits
 * after its pidfd was opened is not the pid's new owner. */
static void kill_listed(const char *path)
{
	char buf[65536], cg[4096], proc[64];
	const char *name = strrchr(path, '/');
	if (!name || ab_cgfs_read(path, "cgroup.procs", buf, sizeof(buf)) < 0)
		return;
	size_t n = strlen(name);
	for (char *p = buf; *p;) {
		pid_t pid = (pid_t)strtol(p, &p, 10);
		while (*p == '\n')
			p++;
		cleanup_fd int fd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
		snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
		if (fd < 0 || ab_cgfs_read(proc, "cgroup", cg, sizeof(cg)) < 0)
			continue;
		for (const char *m = strstr(cg, name); m; m = strstr(m + 1, name))
			if (m[n] == '\n' || m[n] == '\0') {
				syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
				break;
			}
	}
}

static void remove_stale(const char *dir, const char *name)
{
	char path[1200];
	snprintf(path, sizeof(path), "%.900s/%.255s", dir, name);
	size_t len = strlen(name);
	/* a launcher's own leaf (cgroup_delegate.c): only ever removed empty,
	 * never killed, since its launcher is in it while alive */
	bool leaf = len > 9 && strcmp(name + len - 9, "-launcher") == 0;
	/* kill whatever is still in it, then remove it */
	if (!leaf && ab_cgfs_write(path, "cgroup.kill", "1") < 0)
		kill_listed(path);
	/* a v1-frozen process dies of SIGKILL only once thawed (the freezer
	 * hierarchy is reaped first, so the others' groups are empty then) */
	if (!leaf)
		ab_cgfs_write(path, "freezer.state", "THAWED");
	for (int tries = 0; tries < 100 && rmdir(path) < 0 && errno == EBUSY && !leaf; tries++) {
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

#define MAX_UNSEEN 64

/* Whether dir can hold nothing to reap: the caller may not write it (only
 * who may could have made a cgroup in it, and rmdir(2) of one needs it: a
 * plain user beside root's shared agentbox/ has nothing to do there), or
 * every subdirectory is one of the caller's own (own of them, alive: it
 * holds their locks). A cgroup filesystem's directory has 2 links plus
 * one per subdirectory (kernfs), so its stat tells that without a listing;
 * a directory with fewer than 2 (a filesystem that does not count them) is
 * listed. */
static bool nothing_to_reap(const char *dir, unsigned own)
{
	struct stat st;
	/* not asked for root, whose answer is yes on the host (a system
	 * call per hierarchy for nothing); root in a container whose
	 * answer would be no lists as before */
	if (geteuid() != 0 && faccessat(AT_FDCWD, dir, W_OK, AT_EACCESS) < 0)
		return true;
	return stat(dir, &st) == 0 && st.st_nlink >= 2 && st.st_nlink - 2 <= own;
}

static int reap_in(const char *dir, unsigned own)
{
	if (nothing_to_reap(dir, own))
		return 0;
	/* opendir's own open (O_CLOEXEC): fdopendir would check and set the
	 * fd's flags again, two system calls a hierarchy at every start */
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	size_t n_unseen = 0;
	char unseen[MAX_UNSEEN][256];
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "agentbox-", 9) != 0)
			continue;
		enum ab_cg_owner o = ab_cg_owner(de->d_name);
		if (o == AB_CG_OWNER_ALIVE || ab_cg_unlocked(dirfd(d), de->d_name) != 1)
			continue;
		if (o == AB_CG_OWNER_UNSEEN) {
			/* judged again below, under the parent's lock */
			if (n_unseen < MAX_UNSEEN)
				snprintf(unseen[n_unseen++], sizeof(unseen[0]), "%s", de->d_name);
			continue;
		}
		remove_stale(dir, de->d_name);
		n++;
	}
	/* no launcher is between its mkdir and its lock while we hold this;
	 * none waits long: we only test locks under it */
	cleanup_fd int pfd = n_unseen ? ab_cg_lock_parent(dir, LOCK_EX) : -1;
	size_t stale = 0;
	for (size_t i = 0; pfd >= 0 && i < n_unseen; i++)
		if (ab_cg_unlocked(dirfd(d), unseen[i]) == 1)
			memmove(unseen[stale++], unseen[i], sizeof(unseen[0]));
	ab_close_keep_errno(pfd);
	pfd = -1;
	for (size_t i = 0; i < stale; i++, n++)
		remove_stale(dir, unseen[i]);
	closedir(d);
	return n;
}

/* How many of cg's directories are right below dir. */
static unsigned own_below(const struct ab_cgroup *cg, const char *dir)
{
	unsigned own = 0;
	size_t len = strlen(dir);
	for (int h = 0; cg && h < H_COUNT; h++)
		own += cg->dir[h][0] && strncmp(cg->dir[h], dir, len) == 0 &&
		       cg->dir[h][len] == '/' && !strchr(cg->dir[h] + len + 1, '/');
	return own;
}

int ab_cgroup_reap_stale(const char *parent)
{
	return ab_cgroup_reap_stale_beside(NULL, parent);
}

int ab_cgroup_reap_stale_beside(const struct ab_cgroup *cg, const char *parent)
{
	int n = 0;
	ab_cg_owner_sweep();
	for (int h = 0; h < H_COUNT; h++) {
		char root[512], dir[1024];
		if (!ab_cg_find_mount(h, root, sizeof(root)))
			continue;
		if (parent)
			snprintf(dir, sizeof(dir), "%s%s", root, parent);
		else if (h == H_UNIFIED && ab_cg_v2_has_controllers(root) && geteuid() != 0) {
			char own[512];
			if (!ab_cgfs_own_v2(own, sizeof(own)))
				continue;
			/* siblings of the launcher's leaf, in its delegated parent */
			ab_cg_strip_leaf(own);
			snprintf(dir, sizeof(dir), "%s%s", root, own);
		} else
			snprintf(dir, sizeof(dir), "%s/agentbox", root);
		n += reap_in(dir, own_below(cg, dir));
	}
	ab_cg_owner_sweep(); /* forgotten now: a launcher idles long after */
	return n;
}
