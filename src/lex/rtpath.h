/* The path rules of agent-sandbox's legacy runtime (its main.py): a path of
 * /download, /list, /exists or an upload's filename, percent-decoded as
 * urllib.parse.unquote() decodes it and kept within the base directory as
 * get_safe_path() keeps it (and, with a flag, as sandboxd's SanitizePath
 * keeps a path of its REST API). Pure and lexical, no I/O (rtpath.c): symlinks
 * are the caller's to refuse when it opens the result beneath the base. */
#ifndef AB_RTPATH_H
#define AB_RTPATH_H

#include <stddef.h>

/* Decode every %XX (hex of either case) of the len bytes at s into out,
 * which has room for len + 1 bytes; a '%' not followed by two hex digits
 * stays as it is; decoded bytes that are not UTF-8 stay too (Python would
 * replace them with U+FFFD). *outlen gets the decoded length; out is NUL-terminated.
 * Returns 0, or -EINVAL when the result holds a NUL byte (no path can). */
int ab_rtpath_unquote(const char *s, size_t len, char *out, size_t *outlen);

/* The path p (NUL-terminated, already decoded) made relative to the base
 * directory base (absolute, canonical, no trailing '/' unless "/"), as
 * get_safe_path() does: leading '/' stripped, joined to base, "." and ".."
 * and repeated '/' resolved lexically (".." at "/" stays at "/"), then kept
 * only when still within base. With AB_RTPATH_BASE_ABS in flags, as
 * sandboxd's SanitizePath does, an absolute p already at or under base is
 * taken as it is ("/app/x" is "x" for base "/app", not "app/x"); any other
 * p is joined to base as above. Writes the relative remainder (components
 * joined by '/', "" for the base itself) into out of size outsz. Returns 0,
 * -EACCES when the path leaves base (the contract's 403), -ENAMETOOLONG when
 * it does not fit, or -EINVAL for a base that is not absolute. */
#define AB_RTPATH_BASE_ABS 1u
int ab_rtpath_within(const char *base, const char *p, unsigned flags, char *out, size_t outsz);

#endif
