/* agentbox create, exec, connect, ls, rm: the command lines of detached
 * sandboxes (docs/detached.md). */
#include <errno.h>
#include <dirent.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "detach/detach.h"
#include "util/error.h"
#include "util/output.h"
#include "util/signals.h"
#include "util/util.h"

/* A line from the launcher is at most this long (a result with both
 * streams at a --max-output of 16M, escaped). */
#define LINE_MAX_BYTES (256u << 20)

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("agentbox: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return AB_EXIT_FAILURE;
}

static bool is_help(const char *a)
{
	return !strcmp(a, "--help") || !strcmp(a, "-h");
}

/* ---- create ---- */

static const char usage_create[] =
	"Usage: agentbox create [--name NAME] [--idle-timeout DURATION [--idle-pause]]\n"
	"                       [--ttl DURATION]\n"
	"                       [OPTIONS of agentbox serve]\n"
	"\n"
	"Make a sandbox that outlives its caller: its launcher runs detached and\n"
	"serves the protocol (docs/protocol.md) on a unix socket only you can reach.\n"
	"Returns once the sandbox is ready and prints its id: NAME when given\n"
	"(unique among your sandboxes), else a new one. docs/detached.md.\n"
	"\n"
	"  --name NAME              1 to 63 letters, digits, '.', '_', '-'\n"
	"  --idle-timeout DURATION  end it after DURATION with no client attached\n"
	"                           and no command running or queued\n"
	"  --idle-pause             pause it then instead (the cgroup freezer); the\n"
	"                           next client resumes it\n"
	"  --ttl DURATION           end it DURATION after it was made, whatever runs\n"
	"\n"
	"Then: agentbox exec ID, agentbox connect ID, agentbox ls, agentbox pause ID,\n"
	"agentbox resume ID, agentbox rm ID.\n";

int detach_cli_create(int argc, char **argv)
{
	struct detach_opts o = {0};
	char **rest = calloc((size_t)argc + 1, sizeof(char *));
	int n = 0;
	if (!rest)
		return fail("out of memory");
	rest[n++] = argv[0];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		unsigned long long *dur = !strcmp(a, "--idle-timeout") ? &o.idle_timeout_ms
					  : !strcmp(a, "--ttl")	       ? &o.ttl_ms
								       : NULL;
		if (is_help(a)) {
			free(rest);
			fputs(usage_create, stdout);
			return 0;
		}
		if (!strcmp(a, "--idle-pause")) {
			o.idle_pause = true;
			continue;
		}
		if (!dur && strcmp(a, "--name") != 0) {
			rest[n++] = argv[i];
			continue;
		}
		if (i + 1 >= argc) {
			free(rest);
			return fail("create: %s needs a value", a);
		}
		if (!dur) {
			o.name = argv[++i];
		} else if (ab_parse_duration(argv[++i], dur) < 0 || *dur == 0) {
			free(rest);
			return fail("create: %s '%s': not a duration (500ms, 30s, 10m, 1h)", a,
				    argv[i]);
		}
	}
	if (o.idle_pause && !o.idle_timeout_ms) {
		free(rest);
		return fail("create: --idle-pause pauses at the idle timeout: give --idle-timeout");
	}
	struct ab_config cfg;
	struct ab_error err = {0};
	bool help = false;
	ab_config_init(&cfg);
	int r = ab_config_parse_serve(&cfg, n, rest, &help, &err);
	char id[DETACH_ID_MAX + 1];
	if (r == 0)
		r = detach_create(&cfg, &o, id, sizeof(id), &err);
	free(rest);
	ab_config_free(&cfg);
	if (r < 0)
		return fail("create: %s", err.msg);
	printf("%s\n", id);
	return 0;
}

/* ---- lines from the launcher ---- */

struct lines {
	int fd;
	int sigfd; /* readable: *sig, and next_line returns NULL (-1: none) */
	bool sig;
	char *buf;
	size_t len, cap;
	bool eof;
};

/* The next line as JSON (NULL at the end, or on a line that is not an
 * object: *bad then). Blocks: the launcher answers or hangs up. */
static json_object *next_line(struct lines *l, bool *bad)
{
	*bad = false;
	for (;;) {
		char *nl = l->len ? memchr(l->buf, '\n', l->len) : NULL;
		if (nl) {
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
		if (l->eof)
			return NULL;
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
		if (!p[0].revents)
			continue;
		if (l->cap - l->len < 65536) {
			size_t cap = l->cap ? l->cap * 2 : 1 << 20;
			char *q = cap <= LINE_MAX_BYTES ? realloc(l->buf, cap) : NULL;
			if (!q) {
				*bad = true;
				return NULL;
			}
			l->buf = q;
			l->cap = cap;
		}
		ssize_t r = read(l->fd, l->buf + l->len, l->cap - l->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			l->eof = true;
		else
			l->len += (size_t)r;
	}
}

static const char *str_of(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

static int write_all(int fd, const char *p, size_t n)
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
static int read_hello(struct lines *l, const char *id)
{
	bool bad;
	json_object *h = next_line(l, &bad);
	const char *type = h ? str_of(h, "type") : NULL;
	int r = 0;
	if (!type || strcmp(type, "hello") != 0) {
		const char *msg = h ? str_of(h, "message") : NULL;
		r = fail("sandbox %s: %s", id, msg ? msg : "no hello from its launcher");
	}
	json_object_put(h);
	return r;
}

static int dial(const char *id, const char *leaf, char *root, size_t size)
{
	struct ab_error err = {0};
	if (!detach_id_valid(id))
		return fail("'%s' is not a sandbox id (agentbox ls lists them)", id), -1;
	int r = detach_root(root, size, false, &err);
	if (r == -ENOENT)
		return fail("no sandbox %s (agentbox ls lists them)", id), -1;
	int fd = r < 0 ? r : detach_dial(root, id, leaf, &err);
	if (fd < 0)
		return fail("%s", err.msg), -1;
	return fd;
}

/* ---- exec ---- */

static const char usage_exec[] =
	"Usage: agentbox exec [-i] [--timeout DURATION] ID [--] COMMAND [ARG...]\n"
	"       agentbox exec [-i] [--timeout DURATION] ID -c 'SHELL STRING'\n"
	"\n"
	"Run COMMAND in sandbox ID (agentbox create) as agentbox run would: its\n"
	"stdout and stderr pass through, the exit status is the command's (124 timed\n"
	"out, 128+N killed by signal N, 125 agentbox failed). SIGINT, SIGTERM and\n"
	"SIGHUP cancel it. Files and background processes stay in the sandbox.\n"
	"\n"
	"  -i                  pass stdin (read to its end first, UTF-8 text, at\n"
	"                      most 6 MiB); without it the command's stdin is\n"
	"                      /dev/null\n"
	"  --timeout DURATION  the command's timeout (default: the sandbox's)\n";

static int b64val(int c)
{
	const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(t, c) : NULL;
	return p ? (int)(p - t) : -1;
}

/* Decode base64 s in place; its length. */
static size_t b64_decode(char *s)
{
	size_t o = 0;
	unsigned acc = 0;
	int bits = 0;
	for (const char *p = s; *p && *p != '='; p++) {
		int v = b64val((unsigned char)*p);
		if (v < 0)
			continue;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			s[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	return o;
}

/* stdin into the request, when -i: read whole, checked to be UTF-8. */
static int add_stdin(json_object *req)
{
	size_t cap = 6u << 20, n = 0;
	char *buf = malloc(cap + 1);
	if (!buf)
		return fail("exec: out of memory");
	for (;;) {
		ssize_t r = read(STDIN_FILENO, buf + n, cap + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			return fail("exec: -i: cannot read stdin: %s", strerror(errno));
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > cap) {
			free(buf);
			return fail("exec: -i: stdin is over 6 MiB: write it to a file in the "
				    "workspace instead");
		}
	}
	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq_len((const unsigned char *)buf + i, n - i);
		if (!k) {
			free(buf);
			return fail("exec: -i: stdin is not UTF-8 text (byte %zu)", i);
		}
		i += k;
	}
	json_object_object_add(req, "stdin", json_object_new_string_len(buf, (int)n));
	free(buf);
	return 0;
}

/* The request of exec's command line from argv[i] on (after ID). */
static json_object *exec_request(int argc, char **argv, int i, const char *timeout)
{
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("exec"));
	json_object_object_add(req, "id", json_object_new_string("exec"));
	if (i + 2 == argc && !strcmp(argv[i], "-c")) {
		json_object_object_add(req, "command", json_object_new_string(argv[i + 1]));
	} else {
		if (i < argc && !strcmp(argv[i], "--"))
			i++;
		if (i >= argc || !strcmp(argv[i], "-c")) {
			json_object_put(req);
			fail("exec: no command (agentbox exec ID -- COMMAND, or -c 'STRING' "
			     "alone)");
			return NULL;
		}
		json_object *a = json_object_new_array();
		for (; i < argc; i++)
			json_object_array_add(a, json_object_new_string(argv[i]));
		json_object_object_add(req, "argv", a);
	}
	json_object_object_add(req, "stream", json_object_new_boolean(true));
	json_object_object_add(req, "encoding", json_object_new_string("base64"));
	json_object_object_add(req, "max_output", json_object_new_int(1024));
	unsigned long long ms = 0;
	if (timeout && (ab_parse_duration(timeout, &ms) < 0 || ms == 0)) {
		json_object_put(req);
		fail("exec: --timeout '%s': not a duration (500ms, 30s, 10m, 1h)", timeout);
		return NULL;
	}
	if (ms)
		json_object_object_add(req, "timeout", json_object_new_double((double)ms / 1000));
	return req;
}

static int send_line(int fd, json_object *o)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	int r = write_all(fd, s, strlen(s));
	if (r == 0)
		r = write_all(fd, "\n", 1);
	return r;
}

/* Output to our stdout and stderr until the result: its exit code. */
static int exec_relay(struct lines *l, const char *id)
{
	bool cancelled = false, bad;
	for (;;) {
		json_object *m = next_line(l, &bad);
		if (!m && l->sig && !cancelled) {
			l->sig = false;
			cancelled = true;
			json_object *c = json_tokener_parse(
				"{\"op\":\"cancel\",\"id\":\"cancel\",\"target\":\"exec\"}");
			send_line(l->fd, c);
			json_object_put(c);
			continue;
		}
		if (!m && (l->sig || bad))
			continue;
		if (!m)
			return fail("sandbox %s: its launcher hung up before the result", id);
		const char *type = str_of(m, "type"), *mid = str_of(m, "id");
		int code = -1;
		if (!mid || strcmp(mid, "exec") != 0) {
			/* another request's (the cancel's ok) */
		} else if (!strcmp(type, "output")) {
			json_object *d;
			if (json_object_object_get_ex(m, "data", &d)) {
				char *data = strdup(json_object_get_string(d));
				const char *st = str_of(m, "stream");
				if (data) {
					size_t n = b64_decode(data);
					write_all(st && !strcmp(st, "stderr") ? 2 : 1, data, n);
				}
				free(data);
			}
		} else if (!strcmp(type, "result")) {
			json_object *e;
			code = json_object_object_get_ex(m, "exit_code", &e)
				       ? json_object_get_int(e)
				       : AB_EXIT_FAILURE;
		} else if (!strcmp(type, "error")) {
			code = fail("sandbox %s: %s", id, str_of(m, "message"));
		}
		json_object_put(m);
		if (code >= 0)
			return code;
	}
}

int detach_cli_exec(int argc, char **argv)
{
	bool in = false;
	const char *timeout = NULL;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (is_help(argv[i])) {
			fputs(usage_exec, stdout);
			return 0;
		} else if (!strcmp(argv[i], "-i")) {
			in = true;
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			timeout = argv[++i];
		} else if (!strcmp(argv[i], "-t")) {
			return fail("exec: -t: agentbox exec has no terminal mode yet; run the "
				    "command without -t");
		} else {
			return fail("exec: unknown option '%s' (try 'agentbox exec --help')",
				    argv[i]);
		}
	}
	if (i >= argc)
		return fail("exec: which sandbox? (agentbox exec ID -- COMMAND)");
	const char *id = argv[i++];
	json_object *req = exec_request(argc, argv, i, timeout);
	if (!req || (in && add_stdin(req) < 0)) {
		json_object_put(req);
		return AB_EXIT_FAILURE;
	}
	char root[PATH_MAX];
	cleanup_fd int fd = dial(id, "exec", root, sizeof(root));
	signal(SIGPIPE, SIG_IGN);
	cleanup_fd int sigfd = ab_ending_signals_fd();
	struct lines l = {.fd = fd, .sigfd = sigfd};
	int code = fd < 0 ? AB_EXIT_FAILURE : read_hello(&l, id);
	if (code == 0 && send_line(fd, req) < 0)
		code = fail("sandbox %s: cannot send the request: %s", id, strerror(errno));
	if (code == 0)
		code = exec_relay(&l, id);
	json_object_put(req);
	free(l.buf);
	return code;
}

/* ---- connect ---- */

static const char usage_connect[] =
	"Usage: agentbox connect ID\n"
	"\n"
	"Bridge stdin and stdout to sandbox ID's protocol (docs/protocol.md), as\n"
	"agentbox serve speaks it: a client that runs a command reaches the sandbox\n"
	"through any transport (ssh HOST agentbox connect ID, kubectl exec -i POD --\n"
	"agentbox connect ID). End of stdin ends the connection once the answers to\n"
	"its requests are written, never the sandbox (a shutdown request does).\n"
	"One client at a time; results that came while none was attached are sent\n"
	"right after the hello.\n";

int detach_cli_connect(int argc, char **argv)
{
	if (argc == 2 && is_help(argv[1])) {
		fputs(usage_connect, stdout);
		return 0;
	}
	if (argc != 2)
		return fail("connect: one sandbox id (agentbox connect ID)");
	char root[PATH_MAX];
	cleanup_fd int fd = dial(argv[1], "sock", root, sizeof(root));
	if (fd < 0)
		return AB_EXIT_FAILURE;
	signal(SIGPIPE, SIG_IGN);
	static char buf[1 << 16];
	bool in_open = true;
	for (;;) {
		/* stdout watched too: a reader gone (its client killed) ends the
		 * connection before a reply is read that it could not take,
		 * so the sandbox keeps it for the next client */
		struct pollfd p[3] = {{.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN},
				      {.fd = fd, .events = POLLIN},
				      {.fd = STDOUT_FILENO, .events = 0}};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			return fail("connect: poll: %s", strerror(errno));
		}
		if (p[2].revents & (POLLERR | POLLHUP | POLLNVAL))
			return 0;
		if (p[1].revents) {
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n <= 0)
				return 0; /* the launcher closed the connection */
			if (write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
				return 0; /* our reader is gone: so is the connection */
		}
		if (p[0].revents) {
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				in_open = false;
				shutdown(fd, SHUT_WR);
			} else if (write_all(fd, buf, (size_t)n) < 0) {
				return 0;
			}
		}
	}
}
