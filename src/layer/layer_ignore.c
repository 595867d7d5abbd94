/* .gitignore matching for a layer's review (layer_ignore.h). The subset of
 * gitignore(5) it follows: blank lines and # comments, trailing spaces, a
 * leading ! (negation) and \ (escape), a trailing / (directories only), a
 * / at the start or in the middle (anchored to the file's directory, else
 * the name matches at any depth), *, ?, [...] and the ** forms. Only the
 * .gitignore files are read, not .git/info/exclude or core.excludesFile. */
#include "layer/layer_ignore.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "layer/protect.h"
#include "util/util.h"

/* steps one match may take: a hostile pattern (*a*a*a*...b) costs
 * exponential time without it; past it the pattern does not match */
#define WILD_BUDGET 100000

struct rule {
	char *pat;
	bool negate, dir_only, anchored;
};

struct dir_rules {
	char *dir; /* relative to the workspace, "" for its top */
	struct rule *r;
	size_t n;
};

struct layer_ignore {
	int upfd, wsfd;
	struct dir_rules *d;
	size_t n, cap;
	bool full; /* AB_IGNORE_MAX_DIRS read: no more */
};

static int wild(const char *start, const char *p, const char *s, long *budget);

/* "[...]" at p against the character c: 1 match, 0 not, -1 not a class */
static int wild_class(const char *p, char c, const char **end)
{
	const char *q = p + 1;
	if (*q == '!' || *q == '^')
		q++;
	if (*q == ']')
		q++;
	while (*q && *q != ']')
		q++;
	if (!*q || q - p > 256)
		return -1;
	char cls[260], str[2] = {c, 0};
	memcpy(cls, p, (size_t)(q - p + 1));
	cls[q - p + 1] = '\0';
	if (cls[1] == '^')
		cls[1] = '!';
	*end = q;
	return c != '/' && fnmatch(cls, str, 0) == 0;
}

static int wild_star(const char *start, const char *p, const char *s, long *budget)
{
	/* a "**" component: any number of directories */
	if (p[1] == '*' && (p == start || p[-1] == '/') && (p[2] == '/' || !p[2])) {
		if (!p[2])
			return 1;
		for (const char *t = s;;) {
			int r = wild(start, p + 3, t, budget);
			if (r != 0)
				return r;
			if (!(t = strchr(t, '/')))
				return 0;
			t++;
		}
	}
	while (p[1] == '*')
		p++;
	for (const char *t = s;; t++) {
		int r = wild(start, p + 1, t, budget);
		if (r != 0)
			return r;
		if (!*t || *t == '/')
			return 0;
	}
}

/* 1 match, 0 no match, -1 out of budget */
static int wild(const char *start, const char *p, const char *s, long *budget)
{
	for (; *p; p++) {
		if (--*budget < 0)
			return -1;
		const char *end;
		int r;
		switch (*p) {
		case '?':
			if (!*s || *s == '/')
				return 0;
			s++;
			break;
		case '*':
			return wild_star(start, p, s, budget);
		case '[':
			if (!*s)
				return 0;
			r = wild_class(p, *s, &end);
			if (r == 0)
				return 0;
			if (r == 1) {
				p = end;
				s++;
				break;
			}
			if (*s != '[') /* not a class: a literal [ */
				return 0;
			s++;
			break;
		case '\\':
			if (p[1])
				p++;
			/* fall through */
		default:
			if (*s != *p)
				return 0;
			s++;
		}
	}
	return !*s;
}

bool layer_ignore_wildmatch(const char *pattern, const char *path)
{
	long budget = WILD_BUDGET;
	return wild(pattern, pattern, path, &budget) == 1;
}

/* One line of a .gitignore as a rule; false for none. */
static bool parse_line(char *line, struct rule *out)
{
	size_t n = strlen(line);
	if (n && line[n - 1] == '\r')
		line[--n] = '\0';
	while (n && line[n - 1] == ' ' && !(n > 1 && line[n - 2] == '\\'))
		line[--n] = '\0';
	if (!n || line[0] == '#')
		return false;
	*out = (struct rule){0};
	if (line[0] == '!') {
		out->negate = true;
		line++;
		n--;
	} else if (line[0] == '\\' && (line[1] == '!' || line[1] == '#')) {
		line++;
		n--;
	}
	if (n && line[n - 1] == '/') {
		out->dir_only = true;
		line[--n] = '\0';
	}
	if (!n)
		return false;
	out->anchored = strchr(line, '/') != NULL;
	if (line[0] == '/')
		line++;
	return *line && (out->pat = strdup(line)) != NULL;
}

/* Read fd (a regular file, at most AB_IGNORE_MAX_FILE bytes) into rules. */
static void parse_file(int fd, struct dir_rules *d)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > AB_IGNORE_MAX_FILE)
		return;
	cleanup_free char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return;
	size_t len = 0;
	while (len < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + len, (size_t)st.st_size - len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	buf[len] = '\0';
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		struct rule r;
		if (!parse_line(line, &r))
			continue;
		struct rule *p = realloc(d->r, (d->n + 1) * sizeof(*p));
		if (!p) {
			free(r.pat);
			return;
		}
		d->r = p;
		d->r[d->n++] = r;
	}
}

static bool opaque(int fd)
{
	char path[64], val[2];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = getxattr(path, "user.overlay.opaque", val, sizeof(val));
	return n == 1 && val[0] == 'y';
}

/* dir's .gitignore as the merged view has it: the upper directory's (a
 * whiteout or anything but a regular file: none), else the host's unless
 * an opaque directory of the upper one hides it. */
static int open_gitignore(const struct layer_ignore *ig, const char *dir)
{
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "%s", dir);
	bool host_hidden = false;
	cleanup_fd int up = fcntl(ig->upfd, F_DUPFD_CLOEXEC, 3);
	for (char *c = rel, *next; up >= 0 && *c; c = next) {
		next = strchr(c, '/');
		if (next)
			*next++ = '\0';
		else
			next = c + strlen(c);
		int fd = openat(up, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd < 0 && fstatat(up, c, &st, AT_SYMLINK_NOFOLLOW) == 0)
			return -ENOENT; /* a whiteout or a file: no such directory in the view */
		close(up);
		up = fd;
		if (up >= 0 && opaque(up))
			host_hidden = true;
	}
	if (up >= 0) {
		struct stat st;
		if (fstatat(up, ".gitignore", &st, AT_SYMLINK_NOFOLLOW) == 0)
			return S_ISREG(st.st_mode)
				       ? openat(up, ".gitignore",
						O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
				       : -ENOENT;
	}
	if (host_hidden)
		return -ENOENT;
	cleanup_fd int host =
		*dir ? ab_open_beneath(ig->wsfd, dir) : fcntl(ig->wsfd, F_DUPFD_CLOEXEC, 3);
	if (host < 0)
		return -ENOENT;
	return openat(host, ".gitignore", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
}

/* dir's rules, read once; NULL when there are none to have. */
static const struct dir_rules *rules_of(struct layer_ignore *ig, const char *dir)
{
	for (size_t i = 0; i < ig->n; i++)
		if (strcmp(ig->d[i].dir, dir) == 0)
			return &ig->d[i];
	if (ig->full)
		return NULL;
	if (ig->n == ig->cap) {
		size_t cap = ig->cap ? ig->cap * 2 : 16;
		struct dir_rules *d = realloc(ig->d, cap * sizeof(*d));
		if (!d)
			return NULL;
		ig->d = d;
		ig->cap = cap;
	}
	struct dir_rules *d = &ig->d[ig->n];
	*d = (struct dir_rules){.dir = strdup(dir)};
	if (!d->dir)
		return NULL;
	ig->n++;
	ig->full = ig->n >= AB_IGNORE_MAX_DIRS;
	cleanup_fd int fd = open_gitignore(ig, dir);
	if (fd >= 0)
		parse_file(fd, d);
	return d;
}

/* The verdict on path (is_dir: a directory) of the files of its
 * directory and those above: 1 ignored, 0 re-included or no rule. */
static bool verdict(struct layer_ignore *ig, const char *path, bool is_dir)
{
	char dir[PATH_MAX];
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t dir_len = (size_t)(base - path);
	bool ignored = false;
	/* the top's file, then each directory's down to path's own (or to
	 * AB_IGNORE_MAX_DEPTH) */
	unsigned depth = 0;
	for (size_t k = 0; k <= dir_len; k++) {
		if (k && path[k - 1] != '/')
			continue;
		if (depth++ > AB_IGNORE_MAX_DEPTH)
			break;
		memcpy(dir, path, k ? k - 1 : 0);
		dir[k ? k - 1 : 0] = '\0';
		const struct dir_rules *d = rules_of(ig, dir);
		for (size_t i = 0; d && i < d->n; i++) {
			const struct rule *r = &d->r[i];
			if (r->dir_only && !is_dir)
				continue;
			if (layer_ignore_wildmatch(r->pat, r->anchored ? path + k : base))
				ignored = !r->negate;
		}
	}
	return ignored;
}

bool layer_ignored(struct layer_ignore *ig, const char *rel, bool is_dir)
{
	if (!ig || strlen(rel) >= PATH_MAX)
		return false;
	/* each directory on the way first: nothing beneath an ignored
	 * directory is re-included */
	char prefix[PATH_MAX];
	unsigned depth = 0;
	for (const char *s = strchr(rel, '/'); s && depth++ < AB_IGNORE_MAX_DEPTH;
	     s = strchr(s + 1, '/')) {
		memcpy(prefix, rel, (size_t)(s - rel));
		prefix[s - rel] = '\0';
		if (verdict(ig, prefix, true))
			return true;
	}
	return verdict(ig, rel, is_dir);
}

struct layer_ignore *layer_ignore_new(int upfd, int wsfd)
{
	struct layer_ignore *ig = calloc(1, sizeof(*ig));
	if (ig) {
		ig->upfd = upfd;
		ig->wsfd = wsfd;
	}
	return ig;
}

void layer_ignore_free(struct layer_ignore *ig)
{
	if (!ig)
		return;
	for (size_t i = 0; i < ig->n; i++) {
		for (size_t k = 0; k < ig->d[i].n; k++)
			free(ig->d[i].r[k].pat);
		free(ig->d[i].r);
		free(ig->d[i].dir);
	}
	free(ig->d);
	free(ig);
}
