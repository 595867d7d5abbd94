/* A layer unpacked in a confined helper process (docs/security.md): the
 * launcher starts it (agentbox itself run anew: `agentbox __unpack-layer`,
 * nothing of the launcher's memory or environment in it), streams the blob to it over a socket
 * while hashing every byte itself, and reads one bounded, checked result back; the helper loads
 * libarchive, confines itself (confine.h: an unprivileged uid for root, no capability,
 * no_new_privs, Landlock to the directory it fills, seccomp, no fd but its own, a memory bound,
 * killed with the launcher) and only then reads the tar (untar.c). The launcher believes nothing it
 * says: the digest is its own, and the tree is checked (tree_check.h) before it is used. */
#ifndef AB_UNPACK_PROC_H
#define AB_UNPACK_PROC_H

#include <stdbool.h>
#include <seccomp.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"
#include "image/oci.h"
#include "image/untar.h"

/* Root's helper runs as this uid and gid (nobody), in a directory no one
 * else can reach; a plain user's keeps the user's. */
#define UNPACK_PROC_ID 65534

/* The helper's memory bound (RLIMIT_AS): libarchive, zstd's window (at
 * most 128 MiB by default), the launcher's mappings it starts with. */
#define UNPACK_PROC_MEM (2ULL << 30)

/* Who the helper runs as: the caller, or UNPACK_PROC_ID when the caller
 * is root and its user namespace maps that id (*switch_id true). */
void unpack_proc_identity(uid_t *uid, gid_t *gid, bool *switch_id);

/* Unpack the blob at fd (what: "--image ...: layer N (sha256:...)", for
 * messages) into tree, an empty directory the helper's uid owns, in the
 * helper; the blob's sha256 checked here against l->hex. On error what
 * was unpacked stays for the caller to remove; a helper that died says
 * so ("the unpack helper died (signal 9)"). */
int unpack_proc_run(int fd, const struct oci_layer *l, const char *what, int tree,
		    struct untar_stats *st, struct ab_error *err);

/* The system calls every helper makes (libseccomp's SCMP_SYS): reading
 * its socket, its one answer, malloc, abort, exit; the sanitizers' own. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNPACK_PROC_SANITIZER_SYSCALLS                                                             \
	SCMP_SYS(mprotect), SCMP_SYS(sched_yield), SCMP_SYS(sigaltstack),
#else
#define UNPACK_PROC_SANITIZER_SYSCALLS
#endif
#define UNPACK_PROC_BASE_SYSCALLS                                                                  \
	SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(sendto), SCMP_SYS(close), SCMP_SYS(brk),         \
		SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(madvise),             \
		SCMP_SYS(futex), SCMP_SYS(getrandom), SCMP_SYS(clock_gettime),                     \
		SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigaction),          \
		SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(tgkill), SCMP_SYS(exit),              \
		SCMP_SYS(exit_group), UNPACK_PROC_SANITIZER_SYSCALLS

/* What the helpers share (layout_proc.c too). Spawn one: argv run by
 * agentbox itself (/proc/self/exe) with fds on 3, 4, 5 (at most 3) and
 * of the environment only the loader's and the sanitizers' settings;
 * its pid or -errno. */
pid_t unpack_proc_spawn(char *const argv[], const int *fds, size_t n_fds);
/* In the helper, first: its name (ps), the launcher's signal mask and
 * ignored signals undone. */
void unpack_proc_prelude(const char *name);
/* Its RLIMIT_AS (0 under the sanitizers). */
unsigned long long unpack_proc_mem(void);
/* How a helper that gave a result (have) or not ended, as an error (0 when
 * it exited after one): "WHAT: the HELPER helper died (signal N, ...)". */
int unpack_proc_ended(int status, const char *what, const char *helper, bool have,
		      struct ab_error *err);

/* The helper's side: `agentbox __unpack-layer ...` (main.c), started by
 * unpack_proc_run alone; its exit status. */
int unpack_proc_main(int argc, char **argv);

#endif
