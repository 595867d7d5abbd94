/* The spec a command's shim reads (shim.h: struct shim_spec, argv, the
 * environment, the working directory), in a pipe or a sealed memfd. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/error.h"
#include "session/session.h"
#include "util/util.h"

int command_memfd(const char *name, const void *data, size_t len)
{
	int fd = (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, (const char *)data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			close(fd);
			return -e;
		}
		off += (size_t)n;
	}
	lseek(fd, 0, SEEK_SET);
	fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
	return fd;
}

/* The spec for the shim: through a pipe when it fits in one page (a pipe
 * always holds a page, so the write cannot block; cheaper than a memfd,
 * whose creation, seals and release cost the launcher ~20 us a command),
 * else a sealed memfd. */
static int spec_fd(const void *data, size_t len)
{
	int p[2];
	if (len > 4096)
		return command_memfd("agentbox-spec", data, len);
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	ssize_t n;
	do
		n = write(p[1], data, len);
	while (n < 0 && errno == EINTR);
	int e = n < 0 ? errno : EIO;
	close(p[1]);
	if (n != (ssize_t)len) {
		close(p[0]);
		return -e;
	}
	return p[0];
}

struct buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void buf_add(struct buf *b, const void *data, size_t len)
{
	if (b->oom)
		return;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->len + len)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

static void buf_str(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s) + 1);
}

static bool env_valid_name(const char *s, size_t n)
{
	if (n == 0 ||
	    !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

static bool name_in(char *const *env, const char *name, size_t n)
{
	for (; env && *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return true;
	return false;
}

/* The spec a shim reads: header, argv, the session's environment with
 * the request's additions, the working directory. */
static int build_spec(const struct ab_session *s, const struct ab_exec *x, const char *cwd,
		      uint32_t flags, struct buf *b, struct ab_error *err)
{
	struct shim_spec hdr = {.magic = SHIM_SPEC_MAGIC,
				.flags = flags,
				.seq = s->seq,
				.rows = x->pty ? x->pty_rows : 0,
				.cols = x->pty ? x->pty_cols : 0};
	for (char *const *a = x->argv; *a; a++)
		hdr.argc++;
	buf_add(b, &hdr, sizeof(hdr));
	for (char *const *a = x->argv; *a; a++)
		buf_str(b, *a);
	uint32_t envc = 0;
	for (char *const *e = s->sb.envp; e && *e; e++) {
		size_t n = strcspn(*e, "=");
		if (name_in(x->env, *e, n))
			continue; /* the request sets it */
		buf_str(b, *e);
		envc++;
	}
	for (char *const *e = x->env; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
		if (!eq || !env_valid_name(*e, n))
			return ab_error_plain(err, EINVAL,
					      "env: '%.*s' is not a valid variable name",
					      (int)(n > 64 ? 64 : n), *e);
		bool passed = false;
		for (size_t i = 0; i < s->sb.cfg.n_pass_env; i++)
			passed |= strlen(s->sb.cfg.pass_env[i]) == n &&
				  strncmp(s->sb.cfg.pass_env[i], *e, n) == 0;
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)(n < 255 ? n : 255), *e);
		if (ab_env_name_is_secret(name) && !passed)
			return ab_error_plain(err, EPERM,
					      "env: %s looks like a secret; start the session "
					      "with --pass-env %s to allow it",
					      name, name);
		buf_str(b, *e);
		envc++;
	}
	buf_str(b, cwd);
	memcpy(b->p ? b->p + offsetof(struct shim_spec, envc) : (char *)&hdr, &envc, sizeof(envc));
	if (b->oom)
		return ab_error_set(err, ENOMEM, "starting the command");
	return 0;
}

int command_spec(const struct ab_session *s, const struct ab_exec *x, const char *cwd,
		 uint32_t flags, struct ab_error *err)
{
	struct buf spec = {0};
	int r = build_spec(s, x, cwd, flags, &spec, err);
	if (r == 0 && (r = spec_fd(spec.p, spec.len)) < 0)
		ab_error_set(err, -r, "starting the command");
	free(spec.p);
	return r;
}
