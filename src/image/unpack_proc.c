/* A layer unpacked in a confined helper (unpack_proc.h). Two socketpairs:
 * the blob's bytes to the helper (a stream, so that the helper never
 * holds the layout's file and the bytes it reads are the bytes the
 * launcher hashed), and one result back (a datagram of a fixed size, every
 * field checked). */
#include "image/unpack_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine/confine.h"
#include "image/archive_lib.h"
#include "image/sha256.h"
#include "util/error.h"
#include "util/util.h"

#define BUF	     (64 * 1024)
#define HELPER_DATA  3 /* the helper's fds, as it finds them */
#define HELPER_CTL   4
#define HELPER_TREE  5
#define RESULT_MAGIC 0x41425550u /* "ABUP" */

struct result {
	uint32_t magic;
	int32_t code; /* 0, or the errno of the message */
	uint64_t bytes, entries, devices;
	char msg[sizeof(((struct ab_error *)0)->msg)];
};

/* What the helper's tar reading and writing (untar.c, libarchive, zlib,
 * malloc) calls, and its result's send: no open of a path beyond
 * its directory (Landlock), no socket, no exec, no ptrace, no mount. */
static const int helper_syscalls[] = {
	UNPACK_PROC_BASE_SYSCALLS SCMP_SYS(openat),
	SCMP_SYS(newfstatat),
	SCMP_SYS(fstat),
	SCMP_SYS(statx),
	SCMP_SYS(lseek),
	SCMP_SYS(fcntl),
	SCMP_SYS(mkdirat),
	SCMP_SYS(mknodat),
	SCMP_SYS(fchmodat),
	SCMP_SYS(fchmod),
	SCMP_SYS(symlinkat),
	SCMP_SYS(linkat),
	SCMP_SYS(unlinkat),
	SCMP_SYS(getdents64),
	SCMP_SYS(fsetxattr),
};

/* Whether id is mapped in this user namespace (map: /proc/self/uid_map or
 * gid_map); no map to read: the initial namespace, where every id is. */
static bool mapped(const char *map, unsigned long id)
{
	FILE *f = fopen(map, "re");
	if (!f)
		return true;
	unsigned long in, out, n;
	bool found = false;
	while (!found && fscanf(f, "%lu %lu %lu", &in, &out, &n) == 3)
		found = id >= in && id - in < n;
	fclose(f);
	return found;
}

void unpack_proc_identity(uid_t *uid, gid_t *gid, bool *switch_id)
{
	/* root in a user namespace without 65534 (unshare -r) keeps its uid:
	 * no capability, Landlock and seccomp still confine it */
	static int can = -1;
	if (can < 0)
		can = geteuid() == 0 && mapped("/proc/self/uid_map", UNPACK_PROC_ID) &&
		      mapped("/proc/self/gid_map", UNPACK_PROC_ID);
	*switch_id = can;
	*uid = *switch_id ? UNPACK_PROC_ID : geteuid();
	*gid = *switch_id ? UNPACK_PROC_ID : getegid();
}

unsigned long long unpack_proc_mem(void)
{
	/* the sanitizers reserve terabytes of address space */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
	__has_feature(memory_sanitizer)
	return 0;
#else
	return UNPACK_PROC_MEM;
#endif
#else
	return UNPACK_PROC_MEM;
#endif
}

/* The helper: confined, then the tar read from data into tree; one result
 * on ctl. */
static int helper(int data, int ctl, int tree, pid_t parent, enum oci_compression comp,
		  const char *what, bool stop)
{
	unpack_proc_prelude("agentbox-unpack");
	struct result m = {.magic = RESULT_MAGIC};
	struct ab_error err = {0}, cerr = {0};
	struct untar_stats st = {0};
	char why[300];
	int r = 0;
	/* loaded before Landlock, which would refuse reading the library */
	if (!archive_lib_load(why, sizeof(why)))
		r = ab_error_plain(&err, ENOPKG, "%s: %s", what, why);
	struct confine_spec spec = {
		.keep_fds = (int[]){data, ctl, tree},
		.n_keep = 3,
		.mem_bytes = unpack_proc_mem(),
		.write_dir = tree,
		.parent = parent,
		.syscalls = helper_syscalls,
		.n_syscalls = AB_ARRAY_SIZE(helper_syscalls),
	};
	unpack_proc_identity(&spec.uid, &spec.gid, &spec.switch_id);
	int abi;
	if (r == 0 && confine_self(&spec, &abi, &cerr) < 0)
		r = ab_error_plain(&err, cerr.code, "%s: cannot confine the unpack helper: %s",
				   what, cerr.msg);
	if (r == 0 && stop)
		raise(SIGSTOP); /* AGENTBOX_TEST_UNPACK_STOP: looked at from outside */
	/* no digest: the launcher hashes what it sends */
	struct oci_layer l = {.comp = comp};
	if (r == 0)
		r = untar_layer(data, &l, what, tree, &st, &err);
	m.code = r < 0 ? (err.code ? err.code : EIO) : 0;
	snprintf(m.msg, sizeof(m.msg), "%s", r < 0 ? err.msg : "");
	m.bytes = st.bytes;
	m.entries = st.entries;
	m.devices = st.devices;
	send(ctl, &m, sizeof(m), MSG_NOSIGNAL);
	return r < 0 ? 1 : 0;
}

static bool fd_is(int fd, mode_t type)
{
	struct stat st;
	return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

int unpack_proc_main(int argc, char **argv)
{
	/* agentbox __unpack-layer COMP PARENT STOP WHAT, its fds on 3, 4, 5 */
	char *end;
	long comp = argc == 6 ? strtol(argv[2], &end, 10) : -1;
	long parent = argc == 6 ? strtol(argv[3], NULL, 10) : 0;
	if (argc != 6 || (comp != OCI_TAR && comp != OCI_GZIP) || parent <= 1 ||
	    !fd_is(HELPER_DATA, S_IFSOCK) || !fd_is(HELPER_CTL, S_IFSOCK) ||
	    !fd_is(HELPER_TREE, S_IFDIR)) {
		fputs("agentbox: __unpack-layer is agentbox's own, started by --image\n", stderr);
		return AB_EXIT_FAILURE;
	}
	/* _exit: no atexit handler (LeakSanitizer's would call what the
	 * filter forbids) */
	_exit(helper(HELPER_DATA, HELPER_CTL, HELPER_TREE, (pid_t)parent,
		     (enum oci_compression)comp, argv[5], strcmp(argv[4], "1") == 0));
}

/* The blob's bytes sent to the helper and hashed into hex; the helper
 * gone (it failed, or died) is not an error here: every byte is still
 * hashed. */
static int stream(int fd, int data, char hex[65], const char *what, struct ab_error *err)
{
	struct sha256 h;
	int r = sha256_init(&h, err);
	if (r < 0)
		return r;
	cleanup_free char *buf = malloc(BUF);
	if (!buf) {
		sha256_free(&h);
		return ab_error_set(err, ENOMEM, "%s", what);
	}
	bool gone = false;
	for (;;) {
		ssize_t n = read(fd, buf, BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = ab_error_set(err, errno, "%s: cannot read the blob", what);
			sha256_free(&h);
			return r;
		}
		if (n == 0)
			break;
		sha256_update(&h, buf, (size_t)n);
		for (ssize_t off = 0; off < n && !gone;) {
			ssize_t w = send(data, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				gone = true;
			else
				off += w;
		}
	}
	sha256_hex(&h, hex);
	return 0;
}

/* The helper's result, if it sent one that holds: code and message (its
 * text, every byte printable), counts within untar's bounds. */
static bool read_result(int ctl, struct result *m)
{
	char buf[sizeof(*m) + 1];
	ssize_t n;
	do
		n = recv(ctl, buf, sizeof(buf), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(*m))
		return false;
	memcpy(m, buf, sizeof(*m));
	if (m->magic != RESULT_MAGIC || m->code < 0 || m->code > 4095 ||
	    !memchr(m->msg, '\0', sizeof(m->msg)) || m->bytes > UNTAR_MAX_BYTES ||
	    m->entries > UNTAR_MAX_ENTRIES || m->devices > m->entries)
		return false;
	if (m->code && !m->msg[0])
		return false;
	for (char *c = m->msg; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return true;
}

/* What the helper's environment keeps of the launcher's: the loader's
 * and the sanitizers' settings, nothing else (no secret a variable
 * holds). */
static bool env_kept(const char *e)
{
	static const char *const keep[] = {"LD_PRELOAD=",    "LD_LIBRARY_PATH=", "ASAN_OPTIONS=",
					   "UBSAN_OPTIONS=", "LSAN_OPTIONS=",	 "TSAN_OPTIONS="};
	for (size_t i = 0; i < AB_ARRAY_SIZE(keep); i++)
		if (strncmp(e, keep[i], strlen(keep[i])) == 0)
			return true;
	return false;
}

/* The helper started: agentbox itself, run anew (nothing of the
 * launcher's memory in it), its fds on 3, 4 and 5; its pid or -errno. */
pid_t unpack_proc_spawn(char *const argv[], const int *fds, size_t n_fds)
{
	extern char **environ;
	size_t n = 0, k = 0;
	while (environ[n])
		n++;
	cleanup_free char **envp = calloc(n + 1, sizeof(*envp));
	if (!envp || n_fds > 3)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (env_kept(environ[i]))
			envp[k++] = environ[i];
	pid_t pid = fork();
	if (pid != 0)
		return pid < 0 ? -errno : pid;
	/* above 5 first, then onto 3, 4, 5, without FD_CLOEXEC */
	int hi[3];
	for (size_t i = 0; i < n_fds; i++)
		if ((hi[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10)) < 0)
			_exit(127);
	for (size_t i = 0; i < n_fds; i++)
		if (dup2(hi[i], 3 + (int)i) < 0)
			_exit(127);
	execve("/proc/self/exe", argv, envp);
	_exit(127);
}

void unpack_proc_prelude(const char *name)
{
	prctl(PR_SET_NAME, name, 0, 0, 0); /* not "exe" in ps */
	/* the launcher's mask and ignored signals outlive exec */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
}

int unpack_proc_ended(int status, const char *what, const char *helper, bool have,
		      struct ab_error *err)
{
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		return ab_error_plain(err, EIO, "%s: the %s helper died (signal %d, %s)%s", what,
				      helper, sig, strsignal(sig),
				      sig == SIGSYS ? ": a system call its seccomp filter does "
						      "not allow"
						    : "");
	}
	if (!have && WEXITSTATUS(status) == 127)
		return ab_error_plain(err, ENOEXEC,
				      "%s: cannot start the %s helper (agentbox itself, "
				      "/proc/self/exe: is /proc mounted?)",
				      what, helper);
	if (!have)
		return ab_error_plain(err, EIO,
				      "%s: the %s helper ended without a result (exit status %d)",
				      what, helper, WEXITSTATUS(status));
	return 0;
}

int unpack_proc_run(int fd, const struct oci_layer *l, const char *what, int tree,
		    struct untar_stats *st, struct ab_error *err)
{
	int data[2], ctl[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, data) < 0)
		return ab_error_set(err, errno, "%s: cannot make the unpack helper's socket", what);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0) {
		close(data[0]);
		close(data[1]);
		return ab_error_set(err, errno, "%s: cannot make the unpack helper's socket", what);
	}
	bool stop = getenv("AGENTBOX_TEST_UNPACK_STOP") != NULL;
	char comp[16], parent[32];
	snprintf(comp, sizeof(comp), "%d", (int)l->comp);
	snprintf(parent, sizeof(parent), "%d", (int)getpid());
	char *argv[] = {"agentbox",	  "__unpack-layer", comp, parent,
			stop ? "1" : "0", (char *)what,	    NULL};
	pid_t pid = unpack_proc_spawn(argv, (int[]){data[1], ctl[1], tree}, 3);
	close(data[1]);
	close(ctl[1]);
	cleanup_fd int to = data[0], from = ctl[0];
	if (pid < 0)
		return ab_error_set(err, (int)-pid, "%s: cannot start the unpack helper", what);
	if (stop) {
		fprintf(stderr, "agentbox: test: the unpack helper is pid %d\n", (int)pid);
		fflush(stderr);
	}
	char hex[65] = "";
	int r = stream(fd, to, hex, what, err);
	close(ab_steal_fd(&to)); /* the helper's end of file */
	struct result m;
	bool have = r == 0 && read_result(from, &m);
	if (r < 0)
		kill(pid, SIGKILL);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (r < 0)
		return r;
	/* a blob that is not the one its digest names says so, whatever else
	 * was wrong with its bytes */
	if (strcmp(hex, l->hex) != 0)
		return untar_digest_error(err, what, l->hex, hex);
	r = unpack_proc_ended(status, what, "unpack", have, err);
	if (r < 0)
		return r;
	if (m.code)
		return ab_error_plain(err, m.code, "%s", m.msg);
	if (WEXITSTATUS(status) != 0)
		return ab_error_plain(err, EIO, "%s: the unpack helper failed (exit status %d)",
				      what, WEXITSTATUS(status));
	st->bytes = m.bytes;
	st->entries = m.entries;
	st->devices = m.devices;
	return 0;
}
