/* Graded isolation (isolation.h, docs/containers.md).
 *
 * The probe makes, in a throwaway child, what a sandbox needs that a
 * container may refuse: the namespaces (one clone, as the launcher does),
 * a procfs (refused over a container's masked /proc: the kernel's
 * mount_too_revealing), a host name (refused by Podman's and Docker's
 * default seccomp profiles). It runs once per process, only where the
 * answer is needed: --isolation best, agentbox check, and to explain why a
 * sandbox with --isolation full could not be built. */
#include "sandbox/isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"
#include "sandbox/userns.h"
#include "util/util.h"

static const struct {
	unsigned bit;
	const char *name;
	const char *what; /* what the sandbox is without it */
} layers[] = {
	{AB_MISSING_NAMESPACES, "namespaces",
	 "no mount view (the command sees the host's paths: the workspace at its host "
	 "path, not /workspace, the rest read-only, protected paths not read-only: those "
	 "created are still renamed aside), no "
	 "pid, network (Landlock refuses TCP), ipc or uts namespace; Landlock, seccomp, "
	 "no_new_privs, no capabilities, rlimits, the env policy, timeouts and the "
	 "whole-tree kill remain"},
	{AB_MISSING_OWN_PROC, "own-proc",
	 "the container's /proc is bound instead: the command sees the container's "
	 "processes there (it cannot signal them), and procps' ps, which looks for its "
	 "own pid there, fails (\"lookup self\"): an unmasked /proc gives it its own"},
	{AB_MISSING_UTS, "uts", "the command sees the container's host name"},
};

int ab_isolation_parse(const char *value, enum ab_isolation *out, struct ab_error *err)
{
	if (strcmp(value, "full") == 0)
		*out = AB_ISOLATION_FULL;
	else if (strcmp(value, "best") == 0)
		*out = AB_ISOLATION_BEST;
	else
		return ab_error_plain(err, EINVAL, "--isolation: '%s' is not full or best", value);
	return 0;
}

const char *ab_isolation_mode_name(enum ab_isolation mode)
{
	return mode == AB_ISOLATION_BEST ? "best" : "full";
}

struct probe_msg {
	unsigned missing;
	char why[3][160];
};

static void probe_note(struct probe_msg *m, unsigned bit, const char *what, int e)
{
	m->missing |= bit;
	for (size_t i = 0; i < AB_ARRAY_SIZE(layers); i++)
		if (layers[i].bit == bit)
			snprintf(m->why[i], sizeof(m->why[i]), "%s: %s", what, strerror(e));
}

static void probe_write_map(const char *file, const char *map)
{
	cleanup_fd int fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd >= 0 && write(fd, map, strlen(map)) < 0)
		return;
}

/* pid 1 of the probe's namespaces: try each layer, report, leave. */
static _Noreturn void probe_in_namespaces(int fd, uid_t uid, gid_t gid)
{
	struct probe_msg m = {0};
	char map[64];
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
	probe_write_map("/proc/self/uid_map", map);
	probe_write_map("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
	probe_write_map("/proc/self/gid_map", map);
	/* as mount.c makes it: fsmount is where a masked /proc refuses */
	cleanup_fd int fs = fsopen("proc", FSOPEN_CLOEXEC);
	int mnt = -1;
	if (fs >= 0 && fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
		mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID);
	if (mnt < 0)
		probe_note(&m, AB_MISSING_OWN_PROC, "a new procfs cannot be mounted", errno);
	else
		close(mnt);
	if (sethostname("agentbox", 8) < 0)
		probe_note(&m, AB_MISSING_UTS, "sethostname in a new UTS namespace", errno);
	_exit(write(fd, &m, sizeof(m)) == (ssize_t)sizeof(m) ? 0 : 1);
}

static void probe_run(bool net, struct probe_msg *m)
{
	memset(m, 0, sizeof(*m));
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		probe_note(m, AB_MISSING_NAMESPACES, "cannot probe (pipe)", errno);
		return;
	}
	struct ab_config c = {.net = net ? AB_NET_NONE : AB_NET_HOST};
	uid_t uid = geteuid();
	gid_t gid = getegid();
	pid_t pid =
		(pid_t)syscall(SYS_clone, userns_clone_flags(&c) | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid == 0) {
		close(p[0]);
		probe_in_namespaces(p[1], uid, gid);
	}
	int e = errno;
	close(p[1]);
	if (pid < 0) {
		probe_note(m, AB_MISSING_NAMESPACES,
			   "clone of the user, mount, pid, ipc, uts (and network) namespaces", e);
	} else {
		struct probe_msg got;
		ssize_t n;
		while ((n = read(p[0], &got, sizeof(got))) < 0 && errno == EINTR)
			;
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (n == (ssize_t)sizeof(got))
			*m = got;
		else
			probe_note(m, AB_MISSING_NAMESPACES, "the probe's namespaces died", EIO);
	}
	close(p[0]);
}

unsigned ab_isolation_probe(bool net, char *why, size_t why_len)
{
	static struct probe_msg cached[2];
	static bool done[2];
	if (!done[net]) {
		probe_run(net, &cached[net]);
		/* tests (tests/integration/test-isolation.sh) stand in for a
		 * container that refuses these; it can only make agentbox refuse
		 * more (full) or drop more, always named (best) */
		const char *deny = getenv("AGENTBOX_TEST_ISOLATION_DENY");
		for (size_t i = 0; deny && i < AB_ARRAY_SIZE(layers); i++)
			if (strstr(deny, layers[i].name) && !(cached[net].missing & layers[i].bit))
				probe_note(&cached[net], layers[i].bit,
					   "AGENTBOX_TEST_ISOLATION_DENY", EPERM);
		done[net] = true;
	}
	const struct probe_msg *m = &cached[net];
	if (why && why_len) {
		why[0] = '\0';
		size_t off = 0;
		for (size_t i = 0; i < AB_ARRAY_SIZE(layers); i++) {
			if (!(m->missing & layers[i].bit) || off >= why_len)
				continue;
			int n = snprintf(why + off, why_len - off, "%s%s (%s)", off ? "; " : "",
					 layers[i].name, m->why[i]);
			off += n > 0 ? (size_t)n : 0;
		}
	}
	return m->missing;
}

void ab_isolation_names(unsigned missing, char *out, size_t len)
{
	size_t off = 0;
	out[0] = '\0';
	for (size_t i = 0; i < AB_ARRAY_SIZE(layers) && off < len; i++)
		if (missing & layers[i].bit) {
			int n = snprintf(out + off, len - off, "%s%s", off ? ", " : "",
					 layers[i].name);
			off += n > 0 ? (size_t)n : 0;
		}
}

int ab_isolation_decide(struct ab_config *cfg, struct ab_error *err)
{
	cfg->isolation_missing = 0;
	if (cfg->isolation != AB_ISOLATION_BEST)
		return 0;
	char why[600];
	unsigned missing = ab_isolation_probe(cfg->net == AB_NET_NONE, why, sizeof(why));
	if (missing & AB_MISSING_NAMESPACES) {
		/* isolation_bare.c: what can be kept without any namespace */
		missing = AB_MISSING_NAMESPACES;
		const char *no = geteuid() == 0	 ? "as root (the command would keep uid 0)"
				 : cfg->skills	 ? "with --skills (no mount puts it at /skills)"
				 : cfg->rootfs	 ? "with --rootfs (no mount makes it the root)"
				 : cfg->image	 ? "with --image (no mount makes it the root)"
				 : cfg->n_mounts ? "with --bind, --ro-bind or --tmpfs (no mounts)"
						 : NULL;
		if (no)
			return ab_error_plain(
				err, EPERM,
				"--isolation best: no user namespaces here, and no "
				"sandbox without them %s: %.200s (docs/containers.md)",
				no, why);
	}
	cfg->isolation_missing = missing;
	for (size_t i = 0; i < AB_ARRAY_SIZE(layers) && cfg->notice; i++)
		if (missing & layers[i].bit) {
			char line[400];
			snprintf(line, sizeof(line),
				 "--isolation best: partial isolation, missing %s: %s",
				 layers[i].name, layers[i].what);
			cfg->notice(line);
		}
	return 0;
}

void ab_isolation_explain(const struct ab_config *cfg, unsigned relevant, struct ab_error *err)
{
	/* what a container refuses fails with these; other errors are the
	 * caller's (a missing --cwd, a bad profile) and keep their message */
	if (cfg->isolation != AB_ISOLATION_FULL ||
	    (err->code != EPERM && err->code != EACCES && err->code != ENOSYS))
		return;
	char why[600], names[120];
	unsigned missing = ab_isolation_probe(cfg->net == AB_NET_NONE, why, sizeof(why));
	if (!(missing & relevant))
		return;
	ab_isolation_names(missing, names, sizeof(names));
	/* the why last: it is what may be cut */
	int n = snprintf(err->msg, sizeof(err->msg),
			 "--isolation full: this host does not allow full isolation, missing %s "
			 "(--isolation best runs without what can be dropped; "
			 "docs/containers.md): ",
			 names);
	if (n > 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, "%.*s",
			 (int)(sizeof(err->msg) - (size_t)n - 1), why);
}

json_object *ab_isolation_json(unsigned missing)
{
	if (!missing)
		return json_object_new_string("full");
	json_object *o = json_object_new_object();
	json_object_object_add(o, "level", json_object_new_string("partial"));
	json_object *a = json_object_new_array();
	for (size_t i = 0; i < AB_ARRAY_SIZE(layers); i++)
		if (missing & layers[i].bit)
			json_object_array_add(a, json_object_new_string(layers[i].name));
	json_object_object_add(o, "missing", a);
	return o;
}
