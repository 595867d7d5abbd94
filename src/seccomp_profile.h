/* Seccomp profiles in the OCI runtime-spec / Docker JSON format.
 *
 * The launcher loads and compiles a profile once (ab_seccomp_load): JSON
 * through json-c, rules through libseccomp, exported as a BPF program kept
 * in memory. A command installs it as the last step before exec with one
 * seccomp(2) call and no libseccomp work (ab_seccomp_install).
 *
 * Denials are reported through seccomp user notification: every rule whose
 * action is an errno (and the default action, when it is one) is compiled
 * to SCMP_ACT_NOTIFY instead, except errno ENOSYS, which is a compatibility
 * answer (clone3 -> glibc falls back to clone), not a denial. The supervisor
 * receives each notified syscall on the listener fd, counts it and answers
 * with the errno the profile gave it (ab_seccomp_answer), so the command
 * sees exactly the errno the profile asks for and allowed syscalls never
 * leave the kernel. */
#ifndef AB_SECCOMP_PROFILE_H
#define AB_SECCOMP_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"

#include <stdint.h>
#include <stdio.h>
#include <linux/filter.h>

struct ab_seccomp_profile;

/* The errno a notified syscall is answered with. */
struct ab_seccomp_errno {
	char name[32];
	int err;
};

/* A profile compiled at build time (tools/seccomp-compile writes the table
 * from the shipped policy into the library): a load whose file has exactly
 * these bytes, for the same architecture and notification support, copies it instead of parsing and
 * compiling, which costs a one-shot run about 2 ms. An edited profile is compiled as before. */
struct ab_seccomp_compiled {
	uint64_t hash; /* FNV-1a of the file's bytes */
	size_t size;
	bool notify_api;  /* compiled for kernels with user notification */
	const char *arch; /* Docker's name of the architecture */
	const struct sock_filter *filter;
	unsigned short len;
	bool notify;
	int default_errno;
	const struct ab_seccomp_errno *errnos;
	size_t n_errnos;
	const char *unknown; /* syscalls libseccomp did not know, or NULL */
};
extern const struct ab_seccomp_compiled ab_seccomp_compiled[];
extern const size_t ab_seccomp_n_compiled;

#define AB_DENIALS_MAX 64

struct ab_denials {
	struct {
		int nr;
		char name[32]; /* libseccomp's name, or "syscall_<nr>" */
		unsigned long count;
	} e[AB_DENIALS_MAX];
	size_t n;
	unsigned long other; /* denials of syscalls beyond AB_DENIALS_MAX distinct ones */
};

/* spec: "default", "strict", "permissive" (files in the policy directory,
 * see ab_policy_dir), "none" (*out = NULL), or a path to a JSON file.
 * Errors name the file, the JSON path (e.g. "syscalls[3].args[0].op") and
 * the problem. Syscall names unknown to libseccomp or this architecture are
 * skipped; *notices (may be NULL) receives a heap string naming them all on
 * one line, or NULL when there were none.
 *
 * Whatever the profile says of them, sendmsg, recvmsg and
 * socketpair(AF_UNIX) are allowed: a command hands its seccomp listener to
 * the launcher with sendmsg after it confined itself, and a session's init
 * and shims pass commands' fds to each other. */
int ab_seccomp_load(const char *spec, struct ab_seccomp_profile **out, char **notices,
		    struct ab_error *err);
void ab_seccomp_free(struct ab_seccomp_profile *p);

/* The profile came from the build-time table, not a compile. */
bool ab_seccomp_is_precompiled(const struct ab_seccomp_profile *p);

/* The BPF program (for tests). */
const struct sock_fprog *ab_seccomp_program(const struct ab_seccomp_profile *p);

/* Build time: compile each profile file into a C source that defines ab_seccomp_compiled
 * (tools/seccomp-compile). */
int ab_seccomp_emit_c(FILE *out, char *const *paths, size_t n_paths, struct ab_error *err);

/* In the command's process, after no_new_privs: install the filter.
 * *listener receives the user-notification fd (O_CLOEXEC), or -1 when the
 * profile denies nothing through notification. */
int ab_seccomp_install(const struct ab_seccomp_profile *p, int *listener, struct ab_error *err);

/* Where a denial by the process pid (in the supervisor's pid namespace)
 * is counted as well, or NULL. */
typedef struct ab_denials *(*ab_denial_route)(pid_t pid, void *arg);

/* Supervisor: receive one notification from listener, count it in d (when
 * not NULL) and in route's choice (when route is not NULL), and answer it
 * with the profile's errno for that syscall. Returns 1 when one was
 * answered, 0 when the target was gone (nothing to do), or -errno
 * (-ENOENT never escapes; a closed listener gives a negative value). */
int ab_seccomp_answer(const struct ab_seccomp_profile *p, int listener, struct ab_denials *d,
		      ab_denial_route route, void *arg);

/* Where the installed (or, for a build-tree binary, the source tree's)
 * policies are: $AGENTBOX_POLICY_DIR if set, else the source tree's policy/
 * when /proc/self/exe lies in the build tree, else the install location. */
const char *ab_policy_dir(void);

#endif
