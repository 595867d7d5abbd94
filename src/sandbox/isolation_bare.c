/* A sandbox without namespaces (isolation.h, AB_MISSING_NAMESPACES with
 * --isolation best; docs/containers.md, "Without user namespaces").
 *
 * Where no user namespace can be made (Docker's default seccomp profile),
 * the init is a plain child of the launcher: no view, no pid, network,
 * ipc or uts namespace. What remains is per process and needs no
 * privilege: Landlock (read-only everywhere, writable only in the
 * workspace and a private temporary directory; with ABI 6 no signal and
 * no abstract socket out of the sandbox; with ABI 4 no TCP under --net
 * none), the seccomp policy, no_new_privs, no capabilities, rlimits, the
 * env policy, timeouts, and the whole tree killed by the init, a child
 * subreaper, since no pid namespace does it. The command sees the host's
 * paths: the workspace is where it is on the host, not at /workspace. */
#include "sandbox/isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"
#include "sandbox/init.h"
#include "confine/confine.h"
#include "confine/landlock_compat.h"
#include "util/proc.h"
#include "util/util.h"

#define FS_READ                                                                                    \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_FILE                                                                                    \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                              \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE)

static char bare_tmp[64]; /* the private temporary directory, "" when none */

static int bare_rule(int ruleset, const char *path, uint64_t access, uint64_t handled,
		     struct ab_error *err)
{
	cleanup_fd int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0
				       : ab_error_set(err, errno, "landlock: cannot open %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return ab_error_set(err, errno, "landlock: cannot stat %s", path);
	if (!S_ISDIR(st.st_mode))
		access &= FS_FILE;
	struct landlock_path_beneath_attr attr = {.allowed_access = access & handled,
						  .parent_fd = fd};
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) < 0)
		return ab_error_set(err, errno, "landlock: cannot add a rule for %s", path);
	return 0;
}

/* Read-only everywhere; the workspace, the private tmp and the harmless
 * devices writable. Without Landlock there is no sandbox to speak of. */
static int bare_landlock(const struct ab_config *cfg, int *out, int *abi_out, struct ab_error *err)
{
	int abi;
	uint64_t handled;
	cleanup_fd int ruleset = -1;
	int r = confine_landlock_ruleset(CONFINE_LL_SCOPE |
						 (cfg->net == AB_NET_NONE ? CONFINE_LL_NET : 0),
					 &ruleset, &abi, &handled, err);
	if (r < 0)
		return r;
	if (abi < 1)
		return ab_error_plain(err, EOPNOTSUPP,
				      "--isolation best without namespaces needs Landlock, which "
				      "this kernel does not have");
	static const char *const devs[] = {"/dev/null", "/dev/zero",   "/dev/full",
					   "/dev/tty",	"/dev/random", "/dev/urandom"};
	r = bare_rule(ruleset, "/", FS_READ, handled, err);
	if (r == 0)
		r = bare_rule(ruleset, cfg->workspace, handled, handled, err);
	if (r == 0 && bare_tmp[0])
		r = bare_rule(ruleset, bare_tmp, handled, handled, err);
	for (size_t i = 0; r == 0 && i < AB_ARRAY_SIZE(devs); i++)
		r = bare_rule(ruleset, devs[i], FS_READ | FS_FILE, handled, err);
	if (r < 0)
		return r;
	*out = ab_steal_fd(&ruleset);
	*abi_out = abi;
	return 0;
}

/* The environment with HOME and TMPDIR in the private tmp, PWD the cwd. */
static int bare_env(struct init_args *a, const char *cwd, struct ab_error *err)
{
	size_t n = 0;
	while (a->envp && a->envp[n])
		n++;
	char **env = calloc(n + 4, sizeof(*env));
	if (!env)
		return ab_error_set(err, ENOMEM, "the command's environment");
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(a->envp[i], "HOME=", 5) && strncmp(a->envp[i], "TMPDIR=", 7) &&
		    strncmp(a->envp[i], "PWD=", 4))
			env[k++] = a->envp[i];
	if (asprintf(&env[k++], "HOME=%s", bare_tmp) < 0 ||
	    asprintf(&env[k++], "TMPDIR=%s", bare_tmp) < 0 ||
	    asprintf(&env[k++], "PWD=%s", cwd) < 0)
		return ab_error_set(err, ENOMEM, "the command's environment");
	a->envp = env;
	return 0;
}

int ab_bare_confine(struct init_args *a, int *landlock_abi, struct ab_error *err)
{
	const struct ab_config *cfg = a->cfg;
	if (!a->one_command)
		return ab_error_plain(err, EOPNOTSUPP,
				      "--isolation best without namespaces runs one command "
				      "(agentbox run), not a session");
	/* a subreaper: what the command leaves is ours to kill */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		return ab_error_set(err, errno, "cannot become the command's subreaper");
	snprintf(bare_tmp, sizeof(bare_tmp), "/tmp/agentbox-tmp-XXXXXX");
	if (!mkdtemp(bare_tmp)) {
		int e = errno;
		bare_tmp[0] = '\0';
		return ab_error_set(err, e, "cannot make a private /tmp directory");
	}
	/* the view's /workspace is the host's workspace */
	char cwd[4096];
	const char *rest = strncmp(cfg->cwd, "/workspace", 10) == 0 ? cfg->cwd + 10 : NULL;
	if (rest && (*rest == '\0' || *rest == '/'))
		snprintf(cwd, sizeof(cwd), "%s%s", cfg->workspace, rest);
	else
		snprintf(cwd, sizeof(cwd), "%s", cfg->cwd);
	if (chdir(cwd) < 0)
		return ab_error_set(err, errno, "--cwd: cannot enter %s", cwd);
	int r = bare_env(a, cwd, err);
	if (r == 0)
		r = bare_landlock(cfg, &a->landlock_fd, landlock_abi, err);
	return r;
}

/* Every descendant of this process: those whose chain of parents reaches
 * it (as a subreaper, orphans are reparented here). Returns how many. */
static size_t kill_descendants(int sig)
{
	enum { MAX = 4096 };
	static pid_t pid[MAX], ppid[MAX];
	size_t n = 0, killed = 0;
	struct ab_procs it;
	if (ab_procs_open(&it) < 0)
		return 0;
	while (n < MAX && ab_procs_next(&it, &pid[n], &ppid[n]))
		n++;
	ab_procs_close(&it);
	pid_t self = getpid();
	for (size_t i = 0; i < n; i++) {
		pid_t p = ppid[i];
		for (size_t depth = 0; p > 1 && p != self && depth < n; depth++) {
			size_t j = 0;
			while (j < n && pid[j] != p)
				j++;
			p = j < n ? ppid[j] : 0;
		}
		if (p == self && kill(pid[i], sig) == 0)
			killed++;
	}
	return killed;
}

void ab_bare_spec(const struct ab_config *cfg, char ***envp, char **cwd)
{
	static char host_cwd[4096];
	static char *env[512];
	static char home[96], tmpdir[96], pwd[4200];
	const char *rest = strncmp(*cwd, "/workspace", 10) == 0 ? *cwd + 10 : NULL;
	if (rest && (*rest == '\0' || *rest == '/')) {
		snprintf(host_cwd, sizeof(host_cwd), "%s%s", cfg->workspace, rest);
		*cwd = host_cwd;
	}
	snprintf(home, sizeof(home), "HOME=%s", bare_tmp);
	snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s", bare_tmp);
	snprintf(pwd, sizeof(pwd), "PWD=%s", *cwd);
	size_t k = 0;
	for (char **e = *envp; e && *e && k < AB_ARRAY_SIZE(env) - 4; e++)
		if (strncmp(*e, "HOME=", 5) && strncmp(*e, "TMPDIR=", 7) && strncmp(*e, "PWD=", 4))
			env[k++] = *e;
	env[k++] = home;
	env[k++] = tmpdir;
	env[k++] = pwd;
	env[k] = NULL;
	*envp = env;
}

void ab_bare_kill_tree(int sig)
{
	kill_descendants(sig);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(path) < 0 && errno != ENOENT ? 0 : 0;
}

void ab_bare_finish(void)
{
	/* no pid namespace ends them: SIGKILL until none is left (a process
	 * forking as fast as we kill ends when its parent does) */
	for (int pass = 0; pass < 100 && kill_descendants(SIGKILL) > 0; pass++) {
		usleep(1000);
		/* orphans are ours: reaped, they are gone from /proc */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	if (bare_tmp[0])
		nftw(bare_tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
