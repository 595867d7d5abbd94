#include "lex/rtpath.h"

#include <errno.h>
#include <string.h>

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ab_rtpath_unquote(const char *s, size_t len, char *out, size_t *outlen)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		int hi = -1, lo = -1;
		if (s[i] == '%' && len - i >= 3) {
			hi = hexval((unsigned char)s[i + 1]);
			lo = hexval((unsigned char)s[i + 2]);
		}
		if (hi >= 0 && lo >= 0) {
			out[n++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			out[n++] = s[i];
		}
	}
	out[n] = '\0';
	*outlen = n;
	return memchr(out, '\0', n) ? -EINVAL : 0;
}

/* Append the components of s to the '/'-joined path in w (length *wn, room
 * wsz), "." skipped and ".." dropping the last one (at "/" it stays). */
static int walk(const char *s, char *w, size_t *wn, size_t wsz)
{
	while (*s) {
		const char *e = strchrnul(s, '/');
		size_t n = (size_t)(e - s);
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			char *slash = memrchr(w, '/', *wn);
			*wn = slash ? (size_t)(slash - w) : 0;
		} else if (n && !(n == 1 && s[0] == '.')) {
			if (*wn + 1 + n >= wsz)
				return -ENAMETOOLONG;
			w[(*wn)++] = '/';
			memcpy(w + *wn, s, n);
			*wn += n;
		}
		s = *e ? e + 1 : e;
	}
	return 0;
}

int ab_rtpath_within(const char *base, const char *p, unsigned flags, char *out, size_t outsz)
{
	char w[8192];
	size_t wn = 0, bn = strlen(base);
	if (base[0] != '/')
		return -EINVAL;
	if ((flags & AB_RTPATH_BASE_ABS) && !strncmp(p, base, bn) && (!p[bn] || p[bn] == '/'))
		p += bn; /* already under base: its rest, not base joined to it again */
	int r = walk(base, w, &wn, sizeof(w));
	if (r < 0)
		return r;
	bn = wn; /* base as walked: "" for "/" */
	while (*p == '/')
		p++;
	r = walk(p, w, &wn, sizeof(w));
	if (r < 0)
		return r;
	if (wn < bn || (wn > bn && w[bn] != '/') || memcmp(w, base, bn) != 0)
		return -EACCES;
	size_t rest = wn > bn ? wn - bn - 1 : 0;
	if (rest >= outsz)
		return -ENAMETOOLONG;
	memcpy(out, w + wn - rest, rest);
	out[rest] = '\0';
	return 0;
}
