/* What crashed launchers left: their cgroups, named agentbox-<pid>-<start>-
 * <n> after a launcher that is no longer alive, emptied and removed
 * (ab_cgroup_reap_stale, cgroup.h). */
#include "cgroup/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup_delegate.h"
#include "cgroup/cgroup_int.h"
#include "cgroup/cgroupfs.h"
#include "util/util.h"

/* agentbox-<pid>-<start>-<n>: is that launcher alive? */
static bool owner_alive(const char *name)
{
	int pid;
	unsigned long long start;
	if (sscanf(name, "agentbox-%d-%llu-", &pid, &start) != 2)
		return true; /* not ours: never touched */
	if (ab_cg_start_time(pid) != start)
		return false;
	/* a zombie holds nothing: a killed detached launcher (agentbox
	 * create) waits as one until the host's init reaps it */
	char path[64], buf[512] = {0};
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *p = fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0 ? strrchr(buf, ')') : NULL;
	return !(p && p[1] == ' ' && p[2] == 'Z');
}

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

static int reap_in(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "agentbox-", 9) != 0 || owner_alive(de->d_name))
			continue;
		char path[1200];
		snprintf(path, sizeof(path), "%.900s/%.255s", dir, de->d_name);
		/* kill whatever is still in it, then remove it */
		if (ab_cgfs_write(path, "cgroup.kill", "1") < 0)
			kill_listed(path);
		for (int tries = 0; tries < 100 && rmdir(path) < 0 && errno == EBUSY; tries++) {
			struct timespec ts = {0, 5 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
		n++;
	}
	closedir(d);
	return n;
}

int ab_cgroup_reap_stale(const char *parent)
{
	int n = 0;
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
		n += reap_in(dir);
	}
	return n;
}
