/* Writes refused by a protected path (protect_watch.h): git, and tools that
 * write the same way, make FILE.lock beside FILE, then rename it over FILE,
 * which the read-only bind refuses ("Device or resource busy"). An inotify
 * watch on the host, on the directory of each protected file, sees the
 * lock file made; nothing is read from inside the sandbox. */
#include "layer/protect_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

static void entry_free(struct protect_watch *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->e[i].lock);
	free(w->e);
	w->e = NULL;
	w->n = 0;
}

void protect_watch_start(const struct ab_config *cfg, const struct protect_state *st,
			 struct protect_watch *w)
{
	memset(w, 0, sizeof(*w));
	w->fd = -1;
	cleanup_fd int ws = -1;
	if (st->n == 0 || !(w->e = calloc(st->n, sizeof(*w->e))))
		return;
	for (size_t i = 0; i < st->n; i++) {
		const struct protect_entry *p = &st->e[i];
		if (!p->exists || !p->bindable || !S_ISREG(p->mode))
			continue; /* only a bound file refuses a rename over it */
		/* opened for the first such file: a workspace without one
		 * (most) costs no inotify instance */
		if (w->fd < 0 &&
		    ((ws = open(cfg->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
		     (w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0))
			break;
		const char *slash = strrchr(p->rel, '/');
		char parent[PATH_MAX];
		snprintf(parent, sizeof(parent), "%.*s", slash ? (int)(slash - p->rel) : 1,
			 slash ? p->rel : ".");
		/* the directory reached without a symlink, watched through its fd */
		cleanup_fd int dir =
			strcmp(parent, ".") == 0 ? dup(ws) : ab_open_beneath(ws, parent);
		char self[64];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", dir);
		int wd = dir < 0 ? -1
				 : inotify_add_watch(w->fd, self,
						     IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
		char *lock = NULL;
		if (wd < 0 || asprintf(&lock, "%s.lock", slash ? slash + 1 : p->rel) < 0)
			continue;
		w->e[w->n++] = (struct protect_watch_entry){.wd = wd, .lock = lock, .rel = p->rel};
	}
	if (w->n == 0)
		protect_watch_free(w);
}

char **protect_watch_refused(struct protect_watch *w)
{
	if (w->fd < 0)
		return NULL;
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t len;
	while ((len = read(w->fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			for (size_t i = 0; ev->len && i < w->n; i++)
				if (w->e[i].wd == ev->wd && strcmp(w->e[i].lock, ev->name) == 0)
					w->e[i].seen = true;
			p += sizeof(*ev) + ev->len;
		}
	}
	char **out = NULL;
	size_t n = 0;
	for (size_t i = 0; i < w->n; i++) {
		if (!w->e[i].seen)
			continue;
		w->e[i].seen = false; /* each attempt reported by the command it ends */
		if (ab_strv_push(&out, &n, w->e[i].rel) < 0)
			break;
	}
	return out;
}

void protect_watch_free(struct protect_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	entry_free(w);
}
