#include "sandbox/caps.h"

#include <errno.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "util/error.h"

int caps_drop_all(struct ab_error *err)
{
	/* the bounding set first: dropping from it needs CAP_SETPCAP, which
	 * clearing the effective set below takes away */
	/* up to the kernel's last, not CAP_LAST_CAP: the kernel may know more
	 * than our headers; its capabilities are numbered without gaps, so the
	 * first EINVAL is past the last one (cap_valid) */
	for (int c = 0; c < 64; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL)
			break;
		/* an unprivileged process outside any user namespace
		 * of its own (isolation_bare.c) has no CAP_SETPCAP; it holds no
		 * capability, and no_new_privs below keeps exec from granting one */
		if (errno == EPERM && geteuid() != 0)
			break;
		return ab_error_set(err, errno, "cannot drop capability %d from the bounding set",
				    c);
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return ab_error_set(err, errno, "cannot clear the ambient capabilities");
	cap_t none = cap_init();
	if (!none)
		return ab_error_set(err, errno, "cannot drop capabilities");
	int r = cap_set_proc(none);
	int saved = errno;
	cap_free(none);
	if (r < 0)
		return ab_error_set(err, saved, "cannot drop capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return ab_error_set(err, errno, "cannot set no_new_privs");
	return 0;
}
