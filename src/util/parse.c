/* Values of options and profile keys: sizes, durations, ids, rlimit names
 * and paths in the view. Pure functions, no I/O. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "util/error.h"
#include "util/parse.h"
#include "util/util.h"

/* The decimal number s starts with, into *v, and *end past it; -EINVAL
 * when s does not start with a digit, -ERANGE when it is too large. */
static int leading_number(const char *s, unsigned long long *v, char **end)
{
	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, end, 10);
	return errno ? -errno : 0;
}

int ab_parse_size(const char *s, unsigned long long *out)
{
	char *end;
	unsigned long long v;
	int r = leading_number(s, &v, &end);
	if (r < 0)
		return r;
	unsigned shift = 0;
	if (*end && !((*end == 'b' || *end == 'B') && !end[1])) {
		switch (toupper((unsigned char)*end)) {
		case 'K':
			shift = 10;
			break;
		case 'M':
			shift = 20;
			break;
		case 'G':
			shift = 30;
			break;
		case 'T':
			shift = 40;
			break;
		default:
			return -EINVAL;
		}
		end++;
		/* accept "64k", "64K", "64KB", "64KiB" */
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (shift && v > (ULLONG_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int ab_parse_duration(const char *s, unsigned long long *ms)
{
	if (!s)
		return -EINVAL;
	if (strcmp(s, "none") == 0) {
		*ms = 0;
		return 0;
	}
	char *end;
	unsigned long long v;
	int r = leading_number(s, &v, &end);
	if (r < 0)
		return r;
	unsigned long long mul;
	if (strcmp(end, "ms") == 0)
		mul = 1;
	else if (strcmp(end, "s") == 0 || *end == '\0')
		mul = 1000;
	else if (strcmp(end, "m") == 0)
		mul = 60 * 1000;
	else if (strcmp(end, "h") == 0)
		mul = 3600 * 1000;
	else
		return -EINVAL;
	/* a year is more than anyone means; it also keeps timers sane */
	if (v > 365ULL * 24 * 3600 * 1000 / mul)
		return -ERANGE;
	*ms = v * mul;
	return 0;
}

static const struct {
	const char *name;
	int resource;
} rlimit_names[] = {
	{"as", RLIMIT_AS},
	{"core", RLIMIT_CORE},
	{"cpu", RLIMIT_CPU},
	{"data", RLIMIT_DATA},
	{"fsize", RLIMIT_FSIZE},
	{"locks", RLIMIT_LOCKS},
	{"memlock", RLIMIT_MEMLOCK},
	{"msgqueue", RLIMIT_MSGQUEUE},
	{"nice", RLIMIT_NICE},
	{"nofile", RLIMIT_NOFILE},
	{"nproc", RLIMIT_NPROC},
	{"rss", RLIMIT_RSS},
	{"rtprio", RLIMIT_RTPRIO},
	{"rttime", RLIMIT_RTTIME},
	{"sigpending", RLIMIT_SIGPENDING},
	{"stack", RLIMIT_STACK},
};

int ab_rlimit_by_name(const char *name)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(rlimit_names); i++)
		if (strcmp(rlimit_names[i].name, name) == 0)
			return rlimit_names[i].resource;
	return -1;
}

const char *ab_rlimit_name(int resource)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(rlimit_names); i++)
		if (rlimit_names[i].resource == resource)
			return rlimit_names[i].name;
	return "?";
}

int ab_parse_id(const char *s, uid_t *out)
{
	char *end;
	unsigned long long v;
	if (leading_number(s, &v, &end) < 0 || *end)
		return -EINVAL;
	/* (uid_t)-1 means "unchanged" to the kernel, so it is never an id */
	if (v >= (unsigned long long)(uid_t)-1)
		return -ERANGE;
	*out = (uid_t)v;
	return 0;
}

int ab_path_normalize(const char *in, char **out)
{
	if (!in || in[0] != '/')
		return -EINVAL;
	size_t len = strlen(in);
	if (len >= PATH_MAX)
		return -ENAMETOOLONG;
	cleanup_free char *res = malloc(len + 2);
	if (!res)
		return -ENOMEM;
	size_t o = 0;
	const char *p = in;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);
		if (n == 1 && p[0] == '.') {
			p = e;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -ELOOP; /* ".." is refused, not resolved */
		res[o++] = '/';
		memcpy(res + o, p, n);
		o += n;
		p = e;
	}
	if (o == 0)
		res[o++] = '/';
	res[o] = '\0';
	*out = ab_steal_pointer(&res);
	return 0;
}

bool ab_path_is_under(const char *path, const char *dir)
{
	if (strcmp(dir, "/") == 0)
		return true;
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int ab_parse_choice(const char *opt, const char *value, const struct ab_choice *c, size_t n,
		    struct ab_error *err)
{
	char names[256] = "";
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(value, c[i].name) == 0)
			return c[i].value;
		bool alias = false;
		for (size_t j = 0; j < i; j++)
			alias = alias || c[j].value == c[i].value;
		if (!alias && len < sizeof(names))
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
						len ? ", " : "", c[i].name);
	}
	return ab_error_plain(err, EINVAL, "%s: '%s' is not one of %s", opt, value, names);
}
