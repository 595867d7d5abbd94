/* ab_session_close: bound files synced back (view/bindfile.h), then the
 * session freed (session.c). Before the session's init is killed, each file a --bind copied into
 * the view is read back by a file operation of the sandbox (the bulk download, through a pipe: its
 * last component not followed, a regular file only, no FIFO waited on: fileop_bulk.c) and handed to
 * bindfile_write_back on the host. What comes back is a command's output: bounded, decoded, never a
 * path. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files/fileop.h"
#include "session/session.h"
#include "util/util.h"
#include "view/bindfile.h"

enum { SYNC_TIMEOUT_MS = 30000, DRAIN_MS = 2000 };

/* What the sandbox's reply to download_to says: the bytes it sent into
 * *bytes, or -errno with why (a sentence) filled. */
static int pull_reply(const struct ab_result *res, long long *bytes, char *why, size_t why_size)
{
	const struct ab_output *out = &res->out;
	json_object *o = out->data ? json_tokener_parse(out->data) : NULL;
	json_object *v = NULL, *e = NULL, *m = NULL, *code = NULL;
	int r = 0;
	if (o && json_object_object_get_ex(o, "error", &e)) {
		json_object_object_get_ex(e, "message", &m);
		json_object_object_get_ex(e, "code", &code);
		bool gone = code && strcmp(json_object_get_string(code), "file_not_found") == 0;
		snprintf(why, why_size, "%s",
			 gone ? "it was deleted in the sandbox"
			 : m  ? json_object_get_string(m)
			      : "it cannot be read");
		r = gone ? -ENOENT : -EIO;
	} else if (o && json_object_object_get_ex(o, "result", &v) &&
		   json_object_object_get_ex(v, "bytes", &m) &&
		   json_object_is_type(m, json_type_int)) {
		*bytes = json_object_get_int64(m);
	} else {
		snprintf(why, why_size, "the sandbox's reply was not one");
		r = -EPROTO;
	}
	json_object_put(o);
	return r;
}

/* What the pipe has now into *buf, at most BINDFILE_MAX bytes in all;
 * false at its end (or over the bound: *over). */
static bool pull_read(int fd, char **buf, size_t *len, size_t *cap, bool *over)
{
	for (;;) {
		if (*len == *cap) {
			size_t want = *cap ? *cap * 2 : 65536;
			if (want > (size_t)BINDFILE_MAX + 1)
				want = (size_t)BINDFILE_MAX + 1;
			char *grown = *cap < want ? realloc(*buf, want) : NULL;
			if (!grown) {
				*over = true;
				return false;
			}
			*buf = grown;
			*cap = want;
		}
		ssize_t n = read(fd, *buf + *len, *cap - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN;
		if (n == 0)
			return false;
		if ((*len += (size_t)n) > BINDFILE_MAX) {
			*over = true;
			return false;
		}
	}
}

/* dst read by the sandbox's bulk download (its last component not
 * followed, a regular file only) through a pipe into *buf. 0, or -errno
 * with why (a sentence) filled. */
static int pull(struct ab_session *s, size_t i, const char *dst, char **buf, size_t *len, char *why,
		size_t why_size)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(why, why_size, "cannot make a pipe: %s", strerror(errno));
		return -errno;
	}
	cleanup_fd int rd = p[0];
	cleanup_fd int wr = p[1];
	fcntl(rd, F_SETFL, O_NONBLOCK);
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("download_to"));
	json_object_object_add(req, "path", json_object_new_string(dst));
	cleanup_free char *inner = strdup(json_object_to_json_string(req));
	json_object_put(req);
	int fds[3] = {wr, -1, -1};
	struct ab_exec x = {.file_op = inner, .fds = fds, .timeout_ms = SYNC_TIMEOUT_MS};
	struct ab_result res = {0};
	struct ab_error err = {0}, cmd_err = {0};
	struct session_result_wait w = {.tag = 0xab5f11e0000ULL + i, .res = &res, .err = &cmd_err};
	int r = inner ? ab_session_start(s, &x, w.tag, &err) : ab_error_set(&err, ENOMEM, "sync");
	if (r < 0) {
		snprintf(why, why_size, "%s", err.msg);
		return r;
	}
	close(wr); /* the sandbox's now: its end comes when the shim closes it */
	wr = -1;
	size_t cap = 0;
	bool open = true, over = false;
	unsigned long long done_at = 0;
	while (!w.done || open) {
		if (w.done && !done_at)
			done_at = session_now_ms();
		if (done_at && session_now_ms() - done_at > DRAIN_MS)
			break;
		struct pollfd pf[2] = {{.fd = ab_session_fd(s), .events = POLLIN},
				       {.fd = open ? rd : -1, .events = POLLIN}};
		if (poll(pf, 2, 200) < 0 && errno != EINTR)
			break;
		if (open && pf[1].revents && !(open = pull_read(rd, buf, len, &cap, &over)) && over)
			ab_session_cancel(s, w.tag);
		if (!w.done && ab_session_dispatch(s, 0, session_result_event, &w, &err) < 0) {
			ab_result_free(&res);
			snprintf(why, why_size, "%s", err.msg);
			return -EIO;
		}
	}
	long long bytes = 0;
	if (w.done && w.r < 0) {
		snprintf(why, why_size, "%s", cmd_err.msg);
		w.r = -EIO;
	} else if (w.done) {
		w.r = pull_reply(&res, &bytes, why, why_size);
	}
	ab_result_free(&res);
	if (over) {
		snprintf(why, why_size, "it is over %u MiB, the most synced back",
			 BINDFILE_MAX >> 20);
		return -EFBIG;
	}
	if (w.r < 0)
		return w.r;
	if (open || bytes != (long long)*len) {
		snprintf(why, why_size, "not all of it came out (%zu of %lld bytes)", *len, bytes);
		return -EIO;
	}
	return 0;
}

static void sync_one(struct ab_session *s, size_t i, const struct view_entry *e)
{
	cleanup_free char *buf = NULL;
	size_t len = 0;
	char why[1100] = "";
	int r = pull(s, i, e->dst, &buf, &len, why, sizeof(why));
	if (r == -ENOENT) {
		fprintf(stderr,
			"agentbox: --bind: %s was deleted in the sandbox: '%s' left as it is\n",
			e->dst, e->src);
		return;
	}
	if (r < 0) {
		fprintf(stderr, "agentbox: --bind: %s is not synced back to '%s': %s\n", e->dst,
			e->src, why);
		return;
	}
	char note[1400];
	struct ab_error err = {0};
	if (bindfile_write_back(e, buf ? buf : "", len, note, sizeof(note), &err) < 0)
		fprintf(stderr, "agentbox: --bind: %s\n", err.msg);
	else if (note[0])
		fprintf(stderr, "agentbox: --bind: %s\n", note);
}

static void session_sync_files(struct ab_session *s)
{
	bool gone = s->init_reaped || s->sync_eof;
	for (size_t i = 0; i < s->sb.plan.n; i++) {
		const struct view_entry *e = &s->sb.plan.e[i];
		if (!e->copy)
			continue;
		if (gone)
			fprintf(stderr,
				"agentbox: --bind: %s is not synced back to '%s': the sandbox "
				"ended first\n",
				e->dst, e->src);
		else
			sync_one(s, i, e);
	}
}

void ab_session_close(struct ab_session *s)
{
	/* the --bind files copied in go back before the sandbox does */
	if (s && s->init > 0 && s->ready)
		session_sync_files(s);
	session_free(s);
}
