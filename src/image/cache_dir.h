/* Where the image cache is, and that only its owner can change it: the
 * directory and every directory on the way to it must be the caller's or
 * root's and writable by no one else (a sticky directory such as /tmp
 * excepted on the way), as OpenSSH's StrictModes judges a user's files.
 * Walked from / one component at a time without following a link that a
 * directory writable by another could hold (docs/images.md). */
#ifndef AB_CACHE_DIR_H
#define AB_CACHE_DIR_H

#include <stddef.h>

#include "agentbox/agentbox.h"

/* The cache's directory, made when missing with layers/, images/, tmp/ and
 * empty/ in it, each judged as the cache itself: its path without links
 * or dots into buf (what every later open of the cache names), an O_PATH
 * fd on it returned. $AGENTBOX_IMAGE_CACHE when set (an absolute path),
 * else the state directory's. */
int cache_dir_open(char *buf, size_t n, struct ab_error *err);

#endif
