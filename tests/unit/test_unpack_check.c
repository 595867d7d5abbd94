/* The unpack helper's two halves apart from a tar (src/confine/confine.c,
 * src/image/tree_check.c): a process confined by confine_self reads and
 * writes nothing beyond its directory and dies of a system call off its
 * list; and the launcher's check of what a helper made refuses, naming
 * the entry, what untar.c never makes: a set-id bit, a device node, a
 * hard link to outside the tree, an extended attribute overlay would obey,
 * another owner; root's tree is given to root. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "confine/confine.h"
#include "image/tree_check.h"

static char base[] = "/tmp/agentbox-unpack-check-XXXXXX";

static void setup(void)
{
	cr_assert(mkdtemp(base));
}

static void teardown(void)
{
	char cmd[sizeof(base) + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
	cr_assert(system(cmd) == 0);
}

/* A skip leaves out .fini: the directory removed first. */
#define skip(why)                                                                                  \
	do {                                                                                       \
		teardown();                                                                        \
		cr_skip_test(why);                                                                 \
	} while (0)

/* base/NAME made and opened as a directory. */
static int dir_at(const char *name)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", base, name);
	cr_assert(mkdir(p, 0755) == 0, "%s: %s", p, strerror(errno));
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(fd >= 0);
	return fd;
}

static void file_at(int dir, const char *name, const char *text)
{
	int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "%s: %s", name, strerror(errno));
	cr_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

static int check(int root, uid_t owner, bool give, struct tree_check *tc, struct ab_error *err)
{
	*tc = (struct tree_check){.owner = owner, .chown = give};
	return tree_check(root, "layer 1", tc, err);
}

TestSuite(tree_check, .init = setup, .fini = teardown);

Test(tree_check, what_untar_makes_passes_and_counts_each_inode_once)
{
	int root = dir_at("good");
	cr_assert(mkdirat(root, "d", 0755) == 0 && mkdirat(root, "o", 0700) == 0);
	file_at(root, "d/f", "hello");
	file_at(root, "big", "0123456789");
	cr_assert(linkat(root, "big", root, "d/big-again", 0) == 0);
	cr_assert(symlinkat("/etc/passwd", root, "link") == 0);
	cr_assert(mkfifoat(root, "fifo", 0600) == 0);
	bool root_user = geteuid() == 0;
	if (root_user) /* a whiteout: any user since Linux 5.8, root always */
		cr_assert(mknodat(root, "gone", S_IFCHR, makedev(0, 0)) == 0);
	int o = openat(root, "o", O_RDONLY | O_DIRECTORY);
	if (fsetxattr(o, "user.overlay.opaque", "y", 1, 0) < 0)
		cr_assert(errno == ENOTSUP, "%s", strerror(errno));
	close(o);
	struct tree_check tc;
	struct ab_error err = {0};
	cr_assert(check(root, geteuid(), false, &tc, &err) == 0, "%s", err.msg);
	cr_assert_eq(tc.bytes, 15);
	cr_assert_eq(tc.entries, root_user ? 8 : 7);
	close(root);
}

/* name made in a tree of its own by make, refused with want in the message */
static void refused(const char *tree, void (*make)(int root), const char *want)
{
	int root = dir_at(tree);
	make(root);
	struct tree_check tc;
	struct ab_error err = {0};
	cr_assert(check(root, geteuid(), false, &tc, &err) < 0, "%s passed", tree);
	cr_assert(strstr(err.msg, want), "%s: %s", tree, err.msg);
	cr_assert(strstr(err.msg, "layer 1: the unpack helper made '"), "%s", err.msg);
	close(root);
}

static void make_setuid(int root)
{
	file_at(root, "su", "x");
	cr_assert(fchmodat(root, "su", 04755, 0) == 0);
}

static void make_setgid_dir(int root)
{
	cr_assert(mkdirat(root, "sg", 0755) == 0 && fchmodat(root, "sg", 02755, 0) == 0);
}

static void make_blockdev(int root)
{
	cr_assert(mknodat(root, "sda", S_IFBLK | 0600, makedev(8, 0)) == 0);
}

static void make_chardev(int root)
{
	cr_assert(mknodat(root, "mem", S_IFCHR | 0600, makedev(1, 1)) == 0);
}

static void make_link_out(int root)
{
	int out = dir_at("outside");
	file_at(out, "secret", "s");
	cr_assert(mkdirat(root, "d", 0755) == 0);
	cr_assert(linkat(out, "secret", root, "d/in", 0) == 0);
	close(out);
}

static void make_redirect(int root)
{
	cr_assert(mkdirat(root, "r", 0755) == 0);
	int r = openat(root, "r", O_RDONLY | O_DIRECTORY);
	cr_assert(fsetxattr(r, "user.overlay.redirect", "/etc", 4, 0) == 0, "%s", strerror(errno));
	close(r);
}

static void make_opaque_other(int root)
{
	cr_assert(mkdirat(root, "o", 0755) == 0);
	int r = openat(root, "o", O_RDONLY | O_DIRECTORY);
	cr_assert(fsetxattr(r, "user.overlay.opaque", "x", 1, 0) == 0);
	close(r);
}

static void make_socket(int root)
{
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un {
		sa_family_t family;
		char path[108];
	} a = {AF_UNIX, ""};
	snprintf(a.path, sizeof(a.path), "%s/sock/s", base);
	cr_assert(bind(s, (struct sockaddr *)&a, sizeof(a)) == 0, "%s", strerror(errno));
	close(s);
	(void)root;
}

Test(tree_check, a_set_id_bit_is_refused)
{
	refused("suid", make_setuid, "'su', which has a set-uid or set-gid bit");
	refused("sgid", make_setgid_dir, "'sg', which has a set-uid or set-gid bit");
}

Test(tree_check, device_nodes_and_sockets_are_refused)
{
	if (geteuid() != 0)
		skip("mknod of a device needs root");
	refused("blk", make_blockdev, "'sda', which is a device node or a socket");
	refused("chr", make_chardev, "'mem', which is a device node (they are left out)");
	refused("sock", make_socket, "'s', which is a device node or a socket");
}

Test(tree_check, a_hard_link_to_outside_the_tree_is_refused)
{
	refused("linkout", make_link_out, "which has links outside the layer");
}

Test(tree_check, an_extended_attribute_untar_never_sets_is_refused)
{
	char p[256];
	snprintf(p, sizeof(p), "%s", base);
	if (setxattr(p, "user.agentbox-test", "1", 1, 0) < 0)
		skip("no user extended attributes here");
	refused("redirect", make_redirect,
		"'r', which has the extended attribute "
		"'user.overlay.redirect'");
	refused("opaque", make_opaque_other, "'user.overlay.opaque'");
}

Test(tree_check, another_owner_is_refused_and_roots_tree_is_given_to_root)
{
	if (geteuid() != 0)
		skip("chown needs root");
	int root = dir_at("own");
	file_at(root, "f", "x");
	cr_assert(mkdirat(root, "d", 0700) == 0 && symlinkat("f", root, "d/l") == 0);
	/* a second name of f, walked after f was given (gzip's gunzip and
	 * uncompress in Debian's root) */
	cr_assert(linkat(root, "f", root, "d/f2", 0) == 0);
	cr_assert(fchownat(root, "f", 65534, 65534, 0) == 0);
	cr_assert(fchownat(root, "d", 65534, 65534, 0) == 0);
	cr_assert(fchownat(root, "d/l", 65534, 65534, AT_SYMLINK_NOFOLLOW) == 0);
	struct tree_check tc;
	struct ab_error err = {0};
	cr_assert(check(root, 65534, true, &tc, &err) < 0);
	cr_assert(strstr(err.msg, "'.', which is owned by uid 0, not the helper's"), "%s", err.msg);
	cr_assert(fchown(root, 65534, 65534) == 0);
	cr_assert(check(root, 65534, true, &tc, &err) == 0, "%s", err.msg);
	struct stat st;
	const char *names[] = {"f", "d", "d/l", "d/f2"};
	for (size_t i = 0; i < 4; i++) {
		cr_assert(fstatat(root, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0);
		cr_assert(st.st_uid == 0 && st.st_gid == 0, "%s: %u", names[i], st.st_uid);
	}
	cr_assert(fstat(root, &st) == 0 && st.st_uid == 0);
	close(root);
}

/* ---- confine_self ---- */

TestSuite(confine, .init = setup, .fini = teardown);

Test(confine, a_confined_child_reaches_only_its_directory_and_dies_of_an_unlisted_call)
{
	int dir = dir_at("w");
	int p[2];
	cr_assert(pipe(p) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		static const int calls[] = {
			SCMP_SYS(write),      SCMP_SYS(openat), SCMP_SYS(close),
			SCMP_SYS(exit_group), SCMP_SYS(exit),	SCMP_SYS(newfstatat),
		};
		struct confine_spec s = {.keep_fds = (int[]){dir, p[1]},
					 .n_keep = 2,
					 .switch_id = geteuid() == 0,
					 .uid = 65534,
					 .gid = 65534,
					 .mem_bytes = 0,
					 .write_dir = dir,
					 .parent = getppid(),
					 .syscalls = calls,
					 .n_syscalls = sizeof(calls) / sizeof(calls[0])};
		if (s.switch_id && fchown(dir, 65534, 65534) < 0)
			_exit(10);
		struct ab_error err = {0};
		int abi = 0;
		if (confine_self(&s, &abi, &err) < 0)
			_exit(11);
		char step = abi > 0 ? 'L' : 'l';
		if (write(p[1], &step, 1) != 1)
			_exit(14);
		/* its directory: yes; a file outside: neither read nor write */
		int f = openat(dir, "made", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		int r = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
		int re = errno;
		int w = open("/tmp/agentbox-confine-escape", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		int we = errno;
		if (f < 0 || (abi > 0 && (r >= 0 || re != EACCES || w >= 0 || we != EACCES)))
			_exit(12);
		if (write(p[1], "F", 1) != 1)
			_exit(14);
		socket(AF_INET, SOCK_STREAM, 0); /* not on its list */
		_exit(13);
	}
	close(p[1]);
	char got[4] = "";
	ssize_t n = 0;
	for (ssize_t k;
	     n < (ssize_t)sizeof(got) && (k = read(p[0], got + n, sizeof(got) - (size_t)n)) > 0;)
		n += k;
	int status;
	cr_assert(waitpid(pid, &status, 0) == pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS,
		  "status %#x after %zd steps '%.*s'", status, n, (int)(n > 0 ? n : 0), got);
	cr_assert(n == 2 && got[1] == 'F', "%zd '%.*s'", n, (int)(n > 0 ? n : 0), got);
	cr_assert(got[0] == 'L', "no Landlock on this kernel");
	struct stat st;
	cr_assert(fstatat(dir, "made", &st, 0) == 0);
	cr_assert(access("/tmp/agentbox-confine-escape", F_OK) < 0);
	close(dir);
	close(p[0]);
}
