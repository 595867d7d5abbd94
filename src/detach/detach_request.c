/* One request to a detached sandbox and its answer (detach.h): how the
 * layer commands (agentbox changes|commit|discard ID) reach a sandbox's
 * overlay layer, which only its launcher may touch. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "detach/detach.h"
#include "detach/detach_lines.h"
#include "util/error.h"
#include "util/util.h"

int detach_request(const char *id, json_object *req, json_object **reply, struct ab_error *err)
{
	char root[PATH_MAX];
	*reply = NULL;
	if (!detach_id_valid(id))
		return ab_error_plain(err, EINVAL,
				      "'%s' is neither a layer directory nor a sandbox id", id);
	int r = detach_root(root, sizeof(root), false, err);
	if (r == -ENOENT)
		return ab_error_plain(err, ENOENT,
				      "%s is neither a layer directory nor a sandbox (agentbox ls "
				      "lists them)",
				      id);
	if (r < 0)
		return r;
	/* the exec socket: the next client's replay is not ours to take */
	cleanup_fd int fd = detach_dial(root, id, "exec", err);
	if (fd < 0)
		return fd;
	struct lines l = {.fd = fd, .sigfd = -1};
	bool bad = false;
	json_object *m = lines_next(&l, &bad);
	const char *type = m ? lines_str(m, "type") : NULL;
	if (!type || strcmp(type, "hello") != 0) {
		const char *msg = m ? lines_str(m, "message") : NULL;
		r = ab_error_plain(err, EIO, "sandbox %s: %s", id,
				   msg ? msg : "no hello from its launcher");
		json_object_put(m);
		free(l.buf);
		return r;
	}
	json_object_put(m);
	const char *s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	if (detach_write_all(fd, s, strlen(s)) < 0 || detach_write_all(fd, "\n", 1) < 0) {
		free(l.buf);
		return ab_error_set(err, errno, "sandbox %s: cannot send the request", id);
	}
	const char *want = lines_str(req, "id");
	for (;;) {
		m = lines_next(&l, &bad);
		if (!m && bad)
			continue;
		if (!m)
			break;
		const char *mid = lines_str(m, "id");
		type = lines_str(m, "type");
		if (mid && type && !strcmp(mid, want) &&
		    (!strcmp(type, "result") || !strcmp(type, "error") || !strcmp(type, "port"))) {
			*reply = m;
			break;
		}
		json_object_put(m);
	}
	free(l.buf);
	if (!*reply)
		return ab_error_plain(err, EIO,
				      "sandbox %s: its launcher hung up before the answer", id);
	return 0;
}
