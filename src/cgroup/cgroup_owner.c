/* Whose a sandbox's cgroup is (cgroup_int.h): its name, and the lock that
 * says its launcher lives; cgroup_stale.c reaps by them.
 *
 * Root's launchers share one parent (agentbox/ in each hierarchy), and
 * so do launchers in different pid namespaces: a container beside the
 * host sees the host's cgroupfs. A cgroup is named
 * agentbox-ns<pidns>-<pid>-<start>-<n>, after the inode of its launcher's
 * pid namespace and the launcher's pid and start time there,
 * and the launcher holds an open file description lock (F_OFD_SETLK, a
 * read lock) on the cgroup's directory from its mkdir to its rmdir: the
 * kernel drops it when the launcher dies, whatever pid namespace anyone
 * is in. A cgroup is stale when nobody holds that lock and:
 *  - its launcher was in the reaper's pid namespace: that pid with that
 *    start time is gone (the lock may not be taken yet right after the
 *    mkdir; the launcher is alive then);
 *  - else (pids the reaper cannot see): while the reaper holds the
 *    parent's flock exclusively, which every launcher holds shared from
 *    before its mkdir to after its lock, so no launcher is between the two.
 * The lock is only tested (F_OFD_GETLK), never taken by a reaper, so a
 * launcher's own never waits. A launcher whose /proc is not its pid
 * namespace's tags its cgroups ns0: judged by the lock alone, by everyone.
 * A name without the tag (agentbox-<pid>-<start>-<n>, an older agentbox's)
 * is never touched: its pid may be another namespace's; and an older
 * agentbox never touches ours (it reads no pid at the tag). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup_int.h"
#include "util/util.h"

/* pid's start time (0 when it cannot be read) and, into *state, its
 * state letter, from one read of /proc/PID/stat: a reaper reads it for
 * every live launcher beside it. */
static unsigned long long proc_stat_of(pid_t pid, char *state)
{
	char path[64], buf[1024];
	*state = '\0';
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* field 3 and field 22, counted after the command name's closing
	 * parenthesis */
	char *p = strrchr(buf, ')');
	if (p && p[1] == ' ')
		*state = p[2];
	for (int f = 2; p && f < 22; f++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

unsigned long long ab_cg_start_time(pid_t pid)
{
	char state;
	return proc_stat_of(pid, &state);
}

/* The sweep's table of launchers seen (below), and this process's start
 * time (own_start_time): pages of their own, given back after each sweep
 * (ab_cg_owner_sweep), so that an idle launcher holds none of them, nor
 * a copy of what its init holds (the start time, read before the clone
 * and written again by a sweep after it). */
#define OWNERS 2048 /* slots; more launchers than this are read again */
struct owner_seen {
	int pid; /* 0: a free slot */
	unsigned long long start;
	bool alive;
};
/* whole pages of 4 KiB (the type's alignment rounds its size up): what
 * is given back is the table's alone */
static struct __attribute__((aligned(4096))) {
	struct owner_seen o[OWNERS];
	size_t n;
	pid_t of; /* whose start time: a forked child reads its own */
	unsigned long long start;
} tab;
_Static_assert(sizeof(tab) % 4096 == 0, "the sweep's table is whole pages");

/* This process's start time, read once per sweep and process. */
static unsigned long long own_start_time(void)
{
	if (tab.of != getpid()) {
		tab.of = getpid();
		tab.start = ab_cg_start_time(tab.of);
	}
	return tab.start;
}

/* The pid namespace /proc shows, as the inode of /proc/self/ns/pid; 0
 * when /proc is another namespace's (its pid for us is not getpid()). */
static unsigned long long proc_pidns(void)
{
	static unsigned long long ino = 1;
	if (ino != 1)
		return ino;
	char self[32];
	ssize_t n = readlink("/proc/self", self, sizeof(self) - 1);
	struct stat st;
	self[n > 0 ? n : 0] = '\0';
	ino = n > 0 && atoi(self) == (int)getpid() && stat("/proc/self/ns/pid", &st) == 0
		      ? (unsigned long long)st.st_ino
		      : 0;
	return ino;
}

void ab_cg_name(char *out, size_t len, unsigned n)
{
	snprintf(out, len, "agentbox-ns%llu-%d-%llu-%u", proc_pidns(), (int)getpid(),
		 own_start_time(), n);
}

/* The parent's flock, shared (a launcher making its cgroup) or exclusive
 * (a reaper judging another pid namespace's): a bounded wait for shared,
 * which only a reaper in the middle of that judgement holds off; -1 when
 * it cannot be had (the parent is then used unlocked: see above). */
int ab_cg_lock_parent(const char *parent, int how)
{
	int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int tries = 0; fd >= 0 && how == LOCK_SH && tries < 5000; tries++) {
		if (flock(fd, LOCK_SH | LOCK_NB) == 0)
			return fd;
		struct timespec ts = {0, 200 * 1000};
		nanosleep(&ts, NULL);
	}
	if (fd >= 0 && how == LOCK_EX && flock(fd, LOCK_EX | LOCK_NB) == 0)
		return fd;
	ab_close_keep_errno(fd);
	return -1;
}

int ab_cg_make_dir(char *out, size_t len, const char *root, const char *rel, const char *name,
		   int *lock)
{
	char parent[1024];
	snprintf(parent, sizeof(parent), "%.500s%.500s", root, rel);
	snprintf(out, len, "%.900s/%.100s", parent, name);
	/* the shared parent may exist (another sandbox, a delegation), and
	 * another run may remove it between our two mkdirs: then again */
	for (int tries = 0; tries < 3; tries++) {
		if (mkdir(parent, 0755) < 0 && errno != EEXIST)
			break;
		cleanup_fd int pfd __attribute__((unused)) = ab_cg_lock_parent(parent, LOCK_SH);
		if (mkdir(out, 0755) == 0) {
			struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
			*lock = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (*lock >= 0 && fcntl(*lock, F_OFD_SETLK, &fl) == 0)
				return 0;
			int e = errno;
			ab_close_keep_errno(*lock);
			*lock = -1;
			rmdir(out);
			out[0] = '\0';
			return -e;
		}
		if (errno != ENOENT)
			break;
	}
	int e = errno;
	out[0] = '\0';
	return -e;
}

/* Nobody holds the lock on path (1), someone does (0), or it cannot be
 * told (-1: never judged stale). */
int ab_cg_unlocked(int dfd, const char *name)
{
	cleanup_fd int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	if (fd < 0 || fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return -1;
	return fl.l_type == F_UNLCK;
}

/* Forget the launchers one sweep judged by /proc, by pid and start time: with
 * hundreds of sandboxes beside it, a start read each one's stat once per
 * hierarchy (five on a hybrid host), ~1,000 reads of /proc for ~200
 * sandboxes. A verdict of dead is for ever (that pid with that start
 * time); one of alive is as old as the sweep, as it was when read. */
void ab_cg_owner_sweep(void)
{
	/* its pages given back, not kept zeroed: a thousand sandboxes
	 * beside a start write every page (pids spread over the table),
	 * and an idle launcher would hold 48 KiB of them for nothing */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	if ((uintptr_t)&tab % page || sizeof(tab) % page ||
	    madvise(&tab, sizeof(tab), MADV_DONTNEED) < 0)
		memset(&tab, 0, sizeof(tab)); /* pages larger than 4 KiB: nothing beside */
}

void ab_cgroup_forget_sweeps(void)
{
	ab_cg_owner_sweep();
}

/* pid's slot (its own, or the free one where it goes), NULL when full. */
static struct owner_seen *owner_slot(int pid, unsigned long long start)
{
	for (size_t i = (size_t)pid % OWNERS, k = 0; k < OWNERS; k++, i = (i + 1) % OWNERS)
		if (!tab.o[i].pid || (tab.o[i].pid == pid && tab.o[i].start == start))
			return &tab.o[i];
	return NULL;
}

static bool launcher_alive(int pid, unsigned long long start)
{
	struct owner_seen *o = owner_slot(pid, start);
	if (o && o->pid)
		return o->alive;
	char state;
	/* a zombie holds nothing: a killed detached launcher (agentbox
	 * create) waits as one until the host's init reaps it */
	bool alive = proc_stat_of(pid, &state) == start && state != 'Z';
	if (o && tab.n < OWNERS / 2) {
		*o = (struct owner_seen){.pid = pid, .start = start, .alive = alive};
		tab.n++;
	}
	return alive;
}

/* What the name says of its launcher: alive or dead by its pid in our pid
 * namespace, or in another one (unseen). Not a name of ours: alive. */
enum ab_cg_owner ab_cg_owner(const char *name)
{
	int pid;
	unsigned long long ns, start;
	unsigned n;
	if (sscanf(name, "agentbox-ns%llu-%d-%llu-%u", &ns, &pid, &start, &n) != 4)
		return AB_CG_OWNER_ALIVE; /* not ours, or an older agentbox's: never touched */
	if (ns == 0 || ns != proc_pidns())
		return AB_CG_OWNER_UNSEEN;
	/* our pid in our pid namespace is this process: its own cgroup
	 * when the start time is ours, else an earlier owner of the pid's */
	if (pid == (int)getpid())
		return start == own_start_time() ? AB_CG_OWNER_ALIVE : AB_CG_OWNER_DEAD;
	return launcher_alive(pid, start) ? AB_CG_OWNER_ALIVE : AB_CG_OWNER_DEAD;
}
