/* agentbox watch ID [PATH]: a detached sandbox's file events (the watch
 * op, docs/protocol.md) printed as lines until Ctrl-C or the sandbox's
 * end. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "detach/detach.h"
#include "detach/detach_lines.h"
#include "util/signals.h"
#include "util/util.h"

static const char usage_watch[] =
	"Usage: agentbox watch [--recursive] [--json] ID [PATH]\n"
	"\n"
	"File events of PATH (a directory in sandbox ID's view; default\n"
	"/workspace; relative: to /workspace) as they happen, one line each,\n"
	"until Ctrl-C or the sandbox ends: first 'ready PATH', then 'created',\n"
	"'written' (closed after a write), 'removed', 'renamed' (NEW <- OLD),\n"
	"'attributes', each with its path in the view, and 'overflow' where\n"
	"events were dropped (a client or a burst faster than they are read).\n"
	"  -r, --recursive  every directory under PATH too, those made later too\n"
	"  --json           each event as the protocol's JSON object\n"
	"It is the sandbox's one client while it runs (docs/detached.md).\n";

static void print_event(json_object *m, bool json)
{
	if (json) {
		json_object_object_del(m, "type");
		json_object_object_del(m, "id");
		printf("%s\n", json_object_to_json_string_ext(
				       m, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	} else {
		const char *ev = lines_str(m, "event"), *p = lines_str(m, "path"),
			   *from = lines_str(m, "from");
		json_object *d;
		bool dir = json_object_object_get_ex(m, "dir", &d) && json_object_get_boolean(d);
		if (from)
			printf("%s %s%s <- %s\n", ev, p ? p : "", dir ? "/" : "", from);
		else
			printf("%s%s%s%s\n", ev ? ev : "?", p ? " " : "", p ? p : "",
			       dir && p && strcmp(ev, "ready") ? "/" : "");
	}
	fflush(stdout);
}

/* Events until the watch's end: 0 cancelled or the sandbox gone, else
 * the failure said. */
static int relay(struct lines *l, const char *id, bool json)
{
	for (;;) {
		json_object *m = lines_next_cancel(l, "watch");
		const char *type = m ? lines_str(m, "type") : NULL,
			   *mid = m ? lines_str(m, "id") : NULL;
		const char *ecode = m ? lines_str(m, "code") : NULL;
		if (!m || (type && !strcmp(type, "error") && ecode && !strcmp(ecode, "shutdown"))) {
			fprintf(stderr, "agentbox: sandbox %s ended\n", id); /* rm, its ttl */
			json_object_put(m);
			return 0;
		}
		int code = -1;
		if (!mid || !type || strcmp(mid, "watch") != 0) {
			/* the cancel's ok */
		} else if (!strcmp(type, "event")) {
			print_event(m, json);
		} else if (!strcmp(type, "result")) {
			code = 0;
		} else if (!strcmp(type, "error")) {
			code = detach_fail("sandbox %s: %s", id, lines_str(m, "message"));
		}
		json_object_put(m);
		if (code >= 0)
			return code;
	}
}

int detach_cli_watch(int argc, char **argv)
{
	bool json = false, recursive = false;
	const char *id = NULL, *path = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (detach_is_help(a)) {
			fputs(usage_watch, stdout);
			return 0;
		} else if (!strcmp(a, "--json")) {
			json = true;
		} else if (!strcmp(a, "--recursive") || !strcmp(a, "-r")) {
			recursive = true;
		} else if (a[0] == '-' && a[1]) {
			return detach_bad_arg("watch", "unknown option", a);
		} else if (!id) {
			id = a;
		} else if (!path) {
			path = a;
		} else {
			return detach_bad_arg("watch", "one path only, not", a);
		}
	}
	if (!id)
		return detach_fail("watch: which sandbox? (agentbox watch ID [PATH])");
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("watch"));
	json_object_object_add(req, "id", json_object_new_string("watch"));
	json_object_object_add(req, "path", json_object_new_string(path ? path : "/workspace"));
	json_object_object_add(req, "recursive", json_object_new_boolean(recursive));
	char root[PATH_MAX];
	cleanup_fd int fd = detach_cli_dial(id, "exec", root, sizeof(root));
	signal(SIGPIPE, SIG_IGN);
	cleanup_fd int sigfd = ab_ending_signals_fd();
	struct lines l = {.fd = fd, .sigfd = sigfd};
	int code = fd < 0 ? AB_EXIT_FAILURE : lines_hello(&l, id);
	if (code == 0) {
		const char *s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
		if (detach_write_all(fd, s, strlen(s)) < 0 || detach_write_all(fd, "\n", 1) < 0)
			code = detach_fail("sandbox %s: cannot send the request: %s", id,
					   strerror(errno));
	}
	if (code == 0)
		code = relay(&l, id, json);
	json_object_put(req);
	json_object_put(l.hello);
	free(l.buf);
	return code;
}
