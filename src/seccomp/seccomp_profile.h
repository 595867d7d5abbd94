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
 * leave the kernel.
 *
 * This header is the parser's (seccomp_profile.c); seccomp_bpf.h is the
 * program's (seccomp_bpf.c) and seccomp_notify.h the supervisor's
 * (seccomp_notify.c). */
#ifndef AB_SECCOMP_PROFILE_H
#define AB_SECCOMP_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"

/* a loaded profile is used through these: its program and its supervisor */
#include "seccomp/seccomp_bpf.h"
#include "seccomp/seccomp_notify.h"

struct ab_seccomp_profile;

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

/* Where the installed (or, for a build-tree binary, the source tree's)
 * policies are: $AGENTBOX_POLICY_DIR if set, else the source tree's policy/
 * when /proc/self/exe lies in the build tree, else the install location. */
const char *ab_policy_dir(void);

#endif
