/* A seccomp profile as a BPF program (seccomp_bpf.c): the build-time
 * table of the shipped profiles' programs, the program itself, the C
 * emitter that makes that table (seccomp_emit.c), and the installer that
 * runs in the command's process as its last step before exec. */
#ifndef AB_SECCOMP_BPF_H
#define AB_SECCOMP_BPF_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/error.h"

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

/* The setid guard (idmap.h) compiled at build time into the same file;
 * ab_setid_guard_len is 0 when it is compiled at run time instead. */
extern const struct sock_filter ab_setid_guard_compiled[];
extern const unsigned short ab_setid_guard_len;

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

#endif
