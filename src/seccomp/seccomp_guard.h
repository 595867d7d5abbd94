/* The setid guard (idmap.h, idmap_guard_install): a seccomp filter that
 * refuses to set the setuid and setgid bits, which on an idmapped mount
 * would make a file set-user-ID to its owner on the host. */
#ifndef AB_SECCOMP_GUARD_H
#define AB_SECCOMP_GUARD_H

#include <linux/filter.h>
#include <stdbool.h>

#include "agentbox/agentbox.h"

/* Build time and fallback: the setid guard compiled with libseccomp for
 * this architecture (and its compat ones); *complete is false when
 * libseccomp did not know one of the syscalls it names (then a newer
 * libseccomp at run time may know more, so it is not precompiled). */
int seccomp_setid_guard_compile(struct sock_fprog **out, bool *complete, struct ab_error *err);

#endif
