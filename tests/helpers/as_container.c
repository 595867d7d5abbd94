/* as_container [--mask-proc] [--no-sethostname] [--no-userns] [--no-setns]
 * CMD ARGS...:
 * run CMD refused what a container refuses, so graded isolation
 * (src/sandbox/isolation.c) is tested on a host without Podman (tests/containers/
 * graded-host.sh), as root and as an unprivileged user:
 *   --mask-proc        a user and mount namespace of its own in which a file
 *                      of /proc (and of any other procfs mount) is covered,
 *                      as runtimes mask /proc: the kernel then refuses a new
 *                      procfs (mount_too_revealing).
 *                      Root first becomes uid/gid 65534, like a container's
 *                      unprivileged user, who has no capability left at exec.
 *   --no-sethostname   sethostname fails with EPERM (Podman's default profile)
 *   --no-userns        clone and unshare with CLONE_NEWUSER fail with EPERM,
 *                      clone3 with ENOSYS (Docker's default profile)
 *   --no-setns         setns fails with EPERM (Docker's and Podman's default
 *                      profiles without CAP_SYS_ADMIN, and agentbox's own
 *                      for containers) */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

static int put(const char *file, const char *text)
{
	int fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* mountinfo's octal escapes (\040 for a space) undone in place */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; w++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 4;
		} else {
			*w = *r++;
		}
	}
	*w = '\0';
}

/* The kernel allows a new procfs while any procfs mount of the namespace is
 * fully visible (mnt_already_visible), so a file of every one is covered, not
 * only /proc's: a host with a second procfs (a chroot's, left mounted) would
 * otherwise let agentbox mount its own and the test would see no container. */
static int cover_every_procfs(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	char line[4096];
	int covered = 0, r = 0;
	while (r == 0 && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		char *point = NULL, *save = NULL;
		char *tok = strtok_r(line, " ", &save);
		for (int field = 0; tok && field < 4; field++)
			tok = strtok_r(NULL, " ", &save);
		point = tok;
		if (!sep || !point || strncmp(sep, " - proc ", 8) != 0)
			continue;
		unescape(point);
		char file[4200];
		snprintf(file, sizeof(file), "%s/uptime", point);
		if (mount("/dev/null", file, NULL, MS_BIND, NULL) < 0) {
			fprintf(stderr, "as_container: cannot cover %s: %s\n", file,
				strerror(errno));
			r = -1;
		}
		covered++;
	}
	fclose(f);
	if (r == 0 && covered == 0)
		errno = ENOENT, r = -1;
	return r;
}

static int mask_proc(void)
{
	if (getuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
			      setresuid(65534, 65534, 65534) < 0))
		return -1;
	/* a credential change made us undumpable: /proc/self/ would be root's */
	prctl(PR_SET_DUMPABLE, 1);
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return -1;
	char map[64];
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (put("/proc/self/uid_map", map) < 0 || put("/proc/self/setgroups", "deny") < 0)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (put("/proc/self/gid_map", map) < 0)
		return -1;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;
	return cover_every_procfs();
}

static int deny(scmp_filter_ctx ctx, bool sethost, bool userns, bool setns)
{
	int r = 0;
	if (setns)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setns), 0);
	if (sethost && r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(sethostname), 0);
	if (userns && r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
	if (userns && r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
	if (userns && r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	return r;
}

int main(int argc, char **argv)
{
	bool proc = false, sethost = false, userns = false, setns = false;
	int i = 1;
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--mask-proc") == 0)
			proc = true;
		else if (strcmp(argv[i], "--no-sethostname") == 0)
			sethost = true;
		else if (strcmp(argv[i], "--no-userns") == 0)
			userns = true;
		else if (strcmp(argv[i], "--no-setns") == 0)
			setns = true;
		else
			break;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: as_container [--mask-proc] [--no-sethostname] "
				"[--no-userns] [--no-setns] CMD [ARGS...]\n");
		return 125;
	}
	if (proc && mask_proc() < 0) {
		fprintf(stderr, "as_container: cannot mask /proc: %s\n", strerror(errno));
		return 125;
	}
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int r = ctx ? deny(ctx, sethost, userns, setns) : -ENOMEM;
	if (r == 0 && (sethost || userns || setns))
		r = seccomp_load(ctx);
	if (r < 0) {
		fprintf(stderr, "as_container: cannot load the filter: %s\n", strerror(-r));
		return 125;
	}
	seccomp_release(ctx);
	execvp(argv[i], argv + i);
	fprintf(stderr, "as_container: %s: %s\n", argv[i], strerror(errno));
	return 127;
}
