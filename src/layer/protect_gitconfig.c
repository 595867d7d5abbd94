/* Whether a git config file a command created may stay live on the host
 * (protect_quarantine.h). Written here, not with a library: no config
 * library reads as git does, and the question is narrower than parsing.
 * The file is read strictly, and an allowlist decides: every key must be
 * one git writes for a plain repository (core defaults, remotes, branches,
 * identity); any other key, and anything this reader does not follow
 * exactly as git would (a continued line, a key before any section, a NUL
 * or CR, an odd header), is unsafe. So the keys that make git run a
 * program or load another file (core.fsmonitor, core.hooksPath,
 * core.sshCommand, core.pager, core.editor, core.askPass, core.gitProxy,
 * core.alternateRefsCommand, core.worktree, credential.*, filter.*,
 * diff.external, diff.*.textconv, diff.*.command, merge.*.driver,
 * gpg.program, sequence.editor, pager.*, interactive.diffFilter,
 * uploadpack.packObjectsHook, remote.*.uploadpack, remote.*.receivepack,
 * protocol.*, hook.*, include.path, includeIf.* and those git adds later) are out by construction.
 * alias.* is out too (an alias cannot shadow a git command, but an allowlist keeps no exceptions).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "layer/protect_quarantine.h"

struct allowed {
	const char *section;
	bool sub; /* [section "name"] */
	const char *key;
};

static const struct allowed config_keys[] = {
	{"core", false, "repositoryformatversion"},
	{"core", false, "filemode"},
	{"core", false, "bare"},
	{"core", false, "logallrefupdates"},
	{"core", false, "ignorecase"},
	{"core", false, "precomposeunicode"},
	{"core", false, "symlinks"},
	{"core", false, "autocrlf"},
	{"core", false, "eol"},
	{"core", false, "safecrlf"},
	{"core", false, "quotepath"},
	{"core", false, "sharedrepository"},
	{"core", false, "sparsecheckout"},
	{"core", false, "sparsecheckoutcone"},
	{"core", false, "untrackedcache"},
	{"extensions", false, "objectformat"},
	{"extensions", false, "refstorage"},
	{"extensions", false, "partialclone"},
	/* loads .git/config.worktree, itself a protected path judged as this
	 * file is (git sparse-checkout sets it) */
	{"extensions", false, "worktreeconfig"},
	{"init", false, "defaultbranch"},
	{"user", false, "name"},
	{"user", false, "email"},
	{"remote", true, "url"},
	{"remote", true, "pushurl"},
	{"remote", true, "fetch"},
	{"remote", true, "push"},
	{"remote", true, "tagopt"},
	{"remote", true, "prune"},
	{"remote", true, "mirror"},
	{"remote", true, "promisor"},
	{"remote", true, "partialclonefilter"},
	{"branch", true, "remote"},
	{"branch", true, "merge"},
	{"branch", true, "rebase"},
	{"branch", true, "pushremote"},
	{"branch", true, "description"},
	{"pull", false, "rebase"},
	{"pull", false, "ff"},
	{"push", false, "default"},
	{"push", false, "autosetupremote"},
	{"fetch", false, "prune"},
	{"gc", false, "auto"},
	{"submodule", true, "url"},
	{"submodule", true, "active"},
	{"submodule", false, "active"},
	{NULL, false, NULL},
};

/* .gitmodules: git ignores a `!command` update there, but keep to what
 * `git submodule add` writes */
static const struct allowed modules_keys[] = {
	{"submodule", true, "path"},   {"submodule", true, "url"},
	{"submodule", true, "branch"}, {"submodule", true, "shallow"},
	{"submodule", true, "ignore"}, {"submodule", true, "fetchrecursesubmodules"},
	{NULL, false, NULL},
};

struct reader {
	char section[64];
	bool sub, in_section;
	char *why;
	size_t whylen;
	bool modules;
};

__attribute__((format(printf, 2, 3))) static bool refuse(struct reader *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->why, r->whylen, fmt, ap);
	va_end(ap);
	return false;
}

static bool key_allowed(struct reader *r, const char *key, size_t klen)
{
	char name[64];
	if (klen >= sizeof(name))
		return refuse(r, "has a key of over 63 bytes");
	memcpy(name, key, klen);
	name[klen] = '\0';
	for (const struct allowed *a = r->modules ? modules_keys : config_keys; a->section; a++)
		if (a->sub == r->sub && strcasecmp(a->section, r->section) == 0 &&
		    strcasecmp(a->key, name) == 0)
			return true;
	for (char *p = name; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	char what[160];
	snprintf(what, sizeof(what), "%s.%s%s", r->section, r->sub ? "*." : "", name);
	for (char *p = what; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return refuse(r, "sets %s", what);
}

/* [section], [section "sub"] or [section.sub]; *rest after the ']' */
static bool header(struct reader *r, const char *p, const char **rest)
{
	p++;
	size_t n = 0;
	while (isalnum((unsigned char)p[n]) || p[n] == '-' || p[n] == '.')
		n++;
	if (n == 0 || n >= sizeof(r->section))
		return refuse(r, "has a section header agentbox does not read");
	const char *dot = memchr(p, '.', n);
	size_t sect = dot ? (size_t)(dot - p) : n;
	memcpy(r->section, p, sect);
	r->section[sect] = '\0';
	r->sub = dot != NULL;
	if (dot && (dot + 1 == p + n))
		return refuse(r, "has a section header agentbox does not read");
	p += n;
	if (!dot && (*p == ' ' || *p == '\t')) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p++ != '"')
			return refuse(r, "has a section header agentbox does not read");
		for (; *p && *p != '"'; p++)
			if (*p == '\\' && !*++p)
				break;
		if (*p++ != '"')
			return refuse(r, "has a section header agentbox does not read");
		r->sub = true;
	}
	if (*p != ']')
		return refuse(r, "has a section header agentbox does not read");
	r->in_section = true;
	*rest = p + 1;
	return true;
}

/* name [= value]: the value may hold anything but a continuation */
static bool key_line(struct reader *r, const char *p)
{
	if (!r->in_section)
		return refuse(r, "has a key before any section");
	if (!isalpha((unsigned char)*p))
		return refuse(r, "has a line agentbox does not read as git config");
	size_t k = 0;
	while (isalnum((unsigned char)p[k]) || p[k] == '-')
		k++;
	const char *q = p + k;
	while (*q == ' ' || *q == '\t')
		q++;
	if (*q && *q != '=' && *q != '#' && *q != ';')
		return refuse(r, "has a line agentbox does not read as git config");
	return key_allowed(r, p, k);
}

bool protect_gitconfig_safe(const char *text, size_t len, bool modules, char *why, size_t whylen)
{
	struct reader r = {.why = why, .whylen = whylen, .modules = modules};
	if (memchr(text, '\0', len) || memchr(text, '\r', len))
		return refuse(&r, "is not plain text");
	char line[4096];
	for (size_t at = 0; at < len;) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
		if (n >= sizeof(line))
			return refuse(&r, "has a line over 4095 bytes");
		memcpy(line, text + at, n);
		line[n] = '\0';
		at += n + 1;
		/* a backslash at the end continues the line: git reads the next
		 * as part of this value; not followed here */
		size_t bs = 0;
		while (bs < n && line[n - 1 - bs] == '\\')
			bs++;
		if (bs % 2)
			return refuse(&r, "continues a line with a backslash");
		const char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '[') {
			if (!header(&r, p, &p))
				return false;
			while (*p == ' ' || *p == '\t')
				p++;
		}
		if (!*p || *p == '#' || *p == ';')
			continue;
		if (!key_line(&r, p))
			return false;
	}
	return true;
}
