/* --rootfs DIR (docs/rootfs.md): the view's system directories from the
 * caller's tree instead of the host's. Launcher side only: DIR's top-level
 * entries become read-only binds (and its top-level symbolic links links)
 * on the view's fresh root, planned like the host's system directories and
 * built by mount.c; where the view puts its own (/workspace, /tmp, /proc,
 * /dev, /skills, $HOME, the caller's mounts), DIR's entry is left out.
 *
 * Before anything is made, DIR is checked for what the sandbox will run,
 * so that an unusable tree fails with a message naming what is missing
 * rather than with a command that cannot start: the command's program (or
 * /bin/sh, for `-c` and for a session), the interpreter of a script, the
 * architecture of an ELF and its dynamic loader; and an etc/passwd, to
 * which the sandbox user's line is added (idmap.h). */
#include "view/rootfs.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/error.h"
#include "util/parse.h"
#include "util/util.h"

/* the PATH every command gets (sandbox/env.c) */
#define SANDBOX_PATH	 "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
#define MAX_TOP_ENTRIES	 512
#define MAX_ID_FILE	 (4 << 20)
#define MAX_INTERP_DEPTH 3

/* ---- what the tree must have to run the command ---- */

/* path resolved inside root, as the sandbox will see it (its symbolic
 * links followed within root, never out of it): an O_PATH fd, or -errno.
 * -ENOSYS or -EPERM: openat2 unavailable (a filter of a container's). */
static int open_in_root(int root, const char *path)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	while (*path == '/')
		path++;
	int fd = (int)syscall(SYS_openat2, root, *path ? path : ".", &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

/* "--rootfs DIR" or "--image oci:DIR", what messages name the tree by:
 * two arguments for a "%s %s" (no buffer: a thread-local one would be a
 * page of every agentbox process's TLS, idle sandboxes' too) */
#define LABEL(cfg)                                                                                 \
	(cfg)->rootfs ? "--rootfs" : "--image", (cfg)->rootfs ? (cfg)->rootfs : (cfg)->image

struct elf_facts {
	unsigned char cls, data;
	unsigned machine;
	char interp[256]; /* PT_INTERP, "" for none */
};

/* 1 and facts for an ELF file, 0 for anything else, -errno. */
static int read_elf(int fd, struct elf_facts *f)
{
	unsigned char h[sizeof(Elf64_Ehdr)];
	memset(f, 0, sizeof(*f));
	ssize_t n = pread(fd, h, sizeof(h), 0);
	if (n < 0)
		return -errno;
	if ((size_t)n < sizeof(Elf32_Ehdr) || memcmp(h, ELFMAG, SELFMAG) != 0)
		return 0;
	f->cls = h[EI_CLASS];
	f->data = h[EI_DATA];
	uint64_t phoff;
	unsigned phnum, phentsize;
	if (f->cls == ELFCLASS64 && (size_t)n >= sizeof(Elf64_Ehdr)) {
		const Elf64_Ehdr *e = (const Elf64_Ehdr *)h;
		f->machine = e->e_machine;
		phoff = e->e_phoff, phnum = e->e_phnum, phentsize = e->e_phentsize;
	} else if (f->cls == ELFCLASS32) {
		const Elf32_Ehdr *e = (const Elf32_Ehdr *)h;
		f->machine = e->e_machine;
		phoff = e->e_phoff, phnum = e->e_phnum, phentsize = e->e_phentsize;
	} else {
		return 1;
	}
	/* another byte order: its program headers mean nothing to us */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (f->data != ELFDATA2LSB)
		return 1;
#else
	if (f->data != ELFDATA2MSB)
		return 1;
#endif
	for (unsigned i = 0; i < phnum && i < 64; i++) {
		union {
			Elf64_Phdr p64;
			Elf32_Phdr p32;
		} ph;
		size_t want = f->cls == ELFCLASS64 ? sizeof(ph.p64) : sizeof(ph.p32);
		if (phentsize < want ||
		    pread(fd, &ph, want, (off_t)(phoff + (uint64_t)i * phentsize)) != (ssize_t)want)
			break;
		uint32_t type = f->cls == ELFCLASS64 ? ph.p64.p_type : ph.p32.p_type;
		uint64_t off = f->cls == ELFCLASS64 ? ph.p64.p_offset : ph.p32.p_offset;
		uint64_t size = f->cls == ELFCLASS64 ? ph.p64.p_filesz : ph.p32.p_filesz;
		if (type != PT_INTERP)
			continue;
		if (size == 0 || size >= sizeof(f->interp) ||
		    pread(fd, f->interp, size, (off_t)off) != (ssize_t)size)
			f->interp[0] = '\0';
		f->interp[sizeof(f->interp) - 1] = '\0';
		break;
	}
	return 1;
}

static const char *arch_name(unsigned machine, unsigned char cls, char *buf, size_t len)
{
	switch (machine) {
	case EM_X86_64:
		return "x86-64";
	case EM_386:
		return "i386";
	case EM_AARCH64:
		return "aarch64";
	case EM_ARM:
		return "arm";
	case EM_RISCV:
		return cls == ELFCLASS64 ? "riscv64" : "riscv32";
	case EM_PPC64:
		return "ppc64";
	case EM_S390:
		return "s390x";
	case EM_MIPS:
		return "mips";
	}
	snprintf(buf, len, "ELF machine %u", machine);
	return buf;
}

/* Whether this machine runs code of that ELF (32-bit code of its own
 * family too: the kernel's compat layer decides the rest at exec). */
static bool runs_here(const struct elf_facts *self, const struct elf_facts *f)
{
	if (f->machine == self->machine && f->data == self->data)
		return true;
	return (self->machine == EM_X86_64 && f->machine == EM_386) ||
	       (self->machine == EM_AARCH64 && f->machine == EM_ARM);
}

static int check_exec(const struct ab_config *cfg, int root, const char *path, const char *what,
		      int depth, struct ab_error *err);

/* The ELF at fd (path) against this machine, and its dynamic loader. */
static int check_elf(const struct ab_config *cfg, int root, int fd, const char *path,
		     const char *what, int depth, struct ab_error *err)
{
	struct elf_facts self, f;
	cleanup_fd int me = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int r = read_elf(fd, &f);
	if (r <= 0 || me < 0 || read_elf(me, &self) <= 0)
		return 0; /* not an ELF, or nothing to compare with */
	if (!runs_here(&self, &f)) {
		char b1[32], b2[32];
		return ab_error_plain(err, ENOEXEC,
				      "%s %s: %s (%s) is built for %s, and this machine is "
				      "%s; use a root tree of this machine's architecture",
				      LABEL(cfg), path, what,
				      arch_name(f.machine, f.cls, b1, sizeof(b1)),
				      arch_name(self.machine, self.cls, b2, sizeof(b2)));
	}
	/* static; or a loader, which a tree may make name a loader again */
	if (!f.interp[0] || depth > MAX_INTERP_DEPTH)
		return 0;
	char why[600];
	snprintf(why, sizeof(why), "the dynamic loader of %s", path);
	return check_exec(cfg, root, f.interp, why, MAX_INTERP_DEPTH + 1, err);
}

/* path in the tree: there, a regular executable file, and (an ELF) for
 * this machine with its loader, or (a script) with its interpreter. */
static int check_exec(const struct ab_config *cfg, int root, const char *path, const char *what,
		      int depth, struct ab_error *err)
{
	cleanup_fd int fd = open_in_root(root, path);
	if (fd == -ENOSYS || fd == -EPERM || fd == -EACCES)
		return 0; /* cannot look: the exec will say what is wrong */
	if (fd == -ENOENT || fd == -ENOTDIR)
		return ab_error_plain(err, ENOENT, "%s %s has no %s (%s); add it to the tree",
				      LABEL(cfg), path, what);
	if (fd < 0)
		return ab_error_set(err, -fd, "%s %s: cannot open %s (%s)", LABEL(cfg), path, what);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return ab_error_set(err, errno, "%s %s: cannot stat %s", LABEL(cfg), path);
	if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111))
		return ab_error_plain(err, EACCES,
				      "%s %s: %s (%s) is not an executable file; fix the tree",
				      LABEL(cfg), path, what);
	/* reopened for reading only now that it is known to be a regular
	 * file: opening a device node of the tree could have effects */
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	cleanup_fd int rd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (rd < 0)
		return 0; /* unreadable to us (mode 0711): the exec decides */
	char head[256];
	ssize_t n = pread(rd, head, sizeof(head) - 1, 0);
	if (n >= 2 && head[0] == '#' && head[1] == '!') {
		head[n] = '\0';
		char *interp = head + 2 + strspn(head + 2, " \t");
		interp[strcspn(interp, " \t\n")] = '\0';
		if (interp[0] != '/' || depth >= MAX_INTERP_DEPTH)
			return 0;
		char why[600];
		snprintf(why, sizeof(why), "the interpreter of %s", path);
		return check_exec(cfg, root, interp, why, depth + 1, err);
	}
	return check_elf(cfg, root, rd, path, what, depth, err);
}

static bool is_shell(const char *p)
{
	return strcmp(p, "/bin/sh") == 0 || strcmp(p, "sh") == 0;
}

/* What the sandbox runs first: /bin/sh for a session and for `-c`; for a
 * command, its program (found as the sandbox's PATH finds it; one that
 * is nowhere is the command's 127, not the tree's fault). */
static int check_command(const struct ab_config *cfg, int root, struct ab_error *err)
{
	char *const *argv = cfg->argv;
	if (!argv || !argv[0])
		return check_exec(cfg, root, "/bin/sh", "the shell of the session's commands", 0,
				  err);
	bool shell_c = is_shell(argv[0]) && argv[1] && strcmp(argv[1], "-c") == 0;
	const char *what = shell_c ? "the shell of -c" : "the command";
	const char *cmd = shell_c ? "/bin/sh" : argv[0];
	if (cmd[0] == '/') {
		cleanup_fd int fd = open_in_root(root, cmd);
		if (fd == -ENOENT && !shell_c)
			return 0;
		return check_exec(cfg, root, cmd, what, 0, err);
	}
	if (strchr(cmd, '/'))
		return 0; /* relative to the working directory, not to the tree */
	const char *path = SANDBOX_PATH;
	for (size_t i = 0; i < cfg->n_set_env; i++)
		if (strncmp(cfg->set_env[i], "PATH=", 5) == 0)
			path = cfg->set_env[i] + 5;
	for (const char *d = path; *d; d += strcspn(d, ":"), d += *d == ':') {
		char full[4200];
		int len = (int)strcspn(d, ":");
		if (len == 0 || d[0] != '/')
			continue;
		snprintf(full, sizeof(full), "%.*s/%s", len, d, cmd);
		cleanup_fd int fd = open_in_root(root, full);
		if (fd >= 0)
			return check_exec(cfg, root, full, what, 0, err);
	}
	return 0;
}

/* ---- the sandbox user's account ---- */

/* etc/NAME of the tree (no symbolic link), at most 4 MiB: its text, or
 * NULL with *missing set when it is not there as a regular file. */
static int read_etc(int root, const char *name, char **out, struct ab_error *err)
{
	*out = NULL;
	cleanup_fd int etc = openat(root, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return 0;
	cleanup_fd int fd = openat(etc, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	if (st.st_size > MAX_ID_FILE)
		return ab_error_plain(err, EFBIG, "the root tree's etc/%s is over 4 MiB", name);
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return ab_error_set(err, ENOMEM, "reading the rootfs's etc/%s", name);
	ssize_t n = read(fd, buf, (size_t)st.st_size);
	if (n < 0) {
		free(buf);
		return ab_error_set(err, errno, "--rootfs: cannot read etc/%s", name);
	}
	buf[n] = '\0';
	*out = buf;
	return 0;
}

static int plan_accounts(const struct ab_config *cfg, int root, struct view_plan *plan,
			 struct ab_error *err)
{
	cleanup_free char *passwd = NULL, *group = NULL;
	int r = read_etc(root, "passwd", &passwd, err);
	if (r == 0)
		r = read_etc(root, "group", &group, err);
	if (r < 0)
		return r;
	if (!passwd)
		return ab_error_plain(err, ENOENT,
				      "%s %s has no etc/passwd (a regular file, not a link): "
				      "the sandbox user, uid %u, needs an account; add that file "
				      "(agentbox adds the user's line to it in the view)",
				      LABEL(cfg), (unsigned)cfg->uid);
	return view_plan_id_texts(plan, passwd, group, cfg->uid, cfg->gid, cfg->home, err);
}

static int check_tree(const struct ab_config *cfg, int root, struct view_plan *plan,
		      struct ab_error *err)
{
	int r = check_command(cfg, root, err);
	return r < 0 ? r : plan_accounts(cfg, root, plan, err);
}

/* ---- the tree's top-level entries ---- */

/* Whether dst lies beneath another of the view's mount points (one of
 * fixed, or a user mount's), where its own mount point is made, not in the
 * tree. */
static bool beneath_a_mount(const struct ab_config *cfg, const char *const *fixed, size_t nfixed,
			    const char *dst)
{
	for (size_t j = 0; j < nfixed + cfg->n_mounts; j++) {
		const struct ab_mount *o = j >= nfixed ? &cfg->mounts[j - nfixed] : NULL;
		const char *d = o ? (o->dst ? o->dst : o->src) : fixed[j];
		if (d && d[0] == '/' && strcmp(d, dst) != 0 && ab_path_is_under(dst, d))
			return true;
	}
	return false;
}

/* Whether DIR's top-level entry name stays out of the view (*skip): where
 * the view mounts its own at /name, or $HOME below it that the tree lacks
 * (the tree is read-only: no mount point can be made in it). */
/* Whether the tree's top-level entry name stays out of the view (*skip):
 * where the view mounts its own. */
static int top_level_skipped(const struct ab_config *cfg, int root, const char *name, bool *skip,
			     struct ab_error *err)
{
	const char *fixed[] = {
		"/workspace", "/tmp", "/proc", "/dev", cfg->skills ? "/skills" : NULL, cfg->home};
	size_t nfixed = AB_ARRAY_SIZE(fixed);
	*skip = false;
	for (size_t i = 0; i < nfixed + cfg->n_mounts; i++) {
		const struct ab_mount *m = i >= nfixed ? &cfg->mounts[i - nfixed] : NULL;
		const char *dst = m ? (m->dst ? m->dst : m->src) : fixed[i];
		if (!dst || dst[0] != '/')
			continue;
		size_t len = strcspn(dst + 1, "/");
		if (strlen(name) != len || strncmp(dst + 1, name, len) != 0)
			continue;
		if (dst[1 + len] == '\0') {
			*skip = true; /* replaced */
			continue;
		}
		struct stat st;
		if (fstatat(root, dst + 1, &st, AT_SYMLINK_NOFOLLOW) == 0)
			continue; /* mounted on what the tree has there */
		if (m && beneath_a_mount(cfg, fixed, nfixed, dst))
			continue; /* on the view's /tmp, $HOME, a --tmpfs... */
		if (!m) {
			*skip = true; /* $HOME on the view's own root */
			continue;
		}
		const char *opt = m->kind == AB_MOUNT_TMPFS  ? "--tmpfs"
				  : m->kind == AB_MOUNT_BIND ? "--bind"
							     : "--ro-bind";
		return ab_error_plain(err, ENOENT,
				      "%s: cannot mount at %s: %s %s has no %s, and its /%s "
				      "is read-only; make %s in the tree, or mount elsewhere",
				      opt, dst, LABEL(cfg), dst, name, dst);
	}
	return 0;
}

/* One top-level entry: 0 when it stays out or was a symlink, now
 * planned; 1 with *st for the planner's entry function. */
static int top_level_entry(const struct ab_config *cfg, int root, const char *name,
			   const char *label, const char *host_dir, struct stat *st,
			   struct view_plan *plan, struct ab_error *err)
{
	bool skip;
	int r = top_level_skipped(cfg, root, name, &skip, err);
	if (r < 0 || skip)
		return r;
	char shown[4300], target[4096], dst[300];
	if (host_dir)
		snprintf(shown, sizeof(shown), "'%s/%s'", host_dir, name);
	else
		snprintf(shown, sizeof(shown), "/%s", name);
	if (fstatat(root, name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return ab_error_set(err, errno, "%s: cannot stat %s", label, shown);
	if (!S_ISLNK(st->st_mode))
		return 1;
	ssize_t n = readlinkat(root, name, target, sizeof(target) - 1);
	if (n < 0)
		return ab_error_set(err, errno, "%s: cannot read the link %s", label, shown);
	target[n] = '\0';
	snprintf(dst, sizeof(dst), "/%s", name);
	return view_plan_add(plan, VIEW_SYMLINK, target, dst)
		       ? 0
		       : ab_error_set(err, ENOMEM, "planning the view");
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The tree's top-level names, sorted (at most 512). */
static int read_top_level(const struct ab_config *cfg, int root, char ***names, size_t *n,
			  struct ab_error *err)
{
	*names = NULL;
	*n = 0;
	int fd = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		ab_close_keep_errno(fd);
		return ab_error_set(err, errno, "%s %s: cannot list it", LABEL(cfg));
	}
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d)) && r == 0) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (*n == MAX_TOP_ENTRIES) {
			r = ab_error_plain(err, E2BIG,
					   "%s %s has over %d entries at its top: is it a "
					   "root tree?",
					   LABEL(cfg), MAX_TOP_ENTRIES);
			break;
		}
		char **v = realloc(*names, (*n + 1) * sizeof(*v));
		if (!v || !(v[*n] = strdup(de->d_name))) {
			if (v)
				*names = v;
			r = ab_error_set(err, ENOMEM, "listing the rootfs");
			break;
		}
		*names = v;
		(*n)++;
	}
	closedir(d);
	if (r == 0 && *n)
		qsort(*names, *n, sizeof(**names), cmp_names);
	return r;
}

int rootfs_plan_tree(const struct ab_config *cfg, int root, const char *label, const char *host_dir,
		     struct view_plan *plan, rootfs_entry_fn *entry, void *arg,
		     struct ab_error *err)
{
	int r = check_tree(cfg, root, plan, err);
	char **names = NULL;
	size_t n = 0;
	if (r == 0)
		r = read_top_level(cfg, root, &names, &n, err);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (r == 0 && strlen(names[i]) < 256 &&
		    (r = top_level_entry(cfg, root, names[i], label, host_dir, &st, plan, err)) > 0)
			r = entry(cfg, root, names[i], &st, plan, arg, err);
		free(names[i]);
	}
	free(names);
	return r;
}

/* As root the launcher clones the entry itself, as it is (no idmapping),
 * into e->tree_fd: the sandbox's init runs as an unprivileged host uid,
 * which may not enter where root keeps its trees (/root, /var/lib/machines
 * are 0700). */
static int launcher_tree(int root, const char *name, struct view_entry *e, struct ab_error *err)
{
	cleanup_fd int fd = openat(root, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return ab_error_set(err, errno, "--rootfs: cannot open '%s'", e->src);
	if (st.st_dev != e->dev || st.st_ino != e->ino)
		return ab_error_plain(err, ESTALE,
				      "'%s' was replaced while agentbox was planning the view",
				      e->src);
	cleanup_fd int tree = open_tree(
		fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (tree < 0)
		return ab_error_set(err, errno, "cannot bind '%s' at %s", e->src, e->dst);
	struct mount_attr attr = {.attr_set =
					  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		return ab_error_set(err, errno, "cannot set the flags of %s", e->dst);
	e->tree_fd = ab_steal_fd(&tree);
	return 0;
}

static int plan_entry(const struct ab_config *cfg, int root, const char *name,
		      const struct stat *st, struct view_plan *plan, void *arg,
		      struct ab_error *err)
{
	(void)arg;
	char src[4200], dst[300];
	snprintf(src, sizeof(src), "%s/%s", cfg->rootfs, name);
	snprintf(dst, sizeof(dst), "/%s", name);
	int r;
	if (!S_ISDIR(st->st_mode) && !S_ISREG(st->st_mode))
		return 0; /* a device, socket or FIFO at the top: not part of a system */
	if ((r = view_plan_add_bind(plan, "--rootfs", src, dst, false, false, err)) < 0)
		return r;
	/* the tree as it is, read-only, as the host's system directories */
	struct view_entry *e = &plan->e[plan->n - 1];
	e->host_open = false;
	return geteuid() == 0 ? launcher_tree(root, name, e, err) : 0;
}

int rootfs_plan(const struct ab_config *cfg, struct view_plan *plan, struct ab_error *err)
{
	cleanup_fd int root = open(cfg->rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0)
		return ab_error_set(err, errno, "--rootfs: cannot open '%s'", cfg->rootfs);
	return rootfs_plan_tree(cfg, root, "--rootfs", cfg->rootfs, plan, plan_entry, NULL, err);
}
