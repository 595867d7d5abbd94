/* Writes a protected file refused: the lock files git (and tools that write
 * as it does) make beside a protected file, seen from the host, so that
 * `agentbox run` can say why "could not write config file .git/config:
 * Device or resource busy" happened and name --unprotect. */
#ifndef AB_PROTECT_WATCH_H
#define AB_PROTECT_WATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "layer/protect.h"

struct protect_watch_entry {
	int wd;
	char *lock;	 /* the name FILE.lock, in the watched directory */
	const char *rel; /* the protected path, from the config */
	bool seen;
};

struct protect_watch {
	int fd; /* the inotify instance, or -1: nothing watched */
	struct protect_watch_entry *e;
	size_t n;
};

/* Host side, with the state protect_scan found: watch the directory of
 * every protected file that is bound read-only. Best effort: without
 * inotify (its limits reached) nothing is watched and nothing reported. */
void protect_watch_start(const struct ab_config *cfg, const struct protect_state *st,
			 struct protect_watch *w);
/* The protected files a lock file was made beside since the last call
 * (NULL-terminated heap array, NULL when none). */
char **protect_watch_refused(struct protect_watch *w);
void protect_watch_free(struct protect_watch *w);

#endif
