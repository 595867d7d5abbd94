/* File operations, the sandbox's half (fileop_inside.h): ls, glob, grep
 * and delete, which list, walk or remove directory trees. */
#include "files/fileop.h"
#include "files/fileop_inside.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define GREP_TEXT_MAX  2000
#define GREP_MAX_COUNT 100000

/* ---- inside: directories ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in a directory, sorted, without . and ..; NULL and errno on
 * failure. *n set; at most max (then *more). */
static char **dir_names(int dfd, size_t max, size_t *n, bool *more)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return NULL;
	}
	size_t cap = 16;
	char **v = malloc(cap * sizeof(char *));
	*n = 0;
	*more = false;
	struct dirent *de;
	errno = 0;
	while (v && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (*n == max) {
			*more = true;
			break;
		}
		if (*n == cap) {
			char **w = realloc(v, (cap *= 2) * sizeof(char *));
			if (!w)
				break;
			v = w;
		}
		if (!(v[*n] = strdup(de->d_name)))
			break;
		(*n)++;
	}
	closedir(d);
	if (v)
		qsort(v, *n, sizeof(char *), cmp_str);
	return v;
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static char *join(const char *dir, const char *name)
{
	char *p;
	if (asprintf(&p, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name) < 0)
		return NULL;
	return p;
}

int fo_ls(json_object *q)
{
	const char *path = fo_jstr(q, "path", NULL);
	int dfd = fo_open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK, 0);
	if (dfd < 0)
		return fo_fail_errno(errno, path, "cannot list");
	size_t n;
	bool more;
	char **names = dir_names(dfd, FILEOP_LIST_MAX, &n, &more);
	if (!names)
		return fo_fail_errno(errno ? errno : ENOMEM, path, "cannot list");
	json_object *entries = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		cleanup_free char *full = join(path, names[i]);
		json_object *e = full ? fo_file_info(full) : NULL;
		if (e)
			json_object_array_add(entries, e);
	}
	free_names(names, n);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "entries", entries);
	json_object_object_add(o, "truncated", json_object_new_boolean(more));
	return fo_result(o);
}

/* A walk of the tree under a directory, in path order, not following
 * symlinks to directories, at most FILEOP_WALK_MAX entries. */
struct walk {
	size_t seen;
	bool truncated, stop;
	/* called for every entry; rel is the path below the walk's root */
	void (*visit)(struct walk *w, const char *full, const char *rel, const struct stat *lst);
	/* whether to go into the directory rel (at depth, 1 for the root's children) */
	bool (*descend)(struct walk *w, const char *rel, int depth);
};

static void walk_dir(struct walk *w, const char *dir, const char *rel, int depth)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (dfd < 0)
		return;
	size_t n;
	bool more;
	char **names = dir_names(dfd, FILEOP_WALK_MAX, &n, &more);
	if (!names)
		return;
	for (size_t i = 0; i < n && !w->stop; i++) {
		if (++w->seen > FILEOP_WALK_MAX) {
			w->truncated = w->stop = true;
			break;
		}
		cleanup_free char *full = join(dir, names[i]);
		cleanup_free char *r = rel[0] ? join(rel, names[i]) : strdup(names[i]);
		struct stat lst;
		if (!full || !r || lstat(full, &lst) < 0)
			continue;
		w->visit(w, full, r, &lst);
		if (S_ISDIR(lst.st_mode) && depth < MAX_DEPTH && !w->stop &&
		    (!w->descend || w->descend(w, r, depth)))
			walk_dir(w, full, r, depth + 1);
	}
	free_names(names, n);
}

/* Whether the path components of path match those of pat: fnmatch for
 * each, "**" for any number of them. */
static bool match_parts(char **pat, size_t np, char **path, size_t nn)
{
	if (np == 0)
		return nn == 0;
	if (strcmp(pat[0], "**") == 0) {
		for (size_t k = 0; k <= nn; k++)
			if (match_parts(pat + 1, np - 1, path + k, nn - k))
				return true;
		return false;
	}
	return nn > 0 && fnmatch(pat[0], path[0], 0) == 0 &&
	       match_parts(pat + 1, np - 1, path + 1, nn - 1);
}

/* Split s at '/' into parts (at most max), in buf. */
static size_t split(const char *s, char *buf, size_t size, char **parts, size_t max)
{
	snprintf(buf, size, "%s", s);
	size_t n = 0;
	for (char *save, *t = strtok_r(buf, "/", &save); t && n < max;
	     t = strtok_r(NULL, "/", &save))
		if (strcmp(t, "."))
			parts[n++] = t;
	return n;
}

#define MAX_PARTS 128

static bool glob_match(const char *pattern, const char *rel)
{
	char pb[PATH_MAX], rb[PATH_MAX];
	char *pp[MAX_PARTS], *rp[MAX_PARTS];
	size_t np = split(pattern, pb, sizeof(pb), pp, MAX_PARTS);
	size_t nr = split(rel, rb, sizeof(rb), rp, MAX_PARTS);
	return match_parts(pp, np, rp, nr);
}

struct glob_walk {
	struct walk w;
	const char *pattern;
	size_t parts;
	bool deep;	 /* the pattern has "**" */
	bool files_only; /* regular files (or symlinks to them) only */
	struct match {
		char *path;
		json_object *info;
		struct timespec mtime;
	} * m;
	size_t n, cap;
};

static void glob_visit(struct walk *w, const char *full, const char *rel, const struct stat *lst)
{
	struct glob_walk *g = (struct glob_walk *)w;
	if (!glob_match(g->pattern, rel))
		return;
	struct stat st;
	if (stat(full, &st) < 0)
		st = *lst;
	if (g->files_only && !S_ISREG(st.st_mode))
		return;
	if (g->n == FILEOP_LIST_MAX) {
		w->truncated = w->stop = true;
		return;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;
		struct match *m = realloc(g->m, cap * sizeof(*m));
		if (!m) {
			w->stop = true;
			return;
		}
		g->m = m;
		g->cap = cap;
	}
	json_object *info = fo_file_info(full);
	char *p = strdup(full);
	if (!info || !p) {
		json_object_put(info);
		free(p);
		return;
	}
	g->m[g->n++] = (struct match){.path = p, .info = info, .mtime = st.st_mtim};
}

static bool glob_descend(struct walk *w, const char *rel, int depth)
{
	struct glob_walk *g = (struct glob_walk *)w;
	(void)rel;
	return g->deep || (size_t)depth < g->parts;
}

static int newest_first(const void *a, const void *b)
{
	const struct match *x = a, *y = b;
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? 1 : -1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? 1 : -1;
	return strcmp(x->path, y->path);
}

int fo_glob(json_object *q)
{
	const char *pattern = fo_jstr(q, "pattern", NULL);
	const char *base = fo_jstr(q, "path", NULL);
	struct stat st;
	if (stat(base, &st) < 0)
		return fo_fail_errno(errno, base, "cannot search");
	if (!S_ISDIR(st.st_mode))
		return fo_fail(AB_ERRC_NOT_DIRECTORY, base, "%s is not a directory", base);
	/* the walk starts below the pattern's leading components without
	 * wildcards (an absolute pattern's included) */
	char full[PATH_MAX], buf[PATH_MAX], root[PATH_MAX] = "", pat[PATH_MAX] = "";
	if ((size_t)snprintf(full, sizeof(full), "%s/%s", pattern[0] == '/' ? "" : base, pattern) >=
	    sizeof(full))
		return fo_fail(AB_ERRC_INVALID_PATH, NULL, "glob: the pattern is too long");
	char *parts[MAX_PARTS];
	size_t np = split(full, buf, sizeof(buf), parts, MAX_PARTS), k = 0;
	while (k + 1 < np && !strpbrk(parts[k], "*?[\\"))
		k++;
	for (size_t i = 0; i < k; i++)
		snprintf(root + strlen(root), sizeof(root) - strlen(root), "/%s", parts[i]);
	if (!root[0])
		snprintf(root, sizeof(root), "/");
	for (size_t i = k; i < np; i++)
		snprintf(pat + strlen(pat), sizeof(pat) - strlen(pat), "%s%s", i > k ? "/" : "",
			 parts[i]);
	struct glob_walk g = {
		.w = {.visit = glob_visit, .descend = glob_descend},
		.pattern = pat,
		.parts = np - k,
		.deep = strstr(pat, "**") != NULL,
		.files_only = fo_jbool(q, "files_only", false),
	};
	if (np > 0 && stat(root, &st) == 0 && S_ISDIR(st.st_mode))
		walk_dir(&g.w, root, "", 1);
	if (g.n) /* qsort of NULL, even for 0 items, is undefined (UBSan stops it) */
		qsort(g.m, g.n, sizeof(*g.m), newest_first);
	json_object *matches = json_object_new_array();
	for (size_t i = 0; i < g.n; i++) {
		json_object_array_add(matches, g.m[i].info);
		free(g.m[i].path);
	}
	free(g.m);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "matches", matches);
	json_object_object_add(o, "truncated", json_object_new_boolean(g.w.truncated));
	return fo_result(o);
}

/* ---- inside: grep ---- */

struct grep_walk {
	struct walk w;
	const char *pattern, *glob;
	size_t plen;
	bool regex, icase;
	regex_t re;
	char *lower_pat;
	uint64_t max, count, skip; /* skip: matches passed over first (paging) */
	json_object *matches;
};

static void lower(char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] >= 'A' && s[i] <= 'Z')
			s[i] = (char)(s[i] - 'A' + 'a');
}

static bool line_matches(struct grep_walk *g, char *line, size_t n, char *scratch)
{
	if (g->regex) {
		char saved = line[n];
		line[n] = '\0';
		bool m = regexec(&g->re, line, 0, NULL, 0) == 0;
		line[n] = saved;
		return m;
	}
	if (!g->icase)
		return memmem(line, n, g->pattern, g->plen) != NULL;
	memcpy(scratch, line, n);
	lower(scratch, n);
	return memmem(scratch, n, g->lower_pat, g->plen) != NULL;
}

static void grep_file(struct grep_walk *g, const char *full)
{
	char *data;
	size_t len;
	if (fo_read_all(full, FILEOP_EDIT_MAX, &data, &len) < 0)
		return;
	if (memchr(data, '\0', len < SNIFF ? len : SNIFF)) {
		free(data);
		return;
	}
	char *scratch = g->icase && !g->regex ? malloc(len + 1) : NULL;
	if (g->icase && !g->regex && !scratch) {
		free(data);
		return;
	}
	uint64_t lineno = 0;
	for (char *p = data, *e = data + len; p < e && !g->w.stop;) {
		char *nl = memchr(p, '\n', (size_t)(e - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(e - p);
		lineno++;
		bool hit = line_matches(g, p, n, scratch);
		if (hit && g->skip > 0) {
			g->skip--;
		} else if (hit) {
			if (g->count == g->max) {
				g->w.truncated = g->w.stop = true;
				break;
			}
			g->count++;
			size_t tn = n > GREP_TEXT_MAX ? GREP_TEXT_MAX : n;
			while (tn < n && tn > 0 && ((unsigned char)p[tn] & 0xC0) == 0x80)
				tn--;
			json_object *m = json_object_new_object();
			json_object_object_add(m, "path", fo_lossy(full, strlen(full)));
			json_object_object_add(m, "line", json_object_new_int64((int64_t)lineno));
			json_object_object_add(m, "text", fo_lossy(p, tn));
			json_object_array_add(g->matches, m);
		}
		p = nl ? nl + 1 : e;
	}
	free(scratch);
	free(data);
}

static bool grep_wanted(struct grep_walk *g, const char *rel)
{
	if (!g->glob)
		return true;
	if (strchr(g->glob, '/'))
		return glob_match(g->glob, rel);
	const char *base = strrchr(rel, '/');
	return fnmatch(g->glob, base ? base + 1 : rel, 0) == 0;
}

static void grep_visit(struct walk *w, const char *full, const char *rel, const struct stat *lst)
{
	struct grep_walk *g = (struct grep_walk *)w;
	struct stat st;
	if (S_ISDIR(lst->st_mode) || stat(full, &st) < 0 || !S_ISREG(st.st_mode) ||
	    !grep_wanted(g, rel))
		return;
	grep_file(g, full);
}

int fo_grep(json_object *q)
{
	struct grep_walk g = {
		.w = {.visit = grep_visit},
		.pattern = fo_jstr(q, "pattern", &g.plen),
		.glob = fo_jstr(q, "glob", NULL),
		.regex = fo_jbool(q, "regex", false),
		.icase = fo_jbool(q, "ignore_case", false),
		.max = (uint64_t)fo_jint(q, "max_count", 1000),
		.skip = (uint64_t)fo_jint(q, "skip", 0),
	};
	const char *path = fo_jstr(q, "path", NULL);
	if (g.max > GREP_MAX_COUNT)
		g.max = GREP_MAX_COUNT;
	if (g.regex) {
		int r = regcomp(&g.re, g.pattern,
				REG_EXTENDED | REG_NOSUB | (g.icase ? REG_ICASE : 0));
		if (r) {
			char why[256];
			regerror(r, &g.re, why, sizeof(why));
			return fo_fail(AB_ERRC_INVALID_REQUEST, NULL,
				       "grep: 'pattern' is not a valid regular "
				       "expression: %s",
				       why);
		}
	} else if (g.icase) {
		g.lower_pat = strdup(g.pattern);
		if (!g.lower_pat)
			return fo_fail(AB_ERRC_IO_ERROR, path, "out of memory");
		lower(g.lower_pat, g.plen);
	}
	struct stat st;
	if (stat(path, &st) < 0) {
		int e = errno;
		if (g.regex)
			regfree(&g.re);
		free(g.lower_pat);
		return fo_fail_errno(e, path, "cannot search");
	}
	g.matches = json_object_new_array();
	if (S_ISDIR(st.st_mode)) {
		walk_dir(&g.w, path, "", 1);
	} else if (S_ISREG(st.st_mode)) {
		const char *base = strrchr(path, '/');
		if (grep_wanted(&g, base ? base + 1 : path))
			grep_file(&g, path);
	}
	if (g.regex)
		regfree(&g.re);
	free(g.lower_pat);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "matches", g.matches);
	json_object_object_add(o, "truncated", json_object_new_boolean(g.w.truncated));
	return fo_result(o);
}

/* ---- inside: delete, download ---- */

/* Remove name (in the directory dfd) and all below it, without following
 * symlinks. Counts what is removed. */
static int remove_tree(int dfd, const char *name, uint64_t *count, int depth)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dfd, name, 0) < 0)
			return -errno;
		(*count)++;
		return 0;
	}
	if (depth > MAX_DEPTH)
		return -ELOOP;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	int sub = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (sub < 0) {
		close(fd);
		return -errno;
	}
	size_t n;
	bool more;
	char **names = dir_names(fd, SIZE_MAX, &n, &more);
	int r = names ? 0 : -(errno ? errno : ENOMEM);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = remove_tree(sub, names[i], count, depth + 1);
	free_names(names, n);
	close(sub);
	if (r == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		r = -errno;
	if (r == 0)
		(*count)++;
	return r;
}

/* The reply of delete and clear_dir: count entries removed from path, or
 * the error r (none removed: cannot_what; some: "could not delete
 * everything in"). */
static int deleted_reply(int r, const char *path, uint64_t count, const char *cannot_what)
{
	if (r < 0)
		return fo_fail_errno(-r, path,
				     count ? "could not delete everything in" : cannot_what);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "deleted", json_object_new_int64((int64_t)count));
	return fo_result(o);
}

int fo_delete(json_object *q)
{
	const char *path = fo_jstr(q, "path", NULL);
	bool recursive = fo_jbool(q, "recursive", false);
	const char *slash = strrchr(path, '/');
	cleanup_free char *parent =
		slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	if (!parent)
		return fo_fail(AB_ERRC_IO_ERROR, path, "out of memory");
	int dfd = fo_open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK, 0);
	if (dfd < 0)
		return fo_fail_errno(errno, path, "cannot delete");
	struct stat st;
	uint64_t count = 0;
	int r = fstatat(dfd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	if (r == 0 && S_ISDIR(st.st_mode) && !recursive) {
		r = unlinkat(dfd, slash + 1, AT_REMOVEDIR) < 0 ? -errno : 0;
		if (r == -ENOTEMPTY || r == -EEXIST) {
			close(dfd);
			return fo_fail(
				AB_ERRC_IS_DIRECTORY, path,
				"%s is a directory that is not empty; pass recursive to delete it "
				"and everything in it",
				path);
		}
		if (r == 0)
			count = 1;
	} else if (r == 0) {
		r = remove_tree(dfd, slash + 1, &count, 0);
	}
	close(dfd);
	return deleted_reply(r, path, count, "cannot delete");
}

/* clear_dir (an inner op, agentbox runtime's DELETE of /workspace): what is
 * in the directory path removed, nothing followed, the directory itself
 * kept; reached without following a symlink (fo_open_dir_exact). */
int fo_clear_dir(json_object *q)
{
	const char *path = fo_jstr(q, "path", NULL);
	int pfd = fo_open_dir_exact(path);
	if (pfd < 0)
		return fo_fail_errno(-pfd, path, "cannot clear");
	int dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
	int sub = dfd < 0 ? -1 : fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	int e = errno;
	close(pfd);
	if (sub < 0) {
		if (dfd >= 0)
			close(dfd);
		return fo_fail_errno(e, path, "cannot clear");
	}
	size_t n = 0;
	bool more;
	uint64_t count = 0;
	char **names = dir_names(dfd, SIZE_MAX, &n, &more); /* takes dfd */
	int r = names ? 0 : -(errno ? errno : ENOMEM);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = remove_tree(sub, names[i], &count, 0);
	free_names(names, n);
	close(sub);
	return deleted_reply(r, path, count, "cannot clear");
}
