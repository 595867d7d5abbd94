/* Directories agentbox keeps state in: made with their parents, found the
 * XDG way. */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "util/util.h"

int ab_mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *s = strchr(buf + 1, '/');; s = strchr(s + 1, '/')) {
		if (s)
			*s = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		if (!s)
			return 0;
		*s = '/';
	}
}

int ab_state_dir(const char *name, char *buf, size_t n)
{
	const char *xdg = getenv("XDG_STATE_HOME");
	if (geteuid() == 0) {
		snprintf(buf, n, "/var/lib/agentbox/%s", name);
		return 0;
	}
	if (xdg && xdg[0] == '/') {
		snprintf(buf, n, "%s/agentbox/%s", xdg, name);
		return 0;
	}
	const char *home = getenv("HOME");
	struct passwd *pw = home && home[0] == '/' ? NULL : getpwuid(geteuid());
	if (pw)
		home = pw->pw_dir;
	if (!home || home[0] != '/')
		return -ENOENT;
	snprintf(buf, n, "%s/.local/state/agentbox/%s", home, name);
	return 0;
}
