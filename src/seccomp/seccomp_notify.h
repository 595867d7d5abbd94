/* Seccomp user notification, the supervisor's side (seccomp_notify.c):
 * denials counted per syscall and answered with the profile's errno. */
#ifndef AB_SECCOMP_NOTIFY_H
#define AB_SECCOMP_NOTIFY_H

#include <stddef.h>
#include <sys/types.h>

struct ab_seccomp_profile;

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

#endif
