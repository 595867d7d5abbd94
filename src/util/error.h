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

/* The same for an error the protocol names (kind), e.g. a bad request
 * field: the errno is EIO for internal, EINVAL for the others. */
int ab_error_proto(struct ab_error *err, enum ab_errc kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The protocol's code of err: its kind, or, when it has none, what its
 * errno says (invalid_request for a request the sandbox refused: EINVAL,
 * EPERM, ELOOP, ENOENT, ENOTDIR, EACCES; internal otherwise). */
enum ab_errc ab_error_errc(const struct ab_error *err);

/* The one table of the protocol's error codes: a kind's spelling
 * ("invalid_request"), and a spelling's kind (AB_ERRC_NONE for none). */
const char *ab_errc_name(enum ab_errc kind);
enum ab_errc ab_errc_by_name(const char *name);

#endif
