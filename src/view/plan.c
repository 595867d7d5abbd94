/* The view plan's entries (mount.h), apart from the mounts that make
 * them, so that what adds to a plan (mount.c, rootfs.c) and what binds the
 * sandbox user's account lines over /etc (idmap.c, rootfs.c) need nothing
 * else of each other. Launcher side. */
#include "view/mount.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/error.h"

struct view_entry *view_plan_add(struct view_plan *plan, enum view_kind kind, const char *src,
				 const char *dst)
{
	struct view_entry *e = realloc(plan->e, (plan->n + 1) * sizeof(*e));
	if (!e)
		return NULL;
	plan->e = e;
	e = &plan->e[plan->n];
	*e = (struct view_entry){.kind = kind, .src_fd = -1, .tree_fd = -1, .own_fd = -1};
	e->dst = strdup(dst);
	e->src = src ? strdup(src) : NULL;
	if (!e->dst || (src && !e->src)) {
		free(e->dst);
		free(e->src);
		return NULL;
	}
	plan->n++;
	return e;
}

int view_plan_add_bind(struct view_plan *plan, const char *opt, const char *src, const char *dst,
		       bool rw, bool user, struct ab_error *err)
{
	struct stat st;
	if (stat(src, &st) < 0)
		return ab_error_set(err, errno, "%s: cannot bind '%s' at %s", opt, src, dst);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return ab_error_plain(err, EINVAL,
				      "%s: cannot bind '%s' at %s: only directories and regular "
				      "files can be bound",
				      opt, src, dst);
	struct view_entry *e = view_plan_add(plan, VIEW_BIND, src, dst);
	if (!e)
		return ab_error_set(err, ENOMEM, "planning the view");
	e->rw = rw;
	e->user = user;
	e->host_open = true;
	e->owner_uid = st.st_uid;
	e->owner_gid = st.st_gid;
	e->is_dir = S_ISDIR(st.st_mode);
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	return 0;
}

/* Whether a line of an /etc/passwd or /etc/group text has this name (field
 * 1) or this id (field 3). */
static bool has_entry(const char *text, const char *name, unsigned id)
{
	size_t nl = strlen(name);
	for (const char *l = text; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] == '\n')) {
		if (strncmp(l, name, nl) == 0 && l[nl] == ':')
			return true;
		const char *f = l;
		for (int i = 0; i < 2 && f; i++) {
			f = memchr(f, ':', strcspn(f, "\n"));
			f = f ? f + 1 : NULL;
		}
		char *end;
		if (f && *f >= '0' && *f <= '9' && strtoul(f, &end, 10) == id && *end == ':')
			return true;
	}
	return false;
}

/* text with line appended (after a newline it may lack), or NULL. */
static char *append_line(const char *text, const char *line)
{
	size_t n = strlen(text);
	bool nl = n > 0 && text[n - 1] != '\n';
	char *out = malloc(n + nl + strlen(line) + 1);
	if (out)
		sprintf(out, "%s%s%s", text, nl ? "\n" : "", line);
	return out;
}

int view_plan_id_texts(struct view_plan *plan, const char *passwd, const char *group, uid_t uid,
		       gid_t gid, const char *home, struct ab_error *err)
{
	static const char name[] = "agent";
	char line[4200];
	if (passwd && !has_entry(passwd, name, uid)) {
		snprintf(line, sizeof(line), "%s:x:%u:%u:agentbox sandbox user:%s:/bin/sh\n", name,
			 (unsigned)uid, (unsigned)gid, home);
		if (!(plan->passwd = append_line(passwd, line)))
			return ab_error_set(err, ENOMEM, "making the sandbox's /etc/passwd");
	}
	if (group && !has_entry(group, name, gid)) {
		snprintf(line, sizeof(line), "%s:x:%u:\n", name, (unsigned)gid);
		if (!(plan->group = append_line(group, line)))
			return ab_error_set(err, ENOMEM, "making the sandbox's /etc/group");
	}
	return 0;
}
