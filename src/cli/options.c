/* Command-line options of `agentbox run`: parsed into struct ab_config and
 * checked for form here; checks against the host live in config.c. Nothing
 * is created on the host while parsing. */
#include "cli/options.h"
#include "cli/options_int.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "util/error.h"
#include "sandbox/isolation.h"
#include "layer/layer.h"
#include "net/netpolicy.h"
#include "util/parse.h"
#include "layer/protect.h"
#include "util/util.h"

enum {
	OPT_WORKSPACE = 256,
	OPT_SKILLS,
	OPT_ROOTFS,
	OPT_IMAGE,
	OPT_WORKSPACE_MODE,
	OPT_KEEP_CHANGES,
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
	OPT_PROTECT,
	OPT_UNPROTECT,
	OPT_PROTECT_CREATED,
	OPT_SECCOMP,
	OPT_LANDLOCK,
	OPT_ISOLATION, /* isolation.c */
	OPT_TIMEOUT,
	OPT_KILL_AFTER,
	OPT_MAX_TIMEOUT,
	OPT_TMPFS_SIZE,
	OPT_LAYER_QUOTA,
	OPT_RLIMIT,
	OPT_REPORT,
	OPT_CAPTURE,
	OPT_TTY,
	OPT_MERGE_OUTPUT,
	OPT_MAX_OUTPUT,
	OPT_OUTPUT_ENCODING,
	OPT_MEMORY,
	OPT_CPUS,
	OPT_PIDS,
	OPT_CGROUP_PARENT,
	OPT_REQUIRE_LIMITS,
	OPT_LIMITS,
	OPT_QUIET,
	OPT_ALLOW_BROAD_WORKSPACE,
	OPT_MAX_CONCURRENT,
	OPT_AUDIT_LOG,
	OPT_PROFILE,
	OPT_HELP,
};

static const struct option run_options[] = {
	{"workspace", required_argument, NULL, OPT_WORKSPACE},
	{"skills", required_argument, NULL, OPT_SKILLS},
	{"rootfs", required_argument, NULL, OPT_ROOTFS},
	{"image", required_argument, NULL, OPT_IMAGE},
	{"workspace-mode", required_argument, NULL, OPT_WORKSPACE_MODE},
	{"keep-changes", required_argument, NULL, OPT_KEEP_CHANGES},
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
	{"protect", required_argument, NULL, OPT_PROTECT},
	{"seccomp", required_argument, NULL, OPT_SECCOMP},
	{"landlock", required_argument, NULL, OPT_LANDLOCK},
	{"isolation", required_argument, NULL, OPT_ISOLATION},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"kill-after", required_argument, NULL, OPT_KILL_AFTER},
	{"max-timeout", required_argument, NULL, OPT_MAX_TIMEOUT},
	{"tmpfs-size", required_argument, NULL, OPT_TMPFS_SIZE},
	{"layer-quota", required_argument, NULL, OPT_LAYER_QUOTA},
	{"rlimit", required_argument, NULL, OPT_RLIMIT},
	{"report", required_argument, NULL, OPT_REPORT},
	{"capture", no_argument, NULL, OPT_CAPTURE},
	{"tty", no_argument, NULL, OPT_TTY},
	{"merge-output", no_argument, NULL, OPT_MERGE_OUTPUT},
	{"max-output", required_argument, NULL, OPT_MAX_OUTPUT},
	{"output-encoding", required_argument, NULL, OPT_OUTPUT_ENCODING},
	{"memory", required_argument, NULL, OPT_MEMORY},
	{"cpus", required_argument, NULL, OPT_CPUS},
	{"pids", required_argument, NULL, OPT_PIDS},
	{"cgroup-parent", required_argument, NULL, OPT_CGROUP_PARENT},
	{"require-limits", no_argument, NULL, OPT_REQUIRE_LIMITS},
	{"limits", required_argument, NULL, OPT_LIMITS},
	{"quiet", no_argument, NULL, OPT_QUIET},
	{"allow-broad-workspace", no_argument, NULL, OPT_ALLOW_BROAD_WORKSPACE},
	{"unprotect", required_argument, NULL, OPT_UNPROTECT},
	{"protect-created", required_argument, NULL, OPT_PROTECT_CREATED},
	{"max-concurrent", required_argument, NULL, OPT_MAX_CONCURRENT},
	{"audit-log", required_argument, NULL, OPT_AUDIT_LOG},
	{"profile", required_argument, NULL, OPT_PROFILE},
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

/* What the parse_*_option functions return for an option they do not take. */
#define OPTION_ELSEWHERE 1

/* The options that take one word of a few: --env-policy, --landlock,
 * --output-encoding. */
static int parse_choice_option(struct ab_config *cfg, int c, const char *opt, const char *arg,
			       struct ab_error *err)
{
	static const struct ab_choice policies[] = {
		{"core", AB_ENV_CORE}, {"none", AB_ENV_NONE}, {"all", AB_ENV_ALL}};
	static const struct ab_choice on_off[] = {{"on", false}, {"off", true}};
	static const struct ab_choice encodings[] = {
		{"utf8", false}, {"utf-8", false}, {"base64", true}};
	int r;
	switch (c) {
	case OPT_ENV_POLICY:
		if ((r = ab_parse_choice(opt, arg, policies, AB_ARRAY_SIZE(policies), err)) >= 0)
			cfg->env_policy = r;
		break;
	case OPT_LANDLOCK:
		if ((r = ab_parse_choice(opt, arg, on_off, AB_ARRAY_SIZE(on_off), err)) >= 0)
			cfg->no_landlock = r;
		break;
	default:
		if ((r = ab_parse_choice(opt, arg, encodings, AB_ARRAY_SIZE(encodings), err)) >= 0)
			cfg->output_base64 = r;
	}
	return r < 0 ? r : 0;
}

/* Options of what the sandbox sees and is: the view, identity, network,
 * environment and confinement. OPTION_ELSEWHERE for the others. */
static int parse_view_option(struct ab_config *cfg, int c, const char *opt, const char *arg,
			     struct ab_error *err)
{
	switch (c) {
	case OPT_WORKSPACE:
		if (!*arg)
			return ab_error_plain(err, EINVAL, "--workspace: empty path");
		return set_string(&cfg->workspace, arg);
	case OPT_ALLOW_BROAD_WORKSPACE:
		cfg->allow_broad_workspace = true;
		return 0;
	case OPT_SKILLS:
		if (!*arg)
			return ab_error_plain(err, EINVAL, "--skills: empty path");
		return set_string(&cfg->skills, arg);
	case OPT_ROOTFS:
		if (!*arg)
			return ab_error_plain(err, EINVAL, "--rootfs: empty path");
		return set_string(&cfg->rootfs, arg);
	case OPT_IMAGE:
		if (!*arg)
			return ab_error_plain(err, EINVAL, "--image: empty value (oci:DIR[:TAG])");
		return set_string(&cfg->image, arg);
	case OPT_WORKSPACE_MODE:
	case OPT_KEEP_CHANGES:
		return layer_parse_option(cfg, opt, arg, err);
	case OPT_CWD:
		return set_view_path(opt, arg, &cfg->cwd, err);
	case OPT_HOME:
		return set_view_path(opt, arg, &cfg->home, err);
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
			return ab_net_option(cfg, arg, err); /* allow=, deny=... (netpolicy.c) */
		return 0;
	case OPT_ENV_POLICY:
	case OPT_LANDLOCK:
		return parse_choice_option(cfg, c, opt, arg, err);
	case OPT_PASS_ENV:
		if (!valid_env_name(arg, strlen(arg)))
			return ab_error_plain(err, EINVAL,
					      "--pass-env: '%s' is not a variable name", arg);
		return ab_strv_push(&cfg->pass_env, &cfg->n_pass_env, arg);
	case OPT_ENV: {
		const char *eq = strchr(arg, '=');
		if (!eq || !valid_env_name(arg, (size_t)(eq - arg)))
			return ab_error_plain(err, EINVAL,
					      "--env: '%s' is not NAME=VALUE with a valid NAME",
					      arg);
		return ab_strv_push(&cfg->set_env, &cfg->n_set_env, arg);
	}
	case OPT_SECCOMP:
		if (!*arg)
			return ab_error_plain(err, EINVAL,
					      "--seccomp: empty value (default, strict, "
					      "permissive, none or a profile file)");
		return set_string(&cfg->seccomp, arg);
	case OPT_PROTECT:
		return parse_protect_path(cfg, opt, arg, true, err);
	case OPT_UNPROTECT:
		return parse_protect_path(cfg, opt, arg, false, err);
	case OPT_PROTECT_CREATED:
		return parse_protect_created(cfg, arg, err);
	}
	return OPTION_ELSEWHERE;
}

/* Options of limits: time, sizes, rlimits, the cgroup's limits and the
 * number of commands. OPTION_ELSEWHERE for the others. */
static int parse_limit_option(struct ab_config *cfg, int c, const char *opt, const char *arg,
			      struct ab_error *err)
{
	switch (c) {
	case OPT_TIMEOUT:
		cfg->timeout_set = true;
		return parse_duration_option(opt, arg, &cfg->timeout_ms, err);
	case OPT_KILL_AFTER:
		return parse_duration_option(opt, arg, &cfg->kill_after_ms, err);
	case OPT_MAX_TIMEOUT:
		cfg->max_timeout_set = true;
		return parse_duration_option(opt, arg, &cfg->max_timeout_ms, err);
	case OPT_TMPFS_SIZE:
		return parse_size_option(opt, arg, 64 << 10, 1ULL << 40, &cfg->tmpfs_size, err);
	case OPT_LAYER_QUOTA: /* docs/checkpoints.md, "Quota" */
		return parse_size_option(opt, arg, 1 << 20, 1ULL << 60, &cfg->layer_quota, err);
	case OPT_MAX_OUTPUT:
		return parse_size_option(opt, arg, 1 << 10, MAX_MAX_OUTPUT, &cfg->max_output, err);
	case OPT_RLIMIT:
		return parse_rlimit(cfg, arg, err);
	case OPT_MEMORY:
		if (strcmp(arg, "none") == 0) {
			cfg->memory = 0;
			return 0;
		}
		return parse_size_option(opt, arg, 1 << 20, 1ULL << 50, &cfg->memory, err);
	case OPT_LIMITS:
		cfg->limits_best = strcmp(arg, "best") == 0;
		return cfg->limits_best || strcmp(arg, "full") == 0
			       ? 0
			       : ab_error_plain(err, EINVAL, "--limits: '%s' is not full or best",
						arg);
	case OPT_QUIET:
		cfg->quiet = true;
		return 0;
	case OPT_CPUS: {
		/* "0.5", "2", "none": thousandths of a core */
		if (strcmp(arg, "none") == 0) {
			cfg->cpu_millis = 0;
			return 0;
		}
		char *end;
		errno = 0;
		double v = isdigit((unsigned char)arg[0]) ? strtod(arg, &end) : -1;
		if (v < 0.01 || v > 4096 || errno || *end)
			return ab_error_plain(err, EINVAL,
					      "--cpus: '%s' is not a number of cores from 0.01 "
					      "to 4096 (like 0.5 or 2), or none",
					      arg);
		cfg->cpu_millis = (unsigned)(v * 1000 + 0.5);
		return 0;
	}
	case OPT_PIDS: {
		uid_t v;
		if (strcmp(arg, "none") == 0) {
			cfg->pids = 0;
			cfg->pids_set = false;
			return 0;
		}
		if (ab_parse_id(arg, &v) < 0 || v < 1 || v > 4194304)
			return ab_error_plain(err, EINVAL,
					      "--pids: '%s' is not a number from 1 to 4194304, or "
					      "none",
					      arg);
		cfg->pids = v;
		cfg->pids_set = true;
		return 0;
	}
	case OPT_CGROUP_PARENT:
		return set_view_path(opt, arg, &cfg->cgroup_parent, err);
	case OPT_REQUIRE_LIMITS: /* the old name of --limits full */
		cfg->limits_best = false;
		return 0;
	case OPT_ISOLATION: /* isolation.c */
		return ab_isolation_parse(arg, &cfg->isolation, err);
	case OPT_MAX_CONCURRENT: {
		uid_t v;
		if (ab_parse_id(arg, &v) < 0 || v < 1 || v > 256)
			return ab_error_plain(
				err, EINVAL, "--max-concurrent: '%s' is not a number from 1 to 256",
				arg);
		cfg->max_concurrent = v;
		return 0;
	}
	}
	return OPTION_ELSEWHERE;
}

/* Options of how the result is read: the report, captured output and
 * the audit log. OPTION_ELSEWHERE for the others. */
static int parse_output_option(struct ab_config *cfg, int c, const char *opt, const char *arg,
			       struct ab_error *err)
{
	switch (c) {
	case OPT_REPORT:
		if (strncmp(arg, "fd:", 3) == 0) {
			uid_t fd;
			if (ab_parse_id(arg + 3, &fd) < 0 || fd < 3 || fd > 65535)
				return ab_error_plain(
					err, EINVAL, "--report: '%s' is not fd:N with N >= 3", arg);
		} else if (!*arg) {
			return ab_error_plain(err, EINVAL, "--report: empty path");
		}
		return set_string(&cfg->report, arg);
	case OPT_CAPTURE:
		cfg->capture = true;
		return 0;
	case 't':
	case OPT_TTY:
		cfg->tty = true;
		return 0;
	case OPT_MERGE_OUTPUT:
		cfg->merge_output = true;
		return 0;
	case OPT_OUTPUT_ENCODING:
		return parse_choice_option(cfg, c, opt, arg, err);
	case OPT_AUDIT_LOG:
		if (!*arg)
			return ab_error_plain(err, EINVAL, "--audit-log: empty path");
		return set_string(&cfg->audit_log, arg);
	}
	return OPTION_ELSEWHERE;
}

static int parse_one(struct ab_config *cfg, int c, const char *opt, const char *arg,
		     const char **shell_cmd, struct ab_error *err)
{
	if (c == 'c') {
		*shell_cmd = arg;
		return 0;
	}
	int r = parse_view_option(cfg, c, opt, arg, err);
	if (r == OPTION_ELSEWHERE)
		r = parse_limit_option(cfg, c, opt, arg, err);
	if (r == OPTION_ELSEWHERE)
		r = parse_output_option(cfg, c, opt, arg, err);
	if (r == OPTION_ELSEWHERE)
		return ab_error_plain(err, EINVAL, "internal: unhandled option %d", c);
	return r;
}

/* Options that only one of run and serve takes. */
static const char *wrong_mode(int c, bool serve)
{
	if (serve) {
		switch (c) {
		case 'c':
			return "agentbox serve takes its commands on stdin (docs/protocol.md)";
		case OPT_REPORT:
		case OPT_CAPTURE:
			return "agentbox serve puts every result on stdout (docs/protocol.md)";
		case 't':
		case OPT_TTY:
			return "in agentbox serve each exec request asks for its own terminal "
			       "(\"pty\", docs/protocol.md)";
		case OPT_MERGE_OUTPUT:
		case OPT_OUTPUT_ENCODING:
			return "in agentbox serve each exec request chooses this "
			       "(merge_output, encoding)";
		}
		return NULL;
	}
	if (c == OPT_MAX_CONCURRENT || c == OPT_AUDIT_LOG)
		return "applies to agentbox serve only";
	return NULL;
}

/* Options that may be given more than once, each adding to a list. */
static const char *const repeatable[] = {"ro-bind", "bind",	 "tmpfs",  "pass-env", "env",
					 "protect", "unprotect", "rlimit", NULL};

static const struct option *option_by_name(const char *name)
{
	for (const struct option *o = run_options; o->name; o++)
		if (strcmp(o->name, name) == 0)
			return o;
	return NULL;
}

size_t ab_option_list(bool serve, const char **names, bool *values, size_t max)
{
	size_t n = 0;
	for (const struct option *o = run_options; o->name && n < max; o++) {
		if (wrong_mode(o->val, serve))
			continue;
		names[n] = o->name;
		values[n++] = o->has_arg != no_argument;
	}
	return n;
}

enum ab_option_kind ab_option_kind(const char *name)
{
	const struct option *o = option_by_name(name);
	if (!o)
		return AB_OPTION_UNKNOWN;
	if (o->has_arg == no_argument)
		return AB_OPTION_FLAG;
	for (const char *const *r = repeatable; *r; r++)
		if (strcmp(*r, name) == 0)
			return AB_OPTION_LIST;
	return AB_OPTION_VALUE;
}

int ab_option_apply(struct ab_config *cfg, const char *name, const char *value,
		    struct ab_error *err)
{
	const struct option *o = option_by_name(name);
	if (!o || o->val == OPT_HELP || o->val == OPT_PROFILE)
		return ab_error_plain(err, EINVAL, "--%s: not an option a profile can set", name);
	if ((o->has_arg == no_argument) != (value == NULL))
		return ab_error_plain(err, EINVAL, "--%s: %s", name,
				      value ? "takes no value" : "needs a value");
	char opt[64];
	snprintf(opt, sizeof(opt), "--%s", name);
	const char *shell_cmd = NULL;
	int r = parse_one(cfg, o->val, opt, value, &shell_cmd, err);
	if (r == -ENOMEM)
		return ab_error_set(err, ENOMEM, "%s", opt);
	return r;
}

int ab_options_find_profile(int argc, char **argv, const char **profile, bool *help,
			    struct ab_error *err)
{
	*profile = NULL;
	*help = false;
	opterr = 0;
	optind = 0;
	int c;
	while ((c = getopt_long(argc, argv, "+:c:ht", run_options, NULL)) != -1) {
		if (c == 'h' || c == OPT_HELP) {
			*profile = NULL; /* --help needs no profile, even a broken one */
			*help = true;
			return 0;
		}
		if (c != OPT_PROFILE)
			continue;
		if (*profile)
			return ab_error_plain(
				err, EINVAL,
				"--profile: given twice ('%s', '%s'); one profile at a "
				"time",
				*profile, optarg);
		*profile = optarg;
	}
	return 0;
}

/* A run's deadline: -t is a person at a terminal (an agent CLI wrapped
 * whole), with no deadline unless one was given; a --timeout on the run's
 * own command line is its caller's word, not a client's request, and is
 * not clamped (but by a --max-timeout given too). */
static void run_deadline(struct ab_config *cfg, bool timeout_on_cmdline)
{
	if (cfg->tty && !cfg->timeout_set)
		cfg->timeout_ms = 0;
	if ((timeout_on_cmdline || (cfg->tty && !cfg->timeout_set)) && !cfg->max_timeout_set)
		cfg->max_timeout_ms = 0;
}

/* After the last option: the protected paths, the options that need
 * each other, and the defaults of what was not given. */
static int finish_options(struct ab_config *cfg, bool serve, struct ab_error *err)
{
	/* the protected list: the defaults and --protect, less --unprotect */
	for (const char *const *p = protect_default_paths; *p; p++)
		if (!in_strv(cfg->protect, cfg->n_protect, *p) &&
		    ab_strv_push(&cfg->protect, &cfg->n_protect, *p) < 0)
			return ab_error_set(err, ENOMEM, "parsing options");
	size_t kept = 0;
	for (size_t i = 0; i < cfg->n_protect; i++) {
		if (in_strv(cfg->unprotect, cfg->n_unprotect, cfg->protect[i]))
			free(cfg->protect[i]);
		else
			cfg->protect[kept++] = cfg->protect[i];
	}
	cfg->n_protect = kept;
	if (cfg->protect)
		cfg->protect[kept] = NULL;

	if (cfg->capture && !cfg->report)
		return ab_error_plain(err, EINVAL,
				      "--capture needs --report FILE or --report fd:N to put "
				      "the output in");
	if (cfg->tty && cfg->capture)
		return ab_error_plain(err, EINVAL,
				      "-t gives the command a terminal relayed to yours: it "
				      "cannot be captured too; drop -t or --capture");
	if ((cfg->merge_output || cfg->output_base64) && !cfg->capture)
		return ab_error_plain(err, EINVAL, "%s applies to captured output: add --capture",
				      cfg->merge_output ? "--merge-output" : "--output-encoding");
	if (serve)
		cfg->capture = true; /* every result carries the output */
	if (!cfg->seccomp && set_string(&cfg->seccomp, "default") < 0)
		return ab_error_set(err, ENOMEM, "parsing options");
	if (!cfg->hostname && set_string(&cfg->hostname, DEFAULT_HOSTNAME) < 0)
		return ab_error_set(err, ENOMEM, "parsing options");
	if (!cfg->home && set_string(&cfg->home, DEFAULT_HOME) < 0)
		return ab_error_set(err, ENOMEM, "parsing options");
	return 0;
}

int ab_options_parse(struct ab_config *cfg, int argc, char **argv, bool serve, bool *help,
		     struct ab_error *err)
{
	const char *shell_cmd = NULL;
	bool timeout_on_cmdline = false;
	*help = false;
	int r;
	opterr = 0;
	optind = 0; /* GNU getopt: 0 re-initialises, so the parser can run twice */
	for (;;) {
		int longidx = -1;
		int prev = optind ? optind : 1;
		/* '+': stop at the first non-option, so the command's own
		 * arguments are never taken for ours */
		int c = getopt_long(argc, argv, "+:c:ht", run_options, &longidx);
		if (c == -1)
			break;
		const char *opt = longidx >= 0 ? argv[prev] : NULL;
		char optbuf[64];
		if (longidx >= 0) {
			snprintf(optbuf, sizeof(optbuf), "--%s", run_options[longidx].name);
			opt = optbuf;
		}
		if (c == '?') {
			/* glibc puts a long option's code in optopt when it was
			 * given a value it does not take */
			if (optopt >= 256)
				return ab_error_plain(err, EINVAL, "option '%s' takes no value",
						      argv[prev]);
			if (optopt)
				return ab_error_plain(err, EINVAL, "unknown option '-%c'", optopt);
			return ab_error_plain(err, EINVAL, "unknown or ambiguous option '%s'",
					      argv[prev]);
		}
		if (c == ':') {
			if (optopt && optopt < 256)
				return ab_error_plain(err, EINVAL, "option '-%c' needs a value",
						      optopt);
			return ab_error_plain(err, EINVAL, "option '%s' needs a value", argv[prev]);
		}
		if (c == 'h' || c == OPT_HELP) {
			*help = true;
			return 0;
		}
		if (c == OPT_PROFILE)
			continue; /* applied first (cmdline.c) */
		const char *wrong = wrong_mode(c, serve);
		if (wrong)
			return ab_error_plain(err, EINVAL, "%s: %s", opt ? opt : "-c", wrong);
		timeout_on_cmdline |= c == OPT_TIMEOUT;
		r = parse_one(cfg, c, opt ? opt : "-c", optarg, &shell_cmd, err);
		if (r < 0) {
			if (r == -ENOMEM)
				return ab_error_set(err, ENOMEM, "parsing options");
			return r;
		}
	}

	int rest = argc - optind;
	if (serve) {
		if (rest > 0)
			return ab_error_plain(err, EINVAL,
					      "agentbox serve takes no command ('%s'): commands "
					      "come on stdin (docs/protocol.md)",
					      argv[optind]);
	} else if (shell_cmd) {
		if (rest > 0)
			return ab_error_plain(err, EINVAL,
					      "-c takes the whole command as one string; "
					      "unexpected argument '%s'",
					      argv[optind]);
		/* "--": a string starting with '-' is not sh's options */
		const char *sh[] = {"/bin/sh", "-c", "--", shell_cmd};
		for (size_t i = 0; i < AB_ARRAY_SIZE(sh); i++)
			if (ab_strv_push(&cfg->argv, &cfg->argc, sh[i]) < 0)
				return ab_error_set(err, ENOMEM, "parsing options");
	} else {
		if (rest <= 0)
			return ab_error_plain(err, EINVAL,
					      "no command given (agentbox run [OPTIONS] -- "
					      "COMMAND [ARG...], or -c 'SHELL STRING')");
		if (!*argv[optind])
			return ab_error_plain(err, EINVAL, "the command name is empty");
		for (int i = optind; i < argc; i++)
			if (ab_strv_push(&cfg->argv, &cfg->argc, argv[i]) < 0)
				return ab_error_set(err, ENOMEM, "parsing options");
	}

	if (!serve)
		run_deadline(cfg, timeout_on_cmdline);
	return finish_options(cfg, serve, err);
}
