/* The caller's git identity in the sandbox (gitid.h): user.name and
 * user.email read from the caller's global git configuration on the host,
 * written to the sandbox's $HOME/.gitconfig, so `git commit` works there.
 * Nothing else of the caller's configuration (aliases, credential helpers,
 * includes, URLs with tokens) is read, let alone passed in. */
#include "sandbox/gitid.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define GITID_FILE_MAX	(256 * 1024) /* a larger global config is not read */
#define GITID_VALUE_MAX 256

struct gitid {
	char name[GITID_VALUE_MAX + 1], email[GITID_VALUE_MAX + 1];
};

/* One value after "key =": quotes, escapes and comments as git reads
 * them; false for what git would refuse or we would not pass on (a
 * continuation line, a control character, one too long). */
static bool parse_value(const char *p, char *out)
{
	size_t n = 0, kept = 0; /* kept: length up to the last char not to trim */
	bool quoted = false;
	for (; *p && *p != '\n'; p++) {
		char c = *p;
		if (!quoted && (c == '#' || c == ';'))
			break;
		if (c == '"') {
			quoted = !quoted;
			kept = n;
			continue;
		}
		if (c == '\\') {
			c = *++p;
			if (c != '"' && c != '\\')
				return false; /* a continuation line, \n, \t, \b */
		} else if (!quoted && isspace((unsigned char)c) && n == 0) {
			continue;
		}
		if ((unsigned char)c < 0x20 || c == 0x7f || n == GITID_VALUE_MAX)
			return false;
		out[n++] = c;
		if (quoted || !isspace((unsigned char)c))
			kept = n;
	}
	if (quoted)
		return false;
	out[kept] = '\0';
	return kept > 0;
}

/* A section header at p ('['): whether it is [user], and where the line
 * goes on after the ']' (git allows "[user] name = x"). */
static const char *parse_section(const char *p, bool *in_user)
{
	const char *end = strchr(p, ']');
	const char *nl = strchr(p, '\n');
	if (!end || (nl && nl < end)) {
		*in_user = false;
		return nl ? nl : p + strlen(p);
	}
	*in_user = end - p - 1 == 4 && strncasecmp(p + 1, "user", 4) == 0;
	return end + 1;
}

static void parse_config(const char *text, struct gitid *id)
{
	bool in_user = false;
	const char *p = text;
	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '[')
			p = parse_section(p, &in_user);
		while (*p == ' ' || *p == '\t')
			p++;
		const char *key = p;
		while (isalnum((unsigned char)*p) || *p == '-')
			p++;
		size_t klen = (size_t)(p - key);
		while (*p == ' ' || *p == '\t')
			p++;
		if (in_user && klen > 0 && *p == '=') {
			char *dst = klen == 4 && strncasecmp(key, "name", 4) == 0    ? id->name
				    : klen == 5 && strncasecmp(key, "email", 5) == 0 ? id->email
										     : NULL;
			char v[GITID_VALUE_MAX + 1];
			if (dst && parse_value(p + 1, v))
				memcpy(dst, v, strlen(v) + 1); /* the last one wins, as in git */
		}
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
}

/* A regular file of the caller's, read whole (followed if a link: dotfile
 * managers link them); NULL when absent or not what we expect. */
static char *read_config(const char *path)
{
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > GITID_FILE_MAX)
		return NULL;
	char *buf = malloc((size_t)st.st_size + 1);
	size_t n = 0;
	while (buf && n < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	if (buf)
		buf[n] = '\0';
	return buf;
}

static void quote_into(FILE *f, const char *key, const char *v)
{
	fprintf(f, "\t%s = \"", key);
	for (; *v; v++)
		fprintf(f, *v == '"' || *v == '\\' ? "\\%c" : "%c", *v);
	fputs("\"\n", f);
}

char *gitid_read(void)
{
	const char *home = getenv("HOME");
	struct passwd *pw = home && *home == '/' ? NULL : getpwuid(getuid());
	if (!home || *home != '/')
		home = pw ? pw->pw_dir : NULL;
	const char *xdg = getenv("XDG_CONFIG_HOME");
	char paths[2][4096];
	int n = 0;
	/* git reads the XDG file first, then ~/.gitconfig, which wins */
	if (xdg && *xdg == '/')
		snprintf(paths[n++], sizeof(paths[0]), "%s/git/config", xdg);
	else if (home)
		snprintf(paths[n++], sizeof(paths[0]), "%s/.config/git/config", home);
	if (home)
		snprintf(paths[n++], sizeof(paths[0]), "%s/.gitconfig", home);
	struct gitid id;
	memset(&id, 0, sizeof(id));
	for (int i = 0; i < n; i++) {
		cleanup_free char *text = read_config(paths[i]);
		if (text)
			parse_config(text, &id);
	}
	if (!id.name[0] && !id.email[0])
		return NULL;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	fputs("# The caller's git identity, from the host (agentbox: docs/workspace.md)\n[user]\n",
	      f);
	if (id.name[0])
		quote_into(f, "name", id.name);
	if (id.email[0])
		quote_into(f, "email", id.email);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

int gitid_write(const char *home, const char *text, struct ab_error *err)
{
	if (!text)
		return 0;
	cleanup_fd int dir = open(home, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return ab_error_set(err, errno, "cannot open %s in the sandbox", home);
	cleanup_fd int fd = openat(dir, ".gitconfig",
				   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) /* a --home that has one already keeps it */
		return errno == EEXIST
			       ? 0
			       : ab_error_set(err, errno, "cannot write %s/.gitconfig", home);
	size_t len = strlen(text);
	if (write(fd, text, len) != (ssize_t)len)
		return ab_error_set(err, errno ? errno : EIO, "cannot write %s/.gitconfig", home);
	return 0;
}
