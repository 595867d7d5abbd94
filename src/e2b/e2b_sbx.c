/* agentbox e2b's sandboxes: each an agentbox detached sandbox
 * (docs/detached.md) made by the server, with a workspace of its own,
 * and one link to it: the server is the sandbox's client on its socket,
 * speaking agentbox/1 (docs/protocol.md) without blocking, every request
 * of every call multiplexed by its id ("e<N>"). The server ends the
 * sandbox at its E2B timeout; its idle timeout (the link gone: the
 * server ended) ends it too. */
#include "e2b/e2b_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "detach/detach.h"
#include "layer/layer_review.h"
#include "util/error.h"

/* A line from the sandbox is at most this long (a file's 8 MiB as
 * base64 and JSON's escapes fit). */
#define LINK_LINE_MAX (24u << 20)
/* With no client attached this long (the server gone), a sandbox ends. */
#define E2B_ORPHAN_MS 60000

const char *e2b_sbx_id(const struct e2b_sbx *s)
{
	return s->id;
}

struct e2b_sbx *e2b_sbx_holder(struct e2b *srv, const char *id)
{
	for (struct e2b_sbx *s = srv->sbxs; s; s = s->next)
		if (!s->dead && !s->creating && !strcmp(s->id, id))
			return s;
	return NULL;
}

struct e2b_sbx *e2b_sbx_find(struct e2b *srv, const char *id)
{
	struct e2b_sbx *s = e2b_sbx_holder(srv, id);
	return s && !s->retired ? s : NULL;
}

int e2b_path_in(const char *path, char *out, size_t size)
{
	size_t hl = strlen(E2B_HOME);
	int n;
	if (!strncmp(path, E2B_HOME, hl) && (path[hl] == 0 || path[hl] == '/'))
		n = snprintf(out, size, "%s%s", E2B_WORKSPACE, path + hl);
	else if (path[0] == '~' && (path[1] == 0 || path[1] == '/'))
		n = snprintf(out, size, "%s%s", E2B_WORKSPACE, path + 1);
	else if (path[0] != '/')
		n = snprintf(out, size, "%s%s%s", E2B_WORKSPACE, path[0] ? "/" : "", path);
	else
		n = snprintf(out, size, "%s", path);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

int e2b_path_out(const char *path, char *out, size_t size)
{
	size_t wl = strlen(E2B_WORKSPACE);
	int n;
	if (!strncmp(path, E2B_WORKSPACE, wl) && (path[wl] == 0 || path[wl] == '/'))
		n = snprintf(out, size, "%s%s", E2B_HOME, path + wl);
	else
		n = snprintf(out, size, "%s", path);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

static void create_read(struct e2b_sbx *s);

/* ---- the link ---- */

void e2b_sbx_req_id(long h, char *out, size_t size)
{
	snprintf(out, size, "e%ld", h);
}

/* A request's line and its newline queued whole for the link, or nothing
 * (-1: out of memory; a part would put the link out of step). */
static int link_line(struct e2b_sbx *s, const char *b, size_t n)
{
	if (s->out_off == s->out_len)
		s->out_off = s->out_len = 0;
	if (s->out_len + n + 1 > s->out_cap) {
		size_t cap = s->out_cap ? s->out_cap : 4096;
		while (cap < s->out_len + n + 1)
			cap *= 2;
		char *p = realloc(s->out, cap);
		if (!p)
			return -1;
		s->out = p;
		s->out_cap = cap;
	}
	memcpy(s->out + s->out_len, b, n);
	s->out[s->out_len + n] = '\n';
	s->out_len += n + 1;
	return 0;
}

long e2b_sbx_request(struct e2b_sbx *s, json_object *req, e2b_sbx_fn fn, void *arg)
{
	struct e2b_pending *p = s->fd >= 0 && !s->dead ? calloc(1, sizeof(*p)) : NULL;
	if (!p) {
		json_object_put(req);
		return -1;
	}
	p->h = ++s->srv->next_h;
	p->fn = fn;
	p->arg = arg;
	char id[32];
	e2b_sbx_req_id(p->h, id, sizeof(id));
	json_object_object_add(req, "id", json_object_new_string(id));
	size_t n;
	const char *line = json_object_to_json_string_length(req, JSON_C_TO_STRING_PLAIN, &n);
	int r = link_line(s, line, n);
	json_object_put(req);
	if (r < 0) {
		free(p);
		return -1;
	}
	p->next = s->pending;
	s->pending = p;
	return p->h;
}

void e2b_sbx_forget(struct e2b_sbx *s, long h)
{
	for (struct e2b_pending *p = s->pending; p; p = p->next)
		if (p->h == h)
			p->fn = NULL;
}

/* The link broken or the sandbox gone: every request told. */
static void link_down(struct e2b_sbx *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->dead = true;
	while (s->pending) {
		struct e2b_pending *p = s->pending;
		s->pending = p->next;
		if (p->fn)
			p->fn(p->arg, NULL, true);
		free(p);
	}
}

static void on_line(struct e2b_sbx *s, char *line, size_t n)
{
	json_object *m = json_tokener_parse(line);
	(void)n;
	if (!m || !json_object_is_type(m, json_type_object)) {
		json_object_put(m);
		return;
	}
	const char *type = json_object_get_string(json_object_object_get(m, "type"));
	json_object *idv = json_object_object_get(m, "id");
	const char *id =
		json_object_is_type(idv, json_type_string) ? json_object_get_string(idv) : NULL;
	if (type && !strcmp(type, "hello"))
		s->hello = true;
	long h = id && id[0] == 'e' ? strtol(id + 1, NULL, 10) : 0;
	for (struct e2b_pending **pp = &s->pending; h > 0 && *pp; pp = &(*pp)->next) {
		struct e2b_pending *p = *pp;
		if (p->h != h)
			continue;
		/* every message ends its request but a command's output and a
		 * watch's events (a watch ends with its result) */
		bool last = !type || (strcmp(type, "output") && strcmp(type, "output_dropped") &&
				      strcmp(type, "event"));
		if (last)
			*pp = p->next;
		if (p->fn)
			p->fn(p->arg, m, last);
		if (last)
			free(p);
		break;
	}
	json_object_put(m);
}

int e2b_sbx_poll_fd(struct e2b_sbx *s, short *events)
{
	*events = POLLIN;
	if (s->creating)
		return s->create_fd;
	if (s->out_off < s->out_len)
		*events |= POLLOUT;
	return s->fd;
}

void e2b_sbx_io(struct e2b_sbx *s, short revents)
{
	if (s->creating) {
		create_read(s);
		return;
	}
	if (s->fd < 0)
		return;
	while ((revents & POLLOUT) && s->out_off < s->out_len) {
		ssize_t n = send(s->fd, s->out + s->out_off, s->out_len - s->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return link_down(s);
		if (n < 0)
			break;
		s->out_off += (size_t)n;
	}
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	if (s->in_cap - s->in_len < 65536) {
		size_t cap = s->in_cap ? s->in_cap * 2 : 262144;
		char *p = cap <= LINK_LINE_MAX + 262144 ? realloc(s->in, cap) : NULL;
		if (!p)
			return link_down(s); /* a line over its bound */
		s->in = p;
		s->in_cap = cap;
	}
	ssize_t n = recv(s->fd, s->in + s->in_len, s->in_cap - s->in_len, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return link_down(s);
	if (n < 0)
		return;
	size_t start = 0, scanned = s->in_len;
	s->in_len += (size_t)n;
	for (;;) {
		char *nl = memchr(s->in + scanned, '\n', s->in_len - scanned);
		if (!nl)
			break;
		*nl = 0;
		on_line(s, s->in + start, (size_t)(nl - s->in - start));
		if (s->fd < 0)
			return;
		start = scanned = (size_t)(nl - s->in) + 1;
	}
	memmove(s->in, s->in + start, s->in_len - start);
	s->in_len -= start;
}

/* ---- life ---- */

static void sbx_free(struct e2b_sbx *s)
{
	link_down(s);
	if (s->procs_free)
		s->procs_free(s);
	bool shared = false; /* with its forks, or its parent (a fork's) */
	for (struct e2b_sbx *t = s->srv->sbxs; t && s->workdir[0]; t = t->next)
		shared |= t != s && !strcmp(t->workdir, s->workdir);
	if (s->workdir[0] && !shared)
		layer_remove_tree_at(AT_FDCWD,
				     s->workdir); /* written by the sandbox: no symlink followed */
	json_object_put(s->metadata);
	json_object_put(s->envs);
	free(s->in);
	free(s->out);
	free(s);
}

int e2b_sbx_ctl(struct e2b_sbx *s, const char *word, struct ab_error *err)
{
	json_object *reply = NULL, *v;
	int r = detach_ctl(s->srv->root, s->id, word, &reply, err);
	/* an answer may be a refusal ({"type":"error"}: no freezer...) */
	if (r == 0 && json_object_object_get_ex(reply, "type", &v) &&
	    !strcmp(json_object_get_string(v), "error")) {
		json_object_object_get_ex(reply, "message", &v);
		r = ab_error_plain(err, EPERM, "%s: %s", word,
				   v ? json_object_get_string(v) : "refused");
	}
	json_object_put(reply);
	return r;
}

void e2b_sbx_kill(struct e2b_sbx *s)
{
	struct ab_error err = {0};
	if (!s->dead)
		e2b_sbx_ctl(s, "stop", &err);
	link_down(s); /* freed by e2b_sbxs_expire, outside the loop's walk */
}

void e2b_sbxs_expire(struct e2b *srv, long long now)
{
	for (struct e2b_sbx *s = srv->sbxs; s; s = s->next) {
		if (s->dead || s->creating || s->paused || s->retired || !s->end_ms ||
		    now < s->end_ms)
			continue;
		struct ab_error err = {0};
		if (s->auto_pause && e2b_sbx_ctl(s, "pause", &err) == 0)
			s->paused = true;
		else
			e2b_sbx_kill(s);
	}
	for (struct e2b_sbx **ps = &srv->sbxs; *ps;) {
		struct e2b_sbx *s = *ps;
		if (s->dead) {
			*ps = s->next;
			sbx_free(s);
		} else {
			ps = &s->next;
		}
	}
}

void e2b_sbxs_end(struct e2b *srv)
{
	for (struct e2b_sbx *s = srv->sbxs; s; s = s->next) {
		if (s->creating) { /* its maker's result, to stop what it made */
			struct pollfd pf = {.fd = s->create_fd, .events = POLLIN};
			poll(&pf, 1, -1);
			create_read(s);
		}
		e2b_sbx_kill(s);
	}
	e2b_sbxs_expire(srv, 0);
}

/* The child that makes the sandbox (detach_create, which forks the
 * launcher and waits until the sandbox is ready): it keeps none of the
 * server's fds but the pipe its result goes on (fd 3), so that the
 * launcher holds no client's connection nor the listening socket, and
 * the server's loop waits for no sandbox. Its result: "0", or "-1 why". */
static void create_child(struct e2b_sbx *s, int wfd)
{
	if (dup2(wfd, 3) < 0)
		_exit(1);
	close_range(4, ~0u, 0);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	/* the workspace at /home/user too, E2B's home and commands' cwd */
	char bind[sizeof(s->workdir) + sizeof(E2B_HOME) + 1];
	snprintf(bind, sizeof(bind), "%s:%s", s->workdir, E2B_HOME);
	/* overlay: what snapshots and forks stand on (checkpoints.md); the
	 * bind of the workspace is a link to /workspace then (view/overlay.c) */
	char *argv[] = {"serve", "--workspace", s->workdir, "--workspace-mode", "overlay", "--bind",
			bind,	 "--timeout",	"none",	    "--max-timeout",	"none",	   NULL};
	struct ab_config cfg;
	struct ab_error err = {0};
	bool help = false;
	ab_config_init(&cfg);
	int r = ab_config_parse_serve(&cfg, 11, argv, &help, &err);
	struct detach_opts o = {.name = s->id,
				.idle_timeout_ms = E2B_ORPHAN_MS,
				.idle_release_ms = DETACH_IDLE_RELEASE_MS,
				.fork = detach_fork_make}; /* snapshots, forks */
	char id[DETACH_ID_MAX + 1];
	if (r == 0)
		r = detach_create(&cfg, &o, id, sizeof(id), &err);
	char msg[sizeof(err.msg) + 16];
	int n = snprintf(msg, sizeof(msg), "%d %s", r < 0 ? -1 : 0, r < 0 ? err.msg : "");
	ssize_t w = write(3, msg, (size_t)n);
	_exit(w == n ? 0 : 1);
}

/* The maker has ended (its pidfd is readable): its result from the pipe
 * (which the launcher it forked may still hold open, so no end of file
 * comes), the link dialled, the caller told. */
static void create_read(struct e2b_sbx *s)
{
	struct pollfd pf = {.fd = s->create_fd, .events = POLLIN};
	if (poll(&pf, 1, 0) <= 0)
		return; /* not yet */
	ssize_t n;
	while ((n = read(s->create_pipe, s->create_msg + s->create_len,
			 sizeof(s->create_msg) - 1 - s->create_len)) > 0)
		s->create_len += (size_t)n;
	close(s->create_fd);
	close(s->create_pipe);
	s->create_fd = s->create_pipe = -1;
	while (waitpid(s->create_pid, NULL, 0) < 0 && errno == EINTR)
		;
	s->creating = false;
	s->create_msg[s->create_len] = 0;
	struct ab_error err = {0};
	const char *why = NULL;
	if (strncmp(s->create_msg, "0 ", 2) != 0) {
		why = s->create_len > 3 ? s->create_msg + 3 : "the sandbox's maker failed";
	} else {
		s->fd = detach_dial(s->srv->root, s->id, "sock", &err);
		if (s->fd < 0) {
			struct ab_error e2 = {0};
			e2b_sbx_ctl(s, "stop", &e2);
			why = err.msg;
		} else {
			fcntl(s->fd, F_SETFL, O_NONBLOCK | fcntl(s->fd, F_GETFL));
		}
	}
	if (why)
		s->dead = true; /* freed by e2b_sbxs_expire */
	if (s->created)
		s->created(s->created_arg, s, why);
}

struct e2b_sbx *e2b_sbx_adopt(struct e2b_sbx *parent, const char *id, const struct e2b_fork_opts *o,
			      struct ab_error *err)
{
	struct e2b *srv = parent->srv;
	struct e2b_sbx *s = calloc(1, sizeof(*s));
	int fd = s ? detach_dial(srv->root, id, "sock", err) : -ENOMEM;
	if (fd < 0) {
		struct ab_error e2 = {0};
		json_object *reply = NULL;
		detach_ctl(srv->root, id, "stop", &reply, &e2);
		json_object_put(reply);
		if (!s)
			ab_error_set(err, ENOMEM, "e2b: a sandbox");
		free(s);
		return NULL;
	}
	s->srv = srv;
	s->fd = fd;
	s->create_fd = s->create_pipe = -1;
	fcntl(s->fd, F_SETFL, O_NONBLOCK | fcntl(s->fd, F_GETFL));
	snprintf(s->id, sizeof(s->id), "%s", id);
	e2b_random_hex(s->token, E2B_KEY_LEN);
	memcpy(s->workdir, parent->workdir, sizeof(s->workdir));
	snprintf(s->template_id, sizeof(s->template_id), "%s", o->template_id);
	s->metadata = o->metadata ? json_object_get(o->metadata) : NULL;
	s->envs = o->envs ? json_object_get(o->envs) : NULL;
	s->started_ms = e2b_now_ms();
	s->end_ms = s->started_ms + o->secs * 1000;
	s->next = srv->sbxs;
	srv->sbxs = s;
	return s;
}

int e2b_sbx_create(struct e2b *srv, e2b_created_fn done, void *arg, struct e2b_sbx **out,
		   struct ab_error *err)
{
	struct e2b_sbx *s = calloc(1, sizeof(*s));
	if (!s)
		return ab_error_set(err, ENOMEM, "e2b: a sandbox");
	s->srv = srv;
	s->fd = s->create_fd = s->create_pipe = -1;
	char hex[21];
	e2b_random_hex(hex, 20);
	snprintf(s->id, sizeof(s->id), "i%s", hex);
	e2b_random_hex(s->token, E2B_KEY_LEN);
	int n = snprintf(s->workdir, sizeof(s->workdir), "%s/%s", srv->workroot, s->id);
	int pfd[2] = {-1, -1};
	if (n < 0 || (size_t)n >= sizeof(s->workdir) || mkdir(s->workdir, 0700) < 0) {
		int r = ab_error_set(err, errno, "e2b: cannot make %s", s->workdir);
		s->workdir[0] = 0;
		sbx_free(s);
		return r;
	}
	pid_t pid = pipe2(pfd, O_CLOEXEC) < 0 ? -1 : fork();
	if (pid == 0)
		create_child(s, pfd[1]);
	if (pid < 0) {
		int r = ab_error_set(err, errno, "e2b: cannot start the sandbox's maker");
		if (pfd[0] >= 0) {
			close(pfd[0]);
			close(pfd[1]);
		}
		sbx_free(s);
		return r;
	}
	close(pfd[1]);
	s->create_pipe = pfd[0];
	s->create_pid = pid;
	s->create_fd = (int)syscall(SYS_pidfd_open, pid, 0);
	fcntl(s->create_pipe, F_SETFL, O_NONBLOCK);
	if (s->create_fd < 0) { /* no pidfd (Linux < 5.3): wait for the maker here */
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		s->create_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* readable: done */
	}
	s->creating = true;
	s->created = done;
	s->created_arg = arg;
	s->started_ms = e2b_now_ms();
	s->next = srv->sbxs;
	srv->sbxs = s;
	*out = s;
	return 0;
}
