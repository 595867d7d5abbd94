/* Directories agentbox keeps state in: made with their parents, found the
 * XDG way; a user's home in the account database. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Whether /etc/nsswitch.conf has glibc ask /etc/passwd first and take its
 * entry: one "passwd:" line whose first source is "files" with no
 * [STATUS=action] after it (SUCCESS=return is the default). Anything else
 * (no such line, two, compat, another source first, a file too long to
 * read whole) is false. */
static bool nss_passwd_files_first(void)
{
	char buf[16384];
	cleanup_fd int fd = open("/etc/nsswitch.conf", O_RDONLY | O_CLOEXEC);
	ssize_t len = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (len <= 0 || len == (ssize_t)sizeof(buf) - 1)
		return false;
	buf[len] = '\0';
	int lines = 0;
	bool first = false;
	for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		while (isspace((unsigned char)*l))
			l++;
		if (strncmp(l, "passwd", 6) != 0)
			continue;
		char *p = l + 6;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != ':')
			continue;
		lines++;
		for (p++; *p == ' ' || *p == '\t'; p++)
			;
		first = strncmp(p, "files", 5) == 0 && (!p[5] || isspace((unsigned char)p[5]));
		for (p += first ? 5 : 0; first && (*p == ' ' || *p == '\t'); p++)
			;
		first = first && *p != '[';
	}
	return lines == 1 && first;
}

/* Where nsswitch.conf says to read /etc/passwd first, an entry found there
 * is the one getpwuid(3) returns (nscd, where it runs, serves a cached
 * copy of the same lookup); read directly, it spares the NSS set-up (two
 * tries of nscd's socket, the parse of every database's line), ~50 µs of
 * a start. The file is read whole and parsed from memory by the files
 * source's own parser (fgetpwent, which on a file would lseek twice a
 * line). Elsewhere, for a file over 1 MiB, and for a uid it lacks:
 * getpwuid(3). */
bool ab_account_home(uid_t uid, char *buf, size_t n)
{
	cleanup_free char *text = NULL;
	ssize_t len = -1;
	struct stat st;
	cleanup_fd int fd =
		nss_passwd_files_first() ? open("/etc/passwd", O_RDONLY | O_CLOEXEC) : -1;
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size <= (1 << 20) &&
	    (text = malloc((size_t)st.st_size + 1)))
		len = read(fd, text, (size_t)st.st_size + 1);
	/* read whole: a file that grew meanwhile is left to getpwuid */
	FILE *f = len > 0 && len <= st.st_size ? fmemopen(text, (size_t)len, "r") : NULL;
	const struct passwd *pw;
	bool found = false;
	/* as glibc's files source: the first entry of uid not named +/- */
	while (f && !found && (pw = fgetpwent(f)))
		found = pw->pw_uid == uid && pw->pw_name[0] != '+' && pw->pw_name[0] != '-';
	if (found)
		found = pw->pw_dir && (size_t)snprintf(buf, n, "%s", pw->pw_dir) < n;
	if (f)
		fclose(f);
	if (found)
		return true;
	pw = getpwuid(uid);
	return pw && pw->pw_dir && (size_t)snprintf(buf, n, "%s", pw->pw_dir) < n;
}
