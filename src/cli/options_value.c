/* The value helpers of the run/serve options (options_int.h): rlimits,
 * durations, sizes, ids, paths of the view, mounts, protected paths, host
 * and variable names, each checked for form. */
#include "cli/options_int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "layer/protect.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/util.h"

int parse_rlimit(struct ab_config *cfg, const char *arg, struct ab_error *err)
{
	const char *eq = strchr(arg, '=');
	char name[32];
	if (!eq || (size_t)(eq - arg) >= sizeof(name))
		return ab_error_plain(err, EINVAL, "--rlimit: '%s' is not NAME=VALUE", arg);
	snprintf(name, sizeof(name), "%.*s", (int)(eq - arg), arg);
	int res = ab_rlimit_by_name(name);
	if (res < 0)
		return ab_error_plain(err, EINVAL,
				      "--rlimit: unknown limit '%s' (as core cpu data fsize locks "
				      "memlock msgqueue nice nofile nproc rss rtprio rttime "
				      "sigpending stack)",
				      name);
	unsigned long long v;
	if (strcmp(eq + 1, "unlimited") == 0)
		v = RLIM_INFINITY;
	else if (ab_parse_size(eq + 1, &v) < 0 || v == RLIM_INFINITY)
		return ab_error_plain(err, EINVAL,
				      "--rlimit: '%s' is not a number, a size or 'unlimited'",
				      eq + 1);
	for (size_t i = 0; i < cfg->n_rlimits; i++) {
		if (cfg->rlimits[i].resource == res) {
			cfg->rlimits[i] = (struct ab_rlimit){res, v, true};
			return 0;
		}
	}
	if (cfg->n_rlimits == AB_ARRAY_SIZE(cfg->rlimits))
		return ab_error_plain(err, EINVAL, "--rlimit: too many limits");
	cfg->rlimits[cfg->n_rlimits++] = (struct ab_rlimit){res, v, true};
	return 0;
}

int parse_duration_option(const char *opt, const char *value, unsigned long long *out,
			  struct ab_error *err)
{
	int r = ab_parse_duration(value, out);
	if (r == -ERANGE)
		return ab_error_plain(err, ERANGE, "%s: '%s' is too long", opt, value);
	if (r < 0)
		return ab_error_plain(err, EINVAL,
				      "%s: '%s' is not a duration (like 500ms, 30s, 2m, 1h, "
				      "or none)",
				      opt, value);
	return 0;
}

int parse_size_option(const char *opt, const char *value, unsigned long long min,
		      unsigned long long max, unsigned long long *out, struct ab_error *err)
{
	if (ab_parse_size(value, out) < 0)
		return ab_error_plain(err, EINVAL, "%s: '%s' is not a size (like 64K, 256M, 1G)",
				      opt, value);
	if (*out < min || *out > max)
		return ab_error_plain(err, ERANGE, "%s: '%s' is out of range (%lluK to %lluM)", opt,
				      value, min >> 10, max >> 20);
	return 0;
}

int set_string(char **field, const char *value)
{
	char *s = strdup(value);
	if (!s)
		return -ENOMEM;
	free(*field);
	*field = s;
	return 0;
}

int parse_view_path(const char *opt, const char *value, char **out, struct ab_error *err)
{
	int r = ab_path_normalize(value, out);
	if (r == -EINVAL)
		return ab_error_plain(err, EINVAL, "%s: '%s' is not an absolute path", opt, value);
	if (r == -ELOOP)
		return ab_error_plain(err, EINVAL, "%s: '%s' contains '..'", opt, value);
	if (r < 0)
		return ab_error_set(err, -r, "%s: '%s'", opt, value);
	return 0;
}

int set_view_path(const char *opt, const char *value, char **field, struct ab_error *err)
{
	char *p;
	if (parse_view_path(opt, value, &p, err) < 0)
		return -EINVAL;
	free(*field);
	*field = p;
	return 0;
}

int add_mount(struct ab_config *cfg, enum ab_mount_kind kind, const char *opt, const char *value,
	      struct ab_error *err)
{
	cleanup_free char *src = NULL;
	cleanup_free char *dst = NULL;
	if (kind == AB_MOUNT_TMPFS) {
		if (parse_view_path(opt, value, &dst, err) < 0)
			return -EINVAL;
	} else {
		if (!*value)
			return ab_error_plain(err, EINVAL, "%s: empty path", opt);
		const char *colon = strrchr(value, ':');
		src = colon ? strndup(value, (size_t)(colon - value)) : strdup(value);
		if (!src)
			return -ENOMEM;
		if (!*src)
			return ab_error_plain(err, EINVAL, "%s '%s': empty SRC", opt, value);
		/* without DST the source appears at its own absolute path; a
		 * relative source is resolved later, against the caller's cwd */
		const char *d = colon ? colon + 1 : src;
		if (colon && !*d)
			return ab_error_plain(err, EINVAL, "%s '%s': empty DST", opt, value);
		if (colon || src[0] == '/') {
			if (parse_view_path(opt, d, &dst, err) < 0)
				return -EINVAL;
		}
	}
	struct ab_mount *m = realloc(cfg->mounts, (cfg->n_mounts + 1) * sizeof(*m));
	if (!m)
		return -ENOMEM;
	cfg->mounts = m;
	m[cfg->n_mounts++] = (struct ab_mount){
		.kind = kind,
		.src = ab_steal_pointer(&src),
		.dst = ab_steal_pointer(&dst),
	};
	return 0;
}

bool in_strv(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

/* A workspace-relative path: "x/y", normalised, no "..", not empty. */
int parse_protect_path(struct ab_config *cfg, const char *opt, const char *value, bool add,
		       struct ab_error *err)
{
	char abs[4200];
	if (!*value || value[0] == '/' ||
	    snprintf(abs, sizeof(abs), "/%s", value) >= (int)sizeof(abs))
		return ab_error_plain(err, EINVAL,
				      "%s: '%s' is not a path relative to the workspace", opt,
				      value);
	cleanup_free char *norm = NULL;
	if (parse_view_path(opt, abs, &norm, err) < 0)
		return -EINVAL;
	if (strcmp(norm, "/") == 0)
		return ab_error_plain(err, EINVAL, "%s: '%s' names the workspace itself", opt,
				      value);
	if (add)
		return in_strv(cfg->protect, cfg->n_protect, norm + 1)
			       ? 0
			       : ab_strv_push(&cfg->protect, &cfg->n_protect, norm + 1);
	return ab_strv_push(&cfg->unprotect, &cfg->n_unprotect, norm + 1);
}

bool valid_hostname(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return false;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.')
			return false;
	return s[0] != '-' && s[0] != '.';
}

bool valid_env_name(const char *s, size_t n)
{
	if (n == 0 || isdigit((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	return true;
}

int parse_protect_created(struct ab_config *cfg, const char *value, struct ab_error *err)
{
	static const struct ab_choice modes[] = {{"quarantine", AB_PROTECT_CREATED_QUARANTINE},
						 {"report", AB_PROTECT_CREATED_REPORT}};
	int r = ab_parse_choice("--protect-created", value, modes, AB_ARRAY_SIZE(modes), err);
	if (r >= 0)
		cfg->protect_created = r;
	return r < 0 ? r : 0;
}
