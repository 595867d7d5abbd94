/* Idmapped mounts of the sources the caller named, made by the launcher
 * (idmap.h). */
#include "view/idmap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"
#include "util/parse.h"
#include "seccomp/seccomp_bpf.h"
#include "seccomp/seccomp_guard.h"
#include "util/util.h"
#include "util/vfork.h"

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif
#ifndef CIFS_SUPER_MAGIC
#define CIFS_SUPER_MAGIC 0xFF534D42
#endif
#ifndef SMB2_MAGIC_NUMBER
#define SMB2_MAGIC_NUMBER 0xFE534D42
#endif
#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

/* The name of the filesystem fd lies on, for messages. */
static const char *fs_name(int fd, char *buf, size_t n)
{
	static const struct {
		long magic;
		const char *name;
	} names[] = {
		{EXT4_SUPER_MAGIC, "ext4"},
		{TMPFS_MAGIC, "tmpfs"},
		{OVERLAYFS_SUPER_MAGIC, "overlayfs"},
		{BTRFS_SUPER_MAGIC, "btrfs"},
		{XFS_SUPER_MAGIC, "xfs"},
		{NFS_SUPER_MAGIC, "nfs"},
		{FUSE_SUPER_MAGIC, "fuse"},
		{V9FS_MAGIC, "9p"},
		{SMB2_MAGIC_NUMBER, "smb"},
		{CIFS_SUPER_MAGIC, "cifs"},
		{SQUASHFS_MAGIC, "squashfs"},
		{RAMFS_MAGIC, "ramfs"},
	};
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0)
		return "unknown";
	for (size_t i = 0; i < AB_ARRAY_SIZE(names); i++)
		if ((long)sf.f_type == names[i].magic)
			return names[i].name;
	snprintf(buf, n, "type 0x%lx", (unsigned long)sf.f_type);
	return buf;
}

static int write_proc_file(pid_t pid, const char *name, const char *data, struct ab_error *err)
{
	char path[64];
	/* pid 0: our own, through /proc/self, which is right even where /proc
	 * is a container's bound in (isolation.h: own-proc missing) */
	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/%s", name);
	else
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	cleanup_fd int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return ab_error_set(err, errno, "cannot open %s", path);
	size_t len = strlen(data);
	ssize_t n = write(fd, data, len);
	if (n < 0)
		return ab_error_set(err, errno, "cannot write '%.*s' to %s",
				    (int)strcspn(data, "\n"), data, path);
	if ((size_t)n != len)
		return ab_error_plain(err, EIO, "short write to %s", path);
	return 0;
}

int idmap_write_maps(pid_t pid, uid_t uid, uid_t outer_uid, gid_t gid, gid_t outer_gid,
		     bool deny_setgroups, struct ab_error *err)
{
	char map[64];
	int r;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)outer_uid);
	if ((r = write_proc_file(pid, "uid_map", map, err)) < 0)
		return r;
	if (deny_setgroups && (r = write_proc_file(pid, "setgroups", "deny", err)) < 0)
		return r;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)outer_gid);
	return write_proc_file(pid, "gid_map", map, err);
}

/* The child that carries the namespace: nothing to do but be there. */
static int userns_child(void *arg)
{
	(void)arg;
	return 0;
}

/* A user namespace whose only mapping sends uid/gid (as a filesystem
 * stores them) to host_uid/host_gid: what MOUNT_ATTR_IDMAP takes. Its maps
 * are written through a process in it, here a child that exits at once:
 * its credentials, and with them /proc/PID/uid_map and ns/user, reach the
 * namespace until it is reaped, and the fd keeps the namespace after;
 * *child is the pid to reap later. The child shares the launcher's memory
 * on a stack of its own and the launcher waits the few microseconds until
 * it has exited (CLONE_VM | CLONE_VFORK, which Valgrind accepts): a
 * fork-like child copied the launcher's page tables, and every page the
 * launcher wrote before the child was gone was copied again. */
static int make_userns(uid_t uid, gid_t gid, uid_t host_uid, gid_t host_gid, pid_t *child,
		       struct ab_error *err)
{
	/* on this frame, which lives on: the launcher is suspended until the
	 * child has exited (and each thread's session has a stack of its own) */
	_Alignas(16) char stack[16384];
	pid_t pid = ab_vfork_child(userns_child, NULL, CLONE_NEWUSER, stack, sizeof(stack));
	if (pid < 0)
		return ab_error_set(err, errno, "cannot make a user namespace for an idmapping");
	*child = pid;
	int fd = idmap_write_maps(pid, uid, host_uid, gid, host_gid, false, err);
	if (fd < 0)
		return fd;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ab_error_set(err, errno, "cannot open %s", path);
	return fd;
}

static void reap(pid_t pid)
{
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* A detached copy of the tree at src_fd with attrs on every mount of it,
 * idmapped through userns when it is not -1. Returns the copy, or -errno. */
static int make_tree(int src_fd, int userns, uint64_t attrs)
{
	cleanup_fd int tree = open_tree(
		src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (tree < 0)
		return -errno;
	struct mount_attr a = {.attr_set = attrs};
	if (userns >= 0) {
		a.attr_set |= MOUNT_ATTR_IDMAP;
		a.userns_fd = (uint64_t)userns;
	}
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0)
		return -errno;
	return ab_steal_fd(&tree);
}

/* The kernel's answers when a filesystem (or one mounted beneath the
 * source) cannot be idmapped, or the kernel has no idmapped mounts. */
const char *idmap_eperm_reason(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {{0}};
	bool admin = syscall(SYS_capget, &h, d) == 0 && (d[0].effective & (1U << CAP_SYS_ADMIN));
	return admin ? "idmapped mounts need CAP_SYS_ADMIN in the user namespace that owns the "
		       "mount, an outer one here (a user-namespaced container)"
		     : "idmapped mounts need CAP_SYS_ADMIN, which this process lacks (as root "
		       "in a Podman or Docker container by default)";
}

const char *const idmap_eperm_fix =
	"run agentbox as an unprivileged user (podman or docker run --user 1000), or "
	"pass --host-uid N to run the sandbox as that unprivileged uid with the "
	"workspace bound as it is (N must be able to write it)";

static bool refused(int r)
{
	return r == -EINVAL || r == -EOPNOTSUPP || r == -ENOSYS || r == -E2BIG;
}

struct ns_cache {
	struct {
		uid_t uid;
		gid_t gid;
		int fd;
	} e[8];
	size_t n;
};

static void ns_cache_free(struct ns_cache *c)
{
	for (size_t i = 0; i < c->n; i++)
		close(c->e[i].fd);
	c->n = 0;
}

/* The namespace for one owner, made once per run for each distinct owner
 * (nearly always one: the workspace's). Returns an fd the cache owns. */
static int ns_for(struct ns_cache *c, struct view_plan *plan, uid_t uid, gid_t gid, uid_t host_uid,
		  gid_t host_gid, struct ab_error *err)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->e[i].uid == uid && c->e[i].gid == gid)
			return c->e[i].fd;
	if (c->n == AB_ARRAY_SIZE(c->e)) {
		close(c->e[0].fd);
		memmove(&c->e[0], &c->e[1], (c->n - 1) * sizeof(c->e[0]));
		c->n--;
	}
	pid_t child = -1;
	int fd = make_userns(uid, gid, host_uid, host_gid, &child, err);
	if (child > 0 && plan->n_idmap_helpers < AB_ARRAY_SIZE(plan->idmap_helpers))
		plan->idmap_helpers[plan->n_idmap_helpers++] = child;
	else if (child > 0)
		reap(child);
	if (fd < 0)
		return fd;
	c->e[c->n].uid = uid;
	c->e[c->n].gid = gid;
	c->e[c->n].fd = fd;
	c->n++;
	return fd;
}

static void add_notice(char **notices, const char *line)
{
	size_t old = *notices ? strlen(*notices) : 0;
	char *s = realloc(*notices, old + strlen(line) + 2);
	if (!s)
		return;
	snprintf(s + old, strlen(line) + 2, "%s\n", line);
	*notices = s;
}

static int guard_build(struct sock_fprog **out, struct ab_error *err);

int idmap_plan_trees(struct view_plan *plan, uid_t host_uid, gid_t host_gid, char **notices,
		     struct ab_error *err)
{
	cleanup_fd int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return ab_error_set(err, errno, "cannot open /");
	const struct view_entry *ws = NULL;
	for (size_t i = 0; i < plan->n && !ws; i++)
		if (plan->e[i].kind == VIEW_BIND && strcmp(plan->e[i].dst, "/workspace") == 0)
			ws = &plan->e[i];
	struct ns_cache cache = {.n = 0};
	int r = 0;
	for (size_t i = 0; i < plan->n && r == 0; i++) {
		struct view_entry *e = &plan->e[i];
		if (e->kind != VIEW_BIND || !e->host_open)
			continue;
		/* a protected path looks like the rest of the workspace */
		bool in_ws = ws && e != ws && !e->user && ab_path_is_under(e->dst, "/workspace");
		uid_t uid = in_ws ? ws->owner_uid : e->owner_uid;
		gid_t gid = in_ws ? ws->owner_gid : e->owner_gid;
		if ((r = view_open_source(root, e, err)) < 0)
			break;
		int ns = ns_for(&cache, plan, uid, gid, host_uid, host_gid, err);
		if (ns < 0) {
			r = ns;
			break;
		}
		uint64_t attrs =
			MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (e->rw ? 0 : MOUNT_ATTR_RDONLY);
		int t = make_tree(e->src_fd, ns, attrs);
		if (refused(t)) {
			char buf[32];
			const char *fs = fs_name(e->src_fd, buf, sizeof(buf));
			if (e == ws) {
				r = ab_error_plain(
					err, EOPNOTSUPP,
					"cannot idmap the workspace '%s': its filesystem (%s) "
					"does not support idmapped mounts on this kernel (or has "
					"another filesystem mounted beneath it); pass --host-uid "
					"N to run the sandbox as an unprivileged host uid that "
					"may use the workspace as it is",
					e->src, fs);
				break;
			}
			char line[600];
			snprintf(line, sizeof(line),
				 "'%s' (%s) cannot be idmapped: bound at %s as it is, its files "
				 "owned by their host owners",
				 e->src, fs, e->dst);
			add_notice(notices, line);
			t = make_tree(e->src_fd, -1, attrs);
		}
		if (t == -EPERM) {
			r = ab_error_plain(err, EPERM, "cannot idmap '%s' to bind at %s: %s; %s",
					   e->src, e->dst, idmap_eperm_reason(), idmap_eperm_fix);
			break;
		}
		if (t < 0) {
			r = ab_error_set(err, -t, "cannot idmap '%s' to bind at %s", e->src,
					 e->dst);
			break;
		}
		e->tree_fd = t;
		close(e->src_fd);
		e->src_fd = -1;
	}
	ns_cache_free(&cache);
	if (r == 0)
		r = guard_build(&plan->setid_guard, err);
	return r;
}

/* The host's path (at most 4 MiB), NUL-terminated, or NULL. */
static char *read_small(const char *path)
{
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (4 << 20))
		return NULL;
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return NULL;
	ssize_t n = read(fd, buf, (size_t)st.st_size);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

int idmap_plan_id_files(struct view_plan *plan, uid_t uid, gid_t gid, const char *home,
			struct ab_error *err)
{
	struct stat st;
	if (lstat("/etc", &st) < 0 || !S_ISDIR(st.st_mode))
		return 0; /* no /etc of the host's own in the view */
	cleanup_free char *passwd = read_small("/etc/passwd");
	cleanup_free char *group = read_small("/etc/group");
	return view_plan_id_texts(plan, passwd, group, uid, gid, home, err);
}

int idmap_probe(const char *dir, struct ab_error *err)
{
	cleanup_fd int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return ab_error_set(err, errno, "cannot open '%s'", dir);
	pid_t child = -1;
	cleanup_fd int ns = make_userns(st.st_uid, st.st_gid, AB_SANDBOX_HOST_ID,
					AB_SANDBOX_HOST_ID, &child, err);
	if (child > 0)
		reap(child);
	if (ns < 0)
		return ns;
	cleanup_fd int t = make_tree(fd, ns, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (t == -EPERM)
		return ab_error_plain(err, EPERM, "'%s' cannot be idmapped: %s", dir,
				      idmap_eperm_reason());
	if (t < 0) {
		char buf[32];
		return ab_error_set(err, -t, "'%s' (%s) cannot be idmapped", dir,
				    fs_name(fd, buf, sizeof(buf)));
	}
	return 0;
}

/* ---- the setid guard ---- */

/* The guard compiled at build time when it is complete (libseccomp knew
 * every syscall it names), else here: compiling it costs a start ~0.15 ms. */
static int guard_build(struct sock_fprog **out, struct ab_error *err)
{
	if (ab_setid_guard_len == 0) {
		bool complete;
		return seccomp_setid_guard_compile(out, &complete, err);
	}
	struct sock_fprog *p = calloc(1, sizeof(*p));
	struct sock_filter *f = malloc(ab_setid_guard_len * sizeof(*f));
	if (!p || !f) {
		free(p);
		free(f);
		return ab_error_set(err, ENOMEM, "building the setid guard");
	}
	memcpy(f, ab_setid_guard_compiled, ab_setid_guard_len * sizeof(*f));
	p->filter = f;
	p->len = ab_setid_guard_len;
	*out = p;
	return 0;
}

int idmap_guard_install(const struct view_plan *plan, struct ab_error *err)
{
	if (!plan->setid_guard)
		return 0;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, plan->setid_guard) < 0)
		return ab_error_set(err, errno, "cannot install the setid guard");
	return 0;
}
