/* Supervision of one running sandbox from the launcher: messages from the
 * init, signals to forward, seccomp denials to answer, captured output to
 * read within its cap, and the timeout with its SIGTERM-then-SIGKILL
 * escalation. Everything from inside is validated; a misbehaving init is
 * killed. */
#ifndef AB_SUPERVISE_H
#define AB_SUPERVISE_H

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"
#include "output.h"
#include "seccomp_profile.h"

#define AB_MAX_LISTENERS 8

struct supervision {
	/* in */
	pid_t init;
	int sync_fd;
	int sigfd;
	int out_rd, err_rd; /* read ends of the capture pipes, or -1 */
	unsigned long long timeout_ms, kill_after_ms;
	const struct ab_seccomp_profile *seccomp;
	struct ab_capture out, err;
	const struct ab_config *cfg; /* net: for the --net allow= proxy */

	/* out */
	bool ready;
	bool have_exit;
	int status; /* the command's wait status, from the init */
	bool have_error;
	struct ab_error error;
	int init_status;
	bool reaped;	      /* init_status is known: its pid may be another process's now */
	struct rusage rusage; /* of the init and everything it reaped */
	int landlock_abi;     /* 0: Landlock not in force */
	bool timed_out;
	int timeout_signal; /* the last signal the timeout sent */
	int listeners[AB_MAX_LISTENERS];
	size_t n_listeners;
	struct ab_denials denials;
	struct netproxy *net; /* net: --net allow=; the caller frees it */
};

/* Run until the init has exited and every pipe is drained. Returns 0, or a
 * negative errno when supervision itself failed (the init is then killed). */
int supervise(struct supervision *s);

#endif
