/* agentbox setup-delegation USER [--remove] (docs/install.md, "Cgroups and
 * limits"): on a cgroup v1 or hybrid host, root gives USER a group of
 * their own in each controller agentbox uses (memory, cpu, cpuacct, pids,
 * freezer, and the cgroup2 beside them), /agentbox-USER, so that USER's
 * sandboxes get real limits and pause with --cgroup-parent /agentbox-USER;
 * a systemd unit that runs the same command at boot makes them again (not
 * tmpfiles.d: its "z" lines refuse a root-owned cgroup.procs under a
 * directory the user owns, as an unsafe path transition). On a cgroup v2
 * host, systemd's user manager delegates (Delegate=yes): nothing to make. */
#include "cli/delegate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentbox/agentbox.h"
#include "detach/detach_lines.h"
#include "util/util.h"

#define CGROUP_ROOT "/sys/fs/cgroup"
#define UNIT_DIR    "/etc/systemd/system"

static const char *const controllers[] = {"memory", "cpu", "cpuacct", "pids", "freezer", "unified"};

static const char usage_delegation[] =
	"Usage: agentbox setup-delegation USER [--remove]\n"
	"\n"
	"As root, on a cgroup v1 or hybrid host: give USER a cgroup of their own,\n"
	"/agentbox-USER, in each of the memory, cpu, cpuacct, pids and freezer\n"
	"hierarchies (and the cgroup2 beside them), so that USER's sandboxes get\n"
	"real --memory, --cpus and --pids limits and can be paused, with\n"
	"--cgroup-parent /agentbox-USER (or \"cgroup-parent\" in USER's\n"
	"~/.config/agentbox/config.json). The systemd unit\n"
	"agentbox-delegation-USER.service, enabled in /etc/systemd/system, makes\n"
	"them again at every boot. On a cgroup v2 host systemd's user manager\n"
	"delegates instead, and there is nothing to make.\n"
	"\n"
	"  --remove   take the groups and the unit away again\n";

static bool is_dir(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A v1 or hybrid host: controllers mounted each on its own. */
static bool cgroup_v1(void)
{
	return is_dir(CGROUP_ROOT "/memory") || is_dir(CGROUP_ROOT "/pids");
}

/* path owned by uid:gid, not following a link a user might have put there
 * (the groups are root's until now: only root made them). */
static int give(const char *path, uid_t uid, gid_t gid)
{
	return fchownat(AT_FDCWD, path, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 && errno != ENOENT
		       ? -errno
		       : 0;
}

static int make_groups(const char *name, const struct passwd *pw)
{
	char dir[256], file[300];
	int made = 0;
	for (size_t i = 0; i < sizeof(controllers) / sizeof(controllers[0]); i++) {
		snprintf(dir, sizeof(dir), CGROUP_ROOT "/%s", controllers[i]);
		if (!is_dir(dir))
			continue; /* not mounted here (freezer, cpuacct, unified are optional) */
		snprintf(dir, sizeof(dir), CGROUP_ROOT "/%s/%s", controllers[i], name);
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return detach_fail("setup-delegation: cannot make %s: %s", dir,
					   strerror(errno));
		if (!is_dir(dir))
			return detach_fail("setup-delegation: %s is not a directory", dir);
		if (give(dir, pw->pw_uid, pw->pw_gid) < 0)
			return detach_fail("setup-delegation: cannot give %s to its user: %s", dir,
					   strerror(errno));
		/* what a process is moved in by: cgroup.procs (and v1's tasks) */
		const char *const files[] = {"cgroup.procs", "tasks"};
		for (size_t k = 0; k < 2; k++) {
			snprintf(file, sizeof(file), "%s/%s", dir, files[k]);
			if (access(file, F_OK) < 0)
				continue;
			if (give(file, pw->pw_uid, pw->pw_gid) < 0)
				return detach_fail(
					"setup-delegation: cannot give %s to its user: %s", file,
					strerror(errno));
		}
		made++;
	}
	return made ? 0
		    : detach_fail("setup-delegation: no cgroup controller is mounted under %s",
				  CGROUP_ROOT);
}

/* An empty cgroup and the empty cgroups below it, children first (the
 * user's sandboxes removed theirs; a killed one's are empty), bounded. */
static void remove_cgroup(const char *dir, int depth)
{
	DIR *d = depth < 16 ? opendir(dir) : NULL;
	char child[4096];
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if ((size_t)snprintf(child, sizeof(child), "%s/%s", dir, e->d_name) < sizeof(child))
			remove_cgroup(child, depth + 1);
	}
	if (d)
		closedir(d);
	if (rmdir(dir) < 0 && errno != ENOENT)
		fprintf(stderr, "agentbox: setup-delegation: cannot remove %s: %s\n", dir,
			strerror(errno));
}

static void remove_groups(const char *name)
{
	char dir[256];
	for (size_t i = 0; i < sizeof(controllers) / sizeof(controllers[0]); i++) {
		snprintf(dir, sizeof(dir), CGROUP_ROOT "/%s/%s", controllers[i], name);
		if (is_dir(dir))
			remove_cgroup(dir, 0);
	}
}

/* The unit that runs this command again at boot, enabled as systemctl
 * enable would (a link in multi-user.target.wants), so it holds whether
 * systemd runs now or not. */
static int write_unit(const char *unit, const char *wants, const char *user)
{
	char exe[4096], tmp[320];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return detach_fail("setup-delegation: cannot find this program's path: %s",
				   strerror(errno));
	exe[n] = 0;
	if (mkdir(UNIT_DIR, 0755) < 0 && errno != EEXIST)
		return detach_fail("setup-delegation: cannot make %s: %s", UNIT_DIR,
				   strerror(errno));
	if (mkdir(UNIT_DIR "/multi-user.target.wants", 0755) < 0 && errno != EEXIST)
		return detach_fail("setup-delegation: cannot make %s: %s",
				   UNIT_DIR "/multi-user.target.wants", strerror(errno));
	snprintf(tmp, sizeof(tmp), "%s.new", unit);
	cleanup_fd int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return detach_fail("setup-delegation: cannot write %s: %s", tmp, strerror(errno));
	char text[5000];
	int len = snprintf(text, sizeof(text),
			   "# agentbox setup-delegation %s (--remove takes it away)\n"
			   "[Unit]\n"
			   "Description=agentbox: %s's own cgroups\n"
			   "\n"
			   "[Service]\n"
			   "Type=oneshot\n"
			   "RemainAfterExit=yes\n"
			   "ExecStart=%s setup-delegation %s\n"
			   "\n"
			   "[Install]\n"
			   "WantedBy=multi-user.target\n",
			   user, user, exe, user);
	if (len < 0 || (size_t)len >= sizeof(text) || write(fd, text, (size_t)len) != len ||
	    rename(tmp, unit) < 0) {
		int e = errno;
		unlink(tmp);
		return detach_fail("setup-delegation: cannot write %s: %s", unit, strerror(e));
	}
	char target[320];
	snprintf(target, sizeof(target), "../%s", strrchr(unit, '/') + 1);
	if (symlink(target, wants) < 0 && errno != EEXIST)
		return detach_fail("setup-delegation: cannot enable %s: %s", unit, strerror(errno));
	return 0;
}

int ab_setup_delegation(int argc, char **argv)
{
	const char *user = NULL;
	bool remove = false;
	int r = detach_simple_args(argc, argv, "setup-delegation", usage_delegation, "--remove",
				   NULL, &remove, &user);
	if (r >= 0)
		return r;
	if (!user)
		return detach_fail(
			"setup-delegation: which user? (agentbox setup-delegation USER)");
	struct passwd *pw = getpwnam(user);
	if (!pw)
		return detach_fail("setup-delegation: no user %s", user);
	if (pw->pw_uid == 0)
		return detach_fail("setup-delegation: root needs no delegation");
	for (const char *c = pw->pw_name; *c; c++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
			    *c))
			return detach_fail("setup-delegation: user name '%s': only letters, "
					   "digits, '.', '_' and '-' "
					   "make a cgroup's and a unit's name",
					   pw->pw_name);
	if (geteuid() != 0)
		return detach_fail("setup-delegation: only root may give a user cgroups (sudo "
				   "agentbox setup-delegation %s)",
				   user);
	if (!cgroup_v1()) {
		printf("agentbox: a cgroup v2 host: systemd's user manager delegates %s's "
		       "cgroup (Delegate=yes), which agentbox uses; nothing to make "
		       "(agentbox check, as %s, tells what holds)\n",
		       user, user);
		return 0;
	}
	char name[128], unit[300], wants[400];
	snprintf(name, sizeof(name), "agentbox-%s", pw->pw_name);
	snprintf(unit, sizeof(unit), UNIT_DIR "/agentbox-delegation-%s.service", pw->pw_name);
	snprintf(wants, sizeof(wants),
		 UNIT_DIR "/multi-user.target.wants/agentbox-delegation-%s.service", pw->pw_name);
	if (remove) {
		remove_groups(name);
		if ((unlink(wants) < 0 && errno != ENOENT) || (unlink(unit) < 0 && errno != ENOENT))
			return detach_fail("setup-delegation: cannot remove %s: %s", unit,
					   strerror(errno));
		printf("agentbox: took /%s and %s away from %s\n", name, unit, user);
		return 0;
	}
	r = make_groups(name, pw);
	if (r == 0)
		r = write_unit(unit, wants, pw->pw_name);
	if (r != 0)
		return r;
	printf("/%s\n", name);
	fprintf(stderr,
		"agentbox: %s has /%s in each cgroup controller (made again at boot by %s): "
		"their sandboxes get limits with --cgroup-parent /%s, or \"cgroup-parent\": "
		"\"/%s\" in ~/.config/agentbox/config.json\n",
		user, name, unit, name, name);
	return 0;
}
