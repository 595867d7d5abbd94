/* Where an unprivileged launcher's cgroup v2 parent comes from
 * (cgroup_delegate.h). The kernel's "no internal processes" rule lets a
 * cgroup hand controllers to its children only while it holds no process
 * itself, so a launcher dividing its own (delegated) cgroup moves into a
 * leaf first; systemd's user manager makes a Delegate=yes scope for a
 * launcher that has no cgroup of its own to divide. */
#include "cgroup/cgroup_delegate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cgroup/cgroupfs.h"
#include "cgroup/systemd_scope.h"
#include "util/util.h"

/* A cgroup path without the leaf agentbox put this process in. */
void ab_cg_strip_leaf(char *rel)
{
	char *slash = strrchr(rel, '/');
	size_t n = slash ? strlen(slash) : 0;
	if (slash && slash != rel &&
	    ((n > 9 && strcmp(slash + n - 9, "-launcher") == 0 &&
	      strncmp(slash, "/agentbox-", 10) == 0) ||
	     strcmp(slash + 1, AB_CG_OTHERS_LEAF) == 0))
		*slash = '\0';
}

/* word in a space-separated list */
static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
			return true;
	return false;
}

/* Hand memory, pids and cpu (those the parent offers) down to dir's
 * children, in one write: enabled one at a time, the threaded ones (pids,
 * cpu) go in while memory is refused in a cgroup with processes, which
 * makes it a thread root no process may then leave for a child
 * (EOPNOTSUPP). -EBUSY: dir has processes of its own. */
int ab_cg_enable_controllers(const char *dir)
{
	static const char *const ctrls[] = {"memory", "pids", "cpu"};
	char have[512] = "", on[512] = "", want[64] = "";
	/* a cgroup without the file (a fake tree) is asked for all three */
	bool known = ab_cgfs_read(dir, "cgroup.controllers", have, sizeof(have)) == 0;
	ab_cgfs_read(dir, "cgroup.subtree_control", on, sizeof(on));
	for (size_t i = 0; i < AB_ARRAY_SIZE(ctrls); i++)
		if ((!known || has_word(have, ctrls[i])) && !has_word(on, ctrls[i]))
			snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s+%s",
				 want[0] ? " " : "", ctrls[i]);
	return want[0] ? ab_cgfs_write(dir, "cgroup.subtree_control", want) : 0;
}

/* Did systemd delegate dir (Delegate=yes), the cgroup of this process's
 * unit? The system manager marks such a cgroup with the trusted.delegate
 * xattr (and user.delegate, systemd 251+); the user manager with neither,
 * so then its unit's Delegate property is asked for. */
static bool delegated(const char *dir)
{
	if (ab_cgfs_faked())
		return true;
	char v[8] = "";
	if (getxattr(dir, "trusted.delegate", v, sizeof(v)) > 0 ||
	    getxattr(dir, "user.delegate", v, sizeof(v)) > 0)
		return v[0] == '1';
	return ab_systemd_delegated() == 1;
}

/* Every process in from's cgroup.procs (but this one) into to's, or with
 * to NULL only whether there is one. */
static bool move_procs(const char *from, const char *to)
{
	char buf[65536], pid[32];
	bool any = false;
	if (ab_cgfs_read(from, "cgroup.procs", buf, sizeof(buf)) < 0)
		return false;
	for (char *p = buf; *p;) {
		long n = strtol(p, &p, 10);
		if (n > 0 && n != getpid()) {
			any = true;
			snprintf(pid, sizeof(pid), "%ld", n);
			if (to)
				ab_cgfs_write(to, "cgroup.procs", pid);
		}
		while (*p == '\n')
			p++;
	}
	return any;
}

/* Make dir a parent the sandbox's cgroup can take every controller from.
 * The "no internal processes" rule forbids that while dir holds
 * processes: this launcher (when mine) moves into a leaf of its own
 * (<name>-launcher, reaped once it is dead) and, only in a cgroup systemd
 * delegated, the other processes there (the agent that started agentbox,
 * a shell) into a shared leaf, AB_CG_OTHERS_LEAF, where every limit of the
 * delegated cgroup still holds them. -EBUSY: others there, not delegated. */
int ab_cg_v2_prepare(const char *dir, const char *name, bool mine)
{
	int r = ab_cg_enable_controllers(dir);
	if (r != -EBUSY)
		return r;
	bool others = move_procs(dir, NULL);
	if (others && !delegated(dir))
		return -EBUSY;
	char leaf[1200], pid[32];
	if (mine) {
		snprintf(leaf, sizeof(leaf), "%s/%s-launcher", dir, name);
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		if (mkdir(leaf, 0755) == 0)
			ab_cgfs_write(leaf, "cgroup.procs", pid);
	}
	snprintf(leaf, sizeof(leaf), "%s/" AB_CG_OTHERS_LEAF, dir);
	if (others && (mkdir(leaf, 0755) == 0 || errno == EEXIST)) {
		/* twice: a process may fork while the first pass moves its parent */
		move_procs(dir, leaf);
		move_procs(dir, leaf);
	}
	return ab_cg_enable_controllers(dir);
}

/* The cgroup an unprivileged launcher divides: its own (without the leaf
 * agentbox moved it into) when that is a cgroup it may write, else a
 * Delegate=yes scope systemd makes for it. rel gets its path below root;
 * why says what failed when neither works. */
int ab_cg_v2_user_parent(const char *root, const char *name, char *rel, size_t len, char *why,
			 size_t why_len)
{
	int r = -ENOENT;
	char own_why[200] = "cannot tell this process's cgroup";
	for (int attempt = 0; attempt < 2; attempt++) {
		if (ab_cgfs_own_v2(rel, len)) {
			ab_cg_strip_leaf(rel);
			char dir[1024];
			snprintf(dir, sizeof(dir), "%s%s", root, strcmp(rel, "/") ? rel : "");
			r = ab_cgfs_faked() || access(dir, W_OK) == 0
				    ? ab_cg_v2_prepare(dir, name, true)
				    : -errno;
			if (r == 0)
				return 0;
			snprintf(own_why, sizeof(own_why), "cannot divide %.100s: %s", dir,
				 r == -EBUSY ? "other processes are in it and systemd did not "
					       "delegate it"
					     : strerror(-r));
		}
		if (attempt > 0 || ab_cgfs_faked())
			break;
		char unit[128], sd_why[200];
		snprintf(unit, sizeof(unit), "%.100s.scope", name);
		r = ab_systemd_scope(unit, sd_why, sizeof(sd_why));
		if (r < 0) {
			snprintf(why, why_len, "%.80s; no systemd scope: %.98s", own_why, sd_why);
			return r;
		}
	}
	snprintf(why, why_len, "%s", own_why);
	return r;
}
