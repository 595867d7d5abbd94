#include "error.h"

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
