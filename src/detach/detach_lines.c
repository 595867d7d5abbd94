/* The client's end of a detached sandbox's socket (detach_lines.h). */
#include "detach/detach_lines.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "detach/detach.h"
#include "util/error.h"

/* A line from the launcher is at most this long (a result with both
 * streams at a --max-output of 16M, escaped). */
#define LINE_MAX_BYTES (256u << 20)

int detach_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("agentbox: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return AB_EXIT_FAILURE;
}

int detach_bad_arg(const char *cmd, const char *what, const char *arg)
{
	return detach_fail("%s: %s '%s' (try 'agentbox %s --help')", cmd, what, arg, cmd);
}

bool detach_is_help(const char *a)
{
	return !strcmp(a, "--help") || !strcmp(a, "-h");
}

int detach_simple_args(int argc, char **argv, const char *cmd, const char *usage, const char *flag,
		       const char *short_flag, bool *set, const char **operand)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (detach_is_help(a)) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, flag) || (short_flag && !strcmp(a, short_flag))) {
			*set = true;
		} else if (!operand) {
			return detach_bad_arg(cmd, "unknown option", a);
		} else if (a[0] == '-' || *operand) {
			return detach_bad_arg(cmd, "unexpected", a);
		} else {
			*operand = a;
		}
	}
	return -1;
}

/* ---- lines from the launcher ---- */

/* A whole line in the buffer as JSON, or NULL (none yet; or one that is
 * not an object: *bad then). Never blocks. */
json_object *lines_take(struct lines *l, bool *bad)
{
	*bad = false;
	char *nl = l->len ? memchr(l->buf, '\n', l->len) : NULL;
	if (!nl)
		return NULL;
	*nl = 0;
	json_object *o = json_tokener_parse(l->buf);
	size_t used = (size_t)(nl + 1 - l->buf);
	memmove(l->buf, nl + 1, l->len - used);
	l->len -= used;
	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		*bad = true;
		return NULL;
	}
	return o;
}

/* One read from the launcher into the buffer (l->eof at its end); false
 * when a line would be over LINE_MAX_BYTES. */
bool lines_fill(struct lines *l)
{
	if (l->cap - l->len < 65536) {
		size_t cap = l->cap ? l->cap * 2 : 1 << 20;
		char *q = cap <= LINE_MAX_BYTES ? realloc(l->buf, cap) : NULL;
		if (!q)
			return false;
		l->buf = q;
		l->cap = cap;
	}
	ssize_t r = read(l->fd, l->buf + l->len, l->cap - l->len);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (r <= 0)
		l->eof = true;
	else
		l->len += (size_t)r;
	return true;
}

/* The next line as JSON (NULL at the end, or on a line that is not an
 * object: *bad then). Blocks: the launcher answers or hangs up. */
json_object *lines_next(struct lines *l, bool *bad)
{
	for (;;) {
		json_object *o = lines_take(l, bad);
		if (o || *bad || l->eof)
			return o;
		struct pollfd p[2] = {{.fd = l->fd, .events = POLLIN},
				      {.fd = l->sigfd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			l->eof = true;
		if (p[1].revents) {
			struct signalfd_siginfo si;
			(void)!read(l->sigfd, &si, sizeof(si));
			l->sig = true;
			return NULL;
		}
		if (p[0].revents && !lines_fill(l)) {
			*bad = true;
			return NULL;
		}
	}
}

const char *lines_str(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

json_object *lines_next_cancel(struct lines *l, const char *target)
{
	for (;;) {
		bool bad = false;
		json_object *m = lines_next(l, &bad);
		if (!m && l->sig && !l->cancelled) {
			l->sig = false;
			l->cancelled = true;
			json_object *c = json_object_new_object();
			json_object_object_add(c, "op", json_object_new_string("cancel"));
			json_object_object_add(c, "id", json_object_new_string("cancel"));
			json_object_object_add(c, "target", json_object_new_string(target));
			const char *s = json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN);
			if (detach_write_all(l->fd, s, strlen(s)) == 0)
				detach_write_all(l->fd, "\n", 1);
			json_object_put(c);
			continue;
		}
		if (!m && (l->sig || bad))
			continue;
		return m;
	}
}

int detach_write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The hello of the sandbox on fd (or why there is none). */
int lines_hello(struct lines *l, const char *id)
{
	bool bad;
	json_object *h = lines_next(l, &bad);
	const char *type = h ? lines_str(h, "type") : NULL;
	int r = 0;
	if (!type || strcmp(type, "hello") != 0) {
		const char *msg = h ? lines_str(h, "message") : NULL;
		r = detach_fail("sandbox %s: %s", id, msg ? msg : "no hello from its launcher");
	}
	json_object_put(l->hello);
	l->hello = h;
	return r;
}

int detach_cli_dial(const char *id, const char *leaf, char *root, size_t size)
{
	struct ab_error err = {0};
	if (!detach_id_valid(id))
		return detach_fail("'%s' is not a sandbox id (agentbox ls lists them)", id), -1;
	int r = detach_root(root, size, false, &err);
	if (r == -ENOENT)
		return detach_fail("no sandbox %s (agentbox ls lists them)", id), -1;
	int fd = r < 0 ? r : detach_dial(root, id, leaf, &err);
	if (fd < 0)
		return detach_fail("%s", err.msg), -1;
	return fd;
}
