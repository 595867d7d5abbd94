#include "util/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int error_vset(struct ab_error *err, int code, bool with_reason, const char *fmt, va_list ap)
{
	if (code <= 0)
		code = EINVAL;
	if (!err)
		return -code;
	err->code = code;
	err->kind = AB_ERRC_NONE;
	int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	if (with_reason && n >= 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s", strerror(code));
	return -code;
}

int ab_error_set(struct ab_error *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = error_vset(err, code, true, fmt, ap);
	va_end(ap);
	return r;
}

int ab_error_plain(struct ab_error *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = error_vset(err, code, false, fmt, ap);
	va_end(ap);
	return r;
}

int ab_error_proto(struct ab_error *err, enum ab_errc kind, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = error_vset(err, kind == AB_ERRC_INTERNAL ? EIO : EINVAL, false, fmt, ap);
	va_end(ap);
	if (err)
		err->kind = kind;
	return r;
}

enum ab_errc ab_error_errc(const struct ab_error *err)
{
	if (err->kind != AB_ERRC_NONE)
		return err->kind;
	switch (err->code) {
	case EINVAL:
	case EPERM:
	case ELOOP:
	case ENOENT:
	case ENOTDIR:
	case EACCES:
		return AB_ERRC_INVALID_REQUEST;
	default:
		return AB_ERRC_INTERNAL;
	}
}

static const char *const errc_names[] = {
	[AB_ERRC_INVALID_JSON] = "invalid_json",
	[AB_ERRC_INVALID_REQUEST] = "invalid_request",
	[AB_ERRC_UNKNOWN_OP] = "unknown_op",
	[AB_ERRC_TOO_LARGE] = "too_large",
	[AB_ERRC_DUPLICATE_ID] = "duplicate_id",
	[AB_ERRC_BUSY] = "busy",
	[AB_ERRC_CANCELLED] = "cancelled",
	[AB_ERRC_SHUTDOWN] = "shutdown",
	[AB_ERRC_TIMEOUT] = "timeout",
	[AB_ERRC_INTERNAL] = "internal",
	[AB_ERRC_FILE_NOT_FOUND] = "file_not_found",
	[AB_ERRC_PERMISSION_DENIED] = "permission_denied",
	[AB_ERRC_IS_DIRECTORY] = "is_directory",
	[AB_ERRC_NOT_DIRECTORY] = "not_directory",
	[AB_ERRC_INVALID_PATH] = "invalid_path",
	[AB_ERRC_READ_ONLY] = "read_only",
	[AB_ERRC_EXISTS] = "exists",
	[AB_ERRC_NOT_FOUND] = "not_found",
	[AB_ERRC_NOT_UNIQUE] = "not_unique",
	[AB_ERRC_NO_SPACE] = "no_space",
	[AB_ERRC_IO_ERROR] = "io_error",
};

const char *ab_errc_name(enum ab_errc kind)
{
	if ((size_t)kind >= sizeof(errc_names) / sizeof(errc_names[0]) || !errc_names[kind])
		return "internal";
	return errc_names[kind];
}

enum ab_errc ab_errc_by_name(const char *name)
{
	for (size_t i = 1; i < sizeof(errc_names) / sizeof(errc_names[0]); i++)
		if (errc_names[i] && strcmp(errc_names[i], name) == 0)
			return (enum ab_errc)i;
	return AB_ERRC_NONE;
}
