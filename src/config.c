/* Checks of a parsed configuration against the host: the workspace and
 * skills directories, and the identity the sandbox runs as. Runs in the
 * launcher before anything is created. */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "util.h"

/* Make a host directory path absolute and canonical. The last component
 * must not be a symbolic link when no_symlink is set: a link planted where
 * the caller expects a directory would redirect the sandbox's writes. */
static int resolve_host_dir(const char *opt, const char *given, bool no_symlink, char **out,
			    struct ab_error *err)
{
	/* "link/" would make lstat follow the link: drop trailing slashes */
	char path[PATH_MAX];
	size_t n = strlen(given);
	if (n >= sizeof(path))
		return ab_error_plain(err, ENAMETOOLONG, "%s: path too long", opt);
	memcpy(path, given, n + 1);
	while (n > 1 && path[n - 1] == '/')
		path[--n] = '\0';
	struct stat st;
	if (lstat(path, &st) < 0)
		return ab_error_set(err, errno, "%s: cannot use '%s'", opt, path);
	if (S_ISLNK(st.st_mode)) {
		if (no_symlink)
			return ab_error_plain(err, ELOOP,
					      "%s: '%s' is a symbolic link; name the directory "
					      "itself",
					      opt, path);
		if (stat(path, &st) < 0)
			return ab_error_set(err, errno, "%s: cannot use '%s'", opt, path);
	}
	if (!S_ISDIR(st.st_mode))
		return ab_error_plain(err, ENOTDIR, "%s: '%s' is not a directory", opt, path);
	char *real = realpath(path, NULL);
	if (!real)
		return ab_error_set(err, errno, "%s: cannot resolve '%s'", opt, path);
	*out = real;
	return 0;
}

static int resolve_identity(struct ab_config *cfg, struct ab_error *err)
{
	uid_t euid = geteuid();
	gid_t egid = getegid();

	if (euid != 0) {
		/* an unprivileged user can map only itself */
		if (cfg->host_uid_set && cfg->host_uid != euid)
			return ab_error_plain(err, EPERM,
					      "--host-uid %u needs root (agentbox runs as uid %u)",
					      (unsigned)cfg->host_uid, (unsigned)euid);
		if (cfg->host_gid_set && cfg->host_gid != egid)
			return ab_error_plain(err, EPERM,
					      "--host-gid %u needs root (agentbox runs as gid %u)",
					      (unsigned)cfg->host_gid, (unsigned)egid);
		cfg->host_uid = euid;
		cfg->host_gid = egid;
	} else {
		struct stat st;
		if (stat(cfg->workspace, &st) < 0)
			return ab_error_set(err, errno, "cannot stat the workspace '%s'",
					    cfg->workspace);
		if (!cfg->host_uid_set) {
			if (st.st_uid == 0)
				return ab_error_plain(
					err, EPERM,
					"agentbox never maps host root into a sandbox, and the "
					"workspace '%s' is owned by root: pass --host-uid N, an "
					"unprivileged host uid for the sandbox user",
					cfg->workspace);
			cfg->host_uid = st.st_uid;
		}
		if (cfg->host_uid == 0)
			return ab_error_plain(err, EPERM,
					      "--host-uid 0: agentbox never maps host root into "
					      "a sandbox");
		if (!cfg->host_gid_set) {
			struct passwd *pw = getpwuid(cfg->host_uid);
			if (!cfg->host_uid_set && st.st_gid != 0)
				cfg->host_gid = st.st_gid;
			else if (pw && pw->pw_gid != 0)
				cfg->host_gid = pw->pw_gid;
			else
				cfg->host_gid = cfg->host_uid;
		}
		if (cfg->host_gid == 0)
			return ab_error_plain(err, EPERM,
					      "--host-gid 0: agentbox never maps the host's root "
					      "group into a sandbox");
	}
	if (!cfg->uid_set)
		cfg->uid = euid != 0 ? euid : cfg->host_uid;
	if (!cfg->gid_set)
		cfg->gid = euid != 0 ? egid : cfg->host_gid;
	return 0;
}

int ab_config_finish(struct ab_config *cfg, struct ab_error *err)
{
	char *ws;
	if (cfg->workspace) {
		if (resolve_host_dir("--workspace", cfg->workspace, true, &ws, err) < 0)
			return -err->code;
	} else {
		char buf[PATH_MAX];
		if (!getcwd(buf, sizeof(buf)))
			return ab_error_set(err, errno,
					    "cannot find the current directory to use as the "
					    "workspace (pass --workspace DIR)");
		if (resolve_host_dir("the workspace (current directory)", buf, true, &ws, err) < 0)
			return -err->code;
	}
	free(cfg->workspace);
	cfg->workspace = ws;

	if (cfg->skills) {
		char *sk;
		if (resolve_host_dir("--skills", cfg->skills, false, &sk, err) < 0)
			return -err->code;
		free(cfg->skills);
		cfg->skills = sk;
	}
	if (!cfg->cwd && !(cfg->cwd = strdup("/workspace")))
		return ab_error_set(err, ENOMEM, "configuring the sandbox");
	return resolve_identity(cfg, err);
}
