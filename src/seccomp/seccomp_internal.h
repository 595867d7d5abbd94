/* What the parts of the seccomp profiles share (not an API):
 * seccomp_profile.c parses a profile into libseccomp rules, seccomp_bpf.c
 * exports them as BPF, copies the build-time programs and installs the
 * filter, seccomp_emit.c writes the build-time programs as C, and
 * seccomp_notify.c answers notified syscalls. Calls go one way: emit to
 * profile to bpf. */
#ifndef AB_SECCOMP_INTERNAL_H
#define AB_SECCOMP_INTERNAL_H

#include <seccomp.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"
#include "seccomp/seccomp_profile.h"

struct ab_seccomp_profile {
	struct sock_fprog prog;
	bool notify; /* the program returns SECCOMP_RET_USER_NOTIF somewhere */
	int default_errno;
	struct ab_seccomp_errno *errnos; /* per-syscall errno of notified rules */
	size_t n_errnos;
	bool precompiled; /* taken from ab_seccomp_compiled, not compiled here */
};

/* One load (or one build-time compile) of a profile file. */
struct loader {
	const char *file;
	scmp_filter_ctx ctx;
	bool use_notify;
	struct ab_seccomp_profile *p;
	char *unknown; /* names libseccomp does not know, comma separated */
	size_t unknown_len;
	char native[72]; /* Docker's spelling of this machine's arch: amd64, arm64, ... */
	unsigned kernel_major, kernel_minor;
	bool kernel_dependent; /* a rule's minKernel was looked at */
	bool optimize;	       /* a binary tree: slower to compile, faster to run */
	struct ab_error *err;
};

/* seccomp_profile.c: the loader's defaults for this machine and kernel */
void secprof_loader_init(struct loader *l);
/* seccomp_profile.c: the profile file's bytes, NUL-terminated, in *out */
int secprof_read(struct loader *l, char **out, size_t *len);
/* seccomp_profile.c: compile the file's bytes buf (len n) into l->p */
int secprof_compile(struct loader *l, const char *buf, size_t n);

/* seccomp_bpf.c: export l->ctx's program into l->p */
int secprof_export(struct loader *l);
/* seccomp_bpf.c: FNV-1a of a profile file's bytes */
uint64_t secprof_hash(const char *buf, size_t n);
/* seccomp_bpf.c: the program compiled at build time from exactly these
 * bytes for this kind of load, copied into l->p; false when there is none */
bool secprof_take_precompiled(struct loader *l, const char *buf, size_t n);

#endif
