#include "view/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/error.h"
#include "confine/landlock_compat.h"
#include "util/util.h"

#define FS_READ                                                                                    \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_WRITE_V1                                                                                \
	(LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                           \
	 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |                           \
	 LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |                               \
	 LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |                             \
	 LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM)

/* Device nodes a command may write (besides /dev/pts and /dev/shm). */
static const char *const writable_devs[] = {
	"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom",
};

static int add_rule(int ruleset, const char *path, uint64_t access, uint64_t handled,
		    struct ab_error *err)
{
	cleanup_fd int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0; /* not in this view */
		return ab_error_set(err, errno, "landlock: cannot open %s", path);
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		return ab_error_set(err, errno, "landlock: cannot stat %s", path);
	/* rights that only make sense on directories are refused on files */
	if (!S_ISDIR(st.st_mode))
		access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
			  LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE;
	struct landlock_path_beneath_attr attr = {
		.allowed_access = access & handled,
		.parent_fd = fd,
	};
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) < 0)
		return ab_error_set(err, errno, "landlock: cannot add a rule for %s", path);
	return 0;
}

int landlock_prepare(const struct view_plan *plan, bool restack, int *out, int *abi_out,
		     struct ab_error *err)
{
	*out = -1;
	*abi_out = 0;
	int abi =
		(int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1)
		return 0; /* no Landlock here (ENOSYS, or disabled: EOPNOTSUPP) */
	uint64_t handled = FS_READ | FS_WRITE_V1;
	if (abi >= 2)
		handled |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
	/* later rights (ioctl on devices, network) are not handled: the
	 * mounts, seccomp and the network namespace already decide those */
	struct landlock_ruleset_attr rs = {.handled_access_fs = handled};
	cleanup_fd int ruleset = (int)syscall(SYS_landlock_create_ruleset, &rs, sizeof(rs), 0);
	if (ruleset < 0)
		return ab_error_set(err, errno, "landlock: cannot create a ruleset");
	/* Landlock skips the mount points it walks up through: the overlays a
	 * checkpoint mounts over /workspace are beneath no rule but the root's */
	int r = add_rule(ruleset, "/", restack ? handled : FS_READ, handled, err);
	for (size_t i = 0; r == 0 && i < plan->n; i++) {
		const struct view_entry *e = &plan->e[i];
		if ((e->kind == VIEW_BIND || e->kind == VIEW_TMPFS) && e->rw)
			r = add_rule(ruleset, e->dst, handled, handled, err);
	}
	if (r == 0)
		r = add_rule(ruleset, "/dev/shm", handled, handled, err);
	if (r == 0)
		r = add_rule(ruleset, "/dev/pts", FS_READ | LANDLOCK_ACCESS_FS_WRITE_FILE, handled,
			     err);
	for (size_t i = 0; r == 0 && i < AB_ARRAY_SIZE(writable_devs); i++)
		r = add_rule(ruleset, writable_devs[i],
			     FS_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE,
			     handled, err);
	if (r < 0)
		return r;
	*out = ab_steal_fd(&ruleset);
	*abi_out = abi;
	return 0;
}

int landlock_enforce(int fd, struct ab_error *err)
{
	if (fd < 0)
		return 0;
	if (syscall(SYS_landlock_restrict_self, fd, 0) < 0)
		return ab_error_set(err, errno, "landlock: cannot restrict the command");
	return 0;
}

/* AGENTBOX_TEST_NO_SIGNAL_SCOPE=1 in the launcher's environment: a command
 * layer without the signal scope, as on a kernel before Landlock ABI 6, so
 * that the fallback (a stopped supervisor replaced, init.c) is tested here */
static bool knob_no_signal_scope;

void landlock_read_knobs(void)
{
	const char *v = getenv("AGENTBOX_TEST_NO_SIGNAL_SCOPE");
	knob_no_signal_scope = v && strcmp(v, "1") == 0;
}

bool landlock_signal_scope(int abi)
{
	return abi >= 6 && !knob_no_signal_scope;
}

int landlock_command_layer(void)
{
	/* nothing an unprivileged process could do anyway: the layer is for
	 * its domain, not for its rights */
	struct ab_landlock_ruleset_attr rs = {.handled_access_fs = LANDLOCK_ACCESS_FS_MAKE_BLOCK};
	size_t size = sizeof(rs.handled_access_fs);
	int abi =
		(int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (landlock_signal_scope(abi)) {
		/* Linux 6.12: no signal out of the domain, so the init, the
		 * shims, the warm shells and other commands are out of its kill */
		rs.scoped = LANDLOCK_SCOPE_SIGNAL;
		size = sizeof(rs);
	}
	int fd = (int)syscall(SYS_landlock_create_ruleset, &rs, size, 0);
	if (fd < 0)
		return -errno;
	/* above the fds a command's child is given (0-4), close-on-exec */
	int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	int e = errno;
	close(fd);
	return high < 0 ? -e : high;
}
