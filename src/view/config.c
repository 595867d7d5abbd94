/* A configuration's life: its defaults (ab_config_init), the checks of a
 * parsed one against the host (the workspace and skills directories, and
 * the identity the sandbox runs as), run in the launcher before anything
 * is created, and ab_config_free. */
#include "view/config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/cache.h"
#include "util/error.h"
#include "view/image.h"
#include "view/idmap.h"
#include "util/parse.h"
#include "util/util.h"

#define DEFAULT_TIMEOUT_MS     (120 * 1000ULL)
#define DEFAULT_KILL_AFTER_MS  (2 * 1000ULL)
#define DEFAULT_MAX_TIMEOUT_MS (10 * 60 * 1000ULL)
#define DEFAULT_TMPFS_SIZE     (256ULL << 20)
#define DEFAULT_MAX_OUTPUT     (1ULL << 20)
#define DEFAULT_PIDS	       512

void ab_config_init(struct ab_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->net = AB_NET_NONE;
	cfg->env_policy = AB_ENV_CORE;
	cfg->timeout_ms = DEFAULT_TIMEOUT_MS;
	cfg->kill_after_ms = DEFAULT_KILL_AFTER_MS;
	cfg->max_timeout_ms = DEFAULT_MAX_TIMEOUT_MS;
	cfg->tmpfs_size = DEFAULT_TMPFS_SIZE;
	cfg->max_output = DEFAULT_MAX_OUTPUT;
	cfg->pids = DEFAULT_PIDS;
	cfg->max_concurrent = 8;
	/* no core dumps, and a sane number of open files */
	cfg->rlimits[0] = (struct ab_rlimit){RLIMIT_CORE, 0, false};
	cfg->rlimits[1] = (struct ab_rlimit){RLIMIT_NOFILE, 8192, false};
	cfg->n_rlimits = 2;
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
	free(cfg->rootfs);
	free(cfg->image);
	image_use_free(cfg->image_use);
	free(cfg->keep_changes);
	free(cfg->cwd);
	free(cfg->hostname);
	free(cfg->home);
	free(cfg->seccomp);
	free(cfg->report);
	free(cfg->audit_log);
	free(cfg->cgroup_parent);
	for (size_t i = 0; i < cfg->n_mounts; i++) {
		free(cfg->mounts[i].src);
		free(cfg->mounts[i].dst);
	}
	free(cfg->mounts);
	strv_free(cfg->pass_env, cfg->n_pass_env);
	strv_free(cfg->set_env, cfg->n_set_env);
	strv_free(cfg->protect, cfg->n_protect);
	strv_free(cfg->unprotect, cfg->n_unprotect);
	strv_free(cfg->net_rules, cfg->n_net_rules);
	strv_free(cfg->argv, cfg->argc);
	for (size_t i = 0; i < cfg->n_defaults_files; i++)
		free(cfg->defaults_files[i]);
	ab_config_init(cfg);
}

/* Make a host path for a mount source absolute and canonical, race-free.
 * Unless follow is set, its last component must not be a symbolic link: a
 * link planted where the caller expects a directory (by an earlier command,
 * in a directory the sandbox could write) would redirect the view. The
 * object opened first must be the one the canonical path names, so a link
 * swapped in between the two is refused instead of followed. */
int ab_resolve_mount_source(const char *opt, const char *given, bool follow, bool dir_only,
			    char **out, struct ab_error *err)
{
	/* "link/" would make the open follow the link: drop trailing slashes */
	char path[PATH_MAX];
	size_t n = strlen(given);
	if (n >= sizeof(path))
		return ab_error_plain(err, ENAMETOOLONG, "%s: path too long", opt);
	memcpy(path, given, n + 1);
	while (n > 1 && path[n - 1] == '/')
		path[--n] = '\0';
	cleanup_fd int fd = open(path, O_PATH | (follow ? 0 : O_NOFOLLOW) | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return ab_error_set(err, errno, "%s: cannot use '%s'", opt, path);
	if (S_ISLNK(st.st_mode))
		return ab_error_plain(err, ELOOP, "%s: '%s' is a symbolic link; name the %s itself",
				      opt, path, dir_only ? "directory" : "file or directory");
	if (dir_only && !S_ISDIR(st.st_mode))
		return ab_error_plain(err, ENOTDIR, "%s: '%s' is not a directory", opt, path);
	cleanup_free char *real = realpath(path, NULL);
	if (!real)
		return ab_error_set(err, errno, "%s: cannot resolve '%s'", opt, path);
	struct stat now;
	if (stat(real, &now) < 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino)
		return ab_error_plain(err, ESTALE,
				      "%s: '%s' was replaced while agentbox was resolving it", opt,
				      path);
	*out = ab_steal_pointer(&real);
	return 0;
}

/* The host gid for host uid, when no --host-gid names one: the group of
 * the directory the sandbox user owns, else the account's, else the uid. */
static gid_t default_host_gid(uid_t host_uid, gid_t dir_gid)
{
	if (dir_gid != 0)
		return dir_gid;
	struct passwd *pw = getpwuid(host_uid);
	return pw && pw->pw_gid != 0 ? pw->pw_gid : (gid_t)host_uid;
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
	} else if (!cfg->host_uid_set) {
		/* the sources are idmapped to this user (idmap.h) */
		cfg->host_uid = AB_SANDBOX_HOST_ID;
		if (!cfg->host_gid_set)
			cfg->host_gid = AB_SANDBOX_HOST_ID;
	} else {
		if (cfg->host_uid == 0)
			return ab_error_plain(err, EPERM,
					      "--host-uid 0: agentbox never maps host root into "
					      "a sandbox");
		if (!cfg->host_gid_set)
			cfg->host_gid = default_host_gid(cfg->host_uid, 0);
	}
	if (euid == 0 && cfg->host_gid == 0)
		return ab_error_plain(err, EPERM,
				      "--host-gid 0: agentbox never maps the host's root "
				      "group into a sandbox");
	if (!cfg->uid_set)
		cfg->uid = euid != 0 ? euid : cfg->host_uid;
	if (!cfg->gid_set)
		cfg->gid = euid != 0 ? egid : cfg->host_gid;
	return 0;
}

bool ab_config_idmaps(const struct ab_config *cfg)
{
	return geteuid() == 0 && !cfg->host_uid_set;
}

int ab_config_run_as_owner(struct ab_config *cfg, struct ab_error *err)
{
	struct stat st;
	if (stat(cfg->workspace, &st) < 0)
		return ab_error_set(err, errno, "cannot stat the workspace '%s'", cfg->workspace);
	if (st.st_uid == 0)
		return ab_error_plain(err, EPERM, "the workspace '%s' is owned by root",
				      cfg->workspace);
	cfg->host_uid = st.st_uid;
	cfg->host_uid_set = true;
	if (!cfg->host_gid_set || cfg->host_gid == AB_SANDBOX_HOST_ID)
		cfg->host_gid = default_host_gid(st.st_uid, st.st_gid);
	if (!cfg->uid_set)
		cfg->uid = cfg->host_uid;
	if (!cfg->gid_set)
		cfg->gid = cfg->host_gid;
	return 0;
}

/* Whether ws (a real path, stat ws_st, NULL if unknown) is the real path
 * of the top-level directory /name, of type type (a dirent's). /name is
 * its own real path unless it is a symlink ("/" resolves to itself), so
 * only a symlink (or a type not known) is resolved, and only where a stat
 * finds ws's inode behind it: a path is a directory's real path only if
 * it is that directory. */
static bool is_system_dir(const char *ws, const struct stat *ws_st, const char *name,
			  unsigned char type)
{
	char path[PATH_MAX], real[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof(path), "/%s", name);
	if (strcmp(ws, path) == 0)
		return true;
	if (type != DT_LNK && type != DT_UNKNOWN)
		return false;
	if (ws_st &&
	    (stat(path, &st) < 0 || st.st_dev != ws_st->st_dev || st.st_ino != ws_st->st_ino))
		return false;
	return realpath(path, real) && strcmp(ws, real) == 0;
}

/* Where a workspace would hand the command much of the host: /, a
 * top-level system directory, or the caller's home or one of its
 * ancestors (its keys, tokens and shell start-up files, read-write).
 * Returns what it is, or NULL. */
static const char *broad_workspace(const char *ws)
{
	static const char *const system_dirs[] = {
		"bin",	 "boot",   "dev",   "etc", "home", "lib",  "lib32",
		"lib64", "libx32", "media", "mnt", "opt",  "proc", "root",
		"run",	 "sbin",   "srv",   "sys", "usr",  "var",  NULL,
	};
	if (strcmp(ws, "/") == 0)
		return "the host's root directory";
	struct stat ws_st;
	const struct stat *st = stat(ws, &ws_st) == 0 ? &ws_st : NULL;
	/* the root's entries with their types: those that are no symlink
	 * are told by their name alone */
	DIR *root = opendir("/");
	bool found = false;
	for (struct dirent *de; root && !found && (de = readdir(root));)
		for (const char *const *d = system_dirs; *d && !found; d++)
			found = strcmp(de->d_name, *d) == 0 &&
				is_system_dir(ws, st, *d, de->d_type);
	for (const char *const *d = system_dirs; !root && *d && !found; d++)
		found = is_system_dir(ws, st, *d, DT_UNKNOWN);
	if (root)
		closedir(root);
	if (found)
		return "a top-level system directory";
	char account_home[PATH_MAX];
	const char *homes[] = {getenv("HOME"),
			       ab_account_home(getuid(), account_home, sizeof(account_home))
				       ? account_home
				       : NULL};
	for (size_t i = 0; i < AB_ARRAY_SIZE(homes); i++) {
		char real[PATH_MAX];
		/* the account's home is mostly $HOME: the same path is the
		 * same real path */
		if (!homes[i] || !*homes[i] ||
		    (i > 0 && homes[0] && strcmp(homes[0], homes[i]) == 0) ||
		    !realpath(homes[i], real))
			continue;
		size_t n = strlen(ws);
		if (strcmp(ws, real) == 0)
			return "your home directory";
		if (strncmp(real, ws, n) == 0 && real[n] == '/')
			return "an ancestor of your home directory";
	}
	return NULL;
}

static int check_workspace_scope(const struct ab_config *cfg, const char *ws, bool named,
				 struct ab_error *err)
{
	const char *what = broad_workspace(ws);
	if (!what || (named && cfg->allow_broad_workspace))
		return 0;
	if (named)
		return ab_error_plain(err, EPERM,
				      "--workspace %s is %s: the command could read and write "
				      "all of it; name a project directory, or add "
				      "--allow-broad-workspace if you mean it",
				      ws, what);
	return ab_error_plain(err, EPERM,
			      "the workspace would be the current directory, %s, which is %s: "
			      "the command could read and write all of it; cd into a project "
			      "directory or pass --workspace DIR",
			      ws, what);
}

/* An option's directory (*path, when given) as its real path, in place. */
static int resolve_dir_option(const char *opt, char **path, struct ab_error *err)
{
	char *real;
	if (!*path)
		return 0;
	if (ab_resolve_mount_source(opt, *path, false, true, &real, err) < 0)
		return -err->code;
	free(*path);
	*path = real;
	return 0;
}

int ab_config_finish(struct ab_config *cfg, struct ab_error *err)
{
	char *ws;
	if (cfg->workspace) {
		if (ab_resolve_mount_source("--workspace", cfg->workspace, false, true, &ws, err) <
		    0)
			return -err->code;
	} else {
		char buf[PATH_MAX];
		if (!getcwd(buf, sizeof(buf)))
			return ab_error_set(err, errno,
					    "cannot find the current directory to use as the "
					    "workspace (pass --workspace DIR)");
		if (ab_resolve_mount_source("the workspace (current directory)", buf, false, true,
					    &ws, err) < 0)
			return -err->code;
	}
	if (check_workspace_scope(cfg, ws, cfg->workspace != NULL, err) < 0) {
		free(ws);
		return -err->code;
	}
	free(cfg->workspace);
	cfg->workspace = ws;

	if (resolve_dir_option("--skills", &cfg->skills, err) < 0 ||
	    resolve_dir_option("--rootfs", &cfg->rootfs, err) < 0)
		return -err->code;
	if (cfg->rootfs && strcmp(cfg->rootfs, "/") == 0)
		return ab_error_plain(err, EINVAL,
				      "--rootfs /: that is the host's own root, with every "
				      "user's files; leave --rootfs out for the host's system "
				      "directories, or name a root tree");
	if (cfg->image && cfg->rootfs)
		return ab_error_plain(err, EINVAL,
				      "--image and --rootfs both name the view's system; give one");
	/* the layers unpacked (once) and locked; the config's Env, WorkingDir
	 * and User where options did not set them */
	if (cfg->image && !cfg->image_use) {
		int r = image_use_open(cfg->image, &cfg->image_use, err);
		if (r == 0)
			r = image_apply_config(cfg, err);
		if (r < 0)
			return r;
	}
	if (!cfg->cwd && !(cfg->cwd = strdup("/workspace")))
		return ab_error_set(err, ENOMEM, "configuring the sandbox");
	return resolve_identity(cfg, err);
}
