/* Command-line options of `agentbox run`: parsed into struct ab_config and
 * checked for form here; checks against the host live in config.c. Nothing
 * is created on the host while parsing. */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "util.h"

#define DEFAULT_HOSTNAME "agentbox"
#define DEFAULT_HOME "/home/agent"

void ab_config_init(struct ab_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->net = AB_NET_NONE;
	cfg->env_policy = AB_ENV_CORE;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void ab_config_free(struct ab_config *cfg)
{
	free(cfg->workspace);
	free(cfg->skills);
	free(cfg->cwd);
	free(cfg->hostname);
	free(cfg->home);
	for (size_t i = 0; i < cfg->n_mounts; i++) {
		free(cfg->mounts[i].src);
		free(cfg->mounts[i].dst);
	}
	free(cfg->mounts);
	strv_free(cfg->pass_env, cfg->n_pass_env);
	strv_free(cfg->set_env, cfg->n_set_env);
	strv_free(cfg->argv, cfg->argc);
	ab_config_init(cfg);
}

int ab_parse_size(const char *s, unsigned long long *out)
{
	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -errno;
	unsigned shift = 0;
	if (*end) {
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

int ab_parse_id(const char *s, uid_t *out)
{
	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	/* (uid_t)-1 means "unchanged" to the kernel, so it is never an id */
	if (v >= (unsigned long)(uid_t)-1)
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

static int strv_push(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(char *));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	if (!(nv[*n] = strdup(s)))
		return -ENOMEM;
	nv[++*n] = NULL;
	return 0;
}

static int set_string(char **field, const char *value)
{
	char *s = strdup(value);
	if (!s)
		return -ENOMEM;
	free(*field);
	*field = s;
	return 0;
}

static int parse_view_path(const char *opt, const char *value, char **out,
			   struct ab_error *err)
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

static int add_mount(struct ab_config *cfg, enum ab_mount_kind kind, const char *opt,
		     const char *value, struct ab_error *err)
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

static bool valid_hostname(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return false;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.')
			return false;
	return s[0] != '-' && s[0] != '.';
}

static bool valid_env_name(const char *s, size_t n)
{
	if (n == 0 || isdigit((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	return true;
}

enum {
	OPT_WORKSPACE = 256,
	OPT_SKILLS,
	OPT_CWD,
	OPT_RO_BIND,
	OPT_BIND,
	OPT_TMPFS,
	OPT_HOSTNAME,
	OPT_HOME,
	OPT_UID,
	OPT_GID,
	OPT_HOST_UID,
	OPT_HOST_GID,
	OPT_NET,
	OPT_ENV_POLICY,
	OPT_PASS_ENV,
	OPT_ENV,
	OPT_HELP,
};

static const struct option run_options[] = {
	{"workspace", required_argument, NULL, OPT_WORKSPACE},
	{"skills", required_argument, NULL, OPT_SKILLS},
	{"cwd", required_argument, NULL, OPT_CWD},
	{"ro-bind", required_argument, NULL, OPT_RO_BIND},
	{"bind", required_argument, NULL, OPT_BIND},
	{"tmpfs", required_argument, NULL, OPT_TMPFS},
	{"hostname", required_argument, NULL, OPT_HOSTNAME},
	{"home", required_argument, NULL, OPT_HOME},
	{"uid", required_argument, NULL, OPT_UID},
	{"gid", required_argument, NULL, OPT_GID},
	{"host-uid", required_argument, NULL, OPT_HOST_UID},
	{"host-gid", required_argument, NULL, OPT_HOST_GID},
	{"net", required_argument, NULL, OPT_NET},
	{"env-policy", required_argument, NULL, OPT_ENV_POLICY},
	{"pass-env", required_argument, NULL, OPT_PASS_ENV},
	{"env", required_argument, NULL, OPT_ENV},
	{"help", no_argument, NULL, OPT_HELP},
	{NULL, 0, NULL, 0},
};

static int parse_id_option(const char *opt, const char *value, uid_t *out, bool *set,
			   struct ab_error *err)
{
	if (ab_parse_id(value, out) < 0)
		return ab_error_plain(err, EINVAL, "%s: '%s' is not a valid id (0 to 4294967294)",
				      opt, value);
	*set = true;
	return 0;
}

static int parse_one(struct ab_config *cfg, int c, const char *opt, const char *arg,
		     const char **shell_cmd, struct ab_error *err)
{
	switch (c) {
	case 'c':
		*shell_cmd = arg;
		return 0;
	case OPT_WORKSPACE:
		if (!*arg)
			return ab_error_plain(err, EINVAL, "--workspace: empty path");
		return set_string(&cfg->workspace, arg);
	case OPT_SKILLS:
		if (!*arg)
			return ab_error_plain(err, EINVAL, "--skills: empty path");
		return set_string(&cfg->skills, arg);
	case OPT_CWD: {
		char *p;
		if (parse_view_path("--cwd", arg, &p, err) < 0)
			return -EINVAL;
		free(cfg->cwd);
		cfg->cwd = p;
		return 0;
	}
	case OPT_HOME: {
		char *p;
		if (parse_view_path("--home", arg, &p, err) < 0)
			return -EINVAL;
		free(cfg->home);
		cfg->home = p;
		return 0;
	}
	case OPT_RO_BIND:
		return add_mount(cfg, AB_MOUNT_RO_BIND, opt, arg, err);
	case OPT_BIND:
		return add_mount(cfg, AB_MOUNT_BIND, opt, arg, err);
	case OPT_TMPFS:
		return add_mount(cfg, AB_MOUNT_TMPFS, opt, arg, err);
	case OPT_HOSTNAME:
		if (!valid_hostname(arg))
			return ab_error_plain(err, EINVAL,
					      "--hostname: '%s' is not a valid host name "
					      "(letters, digits, '-' and '.', at most 64)",
					      arg);
		return set_string(&cfg->hostname, arg);
	case OPT_UID:
		return parse_id_option(opt, arg, &cfg->uid, &cfg->uid_set, err);
	case OPT_GID:
		return parse_id_option(opt, arg, &cfg->gid, &cfg->gid_set, err);
	case OPT_HOST_UID:
		return parse_id_option(opt, arg, &cfg->host_uid, &cfg->host_uid_set, err);
	case OPT_HOST_GID:
		return parse_id_option(opt, arg, &cfg->host_gid, &cfg->host_gid_set, err);
	case OPT_NET:
		if (strcmp(arg, "none") == 0)
			cfg->net = AB_NET_NONE;
		else if (strcmp(arg, "host") == 0)
			cfg->net = AB_NET_HOST;
		else
			return ab_error_plain(err, EINVAL, "--net: '%s' is not one of none, host",
					      arg);
		return 0;
	case OPT_ENV_POLICY:
		if (strcmp(arg, "core") == 0)
			cfg->env_policy = AB_ENV_CORE;
		else if (strcmp(arg, "none") == 0)
			cfg->env_policy = AB_ENV_NONE;
		else if (strcmp(arg, "all") == 0)
			cfg->env_policy = AB_ENV_ALL;
		else
			return ab_error_plain(err, EINVAL,
					      "--env-policy: '%s' is not one of core, none, all",
					      arg);
		return 0;
	case OPT_PASS_ENV:
		if (!valid_env_name(arg, strlen(arg)))
			return ab_error_plain(err, EINVAL,
					      "--pass-env: '%s' is not a variable name", arg);
		return strv_push(&cfg->pass_env, &cfg->n_pass_env, arg);
	case OPT_ENV: {
		const char *eq = strchr(arg, '=');
		if (!eq || !valid_env_name(arg, (size_t)(eq - arg)))
			return ab_error_plain(err, EINVAL,
					      "--env: '%s' is not NAME=VALUE with a valid NAME",
					      arg);
		return strv_push(&cfg->set_env, &cfg->n_set_env, arg);
	}
	}
	return ab_error_plain(err, EINVAL, "internal: unhandled option %d", c);
}

int ab_config_parse_run(struct ab_config *cfg, int argc, char **argv, bool *help,
			struct ab_error *err)
{
	const char *shell_cmd = NULL;
	*help = false;
	opterr = 0;
	optind = 0; /* GNU getopt: 0 re-initialises, so the parser can run twice */
	for (;;) {
		int longidx = -1;
		int prev = optind ? optind : 1;
		/* '+': stop at the first non-option, so the command's own
		 * arguments are never taken for ours */
		int c = getopt_long(argc, argv, "+:c:h", run_options, &longidx);
		if (c == -1)
			break;
		const char *opt = longidx >= 0 ? argv[prev] : NULL;
		char optbuf[64];
		if (longidx >= 0) {
			snprintf(optbuf, sizeof(optbuf), "--%s", run_options[longidx].name);
			opt = optbuf;
		}
		if (c == '?') {
			if (optopt)
				return ab_error_plain(err, EINVAL, "unknown option '-%c'", optopt);
			return ab_error_plain(err, EINVAL, "unknown option '%s'", argv[prev]);
		}
		if (c == ':') {
			if (optopt && optopt < 256)
				return ab_error_plain(err, EINVAL, "option '-%c' needs a value",
						      optopt);
			return ab_error_plain(err, EINVAL, "option '%s' needs a value",
					      argv[prev]);
		}
		if (c == 'h' || c == OPT_HELP) {
			*help = true;
			return 0;
		}
		int r = parse_one(cfg, c, opt ? opt : "-c", optarg, &shell_cmd, err);
		if (r < 0) {
			if (r == -ENOMEM)
				return ab_error_set(err, ENOMEM, "parsing options");
			return r;
		}
	}

	int rest = argc - optind;
	if (shell_cmd) {
		if (rest > 0)
			return ab_error_plain(err, EINVAL,
					      "-c takes the whole command as one string; "
					      "unexpected argument '%s'",
					      argv[optind]);
		const char *sh[] = {"/bin/sh", "-c", shell_cmd};
		for (size_t i = 0; i < AB_ARRAY_SIZE(sh); i++)
			if (strv_push(&cfg->argv, &cfg->argc, sh[i]) < 0)
				return ab_error_set(err, ENOMEM, "parsing options");
	} else {
		if (rest <= 0)
			return ab_error_plain(err, EINVAL,
					      "no command given (agentbox run [OPTIONS] -- "
					      "COMMAND [ARG...], or -c 'SHELL STRING')");
		if (!*argv[optind])
			return ab_error_plain(err, EINVAL, "the command name is empty");
		for (int i = optind; i < argc; i++)
			if (strv_push(&cfg->argv, &cfg->argc, argv[i]) < 0)
				return ab_error_set(err, ENOMEM, "parsing options");
	}

	if (!cfg->hostname && set_string(&cfg->hostname, DEFAULT_HOSTNAME) < 0)
		return ab_error_set(err, ENOMEM, "parsing options");
	if (!cfg->home && set_string(&cfg->home, DEFAULT_HOME) < 0)
		return ab_error_set(err, ENOMEM, "parsing options");
	return 0;
}
