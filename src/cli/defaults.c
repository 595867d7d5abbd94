/* The defaults files (docs/profiles.md, "Defaults files"): a profile that
 * applies to every run, serve, create, mcp and runtime before --profile and
 * the command line, system-wide in /etc/agentbox/config.json and per user
 * in $XDG_CONFIG_HOME/agentbox/config.json (default ~/.config). A team's
 * network allowlist or --cgroup-parent without wrapping the binary.
 * AGENTBOX_CONFIG=FILE names the one file to read instead, none reads none. */
#include "cli/defaults.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/profile.h"
#include "util/error.h"
#include "util/util.h"

#define SYSTEM_DEFAULTS "/etc/agentbox/config.json"

/* The user's file into out; false when there is no home to find it in. */
static bool user_defaults_path(char *out, size_t size)
{
	const char *xdg = getenv("XDG_CONFIG_HOME");
	if (xdg && xdg[0] == '/')
		return (size_t)snprintf(out, size, "%s/agentbox/config.json", xdg) < size;
	const char *home = getenv("HOME");
	if (!home || home[0] != '/') {
		struct passwd *pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}
	return home && home[0] == '/' &&
	       (size_t)snprintf(out, size, "%s/.config/agentbox/config.json", home) < size;
}

/* Whether path is a file only its owner (the caller or root) may change;
 * -ENOENT when there is none. Another user's or a group-writable file would
 * let them choose how the caller's sandboxes are made. */
static int trusted_file(const char *path, struct ab_error *err)
{
	struct stat st;
	/* none there, or where the caller cannot look (a HOME of another
	 * user's, as under sudo or in a container): no file of the caller's */
	if (stat(path, &st) < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == EACCES
			       ? -ENOENT
			       : ab_error_set(err, errno, "%s", path);
	if (!S_ISREG(st.st_mode))
		return ab_error_plain(err, EINVAL, "%s: not a regular file", path);
	if (st.st_uid != getuid() && st.st_uid != 0)
		return ab_error_plain(err, EPERM,
				      "%s belongs to uid %u, neither you nor root: it would "
				      "choose how your sandboxes are made; remove it or take it "
				      "(chown)",
				      path, (unsigned)st.st_uid);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return ab_error_plain(err, EPERM,
				      "%s may be written by others (mode %03o): they would "
				      "choose how your sandboxes are made; chmod go-w %s",
				      path, (unsigned)(st.st_mode & 0777), path);
	return 0;
}

static int apply(struct ab_config *cfg, const char *path, bool must_exist, struct ab_error *err)
{
	int r = trusted_file(path, err);
	if (r == -ENOENT && !must_exist)
		return 0;
	if (r == -ENOENT)
		return ab_error_plain(err, ENOENT, "AGENTBOX_CONFIG=%s: no such file", path);
	if (r < 0)
		return r;
	if ((r = ab_profile_load_file(cfg, path, err)) < 0)
		return r;
	if (cfg->n_defaults_files >= AB_ARRAY_SIZE(cfg->defaults_files))
		return 0;
	char *copy = strdup(path);
	if (!copy)
		return ab_error_set(err, ENOMEM, "%s", path);
	cfg->defaults_files[cfg->n_defaults_files++] = copy;
	return 0;
}

int ab_defaults_load(struct ab_config *cfg, struct ab_error *err)
{
	const char *env = getenv("AGENTBOX_CONFIG");
	if (env && strcmp(env, "none") == 0)
		return 0;
	if (env && *env)
		return apply(cfg, env, true, err);
	int r = apply(cfg, SYSTEM_DEFAULTS, false, err);
	char user[PATH_MAX];
	if (r == 0 && user_defaults_path(user, sizeof(user)))
		r = apply(cfg, user, false, err);
	return r;
}
