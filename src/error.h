#ifndef AB_ERROR_H
#define AB_ERROR_H

#include "agentbox/agentbox.h"

/* Fill err with a message and, when code != 0, ": strerror(code)" appended.
 * Returns -code (or -EINVAL when code is 0) so callers can
 * `return ab_error_set(err, errno, "...")`. */
int ab_error_set(struct ab_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The same without the strerror suffix: for messages that already say why. */
int ab_error_plain(struct ab_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
